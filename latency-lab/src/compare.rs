//! Regression guard: reads two `report.json` files and flags every percentile (and throughput)
//! that got worse by more than a threshold. Rows are matched by section and transport name.
use std::fmt::Write as _;
use std::path::Path;

use crate::report::{Report, PERCENTILES};

/// What changed beyond the threshold.
pub struct Comparison {
    pub text: String,
    pub regressions: usize,
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
    let names: Vec<&str> = PERCENTILES.iter().map(|p| p.1).chain(["max"]).collect();
    for sb in b.sections.iter().chain(b.tick_to_trade.iter()) {
        let Some(sa) = a.sections.iter().chain(a.tick_to_trade.iter()).find(|s| s.key() == sb.key()) else {
            let _ = writeln!(text, "{}: new section (not in {})", sb.key(), old.display());
            continue;
        };
        for rb in &sb.rows {
            let Some(ra) = sa.rows.iter().find(|r| r.name == rb.name) else { continue };
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
    let _ =
        writeln!(text, "{regressions} regressions beyond {threshold_pct}% ({} -> {})", old.display(), new.display());
    Ok(Comparison { text, regressions })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Kind, Row, Section};

    fn report(p50: u64) -> Report {
        let mut h = crate::harness::histogram();
        h.record(p50).unwrap();
        let rows = vec![Row::new("tickbus shm".into(), Kind::Tickbus, String::new(), h)];
        Report { sections: vec![Section { mode: "rtt".into(), size: 64, rate: None, rows }], ..Default::default() }
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
        assert!(r.text.contains("WORSE rtt-64B tickbus shm p50: 100 -> 130 ns (+30.0%)"), "{}", r.text);
        std::fs::write(&c, "{}").unwrap();
        assert!(compare(&a, &c, 10.0).is_ok(), "an empty report has nothing to regress");
        std::fs::write(&c, "not json").unwrap();
        assert!(compare(&a, &c, 10.0).err().unwrap().contains("is not a latency-lab report.json"));
        let _ = std::fs::remove_dir_all(dir);
    }
}
