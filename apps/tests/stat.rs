//! `tickbus stat` against live shm streams in another process: the positions, messages, bytes,
//! back-pressure, gaps and lag it reports are exactly what that process caused and saw itself;
//! a killed process's figures are shown stale, never live, and `--prune` removes them; a process
//! that exits cleanly leaves no counters file; the Prometheus exposition (printed and served)
//! carries the same figures.
//!
//! The streams live in a helper: this test binary run again with TICKBUS_STAT_ROLE set.
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use tickbus::shm::{self, ShmOptions};
use tickbus::{Mode, Recv, RingConfig, StartAt};

const PAYLOAD: usize = 40;

fn opts() -> ShmOptions {
    ShmOptions::default()
}

/// The helper: a reliable ring filled until it refuses three times, a consumer that reads five,
/// and a lossy ring whose observer is lapped and then reads three. Prints what it did and saw,
/// then holds its streams open until its stdin closes (or it is killed).
fn helper(tag: &str) {
    let o = opts();
    let (rel, lossy) = (format!("{tag}-rel"), format!("{tag}-lossy"));
    let mut p1 = shm::open_publisher(&rel, &RingConfig::for_payload(Mode::Reliable, 11, PAYLOAD, 8), &o).unwrap();
    let mut c1 = shm::open_consumer(&rel, &o).unwrap();
    let msg = [7u8; PAYLOAD];
    let mut published = 0u64;
    let mut full = 0u64;
    while full < 3 {
        match p1.publish(&msg) {
            Ok(_) => published += 1,
            Err(_) => full += 1,
        }
    }
    let mut read = 0u64;
    while read < 5 {
        if let Some(Recv::Message(_)) = c1.try_recv() {
            read += 1;
        }
    }
    let mut p2 = shm::open_publisher(&lossy, &RingConfig::for_payload(Mode::Lossy, 12, PAYLOAD, 8), &o).unwrap();
    let mut o2 = shm::open_observer(&lossy, StartAt::Position(0), &o).unwrap();
    for _ in 0..20 {
        p2.publish(&msg[..16]).unwrap();
    }
    let (mut gaps, mut missed, mut seen) = (0u64, 0u64, 0u64);
    let mut drain = |o2: &mut tickbus::shm::ShmSubscriber| {
        while let Some(r) = o2.try_recv() {
            match r {
                Recv::Gap(g) => {
                    gaps += 1;
                    missed += g.missed();
                }
                Recv::Message(_) => seen += 1,
            }
        }
    };
    drain(&mut o2);
    for _ in 0..3 {
        p2.publish(&msg[..16]).unwrap();
    }
    drain(&mut o2);
    let report = serde_json::json!({
        "published": published, "full": full, "read": read,
        "lossy_published": 23, "gaps": gaps, "missed": missed, "seen": seen,
        "observer_position": o2.reader().position(),
    });
    println!("{report}");
    std::io::stdout().flush().unwrap();
    let mut sink = String::new();
    let _ = std::io::stdin().read_to_string(&mut sink);
}

fn spawn_helper(tag: &str) -> (Child, Value) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "helper_role", "--nocapture", "--test-threads", "1"])
        .env("TICKBUS_STAT_ROLE", tag)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // libtest prints `test helper_role ... ` on the same line, before the helper's report.
    let report = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| l.find('{').and_then(|i| serde_json::from_str::<Value>(&l[i..]).ok()))
        .expect("the helper's report");
    // Keep reading: the helper's last lines must not meet a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, report)
}

/// Not a test on its own: the helper's entry point when TICKBUS_STAT_ROLE is set.
#[test]
fn helper_role() {
    if let Ok(tag) = std::env::var("TICKBUS_STAT_ROLE") {
        helper(&tag);
    }
}

fn stat(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tickbus")).arg("stat").args(args).output().unwrap();
    assert!(out.status.success(), "tickbus stat {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn streams_of(snap: &Value, pid: u32) -> Vec<Value> {
    snap["streams"].as_array().unwrap().iter().filter(|s| s["pid"] == pid).cloned().collect()
}

fn find<'a>(streams: &'a [Value], role: &str, name: &str) -> &'a Value {
    streams
        .iter()
        .find(|s| s["role"] == role && s["name"] == name)
        .unwrap_or_else(|| panic!("no {role} of {name} in {streams:#?}"))
}

fn counters_file(pid: u32) -> PathBuf {
    tickbus::counters::counters_dir().join(format!("{pid}.counters"))
}

