//! The recorder: takes a live stream (any tickbus subscriber, through [`Tap`]) and appends it to
//! a journal, without the polling side ever touching the disk.
//!
//! Two threads: the caller's poll loop ([`Recorder::poll`]) copies each message into an
//! in-process SPSC byte queue (`rtrb`, no syscall, no allocation) and goes on polling; a writer
//! thread drains the queue into the journal and flushes it. A slow disk shows up where it
//! should: on a reliable stream the poll side stops taking messages when the queue is full, so
//! the ring fills and its publisher sees back-pressure; on a lossy stream it goes on polling and
//! records what it could not queue as a gap. Never a stalled poll loop.
//!
//! Crash safety on reliable streams: the consumer's position is advanced (its credits released)
//! only up to what the writer thread has handed to the kernel, so after a `kill -9` the next
//! recorder resumes at the consumer position; the journal's reopen cuts any torn tail, and
//! messages the journal already holds are skipped: every message exactly once, in order.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::error::JournalError;
use super::writer::JournalWriter;
use crate::time::Tsc;

/// Bytes of an event's header in the queue: len u32, kind u8, 3 pad, sequence, publish TSC,
/// receive TSC.
const EVENT_HEADER: usize = 32;
const KIND_MESSAGE: u8 = 1;
const KIND_GAP: u8 = 2;

/// What a recorder takes from a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken<'a> {
    Message {
        position: u64,
        payload: &'a [u8],
    },
    /// Messages `[from, to)` were lost before the recorder could take them.
    Gap {
        from: u64,
        to: u64,
    },
}

/// A subscriber a recorder can take from.
pub trait Tap {
    /// Takes the next message or gap if there is one (never waits): `f` sees it. Returns whether
    /// something was taken.
    fn take(&mut self, f: &mut dyn FnMut(Taken<'_>)) -> Result<bool, String>;
    /// A reliable source: the publisher waits for it. Its consumed position is released only
    /// through [`Tap::release_to`].
    fn reliable(&self) -> bool;
    /// Reliable sources: everything below `position` is in the journal and may be released.
    fn release_to(&mut self, position: u64);
    /// The position of the next message it will deliver.
    fn position(&self) -> u64;
    /// The largest message it can deliver.
    fn max_payload(&self) -> usize;
}

/// Counters the recorder keeps (read from any thread, e.g. a status line).
#[derive(Debug, Default)]
pub struct RecorderStats {
    /// Messages taken and queued, and their payload bytes.
    pub messages: AtomicU64,
    pub bytes: AtomicU64,
    /// Gap records, and the messages they say were missed.
    pub gaps: AtomicU64,
    pub missed: AtomicU64,
    /// Messages skipped because the journal already held them (after a restart).
    pub skipped: AtomicU64,
    /// Times the queue to the writer thread was full.
    pub queue_full: AtomicU64,
    /// The sequence after the last record the writer thread handed to the kernel.
    pub written: AtomicU64,
    /// Records the writer thread appended.
    pub records: AtomicU64,
}

/// How a recorder runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecorderOptions {
    /// Bytes of queue between the poll loop and the writer thread. Default 64 MiB.
    pub queue_bytes: usize,
    /// Most records the writer thread appends between two flushes. Default 4096.
    pub batch: usize,
}

impl Default for RecorderOptions {
    fn default() -> Self {
        RecorderOptions { queue_bytes: 64 << 20, batch: 4096 }
    }
}

/// Why recording stopped.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("the source failed: {0}")]
    Source(String),
    #[error("a {len}-byte message does not fit the {queue} bytes of queue to the writer thread: give the recorder a larger queue")]
    TooLarge { len: usize, queue: usize },
    #[error("the journal writer thread stopped: {0}")]
    Writer(String),
}

/// Records one stream into one journal.
pub struct Recorder {
    queue: rtrb::Producer<u8>,
    stats: Arc<RecorderStats>,
    stop: Arc<AtomicBool>,
    writer: Option<JoinHandle<Result<(), JournalError>>>,
    /// Messages below this are already in the journal (a restarted recorder skips them).
    resume_at: u64,
    /// A lossy gap not queued yet (the queue was full): `[from, to)`.
    pending_gap: Option<(u64, u64)>,
    /// The event that needs the most room: a full queue below this stops a reliable tap.
    room: usize,
    tsc: Tsc,
    queue_bytes: usize,
}

