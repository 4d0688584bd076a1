//! Hugepage shared-memory transport: a ring in a file on hugetlbfs, mapped by one publisher
//! process and any number of subscriber processes on the host.
//!
//! Owns: where ring files live, their permissions, the publisher's exclusive lock, mapping and
//! the hugepage / fallback decision. Never: touches the ring's words itself (that is the ring
//! module's job) or runs on the hot path: everything here is open/close/status.
//!
//! Rings live at `<hugepage_dir>/<name>` (default `/dev/hugepages/tickbus/<name>`), mode 0600.
//! Without hugetlbfs (or without free hugepages) they fall back to `/dev/shm/tickbus/<name>` and
//! say so on stderr, unless [`HugepagePolicy::Required`] asked for an error instead. The
//! publisher holds an exclusive `flock` on the file for its lifetime, which the kernel drops when
//! it dies: a new publisher can then reclaim the ring and continue the stream.
mod error;
mod mapping;
mod options;
mod publisher;
mod subscriber;
#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
pub(crate) mod tests;

pub use error::ShmError;
pub use mapping::{Backing, ShmMemory};
pub use options::{HugepagePolicy, ShmOptions};
pub use publisher::{open_publisher, ConsumerStatus, ShmPublisher};
pub use subscriber::{open_consumer, open_observer, PublisherState, ShmSubscriber};

/// Deletes the ring `name` wherever it lives. Mapped processes keep their mapping until they
/// close it. Returns whether a file was removed.
pub fn remove(name: &str, opts: &ShmOptions) -> Result<bool, ShmError> {
    options::check_name(name)?;
    let mut removed = false;
    for dir in [&opts.hugepage_dir, &opts.fallback_dir] {
        match std::fs::remove_file(dir.join(name)) {
            Ok(()) => removed = true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(ShmError::Io { what: "removing the ring file", path: dir.join(name), source: e }),
        }
    }
    Ok(removed)
}
