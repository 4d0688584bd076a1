//! Late join and restart over shm, as real processes: `tickbus exchange` replays a generated
//! ITCH day onto a lossy market-data ring, `tickbus record` journals it, and four traders hold
//! books: A from the open, B joining (`--join`) a quarter of the way in, C at three fifths, and
//! D from the open, `kill -9`ed at 40% of the day and restarted with `--join`. At the end every one of them
//! holds the book built offline from the whole file, as does E, which joins through the journal
//! served on a reliable ring by `tickbus journal serve` (as another host would over rdma-rc),
//! and F, which joins halfway from the next whole-book snapshot (`tickbus snapshot`,
//! following the journal, publishes one a second) and the journal only after it.
//! Books are compared by digest (every instrument's levels and every order in queue order); B,
//! C, D and E cut over to the live stream (they were not just reading a finished journal), and
//! none lost or repeated a message.
use std::time::{Duration, Instant};

mod common;

use common::procs::{finish, n, sig, Env};

/// The two tests run one at a time: each keeps the two cores busy with its own processes (run
/// together on a slow VM phase, the lapped trader's venue fell behind and its last loss was not
/// recovered by the day's end).
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// ITCH messages per second: slow enough that a late joiner, sharing two cores with six busy
/// processes in a debug build, reads the journal faster than the day goes on. (At 10,000 the
/// joiner at 0.6 of the day, C or E, read the whole day from the journal in three of four
/// local CI runs on a slow afternoon, never meeting the live stream; at 4,000 they cut over at
/// about 189,000 of 252,000, until a slower VM phase where C read the whole day at 4,000 too:
/// 2,000 for the same 37.5 s day.)
const RATE: u64 = 2_000;
const MESSAGES: u64 = 75_000;

