//! The RDMA transport on real verbs (Soft-RoCE in the rig's guest): publisher on one device,
//! each subscriber a separate process on another, data checked byte for byte. Without RDMA
//! devices these report ignored with the reason, unless TICKBUS_REQUIRE_RDMA=1 (the rig sets it).
use std::io::Write;
use std::time::{Duration, Instant};

use libtest_mimic::{Failed, Trial};
use tickbus::rdma::{PublisherOptions, RdmaError, RdmaPublisher, RdmaSubscriber, SubscriberOptions, WriteMode};
use tickbus::ring::ClaimError;
use tickbus::{Mode, Recv, RingConfig};

mod common;
use common::{fill, intact, Counting, Subprocess};

#[global_allocator]
static GLOBAL: Counting = Counting;

const TOKEN: &str = "s3cret-stream-token";
const PAYLOAD: usize = 64;

fn main() {
    let tests = vec![
        Trial::test("reliable_write_mode_delivers_every_message_once_in_order", || reliable(WriteMode::Write)),
        Trial::test("reliable_write_with_imm_mode_delivers_every_message_once_in_order", || {
            reliable(WriteMode::WriteWithImm)
        }),
        Trial::test("lossy_paused_subscriber_reports_the_gap_and_resumes", lossy_paused),
        Trial::test("lossy_subscriber_never_sees_a_torn_message", no_torn),
        Trial::test("wrong_token_is_refused_on_both_sides", wrong_token),
        Trial::test("wrong_rkey_gives_remote_access_error_with_remedy", wrong_rkey),
        Trial::test("killed_subscriber_is_reported_to_the_publisher_within_the_timeout", killed_subscriber),
        Trial::test("steady_state_publish_and_poll_make_no_allocation_and_only_doorbell_syscalls", hot_path),
        Trial::test("publish_batch_rings_one_doorbell_per_burst_and_keeps_order", batch),
        Trial::test("a_quiet_reliable_subscriber_credits_everything_it_read", quiet_credit),
        Trial::test("subscriber_sees_its_publisher_go", publisher_gone),
        Trial::test("each_accept_takes_in_one_of_several_waiting_subscribers", accept_each),
    ];
    common::rdma_test_main("rdma_transport", "TICKBUS_RT_ROLE", child, tests);
}

fn publisher(
    mode: Mode,
    slots: usize,
    write_mode: WriteMode,
    tune: impl FnOnce(&mut PublisherOptions),
) -> Result<RdmaPublisher, Failed> {
    let mut opts = PublisherOptions::new(TOKEN);
    opts.device = Some(common::rdma_devices().0);
    opts.write_mode = write_mode;
    tune(&mut opts);
    let cfg = RingConfig::for_payload(mode, 11, PAYLOAD, slots);
    Ok(RdmaPublisher::bind("127.0.0.1:0".parse().unwrap(), &cfg, opts)?)
}

/// A subscriber process on the peer device.
struct Peer;

impl Peer {
    fn spawn(role: &str, p: &RdmaPublisher, count: u64, extra: &[(&str, &str)]) -> Subprocess {
        let mut env = vec![
            ("TICKBUS_RT_ROLE", role.to_owned()),
            ("TICKBUS_RT_ADDR", p.local_addr().to_string()),
            ("TICKBUS_RT_COUNT", count.to_string()),
            ("TICKBUS_RDMA_DEVICE", common::rdma_devices().1),
        ];
        env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
        Subprocess::start(&env).unwrap()
    }
}

