//! The recorder: takes a live stream (any tickbus subscriber, through [`Tap`]) and appends it to
//! a journal, without the polling side ever touching the disk.
//!
//! Two threads: the caller's poll loop ([`Recorder::poll`]) lays each message out as its final
//! journal record (header, payload, CRC-32C) in an in-process SPSC byte queue (`rtrb`, no
//! syscall, no allocation) and goes on polling; a writer thread hands the queued bytes to the
//! journal as they are (one copy into the page cache, the same as a bare sequential write) and
//! flushes them. A slow disk shows up where it
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
use super::recorder_writer::{batches_for, write_loop, Batch};
use super::writer::JournalWriter;
use crate::time::Tsc;

use super::format::{self, MAX_PAYLOAD};

/// What a recorder takes from a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken<'a> {
    /// A message at a stream position.
    Message {
        /// The message's stream position.
        position: u64,
        /// The message bytes, borrowed from the source.
        payload: &'a [u8],
    },
    /// Positions `[from, to)` held dropped claims (a publisher reserved them and let the claim
    /// go without committing): there never was a message there, so nothing is lost. The
    /// recorder records nothing for them (the journal's positions simply skip them) and counts
    /// them; a reader of the journal sees the same positions the ring's readers did.
    Aborted {
        /// The first position with no message.
        from: u64,
        /// One past the last.
        to: u64,
    },
    /// Messages `[from, to)` were lost before the recorder could take them.
    Gap {
        /// The first position lost.
        from: u64,
        /// One past the last position lost.
        to: u64,
    },
}

/// A source's error that retrying does not help, kept whole (its type is the transport's).
pub type SourceError = Box<dyn std::error::Error + Send + Sync>;

