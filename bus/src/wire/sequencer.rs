//! The ud-mcast subscriber's sequencing, as a state machine that does no I/O: given each frame's
//! header, what to do with it. Datagrams on a multicast group are not authenticated (anyone on
//! the fabric who knows the queue key can send one), so this is where forged and replayed
//! frames are kept from corrupting the stream.
//!
//! Rules (each a defence, each tested and fuzzed):
//! - **In order, never twice**: a frame older than the next expected one is late (a duplicate
//!   or reordered) and dropped; a delivered sequence number is never delivered again.
//! - **Bounded jumps**: a frame up to `max_jump` ahead of the expected one reveals a gap (the
//!   caller recovers it or reports it). A frame further ahead is believed only when `confirm`
//!   consecutive frames continue it (a real stream does; one forged `seq = 2^40` does not, and
//!   would otherwise make every later real frame "late"). The frames spent confirming are
//!   reported lost in the gap, never silently skipped.
//! - **Sessions**: each publisher run has a random session id. The first session seen is
//!   adopted. Another one replaces it only when it sends `confirm` consecutive frames while the
//!   current session has sent nothing for `quiet` TSC ticks (a publisher that restarted went
//!   quiet first; a forger racing a live publisher does not get in). The switch is reported as
//!   a gap from 0 of the new session, since its first messages were not delivered. A session
//!   followed before is never adopted again (its frames could only be a replay of an old run,
//!   and adopting it would deliver its sequence numbers twice).
//! - Sequence numbers of 2^63 and above never get here (`frame::parse` refuses them).
use super::frame::FrameHeader;

/// What a subscriber should do with one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The next message: deliver it (the sequencer has moved past it).
    Deliver,
    /// An in-order heartbeat: nothing missing, nothing to deliver.
    Heartbeat,
    /// `[from, to)` are missing before this frame: recover or report them, call
    /// [`Sequencer::advance_to`]`(to)`, then offer this frame again.
    Gap {
        /// The first missing sequence.
        from: u64,
        /// This frame's sequence (one past the last missing).
        to: u64,
    },
    /// Older than the next expected frame: a duplicate or reordered copy. Drop it.
    Late,
    /// Another stream on the same group. Skip it.
    OtherStream,
    /// A jump too far ahead, or another session, not (yet) confirmed. Drop it.
    Unconfirmed,
}

/// Bounds of [`Sequencer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Largest gap believed from one frame.
    pub max_jump: u64,
    /// Consecutive frames that confirm a longer jump or a new session.
    pub confirm: u32,
    /// TSC ticks the current session must have been silent before another may replace it.
    pub quiet_ticks: u64,
}

/// A run of consecutive frames that would move the stream somewhere it was not expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    session: u64,
    next: u64,
    frames: u32,
    /// (TSC when the run started, frames of the current session seen by then): a new session
    /// needs the current one silent since.
    since: (u64, u64),
}

/// Sequencing state of one subscriber of one stream.
#[derive(Debug, Clone)]
pub struct Sequencer {
    stream: u32,
    bounds: Bounds,
    session: Option<u64>,
    expected: Option<u64>,
    /// Frames of the current session seen so far.
    current_frames: u64,
    run: Option<Run>,
    sessions: u64,
    /// The last sessions followed before the current one (never adopted again).
    retired: [Option<u64>; RETIRED],
}

/// How many earlier sessions a sequencer remembers.
const RETIRED: usize = 8;

impl Sequencer {
    /// A sequencer for `stream` that has seen nothing yet, believing jumps within `bounds`.
    pub fn new(stream: u32, bounds: Bounds) -> Sequencer {
        let bounds = Bounds { confirm: bounds.confirm.max(1), ..bounds };
        Sequencer {
            stream,
            bounds,
            session: None,
            expected: None,
            current_frames: 0,
            run: None,
            sessions: 0,
            retired: [None; RETIRED],
        }
    }

    /// The session being followed.
    pub fn session(&self) -> Option<u64> {
        self.session
    }

    /// Sessions adopted after the first one.
    pub fn session_changes(&self) -> u64 {
        self.sessions.saturating_sub(1)
    }

    /// The next sequence number to deliver (None before the first frame).
    pub fn expected(&self) -> Option<u64> {
        self.expected
    }

