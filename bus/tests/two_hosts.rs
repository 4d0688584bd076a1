//! rdma-rc and ud-mcast between two hosts (the rig's two-guest mode: two kernels, each with rxe
//! on its end of a private link), with the faults a fabric has: the link cut and restored, and
//! the peer powered off. Guest 0 publishes and runs the checks; guest 1 subscribes and reports
//! over a coordination connection. Run as
//! `tools/rig/rig run --guests 2 --hugepages 32 -- <this binary>`; outside two guests the tests
//! report ignored (and fail with TICKBUS_REQUIRE_RDMA=1).
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Failed, Trial};
use tickbus::mcast::{McastPublisher, McastPublisherOptions, McastSubscriber, McastSubscriberOptions};
use tickbus::rdma::{PublisherOptions, RdmaError, RdmaPublisher, RdmaSubscriber, SubscriberOptions};
use tickbus::ring::ClaimError;
use tickbus::{Mode, Recv, RingConfig};

mod common;
use common::{fill, intact};

const DEVICE: &str = "rxe_eth";
const TOKEN: &str = "two-hosts-token";
const PAYLOAD: usize = 64;
const COORD_PORT: u16 = 7600;
const RC_PORT: u16 = 7610;
const RECOVERY_PORT: u16 = 7620;
const GROUP: Ipv4Addr = Ipv4Addr::new(239, 78, 0, 1);

fn main() {
    let guest = std::env::var("RIG_GUEST").ok();
    if guest.as_deref() == Some("1") {
        std::process::exit(match subscriber_side() {
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
        eprintln!("two_hosts: needs the rig's two guests (tools/rig/rig run --guests 2): tests ignored");
    }
    assert!(two || skip, "TICKBUS_REQUIRE_RDMA is set but this is not guest 0 of two");
    let tests = vec![
        Trial::test("rc_reliable_survives_a_cut_link_reconnects_and_delivers_everything_once", rc_link_cut),
        Trial::test("mcast_subscriber_recovers_what_a_cut_link_lost_from_the_history", mcast_link_cut),
        Trial::test("rc_publisher_reports_a_powered_off_peer_within_its_retry_budget", rc_peer_off),
    ];
    let tests = tests.into_iter().map(|t| t.with_ignored_flag(skip)).collect();
    libtest_mimic::run(&args, tests).exit();
}

/// Guest 0's side of the coordination connection (guest 1 connects once, at start).
struct Peer {
    lines: std::io::Lines<BufReader<TcpStream>>,
    out: TcpStream,
}

fn peer() -> Result<&'static std::sync::Mutex<Peer>, Failed> {
    static PEER: std::sync::OnceLock<std::sync::Mutex<Peer>> = std::sync::OnceLock::new();
    if let Some(p) = PEER.get() {
        return Ok(p);
    }
    let l = TcpListener::bind(("0.0.0.0", COORD_PORT))?;
    l.set_nonblocking(true)?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let s = loop {
        match l.accept() {
            Ok((s, _)) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("guest 1 never connected: {e}").into()),
        }
    };
    s.set_nonblocking(false)?;
    let out = s.try_clone()?;
    Ok(PEER.get_or_init(|| std::sync::Mutex::new(Peer { lines: BufReader::new(s).lines(), out })))
}

impl Peer {
    fn say(&mut self, line: &str) -> Result<(), Failed> {
        writeln!(self.out, "{line}")?;
        Ok(())
    }
    fn expect(&mut self, prefix: &str) -> Result<String, Failed> {
        match self.lines.next() {
            Some(Ok(l)) if l.starts_with(prefix) => Ok(l),
            other => Err(format!("guest 1 said {other:?}, expected {prefix:?}").into()),
        }
    }
}

fn rig(request: &str) {
    println!("RIG-REQUEST: {request}");
    let _ = std::io::stdout().flush();
}