impl Recorder {
    /// Starts the writer thread on `journal`. Messages the journal already holds (below its
    /// [`JournalWriter::next_sequence`]) are skipped when a tap delivers them again.
    pub fn start(journal: JournalWriter, opts: RecorderOptions) -> Result<Recorder, RecordError> {
        let (queue, consumer) = rtrb::RingBuffer::new(opts.queue_bytes);
        let stats = Arc::new(RecorderStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let resume_at = journal.next_sequence().unwrap_or(0);
        stats.written.store(resume_at, Ordering::Release);
        let (s, st) = (stats.clone(), stop.clone());
        let writer = std::thread::Builder::new()
            .name("tickbus-journal".into())
            .spawn(move || write_loop(journal, consumer, &s, &st, opts.batch))
            .map_err(|e| RecordError::Writer(e.to_string()))?;
        Ok(Recorder {
            queue,
            stats,
            stop,
            writer: Some(writer),
            resume_at,
            pending_gap: None,
            room: 0,
            tsc: Tsc::new(),
            queue_bytes: opts.queue_bytes,
        })
    }

    pub fn stats(&self) -> &Arc<RecorderStats> {
        &self.stats
    }

    /// Where the journal resumes the stream (what a restarted recorder skips below).
    pub fn resume_at(&self) -> u64 {
        self.resume_at
    }

    /// One duty cycle: releases what the journal holds (reliable), then takes up to `limit`
    /// messages from `tap` into the queue. Never waits and never touches the disk. Returns how
    /// many messages or gaps it took.
    pub fn poll(&mut self, tap: &mut impl Tap, limit: usize) -> Result<usize, RecordError> {
        if self.writer.as_ref().is_some_and(|w| w.is_finished()) {
            return Err(self.writer_failed());
        }
        if tap.reliable() {
            tap.release_to(self.stats.written.load(Ordering::Acquire));
        }
        self.room = EVENT_HEADER + tap.max_payload().next_multiple_of(8);
        if self.room > self.queue_bytes {
            return Err(RecordError::TooLarge { len: tap.max_payload(), queue: self.queue_bytes });
        }
        self.flush_gap();
        let mut n = 0;
        while n < limit {
            if tap.reliable() && self.queue.slots() < self.room {
                self.stats.queue_full.fetch_add(1, Ordering::Relaxed);
                break; // back-pressure: leave it in the ring
            }
            let mut err = None;
            let taken = tap.take(&mut |t| {
                if let Err(e) = self.queue_taken(t) {
                    err = Some(e);
                }
            });
            if let Some(e) = err {
                return Err(e);
            }
            match taken {
                Ok(true) => n += 1,
                Ok(false) => break,
                Err(e) => return Err(RecordError::Source(e)),
            }
        }
        Ok(n)
    }

    fn queue_taken(&mut self, t: Taken<'_>) -> Result<(), RecordError> {
        let now = self.tsc.now();
        match t {
            Taken::Message { position, .. } if position < self.resume_at => {
                self.stats.skipped.fetch_add(1, Ordering::Relaxed);
            }
            Taken::Message { position, payload } => {
                let publish_tsc = tickbus_codecs::Header::peek(payload).map_or(0, |h| h.publish_tsc);
                if !self.push(KIND_MESSAGE, position, publish_tsc, now, payload) {
                    // Lossy and the queue is full: lost, and recorded as lost.
                    self.stats.queue_full.fetch_add(1, Ordering::Relaxed);
                    self.add_gap(position, position + 1);
                    return Ok(());
                }
                self.stats.messages.fetch_add(1, Ordering::Relaxed);
                self.stats.bytes.fetch_add(payload.len() as u64, Ordering::Relaxed);
            }
            Taken::Gap { from, to } => {
                let from = from.max(self.resume_at);
                if to > from {
                    self.add_gap(from, to);
                    self.flush_gap();
                }
            }
        }
        Ok(())
    }

    fn add_gap(&mut self, from: u64, to: u64) {
        self.pending_gap = Some(match self.pending_gap {
            Some((f, t)) if t == from => (f, to),
            Some(g) => {
                self.flush_gap_now(g);
                (from, to)
            }
            None => (from, to),
        });
    }

    fn flush_gap(&mut self) {
        if let Some(g) = self.pending_gap.take() {
            if !self.flush_gap_now(g) {
                self.pending_gap = Some(g);
            }
        }
    }

    fn flush_gap_now(&mut self, (from, to): (u64, u64)) -> bool {
        let now = self.tsc.now();
        let ok = self.push(KIND_GAP, from, 0, now, &(to - from).to_le_bytes());
        if ok {
            self.stats.gaps.fetch_add(1, Ordering::Relaxed);
            self.stats.missed.fetch_add(to - from, Ordering::Relaxed);
        }
        ok
    }

    /// Copies one event into the queue; false when it does not fit right now.
    fn push(&mut self, kind: u8, sequence: u64, publish_tsc: u64, receive_tsc: u64, payload: &[u8]) -> bool {
        let n = EVENT_HEADER + payload.len().next_multiple_of(8);
        let Ok(mut chunk) = self.queue.write_chunk(n) else { return false };
        let mut head = [0u8; EVENT_HEADER];
        head[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        head[4] = kind;
        head[8..16].copy_from_slice(&sequence.to_le_bytes());
        head[16..24].copy_from_slice(&publish_tsc.to_le_bytes());
        head[24..32].copy_from_slice(&receive_tsc.to_le_bytes());
        let (a, b) = chunk.as_mut_slices();
        let bytes = head.iter().chain(payload).copied().chain(std::iter::repeat(0));
        for (dst, src) in a.iter_mut().chain(b.iter_mut()).zip(bytes) {
            *dst = src;
        }
        chunk.commit_all();
        true
    }

    fn writer_failed(&mut self) -> RecordError {
        match self.writer.take().map(|w| w.join()) {
            Some(Ok(Err(e))) => RecordError::Journal(e),
            Some(Err(_)) => RecordError::Writer("it panicked".into()),
            _ => RecordError::Writer("it stopped".into()),
        }
    }

    /// Stops taking, lets the writer thread write everything queued, closes the journal (flush,
    /// and sync unless the policy is `None`), and releases what it holds to a reliable `tap`.
    pub fn finish(mut self, tap: &mut impl Tap) -> Result<(), RecordError> {
        self.flush_gap();
        self.stop.store(true, Ordering::Release);
        let result = match self.writer.take().map(|w| w.join()) {
            Some(Ok(r)) => r.map_err(RecordError::from),
            Some(Err(_)) => Err(RecordError::Writer("it panicked".into())),
            None => Ok(()),
        };
        if tap.reliable() {
            tap.release_to(self.stats.written.load(Ordering::Acquire));
        }
        result
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

/// The writer thread: drains the queue into the journal, flushing after each batch and
/// publishing how far the journal holds the stream.
fn write_loop(
    mut journal: JournalWriter,
    mut queue: rtrb::Consumer<u8>,
    stats: &RecorderStats,
    stop: &AtomicBool,
    batch: usize,
) -> Result<(), JournalError> {
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    loop {
        let stopping = stop.load(Ordering::Acquire);
        let mut records = 0;
        while records < batch {
            let Some((kind, seq, publish_tsc, receive_tsc, len)) = peek_event(&mut queue, &mut buf) else { break };
            match kind {
                KIND_MESSAGE => {
                    journal.append(seq, publish_tsc, receive_tsc, &buf[EVENT_HEADER..EVENT_HEADER + len])?
                }
                _ => {
                    let count = u64::from_le_bytes(buf[EVENT_HEADER..EVENT_HEADER + 8].try_into().expect("8 bytes"));
                    journal.append_gap(seq, count, receive_tsc)?;
                }
            }
            let n = EVENT_HEADER + len.next_multiple_of(8);
            queue.read_chunk(n).expect("peeked").commit_all();
            records += 1;
        }
        if records > 0 {
            journal.flush()?;
            stats.records.fetch_add(records as u64, Ordering::Relaxed);
            if let Some(next) = journal.next_sequence() {
                stats.written.store(next, Ordering::Release);
            }
        } else if stopping {
            return journal.close();
        } else {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// The next whole event in the queue, copied into `buf`: (kind, sequence, publish TSC, receive
/// TSC, payload length). None if no whole event is there yet.
fn peek_event(queue: &mut rtrb::Consumer<u8>, buf: &mut Vec<u8>) -> Option<(u8, u64, u64, u64, usize)> {
    let avail = queue.slots();
    if avail < EVENT_HEADER {
        return None;
    }
    let chunk = queue.read_chunk(EVENT_HEADER).ok()?;
    buf.clear();
    let (a, b) = chunk.as_slices();
    buf.extend_from_slice(a);
    buf.extend_from_slice(b);
    let len = u32::from_le_bytes(buf[..4].try_into().ok()?) as usize;
    let n = EVENT_HEADER + len.next_multiple_of(8);
    if avail < n {
        return None;
    }
    let chunk = queue.read_chunk(n).ok()?;
    buf.clear();
    let (a, b) = chunk.as_slices();
    buf.extend_from_slice(a);
    buf.extend_from_slice(b);
    let w = |at: usize| u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
    Some((buf[4], w(8), w(16), w(24), len))
}