    /// The largest gap believed from one frame.
    pub fn max_jump(&self) -> u64 {
        self.bounds.max_jump
    }

    /// Changes the largest gap believed from one frame (e.g. to the history's size once
    /// recovery is connected).
    pub fn set_max_jump(&mut self, max_jump: u64) {
        self.bounds.max_jump = max_jump;
    }

    /// After a gap was reported or recovered: the next frame to deliver is `seq`.
    pub fn advance_to(&mut self, seq: u64) {
        if self.expected.is_none_or(|e| seq > e) {
            self.expected = Some(seq);
        }
    }

    /// Classifies `h`. `now` reads the TSC; it is called only for a frame of another session
    /// (a cold path), never for the stream's own frames.
    pub fn classify(&mut self, h: &FrameHeader, now: impl FnOnce() -> u64) -> Verdict {
        if h.stream != self.stream {
            return Verdict::OtherStream;
        }
        match self.session {
            None => {
                self.session = Some(h.session);
                self.sessions += 1;
            }
            Some(s) if s != h.session => return self.foreign_session(h, now),
            Some(_) => {}
        }
        self.current_frames += 1;
        let expected = *self.expected.get_or_insert(h.seq);
        if h.seq < expected {
            return Verdict::Late;
        }
        if h.seq - expected > self.bounds.max_jump {
            if !self.continues_run(h, (0, 0)) {
                return Verdict::Unconfirmed;
            }
            self.run = None;
            return Verdict::Gap { from: expected, to: h.seq };
        }
        self.run = None;
        if h.seq > expected {
            return Verdict::Gap { from: expected, to: h.seq };
        }
        if h.is_heartbeat() {
            return Verdict::Heartbeat;
        }
        self.expected = Some(h.seq + 1);
        Verdict::Deliver
    }

    /// Counts `h` into the run it continues (or starts a run); whether the run is confirmed.
    fn continues_run(&mut self, h: &FrameHeader, since: (u64, u64)) -> bool {
        match &mut self.run {
            Some(r) if r.session == h.session && r.next == h.seq => {
                r.frames += 1;
                r.next = h.seq + u64::from(!h.is_heartbeat());
            }
            _ => {
                self.run =
                    Some(Run { session: h.session, next: h.seq + u64::from(!h.is_heartbeat()), frames: 1, since })
            }
        }
        self.run.is_some_and(|r| r.frames >= self.bounds.confirm)
    }

    #[cold]
    fn foreign_session(&mut self, h: &FrameHeader, now: impl FnOnce() -> u64) -> Verdict {
        if self.retired.contains(&Some(h.session)) {
            return Verdict::Unconfirmed; // an earlier run's frames, replayed
        }
        let t = now();
        let same_run = self.run.is_some_and(|r| r.session == h.session && r.next == h.seq);
        let since = match self.run {
            Some(r) if same_run => r.since,
            _ => (t, self.current_frames),
        };
        if !self.continues_run(h, since) {
            return Verdict::Unconfirmed;
        }
        let run = self.run.expect("a confirmed run");
        let silent = run.since.1 == self.current_frames;
        if !silent || t.wrapping_sub(run.since.0) < self.bounds.quiet_ticks {
            // Keep counting; the current session must fall silent for long enough first.
            return Verdict::Unconfirmed;
        }
        self.run = None;
        self.retired.rotate_right(1);
        self.retired[0] = self.session;
        self.session = Some(h.session);
        self.sessions += 1;
        self.current_frames = 1;
        self.expected = Some(0);
        if h.seq > 0 {
            return Verdict::Gap { from: 0, to: h.seq };
        }
        self.classify_in_session(h)
    }

