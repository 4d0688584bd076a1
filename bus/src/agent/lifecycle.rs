//! The life of a stream an app reads, as one small state machine: waiting for its publisher,
//! live, over (its publisher closed or died, or a stream that cannot say it ended went quiet),
//! then drained (nothing outstanding, or the drain time ran out). Every trading app used to
//! hand-write this in its idle path; here it takes `now` and what the app observed as arguments,
//! so it is tested without processes or sleeps, and an app only acts on the [`Step`] it returns.
use std::time::{Duration, Instant};

use crate::stream::PeerState;

/// How long each phase may last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LifecycleConfig {
    /// How long to wait for the publisher (or the first message) before giving up.
    pub wait: Duration,
    /// A stream that cannot say its publisher finished (ud-mcast) counts as over after this long
    /// without a message once one came, and after `wait` if none came. None: only the
    /// publisher's state ends it.
    pub quiet: Option<Duration>,
    /// Once over, how long to wait for what is outstanding (orders awaiting reports).
    pub drain: Duration,
}

/// Where the stream is (in the order it goes through them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Neither its publisher nor a message seen yet.
    Waiting,
    /// Seen (publisher live, or data came).
    Live,
    /// Its publisher is gone; what was outstanding is being waited for.
    Over,
    /// Finished: nothing more will come and nothing is awaited.
    Done,
}

/// Why the stream is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The publisher closed the stream.
    Closed,
    /// The publisher's process ended without closing it.
    Died {
        /// Its pid.
        pid: u64,
    },
    /// No message for `quiet` (a stream that cannot say it ended).
    Quiet,
    /// Neither the publisher nor a message appeared within `wait`.
    NeverSeen,
    /// The app ended it (the transport failed, or another stream said it is over).
    Ended,
}

/// What changed at this look: the app acts on it (says so, stops trading, exits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing changed.
    Same,
    /// The publisher or its first message was seen.
    Seen,
    /// The stream is over, for this reason; outstanding work is awaited next.
    Over(Ended),
    /// Everything outstanding settled: done.
    Drained,
    /// The drain time ran out with `outstanding` still awaited: done anyway.
    DrainTimedOut {
        /// What was still awaited.
        outstanding: u64,
    },
}

/// One stream's lifecycle.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    cfg: LifecycleConfig,
    phase: Phase,
    /// When the current phase began.
    since: Instant,
    /// Messages seen at the last look, and when that count last moved.
    messages: u64,
    moved: Instant,
    ended: Option<Ended>,
}

