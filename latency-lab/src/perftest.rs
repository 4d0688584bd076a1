//! perftest's figures from the same guest boot, beside ours: ib_write_lat reports one-way
//! latency (half the round trip), so its RTT is twice its typical (median) figure.
use std::fmt::Write as _;
use std::path::Path;

use crate::report::Row;

/// One ib_write_lat result from perftest.json (written by tools/rig/guest-perftest.sh).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriteLat {
    pub bytes: usize,
    pub typical_us: f64,
    pub p99_us: f64,
}

/// Pulls the ib_write_lat entries out of perftest.json (one JSON object per line).
pub fn parse(json: &str) -> Vec<WriteLat> {
    let field = |line: &str, key: &str| -> Option<f64> {
        let at = line.find(&format!("\"{key}\": "))? + key.len() + 4;
        line[at..].split([',', '}']).next()?.trim().parse().ok()
    };
    json.lines()
        .filter(|l| l.contains("\"tool\": \"ib_write_lat\""))
        .filter_map(|l| {
            Some(WriteLat {
                bytes: field(l, "bytes")? as usize,
                typical_us: field(l, "typical_us")?,
                p99_us: field(l, "p99_us")?,
            })
        })
        .collect()
}

/// A table of our RDMA RTTs beside 2 x ib_write_lat's one-way figures for `size`.
pub fn compare(path: &Path, size: usize, rows: &[Row]) -> Result<String, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let entries = parse(&text);
    let w = entries
        .iter()
        .find(|e| e.bytes == size)
        .ok_or_else(|| format!("{} has no ib_write_lat result for {size} B", path.display()))?;
    let (rtt50, rtt99) = (2.0 * w.typical_us * 1000.0, 2.0 * w.p99_us * 1000.0);
    let mut s =
        format!("ib_write_lat (same boot, {size} B): RTT typical {rtt50:.0} ns, p99 {rtt99:.0} ns (2 x one-way)\n");
    for o in rows.iter().filter(|o| o.name.contains("rdma")) {
        let (p50, p99) = (o.ns[0] as f64, o.ns[2] as f64);
        let _ = writeln!(
            s,
            "  {:<34} p50 {:>8.0} ns = {:.2}x ib_write_lat   p99 {:>8.0} ns = {:.2}x",
            o.name,
            p50,
            p50 / rtt50,
            p99,
            p99 / rtt99
        );
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_rig_perftest_json() {
        let json = r#"{"devices": ["rxe0", "rxe1"], "results": [
{"tool": "ib_write_lat", "bytes": 64, "iterations": 1000, "min_us": 19.70, "typical_us": 20.14, "avg_us": 23.09, "p99_us": 95.54, "p99_9_us": 347.28, "max_us": 347.28},
{"tool": "ib_send_lat_ud", "bytes": 64, "iterations": 1000, "min_us": 26.90, "typical_us": 27.68, "avg_us": 30.83, "p99_us": 97.58, "p99_9_us": 168.92, "max_us": 168.92}
]}"#;
        assert_eq!(parse(json), vec![WriteLat { bytes: 64, typical_us: 20.14, p99_us: 95.54 }]);
    }
}
