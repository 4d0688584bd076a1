//! Late join across two hosts, the journal served from the recorder's host (issue 26): the
//! rig's two guests, joined by a link (rxe_eth on each end). Guest 0 is the venue's host:
//! `tickbus exchange` publishes market data on a ud-mcast group over the link, trader A trades
//! from the open (the group read on the same device, its orders on shm rings), `tickbus record`
//! journals the group, and `tickbus journal serve` serves that journal on rdma-rc over the link.
//! Guest 1 is another host: once the day is under way, trader B starts there with its own
//! gateway, joins the live group late and catches up through the served journal, as Aeron
//! Archive serves a replay to a remote subscriber. At the end A and B hold the book built
//! offline from the whole day (by digest), B saw every message once, read the start of the day
//! from the remote journal and cut over to the live group before the day ended.
//!
//! Functional only: two guests share two cores under TCG, so nothing is timed. Run as
//! `tools/rig/rig run --guests 2 -- <binary>`; outside two guests the test reports ignored (a
//! failure with TICKBUS_REQUIRE_RDMA=1).
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Failed, Trial};

mod common;

const DEVICE: &str = "rxe_eth";
const TOKEN: &str = "late-join-two-hosts";
const COORD: u16 = 47310;
/// The market data's group (its recovery service on guest 0).
const GROUP: &str = "239.77.54.1";
/// Ring files on 4 KiB pages: the guest's few hugepages go to the RDMA streams.
const SMALL_PAGES: [(&str, &str); 1] = [("TICKBUS_HUGEPAGE_DIR", "/nonexistent-hugepages")];

fn addr(var: &str, port: u16) -> Result<String, Failed> {
    let ip: Ipv4Addr = std::env::var(var)?.parse()?;
    Ok(SocketAddr::from((ip, port)).to_string())
}

/// Guest 0's address seen from guest `me`.
fn venue(me: u8) -> &'static str {
    if me == 0 {
        "RIG_GUEST_ADDR"
    } else {
        "RIG_PEER_ADDR"
    }
}

/// The market data's URI, seen from guest `me`.
fn md(me: u8) -> Result<String, Failed> {
    Ok(format!("ud-mcast://{GROUP}/1?recovery={}", addr(venue(me), 47311)?))
}

/// The journal served by guest 0, seen from guest `me`.
fn served(me: u8) -> Result<String, Failed> {
    Ok(format!("rdma-rc://{}/9", addr(venue(me), 47314)?))
}

fn main() {
    let guest = std::env::var("RIG_GUEST").ok();
    if guest.as_deref() == Some("1") {
        std::process::exit(match joiner_side() {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("guest 1: {e:?}");
                1
            }
        });
    }
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    let two = guest.as_deref() == Some("0") && std::env::var("RIG_GUESTS").as_deref() == Ok("2");
    let skip = !two && std::env::var_os("TICKBUS_REQUIRE_RDMA").is_none();
    if skip {
        eprintln!("late_join_two_hosts: needs the rig's two guests (tools/rig/rig run --guests 2): test ignored");
    }
    assert!(two || skip, "TICKBUS_REQUIRE_RDMA is set but this is not guest 0 of two");
    let tests = vec![Trial::test(
        "a_trader_on_another_host_joins_late_through_the_served_journal_and_holds_the_days_book",
        venue_side,
    )];
    libtest_mimic::run(&args, tests.into_iter().map(|t| t.with_ignored_flag(skip)).collect()).exit();
}

