//! Opening a ring as its one publisher: create it, or reopen and reclaim it.
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::error::ShmError;
use super::files::{Found, RingDir};
use super::mapping::{file_bytes, Backing, ShmMemory};
use super::options::{check_name, HugepagePolicy, ShmOptions};
use crate::counters::{self, Role, Transport};
use crate::pubsub::Publisher;
use crate::ring::{LayoutError, RingConfig, RingWriter, HEADER_BYTES};
use crate::sys;

/// One consumer line of a reliable ring as the publisher sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerStatus {
    /// Which line this is.
    pub index: usize,
    /// Everything below this position has been consumed.
    pub position: u64,
    /// The owner's pid; 0 if no consumer is attached.
    pub pid: u64,
    /// Whether its owner is still running.
    pub alive: bool,
}

/// A publisher on a shm ring. Derefs to [`Publisher`] for sending.
pub struct ShmPublisher {
    inner: Publisher<ShmMemory>,
    reclaimed_from: Option<u64>,
    backing: Backing,
    path: PathBuf,
}

impl ShmPublisher {
    /// Where the ring file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Hugepages or the fallback (and why).
    pub fn backing(&self) -> &Backing {
        &self.backing
    }

    /// Every consumer line of a reliable ring, with whether its owner is alive. Syscalls: call it
    /// after `Full`, not per message. A line with no owner, or a dead one, is where the
    /// publisher is waiting for a consumer to (re)attach.
    pub fn consumer_status(&self) -> Vec<ConsumerStatus> {
        let file = self.inner.writer().memory().file();
        self.inner
            .writer()
            .consumer_lines()
            .map(|(index, position, pid)| ConsumerStatus { index, position, pid, alive: consumer_alive(file, index) })
            .collect()
    }

    /// The pid of a previous publisher that died without closing, if this one took over its ring.
    pub fn reclaimed_from(&self) -> Option<u64> {
        self.reclaimed_from
    }
}

impl std::fmt::Debug for ShmPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmPublisher")
            .field("path", &self.path())
            .field("stream_id", &self.config().stream_id)
            .field("mode", &self.config().mode)
            .field("position", &self.position())
            .finish_non_exhaustive()
    }
}

impl Deref for ShmPublisher {
    type Target = Publisher<ShmMemory>;
    fn deref(&self) -> &Self::Target {
        &self.inner
    }
}

impl DerefMut for ShmPublisher {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.inner
    }
}

/// Byte of the ring file whose lock says consumer line `index` is held: its first byte. The
/// lock is an open-file-description lock (`F_OFD_SETLK`), which the kernel drops when the
/// consumer's process dies (zombies hold no files) and which works across pid namespaces, where
/// a pid in the line would mean nothing.
pub(crate) fn consumer_lock_offset(index: usize) -> u64 {
    (crate::ring::layout::consumer_position_word(index) * 8) as u64
}

/// Whether a live consumer holds line `index` (its lock is held by another open file).
pub(crate) fn consumer_alive(file: &std::fs::File, index: usize) -> bool {
    sys::fs::range_locked(file, consumer_lock_offset(index), 1).unwrap_or(false)
}

/// Opens ring `name` as its publisher, creating it with `cfg` if it does not exist. An existing
/// ring must have `cfg`'s layout; its stream continues where the last publisher stopped.
pub fn open_publisher(name: &str, cfg: &RingConfig, opts: &ShmOptions) -> Result<ShmPublisher, ShmError> {
    check_name(name)?;
    let huge = opts.hugepage_dir.join(name);
    cfg.validate().map_err(|source| ShmError::Layout { path: huge.clone(), source })?;

    if opts.hugepages != HugepagePolicy::Never {
        if let Some(dir) = RingDir::open(&opts.hugepage_dir, false)? {
            if let Found::File(f) = dir.open_ring(name)? {
                return open_at(f, &huge, Backing::Hugepages, cfg);
            }
        }
    }
    if opts.hugepages != HugepagePolicy::Required {
        if let Some(dir) = RingDir::open(&opts.fallback_dir, false)? {
            if let Found::File(f) = dir.open_ring(name)? {
                let reason = "an existing ring on /dev/shm was reopened".to_owned();
                return open_at(f, &opts.fallback_dir.join(name), Backing::Fallback { reason }, cfg);
            }
        }
    }
    let reason = match opts.hugepages {
        HugepagePolicy::Never => "hugepages disabled by HugepagePolicy::Never".to_owned(),
        _ => match hugetlbfs_problem(&opts.hugepage_dir) {
            None => {
                let dir = RingDir::open(&opts.hugepage_dir, true)?.expect("created");
                match open_at(dir.open_or_create_ring(name)?, &huge, Backing::Hugepages, cfg) {
                    Ok(p) => return Ok(p),
                    Err(ShmError::Io { what: "mapping", source, .. }) => {
                        let _ = dir.unlink(name);
                        format!(
                            "mapping {} bytes of hugepages failed ({source}); HugePages_Free = {}",
                            file_bytes(cfg.ring_bytes()),
                            sys::fs::free_hugepages().map_or("unknown".into(), |n| n.to_string())
                        )
                    }
                    Err(e) => return Err(e),
                }
            }
            Some(reason) => reason,
        },
    };
    if opts.hugepages == HugepagePolicy::Required {
        return Err(ShmError::HugepagesUnavailable { path: huge, reason });
    }
    if opts.hugepages == HugepagePolicy::Preferred {
        log::warn!(
            "ring {name:?} falls back to {} on 4 KiB pages: {reason}. \
             Expect TLB misses; reserve hugepages (echo 64 > /proc/sys/vm/nr_hugepages; mount -t hugetlbfs none /dev/hugepages)",
            opts.fallback_dir.display()
        );
    }
    let dir = RingDir::open(&opts.fallback_dir, true)?.expect("created");
    open_at(dir.open_or_create_ring(name)?, &opts.fallback_dir.join(name), Backing::Fallback { reason }, cfg)
}

