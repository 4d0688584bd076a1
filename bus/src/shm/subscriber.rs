//! Opening a ring as a subscriber: an observer (lossy) or a reliable consumer.
use std::ops::{Deref, DerefMut};
use std::path::PathBuf;

use super::error::ShmError;
use super::mapping::{open_file, Backing, ShmMemory};
use super::options::{check_name, HugepagePolicy, ShmOptions};
use crate::pubsub::Subscriber;
use crate::ring::{AttachError, LayoutError, RingReader, StartAt, HEADER_BYTES};
use crate::sys;

/// What the ring header and the OS say about the publisher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublisherState {
    Live {
        pid: u64,
        epoch: u64,
    },
    /// The publisher closed the ring cleanly; a new one may attach and continue.
    Closed {
        epoch: u64,
    },
    /// The publisher died without closing; no more messages will come until one reclaims it.
    Dead {
        pid: u64,
        epoch: u64,
    },
}

/// A subscriber on a shm ring. Derefs to [`Subscriber`] for receiving.
pub struct ShmSubscriber {
    inner: Subscriber<ShmMemory>,
}

impl ShmSubscriber {
    pub fn path(&self) -> &std::path::Path {
        self.inner.reader().memory().path()
    }

    pub fn backing(&self) -> &Backing {
        self.inner.reader().memory().backing()
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
    Ok(ShmSubscriber { inner: Subscriber::new(reader) })
}

/// Subscribes to reliable ring `name` as a consumer: the publisher waits for it. Takes a free
/// consumer line (or one whose process died) and resumes where that line stopped.
pub fn open_consumer(name: &str, opts: &ShmOptions) -> Result<ShmSubscriber, ShmError> {
    let mem = map_existing(name, opts)?;
    let path = mem.path().to_owned();
    let reader = RingReader::consumer(mem, sys::process::pid(), sys::process::alive)
        .map_err(|source| ShmError::Attach { path, source })?;
    Ok(ShmSubscriber { inner: Subscriber::new(reader) })
}

/// Finds and maps the ring file, hugetlbfs first.
fn map_existing(name: &str, opts: &ShmOptions) -> Result<ShmMemory, ShmError> {
    check_name(name)?;
    let mut searched: Vec<PathBuf> = Vec::new();
    let dirs = [
        (opts.hugepages != HugepagePolicy::Never).then(|| (opts.hugepage_dir.join(name), Backing::Hugepages)),
        (opts.hugepages != HugepagePolicy::Required).then(|| {
            (opts.fallback_dir.join(name), Backing::Fallback { reason: "the publisher created it there".into() })
        }),
    ];
    for (path, backing) in dirs.into_iter().flatten() {
        if !path.exists() {
            searched.push(path);
            continue;
        }
        let file = open_file(&path, false)?;
        let len =
            file.metadata().map_err(|source| ShmError::Io { what: "inspecting", path: path.clone(), source })?.len();
        if len < HEADER_BYTES as u64 {
            return Err(ShmError::Attach { path, source: AttachError::Layout(LayoutError::NotReady) });
        }
        return ShmMemory::map(file, path, backing);
    }
    Err(ShmError::NotFound { name: name.to_owned(), searched })
}
