//! `tickbus record`, `replay` and `journal inspect` as real processes: a million messages
//! recorded and replayed identical, a recorder killed mid-stream that resumes with every message
//! exactly once, damaged and foreign inputs named, and replay pacing.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tickbus::journal::{JournalReader, Kind};
use tickbus::ring::ClaimError;
use tickbus::shm::{self, HugepagePolicy, ShmOptions};
use tickbus::{Mode, Recv, RingConfig};

/// These tests each drive both cores: one at a time.
static ONE: Mutex<()> = Mutex::new(());

struct Env {
    opts: ShmOptions,
    journal: PathBuf,
    tmp: PathBuf,
}

impl Env {
    fn new(tag: &str) -> Env {
        let tag = format!("tickbus-rr-{tag}-{}", std::process::id());
        let tmp = std::env::temp_dir().join(&tag);
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        Env {
            opts: ShmOptions::new(
                format!("/dev/hugepages/{tag}"),
                format!("/dev/shm/{tag}"),
                HugepagePolicy::Preferred,
            ),
            journal: tmp.join("journal"),
            tmp,
        }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tickbus"));
        c.args(args)
            .env("TICKBUS_HUGEPAGE_DIR", &self.opts.hugepage_dir)
            .env("TICKBUS_SHM_DIR", &self.opts.fallback_dir);
        c
    }

    fn spawn_recorder(&self, ring: &str) -> Child {
        self.spawn_recorder_of(&["--ring", ring])
    }

    /// A recorder of the source `source` names (`--ring NAME`, `--from URI`) into the journal.
    fn spawn_recorder_of(&self, source: &[&str]) -> Child {
        self.cmd(&[&["record"][..], source, &["--journal", self.journal.to_str().unwrap(), "--json"]].concat())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.tmp);
        let _ = std::fs::remove_dir_all(&self.opts.hugepage_dir);
        let _ = std::fs::remove_dir_all(&self.opts.fallback_dir);
    }
}

fn fill(pos: u64, buf: &mut [u8]) {
    for (k, c) in buf.chunks_exact_mut(8).enumerate() {
        c.copy_from_slice(&(pos.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ k as u64).to_le_bytes());
    }
}

fn intact(pos: u64, buf: &[u8]) -> bool {
    let mut want = vec![0u8; buf.len()];
    fill(pos, &mut want);
    want == buf
}

