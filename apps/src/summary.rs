//! The JSON summaries `tickbus exchange`, `gateway` and `trader` print with `--json`, as types
//! the apps serialise and their readers (the latency lab) deserialise: a field
//! renamed on one side is a compile error on the other, not a silent 0. Unknown fields are
//! refused when reading, so a reader built against another version says so.
use serde::{Deserialize, Serialize};

/// One hop's latency percentiles (ns), from an HdrHistogram.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HopStats {
    /// What the hop measures, from where to where.
    pub hop: String,
    /// Samples.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p99_9: u64,
    /// Largest.
    pub max: u64,
}

impl HopStats {
    /// The percentiles of `h` (all 0 when it is empty), named `hop`.
    pub fn of(hop: &str, h: &hdrhistogram::Histogram<u64>) -> HopStats {
        let q = |q: f64| if h.is_empty() { 0 } else { h.value_at_quantile(q) };
        HopStats {
            hop: hop.to_owned(),
            count: h.len(),
            p50: q(0.5),
            p99: q(0.99),
            p99_9: q(0.999),
            max: if h.is_empty() { 0 } else { h.max() },
        }
    }
}

/// What the exchange's market-data side did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MdCounts {
    /// ITCH messages replayed.
    pub itch: u64,
    /// Normalised messages published (an ITCH message makes 0 to 2).
    pub published: u64,
    /// ITCH messages that did not parse (counted, not published).
    pub unparsed: u64,
    /// Times the loop found itself more than 1 µs past a message's due time.
    pub late: u64,
    /// ... of which more than [`BACKLOG_LATE_NS`] past it.
    pub late_100us: u64,
    /// The furthest past a message's due time the loop found itself (ns).
    pub max_behind_ns: u64,
    /// From the first message's due time to the last one's publish (ns): the rate sustained is
    /// `itch / this`.
    pub span_ns: u64,
    /// Market-data messages the transport refused for good (not published).
    pub failed: u64,
}

/// A sender more than this far behind its schedule (10 ms) is backlogged, however few messages
/// it made late. Shorter stalls (a VM's vCPU preempted for a few ms: 1-8 ms seen on these
/// machines, in runs that sustained exactly the rate asked) that leave under 1% of messages late
/// are latency the tail percentiles show, measured from each message's intended time; with a
/// 1 ms bound every run here was "backlogged" and no verdict could ever be drawn.
pub const BACKLOG_MAX_BEHIND_NS: u64 = 10_000_000;
/// A message this late (100 µs) counts toward [`BACKLOG_LATE_SHARE`].
pub const BACKLOG_LATE_NS: u64 = 100_000;
/// More than this share (1%) of messages [`BACKLOG_LATE_NS`] late makes a run backlogged.
pub const BACKLOG_LATE_SHARE: f64 = 0.01;

/// The one backlog rule (the exchange's replay, the lab's open loops): `late` of `total` sends
/// over [`BACKLOG_LATE_NS`] late, the latest `max_behind_ns` behind.
pub fn is_backlogged(max_behind_ns: u64, late: u64, total: u64) -> bool {
    max_behind_ns > BACKLOG_MAX_BEHIND_NS || late as f64 > BACKLOG_LATE_SHARE * total as f64
}

impl MdCounts {
    /// Whether the replay fell behind its schedule (by the bounds above): then the latencies
    /// measured from each tick's due time are how long ticks queued, not latency. Says so, with
    /// the rate the loop sustained.
    pub fn backlog(&self, asked_msgs_per_s: f64) -> Option<String> {
        is_backlogged(self.max_behind_ns, self.late_100us, self.itch).then(|| {
            format!(
                "BACKLOGGED: the replay fell up to {:.1} ms behind its schedule ({} of {} messages over 100 µs late): latencies from a tick's due time measure the queue, not latency. Sustained {:.0} msg/s of {:.0} asked",
                self.max_behind_ns as f64 / 1e6,
                self.late_100us,
                self.itch,
                self.itch as f64 * 1e9 / self.span_ns.max(1) as f64,
                asked_msgs_per_s
            )
        })
    }
}

/// `tickbus exchange --json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExchangeSummary {
    /// The market-data side.
    pub md: MdCounts,
    /// The market-data stream's position at the end.
    pub md_position: u64,
    /// Stream failures, one line each.
    pub transport_errors: Vec<String>,
    /// Tick due -> market data publish begins (the loop's lateness and the normalising).
    pub feed_ns: HopStats,
    /// The gateway's, when it ran inside the exchange (the composite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<GatewaySummary>,
    /// The whole-book snapshots it made (`--snapshots`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshots: Option<VenueSnapshotSummary>,
}