#[test]
fn stat_reports_exactly_what_a_live_process_did_and_a_killed_one_as_stale() {
    let tag = format!("stat-{}", std::process::id());
    let (mut child, did) = spawn_helper(&tag);
    let pid = child.id();
    let snap: Value = serde_json::from_str(&stat(&["--json"])).unwrap();
    let mine = streams_of(&snap, pid);
    assert_eq!(mine.len(), 4, "two publishers, a consumer and an observer: {mine:#?}");
    for s in &mine {
        assert_eq!(s["live"], true, "{s:#}");
        assert_eq!(s["transport"], "shm", "{s:#}");
    }
    let (rel, lossy) = (format!("{tag}-rel"), format!("{tag}-lossy"));
    let p1 = find(&mine, "publisher", &rel);
    assert_eq!(p1["stream_id"], 11);
    assert_eq!(p1["counters"]["messages"], did["published"], "{p1:#}");
    assert_eq!(p1["counters"]["position"], did["published"]);
    assert_eq!(p1["counters"]["bytes"], did["published"].as_u64().unwrap() * PAYLOAD as u64);
    assert_eq!(p1["counters"]["full"], 3, "back-pressure: three refused publishes");
    assert_eq!(did["published"], 8, "the 8-slot ring took eight before refusing");
    let c1 = find(&mine, "subscriber", &rel);
    assert_eq!(c1["counters"]["messages"], did["read"]);
    assert_eq!(c1["counters"]["position"], 5);
    assert_eq!(c1["lag"], 3, "eight published, five read: {c1:#}");
    assert_eq!(c1["counters"]["gaps"], 0);
    let o2 = find(&mine, "subscriber", &lossy);
    assert_eq!(o2["counters"]["gaps"], did["gaps"], "{o2:#} against {did}");
    assert_eq!(o2["counters"]["laps"], did["gaps"]);
    assert_eq!(o2["counters"]["missed"], did["missed"]);
    assert_eq!(o2["counters"]["messages"], did["seen"]);
    assert_eq!(o2["counters"]["position"], did["observer_position"]);
    assert!(did["gaps"].as_u64().unwrap() >= 1, "the observer was lapped: {did}");
    assert_eq!(did["seen"].as_u64().unwrap() + did["missed"].as_u64().unwrap(), 23, "{did}");
    assert_eq!(o2["lag"], 0);
    let p2 = find(&mine, "publisher", &lossy);
    assert_eq!(p2["counters"]["messages"], 23);
    assert_eq!(p2["counters"]["bytes"], 23 * 16);

    // The rings are listed with the same positions.
    let list: Value = serde_json::from_str(&{
        let out = Command::new(env!("CARGO_BIN_EXE_tickbus")).args(["ring", "list", "--json"]).output().unwrap();
        String::from_utf8(out.stdout).unwrap()
    })
    .unwrap();
    let ring = list["rings"].as_array().unwrap().iter().find(|r| r["name"] == rel.as_str()).unwrap();
    assert_eq!(ring["position"], 8);
    assert_eq!(ring["publisher"], "live");
    assert_eq!(ring["consumers"][0]["pid"], pid);

    // Prometheus, printed and served, carries the same figures.
    let labels = format!(
        "pid=\"{pid}\",uid=\"{}\",record=\"{}\",program=\"{}\",role=\"publisher\",transport=\"shm\",stream=\"11\",name=\"{rel}\"",
        p1["uid"],
        p1["record"],
        p1["program"].as_str().unwrap()
    );
    let want = format!("tickbus_full_total{{{labels}}} 3\n");
    assert!(stat(&["--prometheus"]).contains(&want), "{want}");
    let served = scrape_once();
    assert!(served.starts_with("HTTP/1.1 200 OK\r\n") && served.contains(&want), "{served}");
    assert!(served.contains("application/openmetrics-text") && served.ends_with("# EOF\n"), "{served}");
    assert_eq!(p1["uid"], my_uid(), "the owner is shown: {p1:#}");

    // --watch gives rates for live streams.
    let watched = stat(&["--watch", "0.2", "--count", "1", "--json"]);
    let w: Value = serde_json::from_str(watched.lines().next().unwrap()).unwrap();
    let s = streams_of(&w, pid);
    assert!(s.iter().all(|s| s["msgs_per_s"].as_f64() == Some(0.0)), "idle streams, rates 0: {s:#?}");

    // Killed: its figures stay readable, as stale, never live; --prune removes them.
    child.kill().unwrap();
    child.wait().unwrap();
    let snap: Value = serde_json::from_str(&stat(&["--json"])).unwrap();
    let dead = streams_of(&snap, pid);
    assert_eq!(dead.len(), 4);
    for s in &dead {
        assert_eq!(s["live"], false, "{s:#}");
        assert!(s["stale"].as_str().unwrap().contains(&format!("process {pid} is gone")), "{s:#}");
        assert!(s.get("lag").is_none(), "no lag for a dead reader: {s:#}");
    }
    assert!(stat(&[]).contains("STALE: process"), "the table says so too");
    assert!(counters_file(pid).exists());
    let out = Command::new(env!("CARGO_BIN_EXE_tickbus")).args(["stat", "--prune"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("{pid}.counters")), "{out:?}");
    assert!(!counters_file(pid).exists(), "pruned");
    for n in [&rel, &lossy] {
        let _ = shm::remove(n, &opts());
    }
}

