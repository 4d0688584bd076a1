//! Errors of opening, creating and inspecting shm rings; each says what to do.
use std::path::PathBuf;

use crate::ring::{AttachError, LayoutError, RingConfig};

/// Why an shm ring could not be opened, created or read. Each message says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShmError {
    /// A ring name that is not a plain file name.
    #[error("ring name {name:?} is not a plain file name (letters, digits, '.', '_', '-', at most 128)")]
    BadName {
        /// The name given.
        name: String,
    },
    /// No ring file of that name.
    #[error("no ring named {name:?} in {searched:?}: is its publisher running? (retry once it has created the ring)")]
    NotFound {
        /// The name given.
        name: String,
        /// The folders searched.
        searched: Vec<PathBuf>,
    },
    /// Hugepages were required ([`HugepagePolicy::Required`](crate::shm::HugepagePolicy::Required))
    /// but could not be had.
    #[error("hugepages required but unavailable for {path}: {reason}. Reserve and mount them as root: `echo 64 > /proc/sys/vm/nr_hugepages && mkdir -p /dev/hugepages && mount -t hugetlbfs none /dev/hugepages`, or use HugepagePolicy::Preferred")]
    HugepagesUnavailable {
        /// The ring file.
        path: PathBuf,
        /// Why not (nothing reserved, not mounted, ...).
        reason: String,
    },
    /// Another live process publishes on the ring.
    #[error("ring {path} already has a live publisher (pid {pid}); a ring has exactly one publisher")]
    PublisherActive {
        /// The ring file.
        path: PathBuf,
        /// That publisher's pid.
        pid: u64,
    },
    /// The ring exists with another layout than the one asked for; nothing was changed.
    #[error("ring {path} exists with a different layout ({existing:?}) than requested ({requested:?}); remove it (tickbus::shm::remove) or open it with its own layout")]
    LayoutMismatch {
        /// The ring file.
        path: PathBuf,
        /// The layout it has.
        existing: Box<RingConfig>,
        /// The layout asked for.
        requested: Box<RingConfig>,
    },
    /// The file is not a usable ring.
    #[error("ring {path}: {source}")]
    Layout {
        /// The ring file.
        path: PathBuf,
        /// What is wrong.
        source: LayoutError,
    },
    /// A reader could not attach.
    #[error("ring {path}: {source}")]
    Attach {
        /// The ring file.
        path: PathBuf,
        /// Why not.
        source: AttachError,
    },
    /// A filesystem call failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A ring folder or file another user could have planted or could read: refused untouched.
    #[error("refusing {path}: {reason}. Ring folders must be real folders owned by this user with mode 0700, ring files regular files with mode 0600; remove it or pick other folders (TICKBUS_HUGEPAGE_DIR, TICKBUS_SHM_DIR)")]
    Unsafe {
        /// The folder or file refused.
        path: PathBuf,
        /// What is unsafe about it.
        reason: String,
    },
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