#[test]
fn traders_joining_late_or_restarted_hold_the_book_of_the_whole_day() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let mut env = Env::new("join");
    let day = env.path("day.itch");
    let messages = MESSAGES.to_string();
    let gen = ["itch", "generate", "--seed", "11", "--stocks", "8", "--messages", &messages, "--itch", &day];
    assert!(env.cmd(&gen).output().unwrap().status.success());
    let want = common::offline_digest(std::path::Path::new(&day));
    let rate = RATE.to_string();
    let span = Duration::from_secs_f64(MESSAGES as f64 / RATE as f64);

    // The venue (with the gateway of trader A), the recorder, A and D from the open.
    let exchange = env.spawn(&[
        "exchange", "--itch", &day, "--rate", &rate, "--md", "md", "--orders", "orders0", "--execs", "execs0", "--json",
    ]);
    let journal = env.path("journal");
    // Parks when the ring is empty (--idle park): a spinning recorder takes time slices from
    // the venue and the traders on a machine with fewer cores than busy loops.
    let recorder = env.spawn(&["record", "--ring", "md", "--journal", &journal, "--idle", "park", "--json"]);
    // The recorder attached before trader A: the exchange replays once A is there.
    let said = env.tmp.join(format!("{}.err", env.children.len() - 1));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&said).unwrap_or_default().contains("recording") {
        assert!(Instant::now() < deadline, "the recorder did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Snapshots of the book every second, from the journal, on a lossy ring of their own.
    let snapshots =
        env.spawn(&["snapshot", &journal, "--dest", "shm:snap", "--every-secs", "1", "--idle-end-secs", "3", "--json"]);
    let a = env.trader(0, false);
    let gw_d = env.gateway(3);
    let d = env.trader(3, false);
    let start = Instant::now();
    let at = |f: f64| start + span.mul_f64(f);
    let sleep_until = |t: Instant| std::thread::sleep(t.saturating_duration_since(Instant::now()));

    sleep_until(at(0.25));
    let gw_b = env.gateway(1);
    let b = env.trader(1, true);
    sleep_until(at(0.4));
    sig(&d, libc::SIGKILL);
    let _ = d.wait_with_output();
    let d2 = env.trader(3, true);
    sleep_until(at(0.5));
    let gw_f = env.gateway(5);
    let f = env.trader_with(5, true, &["--snapshots", "shm:snap"]);
    sleep_until(at(0.6));
    let gw_c = env.gateway(2);
    let c = env.trader(2, true);
    // E joins through the journal served on a reliable ring (as another host would over
    // rdma-rc): `journal serve` follows the journal and ends once it has been quiet.
    let server =
        env.spawn(&["journal", "serve", &journal, "--dest", "shm:served-md", "--idle-end-secs", "3", "--json"]);
    let gw_e = env.gateway(4);
    let e = {
        let args =
            ["trader", "--md", "md", "--orders", "orders4", "--execs", "execs4", "--join", "shm:served-md", "--json"];
        env.spawn(&args)
    };

    let exchange = finish(exchange, "exchange");
    let published = n(&exchange, &["md", "published"]);
    let results = [
        ("A", finish(a, "trader A")),
        ("B", finish(b, "trader B")),
        ("C", finish(c, "trader C")),
        ("E served", finish(e, "trader E")),
    ];
    let d2 = finish(d2, "trader D (restarted)");
    let f = finish(f, "trader F (from a snapshot)");
    let snap = finish(snapshots, "snapshot");
    // Once live, E reads the served stream only to fill a lap: the server, ahead of it, waits
    // on the full stream until told to stop.
    sig(&server, libc::SIGTERM);
    let served = finish(server, "journal serve");
    for g in [gw_b, gw_c, gw_d, gw_e, gw_f] {
        sig(&g, libc::SIGTERM);
        let _ = g.wait_with_output();
    }
    sig(&recorder, libc::SIGTERM);
    let rec = finish(recorder, "recorder");
    assert_eq!(n(&rec, &["messages"]), published, "the journal holds the whole day: {rec}");
    assert_eq!(n(&rec, &["gaps"]), 0, "{rec}");
    assert!(n(&served, &["messages"]) > 0, "{served}");

    // F: the book of the whole day, from a snapshot taken well into it and the journal after.
    eprintln!("trader F: {} ticks, join {}; snapshots: {snap}", f["counts"]["ticks"], f["join"]);
    assert_eq!(f["book_digest"].as_str(), Some(want.as_str()), "trader F's book is not the day's: {f}");
    let as_of = n(&f, &["join", "snapshot", "as_of"]);
    // (The day starts once trader A is in: the moments above are later in the day than named.)
    assert!(as_of > published / 4 && as_of < published, "F started from a snapshot well into the day: {f}");
    assert_eq!(n(&f, &["join", "snapshot", "lost"]), 0, "{f}");
    assert_eq!(n(&f, &["counts", "ticks"]), published - as_of, "F read the day from the snapshot on, once: {f}");
    assert_eq!((n(&f, &["counts", "md_missed"]), n(&f, &["join", "unfilled"])), (0, 0), "{f}");
    assert!(n(&f, &["join", "cut_over"]) < published && n(&f, &["counts", "orders"]) > 0, "F went live: {f}");
    assert!(n(&snap, &["snapshots"]) >= 5 && n(&snap, &["lost"]) + n(&snap, &["book_errors"]) == 0, "{snap}");
    assert_eq!(n(&snap, &["position"]), published, "{snap}");

    let results: Vec<_> = results.into_iter().chain([("D restarted", d2)]).collect();
    for (who, t) in &results {
        eprintln!("trader {who}: {} ticks, join {}", t["counts"]["ticks"], t["join"]);
    }
    for (who, t) in &results {
        assert_eq!(t["book_digest"].as_str(), Some(want.as_str()), "trader {who}'s book is not the day's: {t}");
        assert_eq!(n(t, &["counts", "ticks"]), published, "trader {who} saw every message once: {t}");
        assert_eq!(n(t, &["counts", "md_missed"]), 0, "{who}: {t}");
        assert!(t["halted"].is_null(), "{who}: {t}");
        if *who == "A" {
            assert!(t["join"].is_null());
            continue;
        }
        let j = &t["join"];
        assert!(n(j, &["from_journal"]) > 0, "{who} caught up from the journal: {j}");
        let cut = n(j, &["cut_over"]);
        assert!(cut > 0 && cut < published, "{who} cut over to the live stream mid-day: {j}");
        assert_eq!(n(j, &["unfilled"]) + n(j, &["journal_gaps"]), 0, "{who}: {j}");
        assert!(n(t, &["counts", "orders"]) > 0, "{who} traded once live: {t}");
    }
}

/// Recovery with no recorder: `tickbus exchange --snapshots` makes whole-book snapshots from
/// what it publishes; trader R, on a market-data ring of 1,024 slots, is stopped (SIGSTOP) long
/// enough to be lapped, so it loses messages nothing can fill. It stops trading, holds the
/// market data, takes the venue's next snapshot, and trades again: at the end it holds the book
/// of the whole day, as trader A (never stopped) does, and is not halted.
#[test]
fn a_trader_lapped_on_its_ring_recovers_from_the_venues_snapshot_and_trades_on() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    const RATE: u64 = 10_000;
    const MESSAGES: u64 = 40_000;
    let mut env = Env::new("recover");
    let day = env.path("day.itch");
    let messages = MESSAGES.to_string();
    let gen = ["itch", "generate", "--seed", "12", "--stocks", "8", "--messages", &messages, "--itch", &day];
    assert!(env.cmd(&gen).output().unwrap().status.success());
    let want = common::offline_digest(std::path::Path::new(&day));
    let rate = RATE.to_string();
    let span = Duration::from_secs_f64(MESSAGES as f64 / RATE as f64);
    let exchange = env.spawn(&[
        "exchange",
        "--itch",
        &day,
        "--rate",
        &rate,
        "--md",
        "md",
        "--md-slots",
        "1024",
        "--orders",
        "orders0",
        "--execs",
        "execs0",
        "--snapshots",
        "shm:xsnap",
        "--snapshot-every-secs",
        "0.2",
        "--json",
    ]);
    // R and its gateway attach before A: the exchange starts the day once A is there.
    let gw_r = env.gateway(1);
    let r = env.trader_with(1, false, &["--snapshots", "shm:xsnap"]);
    let said = env.tmp.join(format!("{}.err", env.children.len() - 1));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&said).unwrap_or_default().contains("ready") {
        assert!(Instant::now() < deadline, "trader R did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let a = env.trader(0, false);
    // The day starts once A is up, and the exchange says so (child 0): A's start-up took over
    // 40% of the day on a slow VM phase, and R was stopped before it had traded.
    let start = env.said(0, "replaying", 60);
    std::thread::sleep(span.mul_f64(0.4).saturating_sub(start.elapsed()));
    // 1,024 slots at 10,000 msg/s: lapped after about 0.1 s.
    sig(&r, libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(500));
    sig(&r, libc::SIGCONT);

    let exchange = finish(exchange, "exchange");
    let published = n(&exchange, &["md", "published"]);
    let a = finish(a, "trader A");
    let r = finish(r, "trader R");
    sig(&gw_r, libc::SIGTERM);
    let _ = gw_r.wait_with_output();
    eprintln!("trader R: counts {}, recovery {}", r["counts"], r["recovery"]);
    let s = &exchange["snapshots"];
    assert!(n(s, &["snapshots"]) >= 3, "the venue published snapshots: {s}");
    assert_eq!((n(s, &["tap_lost"]), n(s, &["book_errors"])), (0, 0), "{s}");
    assert_eq!(n(s, &["position"]), published, "the maker saw every message published: {s}");
    assert_eq!(a["book_digest"].as_str(), Some(want.as_str()), "trader A: {a}");
    assert_eq!(n(&a, &["counts", "md_missed"]), 0, "{a}");

    let rec = &r["recovery"];
    assert!(n(&r, &["counts", "md_missed"]) > 0, "R was lapped (stopped 0.5 s on a 0.1 s ring): {r}");
    assert!(n(rec, &["losses"]) >= 1, "{rec}");
    assert_eq!(n(rec, &["recovered"]), n(rec, &["losses"]), "every loss recovered: {rec}");
    assert_eq!(rec["recovering_at_end"].as_bool(), Some(false), "{rec}");
    assert!(r["halted"].is_null(), "trading again after the recovery: {r}");
    assert!(n(rec, &["orders_before_last"]) > 0, "R traded before its loss: {r}");
    assert!(n(&r, &["counts", "orders"]) > n(rec, &["orders_before_last"]), "orders after the recovery: {r}");
    assert_eq!(r["book_digest"].as_str(), Some(want.as_str()), "trader R holds the day's book after recovering: {r}");
}
