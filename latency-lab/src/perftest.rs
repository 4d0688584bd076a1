//! perftest's figures from the same guest boot, beside ours: ib_write_lat and ib_send_lat report
//! one-way latency (half the round trip), so an RTT is twice the typical (median) figure.
use std::fmt::Write as _;
use std::path::Path;

use crate::report::Row;

/// One perftest result from perftest.json (written by tools/rig/guest-perftest.sh).
#[derive(Debug, Clone, PartialEq)]
pub struct Lat {
    pub tool: String,
    pub bytes: usize,
    pub typical_us: f64,
    pub p99_us: f64,
}

/// The perftest tool each of our RDMA transports is held against: the verbs operation it is
/// built on, measured bare.
pub const BASELINES: [(&str, &str); 2] = [("rdma-rc", "ib_write_lat"), ("ud-mcast", "ib_send_lat_ud")];

/// Pulls the entries out of perftest.json (one JSON object per line).
pub fn parse(json: &str) -> Vec<Lat> {
    let field = |line: &str, key: &str| -> Option<f64> {
        let at = line.find(&format!("\"{key}\": "))? + key.len() + 4;
        line[at..].split([',', '}']).next()?.trim().parse().ok()
    };
    let tool = |line: &str| -> Option<String> {
        let at = line.find("\"tool\": \"")? + 9;
        Some(line[at..].split('"').next()?.to_owned())
    };
    json.lines()
        .filter_map(|l| {
            Some(Lat {
                tool: tool(l)?,
                bytes: field(l, "bytes")? as usize,
                typical_us: field(l, "typical_us")?,
                p99_us: field(l, "p99_us")?,
            })
        })
        .collect()
}

/// A table of our RDMA RTTs, each beside 2 x the one-way figures of its perftest baseline
/// ([`BASELINES`]) for `size`.
pub fn compare(path: &Path, size: usize, rows: &[Row]) -> Result<String, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let entries = parse(&text);
    let mut s = String::new();
    for (ours, tool) in BASELINES {
        let w = entries
            .iter()
            .find(|e| e.tool == tool && e.bytes == size)
            .ok_or_else(|| format!("{} has no {tool} result for {size} B", path.display()))?;
        let (rtt50, rtt99) = (2.0 * w.typical_us * 1000.0, 2.0 * w.p99_us * 1000.0);
        let _ = writeln!(s, "{tool} (same boot, {size} B): RTT typical {rtt50:.0} ns, p99 {rtt99:.0} ns (2 x one-way)");
        for o in rows.iter().filter(|o| o.name.contains(ours)) {
            let (p50, p99) = (o.ns[0] as f64, o.ns[2] as f64);
            let _ = writeln!(
                s,
                "  {:<34} p50 {:>8.0} ns = {:.2}x {tool}   p99 {:>8.0} ns = {:.2}x",
                o.name,
                p50,
                p50 / rtt50,
                p99,
                p99 / rtt99
            );
        }
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
        let lat = |tool: &str, typical_us, p99_us| Lat { tool: tool.into(), bytes: 64, typical_us, p99_us };
        assert_eq!(parse(json), vec![lat("ib_write_lat", 20.14, 95.54), lat("ib_send_lat_ud", 27.68, 97.58)]);
    }
}