/// What `tickbus exchange --snapshots` made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VenueSnapshotSummary {
    /// Snapshots published whole.
    pub snapshots: u64,
    /// Their chunks.
    pub chunks: u64,
    /// The market-data position the maker's book had reached at the end.
    pub position: u64,
    /// Orders in the last snapshot.
    pub last_orders: u64,
    /// How long the last snapshot took to publish (µs).
    pub last_publish_us: u64,
    /// Messages the venue's tap could not hand to the maker (it fell a whole queue behind):
    /// every snapshot after the first says it lost some.
    pub tap_lost: u64,
    /// Messages the maker's book refused (none, unless market data was lost before).
    pub book_errors: u64,
}

/// What the gateway counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayCounts {
    /// Orders taken.
    pub orders: u64,
    /// Orders filled.
    pub fills: u64,
    /// Orders expired unfilled.
    pub expired: u64,
    /// Orders rejected.
    pub rejects: u64,
    /// Order-stream payloads that were not an order at all: nothing can be answered.
    pub malformed: u64,
    /// Plain `NewOrder`s (no trace): matched and answered, not timed.
    pub untraced: u64,
    /// Positions lost on the order ring (never happens to a reliable consumer; counted if it did).
    pub orders_lost: u64,
    /// Reports published.
    pub reports: u64,
    /// Quotes taken from the market data.
    pub quotes: u64,
    /// Market data the gateway lost to a lap (it matched against an older quote meanwhile).
    pub md_missed: u64,
    /// Times the report ring was full (the trader did not take its reports).
    pub report_ring_full: u64,
    /// Traders that died (their process ended without closing the order stream).
    pub trader_deaths: u64,
    /// Reports the report stream refused for good (its transport failed).
    pub reports_failed: u64,
    /// Orders taken again after a gateway died between answering and releasing them: already
    /// answered on the report ring, so released without a second report.
    pub already_answered: u64,
}

/// `tickbus gateway --json` (and the exchange's `gateway` field).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewaySummary {
    /// What it counted.
    pub counts: GatewayCounts,
    /// Orders timed end to end.
    pub timed: u64,
    /// The six hops of a traced order, tick to order published last.
    pub hops_ns: Vec<HopStats>,
    /// Tick-to-trade from the tick's publish, for orders whose trace said when it began
    /// (`OrderTrace::md_publish_tsc`): the rows above start at the feed's ingress and hold its
    /// work before the publish. None from a gateway before the field, or with no such order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttt_from_publish_ns: Option<HopStats>,
    /// The same orders' two process crossings summed per order (market data publish ->
    /// strategy receive, order published -> gateway receive): tick-to-trade from the publish
    /// less the trader's own work. None from an older gateway, or with no such order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crossings_ns: Option<HopStats>,
    /// Traces whose stamps went backwards by over a millisecond (another host's clock, or a
    /// bad trace): not timed.
    pub unordered_traces: u64,
    /// Traces without a tick stamp (the tick had none, or the trader did not time it: a stamp
    /// its clock cannot have made): not timed. 0 in an older summary, which counted them in
    /// `unordered_traces`.
    #[serde(default)]
    pub unstamped_traces: u64,
    /// Traces whose stamps crossed cores with skewed TSCs.
    pub skewed_traces: u64,
}

/// What the trading loop counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraderCounts {
    /// Market-data messages received (each one is a tick for the strategy).
    pub ticks: u64,
    /// Market-data messages lost to a lap (the trader was too slow for a lossy feed).
    pub md_missed: u64,
    /// `FeedGap` messages: the feed itself lost data.
    pub feed_gaps: u64,
    /// Market-data messages that were not tickbus messages.
    pub md_undecodable: u64,
    /// Ticks whose stamp this run's clock cannot have made (before the trader began opening
    /// its streams: a replayed journal's recorded stamps; or over 1 ms after their receive: a
    /// clock ahead of this one): not timed. 0 in an older summary.
    #[serde(default)]
    pub md_stale_stamps: u64,
    /// Orders sent.
    pub orders: u64,
    /// Reports taken.
    pub reports: u64,
    /// Orders whose report will never come: a later order's report arrived first (the gateway
    /// answers in order). They leave the in-flight count.
    pub reports_lost: u64,
    /// Second reports for an order already settled: ignored.
    pub reports_duplicate: u64,
    /// Reports that were not for one of this run's orders (e.g. left on the report ring for an
    /// earlier trader that died), or not a report at all: not counted as ours.
    pub reports_unexpected: u64,
    /// Times an order waited for room on the order ring.
    pub order_ring_full: u64,
    /// Orders the order stream refused for good (its transport failed): not in flight.
    pub orders_failed: u64,
}

