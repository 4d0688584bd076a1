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

/// Tick-to-trade from the tick's publish, beside the rows from its ingress.
pub const FROM_PUBLISH: &str = "tick-to-trade from the market data's publish (-> gateway receive)";

/// The same orders' two process crossings, summed per order: tick-to-trade from the publish
/// less the trader's own work (strategy receive -> order published).
pub const CROSSINGS: &str = "the two crossings per order (market data publish -> receive + order published -> gateway)";

pub struct Hops {
    scale: TscScale,
    hist: Vec<Histogram<u64>>,
    /// Tick-to-trade from when the tick's publish began (orders whose trace says): what the
    /// lab's chained floor compares with, without the feed's own work before the publish.
    from_publish: Histogram<u64>,
    /// The two process crossings of the same orders, summed per order: what a floor of the
    /// crossings alone (the lab's chain through a bare relay) must not be slower than.
    crossings: Histogram<u64>,
    /// Orders whose stamps went backwards by more than a millisecond (a trace from another
    /// host's TSC, or a bad one): not timed.
    pub unordered: u64,
    /// Orders whose trace carries no tick stamp: the tick had none, or the trader did not time
    /// it (a stamp its clock cannot have made, such as a replayed recording's): not timed.
    pub unstamped: u64,
    /// Orders timed with a hop whose two cores' stamps were slightly out of order (TSC skew).
    pub skewed: u64,
}

impl Hops {
    /// Histograms up to an hour in ns, 3 significant digits, allocated up front.
    pub fn new(ticks_per_ns: f64) -> Hops {
        let h = || Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds");
        Hops {
            scale: TscScale { ticks_per_ns },
            hist: HOPS.iter().map(|_| h()).collect(),
            from_publish: h(),
            crossings: h(),
            unordered: 0,
            unstamped: 0,
            skewed: 0,
        }
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
        if t.ingress_tsc == 0 {
            self.unstamped += 1;
            return;
        }
        let far = (self.scale.ticks_per_ns * 1e6) as u64; // 1 ms of ticks
        if points.windows(2).any(|w| w[0].saturating_sub(w[1]) > far) {
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
        // From the publish: a stamp before the ingress or after the order arrived is not this
        // tick's publish, and the order is left out of this row (the lab then judges the row
        // from the ingress, whose count is the larger).
        let publish = t.md_publish_tsc;
        if publish != 0 && t.ingress_tsc <= publish && publish <= arrival_tsc {
            self.from_publish.saturating_record(self.scale.delta_ns(publish, arrival_tsc).max(1));
            // A receive stamp a few ns before the publish's (TSC skew) counts as 0 ns there.
            let crossings = self.scale.delta_ns(publish, t.receive_tsc)
                + self.scale.delta_ns(o.order.header.publish_tsc, arrival_tsc);
            self.crossings.saturating_record(crossings.max(1));
        }
    }

    /// Orders timed end to end.
    pub fn timed(&self) -> u64 {
        self.hist[5].len()
    }

    /// Percentiles per hop (ns), for the summary.
    pub fn summary(&self) -> Vec<tickbus_apps::summary::HopStats> {
        HOPS.iter().zip(&self.hist).map(|(name, h)| tickbus_apps::summary::HopStats::of(name, h)).collect()
    }

    /// Tick-to-trade from the tick's publish (ns), if any order's trace carried its publish.
    pub fn ttt_from_publish(&self) -> Option<tickbus_apps::summary::HopStats> {
        (!self.from_publish.is_empty()).then(|| tickbus_apps::summary::HopStats::of(FROM_PUBLISH, &self.from_publish))
    }

    /// The same orders' two crossings summed per order (ns), if any trace carried its publish.
    pub fn crossings(&self) -> Option<tickbus_apps::summary::HopStats> {
        (!self.crossings.is_empty()).then(|| tickbus_apps::summary::HopStats::of(CROSSINGS, &self.crossings))
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
        o.trace = OrderTrace { tick_sequence: 1, ingress_tsc, receive_tsc, book_tsc, decision_tsc, md_publish_tsc: 0 };
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
        assert_eq!((h.timed(), h.skewed, h.unordered, h.unstamped), (2, 1, 0, 0));
        h.record(&traced([5_000_000, 1400, 1500, 1600, 1700]), 2000); // 5 ms backwards
        assert_eq!((h.timed(), h.skewed, h.unordered, h.unstamped), (2, 1, 1, 0));
        h.record(&traced([0, 1400, 1500, 1600, 1700]), 2000); // no ingress stamp
        assert_eq!((h.timed(), h.skewed, h.unordered, h.unstamped), (2, 1, 1, 1));
        assert!(h.ttt_from_publish().is_none(), "no trace said when its tick's publish began");
        assert!(h.crossings().is_none(), "nor its crossings");
    }

    #[test]
    fn tick_to_trade_from_the_publish_leaves_out_the_feed_work_before_it_and_takes_only_a_stamp_in_place() {
        let mut h = Hops::new(2.0); // 2 ticks per ns: the points are ticks, the rows ns
        let with = |publish: u64| {
            let mut o = traced([1000, 1400, 1500, 1600, 1700]);
            o.trace.md_publish_tsc = publish;
            o
        };
        h.record(&with(1130), 2000); // 65 ns (130 ticks) of normalising before the publish
        assert_eq!(h.ttt_from_publish().map(|s| (s.count, s.p50)), Some((1, 435)));
        // Its two crossings: publish -> receive 135 ns (270 ticks) + order published -> gateway
        // 150 ns (300 ticks); the trader's own 150 ns between them is not in the row.
        assert_eq!(h.crossings().map(|s| (s.count, s.p50)), Some((1, 285)));
        assert_eq!(h.summary()[5].p50, 500, "the row from the ingress still holds it");
        h.record(&with(1800), 2000); // after the receive (cross-core skew) but before arrival
        assert_eq!(h.ttt_from_publish().map(|s| s.count), Some(2));
        h.record(&with(900), 2000); // before the ingress: not a publish of this tick
        h.record(&with(2001), 2000); // after the order arrived
        h.record(&with(0), 2000); // not known
        assert_eq!((h.timed(), h.ttt_from_publish().map(|s| s.count)), (5, Some(2)));
        // The crossings are of the same orders (the skewed receive counted as 0 ns there).
        assert_eq!(h.crossings().map(|s| (s.count, s.max)), Some((2, 285)));
    }
}
