//! Replay-merge: a subscriber that joins a stream late reads it from the position it asks for,
//! catching up from an [`Archive`] of the stream (a journal: [`crate::journal::JournalTail`])
//! and cutting over to the live stream at the exact position: every message once, in order,
//! and every position it cannot have reported as a gap, never silence.
//!
//! Like Aeron's `ReplayMerge`, the live subscription is opened first and the archive read up to
//! where it is; unlike it, the live stream is never held up: the live subscriber (a lossy
//! observer, as a late joiner should use) is left alone while the archive is read, and what the
//! publisher laps meanwhile comes back as a gap that is filled from the archive. After the
//! cut-over, a gap on the live stream (a slow reader lapped on a lossy ring) is filled from the
//! archive the same way, so a reader that keeps a journal beside it loses nothing a recorder
//! kept.
//!
//! The cut-over: with the archive read to its end, the live stream's next message `p` decides.
//! Below the merge's position it is a duplicate (dropped); at it, the merge is live; above it,
//! `p` is kept in a buffer made at open and the archive must bring the positions before it
//! (the recorder is a moment behind the live stream); then `p` is delivered and the merge is
//! live. Positions the archive does not bring while it makes no progress for
//! [`MergeOptions::fill_timeout`] (a recorder that stopped) are reported as one gap.
//!
//! Once live, a poll is the live subscriber's poll plus one branch: no syscall, no allocation.
//! Catching up reads the archive (a journal: mapped files, reopened when a segment rolls) and
//! reads the clock while it waits for a fill: that is the join's cost, not the hot path's.
use std::time::{Duration, Instant};

use crate::ring::{Delivery, Gap, Recv, RecvInto};
use crate::stream::{Reliability, Retry, Subscribe};

mod any;
mod stream_archive;
#[cfg(test)]
mod tests;

pub use any::{AnyArchive, AnyArchiveError};
pub use stream_archive::{StreamArchive, StreamArchiveError};

/// One record of an archive, not yet taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// A message at a position, `len` bytes (read with [`Archive::payload`]).
    Message {
        /// Its stream position.
        position: u64,
        /// Its length in bytes.
        len: usize,
    },
    /// Positions the archive itself lost (a recorder lapped on a lossy stream), or never held.
    Gap {
        /// The first position lost.
        position: u64,
        /// How many.
        count: u64,
    },
}

impl Entry {
    /// The first position the entry covers.
    pub fn position(&self) -> u64 {
        match *self {
            Entry::Message { position, .. } | Entry::Gap { position, .. } => position,
        }
    }

    /// The position after what the entry covers.
    pub fn end(&self) -> u64 {
        match *self {
            Entry::Message { position, .. } => position.saturating_add(1),
            Entry::Gap { position, count } => position.saturating_add(count),
        }
    }
}

/// A stream's history, read in position order: what a late joiner catches up from. An archive
/// may grow while it is read (a journal a recorder is writing): `peek` returning `None` means
/// "nothing more yet", and a later call may find more.
pub trait Archive {
    /// Why the archive cannot be read further (it names where).
    type Error: std::error::Error + Send + Sync + 'static;

    /// The next record, without taking it; `None` when the archive holds nothing more yet.
    fn peek(&mut self) -> Result<Option<Entry>, Self::Error>;

    /// Takes the record `peek` returned; the next `peek` looks at the one after it.
    fn take(&mut self);

    /// The payload of the message `peek` returned last (empty for a gap). Valid until the next
    /// `peek`, also after `take`.
    fn payload(&self) -> &[u8];

    /// The identity of the stream incarnation the archive recorded
    /// ([`Subscribe::source_id`]); None when it does not know.
    fn source_id(&self) -> Option<u64>;

    /// The next record if it is a message at `at_least` or later, taken at once (its payload
    /// then readable as after `take`); None, taking nothing, for anything else. The merge's
    /// catch-up path: one call per message where peek and take would be two.
    #[inline]
    fn take_message(&mut self, at_least: u64) -> Result<Option<(u64, usize)>, Self::Error> {
        take_message_by_peek(self, at_least)
    }