/// Why `dir` cannot hold hugepage rings, or None if it can (also `tickbus doctor`'s test).
pub(crate) fn hugetlbfs_problem(dir: &Path) -> Option<String> {
    let mount = dir.ancestors().find(|p| p.exists())?;
    match sys::fs::is_hugetlbfs(mount) {
        Ok(true) => None,
        Ok(false) => Some(format!("{} is not on a hugetlbfs mount", mount.display())),
        Err(e) => Some(format!("cannot statfs {}: {e}", mount.display())),
    }
}

/// Becomes the publisher of the (checked) ring file `file` at `path`, under its lock.
fn open_at(file: std::fs::File, path: &Path, backing: Backing, cfg: &RingConfig) -> Result<ShmPublisher, ShmError> {
    if file.try_lock().is_err() {
        let pid = peek_publisher_pid(&file);
        return Err(ShmError::PublisherActive { path: path.to_owned(), pid });
    }
    let len =
        file.metadata().map_err(|source| ShmError::Io { what: "inspecting", path: path.to_owned(), source })?.len();
    let need = file_bytes(cfg.ring_bytes());
    let mismatch = |existing: RingConfig| ShmError::LayoutMismatch {
        path: path.to_owned(),
        existing: Box::new(existing),
        requested: Box::new(*cfg),
    };
    if len < need && len >= HEADER_BYTES as u64 {
        // An initialised ring smaller than requested has another layout (or layout version, or
        // is not a ring): say so before touching it.
        match read_existing_config(&file) {
            Some(Ok(existing)) => return Err(mismatch(existing)),
            Some(Err(source)) => return Err(ShmError::Layout { path: path.to_owned(), source }),
            None => {}
        }
    }
    if len < need {
        // New file, or a creator died before sizing it; nothing was ever published in it.
        file.set_len(need).map_err(|source| ShmError::Io { what: "sizing", path: path.to_owned(), source })?;
    }
    let mem = ShmMemory::map(file, path.to_owned(), backing.clone())?;
    // SAFETY: we hold the ring file's exclusive flock, which every shm publisher takes before it
    // writes, so no other writer of this ring is live in any process.
    let writer = unsafe { RingWriter::open_or_reclaim(mem, cfg, sys::process::pid(), unix_ns()) }.map_err(
        |source| match source {
            LayoutError::Mismatch { existing } => mismatch(existing),
            source => ShmError::Layout { path: path.to_owned(), source },
        },
    )?;
    let mut writer = writer;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stream = writer.config().stream_id;
    writer.set_counters(counters::register(Role::Publisher, Transport::Shm, stream, &name));
    let reclaimed_from = writer.previous_publisher();
    if let Some(prev) = reclaimed_from {
        log::warn!("ring {} reclaimed from publisher pid {prev}, which died without closing it", path.display());
    }
    Ok(ShmPublisher { inner: Publisher::new(writer), reclaimed_from, backing, path: path.to_owned() })
}

/// The config of an initialised ring file, read with plain file I/O: None if not initialised
/// (no magic yet), an error if its descriptor is not one this build can use (another layout
/// version, not a ring).
fn read_existing_config(file: &std::fs::File) -> Option<Result<RingConfig, LayoutError>> {
    use std::os::unix::fs::FileExt;
    let mut d = [0u8; core::mem::size_of::<crate::ring::layout::Descriptor>()];
    file.read_exact_at(&mut d, 0).ok()?;
    let desc = <crate::ring::layout::Descriptor as zerocopy::FromBytes>::read_from_bytes(&d).ok()?;
    (desc.magic != 0).then(|| RingConfig::from_descriptor(&desc))
}

/// The pid the ring header names as publisher (0 if unreadable), for the "already active" error.
pub(crate) fn peek_publisher_pid(file: &std::fs::File) -> u64 {
    use std::os::unix::fs::FileExt;
    let mut b = [0u8; 8];
    let off = (crate::ring::layout::W_PRODUCER_TOKEN * 8) as u64;
    match file.read_exact_at(&mut b, off) {
        Ok(()) => u64::from_le_bytes(b),
        Err(_) => 0,
    }
}

fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}
