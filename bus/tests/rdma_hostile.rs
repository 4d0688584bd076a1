//! rdma-rc against hostile or failing peers, on real verbs (Soft-RoCE in the rig's guest): a
//! handshake that trickles or floods, a subscriber that stops polling, one whose send queue is
//! small, a burst with an oversized message, a subscriber that reconnects, and (built with
//! `--cfg tickbus_testing`) one that writes credits it does not own. Each subscriber is a separate
//! process. Without RDMA devices these report ignored unless TICKBUS_REQUIRE_RDMA=1.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use libtest_mimic::{Failed, Trial};
use tickbus::rdma::{PublisherOptions, RdmaError, RdmaPublisher, RdmaSubscriber, SubscriberOptions, WriteMode};
use tickbus::ring::ClaimError;
use tickbus::time::Tsc;
use tickbus::{Mode, Recv, RingConfig};

mod common;
use common::{fill, Subprocess};

const TOKEN: &str = "hostile-stream-token";
const PAYLOAD: usize = 64;
const STREAM: u32 = 21;

fn main() {
    #[allow(unused_mut)]
    let mut tests = vec![
        Trial::test("the_publisher_keeps_publishing_while_peers_trickle_flood_and_subscribe", publish_while_connecting),
        Trial::test("a_stalled_subscriber_never_slows_the_publisher_or_the_others", stalled_subscriber),
        Trial::test("credit_writes_never_overflow_a_small_send_queue", small_send_queue),
        Trial::test("a_burst_with_an_oversized_message_publishes_nothing", oversized_burst),
        Trial::test("a_reliable_subscriber_resumes_after_reconnecting_with_nothing_twice", resume),
    ];
    #[cfg(tickbus_testing)]
    tests.extend([
        Trial::test("a_subscriber_cannot_write_another_consumer_s_credit", hostile_credits),
        Trial::test("a_credit_beyond_the_stream_drops_its_subscriber_and_keeps_its_line", hostile_own_credit),
    ]);
    #[cfg(not(tickbus_testing))]
    tests.extend([
        tickbus_testkit::needs_testing_cfg("a_subscriber_cannot_write_another_consumer_s_credit"),
        tickbus_testkit::needs_testing_cfg("a_credit_beyond_the_stream_drops_its_subscriber_and_keeps_its_line"),
    ]);
    common::rdma_test_main("rdma_hostile", "TICKBUS_RH_ROLE", child, tests);
}

fn publisher(mode: Mode, slots: usize, tune: impl FnOnce(&mut PublisherOptions)) -> Result<RdmaPublisher, Failed> {
    let mut opts = PublisherOptions::new(TOKEN);
    opts.device = Some(common::rdma_devices().0);
    tune(&mut opts);
    let cfg = RingConfig::for_payload(mode, STREAM, PAYLOAD, slots);
    Ok(RdmaPublisher::bind("127.0.0.1:0".parse()?, &cfg, opts)?)
}

fn spawn(role: &str, p: &RdmaPublisher, count: u64, extra: &[(&str, &str)]) -> Result<Subprocess, Failed> {
    let mut env = vec![
        ("TICKBUS_RH_ROLE", role.to_owned()),
        ("TICKBUS_RH_ADDR", p.local_addr().to_string()),
        ("TICKBUS_RH_COUNT", count.to_string()),
        ("TICKBUS_RDMA_DEVICE", common::rdma_devices().1),
    ];
    env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    Subprocess::start(&env)
}

