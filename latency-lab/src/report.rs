//! The report: a terminal table with each percentile as a ratio to the floor, a JSON summary,
//! and HdrHistogram percentile-distribution files (`.hgrm`) per benchmark.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;

use crate::harness::{Outcome, RunSpec};

/// Percentiles every report shows.
pub const PERCENTILES: [(f64, &str); 5] =
    [(50.0, "p50"), (90.0, "p90"), (99.0, "p99"), (99.9, "p99.9"), (99.99, "p99.99")];

pub struct Report {
    spec: RunSpec,
    outcomes: Vec<Outcome>,
}

impl Report {
    /// The first outcome is the floor every other one is compared with.
    pub fn new(spec: &RunSpec, outcomes: Vec<Outcome>) -> Report {
        Report { spec: *spec, outcomes }
    }

    fn row(h: &Histogram<u64>) -> Vec<u64> {
        let mut v: Vec<u64> = PERCENTILES.iter().map(|(p, _)| h.value_at_percentile(*p)).collect();
        v.push(h.max());
        v
    }

    pub fn outcomes(&self) -> &[Outcome] {
        &self.outcomes
    }

    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "RTT, {} B payload, {} round trips, cores {}/{}; ns (x floor)",
            self.spec.size, self.spec.iterations, self.spec.cores.0, self.spec.cores.1
        );
        let _ = write!(s, "{:<30}", "transport");
        for (_, name) in PERCENTILES {
            let _ = write!(s, "{name:>16}");
        }
        let _ = writeln!(s, "{:>16}", "max");
        let floor = Self::row(&self.outcomes[0].rtt_ns);
        for o in &self.outcomes {
            let _ = write!(s, "{:<30}", o.name);
            for (v, f) in Self::row(&o.rtt_ns).iter().zip(&floor) {
                let _ = write!(s, "{:>16}", format!("{v} ({:.2}x)", *v as f64 / (*f).max(1) as f64));
            }
            let _ = writeln!(s);
        }
        for o in &self.outcomes {
            let _ = writeln!(s, "  {}: {}", o.name, o.note);
        }
        s
    }

    fn json(&self) -> String {
        let floor = Self::row(&self.outcomes[0].rtt_ns);
        let mut s = format!(
            "{{\n  \"size\": {}, \"iterations\": {}, \"cores\": [{}, {}], \"ticks_per_ns\": {:.6},\n  \"results\": [\n",
            self.spec.size, self.spec.iterations, self.spec.cores.0, self.spec.cores.1, self.spec.ticks_per_ns
        );
        for (k, o) in self.outcomes.iter().enumerate() {
            let row = Self::row(&o.rtt_ns);
            let fields: Vec<String> = PERCENTILES
                .iter()
                .map(|(_, n)| n.to_string())
                .chain(["max".to_string()])
                .zip(row.iter().zip(&floor))
                .map(|(n, (v, f))| format!("\"{n}\": {v}, \"{n}_x_floor\": {:.3}", *v as f64 / (*f).max(1) as f64))
                .collect();
            let comma = if k + 1 < self.outcomes.len() { "," } else { "" };
            let _ = writeln!(
                s,
                "    {{\"name\": {:?}, \"note\": {:?}, \"unit\": \"ns\", {}}}{comma}",
                o.name,
                o.note,
                fields.join(", ")
            );
        }
        s.push_str("  ]\n}\n");
        s
    }

    /// HdrHistogram's percentile-distribution text, as its plotters read it.
    fn hgrm(h: &Histogram<u64>) -> String {
        let mut s = String::from("       Value     Percentile TotalCount 1/(1-Percentile)\n\n");
        for v in h.iter_quantiles(1) {
            let q = v.quantile_iterated_to();
            let inv = if q < 1.0 { format!("{:.2}", 1.0 / (1.0 - q)) } else { "inf".into() };
            let _ = writeln!(
                s,
                "{:>12.3} {:>14.12} {:>10} {:>14}",
                v.value_iterated_to() as f64,
                q,
                v.count_since_last_iteration(),
                inv
            );
        }
        let _ = writeln!(s, "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]", h.mean(), h.stdev());
        let _ = writeln!(s, "#[Max     = {:>12.3}, Total count    = {:>12}]", h.max() as f64, h.len());
        s
    }

    /// Writes table.txt, report.json and one .hgrm per benchmark into `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("table.txt"), self.table())?;
        std::fs::write(dir.join("report.json"), self.json())?;
        for o in &self.outcomes {
            let file: String = o.name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
            std::fs::write(dir.join(format!("{file}.hgrm")), Self::hgrm(&o.rtt_ns))?;
        }
        Ok(dir.canonicalize().unwrap_or_else(|_| dir.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(name: &str, values: &[u64]) -> Outcome {
        let mut h = Histogram::<u64>::new_with_bounds(1, 1_000_000, 3).unwrap();
        values.iter().for_each(|v| h.record(*v).unwrap());
        Outcome { name: name.into(), note: String::new(), rtt_ns: h }
    }

    #[test]
    fn ratios_are_against_the_first_outcome_and_json_parses_as_numbers() {
        let spec = RunSpec { size: 64, iterations: 4, warmup: 0, cores: (0, 1), ticks_per_ns: 1.0 };
        let r = Report::new(&spec, vec![outcome("floor", &[100; 4]), outcome("shm", &[150; 4])]);
        let t = r.table();
        assert!(t.contains("150 (1.50x)"), "{t}");
        assert!(t.contains("100 (1.00x)"), "{t}");
        let j = r.json();
        assert!(j.contains("\"p50\": 150, \"p50_x_floor\": 1.500"), "{j}");
        let hg = Report::hgrm(&r.outcomes[1].rtt_ns);
        assert!(hg.contains("Total count    =            4"), "{hg}");
    }
}