/// What the strategy has seen and done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StrategyStats {
    /// Order events the book applied.
    pub book_events: u64,
    /// Events that did not fit the book (joined mid-day, or a lost message).
    pub book_errors: u64,
    /// Top-of-book changes seen.
    pub top_changes: u64,
    /// Decisions not sent because `max_in_flight` orders were awaiting reports.
    pub skipped_in_flight: u64,
    /// Decisions not sent because trading had halted after a gap.
    pub skipped_halted: u64,
    /// Orders filled.
    pub filled_orders: u64,
    /// Shares filled.
    pub filled_qty: u64,
    /// Orders expired unfilled.
    pub unfilled_orders: u64,
    /// Orders rejected.
    pub rejected_orders: u64,
    /// Orders whose report never came (a later order's came first).
    pub lost_reports: u64,
}

/// `tickbus trader --json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraderSummary {
    /// Feed ingress (or publish) -> strategy receive, every tick.
    pub tick_hop_ns: HopStats,
    /// Publish -> strategy receive, over the first tick of each ingress stamp (a venue's due
    /// time; a feed's datagram, or its recvmmsg batch without `--wire-stamps`) whose publisher said when its publish began
    /// (`FLAG_PUBLISH_LAG`); None when none did. A lag stored as 65,535 ns ("at least") is
    /// taken as that, so the hop errs long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_hop_ns: Option<HopStats>,
    /// What the loop counted.
    pub counts: TraderCounts,
    /// The median ns of one empty duty cycle, whole (`tickbus::agent::PollPeriod`: windows of
    /// 64 empty cycles in a row): a tick that lands while the loop is idle waits for its next
    /// look at the market data, typically about half the span between two
    /// (`md_looks_per_pass`).
    /// None when no window was timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_pass_ns: Option<u64>,
    /// Looks at the market data per empty duty cycle (`poll_pass_ns`), as counted over the
    /// run: a tick waits for the next of them, so more looks a cycle make the wait shorter. 0:
    /// no empty cycle; 1 in an older summary, whose trader looked once.
    #[serde(default = "one_look")]
    pub md_looks_per_pass: u32,
    /// ud-mcast: market data recovered from the publisher's history.
    pub md_recovered: u64,
    /// What the strategy did.
    pub strategy: StrategyStats,
    /// Orders still awaiting a report at the end.
    pub in_flight: u64,
    /// Why trading halted, if it did.
    pub halted: Option<String>,
    /// The book at the end, as [`tickbus_codecs::book::OrderBook::digest`] (hex): equal for
    /// two traders that hold the same book.
    pub book_digest: String,
    /// `--join`: how the trader caught up from the journal and cut over to the live stream.
    pub join: Option<JoinSummary>,
    /// `--snapshots`: how it recovered from lost market data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoveryStats>,
}

/// How a trader recovered from lost market data (`tickbus trader --snapshots`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecoveryStats {
    /// Losses that started a recovery (a loss during one starts it over, not counted again).
    pub losses: u64,
    /// Recoveries completed: the book loaded from a snapshot, the held messages applied,
    /// trading again.
    pub recovered: u64,
    /// Whole snapshots seen while recovering but not taken: from before the loss, older than
    /// the oldest message still held, of another stream incarnation, or from a maker that had
    /// lost messages itself.
    pub refused: u64,
    /// Held messages applied after the snapshots taken.
    pub applied_after: u64,
    /// The last recovery's time from the loss to trading again, in µs.
    pub last_us: u64,
    /// Orders sent before the last recovery completed (more at the end: it traded again).
    pub orders_before_last: u64,
    /// Orders sent before the first recovery completed (more at the end: it traded again
    /// after recovering).
    #[serde(default)]
    pub orders_before_first: u64,
    /// Still recovering when the market data ended (not trading).
    pub recovering_at_end: bool,
}

/// How a late joiner caught up (`tickbus trader --join`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JoinSummary {
    /// The journal caught up from.
    pub journal: String,
    /// The market-data position asked for.
    pub from: u64,
    /// Messages taken from the journal.
    pub from_journal: u64,
    /// Live messages dropped because the journal had delivered them.
    pub duplicates: u64,
    /// Positions the live stream skipped (lapped) that the journal filled.
    pub filled: u64,
    /// Positions reported lost because the journal recorded them lost.
    pub journal_gaps: u64,
    /// Positions reported lost because the journal did not bring them in time.
    pub unfilled: u64,
    /// The position of the first live message (None: never cut over).
    pub cut_over: Option<u64>,
    /// Time from the trading loop's start (its streams open, any snapshot loaded: that wait is
    /// `snapshot.waited_us`) to live, in µs (None: never cut over).
    pub live_after_us: Option<u64>,
    /// Why the journal could not be read further, if so.
    pub journal_error: Option<String>,
    /// The whole-book snapshot the book started from (`--snapshots`), if any.
    pub snapshot: Option<SnapshotSummary>,
    /// The snapshot refused at the start because its maker had lost messages: the joiner went
    /// through the journal from `from` instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_snapshot: Option<SnapshotSummary>,
}

