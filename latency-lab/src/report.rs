//! The report: terminal tables with every percentile as a ratio to the floor and to the best
//! peer, `report.json` (what `compare` reads), HdrHistogram files (`.hgrm` percentile
//! distributions and one `latency.hlog` interval log with a tag per run, both readable by the
//! HdrHistogram tools), and the plots.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::itch_bench::ItchReport;

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
    /// Set on a floor that a tickbus row beats by more than 10% at p50, saying by how much: a
    /// floor the product beats does not move the bytes the fastest way, so ratios against it
    /// flatter tickbus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspect: Option<String>,
    /// When the samples were taken: latency.hlog's interval start and length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<Span>,
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
    /// Adds another run of the same transport (interleaved rounds); see [`merge_round`].
    pub fn merge(&mut self, other: Row) {
        debug_assert_eq!(self.name, other.name, "rows are merged by name");
        if let (Some(a), Some(b)) = (self.hist.as_mut(), other.hist) {
            a.add(&b).expect("histograms with the same bounds");
            let h = a.clone();
            let span = match (self.span, other.span) {
                (Some(x), Some(y)) => Some(x.union(y)),
                (x, y) => x.or(y),
            };
            *self = Row {
                late_sends: self.late_sends,
                span,
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
            suspect: None,
            span: None,
            hist: Some(h),
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
        let floor = self.rows.iter().find(|r| r.kind == Kind::Floor).map(|r| r.ns.clone());
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
        self.rows.iter().filter(|r| r.kind == Kind::Peer).min_by_key(|r| r.ns[0])
    }

    pub fn table(&self) -> String {
        let mut s = String::new();
        let what = match self.rate {
            Some(r) => format!("one-way latency from the intended send time, open loop at {} msg/s", rate_name(r)),
            None => "round-trip time, closed-loop ping-pong".to_owned(),
        };
        let best = self.best_peer().map(|r| r.name.clone()).unwrap_or_else(|| "-".into());
        let _ = writeln!(s, "{what}, {} B messages; ns (x floor | x best peer = {best})", self.size);
        let _ = write!(s, "{:<50}", "transport");
        for (_, name) in PERCENTILES {
            let _ = write!(s, "{name:>22}");
        }
        let _ = writeln!(s, "{:>22}", "max");
        for r in &self.rows {
            let name = if r.suspect.is_some() { format!("{} [SUSPECT]", r.name) } else { r.name.clone() };
            let _ = write!(s, "{name:<50}");
            for (k, v) in r.ns.iter().enumerate() {
                let f = r.x_floor.as_ref().map_or("-".into(), |x| format!("{:.2}", x[k]));
                let b = r.x_best_peer.as_ref().map_or("-".into(), |x| format!("{:.2}", x[k]));
                let _ = write!(s, "{:>22}", format!("{v} ({f}|{b})"));
            }
            let _ = writeln!(s);
        }
        for r in &self.rows {
            let late = r.late_sends.map_or(String::new(), |l| format!("; {l} sends left late"));
            let suspect = r.suspect.as_ref().map_or(String::new(), |w| format!("; SUSPECT FLOOR: {w}"));
            let _ = writeln!(s, "  {}: {}{late}{suspect}", r.name, r.note);
        }
        s
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_to_trade: Option<Section>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<crate::journal_bench::JournalReport>,
    /// The trading pipeline across processes, per rate, hop by hop beside its floors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pipeline: Vec<crate::pipeline::Run>,
    /// The pipeline over RDMA in the Soft-RoCE guest, beside perftest (latency-lab rdma).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_rdma: Option<crate::pipeline::RdmaRun>,
    /// Fan-out to 1, 2 and 4 subscribers: shm on the host, rdma-rc and ud-mcast in the guest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fanout: Vec<crate::fanout::FanoutReport>,
    /// tickbus over RDMA beside perftest in alternating rounds (latency-lab rdma).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_versus: Option<crate::rdma_rounds::Versus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The environment in a few lines: who the host is, and every finding that is not plainly ok
/// (the full list, with remedies, is in report.json and `tickbus doctor`).
pub fn environment_table(env: &tickbus::doctor::Diagnosis) -> String {
    use tickbus::doctor::Status;
    let id = &env.identity;
    let mut s = format!(
        "ENVIRONMENT: {} ({}), kernel {}, {} CPUs, {} GiB, {}; doctor: {}\n",
        id.hostname,
        id.cpu_model,
        id.kernel,
        id.cpus,
        id.memory_bytes >> 30,
        id.virtualization,
        if env.ready() { "ready" } else { "NOT ready" }
    );
    for f in env.findings.iter().filter(|f| f.status >= Status::Warn) {
        let _ = writeln!(s, "  [{}] {}: {}", f.status.tag(), f.check, f.detail);
    }
    s
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

    /// Runs `tickbus doctor`'s checks for the cores the lab pins to and keeps them in the report.
    pub fn diagnose(&mut self, require_rdma: bool) {
        let mut o = tickbus::doctor::DoctorOptions::default();
        o.cores = vec![self.cores.0, self.cores.1];
        o.require_rdma = require_rdma;
        self.environment = Some(tickbus::doctor::diagnose(&o));
    }

    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "latency-lab on {} (cores {}/{}, TSC {:.3} ticks/ns)\n",
            self.machine, self.cores.0, self.cores.1, self.ticks_per_ns
        );
        if let Some(env) = &self.environment {
            let _ = writeln!(s, "{}", environment_table(env));
        }
        if let Some(env) = &self.environment_rdma {
            let _ = writeln!(s, "RDMA GUEST {}", environment_table(env));
        }
        if let Some(t) = &self.tick_to_trade {
            let _ = writeln!(s, "TICK-TO-TRADE\n{}", t.table());
        }
        if !self.pipeline.is_empty() {
            let _ = writeln!(s, "TRADING PIPELINE\n{}", crate::pipeline::table(&self.pipeline));
        }
        if let Some(r) = &self.pipeline_rdma {
            let _ = writeln!(s, "{}", crate::pipeline::rdma_table(r));
        }
        if let Some(v) = &self.rdma_versus {
            let _ = writeln!(s, "{}", crate::rdma_rounds::table(v));
        }
        for sec in &self.sections {
            let _ = writeln!(s, "{}", sec.table());
        }
        if !self.throughput.is_empty() {
            let _ = writeln!(s, "throughput, sender flat out (x best peer)");
            for t in &self.throughput {
                let x = t.x_best_peer.map_or("-".into(), |x| format!("{x:.2}x"));
                let _ = writeln!(
                    s,
                    "  {:<32} {:>5} B {:>14.0} msg/s {:>10.1} MB/s  {x}",
                    t.name, t.size, t.msgs_per_s, t.mb_per_s
                );
            }
            let _ = writeln!(s);
        }
        for f in &self.fanout {
            let _ = writeln!(s, "{}", f.table());
        }
        if let Some(i) = &self.itch {
            let _ = writeln!(s, "{}", i.table());
        }
        if let Some(j) = &self.journal {
            let _ = writeln!(s, "{}", j.table());
        }
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        s
    }

    /// Writes table.txt, report.json, the `.hgrm` files, latency.hlog and the plots into `dir`.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, Box<dyn std::error::Error>> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("table.txt"), self.text())?;
        std::fs::write(dir.join("report.json"), serde_json::to_string_pretty(self)?)?;
        let mut log = Vec::new();
        {
            // Interval-log histograms are V2 *compressed* (cookie 0x1c849314): what HdrHistogram's
            // log readers (Java's HistogramLogReader, Python's hdrh) accept. Each interval starts
            // when its row's samples began, relative to the log's BaseTime, and lasts as long.
            let now = std::time::SystemTime::now();
            let rows = || self.sections.iter().chain(self.tick_to_trade.iter()).flat_map(|s| &s.rows);
            let now_s = now.duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
            let base_s = rows().filter_map(|r| r.span).map(|s| s.start_unix_s).fold(now_s, f64::min);
            let base = std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(base_s);
            let mut ser = V2DeflateSerializer::new();
            let mut w = IntervalLogWriterBuilder::new()
                .with_start_time(base)
                .with_base_time(base)
                .add_comment("tickbus latency-lab: one interval per transport and section, tagged section/transport; values in ns")
                .begin_log_with(&mut log, &mut ser)?;
            let all = self.sections.iter().chain(self.tick_to_trade.iter());
            for sec in all {
                for r in &sec.rows {
                    let Some(h) = &r.hist else { continue };
                    let file = format!("{}-{}.hgrm", sec.key(), slug(&r.name));
                    std::fs::write(dir.join(file), hgrm(h))?;
                    let tag = format!("{}/{}", sec.key(), slug(&r.name));
                    // A row without a span (none today) is written at the log's end, zero long.
                    let span = r.span.unwrap_or(Span { start_unix_s: now_s, secs: 0.0 });
                    let start = std::time::Duration::from_secs_f64((span.start_unix_s - base_s).max(0.0));
                    let len = std::time::Duration::from_secs_f64(span.secs.max(0.0));
                    w.write_histogram(h, start, len, Tag::new(&tag))?;
                }
            }
        }
        std::fs::write(dir.join("latency.hlog"), log)?;
        for sec in self.sections.iter().chain(self.tick_to_trade.iter()) {
            crate::plot::percentile_plot(sec, &dir.join(format!("{}.svg", sec.key())))?;
        }
        if !self.pipeline.is_empty() {
            crate::pipeline::stacked_plot(&self.pipeline, &dir.join("pipeline-hops.svg"))?;
        }
        for f in &self.fanout {
            f.plot(&dir.join(f.plot_file()))?;
        }
        crate::html::write(self, dir)?;
        Ok(dir.canonicalize().unwrap_or_else(|_| dir.to_owned()))
    }
}

