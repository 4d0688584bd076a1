//! The trading pipeline's results: per rate, hop by hop beside its floors (across processes on
//! shm), and over RDMA in the Soft-RoCE guest beside perftest.
use serde::{Deserialize, Serialize};

/// One hop's percentiles (ns) and, for a process crossing, its floor's and the ratios.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hop {
    pub name: String,
    pub count: u64,
    pub p50: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub max: u64,
    /// The bare ring hop's (p50, p99) at the same rate and payload, and this hop's ratios to it.
    pub floor: Option<(u64, u64)>,
    pub x_floor: Option<(f64, f64)>,
}

/// The book's cost per message that moves a top of book (the messages the trader orders on)
/// among the day's first messages, (p50, p90) ns: back to back; `apart_ns` apart with the book
/// left alone meanwhile; and as far apart with the book warmed meanwhile, as the trader's idle
/// cycles warm it (`HotStocks`). The spaced ones are timed from when the message was due. What
/// the gap costs, and what warming wins back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookWarmth {
    pub apart_ns: u64,
    /// Messages that moved a top in each pass (the spaced kinds ran two passes each).
    pub messages: u64,
    pub back_to_back: (u64, u64),
    pub apart: (u64, u64),
    pub warmed: (u64, u64),
}

/// One pipeline run at one rate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub rate: u64,
    /// "exchange+gateway | trader" or "exchange | trader | gateway", with their cores.
    pub layout: String,
    pub hops: Vec<Hop>,
    /// Market-data messages published, ticks the trader saw, orders, reports.
    pub published: u64,
    pub ticks: u64,
    pub ticks_missed: u64,
    pub orders: u64,
    pub reports: u64,
    /// The exchange's own hop, over every market-data message: tick due -> its publish begins
    /// (the loop's lateness and the normalising). The trader's rows from the due time include it.
    pub feed: Hop,
    /// The trader's own view of the market-data hop over every tick (the gateway's rows time
    /// only the ticks that led to an order, which often queue behind the earlier messages of
    /// the same exchange event), beside the same floor.
    pub every_tick: Hop,
    /// The trader's market-data hop from each message's publish (every tick whose venue said
    /// when its publish began), beside the hop floor: the crossing the hops' verdict judges for
    /// market data when present (the rows from the tick's due time hold the venue's own work as
    /// well; the floor's clock starts at its publish). None from an older trader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_publish: Option<Hop>,
    /// Tick-to-trade from the market data's publish (orders whose trace said when it began):
    /// the figure the budget judges when present, since the chained floor starts at a publish
    /// and the venue's work before it (due -> publish begins) is its own row. The last hop row
    /// (from the tick's due time) holds that work as well. None from an older gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttt_from_publish: Option<Hop>,
    /// The order book's own p50 cost (in process, back to back, the same day) over the
    /// messages that move a top of book, the ones the trader sends its orders on: the budget's
    /// figure. Before 2026-12-07 this was the p50 over every message.
    pub book_p50: u64,
    /// The same over every message of the day (shown beside it). None in an older report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub book_all_p50: Option<u64>,
    /// The book's cost on the messages that move a top of book, back to back and spaced as
    /// ticks are, left alone or warmed between them. None in an older report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub book_warmth: Option<BookWarmth>,
    /// How long one empty pass of the trader's loop takes beside one of the market-data floor's
    /// reader: a tick that lands while a loop is idle waits for its next look, typically about
    /// half a pass, so half the difference models what the trader's longer loop adds to its
    /// market-data crossing (a model: passes of uneven length make the wait longer). None in an
    /// older report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_pass: Option<PollPasses>,
    /// Tick-to-trade p50's budget: the chained floor's p50 + the book's p50 + 100 ns (in a
    /// report from before 2026-12-07's afternoon, the two hop floors' p50s summed in its place).
    pub budget_p50: u64,
    /// The chained floor, (p50, p99) ns: market data to a bare relay on the trader's core, an
    /// order from it to the gateway's core, timed end to end from the market data's publish.
    /// The p50 of that sum is above the sum of the two hops' p50s, as tick-to-trade's is. None
    /// in an older report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_floor: Option<(u64, u64)>,
    /// The gateway's row of the two process crossings summed per order (tick-to-trade from the
    /// publish less the trader's own work), and the chain's p50 of the same (less the relay's
    /// own work): a pipeline whose crossings beat the chain's beat a floor, which is then
    /// broken. None in an older report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crossings: Option<Hop>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_crossings_p50: Option<u64>,
    /// Hops within 1.15x of their floor at p50 and p99, and tick-to-trade within its budget.
    pub hops_met: bool,
    pub ttt_met: bool,
    /// The exchange fell behind its schedule: what it says (the rate it sustained); the hops
    /// then measure queueing, and neither target is judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<String>,
    /// Every round at this rate (the pipeline and its floors back to back, which first
    /// alternating): the verdicts are their ratios' medians. The figures above are one round's,
    /// the one whose tick-to-trade ratio is the median of the rounds not backlogged. Empty in a
    /// report from before the rounds (its figures are then its one run's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<Round>,
}

