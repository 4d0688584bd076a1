//! The order book at TotalView scale beside its floor, in paired rounds: the figures, the
//! per-round ratios, the noisy-round rule and the verdict (no I/O, no timing: the bench fills
//! it, the renderers print it).
use serde::{Deserialize, Serialize};

use super::verdict::Status;
use super::Spread;

/// The target: the book's per-message p99 at most this many times the floor's.
pub const TARGET_P99_X_FLOOR: f64 = 1.5;

/// A round whose floor p99 is more than this many times from the run's median floor p99 (or
/// less than its inverse) is noisy: reported, left out of the verdict.
pub const NOISY_FLOOR_MOVE: f64 = 2.0;

/// Whether `kept` steady rounds of `rounds` can carry a verdict: more than half of them. (The
/// round whose floor is the reference, [`super::noise_reference`], is never noisy, so "no round
/// kept" never happens; a run whose floor swung in most rounds is what has no verdict.)
pub fn enough_kept(kept: usize, rounds: usize) -> bool {
    kept * 2 > rounds
}

/// Per-message apply cost over one pass of the day (ns; each includes the timer pair).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ApplyCost {
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    /// The whole pass's time over its messages, timers included.
    pub mean_ns: f64,
}

/// One round: the book and the floor over the same day, back to back.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BookRound {
    /// The book ran first this round (rounds alternate).
    pub book_first: bool,
    pub book: ApplyCost,
    pub floor: ApplyCost,
    /// The floor moved more than [`NOISY_FLOOR_MOVE`] from the run's median floor.
    pub noisy: bool,
}

/// `a / b` once the timer pair inside both is taken out of each (the ratio of the work, not of
/// the work plus a constant that pulls every ratio toward 1).
fn ratio_less_timer(a: u64, b: u64, timer: u64) -> f64 {
    a.saturating_sub(timer).max(1) as f64 / b.saturating_sub(timer).max(1) as f64
}

/// One ITCH message type's cost in the first round, book beside floor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypeCost {
    /// The ITCH message type (A add, D delete, E execute, U replace, X cancel, ...).
    pub code: String,
    pub messages: u64,
    pub book_p50_ns: u64,
    pub book_p99_ns: u64,
    pub floor_p50_ns: u64,
    pub floor_p99_ns: u64,
}

/// The book at TotalView scale: one generated day applied by the book and by the floor in
/// alternating rounds. (Default: the figures a bench fills in before [`BookScale::judge`]
/// derives the rest.)
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BookScale {
    pub seed: u64,
    pub stocks: u16,
    /// Messages applied per pass (the whole day).
    pub messages: u64,
    /// Live orders at the day's peak.
    pub peak_orders: u64,
    /// Live orders at the close.
    pub close_orders: u64,
    /// Orders each structure had room for before the day (reserved and touched: no growth
    /// and no page fault while timed).
    pub reserved_orders: u64,
    /// Resident memory each structure took for that room, per live order at the peak.
    pub book_bytes_per_order: f64,
    pub floor_bytes_per_order: f64,
    /// The most orders the book's order table held in its spill map at once during the day
    /// (their slot was held by an older live order when they came); none in reports from
    /// before the table.
    #[serde(default)]
    pub most_spilled: Option<u64>,
    /// The empty timing pair's cost, inside every per-message figure.
    pub timer_ns: u64,
    /// Whether each message was timed between fenced TSC reads (`bench::harness::fenced`):
    /// false where the lab cannot fence (not x86_64); None in a report that does not say
    /// (fenced if made at or after commit 702c100, plain reads before it).
    #[serde(default)]
    pub fenced: Option<bool>,
    /// What the floor does per message.
    pub floor_is: String,
    pub rounds: Vec<BookRound>,
    /// By message type (those of at least 1% of the day), from one more pass of each after the
    /// rounds.
    #[serde(default)]
    pub by_type: Vec<TypeCost>,
    /// Medians over the rounds kept (not noisy).
    pub book: ApplyCost,
    pub floor: ApplyCost,
    pub p50_ratio: Spread,
    pub p99_ratio: Spread,
    pub p999_ratio: Spread,
    pub noisy_rounds: usize,
    /// Met, not met, or noisy (half the rounds or more were noisy, or none ran: no verdict).
    pub verdict: Status,
}

