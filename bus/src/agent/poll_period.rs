//! How long one empty pass of a poll loop takes. A message that lands while a reader is busy
//! elsewhere in its loop waits, on average, half that pass before the reader looks again, so a
//! loop that does more per pass than a bare reader shows up as extra latency on every hop it
//! reads. This measures the pass where it runs, at a TSC read per 64 empty passes.
use crate::time::Tsc;

/// Empty passes in a row per timed window: one TSC read per window keeps the clock's own cost
/// (tens of ns under a hypervisor) to under a ns a pass, and a window fits between two ticks
/// 10 µs apart, so a day's windows come from between its ticks, not only from before and after.
const SPAN: u32 = 64;

/// Per-pass figures counted one TSC tick apart, up to this many ticks (about 1.7 µs at
/// 2.4 ticks/ns); longer ones (a host that took the core) go in the last bucket.
const BUCKETS: usize = 4096;

/// Times a poll loop's empty passes: call [`PollPeriod::empty`] after each pass that found
/// nothing and [`PollPeriod::busy`] after each that found work. Only windows of 64 (`SPAN`) empty
/// passes in a row are timed (a busy pass starts the count again); every window of the run is
/// counted, and the figure is the median window, so a host that takes the core for
/// milliseconds in a few windows does not decide it. No allocation and no syscall: a fixed
/// table of counts (16 KiB), one entry touched per window.
#[derive(Debug, Clone)]
pub struct PollPeriod {
    /// Empty passes since the window began.
    run: u32,
    /// TSC when the window began; 0: none begun.
    since: u64,
    /// Windows by ticks per pass.
    counts: Box<[u32; BUCKETS]>,
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
        let now = tsc.now();
        if self.since != 0 {
            let per_pass = (now.saturating_sub(self.since) / u64::from(SPAN)) as usize;
            let c = &mut self.counts[per_pass.min(BUCKETS - 1)];
            *c = c.saturating_add(1);
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

    /// The median window's ns per empty pass (to the TSC tick), or None before the first
    /// window.
    pub fn median_ns(&self, ticks_per_ns: f64) -> Option<f64> {
        let total: u64 = self.counts.iter().map(|&c| u64::from(c)).sum();
        if total == 0 || ticks_per_ns <= 0.0 {
            return None;
        }
        let mut seen = 0u64;
        let ticks = self.counts.iter().position(|&c| {
            seen += u64::from(c);
            seen * 2 > total
        })?;
        Some(ticks as f64 / ticks_per_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_figure_is_the_median_window_not_one_the_host_stretched() {
        let tsc = Tsc::new();
        let ticks_per_ns = crate::time::ticks_per_ns();
        let mut p = PollPeriod::new();
        for _ in 0..=SPAN * 5 {
            p.empty(&tsc);
        }
        // One window with a 5 ms stall in it (a host taking the core).
        std::thread::sleep(std::time::Duration::from_millis(5));
        for _ in 0..SPAN * 2 {
            p.empty(&tsc);
        }
        assert_eq!(p.windows(), 7);
        let ns = p.median_ns(ticks_per_ns).expect("timed");
        // A stalled window is 5 ms / 1024, about 4.9 µs a pass; the others a few ns to a few
        // hundred (a TSC read per window, a pause-free loop).
        assert!(ns < 1_000.0, "the median took the stalled window: {ns} ns a pass");
        assert!(ns > 0.0);
    }

    #[test]
    fn the_median_is_read_from_the_counts_of_every_window() {
        let mut p = PollPeriod::new();
        // Four windows of 10 ticks a pass, two of 40, one stalled past the table: median 10.
        for (ticks, n) in [(10, 4), (40, 2), (BUCKETS * 9, 1)] {
            p.counts[ticks.min(BUCKETS - 1)] += n;
            p.timed += u64::from(n);
        }
        assert_eq!(p.median_ns(2.0), Some(5.0));
        p.counts[40] += 2;
        assert_eq!(p.median_ns(2.0), Some(20.0), "the fifth of nine is at 40 ticks");
        assert_eq!(PollPeriod::new().median_ns(2.0), None);
    }
}
