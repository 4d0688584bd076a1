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
//! Pure: no bus, no clock (unit-tested below).

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
}
