//! A `FeedGap` no longer ends a trader's day (issue 26): real processes on loopback multicast
//! and shm. `mold-server` drops every 100th packet on both lines with no retransmission server,
//! so the feed loses runs of messages for good and publishes them as gaps; it serves its book on
//! TCP (`--glimpse`). `tickbus feed --snapshots shm:snap --glimpse` repairs its book from the
//! venue's after each gap and publishes a snapshot at the repair's position; a trader on the
//! market data with `--snapshots shm:snap` stops at each gap, loads that snapshot, applies what
//! it held from there, and trades on. At the end the feed's and the trader's books are the
//! book built offline from the whole file, and the trader traded after its last recovery.
//!
//! Its own test binary: run alone, not beside another test's busy processes.
mod common;

use common::procs::{finish, n, Env};

/// About 6 s of day: gaps every 100 packets (about 0.5 s) from the first half-second on.
const MESSAGES: u64 = 40_000;
const RATE: u64 = 8_000;

#[test]
fn the_feed_repairs_its_book_after_each_gap_and_the_trader_recovers_and_trades_on() {
    let mut env = Env::new("feedgap");
    let day = env.path("day.itch");
    let messages = MESSAGES.to_string();
    let gen = ["itch", "generate", "--seed", "21", "--stocks", "8", "--messages", &messages, "--itch", &day];
    assert!(env.cmd(&gen).output().unwrap().status.success());
    let want = common::offline_digest(std::path::Path::new(&day));
    let lines = ["--line-a", "239.77.62.1:38101", "--line-b", "239.77.62.2:38102", "--retransmit", "127.0.0.1:38103"];
    let glimpse = "127.0.0.1:38104";
    let mut feed_args = vec!["feed", "--ring", "md", "--exit-at-end", "--give-up-ms", "100", "--confirm-ms", "100"];
    feed_args.extend(["--idle", "yield"]);
    feed_args.extend(["--snapshots", "shm:snap", "--snapshot-every-secs", "0.5", "--glimpse", glimpse, "--json"]);
    feed_args.extend(lines);
    let feed = env.spawn(&feed_args);
    env.said(0, "feed: UDP on", 60);
    let gateway = env.spawn(&[
        "gateway",
        "--md",
        "md",
        "--orders",
        "orders0",
        "--execs",
        "execs0",
        "--exit-with-trader",
        "--idle",
        "yield",
        "--json",
    ]);
    let trader = env.trader_with(0, false, &["--snapshots", "shm:snap", "--idle", "yield"]);
    env.said(1, "ready", 60);
    env.said(2, "ready", 60);
    let rate = RATE.to_string();
    let mut server_args = vec!["mold-server", &day, "--rate", &rate, "--drop-a", "100", "--drop-b", "100"];
    server_args.extend(["--no-retransmit", "--glimpse", glimpse, "--linger-ms", "1500", "--json"]);
    server_args.extend(lines);
    let server = env.spawn(&server_args);
    let server = finish(server, "mold-server");
    let feed = finish(feed, "feed");
    let trader = finish(trader, "trader");
    let _ = finish(gateway, "gateway");

    let lost_on_both = n(&server, &["dropped_both_messages"]);
    let gaps = n(&feed, &["gaps_published"]);
    assert!(lost_on_both > 0 && gaps >= 2, "both lines lost runs of messages: {server} {feed}");
    assert_eq!(n(&feed, &["lost"]), lost_on_both, "{feed}");
    let s = &feed["snapshots"];
    let r = &s["repair"];
    eprintln!("feed: {gaps} gaps; snapshots {s}");
    assert!(n(&server, &["glimpse", "served"]) >= 1, "{server}");
    assert!(n(r, &["repairs"]) >= 1 && n(r, &["loop", "repaired"]) == n(r, &["repairs"]), "{r}");
    assert_eq!(n(s, &["tap_lost"]), 0, "{s}");
    assert_eq!(feed["book_digest"].as_str(), Some(want.as_str()), "the feed's book is the venue's: {feed}");

    let rec = &trader["recovery"];
    eprintln!("trader: {} ticks, {} orders, recovery {rec}", trader["counts"]["ticks"], trader["counts"]["orders"]);
    assert_eq!(n(rec, &["losses"]), n(rec, &["recovered"]), "every loss recovered: {rec}");
    assert!(n(rec, &["losses"]) >= 1 && rec["recovering_at_end"] == false, "{rec}");
    assert_eq!(trader["book_digest"].as_str(), Some(want.as_str()), "the trader's book is the day's: {trader}");
    let orders = n(&trader, &["counts", "orders"]);
    assert!(trader["halted"].is_null() && orders > n(rec, &["orders_before_first"]), "it traded after: {trader}");
}
