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
    /// Orders whose stamps went backwards (a trace from another host's TSC, or a bad one).
    pub unordered: u64,
}

impl Hops {
    /// Histograms up to an hour in ns, 3 significant digits, allocated up front.
    pub fn new(ticks_per_ns: f64) -> Hops {
        let h = || Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds");
        Hops { scale: TscScale { ticks_per_ns }, hist: HOPS.iter().map(|_| h()).collect(), unordered: 0 }
    }

    /// Records one order's hops; `arrival_tsc` is when the gateway took it.
    #[inline]
    pub fn record(&mut self, o: &TracedOrder, arrival_tsc: u64) {
        let t = &o.trace;
        let points =
            [t.ingress_tsc, t.receive_tsc, t.book_tsc, t.decision_tsc, o.order.header.publish_tsc, arrival_tsc];
        if points.windows(2).any(|w| w[1] < w[0]) || t.ingress_tsc == 0 {
            self.unordered += 1;
            return;
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
    pub fn summary(&self) -> serde_json::Value {
        let rows: Vec<serde_json::Value> = HOPS
            .iter()
            .zip(&self.hist)
            .map(|(name, h)| {
                let q = |q: f64| if h.is_empty() { 0 } else { h.value_at_quantile(q) };
                serde_json::json!({
                    "hop": name, "count": h.len(), "p50": q(0.5), "p99": q(0.99), "p99_9": q(0.999),
                    "max": if h.is_empty() { 0 } else { h.max() },
                })
            })
            .collect();
        serde_json::Value::Array(rows)
    }
}
