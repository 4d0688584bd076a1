//! The day's cast and its clock: tickers, reference prices, and when each event happens.
//!
//! Arrivals follow a Poisson process whose intensity is U-shaped over the trading day (busy at
//! the open and the close, quiet at lunch, as every equity feed is), with bursts: an event often
//! triggers reactions microseconds later.
use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal};

/// The open, 09:30:00, in ns since midnight.
pub const OPEN_NS: u64 = 34_200 * 1_000_000_000;
/// The close, 16:00:00, in ns since midnight.
pub const CLOSE_NS: u64 = 57_600 * 1_000_000_000;
const MINUTES: usize = 390;

/// A listed stock.
#[derive(Debug, Clone)]
pub struct Stock {
    /// Its locate code (index in the directory, from 1).
    pub locate: u16,
    /// Its ticker, space-padded ASCII as ITCH carries it.
    pub name: [u8; 8],
    /// Reference price in ITCH Price(4) units (1/10,000 dollar), a whole number of cents.
    pub price: u32,
}

/// `n` stocks with distinct 2-4 letter tickers and log-normal prices (median about $40, most
/// between $5 and $300).
pub fn listing(rng: &mut impl Rng, n: u16) -> Vec<Stock> {
    let prices = LogNormal::new(40f64.ln(), 1.0).expect("valid log-normal parameters");
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(usize::from(n));
    while out.len() < usize::from(n) {
        let len = rng.random_range(2..=4);
        let mut name = *b"        ";
        for c in name.iter_mut().take(len) {
            *c = rng.random_range(b'A'..=b'Z');
        }
        if !seen.insert(name) {
            continue;
        }
        let dollars: f64 = prices.sample(rng).clamp(1.0, 2_000.0);
        let cents = (dollars * 100.0).round() as u32;
        out.push(Stock { locate: out.len() as u16 + 1, name, price: cents * 100 });
    }
    out
}

/// Event times over the trading day.
pub struct Clock {
    /// Cumulative intensity at the end of each minute.
    cumulative: Vec<f64>,
    exp: Exp<f64>,
    burst: Exp<f64>,
    /// Intensity-time consumed so far, in units where the whole day is `events`.
    s: f64,
    scale: f64,
    last: u64,
}

/// Share of events that are reactions to the previous one (same microsecond neighbourhood).
const BURST_P: f64 = 0.35;

impl Clock {
    /// A clock for about `events` events over 09:30-16:00.
    pub fn new(events: u64) -> Clock {
        let mut acc = 0.0;
        let cumulative = (0..MINUTES)
            .map(|m| {
                let m = m as f64;
                acc += 1.0 + 4.0 * (-m / 15.0).exp() + 2.5 * (-(389.0 - m) / 15.0).exp();
                acc
            })
            .collect();
        let independent = (events as f64 * (1.0 - BURST_P)).max(1.0);
        Clock {
            cumulative,
            exp: Exp::new(1.0).expect("rate 1"),
            burst: Exp::new(1.0 / 3_000.0).expect("mean 3 us"),
            s: 0.0,
            scale: 1.0 / independent,
            last: OPEN_NS,
        }
    }

    /// The next event time (non-decreasing, before the close).
    pub fn next(&mut self, rng: &mut impl Rng) -> u64 {
        let t = if rng.random_bool(BURST_P) {
            self.last + self.burst.sample(rng) as u64 + 1
        } else {
            self.s += self.exp.sample(rng) * self.scale;
            self.at(self.s.min(0.999_999))
        };
        self.last = t.max(self.last).min(CLOSE_NS - 1);
        self.last
    }

    /// Wall time at fraction `u` of the day's intensity.
    fn at(&self, u: f64) -> u64 {
        let total = *self.cumulative.last().expect("390 minutes");
        let target = u * total;
        let m = self.cumulative.partition_point(|&c| c < target).min(MINUTES - 1);
        let lo = if m == 0 { 0.0 } else { self.cumulative[m - 1] };
        let frac = (target - lo) / (self.cumulative[m] - lo);
        OPEN_NS + ((m as f64 + frac) * 60e9) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn tickers_are_distinct_and_prices_whole_cents() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let l = listing(&mut rng, 500);
        let names: std::collections::HashSet<_> = l.iter().map(|s| s.name).collect();
        assert_eq!(names.len(), 500);
        assert!(l.iter().all(|s| s.price % 100 == 0 && s.price >= 10_000));
        assert_eq!(l.last().unwrap().locate, 500);
    }

    #[test]
    fn the_day_is_u_shaped_and_time_never_goes_back() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let n = 200_000;
        let mut c = Clock::new(n);
        let mut per_half_hour = [0u32; 13];
        let mut last = 0;
        for _ in 0..n {
            let t = c.next(&mut rng);
            assert!(t >= last && (OPEN_NS..CLOSE_NS).contains(&t));
            last = t;
            per_half_hour[((t - OPEN_NS) / 1_800_000_000_000) as usize] += 1;
        }
        let lunch = per_half_hour[6];
        assert!(per_half_hour[0] > 2 * lunch && per_half_hour[12] > lunch, "{per_half_hour:?}");
        assert!(last > CLOSE_NS - 600_000_000_000, "the events span the day: last at {last}");
    }
}