/// Publishes `pos` (its payload stamped with the TSC in its first word), retrying on Full;
/// returns how long the successful call took.
fn publish_timed(p: &mut RdmaPublisher, pos: u64, tsc: &Tsc) -> Result<Duration, Failed> {
    let mut buf = [0u8; PAYLOAD];
    fill(pos, &mut buf);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        buf[..8].copy_from_slice(&tsc.now().to_le_bytes());
        let t0 = Instant::now();
        match p.publish(&buf) {
            Ok(got) => {
                assert_eq!(got, pos);
                return Ok(t0.elapsed());
            }
            Err(RdmaError::Claim(ClaimError::Full { .. })) if Instant::now() < deadline => std::hint::spin_loop(),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether `buf` is [`fill`]'s content for `pos` apart from its first word (the TSC stamp).
fn intact_stamped(pos: u64, buf: &[u8]) -> bool {
    let mut want = vec![0u8; buf.len()];
    fill(pos, &mut want);
    buf.len() >= 8 && buf[8..] == want[8..]
}

/// While one peer trickles a hello a byte at a time and another floods a line without end, a
/// real subscriber connects and gets its messages, and no publish call waits for any of them:
/// handshakes run off the publishing thread, each bounded by a deadline and a line limit.
fn publish_while_connecting() -> Result<(), Failed> {
    let mut p = publisher(Mode::Lossy, 256, |o| o.handshake_timeout = Duration::from_secs(3))?;
    let addr = p.local_addr();
    let trickler = std::thread::spawn(move || -> String {
        let Ok(mut s) = TcpStream::connect(addr) else { return "connect failed".into() };
        let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
        let t0 = Instant::now();
        for b in b"HELLO tickbus-rdma 2 21 ".iter().cycle() {
            if s.write_all(&[*b]).is_err() || t0.elapsed() > Duration::from_secs(20) {
                break;
            }
            let mut r = [0u8; 256];
            match s.read(&mut r) {
                Ok(0) => return format!("closed after {:?}", t0.elapsed()),
                Ok(n) => return format!("{} after {:?}", String::from_utf8_lossy(&r[..n]).trim(), t0.elapsed()),
                Err(_) => {}
            }
            std::thread::sleep(Duration::from_millis(150));
        }
        format!("still connected after {:?}", t0.elapsed())
    });
    let flooder = std::thread::spawn(move || -> String {
        let Ok(mut s) = TcpStream::connect(addr) else { return "connect failed".into() };
        let chunk = vec![b'A'; 64 * 1024];
        let mut sent = 0usize;
        while sent < 256 << 20 && s.write_all(&chunk).is_ok() {
            sent += chunk.len();
        }
        let mut reply = String::new();
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = BufReader::new(s).read_line(&mut reply);
        format!("sent {sent} bytes, then {}", reply.trim())
    });
    std::thread::sleep(Duration::from_millis(200));
    let n = 500u64;
    let mut sub = spawn("sub-count", &p, n, &[])?;
    let tsc = Tsc::new();
    let (mut pos, mut worst) = (0u64, Duration::ZERO);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    let mut lines = sub.lines;
    let watcher = std::thread::spawn(move || {
        let l = lines.next();
        flag.store(true, std::sync::atomic::Ordering::Release);
        l
    });
    let t0 = Instant::now();
    while !done.load(std::sync::atomic::Ordering::Acquire) {
        worst = worst.max(publish_timed(&mut p, pos, &tsc)?);
        pos += 1;
        std::thread::sleep(Duration::from_micros(200));
        if t0.elapsed() > Duration::from_secs(60) {
            return Err(format!("the subscriber never got {n} messages ({pos} published): never taken in?").into());
        }
    }
    let line = watcher.join().map_err(|_| "watcher panicked")?.ok_or("subscriber closed")??;
    assert!(line.starts_with("ok"), "subscriber: {line}");
    let st = sub.child.wait()?;
    assert!(st.success(), "{st}");
    let (trickled, flooded) = (trickler.join().map_err(|_| "trickler")?, flooder.join().map_err(|_| "flooder")?);
    eprintln!("worst publish {worst:?} over {pos}; trickler: {trickled}; flooder: {flooded}");
    assert!(worst < Duration::from_millis(500), "a publish call took {worst:?} while peers connected");
    assert!(trickled.contains("deadline") || trickled.starts_with("closed"), "trickler: {trickled}");
    assert!(flooded.contains("longer than"), "flooder: {flooded}");
    assert!(p.subscribers().len() == 1, "{:?}", p.subscribers());
    Ok(())
}

/// WRITE_WITH_IMM, lossy: one subscriber stops polling (its receives run out, its WRITEs stop
/// completing). The publisher's calls stay short and the other subscriber's worst latency
/// stays low; the stalled one is dropped or left behind, never waited for.
fn stalled_subscriber() -> Result<(), Failed> {
    let mut p = publisher(Mode::Lossy, 256, |o| o.write_mode = WriteMode::WriteWithImm)?;
    let mut stall = spawn("sub-stall", &p, 100, &[])?;
    p.accept(Duration::from_secs(30))?;
    let total = 20_000u64;
    let mut fast = spawn("sub-latency", &p, total, &[])?;
    p.accept(Duration::from_secs(30))?;
    fast.expect("ready")?;
    let tsc = Tsc::new();
    for pos in 0..100 {
        publish_timed(&mut p, pos, &tsc)?;
    }
    stall.expect("stalled")?;
    let mut worst = Duration::ZERO;
    for pos in 100..total {
        worst = worst.max(publish_timed(&mut p, pos, &tsc)?);
        for _ in 0..2000 {
            std::hint::spin_loop();
        }
    }
    let line = fast.expect("latency")?;
    let f: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    let [max_ns, delivered, missed] = f[..] else { return Err(format!("bad line {line:?}").into()) };
    let dropped: Vec<String> = p.take_dropped().into_iter().map(|(peer, e)| format!("{peer}: {e}")).collect();
    eprintln!("worst publish {worst:?}; other subscriber: worst {max_ns} ns, {delivered} delivered, {missed} missed; dropped {dropped:?}");
    assert!(worst < Duration::from_millis(100), "a publish call waited {worst:?} for the stalled subscriber");
    assert!(max_ns < 200_000_000, "the other subscriber's worst latency was {max_ns} ns");
    assert_eq!(delivered + missed, total, "{line}");
    assert!(delivered >= total * 9 / 10, "{line}");
    stall.say("go")?;
    let _ = stall.child.wait();
    fast.finish()
}

/// Reliable, a 4-slot ring (a credit after every message) and a subscriber with a send queue of
/// 8: credits coalesce instead of overflowing the queue; every message arrives once, in order.
fn small_send_queue() -> Result<(), Failed> {
    let n = 5_000u64;
    let mut p = publisher(Mode::Reliable, 4, |_| {})?;
    let sub = spawn("sub-all", &p, n, &[("TICKBUS_RH_SQ", "8")])?;
    p.accept(Duration::from_secs(30))?;
    let tsc = Tsc::new();
    for pos in 0..n {
        publish_timed(&mut p, pos, &tsc)?;
        if let Some((peer, e)) = p.take_dropped().into_iter().next() {
            return Err(format!("subscriber {peer} dropped: {e}").into());
        }
    }
    let mut sub = sub;
    assert_eq!(sub.expect("ok")?, format!("ok {n}"));
    sub.finish()
}

/// A burst whose last message is larger than a slot is refused whole: nothing published.
fn oversized_burst() -> Result<(), Failed> {
    let mut p = publisher(Mode::Reliable, 64, |_| {})?;
    let ok = [1u8; PAYLOAD];
    let big = vec![2u8; 4096];
    match p.publish_batch(&[&ok, &ok, &big]) {
        Err(RdmaError::Claim(ClaimError::TooLarge { len: 4096, .. })) => {}
        other => return Err(format!("expected TooLarge, got {other:?}").into()),
    }
    assert_eq!(p.position(), 0, "part of a refused burst was published");
    assert_eq!(p.publish_batch(&[&ok, &ok])?, (0, 2));
    Ok(())
}

/// A reliable subscriber reads 300 messages and leaves; the publisher notices; a new one
/// resumes at 300 and reads to the end: every message once, in order.
fn resume() -> Result<(), Failed> {
    let n = 1_000u64;
    let mut p = publisher(Mode::Reliable, 64, |o| {
        o.rc.timeout = 12;
        o.rc.retry_cnt = 3;
    })?;
    let mut first = spawn("sub-leave", &p, 300, &[])?;
    p.accept(Duration::from_secs(30))?;
    let tsc = Tsc::new();
    let mut pos = 0;
    while pos < 300 {
        publish_timed(&mut p, pos, &tsc)?;
        pos += 1;
    }
    let left = first.expect("left at")?;
    first.finish()?;
    let next: u64 = left.trim_start_matches("left at ").parse()?;
    assert_eq!(next, 300);
    // The publisher notices it left (its control connection closed) without any traffic.
    let gone = wait_dropped(&mut p, &mut pos, false)?;
    assert!(gone.contains("closed its control connection"), "{gone}");
    let mut second = spawn("sub-resume", &p, n, &[("TICKBUS_RH_RESUME", "300")])?;
    p.accept(Duration::from_secs(30))?;
    while pos < n {
        publish_timed(&mut p, pos, &tsc)?;
        pos += 1;
    }
    assert_eq!(second.expect("ok")?, format!("ok {n}"));
    second.finish()
}

/// A hostile subscriber (one that knows the token) consumes a little, then writes another
/// consumer's credit word through its own key: its NIC refuses (its registration covers its own
/// 8 bytes only), the other consumer's credit is untouched, and the publisher drops it. An
/// honest subscriber then takes its line over and both honest ones get every message.
#[cfg(tickbus_testing)]
fn hostile_credits() -> Result<(), Failed> {
    let mut p = two_consumer_publisher()?;
    let n = 2_000u64;
    let honest = spawn("sub-all", &p, n, &[])?;
    p.accept(Duration::from_secs(30))?;
    let mut evil = spawn("sub-evil", &p, 10, &[("TICKBUS_RH_TARGET", "0"), ("TICKBUS_RH_VALUE", "1000000")])?;
    p.accept(Duration::from_secs(30))?;
    let tsc = Tsc::new();
    for pos in 0..10 {
        publish_timed(&mut p, pos, &tsc)?;
    }
    let wrote = evil.expect("wrote")?;
    assert!(wrote.contains("REM_ACCESS_ERR"), "writing another consumer's credit was not refused: {wrote}");
    let mut pos = 10;
    let dropped = wait_dropped(&mut p, &mut pos, true)?;
    assert!(p.subscribers().iter().all(|s| s.consumed <= p.position()), "{:?}", p.subscribers());
    eprintln!("the hostile subscriber: {wrote}; dropped: {dropped}");
    finish_with_a_replacement(p, honest, evil, n, 10)
}

/// A hostile subscriber writes its own credit far beyond what was published: the publisher
/// drops it for breaking the protocol and restores its line's last honest credit, so the honest
/// subscriber that takes the line over resumes exactly there.
#[cfg(tickbus_testing)]
fn hostile_own_credit() -> Result<(), Failed> {
    let mut p = two_consumer_publisher()?;
    let n = 2_000u64;
    let honest = spawn("sub-all", &p, n, &[])?;
    p.accept(Duration::from_secs(30))?;
    let mut evil =
        spawn("sub-evil", &p, 10, &[("TICKBUS_RH_TARGET", "1"), ("TICKBUS_RH_VALUE", &u64::MAX.to_string())])?;
    p.accept(Duration::from_secs(30))?;
    let tsc = Tsc::new();
    for pos in 0..10 {
        publish_timed(&mut p, pos, &tsc)?;
    }
    evil.expect("wrote")?;
    let mut pos = 10;
    let dropped = wait_dropped(&mut p, &mut pos, true)?;
    assert!(dropped.contains("broke the protocol"), "{dropped}");
    finish_with_a_replacement(p, honest, evil, n, 10)
}

#[cfg(tickbus_testing)]
fn two_consumer_publisher() -> Result<RdmaPublisher, Failed> {
    let cfg = RingConfig { max_consumers: 2, ..RingConfig::for_payload(Mode::Reliable, STREAM, PAYLOAD, 64) };
    let mut opts = PublisherOptions::new(TOKEN);
    opts.device = Some(common::rdma_devices().0);
    opts.rc.timeout = 12;
    opts.rc.retry_cnt = 3;
    Ok(RdmaPublisher::bind("127.0.0.1:0".parse()?, &cfg, opts)?)
}

/// Polls, and with `publish` publishes (from `*pos`, while the ring has room), until a
/// subscriber was dropped; its error.
fn wait_dropped(p: &mut RdmaPublisher, pos: &mut u64, publish: bool) -> Result<String, Failed> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let tsc = Tsc::new();
    let mut buf = [0u8; PAYLOAD];
    loop {
        p.poll();
        if publish {
            fill(*pos, &mut buf);
            buf[..8].copy_from_slice(&tsc.now().to_le_bytes());
            match p.publish(&buf) {
                Ok(_) => *pos += 1,
                Err(RdmaError::Claim(ClaimError::Full { .. })) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if let Some((_, e)) = p.take_dropped().into_iter().next() {
            return Ok(e.to_string());
        }
        if Instant::now() > deadline {
            return Err("the subscriber was never dropped".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// An honest subscriber takes the hostile one's line over, resuming at `resume_at`; both honest
/// ones then read to `n`.
#[cfg(tickbus_testing)]
fn finish_with_a_replacement(
    mut p: RdmaPublisher,
    mut honest: Subprocess,
    mut evil: Subprocess,
    n: u64,
    resume_at: u64,
) -> Result<(), Failed> {
    let _ = evil.child.kill();
    let _ = evil.child.wait();
    let mut replacement = spawn("sub-resume", &p, n, &[("TICKBUS_RH_RESUME", &resume_at.to_string())])?;
    p.accept(Duration::from_secs(30))?;
    let tsc = Tsc::new();
    let first = p.position();
    for pos in first..n {
        publish_timed(&mut p, pos, &tsc)?;
    }
    assert_eq!(honest.expect("ok")?, format!("ok {n}"));
    assert_eq!(replacement.expect("ok")?, format!("ok {n}"));
    honest.finish()?;
    replacement.finish()
}

fn child(role: &str) -> Result<(), Failed> {
    let addr = std::env::var("TICKBUS_RH_ADDR")?.parse()?;
    let n: u64 = std::env::var("TICKBUS_RH_COUNT")?.parse()?;
    let mut o = SubscriberOptions::new(TOKEN);
    if let Ok(sq) = std::env::var("TICKBUS_RH_SQ") {
        o.rc.max_send_wr = sq.parse()?;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut s = match std::env::var("TICKBUS_RH_RESUME") {
        Ok(next) => RdmaSubscriber::resume(addr, STREAM, &o, next.parse()?)?,
        Err(_) => RdmaSubscriber::connect(addr, STREAM, &o)?,
    };
    let read_in_order = |s: &mut RdmaSubscriber, count: u64| -> Result<(), Failed> {
        let end = s.position() + count;
        while s.position() < end {
            let next = s.position();
            match s.try_recv()? {
                Some(Recv::Message(m)) if m.position == next && intact_stamped(next, m.payload) => {}
                Some(other) => return Err(format!("expected {next}, got {other:?}").into()),
                None if Instant::now() > deadline => return Err(format!("stalled at {next}").into()),
                None => std::hint::spin_loop(),
            }
        }
        Ok(())
    };
    match role {
        "sub-count" => {
            read_in_order(&mut s, n)?;
            println!("ok {n}");
        }
        "sub-all" => {
            assert_eq!(s.position(), 0, "a fresh reliable subscriber starts at 0");
            read_in_order(&mut s, n)?;
            println!("ok {n}");
        }
        "sub-leave" => {
            read_in_order(&mut s, n)?;
            println!("left at {}", s.position());
        }
        "sub-resume" => {
            let from = s.position();
            read_in_order(&mut s, n - from)?;
            println!("ok {}", s.position());
        }
        "sub-stall" => {
            read_in_order(&mut s, n)?;
            println!("stalled");
            let _ = std::io::stdin().lines().next();
        }
        "sub-latency" => {
            println!("ready");
            let scale = s.tsc_scale();
            let tsc = Tsc::new();
            let (mut max, mut delivered, mut missed) = (0u64, 0u64, 0u64);
            while delivered + missed < n && Instant::now() < deadline {
                match s.try_recv()? {
                    Some(Recv::Message(m)) => {
                        let sent = u64::from_le_bytes(m.payload[..8].try_into()?);
                        max = max.max(scale.delta_ns(sent, tsc.now()));
                        if !intact_stamped(m.position, m.payload) {
                            return Err(format!("torn message at {}", m.position).into());
                        }
                        delivered += 1;
                    }
                    Some(Recv::Gap(g)) => missed += g.missed(),
                    None => std::hint::spin_loop(),
                }
            }
            println!("latency {max} {delivered} {missed}");
        }
        #[cfg(tickbus_testing)]
        "sub-evil" => {
            read_in_order(&mut s, n)?;
            let target: usize = std::env::var("TICKBUS_RH_TARGET")?.parse()?;
            let value: u64 = std::env::var("TICKBUS_RH_VALUE")?.parse()?;
            s.fault_write_credit(target, value)?;
            let outcome = match s.fault_wait_sent(Duration::from_secs(10)) {
                Ok(()) => "completed".to_owned(),
                Err(e) => e.to_string(),
            };
            println!("wrote: {outcome}");
            let _ = std::io::stdin().lines().next();
        }
        other => return Err(format!("unknown role {other}").into()),
    }
    Ok(())
}
