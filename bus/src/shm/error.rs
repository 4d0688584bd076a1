//! Errors of opening, creating and inspecting shm rings; each says what to do.
use std::path::PathBuf;

use crate::ring::{AttachError, LayoutError, RingConfig};

#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    #[error("ring name {name:?} is not a plain file name (letters, digits, '.', '_', '-', at most 128)")]
    BadName { name: String },
    #[error("no ring named {name:?} in {searched:?}: is its publisher running? (retry once it has created the ring)")]
    NotFound { name: String, searched: Vec<PathBuf> },
    #[error("hugepages required but unavailable for {path}: {reason}. Reserve and mount them as root: `echo 64 > /proc/sys/vm/nr_hugepages && mkdir -p /dev/hugepages && mount -t hugetlbfs none /dev/hugepages`, or use HugepagePolicy::Preferred")]
    HugepagesUnavailable { path: PathBuf, reason: String },
    #[error("ring {path} already has a live publisher (pid {pid}); a ring has exactly one publisher")]
    PublisherActive { path: PathBuf, pid: u64 },
    #[error("ring {path} exists with a different layout ({existing:?}) than requested ({requested:?}); remove it (tickbus::shm::remove) or open it with its own layout")]
    LayoutMismatch { path: PathBuf, existing: Box<RingConfig>, requested: Box<RingConfig> },
    #[error("ring {path}: {source}")]
    Layout { path: PathBuf, source: LayoutError },
    #[error("ring {path}: {source}")]
    Attach { path: PathBuf, source: AttachError },
    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: PathBuf, source: std::io::Error },
    /// A ring folder or file another user could have planted or could read: refused untouched.
    #[error("refusing {path}: {reason}. Ring folders must be real folders owned by this user with mode 0700, ring files regular files with mode 0600; remove it or pick other folders (TICKBUS_HUGEPAGE_DIR, TICKBUS_SHM_DIR)")]
    Unsafe { path: PathBuf, reason: String },
}

impl ShmError {
    /// Whether retrying the same call later can succeed (the publisher may still be starting).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ShmError::NotFound { .. }
                | ShmError::PublisherActive { .. }
                | ShmError::Layout { source: LayoutError::NotReady, .. }
                | ShmError::Attach { source: AttachError::Layout(LayoutError::NotReady), .. }
                | ShmError::Attach { source: AttachError::NoFreeConsumer { .. }, .. }
        )
    }
}
