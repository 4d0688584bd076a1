//! The model layer: what a run measured, as plain values (rows, sections, every result type)
//! and the arithmetic on them (ratios, suspect floors, merging rounds by name). The bench layer
//! ([`crate::bench`]) produces these; the render layer ([`crate::render`]) turns them into text,
//! HTML, plots and files. This layer imports neither (a test below reads its sources to hold
//! that), so data flows one way: bench -> model -> render.
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub mod book;
pub mod fanout;
pub mod itch;
pub mod journal;
pub mod pipeline;
pub mod rdma;
pub mod verdict;
pub mod wire_trade;

use itch::ItchReport;

/// Percentiles every table shows, then max.
pub const PERCENTILES: [(f64, &str); 5] =
    [(50.0, "p50"), (90.0, "p90"), (99.0, "p99"), (99.9, "p99.9"), (99.99, "p99.99")];

/// Whether a row is tickbus itself, the floor, a peer (what the ratios compare against), or a
/// rung between a floor and tickbus (a floor with some of tickbus's costs added, to show where
/// tickbus's time goes: neither a yardstick nor a floor that could be suspect).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Floor,
    Tickbus,
    Peer,
    Rung,
}

/// One transport's latency in one section.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    pub name: String,
    pub kind: Kind,
    pub note: String,
    pub count: u64,
    pub mean_ns: f64,
    /// p50, p90, p99, p99.9, p99.99, max in ns.
    pub ns: Vec<u64>,
    pub x_floor: Option<Vec<f64>>,
    pub x_best_peer: Option<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_sends: Option<u64>,
    /// Open loop: the sender fell behind its schedule (see [`Backlog`]); its percentiles measure
    /// the queue that built up, not the transport's latency, and no verdict is drawn from them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<Backlog>,
    /// Set on a floor that a tickbus row beats by more than 10% at p50, saying by how much: a
    /// floor the product beats does not move the bytes the fastest way, so ratios against it
    /// flatter tickbus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspect: Option<String>,
    /// When the samples were taken: latency.hlog's interval start and length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<Span>,
    /// Each round's own p50 (ns), in the order the rounds ran: the merged percentiles above hide
    /// a slow phase in some rounds, the per-round ratios a verdict is drawn from do not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_p50: Vec<u64>,
    /// Which of those rounds fell behind (the row's `backlog` says the merge holds at least
    /// one): a verdict from paired rounds leaves out those rounds instead of the whole row. Empty
    /// when no round was flagged apart (read [`Row::round_backlog`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_backlogged: Vec<bool>,
    /// Which of those rounds the receiver fell behind in and lost messages (its queue
    /// overflowed), apart from a sender that fell behind: a yardstick that lost flatters the row
    /// held against it, and a row under test that lost is not met. Empty when not recorded
    /// (read [`Row::round_losses`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_lost: Vec<bool>,
    #[serde(skip)]
    pub hist: Option<Histogram<u64>>,
}

/// A wall-clock interval during which a row's samples were recorded.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// Seconds since the Unix epoch.
    pub start_unix_s: f64,
    pub secs: f64,
}

impl Span {
    /// From `t0` to now.
    pub fn since(t0: std::time::SystemTime) -> Span {
        let start_unix_s = t0.duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        Span { start_unix_s, secs: t0.elapsed().map_or(0.0, |d| d.as_secs_f64()) }
    }

    /// From the earlier start to the later end. Interleaved rounds of one transport merge into
    /// one interval that also spans the other transports' rounds between them: the samples were
    /// all taken within it, which is what the interval log promises.
    fn union(self, o: Span) -> Span {
        let start = self.start_unix_s.min(o.start_unix_s);
        let end = (self.start_unix_s + self.secs).max(o.start_unix_s + o.secs);
        Span { start_unix_s: start, secs: end - start }
    }
}

/// What a noisy-round rule holds each round's yardstick against: the median round's figure, the
/// lower of the two middle ones for an even count. Always some round's own figure, so that round
/// is kept and "no round kept" cannot happen. The median proper (the mean of the two middle
/// figures) is dragged by one broken round of two, and a rule held against it kept the broken
/// round and left out the good one. That happened in lab 17: one of two udp-ingest rounds
/// dropped 73% of its datagrams, and its ratio (0.00x) was the one printed.
pub fn noise_reference(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => f64::NAN,
        n => xs[(n - 1) / 2],
    }
}

