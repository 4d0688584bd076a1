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
mod files;
#[cfg(test)]
mod hostile_tests;
mod mapping;
mod options;
mod publisher;
mod subscriber;
#[cfg(test)]
pub(crate) mod tests;
mod wait;

/// Whether process `pid` exists (a ring's publisher or a consumer line's owner, as
/// [`ShmSubscriber`] and `tickbus ring` report them).
pub use crate::sys::process::alive as process_alive;
pub use error::ShmError;
pub use mapping::{Backing, ShmMemory};
pub use options::{HugepagePolicy, ShmOptions};
pub(crate) use publisher::hugetlbfs_problem;
pub use publisher::{open_publisher, ConsumerStatus, ShmPublisher};
pub use subscriber::{open_consumer, open_observer, open_observer_uncounted, PublisherState, ShmSubscriber};
pub use wait::{RingWait, LOOK_AGAIN};

/// Deletes the ring `name` wherever it lives. Refuses a ring whose publisher is alive (it holds
/// the ring's lock): stop the publisher first. Mapped subscribers keep their mapping until they
/// close it. Returns whether a file was removed.
pub fn remove(name: &str, opts: &ShmOptions) -> Result<bool, ShmError> {
    options::check_name(name)?;
    let mut removed = false;
    for dir in [&opts.hugepage_dir, &opts.fallback_dir] {
        let Some(d) = files::RingDir::open(dir, false)? else { continue };
        let files::Found::File(file) = d.open_ring(name)? else { continue };
        if file.try_lock().is_err() {
            let pid = publisher::peek_publisher_pid(&file);
            return Err(ShmError::PublisherActive { path: dir.join(name), pid });
        }
        // Unlinked while we hold the lock: no publisher can have opened it meanwhile.
        d.unlink(name)?;
        removed = true;
    }
    Ok(removed)
}