    /// Moves on to the first record at or after `position` (forward only), where the archive
    /// can do better than reading every record before it (a journal: through its index). The
    /// merge calls it when a live gap sends it back to the archive long after the cut-over.
    fn seek(&mut self, position: u64) -> Result<(), Self::Error> {
        let _ = position;
        Ok(())
    }
}

/// [`Archive::take_message`] through `peek` and `take`: the default, and what an archive with
/// a faster path falls back to.
pub fn take_message_by_peek<A: Archive + ?Sized>(a: &mut A, at_least: u64) -> Result<Option<(u64, usize)>, A::Error> {
    match a.peek()? {
        Some(Entry::Message { position, len }) if position >= at_least => {
            a.take();
            Ok(Some((position, len)))
        }
        _ => Ok(None),
    }
}

/// Positions at or past this are taken for a corrupt or hostile archive (as the ring and the
/// journal do): at a billion messages a second a stream needs 146 years to get there.
pub const MAX_POSITION: u64 = 1 << 62;

/// How a merge behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MergeOptions {
    /// While catching up: how long to wait for the archive to bring positions the live stream
    /// is already past (a recorder is a moment behind its stream) before they are reported as a
    /// gap. Counted from the archive's last progress, so a slow archive that keeps delivering
    /// is waited for.
    pub fill_timeout: Duration,
    /// Once live: the same for a lap of the live stream. Shorter, since the live stream is not
    /// read while the archive fills (a recorder that stopped must not blind the reader for
    /// long); after one fill times out the archive is not waited for again until it brings
    /// something.
    pub live_fill_timeout: Duration,
}

impl Default for MergeOptions {
    fn default() -> Self {
        MergeOptions { fill_timeout: Duration::from_secs(2), live_fill_timeout: Duration::from_millis(250) }
    }
}

impl MergeOptions {
    /// Options with these two timeouts.
    pub fn new(fill_timeout: Duration, live_fill_timeout: Duration) -> MergeOptions {
        MergeOptions { fill_timeout, live_fill_timeout }
    }
}

/// What a merge did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MergeStats {
    /// Messages delivered from the archive.
    pub from_archive: u64,
    /// Live messages dropped because the archive had delivered them already.
    pub duplicates: u64,
    /// Messages taken from the archive after the cut-over (to fill laps of the live stream).
    pub filled: u64,
    /// Positions reported lost because the archive recorded them lost.
    pub archive_gaps: u64,
    /// Positions reported lost because the archive did not bring them within the fill timeout
    /// (or could not be read).
    pub unfilled: u64,
    /// The position of the first message delivered from the live stream: where the merge cut
    /// over.
    pub cut_over: Option<u64>,
}

/// Why a merge could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum MergeError<L: std::error::Error + 'static> {
    /// The live subscriber failed.
    #[error(transparent)]
    Live(L),
    /// The archive recorded another incarnation of the stream than the live one.
    #[error("the archive recorded another incarnation of the stream (identity {archive}) than the live one ({live}: a ring's is the Unix ns it was created at): the stream was recreated since, so the archive's positions name other messages. Join from a journal of the live stream")]
    OtherSource {
        /// The archive's source identity.
        archive: u64,
        /// The live stream's.
        live: u64,
    },
}