#[test]
fn a_process_that_exits_cleanly_leaves_no_counters_file() {
    let tag = format!("stat-clean-{}", std::process::id());
    let (mut child, _) = spawn_helper(&tag);
    let pid = child.id();
    assert!(counters_file(pid).exists(), "live: its file is there");
    drop(child.stdin.take()); // the helper returns, closing its streams
    assert!(child.wait().unwrap().success());
    assert!(!counters_file(pid).exists(), "gone with its last stream");
    for n in [format!("{tag}-rel"), format!("{tag}-lossy")] {
        let _ = shm::remove(&n, &opts());
    }
}

/// This process's uid, as `stat` shows the owner of our helper's streams.
fn my_uid() -> u32 {
    std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m)).unwrap()
}

/// Starts `tickbus stat --listen 127.0.0.1:0` with `args`; returns it and the address it serves.
fn listen(args: &[&str]) -> (Child, String) {
    let mut server = Command::new(env!("CARGO_BIN_EXE_tickbus"))
        .args(["stat", "--listen", "127.0.0.1:0"])
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(server.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let url = line.trim().rsplit(' ').next().unwrap().to_owned();
    (server, url.trim_start_matches("http://").trim_end_matches("/metrics").to_owned())
}

fn scrape(addr: &str) -> String {
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    reply
}

/// Starts `tickbus stat --listen 127.0.0.1:0 --count 1`, scrapes /metrics once, returns the reply.
fn scrape_once() -> String {
    let (mut server, addr) = listen(&["--count", "1"]);
    let reply = scrape(&addr);
    assert!(server.wait().unwrap().success(), "the server stops after --count scrapes");
    reply
}

/// Issue 25 item 13: eight idle connections and a client sending its request a byte at a time
/// do not hold up a scrape (the server before took one connection at a time, a second each, so
/// this scrape waited 8 s and more), and the server cuts such clients off by itself.
#[test]
fn idle_and_slow_clients_do_not_hold_up_a_scrape_and_are_cut_off() {
    use std::time::{Duration, Instant};
    let (mut server, addr) = listen(&[]);
    let idle: Vec<std::net::TcpStream> = (0..8).map(|_| std::net::TcpStream::connect(&addr).unwrap()).collect();
    let mut slow = std::net::TcpStream::connect(&addr).unwrap();
    slow.write_all(b"GE").unwrap();
    std::thread::sleep(Duration::from_millis(200)); // all of them accepted and waiting
    let t = Instant::now();
    let reply = scrape(&addr);
    let took = t.elapsed();
    assert!(reply.starts_with("HTTP/1.1 200 OK\r\n") && reply.contains("# EOF"), "{reply}");
    assert!(took < Duration::from_secs(3), "the scrape waited {took:?} behind idle clients");
    // The slow client's head is overdue after 2 s; every connection is closed after 10 s.
    for (what, mut c, limit) in
        idle.into_iter().map(|c| ("idle", c, 12)).chain(std::iter::once(("slow", slow.try_clone().unwrap(), 4)))
    {
        c.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut buf = [0u8; 256];
        let _ = c.read(&mut buf); // EOF (or a 408 reply, then EOF) once the server gives up
        let _ = c.read(&mut buf);
        assert!(t.elapsed() < Duration::from_secs(limit), "the {what} client was held {:?}", t.elapsed());
    }
    server.kill().unwrap();
    server.wait().unwrap();
}
