//! Wire-to-trade across real processes: the lab's sender, in a network namespace the lab makes
//! (and removes), sends MoldUDP64 on line A's group out of a veth, open loop, each datagram
//! stamped with its send TSC (`tickbus::feed::wire_stamp`); on the other end `tickbus feed
//! --wire-stamps` takes it (`--ingest xdp` or `udp`) and publishes market data on a ring,
//! stamped with that send TSC as its ingress; `tickbus trader` reads it and sends traced orders;
//! `tickbus gateway` reads them and answers. The feed times its own two hops, the gateway every
//! order's, the trader every tick's; the market-data ring hop is the difference.
//!
//! Layout: with four cores or more each of sender, feed, trader and gateway owns one and busy
//! polls. With fewer, the sender and the gateway share the first core, and with two the feed
//! and the trader share the second, each app yielding its core when it finds no work
//! (`--idle yield`): the report says so beside the figures, which then hold that sharing.
use std::error::Error;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tickbus::shm::{self, ShmOptions};
use tickbus::time::TscScale;
use tickbus::StartAt;
use tickbus_apps::summary::{GatewaySummary, HopStats, TraderSummary};
use tickbus_testkit::netns::VethPair;

use super::cleanup::Rings;
use super::harness::pin;
use super::pipeline::{to_hop, Kill};
use super::wire::{packets, send_open_loop, SESSION};
use crate::model::pipeline::Hop;
use crate::model::wire_trade::{ring_hop, WireTrade};

const PORT: u16 = 31800;

/// What to run.
pub struct Spec<'a> {
    pub tickbus: &'a Path,
    pub rates: &'a [u64],
    /// Seconds of datagrams per run.
    pub seconds: f64,
    pub cores: &'a [usize],
    pub ticks_per_ns: f64,
}

/// Each rate, xdp then udp ingest; a run that failed is a note (what it said), and the rest
/// still run.
pub fn run(s: &Spec<'_>) -> Result<(Vec<WireTrade>, Vec<String>), Box<dyn Error>> {
    if s.cores.len() < 2 {
        return Err("wire-to-trade needs two cores at least (--cores)".into());
    }
    let v = VethPair::new("t").map_err(|e| format!("making the lab's veth pair (root needed): {e}"))?;
    let (mut out, mut failed) = (Vec::new(), Vec::new());
    for &rate in s.rates {
        for ingest in ["xdp", "udp"] {
            match one(s, &v, ingest, rate) {
                Ok(r) => out.push(r),
                Err(e) => failed.push(format!(
                    "no wire-to-trade run for --ingest {ingest} at {}/s: {e}",
                    crate::model::rate_name(rate)
                )),
            }
        }
    }
    Ok((out, failed))
}