impl<L: std::error::Error + Retry + 'static> Retry for MergeError<L> {
    fn retry_helps(&self) -> bool {
        match self {
            MergeError::Live(e) => e.retry_helps(),
            MergeError::OtherSource { .. } => false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading the archive; at its end, the live stream's next message decides.
    CatchUp,
    /// The archive must bring `[next, until)` (by `deadline`); then the message kept from the
    /// live stream at `until` (if `held`) is delivered and the merge is live.
    Fill { until: u64, held: Option<usize>, deadline: Instant },
    /// Reading the live stream.
    Live,
}

/// What the catch-up found ready, not yet taken.
enum Step {
    Nothing,
    Gap(Gap),
    Archive { position: u64, len: usize },
    Held { position: u64, len: usize },
}

/// A late joiner's subscriber: the archive from the position asked for, then the live stream.
/// It is a [`Subscribe`] itself, so an app's loop does not change.
pub struct ReplayMerge<S, A: Archive> {
    live: S,
    archive: A,
    next: u64,
    phase: Phase,
    /// The live message that arrived ahead of the archive, kept until the archive catches up.
    held: Box<[u8]>,
    options: MergeOptions,
    stats: MergeStats,
    /// Reported lost in gaps, by the merge.
    missed: u64,
    /// Why the archive could not be read any further (then it is not read again).
    archive_failure: Option<String>,
    /// The archive brought something since the fill's deadline was last set.
    fill_moved: bool,
    /// The first archive record was looked at (one after the position asked for means the
    /// archive lacks what comes before it: a gap, not silence).
    started: bool,
    /// A live gap sent the merge back to the archive: seek it before reading.
    seek_due: bool,
    /// A live fill timed out and the archive has brought nothing since: later live gaps are
    /// reported at once instead of waited on.
    archive_stalled: bool,
}

impl<S: Subscribe, A: Archive> ReplayMerge<S, A> {
    /// A merge that delivers the stream from position `from`: the archive's records from there,
    /// then `live`'s messages. Open `live` first (a lossy observer: the publisher never waits
    /// for it while the archive is read) and the archive after it, so that together they hold
    /// every position. Refuses an archive of another incarnation of the stream.
    pub fn new(live: S, archive: A, from: u64, options: MergeOptions) -> Result<Self, MergeError<S::Error>> {
        if let (Some(a), Some(l)) = (archive.source_id(), live.source_id()) {
            if a != l {
                return Err(MergeError::OtherSource { archive: a, live: l });
            }
        }
        let held = vec![0u8; live.max_payload()].into_boxed_slice();
        Ok(ReplayMerge {
            live,
            archive,
            next: from,
            phase: Phase::CatchUp,
            held,
            options,
            stats: MergeStats::default(),
            missed: 0,
            archive_failure: None,
            fill_moved: false,
            started: false,
            seek_due: false,
            archive_stalled: false,
        })
    }

    /// Whether the merge has cut over to the live stream (and is not filling a live gap).
    pub fn is_live(&self) -> bool {
        self.phase == Phase::Live
    }

    /// What the merge did so far.
    pub fn stats(&self) -> MergeStats {
        self.stats
    }

    /// Why the archive could not be read further, if so: the positions it could not bring
    /// were reported as gaps.
    pub fn archive_failure(&self) -> Option<&str> {
        self.archive_failure.as_deref()
    }

    /// The live subscriber.
    pub fn live(&self) -> &S {
        &self.live
    }

    /// The archive.
    pub fn archive(&self) -> &A {
        &self.archive
    }

    /// The archive, to look at off the hot path (e.g. whether it holds more). A record peeked
    /// here is the one the merge reads next: peeking takes nothing.
    pub fn archive_mut(&mut self) -> &mut A {
        &mut self.archive
    }

    /// The next archive record, or None once the archive failed (the failure is kept: the
    /// archive is not read again, and what it would have brought is reported as gaps).
    fn peek_archive(&mut self) -> Option<Entry> {
        if self.archive_failure.is_some() {
            return None;
        }
        if std::mem::take(&mut self.seek_due) {
            if let Err(e) = self.archive.seek(self.next) {
                return self.fail_archive(e);
            }
        }
        match self.archive.peek() {
            Ok(Some(e)) if e.end() > MAX_POSITION || matches!(e, Entry::Gap { count: 0, .. }) => {
                self.fail_why(format!("a record claims positions {}..{}: not a real stream's", e.position(), e.end()))
            }
            Ok(e) => e,
            Err(e) => self.fail_archive(e),
        }
    }

    #[cold]
    fn fail_archive(&mut self, e: A::Error) -> Option<Entry> {
        self.fail_why(e.to_string())
    }

    #[cold]
    fn fail_why(&mut self, why: String) -> Option<Entry> {
        log::warn!("replay-merge: the archive cannot be read past position {}: {why}", self.next);
        self.archive_failure = Some(why);
        None
    }

    /// The first archive record, if it starts after the position asked for: the archive lacks
    /// what comes before it (`to` bounds the gap inside a fill).
    fn lead_gap(&mut self, e: Option<Entry>, to: u64) -> Option<Step> {
        let e = e?;
        if std::mem::replace(&mut self.started, true) || e.position() <= self.next {
            return None;
        }
        Some(self.lose(e.position().min(to), true))
    }

    /// Reports `[next, until)` lost and moves past it.
    fn lose(&mut self, until: u64, archive_said: bool) -> Step {
        let g = Gap { expected: self.next, resumed_at: until };
        match archive_said {
            true => self.stats.archive_gaps += g.missed(),
            false => self.stats.unfilled += g.missed(),
        }
        self.missed += g.missed();
        self.next = until;
        Step::Gap(g)
    }

    /// Advances the catch-up until something is ready to deliver or nothing more is there now.
    /// Takes nothing that it returns: the caller takes it (so `try_recv_into` can leave a
    /// message of another length where it is).
    fn step(&mut self) -> Result<Step, MergeError<S::Error>> {
        // Bounded: each pass either returns or moves the merge on; a stream of duplicates
        // cannot hold the caller forever.
        for _ in 0..4096 {
            match self.phase {
                Phase::Live => return Ok(Step::Nothing),
                Phase::Fill { until, held, deadline } => {
                    if self.next >= until {
                        // A kept message stays kept until it is taken (`took_held`).
                        return Ok(match held {
                            Some(len) => Step::Held { position: until, len },
                            None => {
                                self.phase = Phase::Live;
                                Step::Nothing
                            }
                        });
                    }
                    let e = self.peek_archive();
                    if let Some(gap) = self.lead_gap(e, until) {
                        return Ok(gap);
                    }
                    // The timeout runs from the archive's last progress, not from the fill's
                    // start: a slow archive that keeps bringing records (a journal served across
                    // a busy fabric) is waited for; one that stopped is not.
                    self.fill_moved |= e.is_some();
                    if e.is_some() {
                        self.archive_stalled = false;
                    }
                    match e {
                        Some(e) if e.end() <= self.next => self.archive.take(),
                        // The positions before it have no record: aborted claims (a recorder
                        // records none) or, the archive having gone past them, not there.
                        Some(e) if e.position() >= until => self.next = until,
                        Some(Entry::Message { position, len }) => return Ok(Step::Archive { position, len }),
                        Some(Entry::Gap { position, count }) => {
                            let end = position.saturating_add(count).min(until);
                            if end >= position.saturating_add(count) {
                                self.archive.take();
                            }
                            return Ok(self.lose(end, true));
                        }
                        None if self.archive_failure.is_some() => return Ok(self.lose(until, false)),
                        None if self.fill_moved => {
                            self.fill_moved = false;
                            let deadline = Instant::now() + self.fill_timeout();
                            self.phase = Phase::Fill { until, held, deadline };
                            return Ok(Step::Nothing);
                        }
                        None if self.archive_stalled || Instant::now() >= deadline => {
                            // Once live, an archive that let one fill time out is not waited on
                            // again until it brings something.
                            self.archive_stalled = self.stats.cut_over.is_some();
                            return Ok(self.lose(until, false));
                        }
                        None => return Ok(Step::Nothing),
                    }
                }
                Phase::CatchUp => match self.peek_archive() {
                    e if !self.started && e.is_some_and(|e| e.position() > self.next) => {
                        return Ok(self.lead_gap(e, u64::MAX).expect("a lead gap: checked"));
                    }
                    Some(e) if e.end() <= self.next => {
                        self.started = true;
                        self.archive.take()
                    }
                    Some(Entry::Message { position, len }) => {
                        self.started = true;
                        return Ok(Step::Archive { position, len });
                    }
                    Some(Entry::Gap { position, count }) => {
                        self.started = true;
                        self.archive.take();
                        return Ok(self.lose(position.saturating_add(count), true));
                    }
                    None => {
                        // The archive's end for now: the live stream decides. What it holds
                        // below the merge's position was delivered from the archive: dropped
                        // here in one go, not one per look at the archive (a look may reopen a
                        // journal).
                        let deadline = Instant::now() + self.options.fill_timeout;
                        for _ in 0..4096 {
                            match self.live.try_recv().map_err(MergeError::Live)? {
                                None => return Ok(Step::Nothing),
                                Some(Recv::Message(d)) if d.position < self.next => self.stats.duplicates += 1,
                                Some(Recv::Message(d)) => {
                                    // Kept until the archive brings what comes before it.
                                    let len = d.payload.len();
                                    self.held[..len].copy_from_slice(d.payload);
                                    self.phase = Phase::Fill { until: d.position, held: Some(len), deadline };
                                    break;
                                }
                                Some(Recv::Gap(g)) if g.resumed_at <= self.next => {}
                                Some(Recv::Gap(g)) => {
                                    self.phase = Phase::Fill { until: g.resumed_at, held: None, deadline };
                                    break;
                                }
                            }
                        }
                    }
                },
            }
        }
        Ok(Step::Nothing)
    }

    /// The fill timeout for where the merge is: catching up, or live.
    fn fill_timeout(&self) -> Duration {
        match self.stats.cut_over {
            None => self.options.fill_timeout,
            Some(_) => self.options.live_fill_timeout,
        }
    }

    /// Takes the archive message `step` returned (positions were checked against
    /// [`MAX_POSITION`] when peeked: no overflow).
    fn took_archive(&mut self, position: u64) {
        self.archive.take();
        self.next = position + 1;
        self.stats.from_archive += 1;
        if self.stats.cut_over.is_some() {
            self.stats.filled += 1;
        }
    }

    /// Whether the archive's payload for the message peeked is the `len` bytes it said: a
    /// file changed under its map since it was checked is an archive failure, not bytes to
    /// deliver.
    fn payload_holds(&mut self, len: usize) -> bool {
        if self.archive.payload().len() >= len {
            return true;
        }
        self.fail_why(format!("the record at position {} changed after it was checked", self.next));
        false
    }

    fn took_held(&mut self, position: u64) {
        self.phase = Phase::Live;
        self.next = position + 1;
        self.stats.cut_over.get_or_insert(position);
    }

    /// A gap on the live stream after the cut-over: filled from the archive (sought first).
    #[cold]
    fn live_gap(&mut self, g: Gap) {
        if g.resumed_at > self.next {
            let deadline = Instant::now() + self.options.live_fill_timeout;
            self.seek_due = true;
            self.phase = Phase::Fill { until: g.resumed_at, held: None, deadline };
        }
    }
}

impl<S: Subscribe, A: Archive> Subscribe for ReplayMerge<S, A> {
    type Error = MergeError<S::Error>;

    #[inline]
    fn try_recv(&mut self) -> Result<Option<Recv<'_>>, Self::Error> {
        if self.phase == Phase::Live {
            // The hot path: the live poll. (Written without helpers so the borrow of `live`
            // returned on one arm leaves the other fields free on the others.)
            return match self.live.try_recv().map_err(MergeError::Live)? {
                // A transport that delivers again what it delivered (a reconnect): once.
                Some(Recv::Message(d)) if d.position < self.next => {
                    self.stats.duplicates += 1;
                    Ok(None)
                }
                Some(Recv::Message(d)) => {
                    self.next = d.position + 1;
                    if self.stats.cut_over.is_none() {
                        self.stats.cut_over = Some(d.position);
                    }
                    Ok(Some(Recv::Message(d)))
                }
                Some(Recv::Gap(g)) => {
                    if g.resumed_at > self.next {
                        let deadline = Instant::now() + self.options.live_fill_timeout;
                        self.seek_due = true;
                        self.phase = Phase::Fill { until: g.resumed_at, held: None, deadline };
                    }
                    Ok(None)
                }
                None => Ok(None),
            };
        }
        // Catching up: the common case first, the archive's next message after the position.
        if self.phase == Phase::CatchUp && self.started && self.archive_failure.is_none() {
            match self.archive.take_message(self.next) {
                Ok(Some((position, len))) => {
                    if position < MAX_POSITION && self.archive.payload().len() >= len {
                        self.next = position + 1;
                        self.stats.from_archive += 1;
                        return Ok(Some(Recv::Message(Delivery { position, payload: &self.archive.payload()[..len] })));
                    }
                    self.fail_why(format!("a record at position {position} of {len} bytes is not a real stream's"));
                }
                Ok(None) => {}
                Err(e) => {
                    self.fail_archive(e);
                }
            }
        }
        match self.step()? {
            Step::Nothing => Ok(None),
            Step::Gap(g) => Ok(Some(Recv::Gap(g))),
            Step::Archive { len, .. } if !self.payload_holds(len) => Ok(None),
            Step::Archive { position, len } => {
                self.took_archive(position);
                let payload = &self.archive.payload()[..len];
                Ok(Some(Recv::Message(Delivery { position, payload })))
            }
            Step::Held { position, len } => {
                self.took_held(position);
                Ok(Some(Recv::Message(Delivery { position, payload: &self.held[..len] })))
            }
        }
    }

    fn try_recv_into(&mut self, out: &mut [u8]) -> Result<Option<RecvInto>, Self::Error> {
        if self.phase == Phase::Live {
            return match self.live.try_recv_into(out).map_err(MergeError::Live)? {
                Some(RecvInto::Message { position }) if position < self.next => {
                    // Copied already, and delivered before: dropped (a reconnect's redelivery).
                    self.stats.duplicates += 1;
                    Ok(None)
                }
                Some(RecvInto::Message { position }) => {
                    self.next = position + 1;
                    self.stats.cut_over.get_or_insert(position);
                    Ok(Some(RecvInto::Message { position }))
                }
                Some(RecvInto::Gap(g)) => {
                    self.live_gap(g);
                    Ok(None)
                }
                other => Ok(other),
            };
        }
        match self.step()? {
            Step::Nothing => Ok(None),
            Step::Gap(g) => Ok(Some(RecvInto::Gap(g))),
            Step::Archive { position, len } | Step::Held { position, len } if len != out.len() => {
                Ok(Some(RecvInto::OtherLength { position, len }))
            }
            Step::Archive { len, .. } if !self.payload_holds(len) => Ok(None),
            Step::Archive { position, len } => {
                self.took_archive(position);
                out.copy_from_slice(&self.archive.payload()[..len]);
                Ok(Some(RecvInto::Message { position }))
            }
            Step::Held { position, len } => {
                self.took_held(position);
                out.copy_from_slice(&self.held[..len]);
                Ok(Some(RecvInto::Message { position }))
            }
        }
    }

    fn position(&self) -> u64 {
        self.next
    }
    fn missed(&self) -> u64 {
        self.missed
    }
    fn max_payload(&self) -> usize {
        self.live.max_payload()
    }
    fn reliability(&self) -> Reliability {
        self.live.reliability()
    }
    fn ticks_per_ns(&self) -> f64 {
        self.live.ticks_per_ns()
    }
    fn set_manual_release(&mut self, manual: bool) -> bool {
        self.live.set_manual_release(manual)
    }
    fn release_to(&mut self, position: u64) {
        self.live.release_to(position)
    }
    fn window(&self) -> u64 {
        self.live.window()
    }
    fn aborted(&self) -> u64 {
        self.live.aborted()
    }
    fn source_id(&self) -> Option<u64> {
        self.live.source_id()
    }
}
