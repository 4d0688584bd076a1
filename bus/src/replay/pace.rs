//! When each replayed message is due: the pacing modes and the window of messages to replay.
//! Pure: the caller gives the TSC readings.

/// How fast to replay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// At the recording's own pace (its timestamps), times `speed` (2.0: twice as fast).
    AsRecorded {
        /// Multiplies the recording's pace (2.0 replays twice as fast).
        speed: f64,
    },
    /// A fixed rate, messages per second.
    Rate(f64),
    /// As fast as the transport takes them.
    Max,
}

/// Which messages to replay: by time of day (ns since midnight, in the recording's own clock:
/// exchange time for ITCH, UTC for journals and captures) and/or by sequence, ends inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Window {
    /// First time of day to replay (ns since midnight).
    pub from_time: Option<u64>,
    /// Last time of day to replay (ns since midnight).
    pub to_time: Option<u64>,
    /// First sequence to replay.
    pub from_sequence: Option<u64>,
    /// Last sequence to replay.
    pub to_sequence: Option<u64>,
}

/// What the window says of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InWindow {
    /// Before the window: skip it.
    Before,
    /// In the window: replay it.
    In,
    /// Past the end: stop.
    After,
}

pub(crate) const DAY_NS: u64 = 86_400_000_000_000;

impl Window {
    /// Where a message of `sequence` with source time `time_ns` (time of day, or wall ns that
    /// are reduced to a time of day) falls.
    pub fn place(&self, sequence: u64, time_ns: Option<u64>) -> InWindow {
        if self.to_sequence.is_some_and(|t| sequence > t) {
            return InWindow::After;
        }
        let tod = time_ns.map(|t| t % DAY_NS);
        if let (Some(to), Some(t)) = (self.to_time, tod) {
            if t > to {
                return InWindow::After;
            }
        }
        if self.from_sequence.is_some_and(|f| sequence < f) {
            return InWindow::Before;
        }
        if let (Some(from), Some(t)) = (self.from_time, tod) {
            if t < from {
                return InWindow::Before;
            }
        }
        InWindow::In
    }
}

/// A string that is not a time of day.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{given:?} is not a time of day (HH:MM, HH:MM:SS or HH:MM:SS.fraction, 00:00 to 23:59:59.999999999)")]
#[non_exhaustive]
pub struct TimeOfDayError {
    /// What was given.
    pub given: String,
}

/// Parses `HH:MM[:SS[.fraction]]` as nanoseconds since midnight.
pub fn parse_time_of_day(s: &str) -> Result<u64, TimeOfDayError> {
    let bad = || TimeOfDayError { given: s.to_owned() };
    let mut parts = s.split(':');
    let h: u64 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let m: u64 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let sec = parts.next().unwrap_or("0");
    if parts.next().is_some() || h > 23 || m > 59 {
        return Err(bad());
    }
    let (whole, frac) = sec.split_once('.').unwrap_or((sec, ""));
    let whole: u64 = whole.parse().map_err(|_| bad())?;
    if whole > 59 || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let frac_ns: u64 = if frac.is_empty() { 0 } else { format!("{frac:0<9}").parse().map_err(|_| bad())? };
    Ok(((h * 60 + m) * 60 + whole) * 1_000_000_000 + frac_ns)
}

/// The longest step between two source times a replay at the recording's pace waits out by
/// default (60 s). A longer step (a datagram stamped 0, or 56 years ahead; a recorder that was
/// off overnight) is not waited for: the message is due at once and pacing goes on from it.
pub const DEFAULT_MAX_QUIET_NS: u64 = 60_000_000_000;

/// Turns source times (or a rate) into intended send times in TSC ticks.
#[derive(Debug, Clone)]
pub struct Pacer {
    pace: Pace,
    ticks_per_ns: f64,
    /// Where the recording's timeline is anchored: (source ns, TSC it is due at).
    anchor: Option<(u64, u64)>,
    start_tsc: u64,
    prev_source_ns: u64,
    max_quiet_ns: u64,
    last_intended: u64,
    n: u64,
    cut_short: u64,
}

impl Pacer {
    /// A pacer whose first message is due at `start_tsc`.
    pub fn new(pace: Pace, ticks_per_ns: f64, start_tsc: u64) -> Pacer {
        Pacer {
            pace,
            ticks_per_ns,
            anchor: None,
            start_tsc,
            prev_source_ns: 0,
            max_quiet_ns: DEFAULT_MAX_QUIET_NS,
            last_intended: start_tsc,
            n: 0,
            cut_short: 0,
        }
    }

    /// Waits out source steps up to `ns` long (see [`DEFAULT_MAX_QUIET_NS`]).
    pub fn with_max_quiet(mut self, ns: u64) -> Pacer {
        self.max_quiet_ns = ns;
        self
    }

    /// Source steps longer than the bound (either way) that were not waited out.
    pub fn cut_short(&self) -> u64 {
        self.cut_short
    }

