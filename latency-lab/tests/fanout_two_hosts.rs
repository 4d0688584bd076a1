//! `latency-lab rdma-fanout-hosts` in the rig's two guests, at a tiny scale (this checks that it
//! runs, counts every message in the other guest and reports, not how fast anything is): guest 1
//! runs the subscriber side, guest 0 the publisher, and guest 0 checks the report. Ignored (with
//! the reason) outside two guests; a failure there when TICKBUS_REQUIRE_RDMA=1 is set.
use std::process::Command;

use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;

fn lab(out: &std::path::Path) -> Result<std::process::Output, std::io::Error> {
    Command::new(env!("CARGO_BIN_EXE_latency-lab"))
        .args(["rdma-fanout-hosts", "--rate", "500", "--messages", "300", "--rounds", "2"])
        .args(["--out", out.to_str().unwrap()])
        .output()
}

fn main() {
    let out = std::env::temp_dir().join(format!("lab-fanout-hosts-{}", std::process::id()));
    let guest = std::env::var("RIG_GUEST").ok();
    if guest.as_deref() == Some("1") {
        // The subscriber side: its failures show in guest 0's run (a count short, a hang-up).
        let run = lab(&out).expect("latency-lab runs");
        eprintln!("{}", String::from_utf8_lossy(&run.stderr));
        std::process::exit(run.status.code().unwrap_or(1));
    }
    let args = Arguments::from_args();
    let two = guest.as_deref() == Some("0") && std::env::var("RIG_GUESTS").as_deref() == Ok("2");
    let skip = !two && std::env::var_os("TICKBUS_REQUIRE_RDMA").is_none();
    if skip {
        eprintln!("fanout_two_hosts: needs the rig's two guests (tools/rig/rig run --guests 2): tests ignored");
    }
    assert!(two || skip, "TICKBUS_REQUIRE_RDMA is set but this is not guest 0 of two");
    let tests = vec![Trial::test("ud_mcast_fan_out_to_subscribers_in_the_other_guest", move || fan_out(&out))];
    libtest_mimic::run(&args, tests.into_iter().map(|t| t.with_ignored_flag(skip)).collect()).exit();
}

fn fan_out(out: &std::path::Path) -> Result<(), Failed> {
    let run = lab(out)?;
    let stderr = String::from_utf8_lossy(&run.stderr);
    if !run.status.success() {
        return Err(format!("latency-lab rdma-fanout-hosts failed: {stderr}").into());
    }
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(out.join("fanout-hosts.json"))?)?;
    let _ = std::fs::remove_dir_all(out);
    // Two rounds of 300 messages per subscriber count.
    if rep["transport"] != "ud-mcast (two Soft-RoCE guests)" || rep["messages"] != 600 {
        return Err(format!("not the two-guest ud-mcast run: {rep:#}").into());
    }
    let rows = rep["rows"].as_array().ok_or("no rows")?;
    let subs: Vec<u64> = rows.iter().filter_map(|r| r["subscribers"].as_u64()).collect();
    if subs != [1, 2, 4] {
        return Err(format!("rows for 1, 2 and 4 subscribers: {subs:?}").into());
    }
    for r in rows {
        let (p50, p99) = (r["publish_p50_ns"].as_u64().unwrap_or(0), r["publish_p99_ns"].as_u64().unwrap_or(0));
        if p50 == 0 || p99 < p50 {
            return Err(format!("a publish cost with p50 > 0 and p99 >= p50: {r:#}").into());
        }
        // Every subscriber in the other guest got every message of both rounds.
        let n = r["subscribers"].as_u64().unwrap_or(0) as usize;
        let delivered: Vec<u64> =
            r["delivered"].as_array().map_or(Vec::new(), |v| v.iter().filter_map(|d| d.as_u64()).collect());
        if delivered != vec![600; n] {
            return Err(format!("{n} subscribers each delivering 600: {r:#}").into());
        }
        // No subscriber latency: the two guests' clocks are not comparable.
        if r["sub_p50_ns"].as_array().is_none_or(|v| !v.is_empty()) {
            return Err(format!("no subscriber latencies across guests: {r:#}").into());
        }
    }
    Ok(())
}
