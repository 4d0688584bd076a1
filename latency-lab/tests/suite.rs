//! The whole lab end to end, at a tiny scale (this checks that it runs and reports, not how fast
//! anything is): every section and transport appears with its full sample count, the files the
//! HdrHistogram tools and browsers read are written, and `compare` judges a report against itself
//! and against a worse one.
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// One lab at a time: each run busy-polls both cores, and two at once only slow each other.
static CORES: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lab(args: &[&str]) -> std::process::Output {
    let _cores = CORES.lock().unwrap_or_else(|e| e.into_inner());
    Command::new(env!("CARGO_BIN_EXE_latency-lab")).args(args).output().unwrap()
}

/// The outer ends of the wire section's veth pairs that exist now.
fn lab_veths() -> Vec<String> {
    std::fs::read_dir("/sys/class/net")
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.starts_with("tbwo"))
        .collect()
}

#[test]
fn a_small_suite_reports_every_transport_and_compare_judges_it() {
    // Veths a lab killed earlier left behind (a killed process runs no Drop) are not this run's.
    let before = lab_veths();
    let out = std::env::temp_dir().join(format!("lab-suite-{}", std::process::id()));
    let dir = out.to_str().unwrap();
    let run = lab(&[
        "--iterations",
        "5000",
        "--sizes",
        "64",
        "--rates",
        "50000",
        "--open-loop-seconds",
        "0.1",
        "--throughput-messages",
        "50000",
        "--itch-messages",
        "5000",
        "--ttt-rate",
        "100000",
        "--journal-messages",
        "50000",
        "--record-seconds",
        "0.5",
        "--fanout-rate",
        "20000",
        "--fanout-seconds",
        "0.25",
        "--wire-seconds",
        "0.2",
        "--wire-rounds",
        "3",
        "--wire-round-seconds",
        "0.2",
        "--book-stocks",
        "300",
        "--book-peak-orders",
        "20000",
        "--book-messages",
        "60000",
        "--book-rounds",
        "3",
        "--pipeline-rounds",
        "2",
        "--snapshot-rounds",
        "2",
        // (The day here is 0.1 s: no joiner could join it mid-way; its own test below.)
        "--join-rounds",
        "0",
        "--rdma-report",
        "/nonexistent/report.json",
        "--out",
        dir,
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(text.contains("TICK-TO-TRADE") && text.contains("x itchy"), "{text}");
    assert!(text.starts_with("latency-lab on ") && text.contains("\nVERDICTS\n  ["), "the verdicts first: {text}");
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();

    let rtt = rep["sections"].as_array().unwrap().iter().find(|s| s["mode"] == "rtt").unwrap();
    let names: Vec<&str> = rtt["rows"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    let mut want = vec![
        "floor (cache-line ping-pong)",
        "floor, same payload (one slot)",
        "floor, same payload (1024-slot ring)",
        "floor rung: tickbus slot, length known",
        "floor rung: tickbus slot, length checked",
        "floor rung: tickbus slot, length read",
        "floor rung: tickbus slot, copy then check length",
        "tickbus shm",
        "tickbus shm (2 processes)",
        "rtrb 0.3 (in-process)",
        "disruptor 4.4 (in-process)",
    ];
    if cfg!(feature = "peers") {
        want.push("Aeron IPC (rusteron 0.2.16)");
    }
    want.push("tickbus shm (counters off)");
    want.push("tickbus shm (lossy, observer)");
    want.push("tickbus shm (receive into)");
    want.push("tickbus shm (stream API, URI)");
    want.push("tickbus shm (C++ via the C ABI)");
    if cfg!(feature = "peers") {
        want.push("iceoryx2 0.10 (2 processes)");
    }
    want.extend(["kernel UDP loopback", "kernel TCP loopback"]);
    assert_eq!(names, want);
    // What counting costs is said beside the figures.
    let notes: Vec<&str> = rep["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert!(notes.iter().any(|n| n.starts_with("counters, rtt 64 B: tickbus shm p50 ")), "{notes:?}");
    // The C++ pair is compared with the Rust pair it wraps, in the same rounds.
    assert!(
        notes.iter().any(|n| n.starts_with("ping-pong 64 B: C++ through the C ABI ") && n.contains("x the Rust pair")),
        "{notes:?}"
    );
    // Each round's own p50 is kept beside the merged figures: the verdicts are per-round ratios.
    assert!(rtt["rows"].as_array().unwrap().iter().all(|r| r["round_p50"].as_array().unwrap().len() == 5), "{rtt}");
    for r in rtt["rows"].as_array().unwrap() {
        let expect = if r["name"].as_str().unwrap().starts_with("kernel") { 500 } else { 5000 };
        assert_eq!(r["count"], expect, "{}", r["name"]);
        assert!(r["x_floor"][0].as_f64().unwrap() > 0.0 && r["x_best_peer"][0].as_f64().unwrap() > 0.0);
    }
    if cfg!(feature = "xdp") {
        // From the wire: 10,000 datagrams (50k/s for 0.2 s) a way a round, over a veth the lab
        // made and removed.
        let wire = rep["sections"].as_array().unwrap().iter().find(|s| s["mode"] == "wire").expect("a wire section");
        let names: Vec<&str> = wire["rows"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "floor: bare AF_XDP RX loop",
                "kernel: bare recv, SO_BUSY_POLL",
                "tickbus feed ingest (xdp)",
                "tickbus feed ingest (udp)"
            ]
        );
        for r in wire["rows"].as_array().unwrap() {
            // Most of the 30,000 datagrams (three rounds) taken, or the row says how many were
            // not and that its receiver fell behind: a debug build on a slow phase of this
            // two-core VM has taken 4,324 (its socket's queue overflowed), and the report must
            // say so, not time it as if whole.
            let (count, note) = (r["count"].as_u64().unwrap(), r["note"].as_str().unwrap());
            // Even then a tenth: a steering or ingest fault that drops nearly everything fails.
            assert!(count > 3_000 && r["ns"][0].as_u64().unwrap() > 0, "{r}");
            assert!(
                count > 10_000 || (note.contains("datagrams not taken") && note.contains("fell behind")),
                "most of 30,000 datagrams taken, or the row says its receiver fell behind: {r}"
            );
        }
        let notes = rep["notes"].as_array().unwrap();
        assert!(notes.iter().any(|n| n.as_str().unwrap().starts_with("wire at 50k/s: xdp ingest p50 ")), "{notes:?}");
        for way in ["floor: bare AF_XDP RX loop", "tickbus feed ingest (xdp)", "tickbus feed ingest (udp)"] {
            let said = format!("wire, zero loss: {way}: ");
            assert!(notes.iter().any(|n| n.as_str().unwrap().starts_with(&said)), "{said}: {notes:?}");
        }
        let left: Vec<String> = lab_veths().into_iter().filter(|n| !before.contains(n)).collect();
        assert!(left.is_empty(), "the lab's veth pair removed: {left:?}");
        // Wire-to-trade: the same datagrams through tickbus feed, trader and gateway, per ingest.
        let runs = rep["wire_trade"].as_array().expect("a wire-to-trade section");
        let ingests: Vec<&str> = runs.iter().map(|r| r["ingest"].as_str().unwrap()).collect();
        assert_eq!(ingests, ["xdp", "udp"]);
        for r in runs {
            assert_eq!(r["sent"], 10_000, "{r}");
            // Every message and gap the feed published reached the trader or is counted missed,
            // every order was answered, and the gateway timed at least one.
            let n = |k: &str| r[k].as_u64().unwrap();
            let (published, gaps, ticks, missed, lost) =
                (n("published"), n("gaps_published"), n("ticks"), n("missed"), n("lost"));
            assert!(published >= 10_000 - lost && ticks + missed == published + gaps, "{r}");
            assert!(r["orders"].as_u64().unwrap() > 0 && r["orders"] == r["reports"], "{r}");
            let hops = r["hops"].as_array().unwrap();
            assert_eq!(hops.len(), 7, "{r}");
            assert!(hops[0]["name"].as_str().unwrap().starts_with("wire send -> feed ingress"), "{r}");
            // Every datagram taken was timed on the wire (the lost ones were not taken).
            assert!(hops[0]["count"].as_u64().unwrap() + lost >= 10_000, "{r}");
            assert!(hops[1]["count"].as_u64().unwrap() > 0, "{r}");
            let total = &r["total"];
            assert!(total["count"].as_u64().unwrap() > 0 && total["count"].as_u64() <= r["orders"].as_u64(), "{r}");
            // Per order, wire-to-trade holds wire -> strategy receive: so does each percentile.
            for p in ["p50", "p99", "max"] {
                assert!(total[p].as_u64() >= r["ordered_tick"][p].as_u64(), "{p}: {r}");
            }
        }
        let left: Vec<String> = ["/dev/shm", "/dev/hugepages", "/sys/class/net"]
            .iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| n.contains("lab-wire-") || n.starts_with("tbto") || n.starts_with("tbzo"))
            .collect();
        assert!(left.is_empty(), "the wire-to-trade rings and the lab's veth pairs removed: {left:?}");
        let svg = std::fs::read_to_string(out.join("wire-to-trade-hops.svg")).unwrap();
        assert!(svg.contains("xdp 50k/s") && svg.contains("wire send -&gt; feed ingress"), "{svg}");
    }
    let one_way = rep["sections"].as_array().unwrap().iter().find(|s| s["mode"] == "one-way").unwrap();
    assert!(one_way["rows"].as_array().unwrap().iter().all(|r| r["count"] == 5_000 && r["late_sends"].is_u64()));
    assert!(rep["throughput"].as_array().unwrap().iter().all(|t| t["msgs_per_s"].as_f64().unwrap() > 0.0));
    assert!(rep["itch"]["decode"].as_array().unwrap().len() == 4);
    // The book at scale: the day built up to its peak, three paired rounds (order alternating),
    // the book and its floor agreeing on what rests (the run fails otherwise), a verdict drawn.
    let b = &rep["book"];
    assert_eq!((b["stocks"].as_u64(), b["reserved_orders"].as_u64()), (Some(300), Some(65_536)), "{b}");
    assert!((20_000..20_100).contains(&b["peak_orders"].as_u64().unwrap()), "{b}");
    let rounds = b["rounds"].as_array().unwrap();
    assert_eq!(rounds.iter().map(|r| r["book_first"].as_bool().unwrap()).collect::<Vec<_>>(), [true, false, true]);
    assert!(rounds.iter().all(|r| r["book"]["p99_ns"].as_u64() > Some(0) && r["floor"]["p99_ns"].as_u64() > Some(0)));
    assert!(
        b["p99_ratio"]["median"].as_f64().unwrap() > 0.0
            && ["met", "not_met"].contains(&b["verdict"].as_str().unwrap())
    );
    assert!(b["book_bytes_per_order"].as_f64().unwrap() > 0.0, "{b}");
    assert!(b["by_type"].as_array().unwrap().iter().any(|t| t["code"] == "A"), "{b}");
    assert!(text.contains("order book at TotalView scale") && text.contains("target: book p99 <= 1.5x"), "{text}");
    assert!(rep["tick_to_trade"]["rows"][0]["count"].as_u64().unwrap() > 5000, "every tick reached the strategy");
    let j = &rep["journal"];
    assert_eq!(j["messages"], 50_000);
    assert!(j["recorder_msgs_per_s"].as_f64().unwrap() > 0.0 && j["recorder_x_floor"].as_f64().unwrap() > 0.0);
    assert_eq!(j["sustained"]["published"], 500_000);
    assert_eq!(j["sustained"]["recorded"], 500_000, "a sustained recording lost nothing");
    let pacing = rep["sections"].as_array().unwrap().iter().find(|s| s["mode"] == "replay-pacing-error").unwrap();
    assert_eq!(pacing["rows"].as_array().unwrap().len(), 2, "replay pacing beside its floor");
    assert!(text.contains("journal: 50000 messages"), "{text}");
    // Fan-out: one ring read by 1, 2 and 4 consumer processes, every message delivered to each
    // (the run fails otherwise), the publisher's cost and each subscriber's latency reported.
    let fan = rep["fanout"].as_array().expect("a fan-out section");
    assert_eq!(fan.len(), 1, "shm on the host (rdma-rc and ud-mcast come from the guest's report)");
    assert_eq!((fan[0]["transport"].as_str(), fan[0]["messages"].as_u64()), (Some("shm"), Some(5_000)));
    let rows = fan[0]["rows"].as_array().unwrap();
    assert_eq!(rows.iter().map(|r| r["subscribers"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2, 4]);
    for r in rows {
        let n = r["subscribers"].as_u64().unwrap() as usize;
        // At 20k msg/s a publish has 50 us; one that took that long would be the ring full.
        assert!(r["publish_p50_ns"].as_u64().unwrap() < 50_000, "{r}");
        let subs = r["sub_p50_ns"].as_array().unwrap();
        assert_eq!(subs.len(), n, "a latency per subscriber: {r}");
        assert!(subs.iter().all(|p| p.as_u64().unwrap() < 1_000_000_000), "{r}");
    }
    assert!(text.contains("FAN-OUT on shm"), "{text}");
    // The trading pipeline ran as real processes (`tickbus exchange` and `tickbus trader`, the
    // binary cargo builds beside this one), counts exact, every hop timed, floors beside.
    let pipe = rep["pipeline"].as_array().expect("a pipeline section");
    assert_eq!(pipe.len(), 1, "one run per rate");
    let p = &pipe[0];
    assert_eq!(p["rate"], 50_000);
    assert!(p["published"].as_u64().unwrap() > 5000, "{p}");
    assert_eq!(p["ticks"], p["published"], "every tick reached the trader");
    assert_eq!(p["ticks_missed"], 0);
    let orders = p["orders"].as_u64().unwrap();
    assert!(orders > 0 && p["reports"] == orders, "one report per order: {p}");
    let hops = p["hops"].as_array().unwrap();
    assert_eq!(hops.len(), 6);
    assert!(hops.iter().all(|h| h["count"] == orders), "every order timed on every hop");
    // The crossings beside their floors: market data from its publish (the venue says when it
    // began, for the first message of each due time), orders from theirs; the rows from the
    // tick's due time carry none.
    let from_publish = &p["from_publish"];
    let firsts = from_publish["count"].as_u64().unwrap();
    assert!(firsts > 0 && firsts <= p["ticks"].as_u64().unwrap(), "{from_publish}");
    for h in [from_publish, &hops[4]] {
        assert!(h["floor"][0].as_u64().unwrap() > 0 && h["x_floor"][0].as_f64().unwrap() > 0.0, "{h}");
    }
    assert!(hops[0]["floor"].is_null() && p["every_tick"]["floor"].is_null(), "{p}");
    assert!(p["book_p50"].as_u64().unwrap() > 0 && p["budget_p50"].as_u64().unwrap() > p["book_p50"].as_u64().unwrap());
    // The book back to back, 10 us apart, and as far apart while warmed, over the same messages
    // that moved a top (the lab fails the run if the passes' counts differ): each kind timed.
    let w = &p["book_warmth"];
    assert!(w["messages"].as_u64().unwrap() > 0 && w["apart_ns"].as_u64().unwrap() == 10_000, "{w}");
    for k in ["back_to_back", "apart", "warmed"] {
        assert!(w[k][0].as_u64().unwrap() > 0, "{k}: {w}");
    }
    // One empty pass of the trader's loop beside one of the floor's bare reader, timed the same
    // way: the trader's does more (reports, warming the book), so it cannot be the shorter.
    let (trader, floor) = (p["poll_pass"]["trader"].as_u64().unwrap(), p["poll_pass"]["floor"].as_u64().unwrap());
    assert!(floor > 0 && trader >= floor, "{}", p["poll_pass"]);
    // Paired rounds: the pipeline and its floors back to back, the floors first in the second.
    let rounds = p["rounds"].as_array().expect("the pipeline's rounds");
    assert_eq!(rounds.iter().map(|r| r["floors_first"].as_bool().unwrap()).collect::<Vec<_>>(), [false, true]);
    for r in rounds {
        let (ttt, budget) = (r["ttt_p50"].as_u64().unwrap(), r["budget_p50"].as_u64().unwrap());
        assert!(ttt > 0 && budget > p["book_p50"].as_u64().unwrap() && r["hops_x"].as_f64().unwrap() > 0.0, "{r}");
        // The budget is the round's chained floor (measured: a relay's order timed end to end)
        // plus the book's p50 and 100 ns.
        let chain = r["chain_floor_p50"].as_u64().unwrap();
        assert!(chain > 0 && budget == chain + p["book_p50"].as_u64().unwrap() + 100, "{r}");
        // Both sides' two crossings per order timed (each without its own work between them),
        // and the relay's own span: the relay stamped both ends, and the gateway's row arrived.
        let (crossings, chain_crossings) =
            (r["crossings_p50"].as_u64().unwrap(), r["chain_crossings_p50"].as_u64().unwrap());
        // Each order's two crossings are its whole less the relay's span, so neither p50 can
        // pass the whole chain's.
        let span = r["relay_span_p50"].as_u64().unwrap();
        assert!(crossings > 0 && chain_crossings > 0 && chain_crossings <= chain && span > 0 && span < chain, "{r}");
    }
    let chain = (p["chain_floor"][0].as_u64().unwrap(), p["chain_floor"][1].as_u64().unwrap());
    assert!(chain.0 > 0 && chain.1 >= chain.0, "{p}");
    // Tick-to-trade judged from the market data's publish (the gateway timed it from the trace),
    // the row from the tick's due time beside it: the venue's work before the publish is in
    // that one only, so it is not the shorter.
    let judged = &p["ttt_from_publish"];
    assert!(judged["count"] == hops[5]["count"] && judged["p50"].as_u64().unwrap() > 0, "every order: {p}");
    for r in rounds {
        assert!(r["ttt_from_due_p50"].as_u64().unwrap() > r["ttt_p50"].as_u64().unwrap(), "{r}");
    }
    assert!(
        rounds.iter().any(|r| r["ttt_p50"] == judged["p50"] && r["ttt_from_due_p50"] == hops[5]["p50"]),
        "the figures shown are one round's: {p}"
    );
    // The venue with its snapshot maker and without, in paired rounds (with first in the
    // second): whole snapshots made in each, none lost to the tap.
    let snap = &rep["snapshot_cost"];
    assert_eq!((snap["rate"].as_u64(), snap["maker"].as_str()), (Some(50_000), Some("inline")), "{snap}");
    let rounds = snap["rounds"].as_array().unwrap();
    assert_eq!(rounds.iter().map(|r| r["with_first"].as_bool().unwrap()).collect::<Vec<_>>(), [false, true]);
    for r in rounds {
        assert!(r["snapshots"].as_u64().unwrap() >= 1 && r["tap_lost"] == 0, "{r}");
        assert!(r["with"][1].as_u64().unwrap() > 0 && r["without"][1].as_u64().unwrap() > 0, "{r}");
    }
    assert!(text.contains("SNAPSHOT COST") && text.contains("the venue's publish latency while it makes snapshots"));
    assert!(text.contains("TRADING PIPELINE") && text.contains("order published -> gateway receive"), "{text}");
    assert!(text.contains("warmed meanwhile as the trader's idle cycles warm it"), "{text}");
    assert!(text.contains("one empty pass of the trader's loop"), "{text}");
    assert!(text.contains("tick-to-trade's budget: the chained floor's p50") && text.contains("/ chained "), "{text}");
    let svg = std::fs::read_to_string(out.join("pipeline-hops.svg")).unwrap();
    assert!(
        svg.contains("50k msg/s: hops") && svg.contains("book applied -&gt; decision") && svg.contains(">\np99\n<"),
        "the stacked plot labels its bars, hops and panels: {svg}"
    );
    for f in ["table.txt", "latency.hlog", "rtt-64B.svg", "one-way-64B-50k.svg", "rtt-64B-tickbus_shm.hgrm"] {
        assert!(Path::new(&out).join(f).exists(), "{f} written");
    }

    read_back_hlog(&rep, &out.join("latency.hlog"));
    render_html(&rep, &out);

    let report = out.join("report.json");
    let same = lab(&["compare", report.to_str().unwrap(), report.to_str().unwrap()]);
    assert!(same.status.success());
    assert!(String::from_utf8_lossy(&same.stdout).contains("0 regressions"));
    let mut worse = rep.clone();
    for r in worse["sections"][0]["rows"].as_array_mut().unwrap() {
        let p50 = r["ns"][0].as_u64().unwrap();
        r["ns"][0] = Value::from(p50 * 2 + 10);
    }
    let worse_path = out.join("worse.json");
    std::fs::write(&worse_path, serde_json::to_string(&worse).unwrap()).unwrap();
    let judged = lab(&["compare", report.to_str().unwrap(), worse_path.to_str().unwrap(), "--threshold", "10"]);
    assert_eq!(judged.status.code(), Some(1), "a doubled p50 is a regression");
    assert!(String::from_utf8_lossy(&judged.stdout).contains("WORSE"));

    // The run records its host as the doctor sees it, with the lab's own cores.
    let env = &rep["environment"];
    let checks: Vec<&str> = env["findings"].as_array().unwrap().iter().map(|f| f["check"].as_str().unwrap()).collect();
    for c in ["tsc", "clocksource", "hugepages", "hugetlbfs", "memlock", "core 0 isolation", "core 1 irqs", "rdma"] {
        assert!(checks.contains(&c), "{c} in the report's environment: {checks:?}");
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(env["identity"]["hostname"], host.trim());
    assert!(text.contains("ENVIRONMENT: "), "{text}");
    // A transport NEW lost is listed, with the could-not-compare exit code.
    let mut fewer = rep.clone();
    fewer["sections"][0]["rows"].as_array_mut().unwrap().pop();
    let fewer_path = out.join("fewer.json");
    std::fs::write(&fewer_path, serde_json::to_string(&fewer).unwrap()).unwrap();
    let partial = lab(&["compare", report.to_str().unwrap(), fewer_path.to_str().unwrap()]);
    assert_eq!(partial.status.code(), Some(2), "{}", String::from_utf8_lossy(&partial.stdout));
    assert!(String::from_utf8_lossy(&partial.stdout).contains("MISSING "));
    let unreadable = lab(&["compare", report.to_str().unwrap(), "/nonexistent/report.json"]);
    assert_eq!(unreadable.status.code(), Some(2), "an unreadable NEW cannot be compared");
    let _ = std::fs::remove_dir_all(&out);
}

/// latency.hlog read by HdrHistogram's Python log reader: every row of every section comes back
/// under its tag with the same count and percentiles, at the time it was measured.
fn read_back_hlog(rep: &Value, hlog: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join("target/tools/venv/bin/python3");
    assert!(python.exists(), "{} missing: tools/setup-peers.sh installs it (with hdrhistogram)", python.display());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/read_hlog.py");
    let out = std::process::Command::new(&python).arg(&script).arg(hlog).output().unwrap();
    assert!(out.status.success(), "the Python reader rejected latency.hlog: {}", String::from_utf8_lossy(&out.stderr));
    let intervals: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut starts = std::collections::BTreeSet::new();
    // The log holds the sections' rows in report order, then tick-to-trade's.
    let sections = rep["sections"].as_array().unwrap().iter().chain(std::iter::once(&rep["tick_to_trade"]));
    let rows: Vec<(&Value, &Value)> =
        sections.flat_map(|sec| sec["rows"].as_array().unwrap().iter().map(move |r| (sec, r))).collect();
    assert_eq!(rows.len(), intervals.len(), "one interval per row, no more: {intervals:?}");
    for ((sec, row), i) in rows.into_iter().zip(&intervals) {
        let tag = i["tag"].as_str().unwrap();
        let prefix = format!("{}-{}B", sec["mode"].as_str().unwrap(), sec["size"]);
        assert!(tag.starts_with(&prefix) && tag.contains('/'), "{tag} for a row of {prefix}");
        assert_eq!(i["count"], row["count"], "{tag}");
        for (col, idx) in [("p50", 0), ("p99", 2)] {
            let (py, rs) = (i[col].as_f64().unwrap(), row["ns"][idx].as_f64().unwrap());
            // Both report the highest value equivalent to the percentile's bucket (3 digits).
            assert!((py - rs).abs() <= rs * 0.002 + 1.0, "{tag} {col}: Python {py} against the report's {rs}");
        }
        let (start, end) = (i["start_ms"].as_f64().unwrap(), i["end_ms"].as_f64().unwrap());
        let secs = row["span"]["secs"].as_f64().unwrap();
        assert!(end > start && ((end - start) / 1000.0 - secs).abs() < 0.01, "{tag}: {start}..{end} ms vs {secs} s");
        starts.insert(start as u64);
    }
    assert!(starts.len() > 1, "intervals start when their rows were measured, not all at once: {starts:?}");
}

/// index.html rendered by a real browser (Debian's chromium, headless, installed by the set-up):
/// every table and plot of the report is in the page, and the screenshot is not blank.
fn render_html(rep: &Value, out: &Path) {
    let page = out.join("index.html");
    let chromium = ["chromium", "chromium-browser"]
        .iter()
        .find(|b| Command::new(b).arg("--version").output().is_ok_and(|o| o.status.success()))
        .expect("no chromium: tools/setup-peers.sh installs it (the test renders the HTML report)");
    let browse = |extra: &[&str]| {
        let url = format!("file://{}", page.display());
        let mut args =
            vec!["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"];
        args.extend(extra);
        args.push(&url);
        let o = Command::new(chromium).args(&args).output().unwrap();
        assert!(o.status.success(), "chromium {extra:?}: {}", String::from_utf8_lossy(&o.stderr));
        o
    };
    let dom = String::from_utf8(browse(&["--dump-dom"]).stdout).unwrap();
    // The report's section keys, as report.rs names tables and plots (rates in k or M).
    let rate = |r: u64| match r {
        r if r % 1_000_000 == 0 => format!("{}M", r / 1_000_000),
        r if r % 1000 == 0 => format!("{}k", r / 1000),
        r => r.to_string(),
    };
    let mut keys = 0;
    for sec in rep["sections"].as_array().unwrap().iter().chain(std::iter::once(&rep["tick_to_trade"])) {
        let base = format!("{}-{}B", sec["mode"].as_str().unwrap(), sec["size"]);
        let key = sec["rate"].as_u64().map_or(base.clone(), |r| format!("{base}-{}", rate(r)));
        assert!(dom.contains(&format!("data-table=\"{key}\"")), "table {key} not in the rendered page");
        assert!(dom.contains(&format!("data-plot=\"{key}.svg\"")), "plot {key}.svg not in the rendered page");
        keys += 1;
    }
    for t in
        ["settings", "environment", "pipeline", "snapshot-cost", "throughput", "itch", "book", "journal", "fanout-shm"]
    {
        assert!(dom.contains(&format!("data-table=\"{t}\"")), "{t} not in the rendered page");
    }
    // The verdict panel comes first, one row per target, each linking to a table on the page.
    let panel = dom.find("data-table=\"verdicts\"").expect("a verdict panel");
    assert!(panel < dom.find("data-table=\"settings\"").unwrap(), "the panel opens the page");
    let table = &dom[panel..panel + dom[panel..].find("</table>").unwrap()];
    let rows = table.matches("<tr>").count() - 1;
    assert!(rows >= 8, "the pipeline's two, ping-pong at 64 B, ITCH, the book, the journal's three: {table}");
    for link in table.split("href=\"#").skip(1) {
        let id = &link[..link.find('"').unwrap()];
        assert!(dom.contains(&format!("id=\"{id}\"")), "the panel links to #{id}, which the page lacks");
    }
    for what in [
        "shm ping-pong try_recv at 64 B",
        "order book at TotalView scale",
        "recorder throughput",
        "while it makes snapshots",
    ] {
        assert!(table.contains(what), "{what} in the panel: {table}");
    }
    assert!(dom.contains("data-plot=\"pipeline-hops.svg\"") && dom.contains("data-plot=\"fanout-shm.svg\""));
    if cfg!(feature = "xdp") {
        assert!(dom.contains("id=\"wire-to-trade\"") && dom.contains("data-plot=\"wire-to-trade-hops.svg\""));
    }
    assert!(dom.matches("<svg").count() > keys, "every plot inline, the pipeline's too");
    assert!(!dom.contains("class=\"warn\">plot"), "a plot was missing when the page was written");
    let shot = out.join("index.png");
    let size = "--window-size=1280,2000".to_string();
    browse(&[&size, &format!("--screenshot={}", shot.display())]);
    let mut reader = png::Decoder::new(std::fs::File::open(&shot).unwrap()).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(info.color_type.samples()).collect();
    let ink = pixels.iter().filter(|p| p[..3].iter().any(|&c| c < 200)).count();
    let colours: std::collections::BTreeSet<&[u8]> = pixels.iter().copied().collect();
    assert_eq!((info.width, info.height), (1280, 2000));
    assert!(ink * 50 > pixels.len(), "the screenshot is nearly blank: {ink} of {} pixels inked", pixels.len());
    assert!(colours.len() > 16, "the screenshot has {} colours: tables and plots have more", colours.len());
}

/// The venue's publish latency while a late joiner catches up: a day long enough (50,000 ITCH
/// messages at 10k/s: a debug-built joiner takes a second or two to start) for a second trader
/// to join it at 30% through the recorder's journal and go live; the round's figures and its
/// verdict (whatever the machine allowed) reported.
#[test]
fn a_late_joiner_catches_up_beside_the_venue_and_its_cost_is_reported() {
    let out = std::env::temp_dir().join(format!("lab-join-{}", std::process::id()));
    let skip = "ttt,pingpong,openloop,throughput,itch,book,journal,fanout,wire";
    let run = lab(&[
        "--skip",
        skip,
        "--rates",
        "10000",
        "--pipeline-seconds",
        "5",
        "--itch-messages",
        "60000",
        "--pipeline-rounds",
        "1",
        "--snapshot-rounds",
        "0",
        "--join-rounds",
        "1",
        "--rdma-report",
        "/nonexistent/report.json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let c = &rep["join_cost"];
    assert_eq!(c["rate"], 10_000, "{c}");
    let rounds = c["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 1, "{c}");
    let r = &rounds[0];
    // The joiner read the start of the day from the journal and went live before its end.
    assert!(r["from_journal"].as_u64().unwrap() > 0 && r["live_after_us"].as_u64().is_some(), "{r}");
    assert!(r["with"][1].as_u64().unwrap() > 0 && r["without"][1].as_u64().unwrap() > 0, "{r}");
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(text.contains("LATE JOINER COST") && text.contains("while a late joiner catches up"), "{text}");
    let _ = std::fs::remove_dir_all(&out);
}

/// `--itch FILE` replays a third-party file in place (memory-mapped) in the tick-to-trade demo,
/// and a file that is not there is named in the error.
#[test]
fn the_demo_replays_a_given_itch_file_and_names_a_missing_one() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data/itch/ex20101224.TEST_ITCH_50");
    let out = std::env::temp_dir().join(format!("lab-itch-{}", std::process::id()));
    // The demo alone: the book at TotalView scale (full size in a debug build: over four
    // minutes) and the wire are tested above at a small scale.
    let skip = "pipeline,pingpong,openloop,throughput,itch,book,journal,fanout,wire";
    let base = ["--skip", skip, "--ttt-rate", "200000", "--rdma-report", "/nonexistent", "--out"];
    let mut args = base.to_vec();
    args.extend([out.to_str().unwrap(), "--itch", file]);
    let run = lab(&args);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    // The file holds 12,012 messages: every one reached the strategy.
    assert_eq!(rep["tick_to_trade"]["rows"][0]["count"], 12_012, "{:#}", rep["tick_to_trade"]);
    let mut args = base.to_vec();
    args.extend([out.to_str().unwrap(), "--itch", "/nonexistent/day.itch"]);
    let missing = lab(&args);
    assert!(!missing.status.success());
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("--itch /nonexistent/day.itch"), "{err}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_misspelt_part_to_skip_is_an_error_naming_the_parts() {
    let run = lab(&["--skip", "pingpong,jurnal", "--out", "/nonexistent/never-written"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "a misspelt --skip must not run the suite");
    assert!(stderr.contains("jurnal") && stderr.contains("journal") && stderr.contains("pipeline"), "{stderr}");
}