impl Lifecycle {
    /// A stream not seen yet, as of `now`.
    pub fn new(cfg: LifecycleConfig, now: Instant) -> Lifecycle {
        Lifecycle { cfg, phase: Phase::Waiting, since: now, messages: 0, moved: now, ended: None }
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Why it ended, once it did.
    pub fn ended(&self) -> Option<Ended> {
        self.ended
    }

    fn enter(&mut self, phase: Phase, now: Instant) {
        (self.phase, self.since) = (phase, now);
    }

    fn over(&mut self, why: Ended, now: Instant) -> Step {
        self.ended = Some(why);
        self.enter(Phase::Over, now);
        Step::Over(why)
    }

    /// One look, at `now`: the publisher's state, the messages read so far, and the work still
    /// outstanding (orders awaiting reports). Call it when idle; a stream read to its end is
    /// over only at a look that found nothing more to read (the app's duty cycle did no work),
    /// so nothing the publisher sent before closing is left behind.
    pub fn step(&mut self, now: Instant, publisher: PeerState, messages: u64, outstanding: u64) -> Step {
        if messages != self.messages {
            (self.messages, self.moved) = (messages, now);
        }
        match self.phase {
            Phase::Waiting if publisher == PeerState::Live || messages > 0 => {
                self.enter(Phase::Live, now);
                self.moved = now;
                // A publisher already gone with its data read: over at the next look.
                Step::Seen
            }
            Phase::Waiting if now.saturating_duration_since(self.since) >= self.cfg.wait => {
                let step = self.over(Ended::NeverSeen, now);
                self.settle(now, outstanding).unwrap_or(step)
            }
            Phase::Waiting => Step::Same,
            Phase::Live => match publisher {
                PeerState::Closed => self.over(Ended::Closed, now),
                PeerState::Died { pid } => self.over(Ended::Died { pid }, now),
                PeerState::Live => match self.cfg.quiet {
                    Some(q) if self.messages > 0 && now.saturating_duration_since(self.moved) >= q => {
                        self.over(Ended::Quiet, now)
                    }
                    Some(_) if self.messages == 0 && now.saturating_duration_since(self.since) >= self.cfg.wait => {
                        self.over(Ended::NeverSeen, now)
                    }
                    _ => Step::Same,
                },
            },
            Phase::Over => self.settle(now, outstanding).unwrap_or(Step::Same),
            Phase::Done => Step::Same,
        }
    }

    /// Ends the stream now (its transport failed, or another stream said it is over); what is
    /// outstanding is still awaited. `Step::Same` if it already ended.
    pub fn finish(&mut self, now: Instant) -> Step {
        match self.phase {
            Phase::Waiting | Phase::Live => self.over(Ended::Ended, now),
            Phase::Over | Phase::Done => Step::Same,
        }
    }

    fn settle(&mut self, now: Instant, outstanding: u64) -> Option<Step> {
        if outstanding == 0 {
            self.enter(Phase::Done, now);
            return Some(Step::Drained);
        }
        if now.saturating_duration_since(self.since) >= self.cfg.drain {
            self.enter(Phase::Done, now);
            return Some(Step::DrainTimedOut { outstanding });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: LifecycleConfig =
        LifecycleConfig { wait: Duration::from_secs(30), quiet: None, drain: Duration::from_secs(10) };

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn seen_then_closed_then_drained_once_nothing_is_outstanding() {
        let t0 = Instant::now();
        let mut l = Lifecycle::new(CFG, t0);
        assert_eq!(l.step(at(t0, 10), PeerState::Closed, 0, 0), Step::Same, "a ring left closed by an earlier run");
        assert_eq!(l.step(at(t0, 20), PeerState::Live, 0, 0), Step::Seen);
        assert_eq!(l.step(at(t0, 30), PeerState::Live, 5, 2), Step::Same);
        assert_eq!(l.step(at(t0, 40), PeerState::Closed, 9, 2), Step::Over(Ended::Closed));
        assert_eq!(l.step(at(t0, 50), PeerState::Closed, 9, 1), Step::Same, "one order still awaited");
        assert_eq!(l.step(at(t0, 60), PeerState::Closed, 9, 0), Step::Drained);
        assert_eq!((l.phase(), l.ended()), (Phase::Done, Some(Ended::Closed)));
        assert_eq!(l.step(at(t0, 70), PeerState::Live, 9, 0), Step::Same, "done stays done");
    }

    #[test]
    fn data_seen_counts_as_the_publisher_seen_and_a_dead_one_is_over() {
        let t0 = Instant::now();
        let mut l = Lifecycle::new(CFG, t0);
        // The publisher finished before we looked, but its messages were read.
        assert_eq!(l.step(at(t0, 1), PeerState::Closed, 3, 0), Step::Seen);
        assert_eq!(l.step(at(t0, 2), PeerState::Died { pid: 7 }, 3, 0), Step::Over(Ended::Died { pid: 7 }));
        assert_eq!(l.step(at(t0, 3), PeerState::Died { pid: 7 }, 3, 0), Step::Drained);
    }

    #[test]
    fn never_seen_within_the_wait_ends_it() {
        let t0 = Instant::now();
        let mut l = Lifecycle::new(CFG, t0);
        assert_eq!(l.step(at(t0, 29_999), PeerState::Closed, 0, 0), Step::Same);
        assert_eq!(l.step(at(t0, 30_000), PeerState::Closed, 0, 0), Step::Drained);
        assert_eq!(l.ended(), Some(Ended::NeverSeen));
    }

    #[test]
    fn a_stream_that_cannot_say_it_ended_is_over_after_its_quiet_time_once_data_came() {
        let t0 = Instant::now();
        let cfg = LifecycleConfig { quiet: Some(Duration::from_secs(2)), ..CFG };
        let mut l = Lifecycle::new(cfg, t0);
        assert_eq!(l.step(at(t0, 0), PeerState::Live, 0, 0), Step::Seen);
        assert_eq!(l.step(at(t0, 5_000), PeerState::Live, 0, 0), Step::Same, "quiet before any data is waiting");
        assert_eq!(l.step(at(t0, 5_001), PeerState::Live, 1, 0), Step::Same);
        assert_eq!(l.step(at(t0, 6_900), PeerState::Live, 2, 0), Step::Same, "data moved");
        assert_eq!(l.step(at(t0, 8_899), PeerState::Live, 2, 0), Step::Same);
        assert_eq!(l.step(at(t0, 8_900), PeerState::Live, 2, 0), Step::Over(Ended::Quiet));
        // No message at all on such a stream: over after `wait`.
        let mut l = Lifecycle::new(cfg, t0);
        assert_eq!(l.step(at(t0, 0), PeerState::Live, 0, 0), Step::Seen);
        assert_eq!(l.step(at(t0, 29_999), PeerState::Live, 0, 0), Step::Same);
        assert_eq!(l.step(at(t0, 30_000), PeerState::Live, 0, 0), Step::Over(Ended::NeverSeen));
    }

    #[test]
    fn finish_ends_a_live_stream_once_and_still_drains() {
        let t0 = Instant::now();
        let mut l = Lifecycle::new(CFG, t0);
        l.step(at(t0, 0), PeerState::Live, 1, 1);
        assert_eq!(l.finish(at(t0, 1)), Step::Over(Ended::Ended));
        assert_eq!(l.finish(at(t0, 2)), Step::Same);
        assert_eq!(l.step(at(t0, 3), PeerState::Live, 1, 0), Step::Drained);
    }

    #[test]
    fn the_drain_is_bounded() {
        let t0 = Instant::now();
        let mut l = Lifecycle::new(CFG, t0);
        l.step(at(t0, 0), PeerState::Live, 1, 4);
        assert_eq!(l.step(at(t0, 100), PeerState::Closed, 1, 4), Step::Over(Ended::Closed));
        assert_eq!(l.step(at(t0, 10_099), PeerState::Closed, 1, 4), Step::Same);
        assert_eq!(l.step(at(t0, 10_100), PeerState::Closed, 1, 3), Step::DrainTimedOut { outstanding: 3 });
    }
}