/// A subscriber a recorder can take from.
pub trait Tap {
    /// Takes the next message or gap if there is one (never waits): `f` sees it. Returns whether
    /// something was taken.
    fn take(&mut self, f: &mut dyn FnMut(Taken<'_>)) -> Result<bool, SourceError>;
    /// A reliable source: the publisher waits for it. Its consumed position is released only
    /// through [`Tap::release_to`].
    fn reliable(&self) -> bool;
    /// Reliable sources: everything below `position` is in the journal and may be released.
    fn release_to(&mut self, position: u64);
    /// The position of the next message it will deliver.
    fn position(&self) -> u64;
    /// The largest message it can deliver.
    fn max_payload(&self) -> usize;
    /// How far below the stream's newest position a fresh attachment may start delivering (a
    /// ring's slot count; 0 for a live feed that starts at what it sees). A restarted recorder
    /// skips messages the journal already holds only within this window: a source that starts
    /// further back has restarted, and its positions mean something else.
    fn window(&self) -> u64;
    /// How many slots of dropped claims (no message) the source has moved past since it
    /// attached (0 for a source that has none): positions it skipped by this count are not
    /// messages consumed elsewhere.
    fn aborted(&self) -> u64 {
        0
    }
    /// The source's identity, one a recreated source does not share (a ring: when it was
    /// created). None: the source has none, and a restart is told only by positions going back.
    fn source_id(&self) -> Option<u64> {
        None
    }
}

/// A tap lent for a recording (so the caller keeps it, e.g. to reuse it after [`Recorder::finish`]).
impl<T: Tap + ?Sized> Tap for &mut T {
    fn take(&mut self, f: &mut dyn FnMut(Taken<'_>)) -> Result<bool, SourceError> {
        (**self).take(f)
    }
    fn reliable(&self) -> bool {
        (**self).reliable()
    }
    fn release_to(&mut self, position: u64) {
        (**self).release_to(position)
    }
    fn position(&self) -> u64 {
        (**self).position()
    }
    fn max_payload(&self) -> usize {
        (**self).max_payload()
    }
    fn window(&self) -> u64 {
        (**self).window()
    }
    fn aborted(&self) -> u64 {
        (**self).aborted()
    }
    fn source_id(&self) -> Option<u64> {
        (**self).source_id()
    }
}

/// Counters the recorder keeps (read from any thread, e.g. a status line). The poll side's
/// and the writer thread's counters sit on separate cache lines: each side updates its own
/// without pulling the line from the other core.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct RecorderStats {
    /// Messages taken and queued. Added at the end of each poll: during one, it may trail the
    /// other counters (the writer's `records` and `written` included).
    pub messages: AtomicU64,
    /// Payload bytes of those messages.
    pub bytes: AtomicU64,
    /// Gap records queued.
    pub gaps: AtomicU64,
    /// Messages those gap records say were missed.
    pub missed: AtomicU64,
    /// Messages skipped because the journal already held them (after a restart).
    pub skipped: AtomicU64,
    /// Times the queue to the writer thread was full.
    pub queue_full: AtomicU64,
    /// Positions that held dropped claims (no message; nothing lost), skipped.
    pub aborted: AtomicU64,
    _poll_side: [u64; 1],
    /// The sequence after the last record the writer thread handed to the kernel.
    pub written: AtomicU64,
    /// Records the writer thread appended.
    pub records: AtomicU64,
}

const _: () = assert!(std::mem::offset_of!(RecorderStats, written) == 64, "the writer's counters start a cache line");

/// Messages stamped with one TSC read (see `Recorder::stamp`).
const STAMP_EVERY: u32 = 16;

/// Adds to a counter only one thread writes (a plain load and store: no locked instruction).
pub(super) fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

/// How a recorder runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecorderOptions {
    /// Bytes of queue between the poll loop and the writer thread. Default 8 MiB: about 100 ms
    /// of 64-byte messages at 1M msg/s, and small enough to stay in the last-level cache (a
    /// 64 MiB queue recorded about 25% slower in the latency lab). On a lossy source a disk
    /// stall longer than the queue holds becomes a gap record; raise it where stalls are long.
    /// Written whole once by [`Recorder::start`] (records are laid out in it in place), so all
    /// of it is resident from then on, with a queue of batch descriptors beside it (16 bytes
    /// per 40 bytes of this: room for a batch of every smallest record it can hold; 3.4 MB for
    /// the default).
    pub queue_bytes: usize,
    /// The writer thread flushes (and so lets a reliable tap release) at least every this many
    /// bytes of records, and whenever the queue runs dry. Keep it well under what the source
    /// ring holds, or its publisher waits for a flush. Default 64 KiB.
    pub flush_bytes: usize,
    /// Pin the writer thread to this core. None: it keeps the affinity of the thread that calls
    /// [`Recorder::start`], so call `start` before pinning a busy-polling thread, or the writer
    /// shares that thread's core and the disk work stalls the poll loop.
    pub writer_core: Option<usize>,
}

impl Default for RecorderOptions {
    fn default() -> Self {
        RecorderOptions { queue_bytes: 8 << 20, flush_bytes: 64 << 10, writer_core: None }
    }
}

/// Why recording stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The journal refused a write.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The stream being recorded failed (the transport's error).
    #[error("the source failed: {0}")]
    Source(#[source] SourceError),
    /// A record of the source's largest message, or a gap record (48 bytes), larger than the
    /// queue to the writer thread.
    #[error("a record of a {len}-byte message (or a gap record, 48 bytes) does not fit the {queue} bytes of queue to the writer thread: give the recorder a larger queue")]
    TooLarge {
        /// The message's length in bytes.
        len: usize,
        /// The queue's size in bytes.
        queue: usize,
    },
    /// The writer thread stopped (its panic or error, as text).
    #[error("the journal writer thread stopped: {0}")]
    Writer(String),
    /// A reliable source delivered positions past what the journal holds: they were released
    /// to someone else (e.g. the consumer line of another process was taken over).
    #[error("the reliable source is at position {position} but the journal holds the stream only up to {expected}: messages {expected}..{position} were consumed elsewhere (was another consumer's line taken?) and cannot be recorded; nothing was released for them by this recorder. Record into a new folder, or give the recorder a consumer line of its own")]
    Skipped {
        /// The next position the journal expects.
        expected: u64,
        /// The position the source delivered.
        position: u64,
    },
    /// The source delivered a position the journal already holds where no redelivery can be:
    /// it restarted (a new ring, a restarted publisher) and numbers a new run from the start.
    #[error("the source went back to position {position}, below {expected} which the journal already holds: it restarted (a new ring or a restarted publisher) and its positions now name other messages, so nothing of the new run was recorded here. Record it into a new journal folder")]
    Restarted {
        /// The next position the journal expects.
        expected: u64,
        /// The position the source delivered.
        position: u64,
    },
    /// The source is not the one the journal recorded (its identity differs: a ring recreated
    /// since, by a reboot or `ring rm`), so its positions name other messages.
    #[error("the source is not the one this journal recorded: its identity is {source_id} (a ring: the Unix ns it was created at) but the journal's records came from {journal_id}. It was recreated (a reboot or `ring rm`), so its positions now name other messages and nothing of it was recorded here. Record it into a new journal folder")]
    SourceChanged {
        /// The identity in the journal.
        journal_id: u64,
        /// The source's identity.
        source_id: u64,
    },
}

/// Records one stream into one journal.
pub struct Recorder {
    queue: rtrb::Producer<u8>,
    /// Each batch's shape, queued after its bytes (see [`Batch`]).
    batches: rtrb::Producer<Batch>,
    /// The shape of the batch being staged.
    shape: Shape,
    stats: Arc<RecorderStats>,
    stop: Arc<AtomicBool>,
    writer: Option<JoinHandle<Result<(), JournalError>>>,
    /// Messages below this are already in the journal (a restarted recorder skips them).
    resume_at: u64,
    /// The position the journal continues with (None: nothing recorded yet).
    expected: Option<u64>,
    /// The tap is reliable (set by each poll).
    reliable: bool,
    /// The tap's redelivery window (set by each poll; see [`Tap::window`]).
    window: u64,
    /// The tap's [`Tap::aborted`] count already accounted for.
    aborted_seen: u64,
    /// The journal's folder and the identity of the source it records (None: not known yet).
    dir: std::path::PathBuf,
    journal_source: Option<u64>,
    /// The tap's identity was checked against the journal's (first poll).
    source_checked: bool,
    /// The last position skipped as already recorded, while catching up after a restart.
    redelivered: Option<u64>,
    /// A message at or past the journal's end has been taken: nothing may come from below it.
    caught_up: bool,
    /// A lossy gap not queued yet (the queue was full): `[from, to)`.
    pending_gap: Option<(u64, u64)>,
    /// The event that needs the most room: a full queue below this stops a reliable tap.
    room: usize,
    tsc: Tsc,
    /// The receive stamp records get, and how many more may get it (see `Recorder::stamp`).
    stamp: (u64, u32),
    queue_bytes: usize,
    /// Bytes of records laid out in the queue past its committed end, not committed yet: they
    /// are handed to the writer a batch at a time (one queue commit, which the writer thread's
    /// core must fetch, per batch instead of per record), their CRCs written at the hand-over,
    /// the batch's in one pass ([`format::seal_all`] checksums same-size records side by side).
    /// Laid out in place: an earlier form staged them in a buffer of its own and copied each
    /// batch into the queue, a pass over every byte that was a tenth of the poll side's time.
    staged: usize,
    /// The staged record cut in two by the queue's wrap, if any: where it starts and its length.
    /// It is laid out and sealed whole in `scratch` and copied in its two parts.
    straddler: Option<(usize, usize)>,
    /// Room for the largest record the queue can hold, for the one that straddles the wrap
    /// (allocated once).
    scratch: Box<[u8]>,
    /// Messages and payload bytes queued in this poll, added to [`RecorderStats`] at its end
    /// (two counter updates per message were a measurable part of the poll side's time).
    counted: (u64, u64),
}

/// The shape of the staged batch, as the writer is told it ([`Batch`]).
#[derive(Debug, Clone, Copy, Default)]
struct Shape {
    /// The first record's sequence.
    first: u64,
    /// Records staged.
    count: u32,
    /// The first record's payload length.
    len: u32,
    /// Every record so far is a message of that length at the sequence after the one before.
    run: bool,
}

/// Sends one lap of default values through a queue (`start`'s; see its uses).
fn lap<T: Default>(tx: &mut rtrb::Producer<T>, rx: &mut rtrb::Consumer<T>) -> Result<(), RecordError> {
    let n = tx.buffer().capacity();
    if n > 0 {
        tx.write_chunk(n).map_err(|e| RecordError::Writer(e.to_string()))?.commit_all();
        rx.read_chunk(n).map_err(|e| RecordError::Writer(e.to_string()))?.commit_all();
    }
    Ok(())
}

/// Bytes staged before they go to the writer at once (see [`Recorder::staged`]).
const STAGE_BYTES: usize = 64 << 10;

impl Recorder {
    /// Starts the writer thread on `journal`. Messages the journal already holds (below its
    /// [`JournalWriter::next_sequence`]) are skipped when a tap delivers them again.
    pub fn start(journal: JournalWriter, opts: RecorderOptions) -> Result<Recorder, RecordError> {
        let (mut queue, mut consumer) = rtrb::RingBuffer::new(opts.queue_bytes);
        // One lap of zeros through the queue before it is used, so every byte of it is
        // initialised: records are laid out in place through the queue's slots seen as bytes
        // (`window`).
        lap(&mut queue, &mut consumer)?;
        let (mut batches, mut described) = rtrb::RingBuffer::new(batches_for(opts.queue_bytes));
        // And one through the descriptors, so none of their pages is first touched in a poll.
        lap(&mut batches, &mut described)?;
        let stats = Arc::new(RecorderStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let expected = journal.next_sequence();
        let resume_at = expected.unwrap_or(0);
        let dir = journal.dir().to_owned();
        let journal_source = super::source_id::read(&dir)?;
        stats.written.store(resume_at, Ordering::Release);
        let (s, st) = (stats.clone(), stop.clone());
        let (pinned_tx, pinned) = std::sync::mpsc::sync_channel(1);
        let writer = std::thread::Builder::new()
            .name("tickbus-journal".into())
            .spawn(move || {
                let pinning = opts.writer_core.map_or(Ok(()), |c| crate::agent::pin_current_thread(c).map(|_| ()));
                let ok = pinning.is_ok();
                let _ = pinned_tx.send(pinning.map_err(|e| e.to_string()));
                if !ok {
                    return Ok(());
                }
                write_loop(journal, consumer, described, &s, &st, opts.flush_bytes.max(1))
            })
            .map_err(|e| RecordError::Writer(e.to_string()))?;
        match pinned.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(RecordError::Writer(format!("pinning it: {e}"))),
            Err(_) => return Err(RecordError::Writer("it did not start".into())),
        }
        Ok(Recorder {
            queue,
            batches,
            shape: Shape::default(),
            stats,
            stop,
            writer: Some(writer),
            resume_at,
            expected,
            reliable: false,
            window: 0,
            aborted_seen: 0,
            dir,
            journal_source,
            source_checked: false,
            redelivered: None,
            caught_up: false,
            pending_gap: None,
            room: 0,
            tsc: Tsc::new(),
            stamp: (0, 0),
            queue_bytes: opts.queue_bytes,
            staged: 0,
            straddler: None,
            scratch: vec![0; format::record_bytes(MAX_PAYLOAD).min(opts.queue_bytes)].into_boxed_slice(),
            counted: (0, 0),
        })
    }

