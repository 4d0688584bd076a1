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

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[cfg(not(loom))]
pub use file::{counters_dir, counters_dirs, register};
#[cfg(not(loom))]
pub use read::{prune, scan, CountersFile, Liveness, StreamRecord};

/// Words per record's counter block.
pub const COUNTERS: usize = 32;

/// One counter of a stream. Which ones move depends on the role and the transport; the rest
/// stay 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Counter {
    /// Publisher: the next position to publish. Subscriber: the next position to read.
    Position = 0,
    /// Messages published or delivered.
    Messages = 1,
    /// Payload bytes published or delivered.
    Bytes = 2,
    /// Gaps delivered to the subscriber (each a run of messages it will never see).
    Gaps = 3,
    /// Messages inside those gaps.
    Missed = 4,
    /// Publish attempts refused because a reliable ring was full (back-pressure).
    Full = 5,
    /// Times the publisher lapped this reader (lossy rings and observers).
    Laps = 6,
    /// RDMA work completions polled.
    Completions = 7,
    /// RDMA work completions of the stream's own sends, writes and receives with an error
    /// status (multicast recovery READs report through the subscriber's recovery error).
    Errors = 8,
    /// ... of which IBV_WC_RETRY_EXC_ERR (the peer stopped answering).
    ErrRetryExceeded = 9,
    /// ... of which IBV_WC_REM_ACCESS_ERR (a wrong rkey or address).
    ErrRemoteAccess = 10,
    /// ... of which IBV_WC_WR_FLUSH_ERR (flushed after the QP failed).
    ErrFlushed = 11,
    /// ... of which any other status.
    ErrOther = 12,
    /// UD multicast datagrams received (every completion, whatever it held).
    Datagrams = 13,
    /// Messages recovered by RDMA READ from the publisher's history.
    Recovered = 14,
    /// Messages lost for good (neither received nor recoverable).
    Lost = 15,
    /// Heartbeats sent (publisher) or received (subscriber).
    Heartbeats = 16,
    /// TSC of the last message this publisher stamped: shm's typed `send`, `offer` and typed
    /// claim `commit`, rdma-rc's typed `send`. 0 until then, and on paths that never read the clock:
    /// raw-byte `publish` (the caller owns the bytes and their timestamps) and subscribers
    /// (reading the TSC per message would cost the receive path; `stat --watch` shows their
    /// flow as msgs/s instead).
    LastActivityTsc = 17,
    /// Subscribers an rdma-rc publisher serves (its QPs). For shm, `stat` reads the ring's
    /// consumer lines instead.
    Peers = 18,
}

impl Counter {
    /// Every counter, in index order.
    pub const ALL: [Counter; 19] = [
        Counter::Position,
        Counter::Messages,
        Counter::Bytes,
        Counter::Gaps,
        Counter::Missed,
        Counter::Full,
        Counter::Laps,
        Counter::Completions,
        Counter::Errors,
        Counter::ErrRetryExceeded,
        Counter::ErrRemoteAccess,
        Counter::ErrFlushed,
        Counter::ErrOther,
        Counter::Datagrams,
        Counter::Recovered,
        Counter::Lost,
        Counter::Heartbeats,
        Counter::LastActivityTsc,
        Counter::Peers,
    ];

    /// The name `stat --json` and the Prometheus exposition use.
    pub fn name(self) -> &'static str {
        match self {
            Counter::Position => "position",
            Counter::Messages => "messages",
            Counter::Bytes => "bytes",
            Counter::Gaps => "gaps",
            Counter::Missed => "missed",
            Counter::Full => "full",
            Counter::Laps => "laps",
            Counter::Completions => "completions",
            Counter::Errors => "errors",
            Counter::ErrRetryExceeded => "errors_retry_exceeded",
            Counter::ErrRemoteAccess => "errors_remote_access",
            Counter::ErrFlushed => "errors_flushed",
            Counter::ErrOther => "errors_other",
            Counter::Datagrams => "datagrams",
            Counter::Recovered => "recovered",
            Counter::Lost => "lost",
            Counter::Heartbeats => "heartbeats",
            Counter::LastActivityTsc => "last_activity_tsc",
            Counter::Peers => "peers",
        }
    }
}

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

/// A stream's counters: its record in the process's counters file, a private block when the
/// file could not be made (the stream still counts, `stat` just cannot see it), or nothing when
/// counting is off.
pub struct Counters {
    words: Option<NonNull<AtomicU64>>,
    _keep: Keep,
}

#[allow(dead_code)] // held for their Drop
enum Keep {
    None,
    Private(Box<[AtomicU64; COUNTERS]>),
    #[cfg(not(loom))]
    File(file::Slot),
}

// SAFETY: the words are atomics that live as long as `_keep` (a boxed block or a mapped record
// kept alive by its slot); moving the handle to another thread moves the single writer with it.
unsafe impl Send for Counters {}

impl Counters {
    /// Counters nobody else can read (rings used inside one process, tests).
    pub fn private() -> Counters {
        let block: Box<[AtomicU64; COUNTERS]> = Box::new(std::array::from_fn(|_| AtomicU64::new(0)));
        // From the whole array, so the pointer may reach every counter (not just the first).
        let words = Some(NonNull::from(&*block).cast::<AtomicU64>());
        Counters { words, _keep: Keep::Private(block) }
    }

    /// No counters: every update is a no-op.
    pub fn none() -> Counters {
        Counters { words: None, _keep: Keep::None }
    }

    #[inline(always)]
    fn word(&self, c: Counter) -> Option<&AtomicU64> {
        // SAFETY: `words` points at COUNTERS atomics kept alive by `_keep`; every Counter index
        // is below COUNTERS.
        self.words.map(|w| unsafe { &*w.as_ptr().add(c as usize) })
    }

    /// Adds `n` (a relaxed load and store: this stream is the counter's only writer).
    #[inline(always)]
    pub fn add(&self, c: Counter, n: u64) {
        if let Some(w) = self.word(c) {
            w.store(w.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        }
    }

    /// Sets a counter that is a level, not a count (a position, a TSC).
    #[inline(always)]
    pub fn set(&self, c: Counter, v: u64) {
        if let Some(w) = self.word(c) {
            w.store(v, Ordering::Relaxed);
        }
    }

    /// The counter's value (0 with counting off).
    pub fn get(&self, c: Counter) -> u64 {
        self.word(c).map_or(0, |w| w.load(Ordering::Relaxed))
    }

    /// Counts one RDMA completion error under its status (ibv_wc_status).
    #[cold]
    pub fn completion_error(&self, status: u32) {
        self.add(Counter::Errors, 1);
        self.add(
            match status {
                12 => Counter::ErrRetryExceeded,
                10 => Counter::ErrRemoteAccess,
                5 => Counter::ErrFlushed,
                _ => Counter::ErrOther,
            },
            1,
        );
    }
}

impl Default for Counters {
    fn default() -> Self {
        Counters::private()
    }
}

impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut m = f.debug_map();
        for c in Counter::ALL {
            m.entry(&c.name(), &self.get(c));
        }
        m.finish()
    }
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