/// Waits (up to `secs`) until `f` holds.
fn wait_for(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn sigterm(c: &Child) {
    // SAFETY: kill(2) on our own child's pid with SIGTERM; it only sends a signal.
    assert_eq!(unsafe { libc::kill(c.id() as i32, libc::SIGTERM) }, 0);
}

fn publish_all(p: &mut shm::ShmPublisher, range: std::ops::Range<u64>) {
    let mut buf = [0u8; 64];
    let deadline = Instant::now() + Duration::from_secs(120);
    for pos in range {
        fill(pos, &mut buf);
        loop {
            match p.publish(&buf) {
                Ok(got) => {
                    assert_eq!(got, pos);
                    break;
                }
                Err(ClaimError::Full { .. }) => {
                    assert!(Instant::now() < deadline, "stuck on Full at {pos}");
                    std::hint::spin_loop();
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
}

/// Every record of the journal at `dir`: all messages, positions 0..n in order, intact, once.
fn check_journal(dir: &Path, n: u64) {
    let r = JournalReader::open(dir).unwrap();
    let mut c = r.cursor();
    let mut next = 0;
    while let Some(rec) = c.next().unwrap() {
        match rec.kind {
            Kind::Message(p) => {
                assert_eq!(rec.sequence, next, "out of order or twice");
                assert!(intact(next, p), "message {next} differs");
                next += 1;
            }
            other => panic!("a reliable recording has {other:?} at {}", rec.sequence),
        }
    }
    assert_eq!(next, n, "messages recorded");
}

#[test]
fn a_million_messages_recorded_from_a_publishing_process_replay_identical() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("million");
    let n = 1_000_000u64;
    let mut p = shm::open_publisher("md", &RingConfig::for_payload(Mode::Reliable, 5, 64, 4096), &env.opts).unwrap();
    let rec = env.spawn_recorder("md");
    wait_for(30, "the recorder to attach", || p.consumer_status()[0].alive);
    publish_all(&mut p, 0..n);
    // The recorder releases a message only once its journal holds it.
    wait_for(60, "the journal to hold every message", || p.consumer_status()[0].position == n);
    sigterm(&rec);
    let out = rec.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((summary["messages"].as_u64(), summary["gaps"].as_u64()), (Some(n), Some(0)), "{summary}");
    drop(p);
    check_journal(&env.journal, n);

    // Replay it onto another ring and compare every message, in order.
    let replay = env
        .cmd(&["replay", env.journal.to_str().unwrap(), "--ring", "again", "--reliable", "--max", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut c = loop {
        match shm::open_consumer("again", &env.opts) {
            Ok(c) => break c,
            Err(e) if e.is_retryable() => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(c.config().stream_id, 5, "the replay keeps the journal's stream id");
    let mut next = 0u64;
    let deadline = Instant::now() + Duration::from_secs(120);
    while next < n {
        match c.try_recv() {
            Some(Recv::Message(m)) => {
                assert_eq!(m.position, next);
                assert!(intact(next, m.payload), "replayed message {next} differs");
                next += 1;
            }
            Some(Recv::Gap(g)) => panic!("a reliable replay gapped: {g:?}"),
            None => assert!(Instant::now() < deadline, "replay stalled at {next}"),
        }
    }
    let out = replay.wait_with_output().unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["published"].as_u64(), Some(n), "{summary}");
    assert!(c.try_recv().is_none(), "more messages replayed than recorded");
}

#[test]
fn a_recorder_killed_mid_stream_resumes_with_every_message_exactly_once() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("kill");
    let n = 300_000u64;
    let p = shm::open_publisher("orders", &RingConfig::for_payload(Mode::Reliable, 6, 64, 1024), &env.opts).unwrap();
    let p = std::sync::Arc::new(Mutex::new(p));
    let mut first = env.spawn_recorder("orders");
    wait_for(30, "the recorder to attach", || p.lock().unwrap().consumer_status()[0].alive);
    let publisher = {
        let p = p.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            let deadline = Instant::now() + Duration::from_secs(120);
            for pos in 0..n {
                fill(pos, &mut buf);
                loop {
                    let r = p.lock().unwrap().publish(&buf);
                    match r {
                        Ok(_) => break,
                        Err(ClaimError::Full { .. }) => {
                            assert!(Instant::now() < deadline, "stuck on Full at {pos}");
                            std::thread::yield_now();
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        })
    };
    wait_for(60, "the recorder to be mid-stream", || p.lock().unwrap().consumer_status()[0].position > n / 3);
    first.kill().unwrap(); // SIGKILL: no clean-up, whatever it was writing
    first.wait().unwrap();
    let at_kill = p.lock().unwrap().consumer_status()[0].position;
    assert!(at_kill < n, "the recorder finished before it was killed");
    let second = env.spawn_recorder("orders");
    publisher.join().unwrap();
    wait_for(60, "the journal to hold every message", || p.lock().unwrap().consumer_status()[0].position == n);
    sigterm(&second);
    let out = second.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("continuing from"), "the restarted recorder did not say where it resumed: {err}");
    eprintln!("killed at consumer position {at_kill}; restarted recorder said: {err}");
    check_journal(&env.journal, n);
}

#[test]
fn damaged_foreign_and_missing_inputs_are_named() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("bad");
    let j = env.journal.to_str().unwrap().to_owned();
    // A small journal of several segments, written through the library.
    {
        use tickbus::journal::{JournalMeta, JournalOptions, JournalWriter};
        let mut o = JournalOptions::default();
        o.segment_bytes = 64 << 10;
        let meta = JournalMeta { stream_id: 3, source: "test".into(), ticks_per_ns: 1.0 };
        let mut w = JournalWriter::open(&env.journal, meta, o).unwrap();
        let mut buf = [0u8; 64];
        for pos in 0..5000 {
            fill(pos, &mut buf);
            w.append(pos, 0, 0, &buf).unwrap();
        }
        w.close().unwrap();
    }
    let run = |args: &[&str]| {
        let out = env.cmd(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(run(&["journal", "inspect", &j]).0, Some(0));
    let seg1 = env.journal.join("0000000001.tbj");
    let good = std::fs::read(&seg1).unwrap();

    // A bit flipped in the middle.
    let mut flipped = good.clone();
    flipped[4096 + 1000] ^= 0x04;
    std::fs::write(&seg1, &flipped).unwrap();
    let (code, out, err) = run(&["journal", "inspect", &j]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("0000000001.tbj") && err.contains("offset") && err.contains("CRC"), "{err}");
    let (code, _, err) = run(&["replay", &j, "--ring", "x", "--max"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("0000000001.tbj") && err.contains("offset"), "{err}");

    // Cut short (a segment that is not the last).
    std::fs::write(&seg1, &good[..good.len() / 2]).unwrap();
    let (code, _, err) = run(&["journal", "inspect", &j]);
    assert_eq!(code, Some(1));
    assert!(err.contains("0000000001.tbj"), "{err}");

    // A newer format version.
    let mut newer = good.clone();
    newer[8] = 2;
    std::fs::write(&seg1, &newer).unwrap();
    let (code, _, err) = run(&["replay", &j, "--ring", "x", "--max"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("0000000001.tbj") && err.contains("version 2"), "{err}");
    std::fs::write(&seg1, &good).unwrap();

    // A truncated capture.
    let pcap = env.tmp.join("day.pcap");
    let (code, _, err) = run(&[
        "itch",
        "generate",
        "--seed",
        "2",
        "--stocks",
        "3",
        "--messages",
        "2000",
        "--pcap",
        pcap.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let bytes = std::fs::read(&pcap).unwrap();
    std::fs::write(&pcap, &bytes[..bytes.len() - 37]).unwrap();
    // (another ring: "x" now holds the journal's stream 3, the capture is stream 1)
    let (code, out, err) = run(&["replay", pcap.to_str().unwrap(), "--ring", "y", "--max"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(err.contains("day.pcap") && err.contains("packet"), "{err}");

    // A ring that does not exist.
    let (code, _, err) = run(&["record", "--ring", "nosuch", "--journal", &j, "--wait-secs", "0.3"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no ring named \"nosuch\"") && err.contains("waiting up to 0.3 s"), "{err}");
    assert!(err.contains("waited 0.") && err.contains("--wait-secs"), "{err}");
    let (code, _, err) = run(&["record", "--ring", "nosuch", "--journal", &j, "--wait-secs", "0"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no ring named \"nosuch\"") && !err.contains("waiting"), "{err}");
    for bad in ["-1", "nan", "inf", "1e9"] {
        let arg = format!("--wait-secs={bad}");
        let (code, _, err) = run(&["record", "--ring", "nosuch", "--journal", &j, &arg]);
        // Refused where the command line is parsed (apps/src/args.rs): a usage error, exit 2.
        assert_eq!(code, Some(2), "{bad}");
        assert!(err.contains("--wait-secs"), "{bad}: {err}");
    }
    let (code, _, err) = run(&["replay", "/no/such/file", "--ring", "x", "--max"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("/no/such/file"), "{err}");
    let _ = shm::remove("x", &env.opts);
    let _ = shm::remove("y", &env.opts);
}

#[test]
fn replay_paced_at_100k_per_second_achieves_the_rate_within_one_percent() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("rate");
    let itch = env.tmp.join("day.itch");
    let out = env
        .cmd(&[
            "itch",
            "generate",
            "--seed",
            "5",
            "--stocks",
            "10",
            "--messages",
            "150000",
            "--itch",
            itch.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let out =
        env.cmd(&["replay", itch.to_str().unwrap(), "--ring", "paced", "--rate", "100000", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rate = s["rate_msgs_per_s"].as_f64().unwrap();
    assert!((rate - 100_000.0).abs() <= 1_000.0, "achieved {rate} msg/s: {s}");
    assert!(s["published"].as_u64().unwrap() > 150_000, "{s}");
    let e = &s["pacing_error_ns"];
    assert!(e["p50"].as_u64().is_some() && e["p99"].as_u64().unwrap() >= e["p50"].as_u64().unwrap(), "{s}");
    eprintln!("paced replay: {s}");
}

/// CPU seconds (user + system) process `pid` has used, from /proc.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split(' ').collect();
    // Fields 14 and 15 (utime, stime), counted from the state at field 3.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a configuration value.
    ticks as f64 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

#[test]
fn a_reliable_replay_nobody_consumes_says_whom_it_waits_for_sleeps_and_a_stop_is_no_success() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("noconsumer");
    let day = env.tmp.join("day.itch");
    let out = env
        .cmd(&["itch", "generate", "--itch", day.to_str().unwrap(), "--stocks", "3", "--messages", "3000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Even with -q: before, it spun a core without a word.
    let mut replay = env
        .cmd(&["-q", "replay", day.to_str().unwrap(), "--ring", "nc", "--reliable", "--slots", "1024", "--max"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = replay.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let said = rx.recv_timeout(Duration::from_secs(20)).expect("the replay said nothing while it waited");
    assert!(
        said.contains("waiting: ring nc")
            && said.contains("no live consumer")
            && said.contains("tickbus record --ring nc"),
        "{said}"
    );
    let before = cpu_secs(replay.id());
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_secs(replay.id()) - before;
    assert!(used < 1.0, "waiting for a consumer used {used:.2} CPU seconds in 2 s (it spun)");
    sigterm(&replay);
    let out = replay.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rest: Vec<String> = rx.try_iter().collect();
    assert_eq!(out.status.code(), Some(1), "a stop before the end is not a success: {stdout} {rest:?}");
    assert!(stdout.contains("replayed 1024 messages"), "only what went into the ring is counted (was 1025): {stdout}");
    assert!(rest.iter().any(|l| l.contains("stopped before the end")), "{rest:?}");
    let _ = shm::remove("nc", &env.opts);
}

/// Issue 24: `record --from URI` takes the stream as a channel URI (here `shm:md`, a reliable
/// ring: the recorder is its consumer and loses nothing); a URI that is wrong is refused by name
/// before anything is opened.
#[test]
fn record_takes_its_source_as_a_channel_uri() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("from-uri");
    let n = 5_000u64;
    let mut p = shm::open_publisher("md", &RingConfig::for_payload(Mode::Reliable, 5, 64, 1024), &env.opts).unwrap();
    let rec = env.spawn_recorder_of(&["--from", "shm:md"]);
    wait_for(30, "the recorder to attach", || p.consumer_status()[0].alive);
    publish_all(&mut p, 0..n);
    wait_for(60, "the journal to hold every message", || p.consumer_status()[0].position == n);
    sigterm(&rec);
    let out = rec.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((summary["messages"].as_u64(), summary["gaps"].as_u64()), (Some(n), Some(0)), "{summary}");
    drop(p);
    check_journal(&env.journal, n);
    let bad = env.tmp.join("never");
    let out = env.cmd(&["record", "--from", "udp://1.2.3.4/1", "--journal", bad.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--from") && err.contains("unknown transport"), "{err}");
    assert!(!bad.exists(), "nothing made for a refused URI");
}

/// A journal with a hole replayed by channel URI (`--dest`): every message in order, and the
/// hole as a FeedGap message in its place (first sequence and count), not silence.
#[test]
fn a_replay_by_uri_carries_the_recording_s_gaps_as_feed_gap_messages() {
    use tickbus::journal::{JournalMeta, JournalOptions, JournalWriter};
    use tickbus_codecs::md::FeedGap;
    use tickbus_codecs::Message;
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("dest");
    let meta = JournalMeta { stream_id: 4, source: "test".into(), ticks_per_ns: tickbus::time::ticks_per_ns() };
    let mut w = JournalWriter::open(&env.journal, meta, JournalOptions::default()).unwrap();
    let t = w.now();
    let mut buf = [0u8; 64];
    for seq in (0..50).chain(55..100) {
        if seq == 55 {
            w.append_gap(50, 5, t + 50).unwrap();
        }
        fill(seq, &mut buf);
        w.append(seq, seq, t + seq, &buf).unwrap();
    }
    w.close().unwrap();
    let j = env.journal.to_str().unwrap().to_owned();
    let replay = env
        .cmd(&["replay", &j, "--dest", "shm:bydest?reliable&slots=256", "--max", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut o = tickbus::stream::OpenOptions::default();
    o.shm = env.opts.clone();
    o.wait = Duration::from_secs(30);
    let c = tickbus::stream::Channel::parse("shm:bydest?reliable").unwrap();
    let mut s = tickbus::stream::open_subscriber(&c, &o).unwrap();
    let mut got: Vec<Vec<u8>> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < 96 {
        use tickbus::stream::Subscribe;
        match s.try_recv().unwrap() {
            Some(Recv::Message(m)) => {
                assert_eq!(m.position, got.len() as u64, "in order");
                got.push(m.payload.to_vec());
            }
            Some(Recv::Gap(g)) => panic!("a reliable replay gapped: {g:?}"),
            None => assert!(Instant::now() < deadline, "the replay stalled at {}", got.len()),
        }
    }
    let out = replay.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((summary["published"].as_u64(), summary["gap_records"].as_u64()), (Some(95), Some(1)), "{summary}");
    assert_eq!(summary["ring"].as_str(), Some("shm:bydest?reliable&slots=256"));
    for (k, seq) in (0..50).enumerate() {
        assert!(intact(seq, &got[k]), "message {seq}");
    }
    let g = FeedGap::parse(&got[50]).expect("the hole, as a FeedGap in its place");
    assert_eq!((g.first_sequence, g.count), (50, 5));
    for (k, seq) in (55..100).enumerate() {
        assert!(intact(seq, &got[51 + k]), "message {seq}");
    }
}