/// A median over rounds with its spread (min and max).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// As the reports print a ratio with its spread: "1.79x [1.69-1.86]".
    pub fn as_ratio(&self) -> String {
        format!("{:.2}x [{:.2}-{:.2}]", self.median, self.min, self.max)
    }

    /// The median and spread of `xs` (NaN for none).
    pub fn of(mut xs: Vec<f64>) -> Spread {
        xs.sort_by(f64::total_cmp);
        let median = match xs.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => xs[n / 2],
            n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
        };
        Spread { median, min: xs.first().copied().unwrap_or(f64::NAN), max: xs.last().copied().unwrap_or(f64::NAN) }
    }
}

/// Merges a round's rows into the rows so far, by name: every row of `round` must match one
/// of `rows` and none may be missing or doubled (a round whose rows came in another order or
/// another set would otherwise put one transport's histogram in another's row).
pub fn merge_round(rows: &mut Vec<Row>, round: Vec<Row>) -> Result<(), String> {
    if rows.is_empty() {
        *rows = round;
        return Ok(());
    }
    let names = |r: &[Row]| {
        let mut n: Vec<String> = r.iter().map(|r| r.name.clone()).collect();
        n.sort();
        n
    };
    if names(rows) != names(&round) {
        return Err(format!(
            "a round's rows do not match the first round's: {:?} against {:?}",
            names(&round),
            names(rows)
        ));
    }
    if let Some(dup) = names(&round).windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("two rows named {:?} in one round: rows are merged by name", dup[0]));
    }
    for r in round {
        let into = rows.iter_mut().find(|x| x.name == r.name).expect("names checked above");
        into.merge(r);
    }
    Ok(())
}

impl Row {
    /// The marks after the row's name in the text and HTML tables: `" [BACKLOGGED]"` (its sender
    /// fell behind: shown, not latency) or else `" [SUSPECT]"` (a floor that a measured row beat),
    /// then `" [LOST DATAGRAMS]"` when a round of it lost any. Built here once, so those two
    /// tables cannot mark a row differently.
    pub fn marks(&self) -> String {
        let state = match (&self.backlog, &self.suspect) {
            (Some(_), _) => " [BACKLOGGED]",
            (None, Some(_)) => " [SUSPECT]",
            (None, None) => "",
        };
        let lost = if self.round_lost.contains(&true) { " [LOST DATAGRAMS]" } else { "" };
        format!("{state}{lost}")
    }

    /// Adds another run of the same transport (interleaved rounds); see [`merge_round`].
    pub fn merge(&mut self, other: Row) {
        debug_assert_eq!(self.name, other.name, "rows are merged by name");
        let (other_late, other_lost) = (other.round_backlog(), other.round_losses());
        if let (Some(a), Some(b)) = (self.hist.as_mut(), other.hist) {
            a.add(&b).expect("histograms with the same bounds");
            let h = a.clone();
            let span = match (self.span, other.span) {
                (Some(x), Some(y)) => Some(x.union(y)),
                (x, y) => x.or(y),
            };
            let mut round_backlogged = self.round_backlog();
            round_backlogged.extend(other_late);
            let mut round_lost = self.round_losses();
            round_lost.extend(other_lost);
            let mut round_p50 = std::mem::take(&mut self.round_p50);
            round_p50.extend(other.round_p50);
            *self = Row {
                late_sends: self.late_sends,
                backlog: self.backlog.or(other.backlog),
                span,
                round_p50,
                round_backlogged,
                round_lost,
                ..Row::new(self.name.clone(), self.kind, self.note.clone(), h)
            };
        }
    }

    pub fn new(name: String, kind: Kind, note: String, h: Histogram<u64>) -> Row {
        let mut ns: Vec<u64> = PERCENTILES.iter().map(|(p, _)| h.value_at_percentile(*p)).collect();
        ns.push(h.max());
        Row {
            name,
            kind,
            note,
            count: h.len(),
            mean_ns: h.mean(),
            ns,
            x_floor: None,
            x_best_peer: None,
            late_sends: None,
            backlog: None,
            suspect: None,
            span: None,
            round_p50: vec![h.value_at_percentile(50.0)],
            round_backlogged: Vec::new(),
            round_lost: Vec::new(),
            hist: Some(h),
        }
    }

