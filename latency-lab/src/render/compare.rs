//! Regression guard: reads two `report.json` files and flags every percentile (and throughput)
//! that got worse by more than a threshold. Rows are matched by section and transport name.
//!
//! A comparison is only as good as what it compares: reports from different hosts, kernels or
//! set-ups (the doctor's findings) are warned about, and every section, transport or throughput
//! row OLD has and NEW lacks is listed as missing, never skipped, because a transport that
//! stopped running is worse than one that got slower. The exit code tells them apart.
use std::fmt::Write as _;
use std::path::Path;

use tickbus::doctor::Diagnosis;

use crate::model::{Report, PERCENTILES};

/// What changed beyond the threshold, and what could not be compared.
pub struct Comparison {
    pub text: String,
    pub regressions: usize,
    /// Sections, rows and throughput rows in OLD that NEW lacks.
    pub missing: usize,
    /// How the two environments differ (identity fields, doctor findings whose status moved).
    pub environment: Vec<String>,
}

/// `latency-lab compare`'s exit codes.
pub mod exit {
    /// Everything in OLD was measured in NEW, nothing worse beyond the threshold.
    pub const SAME: u8 = 0;
    /// At least one figure got worse beyond the threshold.
    pub const REGRESSED: u8 = 1;
    /// Could not compare: a file unreadable or not a report, or rows of OLD missing from NEW.
    pub const INCOMPLETE: u8 = 2;
}

impl Comparison {
    /// Regressed beats incomplete: a figure known to be worse is the stronger news.
    pub fn exit_code(&self) -> u8 {
        if self.regressions > 0 {
            exit::REGRESSED
        } else if self.missing > 0 {
            exit::INCOMPLETE
        } else {
            exit::SAME
        }
    }
}

/// The differences between two reports' environments (the host's, and the RDMA guest's when
/// either has one); a report without one is a difference too.
fn environments(a: &Report, b: &Report) -> Vec<String> {
    let mut d = diagnoses(&a.environment, &b.environment);
    if a.environment_rdma.is_some() || b.environment_rdma.is_some() {
        d.extend(diagnoses(&a.environment_rdma, &b.environment_rdma).into_iter().map(|e| format!("rdma guest: {e}")));
    }
    d
}

fn diagnoses(a: &Option<Diagnosis>, b: &Option<Diagnosis>) -> Vec<String> {
    let (Some(ea), Some(eb)) = (a, b) else {
        return match (a, b) {
            (None, None) => vec!["neither report records its environment (made before `doctor` was in the lab)".into()],
            (None, _) => vec!["OLD does not record its environment".into()],
            _ => vec!["NEW does not record its environment".into()],
        };
    };
    let mut d = ea.identity.differences(&eb.identity);
    for fb in &eb.findings {
        match ea.findings.iter().find(|f| f.check == fb.check) {
            Some(fa) if fa.status != fb.status => {
                d.push(format!("{}: {:?} -> {:?} ({})", fb.check, fa.status, fb.status, fb.detail))
            }
            None => d.push(format!("{}: only in NEW ({:?})", fb.check, fb.status)),
            _ => {}
        }
    }
    for fa in ea.findings.iter().filter(|fa| eb.finding(&fa.check).is_none()) {
        d.push(format!("{}: only in OLD ({:?})", fa.check, fa.status));
    }
    d
}

fn load(p: &Path) -> Result<Report, String> {
    let s = std::fs::read_to_string(p).map_err(|e| format!("reading {}: {e}", p.display()))?;
    serde_json::from_str(&s).map_err(|e| format!("{} is not a latency-lab report.json: {e}", p.display()))
}