impl BookScale {
    /// Marks noisy rounds and derives the medians, ratios (of the figures less the timer pair)
    /// and verdict from `rounds`.
    pub fn judge(&mut self) {
        let floor_p99 = super::noise_reference(self.rounds.iter().map(|r| r.floor.p99_ns as f64).collect());
        for r in &mut self.rounds {
            let x = r.floor.p99_ns as f64 / floor_p99;
            r.noisy = !(1.0 / NOISY_FLOOR_MOVE..=NOISY_FLOOR_MOVE).contains(&x);
        }
        let kept: Vec<BookRound> = self.rounds.iter().filter(|r| !r.noisy).copied().collect();
        self.noisy_rounds = self.rounds.len() - kept.len();
        let med = |f: &dyn Fn(&BookRound) -> f64| Spread::of(kept.iter().map(f).collect());
        let cost = |f: &dyn Fn(&BookRound) -> ApplyCost| ApplyCost {
            p50_ns: med(&|r| f(r).p50_ns as f64).median as u64,
            p99_ns: med(&|r| f(r).p99_ns as f64).median as u64,
            p999_ns: med(&|r| f(r).p999_ns as f64).median as u64,
            max_ns: med(&|r| f(r).max_ns as f64).median as u64,
            mean_ns: med(&|r| f(r).mean_ns).median,
        };
        self.book = cost(&|r| r.book);
        self.floor = cost(&|r| r.floor);
        let timer = self.timer_ns;
        self.p50_ratio = med(&|r| ratio_less_timer(r.book.p50_ns, r.floor.p50_ns, timer));
        self.p99_ratio = med(&|r| ratio_less_timer(r.book.p99_ns, r.floor.p99_ns, timer));
        self.p999_ratio = med(&|r| ratio_less_timer(r.book.p999_ns, r.floor.p999_ns, timer));
        self.verdict = match !enough_kept(kept.len(), self.rounds.len()) {
            true => Status::Noisy,
            false if self.p99_ratio.median <= TARGET_P99_X_FLOOR => Status::Met,
            false => Status::NotMet,
        };
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn cost(p99: u64) -> ApplyCost {
        ApplyCost { p50_ns: p99 / 4, p99_ns: p99, p999_ns: p99 * 2, max_ns: p99 * 10, mean_ns: p99 as f64 / 3.0 }
    }

    pub(crate) fn scale(rounds: &[(u64, u64)]) -> BookScale {
        let mut b = BookScale {
            seed: 1,
            stocks: 8000,
            messages: 10,
            peak_orders: 5,
            close_orders: 1,
            reserved_orders: 8,
            book_bytes_per_order: 1.0,
            floor_bytes_per_order: 1.0,
            timer_ns: 0,
            fenced: Some(true),
            floor_is: "x".into(),
            rounds: rounds
                .iter()
                .enumerate()
                .map(|(i, &(b, f))| BookRound { book_first: i % 2 == 0, book: cost(b), floor: cost(f), noisy: false })
                .collect(),
            ..BookScale::default()
        };
        b.judge();
        b
    }

    #[test]
    fn a_slow_phase_in_some_rounds_does_not_flip_the_verdict() {
        // Three quiet rounds at 1.4x; two rounds where the whole machine was 3x slower (book
        // and floor alike). A merged histogram's p99 would be the slow phase's; the per-round
        // ratios are not moved, and the slow rounds are noisy.
        let b = scale(&[(140, 100), (420, 300), (140, 100), (420, 300), (140, 100)]);
        assert_eq!(b.noisy_rounds, 2, "{:?}", b.rounds);
        assert_eq!(b.verdict, Status::Met);
        assert!((b.p99_ratio.median - 1.4).abs() < 1e-9);
        assert_eq!((b.book.p99_ns, b.floor.p99_ns), (140, 100));
    }

    #[test]
    fn the_verdict_is_the_median_of_per_round_ratios() {
        // One round where only the book was slow: the median of ratios is still 1.4x; two of
        // five would not carry it either.
        let b = scale(&[(140, 100), (400, 100), (140, 100), (150, 100), (130, 100)]);
        assert_eq!((b.noisy_rounds, b.verdict), (0, Status::Met));
        assert_eq!((b.p99_ratio.min, b.p99_ratio.max), (1.3, 4.0));
        let b = scale(&[(160, 100), (140, 100), (170, 100)]);
        assert_eq!(b.verdict, Status::NotMet, "{:?}", b.p99_ratio);
    }

    #[test]
    fn a_run_noisy_in_most_rounds_gives_no_verdict_and_the_bound_is_2x() {
        // The smallest run that could fool it: three rounds, two of them noisy (floors 5x from
        // the median). One steady round at 1.0x does not make a verdict.
        let b = scale(&[(100, 20), (100, 100), (100, 500)]);
        assert_eq!((b.noisy_rounds, b.verdict), (2, Status::Noisy));
        // One noisy round of three: the two steady ones carry it.
        let b = scale(&[(100, 100), (100, 100), (100, 500)]);
        assert_eq!((b.noisy_rounds, b.verdict), (1, Status::Met));
        // At exactly 2x (and 1/2x) from the median floor a round is kept; just past it, noisy.
        let b = scale(&[(100, 100), (100, 100), (100, 200), (100, 50), (100, 100)]);
        assert_eq!(b.noisy_rounds, 0);
        let b = scale(&[(100, 100), (100, 100), (100, 201), (100, 49), (100, 100)]);
        assert_eq!(b.noisy_rounds, 2);
        assert_eq!(scale(&[]).verdict, Status::Noisy);
    }

    #[test]
    fn ratios_leave_the_timer_pair_out() {
        let mut b = scale(&[(80, 40)]);
        b.timer_ns = 20;
        b.judge();
        assert_eq!(b.p99_ratio.median, 3.0, "(80 - 20) / (40 - 20)");
    }
}