impl Run {
    /// The ratios to their floors (p50, p99) of the process crossings the hops' verdict judges:
    /// every row that carries one (the market data from its publish, or else the per-order hop
    /// from the due time, and the orders).
    pub fn crossings(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.from_publish.iter().chain(&self.hops).filter_map(|h| h.x_floor)
    }

    /// The tick-to-trade row the budget judges: from the market data's publish when the
    /// gateway timed every order so (see [`Run::judged_from_publish`]), else from the tick's
    /// due time (the last hop row).
    pub fn ttt_judged(&self) -> Option<&Hop> {
        self.ttt_from_due().map(|d| pick_ttt(d, self.ttt_from_publish.as_ref()).0)
    }

    /// Whether tick-to-trade is judged from the market data's publish ([`pick_ttt`]).
    pub fn judged_from_publish(&self) -> bool {
        self.ttt_from_due().is_some_and(|d| pick_ttt(d, self.ttt_from_publish.as_ref()).1)
    }

    /// The gateway's last row, tick-to-trade from the tick's due time (the sixth, by name).
    fn ttt_from_due(&self) -> Option<&Hop> {
        self.hops.iter().find(|h| h.name.starts_with("tick-to-trade")).or_else(|| self.hops.get(5))
    }
}

/// The tick-to-trade row a budget judges, and whether it is the one from the market data's
/// publish: that one when the gateway timed every order so (its count is the row from the due
/// time's), else the row from the tick's due time. A figure from the publish that left some
/// orders out is not judged: the row from the due time holds them all.
pub fn pick_ttt<'a>(from_due: &'a Hop, from_publish: Option<&'a Hop>) -> (&'a Hop, bool) {
    match from_publish.filter(|p| p.count == from_due.count) {
        Some(p) => (p, true),
        None => (from_due, false),
    }
}

/// Which tick-to-trade row `from_publish` of `rounds` judged, in words: from the market data's
/// publish, from the tick's due time, or a mix.
pub fn judged_from(from_publish: usize, rounds: usize) -> String {
    match from_publish {
        0 => "from the tick's due time".into(),
        n if n == rounds => "from the market data's publish".into(),
        n => format!("from the market data's publish in {n} of {rounds} rounds, else from the tick's due time"),
    }
}