/// Where each party runs: (core, `--idle`) for the feed, the trader and the gateway, the
/// sender's core and whether it shares it, and the layout in words.
struct Layout {
    feed: (usize, &'static str),
    trader: (usize, &'static str),
    gateway: (usize, &'static str),
    sender: usize,
    sender_shares: bool,
    words: String,
}

fn layout(c: &[usize]) -> Layout {
    match c.len() {
        0 | 1 => unreachable!("checked: two cores at least"),
        2 => Layout {
            feed: (c[1], "yield"),
            trader: (c[1], "yield"),
            gateway: (c[0], "yield"),
            sender: c[0],
            sender_shares: true,
            words: format!(
                "sender+gateway (core {}) | feed+trader (core {}): two cores, so each core is shared and every app yields it when idle (--idle yield); the figures hold that sharing",
                c[0], c[1]
            ),
        },
        3 => Layout {
            feed: (c[1], "spin"),
            trader: (c[2], "spin"),
            gateway: (c[0], "yield"),
            sender: c[0],
            sender_shares: true,
            words: format!(
                "sender+gateway (core {}, the gateway yielding when idle) | feed (core {}) | trader (core {})",
                c[0], c[1], c[2]
            ),
        },
        _ => Layout {
            feed: (c[1], "spin"),
            trader: (c[2], "spin"),
            gateway: (c[3], "spin"),
            sender: c[0],
            sender_shares: false,
            words: format!("sender (core {}) | feed (core {}) | trader (core {}) | gateway (core {})", c[0], c[1], c[2], c[3]),
        },
    }
}

/// One run: the three apps started, the day sent, their summaries read.
fn one(s: &Spec<'_>, v: &VethPair, ingest: &str, rate: u64) -> Result<WireTrade, Box<dyn Error>> {
    let l = layout(s.cores);
    let tag = format!("lab-wire-{}-{ingest}-{rate}", std::process::id());
    let (md, orders, execs) = (format!("{tag}-md"), format!("{tag}-orders"), format!("{tag}-execs"));
    let names = ["--md", md.as_str(), "--orders", orders.as_str(), "--execs", execs.as_str()];
    // Removes the three rings however the run ends; made before the children, so dropped after
    // them (they are killed first).
    let _rings = Rings::new(&[&md, &orders, &execs]);
    let (line_a, line_b) = (
        SocketAddrV4::new(Ipv4Addr::new(239, 77, 40, 1), PORT),
        SocketAddrV4::new(Ipv4Addr::new(239, 77, 41, 1), PORT + 1),
    );
    let packets = packets(((rate as f64 * s.seconds) as u64).max(1000));
    let n = packets.len() as u64;
    let core = |c: (usize, &'static str)| [c.0.to_string(), c.1.to_string()];
    let [fc, fi] = core(l.feed);
    let (la, lb, rt) = (line_a.to_string(), line_b.to_string(), format!("{}:33900", v.inner_ip));
    let mut feed = Command::new(s.tickbus)
        .args(["feed", "--ring", &md, "--ingest", ingest, "--iface", &v.outer, "--line-a", &la, "--line-b", &lb])
        // No retransmission server: what both lines miss is given up after 50 ms and published
        // as a gap (counted: a run that lost over 0.1% is marked backlogged and not judged).
        .args(["--retransmit", &rt, "--wait-ms", "1", "--give-up-ms", "50", "--exit-at-end", "--confirm-ms", "100"])
        .args(["--wire-stamps", "--core", &fc, "--idle", &fi, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {} feed: {e}", s.tickbus.display()))?;
    // Up once it says its lines are open (a datagram before then is lost).
    let (tx, rx) = mpsc::channel::<String>();
    let err = feed.stderr.take().expect("piped");
    let feed_err = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let mut feed = Kill(Some(feed));
    let up = Instant::now() + Duration::from_secs(30);
    loop {
        match rx.recv_timeout(up.saturating_duration_since(Instant::now())) {
            Ok(line) if line.starts_with("feed: AF_XDP on") || line.starts_with("feed: UDP on") => break,
            Ok(_) => {}
            Err(_) => {
                drop(feed);
                return Err(format!(
                    "tickbus feed --ingest {ingest} did not open its lines: {}",
                    feed_err.join().unwrap_or_default()
                )
                .into());
            }
        }
    }
    let spawn = |args: &[&str], c: (usize, &'static str)| -> Result<Kill, Box<dyn Error>> {
        let [core, idle] = core(c);
        let child = Command::new(s.tickbus)
            .args(args)
            .args(names)
            .args(["--core", &core, "--idle", &idle, "--json", "-q"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", s.tickbus.display()))?;
        Ok(Kill(Some(child)))
    };
    let gw = spawn(&["gateway", "--exit-with-trader"], l.gateway)?;
    let tr = spawn(&["trader"], l.trader)?;
    wait_for_trader(&execs, Duration::from_secs(30))?;
    let scale = TscScale { ticks_per_ns: s.ticks_per_ns };
    let (ns, inner, sender_core, shares) = (v.ns.clone(), v.inner_ip, l.sender, l.sender_shares);
    let sender = std::thread::spawn(move || -> Result<crate::model::Backlog, String> {
        VethPair::enter_ns(&ns)?;
        pin(sender_core).map_err(|e| e.to_string())?;
        let sock = socket2::Socket::from(UdpSocket::bind((inner, 0)).map_err(|e| e.to_string())?);
        sock.set_multicast_if_v4(&inner).map_err(|e| format!("sending multicast from {inner}: {e}"))?;
        let sock: UdpSocket = sock.into();
        sock.connect(line_a).map_err(|e| e.to_string())?;
        let b = send_open_loop(&sock, packets, rate, scale, shares)?;
        // The end of the session, repeated as a MoldUDP64 server does (one copy lost to a full
        // ring would leave the feed waiting): the feed ends once it has stood.
        let mut end = Vec::with_capacity(20);
        end.extend_from_slice(&SESSION);
        end.extend_from_slice(&(n + 1).to_be_bytes());
        end.extend_from_slice(&tickbus_codecs::moldudp64::END_OF_SESSION.to_be_bytes());
        for _ in 0..30 {
            sock.send(&end).map_err(|e| format!("sending the end of session: {e}"))?;
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(b)
    });
    let backlog = sender.join().map_err(|_| "the wire sender panicked")??;
    // A feed that lost datagrams gives each gap up in its own time; one that has still not ended
    // the session 20 s after the last datagram is asked to stop (it prints its summary, closes
    // the market data, and the trader and gateway end after it), and the run says so.
    let stopped = feed.stop_after(Duration::from_secs(20));
    let deadline = Instant::now() + Duration::from_secs(60);
    let f: Result<serde_json::Value, _> = feed.finish("feed", deadline);
    let said = feed_err.join().unwrap_or_default();
    let f = f.map_err(|e| format!("{e}: {said}"))?;
    let tr: TraderSummary = tr.finish("trader", deadline)?;
    let g: GatewaySummary = gw.finish("gateway", deadline)?;
    let mut run = assemble(ingest, rate, n, l.words, &f, &tr, &g, &backlog)?;
    if stopped {
        let why = "the feed had not ended the session 20 s after the last datagram (gaps still open) and was stopped";
        run.backlog = Some(match run.backlog.take() {
            Some(b) => format!("{b}; {why}"),
            None => format!("BACKLOGGED: {why}; no verdict"),
        });
    }
    Ok(run)
}

/// The run's hops and counts from the three summaries.
#[allow(clippy::too_many_arguments)]
fn assemble(
    ingest: &str,
    rate: u64,
    sent: u64,
    layout: String,
    f: &serde_json::Value,
    tr: &TraderSummary,
    g: &GatewaySummary,
    backlog: &crate::model::Backlog,
) -> Result<WireTrade, Box<dyn Error>> {
    let feed_hops: Vec<HopStats> = serde_json::from_value(f["wire_hops_ns"]["hops"].clone())
        .map_err(|e| format!("the feed's summary has no wire hops ({e}): {f}"))?;
    let [wire, feed] = feed_hops.as_slice() else {
        return Err(format!("the feed's summary has {} wire hops, not 2: {f}", feed_hops.len()).into());
    };
    let (wire, feed) = (to_hop(wire), to_hop(feed));
    if g.hops_ns.len() != 6 {
        return Err(format!("the gateway reported {} hops, not 6", g.hops_ns.len()).into());
    }
    let gw: Vec<Hop> = g.hops_ns.iter().map(to_hop).collect();
    let named = |mut h: Hop, name: &str| {
        h.name = name.into();
        h
    };
    let every_tick = named(to_hop(&tr.tick_hop_ns), "wire send -> strategy receive, every tick (trader)");
    let ordered_tick = named(gw[0].clone(), "wire send -> strategy receive, ticks that led to an order");
    // Measured where the feed says when each publish began (its publish lag: this release's
    // does); by difference from a feed that does not.
    let ring = match &tr.publish_hop_ns {
        Some(h) => named(to_hop(h), "market data publish begins -> strategy receive (trader)"),
        None => ring_hop(&every_tick, &wire, &feed),
    };
    let mut hops = vec![wire, feed, ring];
    hops.extend(gw[1..5].iter().cloned());
    let total = named(gw[5].clone(), "wire-to-trade (wire send -> gateway receive)");
    let lost = f["lost"].as_u64().unwrap_or(0);
    let missed = tr.counts.md_missed;
    let published = f["published"].as_u64().unwrap_or(0);
    let gaps_published = f["gaps_published"].as_u64().unwrap_or(0);
    let backlog = if backlog.is_backlogged() || backlog.sustained_msgs_per_s < 0.95 * backlog.asked_msgs_per_s {
        Some(backlog.says())
    } else if lost * 1000 > sent {
        Some(format!("BACKLOGGED: the feed lost {lost} of {sent} datagrams (its AF_XDP ring or socket buffer overflowed: it fell behind the line); these percentiles measure its queue; no verdict"))
    } else if missed * 1000 > tr.counts.ticks.max(1) {
        Some(format!("BACKLOGGED: the trader missed {missed} market-data messages (lapped on the lossy ring: it fell behind); no verdict"))
    } else {
        None
    };
    Ok(WireTrade {
        ingest: ingest.into(),
        rate,
        layout,
        hops,
        total,
        every_tick,
        ordered_tick,
        sent,
        published,
        gaps_published,
        halted: tr.halted.clone(),
        ticks: tr.counts.ticks,
        orders: tr.counts.orders,
        reports: tr.counts.reports,
        lost,
        missed,
        backlog,
    })
}

/// Waits until a trader holds a consumer line on the report ring (it attached to the market
/// data before): then no datagram goes unseen.
fn wait_for_trader(execs: &str, wait: Duration) -> Result<(), Box<dyn Error>> {
    let deadline = Instant::now() + wait;
    let mut ring = None;
    loop {
        // Opened once it is there (the gateway makes it), then only asked.
        if ring.is_none() {
            ring = shm::open_observer(execs, StartAt::Latest, &ShmOptions::default()).ok();
        }
        if ring.as_ref().is_some_and(|r| r.has_live_consumer()) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!("no trader attached to {execs} within {wait:?}").into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layout_says_which_cores_are_shared() {
        let two = layout(&[0, 1]);
        assert!(two.sender_shares && two.feed.1 == "yield" && two.trader.1 == "yield" && two.gateway.1 == "yield");
        assert_eq!((two.feed.0, two.trader.0, two.gateway.0, two.sender), (1, 1, 0, 0));
        assert!(two.words.contains("shared"));
        let four = layout(&[0, 1, 2, 3]);
        assert!(!four.sender_shares && [four.feed.1, four.trader.1, four.gateway.1] == ["spin"; 3]);
        let three = layout(&[0, 1, 2]);
        assert!(three.sender_shares && three.gateway == (0, "yield") && three.feed == (1, "spin"));
    }
}