    /// Per round in `round_p50`, whether it fell behind: as flagged when the rounds were
    /// merged, else (one round, or a report from before the flags) the whole row's backlog for
    /// every round.
    pub fn round_backlog(&self) -> Vec<bool> {
        match self.round_backlogged.len() == self.round_p50.len() {
            true => self.round_backlogged.clone(),
            false => vec![self.backlog.is_some(); self.round_p50.len()],
        }
    }

    /// Per round in `round_p50`, whether its receiver lost messages, as recorded; none when not
    /// recorded (in a report from before the flags, the whole-row `backlog` stood for a loss
    /// too, and [`Row::round_backlog`] leaves every round out through it).
    pub fn round_losses(&self) -> Vec<bool> {
        match self.round_lost.len() == self.round_p50.len() {
            true => self.round_lost.clone(),
            false => vec![false; self.round_p50.len()],
        }
    }

    /// Records that the samples were taken from `t0` until now.
    pub fn taken_since(mut self, t0: std::time::SystemTime) -> Row {
        self.span = Some(Span::since(t0));
        self
    }
}

/// A table of rows measured under one condition (mode, size, rate).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Section {
    /// "rtt" (closed-loop ping-pong) or "one-way" (open loop at `rate`).
    pub mode: String,
    pub size: usize,
    pub rate: Option<u64>,
    pub rows: Vec<Row>,
}

impl Section {
    pub fn key(&self) -> String {
        match self.rate {
            Some(r) => format!("{}-{}B-{}", self.mode, self.size, rate_name(r)),
            None => format!("{}-{}B", self.mode, self.size),
        }
    }

    /// Fills in the ratios: against the floor row (if any) and the best peer by p50.
    pub fn ratios(&mut self) {
        let ratio =
            |a: &[u64], b: &[u64]| a.iter().zip(b).map(|(x, y)| *x as f64 / (*y).max(1) as f64).collect::<Vec<_>>();
        // A backlogged row measured queueing: it is no floor or peer to hold others against.
        let floor = self.rows.iter().find(|r| r.kind == Kind::Floor && r.backlog.is_none()).map(|r| r.ns.clone());
        let best = self.best_peer().map(|r| r.ns.clone());
        for r in &mut self.rows {
            r.x_floor = floor.as_deref().map(|f| ratio(&r.ns, f));
            r.x_best_peer = best.as_deref().map(|b| ratio(&r.ns, b));
        }
        self.mark_suspect_floors();
    }

    /// A floor is the least the hardware allows; tickbus more than 10% under it at p50 means the
    /// floor is broken, not that tickbus won.
    fn mark_suspect_floors(&mut self) {
        let fastest = self.rows.iter().filter(|r| r.kind == Kind::Tickbus).min_by_key(|r| r.ns[0]);
        let Some((name, p50)) = fastest.map(|r| (r.name.clone(), r.ns[0])) else { return };
        for f in self.rows.iter_mut().filter(|r| r.kind == Kind::Floor) {
            f.suspect = ((p50 as f64) < 0.9 * f.ns[0] as f64).then(|| {
                format!(
                    "{name} beats it at p50 ({p50} < {} ns, {:.2}x): this floor is not the fastest way to move these bytes",
                    f.ns[0],
                    p50 as f64 / f.ns[0].max(1) as f64
                )
            });
        }
    }

    pub fn best_peer(&self) -> Option<&Row> {
        self.rows.iter().filter(|r| r.kind == Kind::Peer && r.backlog.is_none()).min_by_key(|r| r.ns[0])
    }
}

/// How far an open-loop sender fell behind its schedule. The run is backlogged when any send
/// left more than 10 ms after its intended time, or more than 1% of them left more than
/// [`BACKLOG_LATE_NS`] late (`tickbus_apps::summary::is_backlogged`, the one rule): then the receiver's
/// percentiles (from each message's intended time) measure how long messages queued, and the
/// run says what rate the machine sustained instead.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Backlog {
    /// The latest any send left after its intended time (ns).
    pub max_behind_ns: u64,
    /// Sends that left more than [`BACKLOG_LATE_NS`] late.
    pub late_sends: u64,
    pub sends: u64,
    /// The rate asked for and the rate the sender achieved (first intended time to last send).
    pub asked_msgs_per_s: f64,
    pub sustained_msgs_per_s: f64,
}

/// A send this late counts as late (100 µs; the apps' rule, `tickbus_apps::summary`, so the
/// exchange and the lab judge alike).
pub const BACKLOG_LATE_NS: u64 = tickbus_apps::summary::BACKLOG_LATE_NS;

