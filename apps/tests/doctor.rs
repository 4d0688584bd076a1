//! `tickbus doctor` on this host: every finding checked against what the kernel says through a
//! different door (/proc/meminfo for the hugepage pool, /proc/cpuinfo for the TSC), and two
//! settings broken on purpose: hugetlbfs unmounted in a private mount namespace, and a low
//! memlock limit through `prlimit` (with and without CAP_IPC_LOCK). The Soft-RoCE side runs in
//! the guest (doctor_rdma.rs).
mod common;

use common::{check_verdict, doctor, finding};

fn read(p: &str) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn has_cap_ipc_lock() -> bool {
    read("/proc/self/status")
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .is_some_and(|c| c & (1 << 14) != 0)
}

#[test]
fn every_finding_on_this_host_matches_the_kernel() {
    let (d, code) = doctor(&[], &["--cores", "0"]);
    check_verdict(&d, code);
    let flags = read("/proc/cpuinfo");
    let tsc = finding(&d, "tsc");
    // nonstop_tsc is the kernel's name for CPUID 0x80000007 EDX[8].
    let invariant = flags.lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "nonstop_tsc"));
    assert_eq!(tsc["facts"]["invariant"], invariant.to_string(), "{tsc:#}");
    assert_eq!(tsc["status"], if invariant { "ok" } else { "fail" }, "{tsc:#}");

    let cs = finding(&d, "clocksource");
    let cur = read("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    assert_eq!(cs["facts"]["current"], cur.trim(), "{cs:#}");
    assert_eq!(cs["status"], if cur.trim() == "tsc" { "ok" } else { "warn" }, "{cs:#}");

    let meminfo = read("/proc/meminfo");
    let total = meminfo.lines().find_map(|l| l.strip_prefix("HugePages_Total:")).unwrap().trim().to_string();
    let hp = finding(&d, "hugepages");
    assert_eq!(hp["facts"]["reserved"], total, "{hp:#}");
    // Other tests may hold every free page at this instant: then the finding says so.
    let all_taken = hp["facts"]["free"] == "0";
    assert_eq!(hp["status"], if total == "0" || all_taken { "fail" } else { "ok" }, "{hp:#}");
    let fs = finding(&d, "hugetlbfs");
    let mounted = read("/proc/mounts").lines().any(|l| l.split_whitespace().nth(1) == Some("/dev/hugepages"));
    if std::env::var_os("TICKBUS_REQUIRE_HUGEPAGES").is_some() {
        assert!(mounted, "the test set-up mounts hugetlbfs at /dev/hugepages");
    }
    assert_eq!(fs["status"], if mounted { "ok" } else { "fail" }, "{fs:#}");

    let iso = finding(&d, "core 0 isolation");
    let isolated = tickbus::doctor::isolated_cpus().contains(&0);
    assert_eq!(iso["facts"]["isolcpus"], isolated.to_string(), "{iso:#}");
    // Every IRQ listed may land on core 0, by the kernel's own affinity files; none listed: ok.
    let irqs = finding(&d, "core 0 irqs");
    let listed = irqs["facts"]["irqs"].as_str().unwrap_or("");
    assert_eq!(irqs["status"], if listed.is_empty() { "ok" } else { "warn" }, "{irqs:#}");
    for n in listed.split(',').filter(|n| !n.is_empty()) {
        let eff = read(&format!("/proc/irq/{n}/effective_affinity_list"));
        let aff = if eff.trim().is_empty() { read(&format!("/proc/irq/{n}/smp_affinity_list")) } else { eff };
        assert!(tickbus::doctor::parse_cpu_list(&aff).contains(&0), "IRQ {n} ({aff:?}) cannot land on core 0");
    }

    // Core 0 was watched for the default half second; the facts add up.
    let j = finding(&d, "core 0 jitter");
    let fact =
        |k: &str| j["facts"][k].as_str().and_then(|v| v.parse::<u64>().ok()).unwrap_or_else(|| panic!("{k}: {j:#}"));
    assert!(fact("watched_ns") >= 500_000_000 && fact("lost_ns") <= fact("watched_ns"), "{j:#}");
    assert!(fact("longest_ns") <= fact("lost_ns") && (fact("gaps") == 0) == (fact("lost_ns") == 0), "{j:#}");
    assert_eq!(j["status"], if fact("longest_ns") >= 100_000 { "warn" } else { "ok" }, "{j:#}");
    let (quick, _) = doctor(&[], &["--cores", "0", "--jitter-ms", "0"]);
    assert!(quick["findings"].as_array().unwrap().iter().all(|f| f["check"] != "core 0 jitter"), "{quick:#}");

    let rdma_devices = std::fs::read_dir("/sys/class/infiniband").map(|d| d.count()).unwrap_or(0);
    if rdma_devices == 0 {
        assert_eq!(finding(&d, "rdma")["status"], "info", "no device is a fact on a shm host");
        let (d, code) = doctor(&[], &["--rdma"]);
        check_verdict(&d, code);
        assert_eq!(code, 1, "--rdma on a host without devices is not ready");
        assert!(finding(&d, "rdma")["remedy"].as_str().unwrap().contains("rdma_rxe"));
    }
}

#[test]
fn a_low_memlock_limit_is_reported_with_its_fix() {
    // 64 KiB soft and hard, against a 1 MiB need, on a host that must run RDMA (--rdma).
    let wrap = ["prlimit", "--memlock=65536:65536"];
    let (d, code) = doctor(&wrap, &["--memlock", "1M", "--rdma"]);
    check_verdict(&d, code);
    let m = finding(&d, "memlock");
    assert_eq!(m["facts"]["soft"], "64 KiB", "{m:#}");
    assert!(m["remedy"].as_str().unwrap().contains("ulimit -l unlimited"), "{m:#}");
    // Root holds CAP_IPC_LOCK, which exempts it: a warning naming the exemption.
    let expected = if has_cap_ipc_lock() { "warn" } else { "fail" };
    assert_eq!(m["status"], expected, "{m:#}");
    assert!(is_root(), "the rest of this test drops CAP_IPC_LOCK with setpriv: run it as root (CI does)");
    // Without the capability the same limit makes ibv_reg_mr fail: not ready.
    let drop = ["prlimit", "--memlock=65536:65536", "setpriv", "--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock"];
    let (d, code) = doctor(&drop, &["--memlock", "1M", "--rdma"]);
    check_verdict(&d, code);
    let m = finding(&d, "memlock");
    assert_eq!(m["status"], "fail", "{m:#}");
    assert_eq!(m["facts"]["cap_ipc_lock"], "false", "{m:#}");
    assert!(m["detail"].as_str().unwrap().contains("ibv_reg_mr fails"), "{m:#}");
    assert_eq!(code, 1);
    // A limit that covers the need is fine either way.
    let (d, _) = doctor(&drop, &["--memlock", "32K", "--rdma"]);
    assert_eq!(finding(&d, "memlock")["status"], "ok", "{d:#}");
    // Where RDMA is neither present nor asked for, a low limit is only a fact.
    if std::fs::read_dir("/sys/class/infiniband").map(|d| d.count()).unwrap_or(0) == 0 {
        let (d, code) = doctor(&drop, &["--memlock", "1M"]);
        check_verdict(&d, code);
        let m = finding(&d, "memlock");
        assert_eq!(m["status"], "info", "{m:#}");
        assert!(m["detail"].as_str().unwrap().contains("matters only to RDMA"), "{m:#}");
    }
}

#[test]
fn hugetlbfs_unmounted_in_a_namespace_is_a_failure_with_its_fix() {
    assert!(is_root(), "this test unmounts hugetlbfs in a private mount namespace: run it as root (CI does)");
    let bin = env!("CARGO_BIN_EXE_tickbus");
    // Every hugetlbfs mount goes, in this namespace only; the host keeps its own.
    let script = format!(
        "for m in $(awk '$3 == \"hugetlbfs\" {{ print $2 }}' /proc/mounts); do umount \"$m\" || exit 9; done; \
         exec {bin} doctor --json"
    );
    let out = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("unshare (util-linux)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let d: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    let code = out.status.code().unwrap();
    check_verdict(&d, code);
    let fs = finding(&d, "hugetlbfs");
    assert_eq!(fs["status"], "fail", "{fs:#}");
    assert!(fs["detail"].as_str().unwrap().contains("no hugetlbfs is mounted"), "{fs:#}");
    assert!(fs["remedy"].as_str().unwrap().contains("mount -t hugetlbfs"), "{fs:#}");
    assert_eq!(code, 1, "a host without hugetlbfs is not ready");
    // The host's own mount is untouched.
    if std::env::var_os("TICKBUS_REQUIRE_HUGEPAGES").is_some() {
        assert!(read("/proc/mounts").contains(" /dev/hugepages hugetlbfs "));
    }
}

/// `doctor --iface`: a veth the test makes (native XDP, no zero-copy, one queue), an XDP program
/// already attached there (a feed running), and an interface that is not there.
#[cfg(feature = "xdp")]
#[test]
fn an_interfaces_ingest_is_reported_with_its_fixes() {
    use tickbus_testkit::netns::VethPair;
    let v = VethPair::new("d").unwrap();
    // Without --xdp-probe nothing is attached, and the finding says why not.
    let (d, code) = doctor(&[], &["--iface", &v.outer]);
    check_verdict(&d, code);
    let x = finding(&d, &format!("iface {} af_xdp", v.outer));
    assert_eq!(x["status"], "info", "{x:#}");
    assert!(x["remedy"].as_str().unwrap().contains("--xdp-probe"), "{x:#}");
    let (d, code) = doctor(&[], &["--iface", &v.outer, "--xdp-probe"]);
    check_verdict(&d, code);
    let f = finding(&d, &format!("iface {}", v.outer));
    assert_eq!((&f["status"], &f["facts"]["operstate"]), (&"ok".into(), &"up".into()), "{f:#}");
    let q = finding(&d, &format!("iface {} queues", v.outer));
    assert_eq!(
        q["facts"]["rx_queues"],
        std::fs::read_dir(format!("/sys/class/net/{}/queues", v.outer))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("rx-"))
            .count()
            .to_string(),
        "{q:#}"
    );
    let x = finding(&d, &format!("iface {} af_xdp", v.outer));
    assert_eq!(
        (&x["status"], &x["facts"]["mode"], &x["facts"]["zero_copy"]),
        (&"warn".into(), &"Native".into(), &"false".into()),
        "veth: native, copy mode: {x:#}"
    );
    assert!(!v.outer_has_xdp().unwrap(), "the probe left nothing attached");
    // A program already there (another feed): the probe cannot attach, and says how to see it.
    let o = tickbus::xdp::XdpOptions::new(&v.outer, vec![std::net::SocketAddrV4::new(v.outer_ip, 9)]);
    let feed = tickbus::xdp::XdpIngest::open(&o).unwrap();
    let (d, code) = doctor(&[], &["--iface", &v.outer, "--xdp-probe"]);
    check_verdict(&d, code);
    let x = finding(&d, &format!("iface {} af_xdp", v.outer));
    assert_eq!(x["status"], "fail", "{x:#}");
    assert!(x["remedy"].as_str().unwrap().contains("tickbus_feed_steer"), "{x:#}");
    drop(feed);
    let (d, code) = doctor(&[], &["--iface", "tbnothere0"]);
    check_verdict(&d, code);
    assert_eq!((code, &finding(&d, "iface tbnothere0")["status"]), (1, &"fail".into()));
}