    /// When the next message (with source time `source_ns`, if it has one) is due, in TSC ticks;
    /// None when pacing is `Max`. Never earlier than the previous message (a source clock that
    /// steps back does not make messages due in the past), and never more than the bound after
    /// it (a source clock that leaps does not make the replay wait for years).
    pub fn intended(&mut self, source_ns: Option<u64>) -> Option<u64> {
        let i = self.n;
        self.n += 1;
        let due = match self.pace {
            Pace::Max => return None,
            // (a float-to-integer cast saturates)
            Pace::Rate(r) => self.start_tsc.saturating_add((i as f64 * 1e9 / r * self.ticks_per_ns) as u64),
            Pace::AsRecorded { speed } => {
                let t = source_ns.unwrap_or(self.prev_source_ns);
                let leap = t.abs_diff(self.prev_source_ns) > self.max_quiet_ns;
                let (t0, due0) = match self.anchor {
                    Some(a) if !leap => a,
                    _ => {
                        self.cut_short += u64::from(self.anchor.is_some());
                        let a = (t, self.last_intended);
                        self.anchor = Some(a);
                        a
                    }
                };
                self.prev_source_ns = t;
                due0.saturating_add((t.saturating_sub(t0) as f64 / speed * self.ticks_per_ns) as u64)
            }
        };
        let due = due.max(self.last_intended);
        self.last_intended = due;
        Some(due)
    }

    /// Messages paced so far.
    pub fn count(&self) -> u64 {
        self.n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_of_day_parse_and_bad_ones_say_the_format() {
        assert_eq!(parse_time_of_day("09:30"), Ok(34_200_000_000_000));
        assert_eq!(parse_time_of_day("09:30:01.5"), Ok(34_201_500_000_000));
        assert_eq!(parse_time_of_day("23:59:59.999999999"), Ok(86_399_999_999_999));
        for bad in ["9", "24:00", "09:60", "09:30:61", "09:30:01.1234567890", "a:b", "09:30:01:00"] {
            assert!(parse_time_of_day(bad).unwrap_err().to_string().contains("HH:MM"), "{bad}");
        }
    }

    #[test]
    fn windows_place_by_sequence_and_time_of_day_inclusively() {
        let w = Window { from_sequence: Some(10), to_sequence: Some(20), ..Window::default() };
        assert_eq!(
            (w.place(9, None), w.place(10, None), w.place(20, None), w.place(21, None)),
            (InWindow::Before, InWindow::In, InWindow::In, InWindow::After)
        );
        let t = Window { from_time: Some(100), to_time: Some(200), ..Window::default() };
        assert_eq!(t.place(0, Some(50)), InWindow::Before);
        assert_eq!(t.place(0, Some(DAY_NS * 3 + 150)), InWindow::In, "wall time reduces to a time of day");
        assert_eq!(t.place(0, Some(201)), InWindow::After);
        assert_eq!(t.place(0, None), InWindow::In, "a message without a time is not filtered by time");
    }

    #[test]
    fn pacing_follows_the_source_the_rate_or_nothing() {
        let mut p = Pacer::new(Pace::AsRecorded { speed: 2.0 }, 2.0, 1000);
        assert_eq!(p.intended(Some(5_000)), Some(1000));
        assert_eq!(p.intended(Some(6_000)), Some(1000 + 1000)); // 1000 ns / 2 * 2 ticks
        assert_eq!(p.intended(Some(4_000)), Some(2000), "a clock stepping back does not go back");
        let mut r = Pacer::new(Pace::Rate(1e6), 1.0, 0);
        assert_eq!((r.intended(None), r.intended(None), r.intended(None)), (Some(0), Some(1000), Some(2000)));
        assert_eq!(Pacer::new(Pace::Max, 1.0, 0).intended(Some(1)), None);
    }

    #[test]
    fn a_source_time_of_0_or_56_years_ahead_is_not_waited_for() {
        // A capture whose first datagram is stamped 0 and the rest at today's wall time: the
        // second message was due 56 years later (a core spun until then).
        let today = 1_796_000_000_000_000_000u64;
        let mut p = Pacer::new(Pace::AsRecorded { speed: 1.0 }, 1.0, 1000);
        assert_eq!(p.intended(Some(0)), Some(1000));
        assert_eq!(p.intended(Some(today)), Some(1000), "due at once, not in 56 years");
        assert_eq!(p.intended(Some(today + 500)), Some(1500), "pacing goes on from it");
        // One stamped 0 in the middle, and the stream after it.
        assert_eq!(p.intended(Some(0)), Some(1500));
        assert_eq!(p.intended(Some(today + 700)), Some(1500));
        assert_eq!(p.intended(Some(today + 900)), Some(1700));
        assert_eq!(p.cut_short(), 3);
        // A quiet spell inside the bound is waited out; one past it is not.
        let mut q = Pacer::new(Pace::AsRecorded { speed: 1.0 }, 1.0, 0).with_max_quiet(10_000);
        assert_eq!(
            (q.intended(Some(5)), q.intended(Some(10_005)), q.intended(Some(20_006))),
            (Some(0), Some(10_000), Some(10_000))
        );
        assert_eq!(q.cut_short(), 1);
    }
}