/// One round of the pipeline beside its floors, measured back to back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Round {
    /// Tick-to-trade p50 (the row judged: from the market data's publish when timed) and its
    /// budget (the chained floor's p50 + the book's p50 + 100 ns; in an older report the two
    /// hop floors' p50s in the chain's place).
    pub ttt_p50: u64,
    pub budget_p50: u64,
    /// Tick-to-trade p50 from the tick's due time, when the judged one is from the publish
    /// (the difference is the venue's own work before its publish).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttt_from_due_p50: Option<u64>,
    /// The worst process-crossing hop's ratio to its floor, at p50 or p99.
    pub hops_x: f64,
    /// The two hop floors' p50s (ns): what says whether the machine moved this round (0: a
    /// report from before the order floor was kept).
    pub md_floor_p50: u64,
    #[serde(default)]
    pub order_floor_p50: u64,
    /// The chained floor's p50 (ns; 0: a report from before it was measured). A tick-to-trade
    /// below it beat a path doing less than the pipeline: the floor is broken that round.
    #[serde(default)]
    pub chain_floor_p50: u64,
    /// The p50s of the two crossings summed per order, the pipeline's and the chain's (each
    /// without its own work between them; 0: not measured). The pipeline's below the chain's
    /// says the chain is slower than the crossings it bounds: broken that round.
    #[serde(default)]
    pub crossings_p50: u64,
    #[serde(default)]
    pub chain_crossings_p50: u64,
    /// The chain's relay's own span, receive to publish (p50 ns; 0: not measured).
    #[serde(default)]
    pub relay_span_p50: u64,
    /// The floors ran before the pipeline this round.
    pub floors_first: bool,
    /// The exchange fell behind its schedule this round: left out of the verdicts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<String>,
    /// This round's empty passes, trader and floor reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_pass: Option<PollPasses>,
}

impl Round {
    /// Whether this round's chained floor is broken: the pipeline's whole tick-to-trade beat
    /// the whole chain, or its two crossings (when both sides timed them) beat the chain's.
    pub fn chain_broken(&self) -> bool {
        let (c, f) = (self.crossings_p50, self.chain_crossings_p50);
        self.chain_floor_p50 > 0 && (self.ttt_p50 < self.chain_floor_p50 || (c > 0 && f > 0 && c < f))
    }

    /// Whether this round's tick-to-trade was judged from the market data's publish: its
    /// figure from the tick's due time is kept beside it only then (`bench::pipeline`).
    pub fn judged_from_publish(&self) -> bool {
        self.ttt_from_due_p50.is_some()
    }
}

/// The median ns of one empty pass of a poll loop, whole (`tickbus::agent::PollPeriod`): the
/// trader's duty cycle (market data, reports, warming the book, the idle pause) and the hop
/// floor's bare reader (market data, the pause).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PollPasses {
    pub trader: u64,
    pub floor: u64,
    /// The trader's looks at the market data per empty pass (the floor's reader makes one). 1
    /// in an older report.
    #[serde(default = "one_look")]
    pub trader_looks: u32,
}

fn one_look() -> u32 {
    1
}

impl PollPasses {
    /// What the trader's longer pass adds, by the model, to the time a tick waits to be seen
    /// (typically about half the span between two looks, taking the looks as evenly spaced):
    /// half the difference of the spans (ns; negative if the trader's is the shorter).
    pub fn expected_wait_excess(&self) -> f64 {
        (self.trader as f64 / f64::from(self.trader_looks.max(1)) - self.floor as f64) / 2.0
    }
}

/// The venue's publish latency (tick due -> market data publish begins) with the whole-book
/// snapshot maker running beside the day, against the same venue without it, in paired rounds
/// (issue 26: the live stream's p99 while a snapshot is taken, <= 1.10x).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotCost {
    pub rate: u64,
    /// `--snapshot-maker` (inline: stepped between ticks; thread: its own thread).
    pub maker: String,
    pub every_secs: f64,
    pub rounds: Vec<SnapshotRound>,
}