fn my_addr() -> Result<Ipv4Addr, Failed> {
    Ok(std::env::var("RIG_GUEST_ADDR")?.parse()?)
}

/// Reliable rdma-rc across the link: the link is cut mid-stream, for at least 2 s and until the
/// publisher has reported the subscriber lost (its retry budget spent; at most 30 s). The
/// publisher keeps going; the subscriber notices its publisher gone once the link is back,
/// reconnects asking to resume where it stopped, and ends with every message exactly once, in
/// order. (A fixed 2 s cut flapped: under a slow TCG phase the retries outlasted it, the stream
/// went on as if nothing had happened, and there was nothing to reconnect.)
fn rc_link_cut() -> Result<(), Failed> {
    let mut peer = peer()?.lock().map_err(|_| "peer lock")?;
    let n = 6_000u64;
    let mut opts = PublisherOptions::new(TOKEN);
    opts.device = Some(DEVICE.into());
    let cfg = RingConfig::for_payload(Mode::Reliable, 31, PAYLOAD, 256);
    let mut p = RdmaPublisher::bind(SocketAddr::from((my_addr()?, RC_PORT)), &cfg, opts)?;
    peer.say(&format!("rc {n}"))?;
    p.accept(Duration::from_secs(60))?;
    let mut buf = [0u8; PAYLOAD];
    let (mut pos, mut cut_at, mut dropped_after, mut restored) = (0u64, None::<Instant>, None, false);
    let deadline = Instant::now() + Duration::from_secs(240);
    while pos < n {
        assert!(Instant::now() < deadline, "stuck at {pos}");
        if pos == 2_000 && cut_at.is_none() {
            rig("link-down");
            cut_at = Some(Instant::now());
        }
        let down = cut_at.map(|t| t.elapsed());
        if !restored
            && down
                .is_some_and(|d| d > Duration::from_secs(30) || (d > Duration::from_secs(2) && dropped_after.is_some()))
        {
            rig("link-up");
            restored = true;
        }
        fill(pos, &mut buf);
        match p.publish(&buf) {
            Ok(_) => pos += 1,
            Err(RdmaError::Claim(ClaimError::Full { .. })) => {
                p.poll();
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(e) => return Err(e.into()),
        }
        for (who, e) in p.take_dropped() {
            let after = cut_at.map(|t| t.elapsed()).ok_or_else(|| format!("dropped before the cut: {e}"))?;
            eprintln!("guest 0: subscriber {who} dropped {after:?} after the cut: {e}");
            assert!(matches!(e, RdmaError::PortDown { .. }), "dropped for the port going down, not {e}");
            dropped_after.get_or_insert(after);
        }
        if pos.is_multiple_of(16) {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    if !restored {
        rig("link-up");
    }
    let report = peer.expect("rc done")?;
    eprintln!("guest 1: {report}");
    assert_eq!(report, format!("rc done {n} reconnects 1"));
    let after = dropped_after.ok_or("the publisher never reported the lost subscriber")?;
    // The device's async event (IBV_EVENT_PORT_ERR, read by the context's event thread) drops
    // the subscriber as soon as the port goes down. Before the publisher watched those events,
    // the loss came from the QP's retry budget running out, which TCG stretches: 19-22 s after
    // the cut (issue 25 item 20). Measured from the request to the rig, so the rig's path to
    // QEMU's monitor is inside it (3.4 s in the first run, port event and drop included); the
    // bound leaves room for a slow TCG phase and is still half the old best.
    assert!(after < Duration::from_secs(10), "reported {after:?} after the cut");
    Ok(())
}

/// ud-mcast across the link, with recovery: 400 ms of the stream are lost on a cut link; the
/// subscriber reads them back from the publisher's history and delivers all of it, in order,
/// once.
fn mcast_link_cut() -> Result<(), Failed> {
    let mut peer = peer()?.lock().map_err(|_| "peer lock")?;
    let n = 3_000u64;
    let mut opts = McastPublisherOptions::default();
    opts.device = Some(DEVICE.into());
    opts.history = 4096;
    opts.token = Some(TOKEN.into());
    let mut p = McastPublisher::new(GROUP, 32, &opts)?;
    p.listen_recovery(SocketAddr::from((my_addr()?, RECOVERY_PORT)), TOKEN)?;
    peer.say(&format!("mcast {n}"))?;
    p.accept_recovery(Duration::from_secs(60))?;
    peer.expect("mcast ready")?;
    let mut buf = [0u8; PAYLOAD];
    let mut cut = None;
    for seq in 0..n {
        if seq == 1_000 {
            rig("link-down");
            cut = Some(Instant::now());
        }
        if cut.is_some_and(|t| t.elapsed() > Duration::from_millis(400)) {
            rig("link-up");
            cut = None;
        }
        fill(seq, &mut buf);
        while p.publish(&buf).is_err() {
            std::hint::spin_loop();
        }
        std::thread::sleep(Duration::from_micros(300));
    }
    for _ in 0..20 {
        p.heartbeat()?;
        std::thread::sleep(Duration::from_millis(50));
    }
    let report = peer.expect("mcast done")?;
    eprintln!("guest 1: {report}");
    let f: Vec<u64> = report.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    let [delivered, recovered, gaps] = f[..] else { return Err(format!("bad report {report:?}").into()) };
    assert_eq!((delivered, gaps), (n, 0), "{report}");
    assert!(recovered > 0, "the cut lost nothing: the fault was not injected ({report})");
    Ok(())
}

/// The subscriber's guest is powered off: a lossy publisher keeps publishing without waiting and
/// reports the subscriber lost within its retry budget.
fn rc_peer_off() -> Result<(), Failed> {
    let mut peer = peer()?.lock().map_err(|_| "peer lock")?;
    let mut opts = PublisherOptions::new(TOKEN);
    opts.device = Some(DEVICE.into());
    let cfg = RingConfig::for_payload(Mode::Lossy, 33, PAYLOAD, 256);
    let mut p = RdmaPublisher::bind(SocketAddr::from((my_addr()?, RC_PORT + 1)), &cfg, opts)?;
    peer.say("rc-idle")?;
    p.accept(Duration::from_secs(60))?;
    peer.expect("rc-idle ready")?;
    rig("kill-peer");
    let t0 = Instant::now();
    let (mut worst, mut buf) = (Duration::ZERO, [0u8; PAYLOAD]);
    let mut pos = 0;
    let dropped = loop {
        fill(pos, &mut buf);
        let c = Instant::now();
        p.publish(&buf)?;
        worst = worst.max(c.elapsed());
        pos += 1;
        if let Some((_, e)) = p.take_dropped().into_iter().next() {
            break e;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "a powered-off subscriber was never reported");
        std::thread::sleep(Duration::from_micros(100));
    };
    eprintln!(
        "guest 0: powered-off subscriber reported after {:?} ({pos} published, worst call {worst:?}): {dropped}",
        t0.elapsed()
    );
    let text = dropped.to_string();
    assert!(text.contains("RETRY_EXC_ERR") || text.contains("closed its control"), "{text}");
    assert!(t0.elapsed() < Duration::from_secs(10), "reported after {:?}", t0.elapsed());
    assert!(worst < Duration::from_millis(200), "a publish call waited {worst:?}");
    Ok(())
}

/// Guest 1: connects to guest 0's coordination port and plays the subscriber of each scenario.
fn subscriber_side() -> Result<(), Failed> {
    let peer: Ipv4Addr = std::env::var("RIG_PEER_ADDR")?.parse()?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let s = loop {
        match TcpStream::connect((peer, COORD_PORT)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(format!("guest 0's coordination port: {e}").into()),
        }
    };
    let mut out = s.try_clone()?;
    for cmd in BufReader::new(s).lines() {
        let cmd = cmd?;
        let f: Vec<&str> = cmd.split_whitespace().collect();
        let reply = match f.first().copied() {
            Some("rc") => rc_subscriber(peer, f[1].parse()?)?,
            Some("mcast") => mcast_subscriber(peer, f[1].parse()?, &mut out)?,
            Some("rc-idle") => {
                let mut o = SubscriberOptions::new(TOKEN);
                o.device = Some(DEVICE.into());
                let _s = RdmaSubscriber::connect(SocketAddr::from((peer, RC_PORT + 1)), 33, &o)?;
                writeln!(out, "rc-idle ready")?;
                std::thread::sleep(Duration::from_secs(600)); // until powered off
                "rc-idle done".into()
            }
            other => return Err(format!("unknown command {other:?}").into()),
        };
        writeln!(out, "{reply}")?;
    }
    Ok(())
}

/// Reads a reliable stream of `n` messages, reconnecting (resuming) whenever the publisher is
/// gone; every position must come once, in order, intact.
fn rc_subscriber(peer: Ipv4Addr, n: u64) -> Result<String, Failed> {
    let addr = SocketAddr::from((peer, RC_PORT));
    let mut o = SubscriberOptions::new(TOKEN);
    o.device = Some(DEVICE.into());
    let mut s = RdmaSubscriber::connect(addr, 31, &o)?;
    let (mut next, mut reconnects) = (0u64, 0);
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut idle_since = Instant::now();
    while next < n {
        if Instant::now() > deadline {
            return Err(format!("stuck at {next}").into());
        }
        let lost = match s.try_recv() {
            Ok(Some(Recv::Message(m))) if m.position == next && intact(next, m.payload) => {
                next += 1;
                idle_since = Instant::now();
                false
            }
            Ok(Some(other)) => return Err(format!("expected {next}, got {other:?}").into()),
            Ok(None) => idle_since.elapsed() > Duration::from_millis(500) && s.publisher_gone(),
            Err(e) => {
                eprintln!("guest 1: subscriber error at {next}: {e}");
                true
            }
        };
        if lost {
            if idle_since.elapsed() > Duration::from_millis(500) {
                idle_since = Instant::now();
            }
            drop(s);
            s = loop {
                match RdmaSubscriber::resume(addr, 31, &o, next) {
                    Ok(s) => break s,
                    Err(e) if Instant::now() < deadline => {
                        eprintln!("guest 1: reconnect: {e}");
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    Err(e) => return Err(e.into()),
                }
            };
            assert_eq!(s.position(), next, "resumed elsewhere than asked");
            reconnects += 1;
        }
    }
    Ok(format!("rc done {n} reconnects {reconnects}"))
}

fn mcast_subscriber(peer: Ipv4Addr, n: u64, out: &mut TcpStream) -> Result<String, Failed> {
    let mut o = McastSubscriberOptions::default();
    o.device = Some(DEVICE.into());
    o.token = Some(TOKEN.into());
    let mut s = McastSubscriber::join(GROUP, 32, &o)?;
    s.connect_recovery(SocketAddr::from((peer, RECOVERY_PORT)), TOKEN.as_bytes(), 64, Duration::from_secs(60))?;
    writeln!(out, "mcast ready")?;
    let (mut next, mut gaps) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(120);
    while next < n && Instant::now() < deadline {
        match s.try_recv()? {
            Some(Recv::Message(m)) if m.position == next && intact(next, m.payload) => next += 1,
            Some(Recv::Gap(g)) => {
                gaps += 1;
                next = g.resumed_at;
            }
            Some(other) => return Err(format!("expected {next}, got {other:?}").into()),
            None => {}
        }
    }
    if let Some(e) = s.take_recovery_error() {
        eprintln!("guest 1: recovery error: {e}");
    }
    let st = s.stats();
    Ok(format!("mcast done {} {} {gaps}", st.delivered, st.recovered))
}
