//! Live counters in shared memory, one file per process, read by `tickbus stat` running as the
//! same user (or root), like Aeron's CnC counters.
//!
//! Every publisher and subscriber, on every transport, owns one record in its process's
//! counters file and is the only writer of it. Updating a counter is a relaxed load and store
//! on a cache line no other thread writes: no lock prefix, no syscall, no allocation, so the
//! hot paths keep their proofs. Readers (`stat`) read the words with relaxed loads and accept
//! that a record read while being updated is off by the update in flight.
//!
//! # File layout (little-endian, version 1)
//!
//! The tables below are `layout.rs`'s `FileHeader` and `Record` (zerocopy `#[repr(C)]` structs
//! with an offset assert per field), which the writer and the reader both use.
//!
//! `<dir>/<pid>.counters`, mode 0600, `dir` = `$TICKBUS_COUNTERS_DIR` or
//! `/dev/shm/tickbus-counters-<uid>` (0700, refused if it is a symlink, someone else's, or
//! writable by others). Made under a temporary name (created exclusively, never through a
//! symlink) and renamed into place whole. Readers read it with one `read`, never map it.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `TBCNTRS\x01` |
//! | 8 | 4 | version (1) |
//! | 12 | 4 | header bytes (256) |
//! | 16 | 4 | record bytes (384) |
//! | 20 | 4 | records (capacity) |
//! | 24 | 8 | pid |
//! | 32 | 8 | process start time (clock ticks since boot, /proc/PID/stat field 22) |
//! | 40 | 8 | TSC ticks per ns (f64 bits) |
//! | 48 | 8 | TSC when the file was made |
//! | 56 | 8 | Unix ns when the file was made |
//! | 64 | 64 | the program's name, NUL-padded |
//!
//! Record `i` at `256 + 384 * i`:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | state: 0 free, 1 active (stored last, with Release, when a record is taken) |
//! | 8 | 4 | role: 1 publisher, 2 subscriber |
//! | 12 | 4 | transport: 1 shm, 2 rdma-rc, 3 ud-mcast |
//! | 16 | 4 | stream id |
//! | 20 | 4 | name length |
//! | 64 | 64 | name (the ring, or the endpoint and group), UTF-8 |
//! | 128 | 8 x 32 | counters, indexed by [`Counter`] |
//!
//! A process that exits cleanly removes its file when its last stream closes. One that crashed
//! leaves it behind: its pid is gone, or now names a process with another start time, so
//! readers show it as stale, never as live.
#[cfg(not(loom))]
mod file;
#[cfg(not(loom))]
mod layout;
#[cfg(not(loom))]
mod read;

use std::sync::atomic::{AtomicBool, Ordering};

#[cfg(not(loom))]
pub use file::{counters_dir, counters_dirs, register};
#[cfg(not(loom))]
pub use read::{prune, scan, CountersFile, Liveness, StreamRecord};

// The counter handle the ring updates lives with the ring (`ring::counts`), so the ring
// depends on nothing above it; this module makes the files that back it and reads them.
pub use crate::ring::counts::{Counter, Counters, COUNTERS};

/// Which end of a stream a record counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Role {
    /// Publishes on the stream.
    Publisher = 1,
    /// Subscribes to the stream.
    Subscriber = 2,
}

/// Which transport a record's stream runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Transport {
    /// A ring in shared memory on this host.
    Shm = 1,
    /// RDMA-WRITE over reliable connected QPs.
    RdmaRc = 2,
    /// UD multicast.
    UdMcast = 3,
}

impl Role {
    /// Its name as `tickbus stat` shows it (`publisher`, `subscriber`).
    pub fn name(self) -> &'static str {
        match self {
            Role::Publisher => "publisher",
            Role::Subscriber => "subscriber",
        }
    }
}

impl Transport {
    /// Its name as `tickbus stat` shows it (`shm`, `rdma-rc`, `ud-mcast`).
    pub fn name(self) -> &'static str {
        match self {
            Transport::Shm => "shm",
            Transport::RdmaRc => "rdma-rc",
            Transport::UdMcast => "ud-mcast",
        }
    }
}

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns counting on or off for streams opened from now on (on by default). Off, a stream's
/// counter updates are one predictable branch and nothing else: how the lab measures what
/// counting costs.
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether streams opened now count.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_add_set_and_sort_errors_by_status() {
        let c = Counters::private();
        c.add(Counter::Messages, 2);
        c.add(Counter::Messages, 3);
        c.set(Counter::Position, 42);
        c.completion_error(12);
        c.completion_error(10);
        c.completion_error(99);
        assert_eq!(c.get(Counter::Messages), 5);
        assert_eq!(c.get(Counter::Position), 42);
        assert_eq!(c.get(Counter::Errors), 3);
        assert_eq!(
            [Counter::ErrRetryExceeded, Counter::ErrRemoteAccess, Counter::ErrOther].map(|k| c.get(k)),
            [1, 1, 1]
        );
        let off = Counters::none();
        off.add(Counter::Messages, 1);
        assert_eq!(off.get(Counter::Messages), 0);
        for (i, k) in Counter::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i, "ALL is in index order");
            assert!((*k as usize) < COUNTERS);
        }
    }
}