/// The snapshot a late joiner loaded before merging the market data after it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SnapshotSummary {
    /// The market-data position it reflects (the merge went on from here).
    pub as_of: u64,
    /// Orders loaded.
    pub orders: u64,
    /// Messages its maker had lost before `as_of` (non-zero: the book may be wrong).
    pub lost: u64,
    /// How long the joiner waited for it and loaded it, in µs.
    pub waited_us: u64,
    /// The market-data stream's incarnation it is of (0: its maker did not know).
    pub source: u64,
}

/// An older trader's summary: one look at the market data per duty cycle.
fn one_look() -> u32 {
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest states on each side of each bound: 10 ms behind is not yet backlogged, a
    /// nanosecond more is; 1 of 100 messages over 100 µs late is not, 2 are.
    #[test]
    fn a_replay_behind_its_schedule_is_backlogged_by_either_bound() {
        let c = |max_behind_ns, late_100us| MdCounts {
            itch: 100,
            max_behind_ns,
            late_100us,
            span_ns: 1_000_000,
            ..MdCounts::default()
        };
        assert_eq!(c(BACKLOG_MAX_BEHIND_NS, 1).backlog(1e5), None);
        let b = c(BACKLOG_MAX_BEHIND_NS + 1, 0).backlog(1e6).expect("over 10 ms behind");
        assert!(
            b.starts_with("BACKLOGGED: the replay fell up to 10.0 ms behind")
                && b.contains("Sustained 100000 msg/s of 1000000 asked"),
            "{b}"
        );
        assert!(c(200_000, 2).backlog(1e5).is_some(), "2% over 100 us late");
    }

    /// A trader's summary from before the second look has no `md_looks_per_pass`: read as the
    /// one look that trader made, not as none.
    #[test]
    fn an_older_trader_summary_without_the_looks_reads_as_one_look() {
        let mut v = serde_json::to_value(TraderSummary { md_looks_per_pass: 2, ..TraderSummary::default() }).unwrap();
        assert_eq!(serde_json::from_value::<TraderSummary>(v.clone()).unwrap().md_looks_per_pass, 2);
        v.as_object_mut().unwrap().remove("md_looks_per_pass");
        assert_eq!(serde_json::from_value::<TraderSummary>(v).unwrap().md_looks_per_pass, 1);
    }

    /// Summaries from before the stale-stamp and unstamped-trace counts read them as 0.
    #[test]
    fn older_summaries_without_the_stamp_counts_read_them_as_zero() {
        let mut t = serde_json::to_value(TraderSummary::default()).unwrap();
        t["counts"]["md_stale_stamps"] = 3.into();
        assert_eq!(serde_json::from_value::<TraderSummary>(t.clone()).unwrap().counts.md_stale_stamps, 3);
        t["counts"].as_object_mut().unwrap().remove("md_stale_stamps");
        assert_eq!(serde_json::from_value::<TraderSummary>(t).unwrap().counts.md_stale_stamps, 0);
        let mut g = serde_json::to_value(GatewaySummary::default()).unwrap();
        g["unstamped_traces"] = 2.into();
        assert_eq!(serde_json::from_value::<GatewaySummary>(g.clone()).unwrap().unstamped_traces, 2);
        g.as_object_mut().unwrap().remove("unstamped_traces");
        assert_eq!(serde_json::from_value::<GatewaySummary>(g).unwrap().unstamped_traces, 0);
    }

    /// A reader refuses a summary with a field it does not know (another version's), instead of
    /// reading what it knows and taking the rest as 0.
    #[test]
    fn a_renamed_or_unknown_field_is_refused_not_read_as_zero() {
        let mut v = serde_json::to_value(TraderSummary::default()).unwrap();
        assert!(serde_json::from_value::<TraderSummary>(v.clone()).is_ok());
        v["counts"]["tickz"] = 5.into();
        let e = serde_json::from_value::<TraderSummary>(v.clone()).unwrap_err().to_string();
        assert!(e.contains("tickz"), "{e}");
        v["counts"].as_object_mut().unwrap().remove("tickz");
        v["counts"].as_object_mut().unwrap().remove("ticks");
        let e = serde_json::from_value::<TraderSummary>(v).unwrap_err().to_string();
        assert!(e.contains("ticks"), "{e}");
    }

    #[test]
    fn the_exchange_summary_carries_the_gateway_only_when_it_ran_inside() {
        let alone = ExchangeSummary::default();
        assert!(serde_json::to_value(&alone).unwrap().get("gateway").is_none());
        let with = ExchangeSummary { gateway: Some(GatewaySummary::default()), ..alone };
        let back: ExchangeSummary = serde_json::from_str(&serde_json::to_string(&with).unwrap()).unwrap();
        assert_eq!(back, with);
    }
}