/// One round: the venue without snapshots and with them, back to back (which first
/// alternating), each with its trader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotRound {
    /// Tick due -> publish begins (p50, p99, p99.9), ns: without snapshots, then with them.
    pub without: (u64, u64, u64),
    pub with: (u64, u64, u64),
    /// Snapshots the maker published whole in the round, and what its tap lost (0: every
    /// snapshot was a whole book).
    pub snapshots: u64,
    pub tap_lost: u64,
    pub with_first: bool,
    /// Either venue fell behind its schedule: left out of the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<String>,
}

/// The venue's publish latency while a late joiner catches up from the journal, against the
/// same day without the joiner (issue 26: p99 <= 1.10x). Both runs record the market data (the
/// joiner's journal); the joiner, with its own gateway, starts at 30% of the day.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JoinCost {
    pub rate: u64,
    pub rounds: Vec<JoinRound>,
}

/// One round: the venue without a joiner and with one, back to back (which first alternating).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JoinRound {
    /// Tick due -> publish begins (p50, p99, p99.9), ns.
    pub without: (u64, u64, u64),
    pub with: (u64, u64, u64),
    /// Messages the joiner took from the journal, and how long after it started it was live
    /// (µs; None: it never cut over).
    pub from_journal: u64,
    pub live_after_us: Option<u64>,
    pub with_first: bool,
    /// Either venue fell behind its schedule: left out of the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<String>,
}

/// One round of the RDMA pipeline in the guest, beside perftest's one-way figures measured just
/// before it in the same boot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RdmaRound {
    /// Tick-to-trade p50 and p99: from the market data's publish when the gateway timed it,
    /// else from the tick's due time.
    pub ttt_p50: u64,
    pub ttt_p99: u64,
    /// Tick-to-trade p50 from the tick's due time, when the figures above are from the publish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttt_from_due_p50: Option<u64>,
    /// perftest's typical one-way latency (ns): `ib_send_lat` UD (market data) and
    /// `ib_write_lat` RC (orders), at the payloads the pipeline sends, both running at once
    /// (the same-load floor: the pipeline's two hops share the devices and the guest's CPUs).
    pub ud_one_way: u64,
    pub rc_one_way: u64,
    /// The same two run one at a time (UD, RC), for reference; None in a report from before
    /// the same-load floor (its figures above were one at a time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alone: Option<(u64, u64)>,
    /// ud + rc + the book's p50: what tick-to-trade p50 is held against.
    pub budget: u64,
    pub ratio: f64,
    pub ticks: u64,
    pub orders: u64,
    /// The exchange fell behind its schedule this round (what it said): no verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<String>,
}

impl RdmaRound {
    /// Whether this round's figures are from the market data's publish (as [`Round::judged_from_publish`]).
    pub fn judged_from_publish(&self) -> bool {
        self.ttt_from_due_p50.is_some()
    }
}

/// The pipeline over RDMA (exchange on one device, trader on the other), rounds interleaved
/// with perftest, and the last round's hops.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RdmaRun {
    pub rate: u64,
    pub rounds: Vec<RdmaRound>,
    /// The book's p50 on the messages that move a top of book (as [`Run::book_p50`]).
    pub book_p50: u64,
    pub hops: Vec<Hop>,
    /// Median, min and max of the rounds' ratios; the target is median <= 1.25.
    pub ratio: (f64, f64, f64),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_look_halves_the_span_the_model_takes_a_tick_to_wait_through() {
        // One look in a 56 ns pass against a 28 ns bare reader: half of 28 ns more.
        let one = PollPasses { trader: 56, floor: 28, trader_looks: 1 };
        assert_eq!(one.expected_wait_excess(), 14.0);
        // Two looks in a 62 ns pass: spans of 31 ns, 3 ns longer than the reader's, so 1.5 ns.
        let two = PollPasses { trader: 62, floor: 28, trader_looks: 2 };
        assert_eq!(two.expected_wait_excess(), 1.5);
        // An older report has no looks: read as one.
        let old: PollPasses = serde_json::from_str(r#"{"trader":56,"floor":28}"#).unwrap();
        assert_eq!(old.trader_looks, 1);
    }
}
