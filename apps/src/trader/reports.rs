//! Which execution reports are this run's, and what a missing or repeated one means.
//!
//! The gateway answers orders in the order it takes them from the order ring, one report each.
//! So a report for this run's order `n` settles `n`, and also tells that every earlier order
//! still awaiting its report will never get one (the report was lost: a gateway that died with
//! it unpublished, or a report ring reset): those are counted as lost and leave the in-flight
//! count, so the trader does not stall at its in-flight limit for ever. A report for an order
//! already settled is a duplicate; one for an id this run never sent is not ours (a dead
//! predecessor's, left on the ring). Matching strictly by "the next id due" turned one lost
//! report into every later report being "unexpected", and a trader that stopped trading.
//!
//! When no later report comes at all (every in-flight order's report lost, or a report ring
//! reset with nothing after it), [`Silence`] says when the wait has gone on too long: the orders
//! still awaiting are then counted lost ([`Reports::expire`]) and the trader trades on. A report
//! that comes after that is counted as a duplicate (its order was settled), never twice.
//!
//! Pure: no bus, no clock; time is an argument (unit-tested below).
use std::time::{Duration, Instant};

/// What one report is, for this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// One of ours; `lost` earlier orders will get no report.
    Ours { lost: u64 },
    /// For an order already settled (answered twice).
    Duplicate,
    /// Not for an order this run sent.
    NotOurs,
}

/// This run's orders are `id_base + 1 ..= id_base + sent`; those up to `id_base + settled` are
/// settled (answered or lost).
#[derive(Debug, Clone, Copy)]
pub struct Reports {
    id_base: u64,
    settled: u64,
}

impl Reports {
    pub fn new(id_base: u64) -> Reports {
        Reports { id_base, settled: 0 }
    }

    /// Classifies a report for `client_order_id`, `sent` orders having gone out so far.
    #[inline]
    pub fn on_report(&mut self, client_order_id: u64, sent: u64) -> Match {
        let Some(n) = client_order_id.checked_sub(self.id_base).filter(|&n| n >= 1 && n <= sent) else {
            return Match::NotOurs;
        };
        if n <= self.settled {
            return Match::Duplicate;
        }
        let lost = n - self.settled - 1;
        self.settled = n;
        Match::Ours { lost }
    }

    /// Settles every order sent so far (`sent`) that has no report yet, as lost; returns how
    /// many that was.
    pub fn expire(&mut self, sent: u64) -> u64 {
        let lost = sent.saturating_sub(self.settled);
        self.settled = self.settled.max(sent);
        lost
    }
}

/// How long the trader has waited for reports with orders in flight and nothing moving.
#[derive(Debug, Clone, Copy)]
pub struct Silence {
    seen: (u64, u64),
    since: Instant,
}

impl Silence {
    pub fn new(now: Instant) -> Silence {
        Silence { seen: (0, 0), since: now }
    }

    /// True once `limit` has passed with orders awaiting reports (`waiting`) and neither the
    /// reports taken nor the orders sent (`progress`) moving; the wait then starts again.
    pub fn expired(&mut self, progress: (u64, u64), waiting: bool, now: Instant, limit: Duration) -> bool {
        if progress != self.seen || !waiting {
            (self.seen, self.since) = (progress, now);
            return false;
        }
        if now.saturating_duration_since(self.since) < limit {
            return false;
        }
        self.since = now;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 7 << 32;

    #[test]
    fn a_lost_report_settles_its_order_and_the_next_reports_still_match() {
        let mut r = Reports::new(BASE);
        assert_eq!(r.on_report(BASE + 1, 5), Match::Ours { lost: 0 });
        // The report of order 2 never comes: order 3's settles both.
        assert_eq!(r.on_report(BASE + 3, 5), Match::Ours { lost: 1 });
        assert_eq!(r.on_report(BASE + 4, 5), Match::Ours { lost: 0 }, "not 'unexpected' from here on");
        assert_eq!(r.on_report(BASE + 2, 5), Match::Duplicate, "a late copy of a settled order");
    }

    #[test]
    fn duplicates_and_other_runs_reports_are_told_apart_from_ours() {
        let mut r = Reports::new(BASE);
        assert_eq!(r.on_report(BASE + 1, 2), Match::Ours { lost: 0 });
        assert_eq!(r.on_report(BASE + 1, 2), Match::Duplicate);
        assert_eq!(r.on_report((8 << 32) + 1, 2), Match::NotOurs, "a predecessor's order");
        assert_eq!(r.on_report(BASE + 3, 2), Match::NotOurs, "an id not sent yet");
        assert_eq!(r.on_report(BASE, 2), Match::NotOurs);
        assert_eq!(r.on_report(3, 2), Match::NotOurs, "below the base");
        assert_eq!(r.on_report(BASE + 2, 2), Match::Ours { lost: 0 });
    }

    #[test]
    fn expired_orders_are_settled_once_and_their_late_reports_are_duplicates() {
        let mut r = Reports::new(BASE);
        assert_eq!(r.on_report(BASE + 1, 3), Match::Ours { lost: 0 });
        assert_eq!(r.expire(3), 2, "orders 2 and 3");
        assert_eq!(r.expire(3), 0, "settled once");
        assert_eq!(r.on_report(BASE + 3, 3), Match::Duplicate, "a late report");
        assert_eq!(r.on_report(BASE + 4, 4), Match::Ours { lost: 0 }, "the next order still matches");
    }

    #[test]
    fn silence_counts_only_while_orders_wait_and_nothing_moves() {
        let (t0, s) = (Instant::now(), Duration::from_secs(1));
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut w = Silence::new(t0);
        assert!(!w.expired((0, 0), false, at(5_000), s), "nothing in flight: no wait");
        assert!(!w.expired((0, 1), true, at(5_000), s), "an order went out: the wait starts");
        assert!(!w.expired((0, 1), true, at(5_900), s));
        assert!(!w.expired((1, 1), true, at(5_950), s), "a report came: starts again");
        assert!(!w.expired((1, 1), true, at(6_900), s));
        assert!(w.expired((1, 1), true, at(6_950), s), "1 s with nothing moving");
        assert!(!w.expired((1, 1), true, at(7_000), s), "and it starts again");
    }
}