impl Backlog {
    /// Whether a run with these figures fell behind (by the bounds above).
    pub fn is_backlogged(&self) -> bool {
        tickbus_apps::summary::is_backlogged(self.max_behind_ns, self.late_sends, self.sends)
    }

    /// What the report prints beside a backlogged run.
    pub fn says(&self) -> String {
        format!(
            "BACKLOGGED: the sender fell up to {:.1} ms behind its schedule ({} of {} sends over {} µs late): these percentiles measure the queue, not latency, and no verdict is drawn from a round that fell behind. Sustained {:.0} msg/s of {:.0} asked",
            self.max_behind_ns as f64 / 1e6,
            self.late_sends,
            self.sends,
            BACKLOG_LATE_NS / 1000,
            self.sustained_msgs_per_s,
            self.asked_msgs_per_s
        )
    }
}

pub fn rate_name(r: u64) -> String {
    match r {
        r if r >= 1_000_000 && r % 1_000_000 == 0 => format!("{}M", r / 1_000_000),
        r if r >= 1_000 && r % 1_000 == 0 => format!("{}k", r / 1_000),
        r => r.to_string(),
    }
}

/// Messages per second with the sender never waiting on measurement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThroughputRow {
    pub name: String,
    pub kind: Kind,
    pub size: usize,
    pub msgs_per_s: f64,
    pub mb_per_s: f64,
    pub x_best_peer: Option<f64>,
}

/// Everything one run measured.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Report {
    pub machine: String,
    /// The command line this report came from (the run's settings).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
    /// The host as `tickbus doctor` saw it when the run began (identity and every finding with
    /// the lab's cores): `compare` warns when two reports come from different environments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<tickbus::doctor::Diagnosis>,
    /// The Soft-RoCE guest's environment, from the RDMA report merged into this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_rdma: Option<tickbus::doctor::Diagnosis>,
    pub cores: (usize, usize),
    pub ticks_per_ns: f64,
    pub sections: Vec<Section>,
    pub throughput: Vec<ThroughputRow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itch: Option<ItchReport>,
    /// The order book at TotalView scale beside its floor, in paired rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub book: Option<book::BookScale>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_to_trade: Option<Section>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<journal::JournalReport>,
    /// The trading pipeline across processes, per rate, hop by hop beside its floors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pipeline: Vec<pipeline::Run>,
    /// The venue's publish latency with its snapshot maker beside the day and without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_cost: Option<pipeline::SnapshotCost>,
    /// The venue's publish latency while a late joiner catches up, and without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join_cost: Option<pipeline::JoinCost>,
    /// Wire-to-trade: MoldUDP64 on a veth through `tickbus feed` (AF_XDP and UDP ingest),
    /// `tickbus trader` and `tickbus gateway`, per ingest and rate, hop by hop.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wire_trade: Vec<wire_trade::WireTrade>,
    /// The pipeline over RDMA in the Soft-RoCE guest, beside perftest (latency-lab rdma).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_rdma: Option<pipeline::RdmaRun>,
    /// Fan-out to 1, 2 and 4 subscribers: shm on the host, rdma-rc and ud-mcast in the guest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fanout: Vec<fanout::FanoutReport>,
    /// tickbus over RDMA beside perftest in alternating rounds (latency-lab rdma).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_versus: Option<rdma::Versus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Report {
    pub fn throughput_ratios(&mut self) {
        let sizes: Vec<usize> = self.throughput.iter().map(|t| t.size).collect();
        for size in sizes {
            let best = self
                .throughput
                .iter()
                .filter(|t| t.size == size && t.kind == Kind::Peer)
                .map(|t| t.msgs_per_s)
                .fold(0.0, f64::max);
            for t in self.throughput.iter_mut().filter(|t| t.size == size) {
                t.x_best_peer = (best > 0.0).then(|| t.msgs_per_s / best);
            }
        }
    }
}