pub fn slug(name: &str) -> String {
    let s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    s.split('_').filter(|p| !p.is_empty()).collect::<Vec<_>>().join("_")
}

/// HdrHistogram's percentile-distribution text, as its plotters read it.
pub fn hgrm(h: &Histogram<u64>) -> String {
    let mut s = String::from("       Value     Percentile TotalCount 1/(1-Percentile)\n\n");
    // TotalCount is the running total up to each row's value, as HdrHistogram prints it.
    let mut total = 0u64;
    for v in h.iter_quantiles(1) {
        let q = v.quantile_iterated_to();
        let inv = if q < 1.0 { format!("{:.2}", 1.0 / (1.0 - q)) } else { "inf".into() };
        total += v.count_since_last_iteration();
        let _ = writeln!(s, "{:>12.3} {:>14.12} {:>10} {:>14}", v.value_iterated_to() as f64, q, total, inv);
    }
    let _ = writeln!(s, "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]", h.mean(), h.stdev());
    let _ = writeln!(s, "#[Max     = {:>12.3}, Total count    = {:>12}]", h.max() as f64, h.len());
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, kind: Kind, v: u64) -> Row {
        let mut h = crate::harness::histogram();
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

    fn rtt_64(rows: Vec<Row>) -> Section {
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
        let t = sec.table();
        assert!(t.contains("floor, same payload [SUSPECT]") && t.contains("SUSPECT FLOOR: tickbus shm"), "{t}");
        let json = serde_json::to_value(&sec).unwrap();
        assert!(json["rows"][1]["suspect"].is_string() && json["rows"][0].get("suspect").is_none());
    }

    #[test]
    fn ratios_are_against_the_floor_and_the_best_peer_and_the_files_read_back() {
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
        let t = sec.table();
        assert!(t.contains("150 (1.50|0.75)"), "{t}");
        let dir = std::env::temp_dir().join(format!("lab-report-test-{}", std::process::id()));
        let rep = Report {
            machine: "test".into(),
            cores: (0, 1),
            ticks_per_ns: 1.0,
            sections: vec![sec],
            ..Default::default()
        };
        rep.write(&dir).unwrap();
        let back: Report = serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
        assert_eq!(back.sections[0].rows[1].ns[0], 150);
        let hg = std::fs::read_to_string(dir.join("rtt-64B-tickbus_shm.hgrm")).unwrap();
        assert!(hg.contains("Total count    =         1000"), "{hg}");
        // The TotalCount column runs up to the total, never down (it is cumulative).
        let totals: Vec<u64> = hg
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .skip(1)
            .map(|l| l.split_whitespace().nth(2).unwrap().parse().unwrap())
            .collect();
        assert!(totals.windows(2).all(|w| w[0] <= w[1]), "{hg}");
        assert_eq!(totals.last(), Some(&1000), "{hg}");
        let log = std::fs::read(dir.join("latency.hlog")).unwrap();
        let mut tags = Vec::new();
        for entry in hdrhistogram::serialization::interval_log::IntervalLogIterator::new(&log) {
            if let Ok(hdrhistogram::serialization::interval_log::LogEntry::Interval(i)) = entry {
                tags.push(i.tag().map(|t| t.as_str().to_owned()));
            }
        }
        assert_eq!(tags.len(), 4);
        assert_eq!(tags[1].as_deref(), Some("rtt-64B/tickbus_shm"));
        let svg = std::fs::read_to_string(dir.join("rtt-64B.svg")).unwrap();
        assert!(
            svg.contains("tickbus shm") && svg.contains("99.9%"),
            "the plot names its curves and its log percentile axis"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