    fn classify_in_session(&mut self, h: &FrameHeader) -> Verdict {
        if h.is_heartbeat() {
            return Verdict::Heartbeat;
        }
        self.expected = Some(h.seq + 1);
        Verdict::Deliver
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: Bounds = Bounds { max_jump: 100, confirm: 3, quiet_ticks: 1000 };

    fn f(session: u64, seq: u64) -> FrameHeader {
        FrameHeader::new(7, session, seq, 8)
    }

    fn hb(session: u64, next: u64) -> FrameHeader {
        FrameHeader::heartbeat(7, session, next)
    }

    #[test]
    fn in_order_frames_deliver_and_duplicates_are_late() {
        let mut s = Sequencer::new(7, B);
        assert_eq!(s.classify(&f(1, 5), || 0), Verdict::Deliver);
        assert_eq!(s.classify(&f(1, 6), || 0), Verdict::Deliver);
        assert_eq!(s.classify(&f(1, 6), || 0), Verdict::Late);
        assert_eq!(s.classify(&f(1, 2), || 0), Verdict::Late);
        assert_eq!(s.classify(&hb(1, 7), || 0), Verdict::Heartbeat);
        assert_eq!(s.classify(&FrameHeader::new(8, 1, 7, 8), || 0), Verdict::OtherStream);
        assert_eq!(s.expected(), Some(7));
    }

    #[test]
    fn a_gap_within_the_bound_is_reported_then_the_frame_delivers() {
        let mut s = Sequencer::new(7, B);
        s.classify(&f(1, 0), || 0);
        assert_eq!(s.classify(&f(1, 50), || 0), Verdict::Gap { from: 1, to: 50 });
        s.advance_to(50);
        assert_eq!(s.classify(&f(1, 50), || 0), Verdict::Deliver);
        assert_eq!(s.classify(&hb(1, 60), || 0), Verdict::Gap { from: 51, to: 60 });
    }

    #[test]
    fn one_forged_far_jump_is_ignored_and_the_real_stream_goes_on() {
        let mut s = Sequencer::new(7, B);
        s.classify(&f(1, 0), || 0);
        assert_eq!(s.classify(&f(1, 1 << 40), || 0), Verdict::Unconfirmed);
        assert_eq!(s.classify(&f(1, u64::MAX >> 1), || 0), Verdict::Unconfirmed);
        assert_eq!(s.classify(&f(1, 1), || 0), Verdict::Deliver, "the real frame after the forgery");
    }

    #[test]
    fn a_real_far_jump_is_believed_after_confirming_frames_and_they_are_reported_lost() {
        let mut s = Sequencer::new(7, B);
        s.classify(&f(1, 0), || 0);
        assert_eq!(s.classify(&f(1, 1000), || 0), Verdict::Unconfirmed);
        assert_eq!(s.classify(&f(1, 1001), || 0), Verdict::Unconfirmed);
        assert_eq!(s.classify(&f(1, 1002), || 0), Verdict::Gap { from: 1, to: 1002 });
        s.advance_to(1002);
        assert_eq!(s.classify(&f(1, 1002), || 0), Verdict::Deliver);
    }

    #[test]
    fn another_session_is_refused_while_the_current_one_lives_and_adopted_after_it_falls_silent() {
        let mut s = Sequencer::new(7, B);
        s.classify(&f(1, 0), || 0);
        // A forger (or a second publisher) interleaved with the live one: never adopted.
        for k in 0..10 {
            assert_eq!(s.classify(&f(2, k), || 5000 * k), Verdict::Unconfirmed);
            assert_eq!(s.classify(&f(1, k + 1), || 0), Verdict::Deliver);
        }
        // The live one restarts: session 1 falls silent, session 3 sends; adopted once quiet.
        let t = std::cell::Cell::new(100_000);
        let now = || t.get();
        assert_eq!(s.classify(&f(3, 0), now), Verdict::Unconfirmed);
        assert_eq!(s.classify(&f(3, 1), now), Verdict::Unconfirmed);
        assert_eq!(s.classify(&f(3, 2), now), Verdict::Unconfirmed, "not quiet long enough yet");
        t.set(102_000);
        assert_eq!(s.classify(&f(3, 3), now), Verdict::Gap { from: 0, to: 3 });
        s.advance_to(3);
        assert_eq!(s.classify(&f(3, 3), || 0), Verdict::Deliver);
        assert_eq!((s.session(), s.session_changes()), (Some(3), 1));
        assert_eq!(s.classify(&f(1, 11), || 200_000), Verdict::Unconfirmed, "the old session is foreign now");
        // Its frames replayed later, however many and however quiet the current session: an
        // earlier run is never adopted again (it would deliver its sequence numbers twice).
        for (k, seq) in (0..10).enumerate() {
            assert_eq!(s.classify(&f(1, seq), || 10_000_000 * (k as u64 + 1)), Verdict::Unconfirmed);
        }
        assert_eq!(s.session(), Some(3));
    }
}
