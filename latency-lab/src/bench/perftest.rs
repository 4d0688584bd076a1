//! perftest's figures from the same guest boot, beside ours: ib_write_lat and ib_send_lat report
//! one-way latency (half the round trip), so an RTT is twice the typical (median) figure.
use std::error::Error;
use std::fmt::Write as _;
use std::path::Path;
#[cfg(feature = "rdma")]
use std::process::{Child, Command, Stdio};
#[cfg(feature = "rdma")]
use std::time::Duration;

use crate::model::Row;

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
    // A figure perftest could not have measured (its clock fit failed: `inf`) is no entry.
    let sane = |us: f64| (us.is_finite() && us > 0.0).then_some(us);
    json.lines()
        .filter_map(|l| {
            Some(Lat {
                tool: tool(l)?,
                bytes: field(l, "bytes")? as usize,
                typical_us: sane(field(l, "typical_us")?)?,
                p99_us: sane(field(l, "p99_us")?)?,
            })
        })
        .collect()
}

/// A table of our RDMA RTTs, each beside 2 x the one-way figures of its perftest baseline
/// ([`BASELINES`]) for `size`.
pub fn compare(path: &Path, size: usize, rows: &[Row]) -> Result<String, Box<dyn Error>> {
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

/// The rig's first device's address (rxe0 on veth0), where perftest's server listens.
#[cfg(feature = "rdma")]
pub const PEER_ADDR: &str = "169.254.77.1";

/// A perftest process, killed (if still running) when dropped.
#[cfg(feature = "rdma")]
struct Killed(Child);

#[cfg(feature = "rdma")]
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Longest one perftest client may run (a UD client that lost its last datagrams can wait in
/// its closing handshake forever).
#[cfg(feature = "rdma")]
const CLIENT_LIMIT: Duration = Duration::from_secs(300);

/// Runs perftest's `tool` (with `extra` arguments) between the two devices, server on the
/// first, for `size` bytes and `iters` iterations, and returns the client's result line as
/// numbers (perftest's table: bytes, iterations, then the tool's figures). The client is tried
/// up to three times with a fresh server (under emulation the server may not listen yet after
/// its head start) and killed if it outlives [`CLIENT_LIMIT`].
#[cfg(feature = "rdma")]
fn run(tool: &str, extra: &[&str], devices: (&str, &str), size: usize, iters: u64) -> Result<Vec<f64>, Box<dyn Error>> {
    let common = |dev: &str| {
        let mut c = Command::new(tool);
        c.args(extra).args(["-d", dev, "-s", &size.to_string(), "-n", &iters.to_string(), "-F"]);
        c
    };
    let mut last = String::new();
    for attempt in 1..=3 {
        let server = Killed(
            common(devices.0)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("starting {tool} (install perftest): {e}"))?,
        );
        std::thread::sleep(Duration::from_secs(attempt));
        let client = Killed(common(devices.1).arg(PEER_ADDR).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?);
        let deadline = std::time::Instant::now() + CLIENT_LIMIT;
        let mut client = client;
        while client.0.try_wait()?.is_none() {
            if std::time::Instant::now() > deadline {
                return Err(format!("{tool} {size} B did not finish within {CLIENT_LIMIT:?} (killed)").into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut out = String::new();
        let mut err = String::new();
        if let Some(mut o) = client.0.stdout.take() {
            std::io::Read::read_to_string(&mut o, &mut out)?;
        }
        if let Some(mut e) = client.0.stderr.take() {
            std::io::Read::read_to_string(&mut e, &mut err)?;
        }
        drop(server);
        let line = out
            .lines()
            .map(str::split_whitespace)
            .map(Iterator::collect::<Vec<_>>)
            .find(|f| f.len() >= 5 && f[0].parse::<usize>() == Ok(size) && f[1].parse::<u64>().is_ok());
        if let Some(f) = line {
            return f
                .iter()
                .map(|x| x.parse::<f64>().map_err(|_| format!("{tool} {size} B: {x:?} in result line {f:?}").into()))
                .collect();
        }
        last = format!("{out} {err}");
    }
    Err(format!("{tool} {size} B gave no result in 3 tries: {last}").into())
}

/// perftest's one-way latency in ns, typical (median) and p99: `ib_write_lat` or
/// `ib_send_lat` (whose table is bytes, iterations, t_min, t_max, t_typical, t_avg, t_stdev,
/// p99, p99.9).
///
/// perftest is asked for TSC cycles (`-C`) and the cycles are converted here with
/// `ticks_per_ns`, the rate the lab measured for its own figures. Left to convert them itself,
/// perftest fits its cycle counter against `gettimeofday` over a fraction of a second and, when
/// the fit is poor (r² < 0.9, as under TCG with two perftests at once), divides by zero and
/// prints `inf` for every figure: CI saw three such runs in a row. Both programs read RDTSC in
/// the same guest, so one conversion also puts these figures and tickbus's on one clock (the
/// optional `--perftest` file from `tools/rig/guest-perftest.sh` is still in perftest's own µs).
#[cfg(feature = "rdma")]
pub fn one_way(
    tool: &str,
    extra: &[&str],
    devices: (&str, &str),
    size: usize,
    iters: u64,
    ticks_per_ns: f64,
) -> Result<(u64, u64), Box<dyn Error>> {
    if !(ticks_per_ns.is_finite() && ticks_per_ns > 0.0) {
        return Err(
            format!("{tool} {size} B: no TSC rate to convert perftest's cycles ({ticks_per_ns} ticks/ns)").into()
        );
    }
    let args: Vec<&str> = extra.iter().copied().chain(["-C"]).collect();
    let mut last = Vec::new();
    for _ in 0..3 {
        let f = run(tool, &args, devices, size, iters)?;
        match f[..] {
            [_, _, _, _, typical, _, _, p99, ..] => {
                match (cycles_to_ns(typical, ticks_per_ns), cycles_to_ns(p99, ticks_per_ns)) {
                    (Some(t), Some(p)) => return Ok((t, p)),
                    _ => last = f,
                }
            }
            _ => return Err(format!("{tool} {size} B: unexpected result line {f:?}").into()),
        }
    }
    Err(format!("{tool} {size} B: no believable latency in 3 runs (last result line {last:?}, in TSC cycles)").into())
}

/// perftest's figure in cycles as ns, or `None` for one it could not have measured: not finite,
/// zero, or over a second (its UD client under TCG has printed all three), or under 100 ns (no
/// verbs round trip is that short; it is what a perftest that ignored `-C` and printed µs would
/// give).
#[cfg(any(feature = "rdma", test))]
fn cycles_to_ns(cycles: f64, ticks_per_ns: f64) -> Option<u64> {
    let ns = (cycles / ticks_per_ns).round();
    (ns.is_finite() && (100.0..1e9).contains(&ns)).then_some(ns as u64)
}

/// A one-way latency's (typical, p99), ns.
#[cfg(feature = "rdma")]
pub type TypicalP99 = (u64, u64);

/// Two perftest one-way runs at the same time, each on its own connection port, as the RDMA
/// pipeline's two hops (ud-mcast market data one way, rdma-rc orders the other) load the
/// devices together: `(tool, extra arguments, size)` each; their (typical, p99) in ns. Both
/// start together and run the same iterations; a retry (a server not listening yet) starts one
/// later, so they overlap for most of their runs, not always all.
#[cfg(feature = "rdma")]
pub fn one_way_together(
    a: (&str, &[&str], usize),
    b: (&str, &[&str], usize),
    devices: (&str, &str),
    iters: u64,
    ticks_per_ns: f64,
) -> Result<(TypicalP99, TypicalP99), Box<dyn Error>> {
    let go = |(tool, extra, size): (&str, &[&str], usize), port: &str| {
        let args: Vec<&str> = extra.iter().copied().chain(["-p", port]).collect();
        one_way(tool, &args, devices, size, iters, ticks_per_ns).map_err(|e| e.to_string())
    };
    let (ra, rb) = std::thread::scope(|s| {
        let ha = s.spawn(|| go(a, "18515"));
        let hb = s.spawn(|| go(b, "18516"));
        (ha.join(), hb.join())
    });
    let flat =
        |r: std::thread::Result<Result<(u64, u64), String>>| r.map_err(|_| "a perftest runner panicked".to_string())?;
    Ok((flat(ra)?, flat(rb)?))
}

/// perftest's message rate, messages per second: `ib_write_bw` or `ib_send_bw` (whose table
/// is bytes, iterations, BW peak, BW average (MB/s), MsgRate (Mpps)). A run that reports no
/// rate (perftest prints zeros when its UD client finishes before it measured anything) is
/// tried again, up to three times.
#[cfg(feature = "rdma")]
pub fn msg_rate(
    tool: &str,
    extra: &[&str],
    devices: (&str, &str),
    size: usize,
    iters: u64,
) -> Result<f64, Box<dyn Error>> {
    let mut last = Vec::new();
    for _ in 0..3 {
        let f = run(tool, extra, devices, size, iters)?;
        if let [_, _, _, _, mpps, ..] = f[..] {
            if mpps > 0.0 {
                return Ok(mpps * 1e6);
            }
        }
        last = f;
    }
    Err(format!("{tool} {size} B: no message rate in 3 runs (last result line {last:?})").into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perftest_cycles_become_ns_on_the_labs_clock_and_impossible_figures_none() {
        assert_eq!(cycles_to_ns(2500.0, 2.5), Some(1000));
        assert_eq!(cycles_to_ns(30_000.0, 3.0), Some(10_000));
        // What perftest printed when its own clock fit failed, and what else it has printed.
        for bad in [f64::INFINITY, f64::NAN, 0.0, -5.0, 3e9 * 2.0] {
            assert_eq!(cycles_to_ns(bad, 3.0), None, "{bad}");
        }
        // 20 µs printed as µs by a perftest that ignored -C: 20 cycles, 7 ns. Refused.
        assert_eq!(cycles_to_ns(20.0, 3.0), None);
        assert_eq!(cycles_to_ns(299.0, 3.0), Some(100), "the bound is on the ns, rounded");
    }

    #[test]
    fn reads_the_rig_perftest_json() {
        let json = r#"{"devices": ["rxe0", "rxe1"], "results": [
{"tool": "ib_write_lat", "bytes": 64, "iterations": 1000, "min_us": 19.70, "typical_us": 20.14, "avg_us": 23.09, "p99_us": 95.54, "p99_9_us": 347.28, "max_us": 347.28},
{"tool": "ib_send_lat_ud", "bytes": 64, "iterations": 1000, "min_us": 26.90, "typical_us": 27.68, "avg_us": 30.83, "p99_us": 97.58, "p99_9_us": 168.92, "max_us": 168.92}
]}"#;
        let lat = |tool: &str, typical_us, p99_us| Lat { tool: tool.into(), bytes: 64, typical_us, p99_us };
        assert_eq!(parse(json), vec![lat("ib_write_lat", 20.14, 95.54), lat("ib_send_lat_ud", 27.68, 97.58)]);
        // perftest's `inf` (its clock fit failed) is no entry: `compare` then says none was found.
        let inf = json.replace("\"typical_us\": 27.68", "\"typical_us\": inf");
        assert_eq!(parse(&inf), vec![lat("ib_write_lat", 20.14, 95.54)]);
    }
}