pub fn slug(name: &str) -> String {
    let s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    s.split('_').filter(|p| !p.is_empty()).collect::<Vec<_>>().join("_")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A row whose 1000 samples sit at `v` (p50 = `v`).
    pub(crate) fn row(name: &str, kind: Kind, v: u64) -> Row {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        for i in 0..1000 {
            h.record(v + i / 990).unwrap();
        }
        Row::new(name.into(), kind, String::new(), h)
    }

    /// Issue 24: rounds merged by row position put a reordered round's histograms in the wrong
    /// rows (the code before zipped them). Merged by name, checked: a reordered round lands in
    /// the right rows; a round with another set of rows, or a row twice, is an error.
    #[test]
    fn rounds_merge_by_row_name_and_a_mismatched_round_is_an_error() {
        let mut rows = Vec::new();
        merge_round(&mut rows, vec![row("floor", Kind::Floor, 100), row("tickbus shm", Kind::Tickbus, 300)]).unwrap();
        merge_round(&mut rows, vec![row("tickbus shm", Kind::Tickbus, 300), row("floor", Kind::Floor, 100)]).unwrap();
        assert_eq!((rows[0].name.as_str(), rows[0].count, rows[0].ns[0]), ("floor", 2000, 100));
        assert_eq!((rows[1].name.as_str(), rows[1].count, rows[1].ns[0]), ("tickbus shm", 2000, 300));
        let e =
            merge_round(&mut rows, vec![row("floor", Kind::Floor, 100), row("aeron", Kind::Peer, 900)]).unwrap_err();
        assert!(e.contains("do not match"), "{e}");
        let e = merge_round(&mut rows, vec![row("floor", Kind::Floor, 1), row("floor", Kind::Floor, 1)]).unwrap_err();
        assert!(e.contains("do not match") || e.contains("two rows named"), "{e}");
    }

    pub(crate) fn rtt_64(rows: Vec<Row>) -> Section {
        Section { mode: "rtt".into(), size: 64, rate: None, rows }
    }

    #[test]
    fn a_floor_tickbus_beats_by_more_than_ten_percent_is_marked_suspect() {
        let mut sec = rtt_64(vec![
            row("floor (cache-line ping-pong)", Kind::Floor, 100),
            row("floor, same payload", Kind::Floor, 200),
            row("floor, close call", Kind::Floor, 160),
            row("tickbus shm", Kind::Tickbus, 150),
        ]);
        sec.ratios();
        assert_eq!(sec.rows[0].suspect, None, "a floor below tickbus is a floor");
        let w = sec.rows[1].suspect.as_deref().expect("tickbus at 150 beats a 200 ns floor by 25%");
        assert!(w.contains("tickbus shm beats it at p50 (150 < 200 ns, 0.75x)"), "{w}");
        assert_eq!(sec.rows[2].suspect, None, "within 10% is noise, not a broken floor");
        let json = serde_json::to_value(&sec).unwrap();
        assert!(json["rows"][1]["suspect"].is_string() && json["rows"][0].get("suspect").is_none());
    }

    /// The text and HTML tables mark a row from one place: a backlog wins over a suspect floor,
    /// and lost datagrams are said beside either, or alone.
    #[test]
    fn a_rows_marks_say_backlogged_before_suspect_and_lost_datagrams_beside_either() {
        let mut r = row("tickbus feed ingest (udp)", Kind::Tickbus, 100);
        assert_eq!(r.marks(), "");
        r.round_lost = vec![false, true];
        assert_eq!(r.marks(), " [LOST DATAGRAMS]");
        r.suspect = Some("beaten".into());
        assert_eq!(r.marks(), " [SUSPECT] [LOST DATAGRAMS]");
        r.backlog = Some(Backlog {
            max_behind_ns: 2_000_000,
            late_sends: 50,
            sends: 1000,
            asked_msgs_per_s: 1e6,
            sustained_msgs_per_s: 9e5,
        });
        assert_eq!(r.marks(), " [BACKLOGGED] [LOST DATAGRAMS]");
        r.round_lost = vec![false, false];
        assert_eq!(r.marks(), " [BACKLOGGED]");
    }

    #[test]
    fn a_sender_behind_its_schedule_is_backlogged_by_either_bound() {
        use tickbus_apps::summary::BACKLOG_MAX_BEHIND_NS;
        let b = |max_behind_ns, late_sends| Backlog {
            max_behind_ns,
            late_sends,
            sends: 1000,
            asked_msgs_per_s: 1e6,
            sustained_msgs_per_s: 9e5,
        };
        assert!(!b(BACKLOG_MAX_BEHIND_NS, 10).is_backlogged(), "at both bounds: not yet");
        assert!(b(BACKLOG_MAX_BEHIND_NS + 1, 0).is_backlogged(), "one send over 10 ms behind");
        assert!(b(200_000, 11).is_backlogged(), "over 1% of sends over 100 us late");
        assert!(b(12_000_000, 0).says().starts_with("BACKLOGGED: the sender fell up to 12.0 ms behind"));
    }

    #[test]
    fn a_backlogged_floor_or_peer_is_held_against_nothing() {
        let backlog = Backlog {
            max_behind_ns: 5_000_000,
            late_sends: 0,
            sends: 1,
            asked_msgs_per_s: 1.0,
            sustained_msgs_per_s: 1.0,
        };
        let mut fast_but_behind = row("b", Kind::Peer, 50);
        fast_but_behind.backlog = Some(backlog);
        let mut floor_behind = row("floor behind", Kind::Floor, 10);
        floor_behind.backlog = Some(backlog);
        let mut sec = rtt_64(vec![
            floor_behind,
            row("floor", Kind::Floor, 100),
            row("tickbus shm", Kind::Tickbus, 150),
            row("a", Kind::Peer, 300),
            fast_but_behind,
        ]);
        sec.ratios();
        assert_eq!(sec.best_peer().unwrap().name, "a");
        assert_eq!(sec.rows[2].x_floor.as_ref().unwrap()[0], 1.5, "against the floor that kept its schedule");
        assert_eq!(sec.rows[2].x_best_peer.as_ref().unwrap()[0], 0.5);
    }

    #[test]
    fn ratios_are_against_the_floor_and_the_best_peer() {
        let mut sec = rtt_64(vec![
            row("floor", Kind::Floor, 100),
            row("tickbus shm", Kind::Tickbus, 150),
            row("a", Kind::Peer, 300),
            row("b", Kind::Peer, 200),
        ]);
        sec.ratios();
        assert_eq!(sec.rows[1].x_floor.as_ref().unwrap()[0], 1.5);
        assert_eq!(sec.rows[1].x_best_peer.as_ref().unwrap()[0], 0.75);
        assert_eq!(sec.best_peer().unwrap().name, "b");
    }

    /// Issue 24: the model layer depends on nothing above it. Its sources may name only the
    /// model itself (`crate::model`, `super::`), never the bench or render layer (nor anything
    /// else in the crate): data flows bench -> model -> render.
    #[test]
    fn the_model_layer_imports_neither_the_bench_nor_the_render_layer() {
        let sources = [
            ("mod.rs", include_str!("mod.rs")),
            ("book.rs", include_str!("book.rs")),
            ("fanout.rs", include_str!("fanout.rs")),
            ("itch.rs", include_str!("itch.rs")),
            ("journal.rs", include_str!("journal.rs")),
            ("pipeline.rs", include_str!("pipeline.rs")),
            ("rdma.rs", include_str!("rdma.rs")),
            ("verdict.rs", include_str!("verdict.rs")),
            ("wire_trade.rs", include_str!("wire_trade.rs")),
        ];
        let entries = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/src/model")).unwrap().count();
        assert_eq!(entries, sources.len(), "a model file this test does not read: list it above");
        for (file, src) in sources {
            // Brace depth inside mod.rs's `mod tests` (0: outside it), where `super` is the model.
            let mut in_tests = 0i64;
            for (n, line) in src.lines().enumerate() {
                // The code outside char and string literals and comments, without whitespace (so
                // `crate :: bench` is `crate::bench`).
                let outside: String = line.replace("'\"'", "' '").split('"').step_by(2).collect();
                let code: String =
                    outside.split("//").next().unwrap_or("").chars().filter(|c| !c.is_whitespace()).collect();
                if file == "mod.rs" && (in_tests > 0 || code.contains("modtests{")) {
                    in_tests += code.matches('{').count() as i64 - code.matches('}').count() as i64;
                }
                // In mod.rs outside its tests `super` is the crate root: any path through it
                // leaves the model.
                assert!(
                    file != "mod.rs" || in_tests > 0 || !code.contains("super::"),
                    "model/{file}:{}: names super:: from the model's root (the crate root)",
                    n + 1
                );
                let mut rest = code.as_str();
                while let Some(at) = rest.find("crate::") {
                    let after = &rest[at + "crate::".len()..];
                    assert!(
                        after.starts_with("model"),
                        "model/{file}:{}: names crate::{} (the model may import only itself)",
                        n + 1,
                        after.split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap_or("")
                    );
                    rest = after;
                }
                assert!(!code.contains("super::super"), "model/{file}:{}: reaches above the model", n + 1);
            }
        }
    }
}
