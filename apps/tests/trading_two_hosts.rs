//! The trading pipeline across two hosts: the rig's two-guest mode (two kernels joined by a link,
//! rxe_eth on each end). Guest 0 runs `tickbus exchange` (market data by ud-mcast, the
//! gateway on rdma-rc, each stream a channel URI); guest 1 runs `tickbus trader` with the same URIs and sends its summary
//! back over a coordination connection; guest 0 checks the counts across both. Functional only:
//! two guests share two cores under TCG, so no latency is judged (and the two kernels' TSCs are
//! not comparable, so hops are not either). Run as `tools/rig/rig run --guests 2 -- <binary>`;
//! outside two guests the test reports ignored (a failure with TICKBUS_REQUIRE_RDMA=1).
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Failed, Trial};

mod common;

const DEVICE: &str = "rxe_eth";
const COORD: u16 = 47300;

fn addr(var: &str, port: u16) -> Result<String, Failed> {
    let ip: Ipv4Addr = std::env::var(var)?.parse()?;
    Ok(SocketAddr::from((ip, port)).to_string())
}

/// The addresses: the exchange's (guest 0) and the trader's (guest 1) own, seen from `me`.
fn net(me: u8) -> Result<Vec<String>, Failed> {
    let (exchange, trader) =
        if me == 0 { ("RIG_GUEST_ADDR", "RIG_PEER_ADDR") } else { ("RIG_PEER_ADDR", "RIG_GUEST_ADDR") };
    Ok(["--device", DEVICE, "--token", "trading-two-hosts", "--wait-secs", "180", "--json"]
        .iter()
        .map(|s| s.to_string())
        .chain(["--md".into(), format!("ud-mcast://239.77.53.1/1?recovery={}", addr(exchange, 47301)?)])
        .chain(["--orders".into(), format!("rdma-rc://{}/2", addr(trader, 47302)?)])
        .chain(["--execs".into(), format!("rdma-rc://{}/3", addr(exchange, 47303)?)])
        .collect())
}

fn main() {
    let guest = std::env::var("RIG_GUEST").ok();
    if guest.as_deref() == Some("1") {
        std::process::exit(match trader_side() {
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
        eprintln!("trading_two_hosts: needs the rig's two guests (tools/rig/rig run --guests 2): test ignored");
    }
    assert!(two || skip, "TICKBUS_REQUIRE_RDMA is set but this is not guest 0 of two");
    let tests = vec![Trial::test("the_pipeline_across_two_hosts_counts_exactly", exchange_side)];
    libtest_mimic::run(&args, tests.into_iter().map(|t| t.with_ignored_flag(skip)).collect()).exit();
}

/// Guest 1: the trader, then its summary to guest 0 (or why it failed).
fn trader_side() -> Result<(), Failed> {
    let peer: Ipv4Addr = std::env::var("RIG_PEER_ADDR")?.parse()?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut coord = loop {
        match TcpStream::connect((peer, COORD)) {
            Ok(s) => break s,
            Err(e) if Instant::now() >= deadline => return Err(format!("guest 0 never listened: {e}").into()),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let mut args = vec!["trader".to_string(), "--md-quiet-secs".into(), "5".into(), "--drain-secs".into(), "60".into()];
    args.extend(net(1)?);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let line = match common::finish(common::spawn(&args), "trader") {
        Ok(v) => v.to_string(),
        Err(e) => format!("ERR {}", e.replace('\n', " ")),
    };
    writeln!(coord, "{line}")?;
    Ok(())
}

/// Guest 0: the exchange, the trader's summary from guest 1, and the counts across both.
fn exchange_side() -> Result<(), Failed> {
    let me: Ipv4Addr = std::env::var("RIG_GUEST_ADDR")?.parse()?;
    let listener = TcpListener::bind((me, COORD))?;
    let dir = std::env::temp_dir().join(format!("trading-two-hosts-{}", std::process::id()));
    let day = common::day(&dir, 2000);
    let mut args: Vec<String> =
        ["exchange", "--itch", day.to_str().ok_or("path")?, "--rate", "2000", "--drain-secs", "90"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    args.extend(net(0)?);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let exchange = common::spawn(&args);
    // Guest 1's summary (or why its trader failed), bounded in time.
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + Duration::from_secs(300);
    let coord = loop {
        match listener.accept() {
            Ok((s, _)) => break Some(s),
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(_) => break None,
        }
    };
    let mut line = String::new();
    let read = match coord {
        None => Err("guest 1 never connected within 300 s".to_string()),
        Some(coord) => coord
            .set_nonblocking(false)
            .and_then(|_| coord.set_read_timeout(Some(Duration::from_secs(600))))
            .and_then(|_| BufReader::new(coord).read_line(&mut line))
            .map_err(|e| format!("reading guest 1's summary: {e}")),
    };
    let tr = match line.strip_prefix("ERR ") {
        _ if read.is_err() => Err(read.err().unwrap_or_default()),
        _ if line.is_empty() => Err("guest 1 closed the connection without a summary (its side failed)".to_string()),
        Some(e) => Err(format!("guest 1's trader: {e}")),
        None => {
            serde_json::from_str::<serde_json::Value>(line.trim()).map_err(|e| format!("guest 1 said {line:?}: {e}"))
        }
    };
    if tr.is_err() {
        common::kill(&exchange);
    }
    let (ex, tr) = common::both(common::finish(exchange, "exchange"), tr)?;
    let (ticks, orders, recovered) = common::check_counts(&ex, &tr, false)?;
    eprintln!("rdma pipeline, two hosts: {ticks} ticks ({recovered} recovered), {orders} orders, each answered once");
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}