pub fn compare(old: &Path, new: &Path, threshold_pct: f64) -> Result<Comparison, String> {
    let (a, b) = (load(old)?, load(new)?);
    let limit = 1.0 + threshold_pct / 100.0;
    let mut text = String::new();
    let mut regressions = 0;
    let mut missing = 0;
    let environment = environments(&a, &b);
    if !environment.is_empty() {
        let _ = writeln!(
            text,
            "WARNING: OLD and NEW may come from different environments; figures may differ for that alone:"
        );
        for e in &environment {
            let _ = writeln!(text, "  {e}");
        }
    }
    let new_sections: Vec<_> = b.sections.iter().chain(b.tick_to_trade.iter()).collect();
    for sa in a.sections.iter().chain(a.tick_to_trade.iter()) {
        match new_sections.iter().find(|s| s.key() == sa.key()) {
            None => {
                missing += 1;
                let _ = writeln!(text, "MISSING {}: the whole section is not in NEW", sa.key());
            }
            Some(sb) => {
                for ra in sa.rows.iter().filter(|ra| !sb.rows.iter().any(|rb| rb.name == ra.name)) {
                    missing += 1;
                    let _ = writeln!(text, "MISSING {} {}: not measured in NEW", sa.key(), ra.name);
                }
            }
        }
    }
    for ta in a.throughput.iter().filter(|ta| !b.throughput.iter().any(|t| t.name == ta.name && t.size == ta.size)) {
        missing += 1;
        let _ = writeln!(text, "MISSING throughput {} {} B: not measured in NEW", ta.name, ta.size);
    }
    let names: Vec<&str> = PERCENTILES.iter().map(|p| p.1).chain(["max"]).collect();
    for sb in b.sections.iter().chain(b.tick_to_trade.iter()) {
        let Some(sa) = a.sections.iter().chain(a.tick_to_trade.iter()).find(|s| s.key() == sb.key()) else {
            let _ = writeln!(text, "{}: new section (not in {})", sb.key(), old.display());
            continue;
        };
        for rb in &sb.rows {
            let Some(ra) = sa.rows.iter().find(|r| r.name == rb.name) else { continue };
            if ra.backlog.is_some() || rb.backlog.is_some() {
                let which = if ra.backlog.is_some() { "OLD" } else { "NEW" };
                let _ = writeln!(
                    text,
                    "NOT JUDGED {} {}: backlogged in {which} (its sender fell behind: the figures are queueing)",
                    sb.key(),
                    rb.name
                );
                continue;
            }
            // max is reported, not judged: one sample decides it.
            for (name, (x, y)) in names.iter().zip(ra.ns.iter().zip(&rb.ns)).take(PERCENTILES.len()) {
                let (x, y) = (*x as f64, *y as f64);
                if y > x * limit {
                    regressions += 1;
                    let _ = writeln!(
                        text,
                        "WORSE {} {} {name}: {x:.0} -> {y:.0} ns (+{:.1}%)",
                        sb.key(),
                        rb.name,
                        100.0 * (y / x - 1.0)
                    );
                }
            }
        }
    }
    for tb in &b.throughput {
        if let Some(ta) = a.throughput.iter().find(|t| t.name == tb.name && t.size == tb.size) {
            if tb.msgs_per_s * limit < ta.msgs_per_s {
                regressions += 1;
                let _ = writeln!(
                    text,
                    "WORSE throughput {} {} B: {:.0} -> {:.0} msg/s",
                    tb.name, tb.size, ta.msgs_per_s, tb.msgs_per_s
                );
            }
        }
    }
    let _ = writeln!(
        text,
        "{regressions} regressions beyond {threshold_pct}%, {missing} missing from NEW, {} environment differences ({} -> {})",
        environment.len(),
        old.display(),
        new.display()
    );
    Ok(Comparison { text, regressions, missing, environment })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Kind, Row, Section};

    fn report(p50: u64) -> Report {
        let mut h = crate::bench::harness::histogram();
        h.record(p50).unwrap();
        let rows = vec![Row::new("tickbus shm".into(), Kind::Tickbus, String::new(), h)];
        let mut r = Report {
            sections: vec![Section { mode: "rtt".into(), size: 64, rate: None, rows }],
            cores: (0, 0),
            ..Default::default()
        };
        r.diagnose(false, std::time::Duration::ZERO);
        r
    }

    fn write(p: &Path, r: &Report) {
        std::fs::write(p, serde_json::to_string(r).unwrap()).unwrap();
    }

    #[test]
    fn missing_transports_and_other_environments_are_named_with_their_own_exit_code() {
        let dir = std::env::temp_dir().join(format!("lab-compare-env-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.json"), dir.join("b.json"));
        let old = report(100);
        write(&a, &old);
        write(&b, &old);
        let same = compare(&a, &b, 10.0).unwrap();
        assert_eq!((same.exit_code(), same.missing), (exit::SAME, 0), "{}", same.text);
        assert!(same.environment.is_empty(), "{}", same.text);

        // NEW lost a transport and a whole section, and ran on another host with fewer hugepages.
        let mut new = report(100);
        new.sections[0].rows.clear();
        new.sections.push(Section { mode: "one-way".into(), size: 64, rate: Some(100_000), rows: vec![] });
        let mut old2 = report(100);
        old2.sections.push(Section { mode: "rtt".into(), size: 1344, rate: None, rows: vec![] });
        write(&a, &old2);
        let env = new.environment.as_mut().unwrap();
        env.identity.hostname = "elsewhere".into();
        let hp = env.findings.iter_mut().find(|f| f.check == "hugepages").unwrap();
        let was = hp.status;
        hp.status = if was == tickbus::doctor::Status::Fail {
            tickbus::doctor::Status::Ok
        } else {
            tickbus::doctor::Status::Fail
        };
        write(&b, &new);
        let c = compare(&a, &b, 10.0).unwrap();
        assert_eq!(c.exit_code(), exit::INCOMPLETE, "{}", c.text);
        assert_eq!(c.missing, 2, "{}", c.text);
        assert!(c.text.contains("MISSING rtt-64B tickbus shm: not measured in NEW"), "{}", c.text);
        assert!(c.text.contains("MISSING rtt-1344B: the whole section is not in NEW"), "{}", c.text);
        assert!(c.text.contains("WARNING: OLD and NEW may come from different environments"), "{}", c.text);
        assert!(c.environment.iter().any(|e| e.contains("hostname") && e.ends_with("-> elsewhere")), "{}", c.text);
        assert!(c.environment.iter().any(|e| e.starts_with("hugepages:")), "{}", c.text);

        // A report from before the lab recorded its environment is itself a difference.
        let mut bare = report(100);
        bare.environment = None;
        write(&b, &bare);
        write(&a, &old);
        let c = compare(&a, &b, 10.0).unwrap();
        assert_eq!(c.environment, vec!["NEW does not record its environment".to_string()], "{}", c.text);
        assert_eq!(c.exit_code(), exit::SAME, "the figures themselves compare: {}", c.text);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn flags_percentiles_that_got_worse_beyond_the_threshold_only() {
        let dir = std::env::temp_dir().join(format!("lab-compare-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b, c) = (dir.join("a.json"), dir.join("b.json"), dir.join("c.json"));
        std::fs::write(&a, serde_json::to_string(&report(100)).unwrap()).unwrap();
        std::fs::write(&b, serde_json::to_string(&report(105)).unwrap()).unwrap();
        std::fs::write(&c, serde_json::to_string(&report(130)).unwrap()).unwrap();
        assert_eq!(compare(&a, &b, 10.0).unwrap().regressions, 0);
        let r = compare(&a, &c, 10.0).unwrap();
        assert_eq!(r.regressions, 5, "{}", r.text);
        assert_eq!(r.exit_code(), exit::REGRESSED);
        assert!(r.text.contains("WORSE rtt-64B tickbus shm p50: 100 -> 130 ns (+30.0%)"), "{}", r.text);
        std::fs::write(&c, "{}").unwrap();
        let empty = compare(&a, &c, 10.0).unwrap();
        assert_eq!((empty.regressions, empty.missing), (0, 1), "an empty NEW measured nothing OLD had: {}", empty.text);
        assert_eq!(empty.exit_code(), exit::INCOMPLETE);
        std::fs::write(&c, "not json").unwrap();
        assert!(compare(&a, &c, 10.0).err().unwrap().contains("is not a latency-lab report.json"));
        let _ = std::fs::remove_dir_all(dir);
    }
}
