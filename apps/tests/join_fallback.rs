//! A late joiner offered a snapshot whose maker had lost messages (issue 26): it must not build
//! on that book, and need not halt either. Real processes on shm: `tickbus exchange` replays a
//! day onto a small lossy ring; recorder 1 journals it whole; recorder 2 is stopped long enough
//! to be lapped, so its journal has a hole, and `tickbus snapshot` following that journal
//! publishes snapshots that say what they lost. Trader B joins after the hole with
//! `--join journal1 --snapshots` on those snapshots: it refuses the lossy one, reads the whole
//! journal from the day's start instead, cuts over to the live ring, holds the book built
//! offline from the whole file and trades.
//!
//! Its own test binary: run alone, not beside another test's busy processes.
use std::time::{Duration, Instant};

mod common;

use common::procs::{finish, n, sig, Env};

/// 2,500 ITCH messages a second (about 4,000 published) for 12 s: slow enough that B, starting
/// at half the day in a debug build beside six busy processes, reads the journal faster than
/// the day goes on, and long enough that B is up before the day ends (a 6 s day at 5,000 ended
/// before B, started at 3.6 s, had loaded a snapshot on a slow VM phase; a 12 s one at 5,000
/// left B reading the journal at the day's end).
const RATE: u64 = 2_500;
const MESSAGES: u64 = 30_000;

#[test]
fn a_joiner_refuses_a_lossy_snapshot_and_rebuilds_from_the_whole_journal() {
    let mut env = Env::new("fallback");
    let day = env.path("day.itch");
    let messages = MESSAGES.to_string();
    let gen = ["itch", "generate", "--seed", "13", "--stocks", "8", "--messages", &messages, "--itch", &day];
    assert!(env.cmd(&gen).output().unwrap().status.success());
    let want = common::offline_digest(std::path::Path::new(&day));
    let (rate, span) = (RATE.to_string(), Duration::from_secs_f64(MESSAGES as f64 / RATE as f64));
    let exchange = env.spawn(&[
        "exchange",
        "--itch",
        &day,
        "--rate",
        &rate,
        "--md",
        "md",
        "--md-slots",
        "4096",
        "--orders",
        "orders0",
        "--execs",
        "execs0",
        "--json",
    ]);
    // (Journal 1 is the one `trader_with` joins through: "journal".)
    let (whole, holed) = (env.path("journal"), env.path("journal2"));
    let rec1 = env.spawn(&["record", "--ring", "md", "--journal", &whole, "--json"]);
    let rec2 = env.spawn(&["record", "--ring", "md", "--journal", &holed, "--json"]);
    for k in [1, 2] {
        let said = env.tmp.join(format!("{k}.err"));
        let deadline = Instant::now() + Duration::from_secs(60);
        while !std::fs::read_to_string(&said).unwrap_or_default().contains("recording") {
            assert!(Instant::now() < deadline, "recorder {k} did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let snapshots =
        env.spawn(&["snapshot", &holed, "--dest", "shm:snap", "--every-secs", "0.2", "--idle-end-secs", "3", "--json"]);
    let a = env.trader(0, false);
    // The day starts once A is in: the exchange says so (child 0).
    let start = env.said(0, "replaying", 60);
    let sleep_until = |f: f64| std::thread::sleep((start + span.mul_f64(f)).saturating_duration_since(Instant::now()));
    sleep_until(0.3);
    // 4,096 slots at about 4,000 messages a second: lapped after about a second, so 2.5 s
    // stopped laps it even where the venue sustains only two thirds of its rate. (On 1,024
    // slots, a quarter second, recorder 1 was lapped too on a slow phase of this VM, on
    // 2026-12-07: it missed 3,322 messages.)
    sig(&rec2, libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(2500));
    sig(&rec2, libc::SIGCONT);
    sleep_until(0.5);
    let gw_b = env.gateway(1);
    let b = env.trader_with(1, true, &["--snapshots", "shm:snap"]);

    let exchange = finish(exchange, "exchange");
    let published = n(&exchange, &["md", "published"]);
    let a = finish(a, "trader A");
    let b = finish(b, "trader B");
    sig(&gw_b, libc::SIGTERM);
    let _ = gw_b.wait_with_output();
    let snap = finish(snapshots, "snapshot");
    for r in [&rec1, &rec2] {
        sig(r, libc::SIGTERM);
    }
    let (rec1, rec2) = (finish(rec1, "recorder 1"), finish(rec2, "recorder 2"));
    assert_eq!((n(&rec1, &["messages"]), n(&rec1, &["gaps"])), (published, 0), "journal 1 is whole: {rec1}");
    assert!(n(&rec2, &["gaps"]) > 0, "recorder 2 was lapped (stopped 2.5 s on a one-second ring): {rec2}");
    assert!(n(&snap, &["lost"]) > 0, "the snapshots from journal 2 say what they lost: {snap}");
    assert_eq!(a["book_digest"].as_str(), Some(want.as_str()), "trader A: {a}");

    let j = &b["join"];
    eprintln!("trader B: {} ticks, {} orders, join {j}", b["counts"]["ticks"], b["counts"]["orders"]);
    assert!(n(j, &["refused_snapshot", "lost"]) > 0, "B was offered a lossy snapshot and refused it: {j}");
    assert!(j["snapshot"].is_null() && n(j, &["from"]) == 0, "B started from the day's start: {j}");
    assert_eq!(b["book_digest"].as_str(), Some(want.as_str()), "trader B's book is not the day's: {b}");
    assert_eq!((n(&b, &["counts", "ticks"]), n(&b, &["counts", "md_missed"])), (published, 0), "{b}");
    assert!(n(j, &["from_journal"]) > 0 && n(j, &["cut_over"]) < published, "B went live through journal 1: {j}");
    assert!(b["halted"].is_null() && n(&b, &["counts", "orders"]) > 0, "B trades: {b}");
}