    /// The recorder's live counters, shared with any thread that reports them.
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
        if !self.source_checked {
            self.check_source(tap)?;
        }
        self.reliable = tap.reliable();
        self.window = tap.window();
        if self.reliable {
            tap.release_to(self.stats.written.load(Ordering::Acquire));
        }
        // The largest record this source can cause: its largest message, or a gap record (a
        // queue too small for a gap record would hold a lossy source's gap back for ever).
        self.room = format::record_bytes(tap.max_payload().max(8));
        if tap.max_payload() > MAX_PAYLOAD || self.room > self.queue_bytes {
            return Err(RecordError::TooLarge { len: tap.max_payload(), queue: self.queue_bytes });
        }
        self.flush_gap();
        self.stamp.1 = 0; // a new poll: the source may have been idle since the last stamp
        let r = self.take(tap, limit);
        self.hand_over();
        let (messages, bytes) = std::mem::take(&mut self.counted);
        bump(&self.stats.messages, messages);
        bump(&self.stats.bytes, bytes);
        r
    }

    /// The receive stamp of a message published at `publish_tsc` (0: unknown): the TSC, read
    /// again every [`STAMP_EVERY`] messages, at every poll, after every gap record, and whenever
    /// the message says it was published after the stamp in hand (it became readable while
    /// this poll ran: after a preemption, say). Messages taken in one poll otherwise come back
    /// to back, so a stamp is at most that many messages' handling old (well under a
    /// microsecond unless the thread was preempted) and never before the message's own publish
    /// stamp on this host's clock; a TSC read costs about a tenth of a record's handling on a
    /// VM, where it is slowest.
    #[inline]
    fn stamp(&mut self, publish_tsc: u64) -> u64 {
        if self.stamp.1 == 0 || publish_tsc > self.stamp.0 {
            self.restamp();
        }
        self.stamp.1 -= 1;
        self.stamp.0
    }

