//! `tickbus doctor` where there are RDMA devices: the Soft-RoCE guest (rxe0 and rxe1 on veths).
//! Each port's state, link layer, RoCE v2 GIDs and active MTU are checked against what
//! `ibv_devinfo` says through the verbs library; the devices are named Soft-RoCE, not NICs.
//! Ignored (with the reason) on a host without RDMA devices; a failure in the guest, where
//! TICKBUS_REQUIRE_RDMA=1 is set.
use libtest_mimic::{Arguments, Failed, Trial};

mod common;

fn devices() -> Vec<String> {
    let mut d: Vec<String> = std::fs::read_dir("/sys/class/infiniband")
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    d.sort();
    d
}

fn main() {
    let args = Arguments::from_args();
    let skip = devices().is_empty() && std::env::var_os("TICKBUS_REQUIRE_RDMA").is_none();
    if skip {
        eprintln!("doctor_rdma: needs RDMA devices (the Soft-RoCE guest: tools/test.sh): tests ignored");
    }
    let tests = vec![Trial::test("every_rdma_port_is_reported_as_verbs_sees_it", ports)];
    libtest_mimic::run(&args, tests.into_iter().map(|t| t.with_ignored_flag(skip)).collect()).exit();
}

/// `ibv_devinfo -d DEV`'s `state` and `active_mtu` for port 1, and its `link_layer`.
fn devinfo(dev: &str) -> Result<(String, String, String), Failed> {
    let out = std::process::Command::new("ibv_devinfo")
        .args(["-d", dev])
        .output()
        .map_err(|e| format!("ibv_devinfo: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(k))
            .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
            .ok_or(format!("ibv_devinfo -d {dev} has no {k}: {text}"))
    };
    Ok((field("state:")?, field("active_mtu:")?, field("link_layer:")?))
}

fn ports() -> Result<(), Failed> {
    let devs = devices();
    if devs.is_empty() {
        return Err("no RDMA devices in /sys/class/infiniband".into());
    }
    let (d, code) = common::doctor(&[], &["--rdma", "--cores", "0"]);
    common::check_verdict(&d, code);
    for dev in &devs {
        let f = common::finding(&d, &format!("rdma {dev} port 1"));
        let (state, mtu, link) = devinfo(dev)?;
        eprintln!("{dev}: {}", f["detail"]);
        // ibv_devinfo: "PORT_ACTIVE (4)"
        let want = state.trim_start_matches("PORT_");
        if f["facts"]["state"] != want {
            return Err(format!("{dev}: doctor says {} and verbs says {state}: {f:#}", f["facts"]["state"]).into());
        }
        if f["facts"]["link_layer"] != link.as_str() || f["facts"]["active_mtu"] != mtu.as_str() {
            return Err(format!("{dev}: verbs says {link}, MTU {mtu}: {f:#}").into());
        }
        if f["facts"]["kind"] != "software" || !f["detail"].as_str().unwrap_or("").contains("Soft-RoCE (rdma_rxe)") {
            return Err(format!("{dev} is rdma_rxe, not a NIC: {f:#}").into());
        }
        let gids: u32 = f["facts"]["rocev2_gids"].as_str().and_then(|s| s.parse().ok()).ok_or("no rocev2_gids")?;
        // The rig gives each veth an IPv4 address: its IPv6 link-local and IPv4-mapped GIDs.
        if gids < 1 {
            return Err(format!("{dev}: no RoCE v2 GID reported: {f:#}").into());
        }
        // Soft-RoCE is a warning (right for tests, not for figures), not a failure.
        if f["status"] != "warn" {
            return Err(format!("{dev}: an ACTIVE Soft-RoCE port is a warning: {f:#}").into());
        }
    }
    // The guest's TCG CPU has no invariant TSC: that must be a failure, and the verdict says so.
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let invariant = cpuinfo.split_whitespace().any(|f| f == "nonstop_tsc");
    let tsc = common::finding(&d, "tsc");
    if tsc["status"] != if invariant { "ok" } else { "fail" } {
        return Err(format!("tsc against /proc/cpuinfo (nonstop_tsc {invariant}): {tsc:#}").into());
    }
    Ok(())
}
