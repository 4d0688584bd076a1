//! `latency-lab rdma` in the Soft-RoCE guest, at a tiny scale (this checks that it runs and
//! reports, not how fast anything is): perftest and tickbus alternate in every round, each
//! round gives its ratio, the message-rate runs deliver every rdma-rc message and stand beside
//! perftest both as it runs by default and chaining WRs as tickbus does, the fan-out reports
//! 1, 2 and 4 subscribers for rdma-rc and ud-mcast, and a round of the trading pipeline over
//! RDMA stands beside perftest's one-way figures run at once and one at a time. Ignored (with the reason) on a host
//! without RDMA devices; a failure in the guest, where TICKBUS_REQUIRE_RDMA=1 is set.
use std::process::Command;

use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;

/// The RDMA devices, as verbs lists them, in name order (rxe0, rxe1, ... in the guest).
fn devices() -> Vec<String> {
    let mut d = tickbus::rdma::device_names();
    d.sort();
    d
}

fn main() {
    let args = Arguments::from_args();
    let skip = devices().is_empty() && std::env::var_os("TICKBUS_REQUIRE_RDMA").is_none();
    if skip {
        eprintln!("rdma: needs RDMA devices (the Soft-RoCE guest: tools/test.sh): tests ignored");
    }
    let tests = vec![Trial::test("rounds_rates_and_fan_out_beside_perftest", rounds)];
    libtest_mimic::run(&args, tests.into_iter().map(|t| t.with_ignored_flag(skip)).collect()).exit();
}

fn rounds() -> Result<(), Failed> {
    let devs = devices();
    let (a, b) = match &devs[..] {
        [a, b, ..] => (a.clone(), b.clone()),
        _ => return Err(format!("two RDMA devices needed, found {devs:?}").into()),
    };
    let out = std::env::temp_dir().join(format!("lab-rdma-{}", std::process::id()));
    let run = Command::new(env!("CARGO_BIN_EXE_latency-lab"))
        .args(["rdma", "--devices", &format!("{a},{b}"), "--sizes", "64", "--iterations", "200", "--rounds", "2"])
        .args(["--rate-sizes", "64", "--rate-messages", "5000", "--fanout-rate", "500", "--fanout-messages", "300"])
        .args(["--pipeline-rounds", "1", "--pipeline-messages", "300", "--out", out.to_str().unwrap()])
        .output()?;
    let stderr = String::from_utf8_lossy(&run.stderr);
    if !run.status.success() {
        return Err(format!("latency-lab rdma failed: {stderr}").into());
    }
    // Each round runs perftest and tickbus back to back, perftest first in odd rounds.
    for want in ["64 B round 1/2: perftest, then tickbus", "64 B round 2/2: tickbus, then perftest"] {
        if !stderr.contains(want) {
            return Err(format!("no {want:?} in the run's log: {stderr}").into());
        }
    }
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json"))?)?;
    let vs = &rep["rdma_versus"];
    if vs["rounds"] != 2 {
        return Err(format!("two rounds: {vs:#}").into());
    }
    let rtt = vs["rtt"].as_array().ok_or("no rtt rows")?;
    let tools: Vec<&str> = rtt.iter().filter_map(|r| r["tool"].as_str()).collect();
    if tools != ["ib_write_lat", "ib_write_lat", "ib_send_lat UD"] {
        return Err(format!(
            "rdma-rc (WRITE, WRITE_WITH_IMM) beside ib_write_lat, ud-mcast beside ib_send_lat: {tools:?}"
        )
        .into());
    }
    for r in rtt.iter().chain(vs["rate"].as_array().ok_or("no rate rows")?) {
        let ratios: Vec<f64> = r["ratios"].as_array().ok_or("no ratios")?.iter().filter_map(Value::as_f64).collect();
        let theirs: Vec<f64> =
            r["theirs"].as_array().ok_or("no perftest figures")?.iter().filter_map(Value::as_f64).collect();
        if ratios.len() != 2 || theirs.len() != 2 || !ratios.iter().chain(&theirs).all(|x| *x > 0.0) {
            return Err(format!("a positive ratio and perftest figure per round: {r:#}").into());
        }
        let (min, med, max) = (r["min"].as_f64(), r["median"].as_f64(), r["max"].as_f64());
        if min.is_none() || min > med || med > max {
            return Err(format!("median within its spread: {r:#}").into());
        }
    }
    let rate = vs["rate"].as_array().ok_or("no rate rows")?;
    let rc = rate.iter().find(|r| r["tool"] == "ib_write_bw").ok_or("no rdma-rc rate beside ib_write_bw")?;
    if !rc["note"].as_str().unwrap_or("").contains("delivered+missed per round: 5000+0 5000+0") {
        return Err(format!("reliable rdma-rc delivers every message of every round: {rc:#}").into());
    }
    let ud = rate.iter().find(|r| r["tool"] == "ib_send_bw UD").ok_or("no ud-mcast rate beside ib_send_bw UD")?;
    if !ud["note"].as_str().unwrap_or("").contains("subscriber msg/s: ") {
        return Err(format!("what the ud-mcast subscriber received is reported: {ud:#}").into());
    }
    for tool in ["ib_write_bw --post_list 32", "ib_send_bw UD --post_list 32"] {
        let r = rate.iter().find(|r| r["tool"] == tool).ok_or(format!("no rate beside {tool} (chained)"))?;
        if r["theirs"].as_array().map(Vec::len) != Some(2) || r["median"].as_f64().is_none_or(|m| m <= 0.0) {
            return Err(format!("two rounds of {tool} with a ratio: {r:#}").into());
        }
    }
    let fan = rep["fanout"].as_array().ok_or("no fan-out")?;
    let names: Vec<&str> = fan.iter().filter_map(|f| f["transport"].as_str()).collect();
    if names != ["rdma-rc (Soft-RoCE guest)", "ud-mcast (Soft-RoCE guest)"] {
        return Err(format!("fan-out for rdma-rc and ud-mcast: {names:?}").into());
    }
    for f in fan {
        let counts: Vec<u64> =
            f["rows"].as_array().ok_or("no rows")?.iter().filter_map(|r| r["subscribers"].as_u64()).collect();
        if counts != [1, 2, 4] {
            return Err(format!("1, 2 and 4 subscribers: {f:#}").into());
        }
        for r in f["rows"].as_array().ok_or("no rows")? {
            let n = r["subscribers"].as_u64().unwrap_or(0) as usize;
            if r["sub_p50_ns"].as_array().map(Vec::len) != Some(n) || r["publish_p50_ns"].as_u64().unwrap_or(0) == 0 {
                return Err(format!("a publish cost and a latency per subscriber: {r:#}").into());
            }
        }
    }
    // The RDMA pipeline's round: beside perftest's UD and RC one-way run at once (the
    // same-load floor) and one at a time, each figure measured.
    let pipe = rep["pipeline_rdma"]["rounds"].as_array().ok_or("no RDMA pipeline rounds")?;
    let measured = |r: &Value| {
        [&r["ud_one_way"], &r["rc_one_way"], &r["alone"][0], &r["alone"][1], &r["ttt_p50"], &r["orders"]]
            .iter()
            .all(|v| v.as_u64().is_some_and(|x| x > 0))
    };
    if pipe.len() != 1 || !pipe.iter().all(measured) {
        return Err(format!("one RDMA pipeline round beside both floors: {pipe:?}").into());
    }
    for f in ["report.json", "table.txt", "index.html", "fanout-rdma_rc_soft_roce_guest.svg"] {
        if !out.join(f).exists() {
            return Err(format!("{f} not written").into());
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}