    /// Reads the TSC for the stamp in hand, good for the next [`STAMP_EVERY`] messages.
    fn restamp(&mut self) -> u64 {
        self.stamp = (self.tsc.now(), STAMP_EVERY);
        self.stamp.0
    }

    /// The body of [`Recorder::poll`]: records laid out in the queue, sealed and committed by
    /// the caller (and along the way whenever the queue runs short or a batch is full).
    fn take(&mut self, tap: &mut impl Tap, limit: usize) -> Result<usize, RecordError> {
        let mut n = 0;
        while n < limit {
            if tap.reliable() && !self.has_room(self.room) {
                bump(&self.stats.queue_full, 1);
                break; // back-pressure: leave it in the ring
            }
            // Dropped claims the source moved past in calls that found no message: nothing
            // was there; the positions before where it stands now.
            let unseen = tap.aborted().saturating_sub(self.aborted_seen);
            if unseen > 0 {
                let at = tap.position();
                self.queue_taken(Taken::Aborted { from: at.saturating_sub(unseen), to: at })?;
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

    /// Once, before anything is taken: a source whose identity differs from the journal's is
    /// refused; a journal that has none yet (new, or written before identities) takes this
    /// source's (one small file written in the journal's folder, synced).
    fn check_source(&mut self, tap: &impl Tap) -> Result<(), RecordError> {
        if let Some(id) = tap.source_id() {
            match self.journal_source {
                Some(j) if j != id => return Err(RecordError::SourceChanged { journal_id: j, source_id: id }),
                Some(_) => {}
                None => {
                    super::source_id::write(&self.dir, id)?;
                    self.journal_source = Some(id);
                }
            }
        }
        self.source_checked = true;
        Ok(())
    }

    fn queue_taken(&mut self, t: Taken<'_>) -> Result<(), RecordError> {
        match t {
            Taken::Message { position, .. } if self.expected.is_some_and(|e| position < e) => {
                // Already in the journal: a restarted recorder's source redelivers what it had
                // not released, in order, from within its window. Anything else is a source
                // that restarted, whose positions now name other messages.
                let expected = self.expected.unwrap_or(0);
                let restarted = self.caught_up
                    || self.redelivered.is_some_and(|last| position <= last)
                    || (self.redelivered.is_none() && self.resume_at.saturating_sub(position) > self.window);
                if restarted {
                    return Err(RecordError::Restarted { expected, position });
                }
                self.redelivered = Some(position);
                bump(&self.stats.skipped, 1);
            }
            Taken::Message { position, payload } => {
                self.caught_up = true;
                let publish_tsc = tickbus_codecs::Header::peek(payload).map_or(0, |h| h.publish_tsc);
                let now = self.stamp(publish_tsc);
                if payload.len() > MAX_PAYLOAD {
                    return Err(RecordError::Journal(JournalError::TooLarge { len: payload.len(), max: MAX_PAYLOAD }));
                }
                // Positions skipped without a gap event (a restarted lossy recorder resuming at
                // the newest message) are missing from the journal: say so. A reliable source
                // never skips: if it did, those messages went elsewhere.
                if let Some(e) = self.expected.filter(|&e| position > e) {
                    if self.reliable {
                        return Err(RecordError::Skipped { expected: e, position });
                    }
                    self.add_gap(e, position);
                }
                self.expected = Some(position + 1);
                // A gap still waiting for queue room goes first: the journal is in order.
                self.flush_gap();
                if self.pending_gap.is_some()
                    || !self.push(&format::message_header(position, publish_tsc, now, payload.len()), payload)
                {
                    // Lossy and the queue is full: lost, and recorded as lost.
                    bump(&self.stats.queue_full, 1);
                    self.add_gap(position, position + 1);
                    return Ok(());
                }
                self.counted.0 += 1;
                self.counted.1 += payload.len() as u64;
            }
            Taken::Aborted { from, to } => {
                bump(&self.stats.aborted, to.saturating_sub(from));
                self.aborted_seen += to.saturating_sub(from);
                // Nothing to record; the journal continues after them. Below the journal's
                // end (a restarted recorder's redelivery) they change nothing.
                if self.expected.is_some_and(|e| from <= e && e < to) {
                    self.expected = Some(to);
                }
            }
            Taken::Gap { from, to } if self.reliable => {
                return Err(RecordError::Skipped { expected: self.expected.unwrap_or(from), position: to });
            }
            Taken::Gap { from, to } => {
                let from = self.expected.unwrap_or(from);
                if to > from {
                    self.caught_up = true;
                    self.add_gap(from, to);
                    self.expected = Some(to);
                    self.flush_gap();
                }
            }
        }
        Ok(())
    }

    /// Adds `[from, to)` to the gap waiting to be queued. Positions come in order and nothing is
    /// queued while a gap waits, so a waiting gap only ever grows forward.
    fn add_gap(&mut self, from: u64, to: u64) {
        self.pending_gap = Some(match self.pending_gap {
            Some((f, _)) => (f, to),
            None => (from, to),
        });
    }

    /// Queues the waiting gap, if there is one (checked in line: it runs for every message).
    #[inline(always)]
    fn flush_gap(&mut self) {
        if self.pending_gap.is_some() {
            self.flush_waiting_gap();
        }
    }

    fn flush_waiting_gap(&mut self) {
        if let Some(g) = self.pending_gap.take() {
            if !self.flush_gap_now(g) {
                self.pending_gap = Some(g);
            }
        }
    }

    fn flush_gap_now(&mut self, (from, to): (u64, u64)) -> bool {
        // A fresh stamp, kept for the messages after: none is stamped before the gap.
        let now = self.restamp();
        let (h, count) = format::gap(from, to - from, now);
        let ok = self.push(&h, &count);
        if ok {
            bump(&self.stats.gaps, 1);
            bump(&self.stats.missed, to - from);
        }
        ok
    }

    /// Whether `n` more bytes fit the queue after what is staged (the queue asks the writer's
    /// position only when the one it knows falls short).
    fn has_room(&mut self, n: usize) -> bool {
        if self.queue.write_chunk_uninit(self.staged + n).is_ok() {
            return true;
        }
        // Short: hand what is staged over first, so the writer can drain it while this poll goes
        // on (a small queue would otherwise turn the rest of a lossy poll into gaps).
        self.hand_over();
        self.queue.write_chunk_uninit(n).is_ok()
    }

    /// Lays one record out in the queue after what is staged; false when the queue has no room
    /// for it right now. Inlined, so the header's fields go from registers into the queue: out
    /// of line, the header is read back from the caller's stack just after it was stored there
    /// (see `format::emit_unsealed`).
    #[inline(always)]
    fn push(&mut self, h: &format::RecordHeader, payload: &[u8]) -> bool {
        let n = format::record_bytes(payload.len());
        if self.staged + n > STAGE_BYTES {
            self.hand_over(); // a batch is at most STAGE_BYTES, or one record
        }
        if !self.has_room(n) {
            return false;
        }
        let at = self.staged;
        let mut chunk =
            self.queue.write_chunk_uninit(at + n).expect("has_room just found room for it after the staged");
        // SAFETY: a chunk of this recorder's queue, initialised in `start`.
        let (a, b) = unsafe { window(&mut chunk) };
        if at + n <= a.len() {
            format::emit_unsealed(&mut a[at..at + n], h, payload);
        } else if at >= a.len() {
            format::emit_unsealed(&mut b[at - a.len()..at - a.len() + n], h, payload);
        } else {
            // Cut by the wrap (once a lap): whole and sealed in the scratch, then in two parts.
            let whole = &mut self.scratch[..n];
            format::emit(whole, h, payload);
            let (x, y) = whole.split_at(a.len() - at);
            a[at..].copy_from_slice(x);
            b[..y.len()].copy_from_slice(y);
            self.straddler = Some((at, n));
        }
        self.staged = at + n;
        // The batch stays a run while each record is a message of the first one's size at the
        // next sequence (a few compares; the writer then need not read the batch's headers).
        if at == 0 {
            self.shape = Shape { first: h.sequence, count: 0, len: h.len, run: true };
        }
        let r = &mut self.shape;
        r.run &= h.kind == format::KIND_MESSAGE && h.len == r.len && h.sequence == r.first + u64::from(r.count);
        r.count += 1;
        true
    }

    /// Seals the staged records and hands them to the writer thread in one queue commit.
    fn hand_over(&mut self) {
        if self.staged == 0 {
            return;
        }
        let n = self.staged;
        let mut chunk =
            self.queue.write_chunk_uninit(n).expect("the staged bytes were laid out in the queue's free slots");
        // SAFETY: a chunk of this recorder's queue, initialised in `start`.
        let (a, b) = unsafe { window(&mut chunk) };
        // The records wholly before and wholly after the wrap (with none cut by it, the wrap, or
        // the end of `a` when all of them are in it, falls between records); one cut by it is
        // sealed already.
        let (before, after) = match self.straddler.take() {
            Some((at, len)) => (at, at + len - a.len()),
            None => (a.len(), 0),
        };
        format::seal_all(&mut a[..before]);
        format::seal_all(&mut b[after..n - a.len()]);
        // Its descriptor's room, before the batch is committed: never short (`batches_for`),
        // but if it ever were, a panic here leaves the batch uncommitted (a reliable source
        // keeps it), where one after the commit would leave bytes the writer is never told of.
        assert!(!self.batches.is_full(), "the descriptor queue holds one per record the byte queue can (batches_for)");
        // SAFETY: every one of the chunk's `n` slots holds a byte: the queue's slots were all
        // initialised at start, and `push` laid the staged records over them.
        unsafe { chunk.commit_all() };
        self.staged = 0;
        // After the bytes: the writer reads a batch's bytes once it sees its descriptor.
        let r = self.shape;
        let batch = Batch { bytes: n as u32, run: if r.run { r.count } else { 0 }, first: r.first };
        let pushed = self.batches.push(batch);
        debug_assert!(pushed.is_ok(), "room was there before the commit, and only this side pushes");
    }

    fn writer_failed(&mut self) -> RecordError {
        match self.writer.take().map(|w| w.join()) {
            Some(Ok(Err(e))) => RecordError::Journal(e),
            Some(Err(panic)) => {
                let why = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".into());
                RecordError::Writer(format!("it panicked: {why}"))
            }
            _ => RecordError::Writer("it stopped without an error".into()),
        }
    }

    /// Stops taking, lets the writer thread write everything queued, closes the journal (flush,
    /// and sync unless the policy is `None`), and releases what it holds to a reliable `tap`.
    pub fn finish(mut self, tap: &mut impl Tap) -> Result<(), RecordError> {
        // A gap waiting for queue room is queued once the writer makes room: never dropped.
        self.flush_gap();
        self.hand_over();
        while self.pending_gap.is_some() {
            if self.writer.as_ref().is_none_or(|w| w.is_finished()) {
                return Err(self.writer_failed());
            }
            std::thread::sleep(Duration::from_micros(100));
            self.flush_gap();
            self.hand_over();
        }
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

/// A write chunk of the recorder's queue as the two byte slices it spans (the second holds
/// what wraps to the queue's start).
///
/// # Safety
/// Every slot of the chunk must hold an initialised byte: true of any chunk of a queue that
/// [`Recorder::start`] sent its lap of zeros through (after that its slots are only ever
/// written with bytes, and reading a slot leaves its byte there: rtrb drops a slot read, and
/// dropping a `u8` does nothing).
unsafe fn window<'a>(chunk: &'a mut rtrb::chunks::WriteChunkUninit<'_, u8>) -> (&'a mut [u8], &'a mut [u8]) {
    let (a, b) = chunk.as_mut_slices();
    // SAFETY: `MaybeUninit<u8>` has the layout of `u8`, and the caller guarantees every slot
    // holds an initialised byte.
    unsafe { (&mut *(a as *mut [_] as *mut [u8]), &mut *(b as *mut [_] as *mut [u8])) }
}

#[cfg(test)]
#[path = "recorder_tests.rs"]
mod tests;
