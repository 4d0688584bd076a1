//! The report's files: table.txt, report.json (what `compare` reads), HdrHistogram files
//! (`.hgrm` percentile distributions and one `latency.hlog` interval log with a tag per run, both
//! readable by the HdrHistogram tools), the plots and index.html.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;

use crate::model::{slug, Report, Span};

impl Report {
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
            super::plot::percentile_plot(sec, &dir.join(format!("{}.svg", sec.key())))?;
        }
        if !self.pipeline.is_empty() {
            super::plot::stacked_plot(&self.pipeline, &dir.join("pipeline-hops.svg"))?;
        }
        if !self.wire_trade.is_empty() {
            super::plot::wire_trade_plot(&self.wire_trade, &dir.join("wire-to-trade-hops.svg"))?;
        }
        for f in &self.fanout {
            f.plot(&dir.join(f.plot_file()))?;
        }
        super::html::write(self, dir)?;
        Ok(dir.canonicalize().unwrap_or_else(|_| dir.to_owned()))
    }
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
    use crate::model::tests::{row, rtt_64};
    use crate::model::{Kind, Report};

    #[test]
    fn the_tables_show_ratios_and_suspect_floors() {
        let mut sec = rtt_64(vec![
            row("floor", Kind::Floor, 100),
            row("floor, same payload", Kind::Floor, 200),
            row("tickbus shm", Kind::Tickbus, 150),
            row("b", Kind::Peer, 200),
        ]);
        sec.ratios();
        let t = sec.table();
        assert!(t.contains("150 (1.50|0.75)"), "{t}");
        assert!(t.contains("floor, same payload [SUSPECT]") && t.contains("SUSPECT FLOOR: tickbus shm"), "{t}");
    }

    #[test]
    fn the_files_read_back() {
        let mut sec = rtt_64(vec![
            row("floor", Kind::Floor, 100),
            row("tickbus shm", Kind::Tickbus, 150),
            row("a", Kind::Peer, 300),
            row("b", Kind::Peer, 200),
        ]);
        sec.ratios();
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
