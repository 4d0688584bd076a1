//! How long one empty pass of a poll loop takes. A message that lands while a reader is busy
//! elsewhere in its loop waits for the reader's next look: typically about half a pass, when the
//! passes are alike (passes of uneven length make the wait longer: an arrival falls more often
//! in a long one). So a loop that does more per pass than a bare reader shows up as extra
//! latency on every hop it reads. This measures the pass where it runs, at a TSC read per 64
//! empty passes.
use crate::time::Tsc;

/// Empty passes in a row per timed window: one TSC read per window keeps the clock's own cost
/// (tens of ns under a hypervisor) to under a ns a pass, and a window fits between two ticks
/// 10 µs apart, so a day's windows come from between its ticks, not only from before and after.
const SPAN: u32 = 64;

/// Per-pass figures counted one TSC tick apart, up to this many ticks (about 1.7 µs at
/// 2.4 ticks/ns); longer ones (a host that took the core, a loop that yields or parks) go in
/// the last bucket, which is a bound, not a figure.
const BUCKETS: usize = 4096;

/// Times a poll loop's empty passes: call [`PollPeriod::empty`] after each pass that found
/// nothing and [`PollPeriod::busy`] after each that found work. Only windows of 64 (`SPAN`) empty
/// passes in a row are timed (a busy pass starts the count again); every window of the run is
/// counted, and the figure is the median window, so a host that takes the core for
/// milliseconds in a few windows does not decide it. No allocation and no syscall: a fixed
/// table of counts (32 KiB, made with the value), one entry touched per window.
#[derive(Debug, Clone)]
pub struct PollPeriod {
    /// Empty passes since the window began.
    run: u32,
    /// TSC when the window began; 0: none begun.
    since: u64,
    /// Windows by ticks per pass (u64: an idle loop makes a few hundred thousand windows a
    /// second, which would fill a u32 in hours).
    counts: Box<[u64; BUCKETS]>,
    /// Windows timed in all.
    timed: u64,
}

impl Default for PollPeriod {
    fn default() -> Self {
        PollPeriod::new()
    }
}

impl PollPeriod {
    /// Nothing timed yet. Allocates its table: make it before the hot loop.
    pub fn new() -> PollPeriod {
        PollPeriod { run: 0, since: 0, counts: Box::new([0; BUCKETS]), timed: 0 }
    }

    /// A pass found nothing.
    #[inline]
    pub fn empty(&mut self, tsc: &Tsc) {
        self.run += 1;
        if self.run < SPAN && self.since != 0 {
            return;
        }
        self.window_at(tsc.now());
    }

    /// A window ends (or, with none under way, begins) at TSC `now`.
    #[inline]
    fn window_at(&mut self, now: u64) {
        if self.since != 0 {
            let per_pass = (now.saturating_sub(self.since) / u64::from(SPAN)) as usize;
            self.counts[per_pass.min(BUCKETS - 1)] += 1;
            self.timed += 1;
        }
        (self.since, self.run) = (now, 0);
    }

    /// A pass found work: the window under way is not timed.
    #[inline]
    pub fn busy(&mut self) {
        (self.since, self.run) = (0, 0);
    }

    /// Windows timed so far.
    pub fn windows(&self) -> u64 {
        self.timed
    }

    /// The median window's ns per empty pass (to the TSC tick). None before the first window,
    /// and None when the median window is past the table (over 4,095 ticks a pass: a loop that
    /// yields or parks, or a host that held the core through most windows): that is a bound,
    /// not a figure.
    pub fn median_ns(&self, ticks_per_ns: f64) -> Option<f64> {
        if self.timed == 0 || ticks_per_ns <= 0.0 {
            return None;
        }
        let mut seen = 0u64;
        let ticks = self.counts.iter().position(|&c| {
            seen += c;
            seen * 2 > self.timed
        })?;
        (ticks < BUCKETS - 1).then(|| ticks as f64 / ticks_per_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window of empty passes ending `ticks` after the last, fed as a timestamp.
    fn window(p: &mut PollPeriod, now: &mut u64, ticks: u64) {
        *now += ticks;
        p.window_at(*now);
    }

    #[test]
    fn nothing_is_timed_until_a_whole_window_of_empty_passes_in_a_row() {
        let tsc = Tsc::new();
        let mut p = PollPeriod::new();
        assert_eq!(p.median_ns(1.0), None);
        // The first empty pass starts a window; SPAN - 1 more do not end it.
        for _ in 0..SPAN {
            p.empty(&tsc);
        }
        assert_eq!(p.windows(), 0);
        p.empty(&tsc);
        assert_eq!(p.windows(), 1);
        // Work in the middle of a window: that window is dropped, and the next starts afresh.
        for _ in 0..SPAN / 2 {
            p.empty(&tsc);
        }
        p.busy();
        for _ in 0..SPAN {
            p.empty(&tsc);
        }
        assert_eq!(p.windows(), 1, "a window with work in it was timed");
        p.empty(&tsc);
        assert_eq!(p.windows(), 2);
    }

    #[test]
    fn a_window_is_its_ticks_over_its_passes_and_the_figure_the_median_window() {
        let mut p = PollPeriod::new();
        let mut now = 1_000;
        // The first window begins; then four windows of 10 ticks a pass, two of 40, and one a
        // host stretched past the table.
        p.window_at(now);
        for ticks in [640, 640, 2_560, 640, 2_560, 640, 64 * 5_000_000] {
            window(&mut p, &mut now, ticks);
        }
        assert_eq!(p.windows(), 7);
        assert_eq!(p.median_ns(2.0), Some(5.0), "10 ticks a pass at 2 ticks/ns");
        // Two more of 40: the fifth of nine is at 40.
        window(&mut p, &mut now, 2_560);
        window(&mut p, &mut now, 2_560);
        assert_eq!(p.median_ns(2.0), Some(20.0));
        // A pass of 63 ticks over 64 passes counts 0 ticks a pass, not 1: the division is by
        // the window's passes.
        let mut q = PollPeriod::new();
        let mut t = 1;
        q.window_at(t);
        window(&mut q, &mut t, 63);
        assert_eq!(q.median_ns(1.0), Some(0.0));
    }

    #[test]
    fn a_median_past_the_table_is_a_bound_not_a_figure() {
        let mut p = PollPeriod::new();
        let mut now = 1;
        p.window_at(now);
        // Three of four windows parked for a millisecond (at 1 tick/ns: 15,625 ticks a pass).
        for ticks in [1_000_000, 640, 1_000_000, 1_000_000] {
            window(&mut p, &mut now, ticks);
        }
        assert_eq!(p.median_ns(1.0), None);
        assert_eq!(p.windows(), 4);
    }

    #[test]
    fn a_stall_in_one_window_does_not_decide_the_figure() {
        let tsc = Tsc::new();
        let mut p = PollPeriod::new();
        for _ in 0..=SPAN * 5 {
            p.empty(&tsc);
        }
        // One window with a 5 ms stall in it (a host taking the core): 5 ms / 64 passes, past
        // the table at any TSC rate over 0.06 ticks/ns.
        std::thread::sleep(std::time::Duration::from_millis(5));
        for _ in 0..SPAN * 2 {
            p.empty(&tsc);
        }
        assert_eq!(p.windows(), 7);
        // Whatever the machine's speed, the median is a window the sleep was not in.
        assert!(p.median_ns(crate::time::ticks_per_ns()).is_some(), "the stalled window decided the figure");
        assert_eq!(p.counts[BUCKETS - 1], 1, "the stalled window is counted, past the table");
    }
}
