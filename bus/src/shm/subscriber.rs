//! Opening a ring as a subscriber: an observer (lossy) or a reliable consumer.
use std::ops::{Deref, DerefMut};
use std::path::PathBuf;

use super::error::ShmError;
use super::files::{Found, RingDir};
use super::mapping::{Backing, ShmMemory};
use super::options::{check_name, HugepagePolicy, ShmOptions};
use crate::pubsub::Subscriber;
use crate::ring::{AttachError, LayoutError, RingReader, StartAt, HEADER_BYTES};
use crate::sys;

/// What the ring header and the OS say about the publisher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublisherState {
    /// A publisher is attached and its process is running.
    Live {
        /// Its pid.
        pid: u64,
        /// How many publishers have attached to the ring so far.
        epoch: u64,
    },
    /// The publisher closed the ring cleanly; a new one may attach and continue.
    Closed {
        /// How many publishers have attached to the ring so far.
        epoch: u64,
    },
    /// The publisher died without closing; no more messages will come until one reclaims it.
    Dead {
        /// Its pid.
        pid: u64,
        /// How many publishers have attached to the ring so far.
        epoch: u64,
    },
}

/// A subscriber on a shm ring. Derefs to [`Subscriber`] for receiving.
pub struct ShmSubscriber {
    inner: Subscriber<ShmMemory>,
}

impl ShmSubscriber {
    /// The ring file.
    pub fn path(&self) -> &std::path::Path {
        self.inner.reader().memory().path()
    }

    /// What memory the ring lives in.
    pub fn backing(&self) -> &Backing {
        self.inner.reader().memory().backing()
    }

    /// Whether a live consumer holds consumer line `index` of this (reliable) ring: its lock is
    /// held. A syscall: for status and tools, not per message.
    pub fn consumer_alive(&self, index: usize) -> bool {
        super::publisher::consumer_alive(self.inner.reader().memory().file(), index)
    }

    /// Whether any consumer line of this (reliable) ring is held by a live consumer: owned, and
    /// its lock held (a killed consumer leaves the owner word set, never the lock). A syscall
    /// per line: for waiting on a peer and for tools, not per message.
    pub fn has_live_consumer(&self) -> bool {
        self.inner.reader().status().consumers.iter().any(|l| l.owner != 0 && self.consumer_alive(l.index))
    }

    /// Checks whether the publisher is alive (a syscall: call it when idle, not per message).
    pub fn publisher_state(&self) -> PublisherState {
        match self.inner.reader().publisher() {
            (0, epoch) => PublisherState::Closed { epoch },
            (pid, epoch) if sys::process::alive(pid) => PublisherState::Live { pid, epoch },
            (pid, epoch) => PublisherState::Dead { pid, epoch },
        }
    }
}

impl std::fmt::Debug for ShmSubscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmSubscriber")
            .field("stream_id", &self.config().stream_id)
            .field("consumer_line", &self.reader().consumer_index())
            .field("position", &self.position())
            .finish_non_exhaustive()
    }
}

impl Deref for ShmSubscriber {
    type Target = Subscriber<ShmMemory>;
    fn deref(&self) -> &Self::Target {
        &self.inner
    }
}

impl DerefMut for ShmSubscriber {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.inner
    }
}

/// Subscribes to ring `name` as an observer: never slows the publisher; on a lossy ring a lap is
/// reported as a gap. Retryable errors mean the publisher has not created the ring yet.
pub fn open_observer(name: &str, start: StartAt, opts: &ShmOptions) -> Result<ShmSubscriber, ShmError> {
    let mem = map_existing(name, opts)?;
    let path = mem.path().to_owned();
    let reader = RingReader::observer(mem, start).map_err(|source| ShmError::Attach { path, source })?;
    Ok(ShmSubscriber { inner: Subscriber::new(counted(reader, name)) })
}

/// Like [`open_observer`], but the observer keeps no counters record: for tools that look at a
/// ring (`tickbus ring inspect`, `tickbus stat`) without being one of its subscribers.
pub fn open_observer_uncounted(name: &str, start: StartAt, opts: &ShmOptions) -> Result<ShmSubscriber, ShmError> {
    let mem = map_existing(name, opts)?;
    let path = mem.path().to_owned();
    let reader = RingReader::observer(mem, start).map_err(|source| ShmError::Attach { path, source })?;
    Ok(ShmSubscriber { inner: Subscriber::new(reader) })
}

/// Subscribes to reliable ring `name` as a consumer: the publisher waits for it. Takes a free
/// consumer line (or one whose process died) and resumes where that line stopped.
pub fn open_consumer(name: &str, opts: &ShmOptions) -> Result<ShmSubscriber, ShmError> {
    let mem = map_existing(name, opts)?;
    let path = mem.path().to_owned();
    // A line is ours once we hold its lock; the lock dies with us, so a dead consumer's line is
    // free for the next one, and a live one's never is, whatever its pid looks like from here.
    // The lock is taken through a duplicate descriptor of the mapping's open file (same open
    // file description, so the lock lives as long as the mapping's file stays open).
    let file = mem.file().try_clone().map_err(|source| ShmError::Io { what: "locking", path: path.clone(), source })?;
    let mut lock_error = None;
    let claim = |i: usize| match sys::fs::try_lock_range(&file, super::publisher::consumer_lock_offset(i), 1) {
        Ok(held) => held,
        Err(e) => {
            lock_error.get_or_insert(e);
            false
        }
    };
    let reader = RingReader::consumer(mem, sys::process::pid(), claim);
    let reader = reader.map_err(|source| match lock_error.take() {
        Some(source) => ShmError::Io { what: "locking a consumer line of", path: path.clone(), source },
        None => ShmError::Attach { path, source },
    })?;
    Ok(ShmSubscriber { inner: Subscriber::new(counted(reader, name)) })
}

/// The reader with its record in this process's counters file.
fn counted(mut reader: RingReader<ShmMemory>, name: &str) -> RingReader<ShmMemory> {
    let stream = reader.config().stream_id;
    reader.set_counters(crate::counters::register(
        crate::counters::Role::Subscriber,
        crate::counters::Transport::Shm,
        stream,
        name,
    ));
    reader
}

/// Finds (in checked folders, as a checked file) and maps the ring file, hugetlbfs first.
fn map_existing(name: &str, opts: &ShmOptions) -> Result<ShmMemory, ShmError> {
    check_name(name)?;
    let mut searched: Vec<PathBuf> = Vec::new();
    let dirs = [
        (opts.hugepages != HugepagePolicy::Never).then_some((&opts.hugepage_dir, Backing::Hugepages)),
        (opts.hugepages != HugepagePolicy::Required)
            .then(|| (&opts.fallback_dir, Backing::Fallback { reason: "the publisher created it there".into() })),
    ];
    for (dir, backing) in dirs.into_iter().flatten() {
        let path = dir.join(name);
        let file = match RingDir::open(dir, false)? {
            None => None,
            Some(d) => match d.open_ring(name)? {
                Found::File(f) => Some(f),
                Found::Absent => None,
            },
        };
        let Some(file) = file else {
            searched.push(path);
            continue;
        };
        let len =
            file.metadata().map_err(|source| ShmError::Io { what: "inspecting", path: path.clone(), source })?.len();
        if len < HEADER_BYTES as u64 {
            return Err(ShmError::Attach { path, source: AttachError::Layout(LayoutError::NotReady) });
        }
        return ShmMemory::map(file, path, backing);
    }
    Err(ShmError::NotFound { name: name.to_owned(), searched })
}