/// Guest 1: waits for guest 0's word that the day is under way, then runs trader B (joining
/// through the served journal) and its gateway, and sends B's summary back (or why it failed).
fn joiner_side() -> Result<(), Failed> {
    let peer: Ipv4Addr = std::env::var("RIG_PEER_ADDR")?.parse()?;
    let deadline = Instant::now() + Duration::from_secs(300);
    let coord = loop {
        match TcpStream::connect((peer, COORD)) {
            Ok(s) => break s,
            Err(e) if Instant::now() >= deadline => return Err(format!("guest 0 never listened: {e}").into()),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    coord.set_read_timeout(Some(Duration::from_secs(600)))?;
    let mut word = String::new();
    BufReader::new(coord.try_clone()?).read_line(&mut word)?;
    if word.trim() != "join" {
        return Err(format!("guest 0 said {word:?}, not join").into());
    }
    let (md, served) = (md(1)?, served(1)?);
    let net = ["--md", md.as_str(), "--orders", "lj2-orders", "--execs", "lj2-execs"];
    let common = ["--device", DEVICE, "--token", TOKEN, "--wait-secs", "180", "--json"];
    let mut g_args = vec!["gateway", "--exit-with-trader"];
    g_args.extend(net);
    g_args.extend(common);
    let gateway = common::spawn_env(&g_args, &SMALL_PAGES);
    let mut b_args = vec!["trader", "--md-quiet-secs", "5", "--drain-secs", "30", "--join", served.as_str()];
    b_args.extend(net);
    b_args.extend(common);
    let b = common::spawn_env(&b_args, &SMALL_PAGES);
    let line = match common::finish(b, "trader B") {
        Ok(v) => v.to_string(),
        Err(e) => format!("ERR {}", e.replace('\n', " ")),
    };
    if let Err(e) = common::finish(gateway, "gateway B") {
        eprintln!("{e}");
    }
    let mut coord = coord;
    writeln!(coord, "{line}")?;
    Ok(())
}

/// Guest 0: the venue, trader A, the recorder and the journal's server; trader B's summary from
/// guest 1; every book checked against the day's.
fn venue_side() -> Result<(), Failed> {
    let me: Ipv4Addr = std::env::var("RIG_GUEST_ADDR")?.parse()?;
    let listener = TcpListener::bind((me, COORD))?;
    let dir = std::env::temp_dir().join(format!("late-join-two-hosts-{}", std::process::id()));
    // As in late_join_rdma: long enough for B to start on the other guest and still meet the
    // live group. 8,000 ITCH messages (`--rate` paces ITCH messages) are about 13,600 published:
    // 40 s at 200 a second, about 70 s where the guest sustains 113. B starts once the journal
    // holds 2,000 and cut over at 3,000-3,400 published in the last six local CI runs (a
    // 12,000-message day): a margin of more than 10,000 published messages, and about 35 s less
    // of CI than the longer day.
    let day = common::day(&dir, 8_000);
    let want = common::offline_digest(&day);
    let journal = dir.join("journal");
    let journal = journal.to_str().ok_or("path")?;
    let md = md(0)?;
    let net = ["--md", md.as_str(), "--orders", "lj2-orders-a", "--execs", "lj2-execs-a"];
    let common = ["--device", DEVICE, "--token", TOKEN, "--wait-secs", "180", "--json"];

    // The recorder joins the group first; the exchange starts once trader A is in.
    let r_args =
        ["record", "--from", md.as_str(), "--journal", journal, "--token", TOKEN, "--wait-secs", "180", "--json"];
    let recorder = common::spawn_env(&r_args, &[("TICKBUS_RDMA_DEVICE", DEVICE)]);
    std::thread::sleep(Duration::from_secs(2));
    let itch = day.to_str().ok_or("path")?;
    let mut ex_args = vec!["exchange", "--itch", itch, "--rate", "200", "--drain-secs", "60"];
    ex_args.extend(net);
    ex_args.extend(common);
    let exchange = common::spawn_env(&ex_args, &SMALL_PAGES);
    let mut a_args = vec!["trader", "--md-quiet-secs", "5", "--drain-secs", "30"];
    a_args.extend(net);
    a_args.extend(common);
    let a = common::spawn_env(&a_args, &SMALL_PAGES);

    // Once the journal holds the start of the day: its server, then B on the other host.
    let t0 = Instant::now();
    let under_way = wait_for_journal(journal, 2_000, &exchange);
    let served = served(0)?;
    // It waits for B to connect: B starts after the word below, and under TCG a trader's
    // start-up takes tens of seconds.
    let s_args = ["journal", "serve", journal, "--dest", served.as_str(), "--device", DEVICE, "--token", TOKEN];
    let server = common::spawn(&[&s_args[..], &["--wait-secs", "400", "--json"]].concat());
    let b = match under_way {
        Ok(()) => {
            eprintln!("the day is under way (after {:.1?}): trader B joins on guest 1", t0.elapsed());
            summary_from_guest_1(&listener)
        }
        Err(e) => Err(e),
    };
    let ta = common::finish(a, "trader A");
    if ta.is_err() || b.is_err() {
        common::kill(&exchange);
    }
    let ex = common::finish(exchange, "exchange");
    // Ahead of B, waiting on the full stream: told to stop.
    common::kill(&server);
    let served = common::finish(server, "journal serve");
    common::kill(&recorder);
    let rec = common::finish(recorder, "recorder");
    let (ta, tb) = common::both(ta, b)?;
    let (ex, (rec, served)) = common::both(ex, common::both(rec, served))?;
    eprintln!("recorder: {rec}\njournal serve: {served}\ntrader B joined through the served journal: {}", tb["join"]);
    let published = ex["md"]["published"].as_u64().ok_or("no md.published")?;
    if rec["messages"].as_u64() != Some(published) || rec["gaps"].as_u64() != Some(0) {
        return Err(format!("the journal does not hold the whole day ({published} published): {rec}").into());
    }
    for (who, t) in [("A", &ta), ("B", &tb)] {
        common::holds_the_day(who, t, &want, published)?;
    }
    common::joined_mid_day("B", &tb, published)?;
    let j = &tb["join"];
    if served["messages"].as_u64() < j["from_journal"].as_u64() {
        return Err(format!("B read more from the journal than its server sent: {served} {j}").into());
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Tells guest 1 to start trader B and reads B's summary (bounded in time).
fn summary_from_guest_1(listener: &TcpListener) -> Result<serde_json::Value, String> {
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut coord = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(_) => return Err("guest 1 never connected within 300 s".into()),
        }
    };
    let io = |e: std::io::Error| format!("talking to guest 1: {e}");
    coord.set_nonblocking(false).map_err(io)?;
    coord.set_read_timeout(Some(Duration::from_secs(600))).map_err(io)?;
    writeln!(coord, "join").map_err(io)?;
    let mut line = String::new();
    BufReader::new(coord).read_line(&mut line).map_err(io)?;
    match line.strip_prefix("ERR ") {
        _ if line.is_empty() => Err("guest 1 closed the connection without a summary (its side failed)".into()),
        Some(e) => Err(format!("guest 1's trader B: {e}")),
        None => serde_json::from_str(line.trim()).map_err(|e| format!("guest 1 said {line:?}: {e}")),
    }
}

/// Waits until the journal at `dir` holds `messages` records (the exchange is publishing and
/// the recorder keeping up), or fails after 180 s or if the exchange `ex` has exited.
fn wait_for_journal(dir: &str, messages: u64, ex: &common::Running) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let held = tickbus::journal::JournalReader::open(std::path::Path::new(dir))
            .ok()
            .and_then(|r| r.cursor().for_each(|_| ()).ok())
            .unwrap_or(0);
        if held >= messages {
            return Ok(());
        }
        if ex.exited() {
            return Err(format!("the exchange exited before the journal held {messages} messages ({held})"));
        }
        if Instant::now() > deadline {
            return Err(format!("the journal held {held} of {messages} messages after 180 s: is the exchange publishing and the recorder recording?"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
