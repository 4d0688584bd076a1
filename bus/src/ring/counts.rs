//! A stream's counters as the ring (and every transport) updates them: a handle to a block of
//! [`COUNTERS`] words that one stream alone writes, with relaxed loads and stores (no lock
//! prefix, no syscall, no allocation). Where the words live is not the ring's business: a
//! private block, nothing, or a record of the process's counters file that `crate::counters`
//! makes and `tickbus stat` reads.
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

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
    /// What keeps shared words alive (a counters file's record, `crate::counters`).
    Owned(Box<dyn std::any::Any>),
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

    /// Counters in words someone else keeps: `keep` owns them (a counters file's record).
    ///
    /// # Safety
    /// `words` points at [`COUNTERS`] aligned atomics that live as long as `keep` and that no
    /// other handle writes.
    #[cfg_attr(loom, allow(dead_code))] // the counters file is not built under loom
    pub(crate) unsafe fn in_words(words: NonNull<AtomicU64>, keep: Box<dyn std::any::Any>) -> Counters {
        Counters { words: Some(words), _keep: Keep::Owned(keep) }
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
