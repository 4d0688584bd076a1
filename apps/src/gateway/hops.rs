//! Where each order's tick-to-trade went: one HdrHistogram per hop, from the trace the order
//! carries (`TracedOrder`) and the gateway's arrival stamp.
use hdrhistogram::Histogram;
use tickbus::time::TscScale;
use tickbus_codecs::orders::TracedOrder;

/// The hops, in pipeline order, and the whole.
pub const HOPS: [&str; 6] = [
    "feed ingress (or publish) -> strategy receive",
    "strategy receive -> book applied",
    "book applied -> decision",
    "decision -> order published",
    "order published -> gateway receive",
    "tick-to-trade (feed ingress or publish -> gateway receive)",
];

pub struct Hops {
    scale: TscScale,
    hist: Vec<Histogram<u64>>,
    /// Orders whose stamps were missing or went backwards by more than a millisecond (a trace
    /// from another host's TSC, or a bad one): not timed.
    pub unordered: u64,
    /// Orders timed with a hop whose two cores' stamps were slightly out of order (TSC skew).
    pub skewed: u64,
}

impl Hops {
    /// Histograms up to an hour in ns, 3 significant digits, allocated up front.
    pub fn new(ticks_per_ns: f64) -> Hops {
        let h = || Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds");
        Hops { scale: TscScale { ticks_per_ns }, hist: HOPS.iter().map(|_| h()).collect(), unordered: 0, skewed: 0 }
    }

    /// Records one order's hops; `arrival_tsc` is when the gateway took it.
    #[inline]
    pub fn record(&mut self, o: &TracedOrder, arrival_tsc: u64) {
        let t = &o.trace;
        let points =
            [t.ingress_tsc, t.receive_tsc, t.book_tsc, t.decision_tsc, o.order.header.publish_tsc, arrival_tsc];
        // Stamps from two cores may be a few ns apart in the wrong order (TSC offsets between
        // cores, notably on VMs): such a hop is recorded as 1 ns and counted as skewed. A stamp
        // missing or far out of order is no trace at all.
        let far = (self.scale.ticks_per_ns * 1e6) as u64; // 1 ms of ticks
        if t.ingress_tsc == 0 || points.windows(2).any(|w| w[0].saturating_sub(w[1]) > far) {
            self.unordered += 1;
            return;
        }
        if points.windows(2).any(|w| w[1] < w[0]) {
            self.skewed += 1;
        }
        for (k, w) in points.windows(2).enumerate() {
            self.hist[k].saturating_record(self.scale.delta_ns(w[0], w[1]).max(1));
        }
        self.hist[5].saturating_record(self.scale.delta_ns(points[0], points[5]).max(1));
    }

    /// Orders timed end to end.
    pub fn timed(&self) -> u64 {
        self.hist[5].len()
    }

    /// Percentiles per hop (ns), for the summary.
    pub fn summary(&self) -> Vec<tickbus_apps::summary::HopStats> {
        HOPS.iter().zip(&self.hist).map(|(name, h)| tickbus_apps::summary::HopStats::of(name, h)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickbus_codecs::orders::{OrderTrace, TracedOrder};
    use tickbus_codecs::Message;

    fn traced(points: [u64; 5]) -> TracedOrder {
        let mut o = TracedOrder { order: tickbus_codecs::orders::NewOrder::new(), trace: OrderTrace::default() };
        let [ingress_tsc, receive_tsc, book_tsc, decision_tsc, publish] = points;
        o.trace = OrderTrace { tick_sequence: 1, ingress_tsc, receive_tsc, book_tsc, decision_tsc };
        o.order.header.publish_tsc = publish;
        o
    }

    #[test]
    fn each_hop_is_recorded_a_small_cross_core_skew_is_counted_and_garbage_is_not_timed() {
        let mut h = Hops::new(1.0); // 1 tick per ns
        h.record(&traced([1000, 1400, 1500, 1600, 1700]), 2000);
        let s = h.summary();
        let p50: Vec<u64> = s.iter().map(|r| r.p50).collect();
        assert_eq!(p50, [400, 100, 100, 100, 300, 1000]);
        h.record(&traced([1000, 990, 1500, 1600, 1700]), 1690); // two hops 10 ns backwards
        assert_eq!((h.timed(), h.skewed, h.unordered), (2, 1, 0));
        h.record(&traced([5_000_000, 1400, 1500, 1600, 1700]), 2000); // 5 ms backwards
        h.record(&traced([0, 1400, 1500, 1600, 1700]), 2000); // no ingress stamp
        assert_eq!((h.timed(), h.skewed, h.unordered), (2, 1, 2));
    }
}