/// Publishes `pos` and retries on Full (reliable back-pressure), failing if a subscriber drops.
fn publish_retrying(p: &mut RdmaPublisher, pos: u64, buf: &mut [u8]) -> Result<u64, Failed> {
    fill(pos, buf);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut fulls = 0;
    loop {
        match p.publish(buf) {
            Ok(got) => {
                assert_eq!(got, pos);
                if let Some((peer, e)) = p.take_dropped().into_iter().next() {
                    return Err(format!("subscriber {peer} dropped: {e}").into());
                }
                return Ok(fulls);
            }
            Err(RdmaError::Claim(ClaimError::Full { .. })) => {
                fulls += 1;
                assert!(Instant::now() < deadline, "publisher stuck on Full at {pos}");
                std::hint::spin_loop();
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn reliable(write_mode: WriteMode) -> Result<(), Failed> {
    let n = 20_000u64;
    let mut p = publisher(Mode::Reliable, 256, write_mode, |_| {})?;
    let mut buf = [0u8; PAYLOAD];
    // Published before anyone subscribed: a reliable stream retains them for its consumer.
    for pos in 0..100 {
        publish_retrying(&mut p, pos, &mut buf)?;
    }
    // The subscriber stalls for 300 ms at message 1000, so the publisher must meet Full.
    let peer = Peer::spawn("sub-all", &p, n, &[("TICKBUS_RT_STALL_AT", "1000")]);
    p.accept(Duration::from_secs(30))?;
    let mut fulls = 0;
    for pos in 100..n {
        fulls += publish_retrying(&mut p, pos, &mut buf)?;
    }
    let mut peer = peer;
    assert_eq!(peer.expect("ok")?, format!("ok {n}"));
    assert!(fulls > 0, "back-pressure never engaged in {n} messages on a 256-slot ring");
    peer.finish()
}

/// A reliable subscriber that ran dry has credited everything it read: 300 messages on a
/// 1024-slot ring (the reader releases every 256 while messages keep coming, so only the
/// dry-run credit carries the last 44), then the subscriber keeps polling an empty ring, and the
/// publisher must see all 300 consumed (its view of the lag, `tickbus stat`'s, is exact when
/// the stream pauses).
fn quiet_credit() -> Result<(), Failed> {
    let n = 300u64;
    let mut p = publisher(Mode::Reliable, 1024, WriteMode::Write, |_| {})?;
    let mut peer = Peer::spawn("sub-quiet", &p, n, &[]);
    p.accept(Duration::from_secs(30))?;
    let mut buf = [0u8; PAYLOAD];
    for pos in 0..n {
        publish_retrying(&mut p, pos, &mut buf)?;
    }
    assert_eq!(peer.expect("ok")?, format!("ok {n}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let consumed = loop {
        p.poll();
        let c = p.subscribers().first().map(|s| s.consumed).ok_or("the subscriber is gone")?;
        if c == n || Instant::now() > deadline {
            break c;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(consumed, n, "the publisher's view of what its quiet subscriber consumed");
    peer.finish()
}

/// Several subscribers finish their handshakes before the publisher accepts: N accepts take
/// in N of them, one each (an accept that took in the others too left the next one waiting for
/// a subscriber that never came).
fn accept_each() -> Result<(), Failed> {
    let mut p = publisher(Mode::Lossy, 256, WriteMode::Write, |_| {})?;
    let addr = p.local_addr();
    let subs: Vec<_> = (0..3)
        .map(|_| {
            let mut so = SubscriberOptions::new(TOKEN);
            so.device = Some(common::rdma_devices().1);
            std::thread::spawn(move || RdmaSubscriber::connect(addr, 11, &so).map_err(|e| e.to_string()))
        })
        .collect();
    // Long enough for all three handshakes to finish and wait for the publisher.
    std::thread::sleep(Duration::from_secs(2));
    let mut peers = Vec::new();
    for k in 0..3 {
        let info = p.accept(Duration::from_secs(20)).map_err(|e| format!("accept {k}: {e}"))?;
        peers.push(info.peer);
    }
    peers.sort_unstable();
    peers.dedup();
    assert_eq!(peers.len(), 3, "three distinct subscribers taken in: {peers:?}");
    let mut subs: Vec<RdmaSubscriber> =
        subs.into_iter().map(|t| t.join().expect("subscriber thread")).collect::<Result<_, _>>()?;
    assert_eq!(p.subscribers().len(), 3);
    let mut buf = [0u8; PAYLOAD];
    fill(0, &mut buf);
    p.publish(&buf)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    for (k, s) in subs.iter_mut().enumerate() {
        loop {
            match s.try_recv()? {
                Some(Recv::Message(m)) => {
                    assert_eq!(m.position, 0, "subscriber {k}");
                    break;
                }
                Some(Recv::Gap(g)) => return Err(format!("subscriber {k}: gap {g:?}").into()),
                None if Instant::now() > deadline => return Err(format!("subscriber {k}: nothing in 10 s").into()),
                None => p.poll(),
            };
        }
    }
    Ok(())
}

fn lossy_paused() -> Result<(), Failed> {
    let mut p = publisher(Mode::Lossy, 64, WriteMode::Write, |_| {})?;
    let mut peer = Peer::spawn("sub-pause", &p, 50, &[]);
    p.accept(Duration::from_secs(30))?;
    peer.expect("attached")?;
    let mut buf = [0u8; PAYLOAD];
    for pos in 0..50 {
        publish_retrying(&mut p, pos, &mut buf)?;
    }
    peer.expect("paused")?;
    for pos in 50..50 + 5 * 64 {
        publish_retrying(&mut p, pos, &mut buf)?; // laps the paused subscriber five times
    }
    writeln!(peer.stdin, "go")?;
    let gap = peer.expect("gap")?;
    let nums: Vec<u64> = gap.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    assert_eq!(nums[0], 50, "{gap}");
    // The remote ring has no producer position: the reader resumes at the oldest message of the
    // lap that overwrote it, which is still intact.
    assert!(nums[1] >= 50 + 4 * 64, "{gap}: resumed before the last lap");
    let resumed = nums[1];
    for pos in 50 + 5 * 64..resumed + 20 {
        publish_retrying(&mut p, pos, &mut buf)?;
    }
    peer.expect("done")?;
    peer.finish()
}

fn no_torn() -> Result<(), Failed> {
    let mut p = publisher(Mode::Lossy, 4, WriteMode::Write, |_| {})?;
    let mut peer = Peer::spawn("sub-verify", &p, 2_000, &[]);
    p.accept(Duration::from_secs(30))?;
    peer.expect("attached")?;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    let mut lines = peer.lines;
    let watcher = std::thread::spawn(move || {
        let l = lines.next();
        flag.store(true, std::sync::atomic::Ordering::Release);
        l
    });
    let mut buf = [0u8; PAYLOAD];
    let mut pos = 0u64;
    while !done.load(std::sync::atomic::Ordering::Acquire) && pos < 5_000_000 {
        publish_retrying(&mut p, pos, &mut buf)?;
        pos += 1;
        if pos.is_multiple_of(32) {
            std::thread::sleep(Duration::from_micros(500)); // bursts lap, pauses deliver
        }
    }
    let line = watcher.join().map_err(|_| "watcher panicked")?.ok_or("subscriber closed")??;
    let st = peer.child.wait()?;
    assert!(st.success(), "{line}");
    let nums: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    assert!(nums[0] >= 2_000 && nums[1] > 0, "{line} after {pos} messages");
    Ok(())
}

fn wrong_token() -> Result<(), Failed> {
    let mut p = publisher(Mode::Lossy, 64, WriteMode::Write, |_| {})?;
    let addr = p.local_addr();
    let sub = std::thread::spawn(move || {
        let mut o = SubscriberOptions::new("not-the-token");
        o.device = Some(common::rdma_devices().1);
        RdmaSubscriber::connect(addr, 11, &o).err().map(|e| e.to_string())
    });
    let pub_err = p.accept(Duration::from_secs(30)).err().map(|e| e.to_string()).unwrap_or_default();
    let sub_err = sub.join().map_err(|_| "subscriber thread panicked")?.unwrap_or_default();
    // Each side detects the other does not know the token; nothing is exchanged after that.
    assert!(sub_err.contains("failed authentication"), "subscriber: {sub_err}");
    assert!(pub_err.contains("authentication") || pub_err.contains("closed"), "publisher: {pub_err}");
    assert!(p.subscribers().is_empty());
    Ok(())
}

fn wrong_rkey() -> Result<(), Failed> {
    if !cfg!(tickbus_testing) {
        return Err(format!("this test arms a fault point: {}", tickbus_testkit::TESTING_BUILD).into());
    }
    let mut p = publisher(Mode::Lossy, 64, WriteMode::Write, |o| o.signal_every = 1)?;
    let mut peer = Peer::spawn("sub-idle", &p, 0, &[("TICKBUS_RT_CORRUPT_RKEY", "1")]);
    p.accept(Duration::from_secs(30))?;
    peer.expect("attached")?;
    let mut buf = [0u8; PAYLOAD];
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut pos = 0;
    let dropped = loop {
        fill(pos, &mut buf);
        p.publish(&buf)?;
        pos += 1;
        if let Some(d) = p.take_dropped().into_iter().next() {
            break d;
        }
        assert!(Instant::now() < deadline, "a WRITE with a wrong rkey was never reported");
    };
    let text = dropped.1.to_string();
    assert!(text.contains("REM_ACCESS_ERR") && text.contains("rkey"), "{text}");
    assert!(p.subscribers().is_empty());
    peer.finish()
}

/// With a short retry budget (timeout 12: 16.8 ms per try, retry_cnt 3: about 70 ms) and with
/// the defaults (timeout 14, retry_cnt 6: about 0.5 s), a killed subscriber is reported, and
/// publishing never blocks on it meanwhile.
fn killed_subscriber() -> Result<(), Failed> {
    killed_subscriber_with(|o| {
        o.rc.timeout = 12;
        o.rc.retry_cnt = 3;
        o.signal_every = 1;
    })?;
    killed_subscriber_with(|_| {})
}

fn killed_subscriber_with(tune: impl FnOnce(&mut PublisherOptions)) -> Result<(), Failed> {
    let mut p = publisher(Mode::Lossy, 64, WriteMode::Write, tune)?;
    let mut peer = Peer::spawn("sub-idle", &p, 0, &[]);
    p.accept(Duration::from_secs(30))?;
    peer.expect("attached")?;
    let mut buf = [0u8; PAYLOAD];
    for pos in 0..10 {
        publish_retrying(&mut p, pos, &mut buf)?;
    }
    peer.child.kill()?;
    peer.child.wait()?;
    let t0 = Instant::now();
    let mut pos = 10;
    let dropped = loop {
        fill(pos, &mut buf);
        p.publish(&buf)?; // lossy: never blocks on the dead peer beyond the QP retry budget
        pos += 1;
        if let Some(d) = p.take_dropped().into_iter().next() {
            break d;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "a dead subscriber was not reported within 20 s");
    };
    // Whichever notices first reports it: the WRITE that exhausts its retries, or the acceptor
    // thread seeing the dead process's control socket close (usually first on one host; a
    // powered-off host, which closes nothing, is the two-host suite's case).
    let text = dropped.1.to_string();
    assert!(
        text.contains("RETRY_EXC_ERR")
            || text.contains("WR_FLUSH_ERR")
            || text.contains("closed its control connection"),
        "{text}"
    );
    eprintln!("dead subscriber reported after {:?}: {text}", t0.elapsed());
    Ok(())
}

/// Publisher: no allocation, and no syscall but exactly one doorbell write per post on
/// Soft-RoCE (none on NICs with user-space doorbells). Subscriber: no allocation, no syscall.
fn hot_path() -> Result<(), Failed> {
    let n = 2_000u64;
    let mut p = publisher(Mode::Lossy, 4096, WriteMode::Write, |_| {})?;
    let mut peer = Peer::spawn("sub-hot", &p, n, &[]);
    p.accept(Duration::from_secs(30))?;
    peer.expect("warm")?; // subscriber warmed up and is measuring
                          // The subscriber is already polling: publish 4n (lossy: it measures n of them).
    let rxe = p.device().starts_with("rxe");
    common::publish_with_doorbells_only(p, 4 * n, 1, rxe, |p, m| usize::from(p.publish(m[0]).is_ok()));
    let line = peer.expect("counts")?;
    assert_eq!(line, format!("counts syscalls 0 allocs 0 delivered {n}"), "subscriber");
    peer.finish()
}

/// Bursts of 8 arrive in order, and on Soft-RoCE cost one doorbell write per burst, not per
/// message.
fn batch() -> Result<(), Failed> {
    let n = 4_000u64;
    let mut p = publisher(Mode::Reliable, 1024, WriteMode::Write, |_| {})?;
    let mut peer = Peer::spawn("sub-all", &p, n, &[]);
    p.accept(Duration::from_secs(30))?;
    let rxe = p.device().starts_with("rxe");
    // An empty burst at position 0 publishes nothing (it used to underflow computing room).
    assert_eq!(p.publish_batch(&[])?, (0, 0));
    let mut bufs = vec![[0u8; PAYLOAD]; 8];
    let w0 = common::process_write_syscalls();
    let mut pos = 0u64;
    let mut bursts = 0u64;
    let deadline = Instant::now() + Duration::from_secs(120);
    while pos < n {
        let k = 8.min(n - pos) as usize;
        for (j, b) in bufs.iter_mut().take(k).enumerate() {
            fill(pos + j as u64, b);
        }
        let refs: Vec<&[u8]> = bufs[..k].iter().map(|b| &b[..]).collect();
        match p.publish_batch(&refs) {
            Ok((first, m)) => {
                assert_eq!(first, pos);
                pos += m as u64;
                bursts += 1;
            }
            Err(RdmaError::Claim(ClaimError::Full { .. })) => assert!(Instant::now() < deadline, "stuck on Full"),
            Err(e) => return Err(e.into()),
        }
        assert!(p.take_dropped().is_empty());
    }
    let writes = common::process_write_syscalls() - w0;
    assert_eq!(peer.expect("ok")?, format!("ok {n}"));
    // `refs` allocates per burst above; the doorbell count is what this test is about.
    assert_eq!(writes, if rxe { bursts } else { 0 }, "{bursts} bursts");
    assert!(bursts < n / 4, "bursts were not batched: {bursts}");
    peer.finish()
}

/// A subscriber learns that its publisher went away (process exit closes the control channel).
fn publisher_gone() -> Result<(), Failed> {
    let mut p = publisher(Mode::Lossy, 64, WriteMode::Write, |_| {})?;
    let mut peer = Peer::spawn("sub-watch", &p, 0, &[]);
    p.accept(Duration::from_secs(30))?;
    peer.expect("attached")?;
    drop(p);
    let t0 = Instant::now();
    peer.expect("publisher gone")?;
    assert!(t0.elapsed() < Duration::from_secs(10), "noticed after {:?}", t0.elapsed());
    peer.finish()
}

/// Subscriber roles (child processes).
fn child(role: &str) -> Result<(), Failed> {
    let addr = std::env::var("TICKBUS_RT_ADDR")?.parse()?;
    let n: u64 = std::env::var("TICKBUS_RT_COUNT")?.parse()?;
    let o = SubscriberOptions::new(TOKEN);
    #[cfg(tickbus_testing)]
    tickbus::fault::corrupt_rkey(std::env::var("TICKBUS_RT_CORRUPT_RKEY").map(|v| v.parse().unwrap_or(0)).unwrap_or(0));
    let mut s = RdmaSubscriber::connect(addr, 11, &o)?;
    let mut stdin = std::io::stdin().lines();
    let deadline = Instant::now() + Duration::from_secs(120);
    let read_in_order = |s: &mut RdmaSubscriber, from: u64, count: u64| -> Result<(), Failed> {
        let mut next = from;
        while next < from + count {
            match s.try_recv()? {
                Some(Recv::Message(m)) if m.position == next && intact(next, m.payload) => next += 1,
                Some(other) => return Err(format!("expected {next}, got {other:?}").into()),
                None if Instant::now() > deadline => return Err(format!("stalled at {next}").into()),
                None => std::hint::spin_loop(),
            }
        }
        Ok(())
    };
    match role {
        "sub-all" => {
            let stall: u64 = std::env::var("TICKBUS_RT_STALL_AT").map(|v| v.parse().unwrap_or(n)).unwrap_or(n).min(n);
            read_in_order(&mut s, 0, stall)?;
            std::thread::sleep(Duration::from_millis(300));
            read_in_order(&mut s, stall, n - stall)?;
            println!("ok {n}");
        }
        "sub-quiet" => {
            read_in_order(&mut s, 0, n)?;
            // Nothing more comes: poll the empty ring for a second (far past the quiet mark),
            // then stay connected until the publisher has looked.
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(1) {
                if let Some(r) = s.try_recv()? {
                    return Err(format!("nothing was published past {n}, got {r:?}").into());
                }
            }
            println!("ok {n}");
            let _ = stdin.next();
        }
        "sub-pause" => {
            println!("attached");
            read_in_order(&mut s, 0, n)?;
            println!("paused");
            let _ = stdin.next();
            let gap = loop {
                match s.try_recv()? {
                    Some(Recv::Gap(g)) => break g,
                    Some(other) => return Err(format!("expected a gap, got {other:?}").into()),
                    None => std::hint::spin_loop(),
                }
            };
            println!("gap {} {}", gap.expected, gap.resumed_at);
            read_in_order(&mut s, gap.resumed_at, 20)?;
            println!("done");
        }
        "sub-verify" => {
            println!("attached");
            let (mut delivered, mut gaps) = (0u64, 0u64);
            while delivered < n || gaps == 0 {
                match s.try_recv()? {
                    Some(Recv::Message(m)) => {
                        if !intact(m.position, m.payload) {
                            return Err(format!("torn message at {}", m.position).into());
                        }
                        delivered += 1;
                    }
                    Some(Recv::Gap(_)) => gaps += 1,
                    None if Instant::now() > deadline => return Err("verifier timed out".into()),
                    None => std::hint::spin_loop(),
                }
            }
            println!("delivered {delivered} gaps {gaps}");
        }
        "sub-watch" => {
            println!("attached");
            let mut idle = 0u32;
            loop {
                if s.try_recv()?.is_some() {
                    continue;
                }
                idle += 1;
                if idle.is_multiple_of(1000) && s.publisher_gone() {
                    println!("publisher gone");
                    break;
                }
                if Instant::now() > deadline {
                    return Err("never noticed the publisher leave".into());
                }
            }
        }
        "sub-idle" => {
            println!("attached");
            while stdin.next().is_some() {}
        }
        "sub-hot" => {
            // Measured on a thread that traps every syscall; the poll loop reads memory only.
            common::poll_trapped_and_report(s, n, |s| match s.try_recv() {
                Ok(Some(Recv::Message(m))) => {
                    std::hint::black_box(m.payload[0]);
                    true
                }
                _ => false,
            });
            while stdin.next().is_some() {} // stay connected until the publisher is done
        }
        other => return Err(format!("unknown role {other}").into()),
    }
    Ok(())
}
