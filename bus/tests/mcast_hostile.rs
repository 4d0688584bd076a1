//! ud-mcast against forged, replayed and foreign datagrams, on real verbs (Soft-RoCE in the
//! rig's guest): a second publisher run on the same stream, a forged frame far ahead (and one
//! that would overflow), senders without the stream's queue key, and a recovery that fails
//! without ever blocking the subscriber. Without RDMA devices these report ignored unless
//! TICKBUS_REQUIRE_RDMA=1.
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use libtest_mimic::{Failed, Trial};
use tickbus::mcast::{
    frame, McastError, McastPublisher, McastPublisherOptions, McastSubscriber, McastSubscriberOptions,
};
use tickbus::Recv;

mod common;
use common::{fill, intact, RawSender};

const PAYLOAD: usize = 64;
const STREAM: u32 = 23;
const TOKEN: &str = "mcast-hostile-token";

fn main() {
    let tests = vec![
        Trial::test("a_second_publisher_run_on_the_stream_is_ignored_while_the_first_lives", second_run),
        Trial::test("forged_frames_far_ahead_or_at_the_end_of_time_do_not_stall_the_stream", forged_jumps),
        Trial::test("senders_without_the_stream_token_s_queue_key_are_never_heard", qkey),
        Trial::test("a_failing_recovery_never_blocks_a_poll", recovery_never_blocks),
    ];
    common::rdma_test_main("mcast_hostile", "TICKBUS_MH_ROLE", |_| Err("no roles".into()), tests);
}

fn publisher(group: Ipv4Addr, token: Option<&str>) -> Result<McastPublisher, Failed> {
    let mut opts = McastPublisherOptions::default();
    opts.device = Some(common::rdma_devices().0);
    opts.token = token.map(|t| t.as_bytes().to_vec());
    Ok(McastPublisher::new(group, STREAM, &opts)?)
}

fn subscriber(group: Ipv4Addr, token: Option<&str>) -> Result<McastSubscriber, Failed> {
    let mut so = McastSubscriberOptions::default();
    so.device = Some(common::rdma_devices().1);
    so.depth = 256;
    so.token = token.map(|t| t.as_bytes().to_vec());
    Ok(McastSubscriber::join(group, STREAM, &so)?)
}

fn send(p: &mut McastPublisher, content: u64) -> Result<u64, Failed> {
    let mut buf = [0u8; PAYLOAD];
    fill(content, &mut buf);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match p.publish(&buf) {
            Ok(seq) => return Ok(seq),
            Err(McastError::SendQueueFull { .. }) if Instant::now() < deadline => std::hint::spin_loop(),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Everything the subscriber delivers within `quiet` of the last delivery (or `limit`), as
/// (position, intact for that position), with gaps as (u64::MAX, false). Frame errors are
/// counted and skipped (a forged datagram is reported once, as it should be).
fn drain(s: &mut McastSubscriber, quiet: Duration) -> Result<Vec<(u64, bool)>, Failed> {
    let mut got = Vec::new();
    let mut last = Instant::now();
    while last.elapsed() < quiet {
        match s.try_recv() {
            Ok(Some(Recv::Message(m))) => {
                got.push((m.position, intact(m.position, m.payload)));
                last = Instant::now();
            }
            Ok(Some(Recv::Gap(g))) => {
                got.push((u64::MAX, false));
                eprintln!("gap {g:?}");
                last = Instant::now();
            }
            Ok(None) => std::hint::spin_loop(),
            Err(e) if e.is_retryable() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(got)
}

/// Two publishers on one stream and group (a second run started by mistake, or a forger
/// replaying a captured session): the subscriber follows the first and delivers exactly its
/// messages, in order, once each, never the other's.
fn second_run() -> Result<(), Failed> {
    let group = Ipv4Addr::new(239, 77, 3, 1);
    let mut first = publisher(group, None)?;
    let mut s = subscriber(group, None)?;
    let mut second = publisher(group, None)?;
    for k in 0..5 {
        send(&mut first, k)?;
    }
    std::thread::sleep(Duration::from_millis(100));
    for k in 5..105 {
        send(&mut second, k ^ 0xdead)?; // its own sequence 0.., other content
        send(&mut first, k)?;
    }
    let got = drain(&mut s, Duration::from_millis(500))?;
    let want: Vec<(u64, bool)> = (0..105).map(|k| (k, true)).collect();
    assert_eq!(got, want, "delivered something other than the first run's 105 messages in order");
    assert_eq!(s.stats().new_sessions, 0);
    assert!(s.stats().unconfirmed >= 100, "{:?}", s.stats());
    Ok(())
}

/// A forger that knows the stream's session sends one frame at sequence 2^40 and one at
/// u64::MAX: the first is not believed from one frame, the second is malformed; the real
/// stream around them is delivered whole, in order.
fn forged_jumps() -> Result<(), Failed> {
    let group = Ipv4Addr::new(239, 77, 3, 2);
    let mut p = publisher(group, None)?;
    let mut s = subscriber(group, None)?;
    let mut raw = RawSender::new(&common::rdma_devices().0, group, p.qkey())?;
    let forged = |seq: u64| {
        let mut v = vec![0; frame::HEADER_BYTES + PAYLOAD];
        frame::write(&mut v, &frame::FrameHeader::new(STREAM, p.session(), seq, PAYLOAD), &[7; PAYLOAD]);
        v
    };
    let (far, end) = (forged(1 << 40), forged(u64::MAX));
    for k in 0..10 {
        send(&mut p, k)?;
    }
    std::thread::sleep(Duration::from_millis(50));
    raw.send(&far)?;
    raw.send(&end)?;
    for k in 10..20 {
        send(&mut p, k)?;
    }
    let got = drain(&mut s, Duration::from_millis(500))?;
    let want: Vec<(u64, bool)> = (0..20).map(|k| (k, true)).collect();
    assert_eq!(got, want, "the forged frames broke the stream");
    assert_eq!((s.stats().unconfirmed, s.stats().malformed), (1, 1), "{:?}", s.stats());
    Ok(())
}

/// A stream with a token has a queue key derived from it: a subscriber without the token (the
/// public default key) hears nothing of it, and a sender without it is not heard by the
/// stream's subscribers. Recovery refuses a subscriber whose key differs.
fn qkey() -> Result<(), Failed> {
    let group = Ipv4Addr::new(239, 77, 3, 3);
    let mut p = publisher(group, Some(TOKEN))?;
    let mut with = subscriber(group, Some(TOKEN))?;
    let mut without = subscriber(group, None)?;
    assert_ne!(with.qkey(), without.qkey());
    assert_eq!(with.qkey(), p.qkey());
    let mut stranger = publisher(group, None)?;
    for k in 0..20 {
        send(&mut p, k)?;
        send(&mut stranger, k ^ 0xbeef)?;
    }
    let got = drain(&mut with, Duration::from_millis(500))?;
    assert_eq!(got, (0..20).map(|k| (k, true)).collect::<Vec<_>>(), "the stream's subscriber");
    let heard = drain(&mut without, Duration::from_millis(300))?;
    assert!(heard.iter().all(|(pos, ok)| !*ok || *pos >= 20), "heard the token stream without the token");
    assert_eq!(with.stats().unconfirmed + with.stats().new_sessions, 0, "{:?}", with.stats());
    let at = p.listen_recovery("127.0.0.1:0".parse()?, TOKEN)?;
    let refused = without.connect_recovery(at, TOKEN.as_bytes(), 16, Duration::from_secs(10));
    assert!(refused.as_ref().err().is_some_and(|e| e.to_string().contains("queue key")), "{refused:?}");
    Ok(())
}

/// The publisher disappears with a gap outstanding: the subscriber's recovery READ fails after
/// the QP's retry budget, and no single poll waits for it.
fn recovery_never_blocks() -> Result<(), Failed> {
    let group = Ipv4Addr::new(239, 77, 3, 4);
    let mut p = publisher(group, None)?;
    let at = p.listen_recovery("127.0.0.1:0".parse()?, TOKEN)?;
    let mut so = McastSubscriberOptions::default();
    so.device = Some(common::rdma_devices().1);
    so.depth = 16;
    let mut s = McastSubscriber::join(group, STREAM, &so)?;
    s.connect_recovery(at, TOKEN.as_bytes(), 64, Duration::from_secs(30))?;
    for k in 0..100 {
        send(&mut p, k)?; // 16 receive slots: most are dropped
    }
    p.flush(Duration::from_secs(10))?;
    std::thread::sleep(Duration::from_millis(300));
    let mut next = 0;
    while let Some(Recv::Message(m)) = s.try_recv()? {
        assert_eq!(m.position, next);
        next += 1;
    }
    p.heartbeat()?;
    std::thread::sleep(Duration::from_millis(300));
    drop(p);
    let (t0, mut worst) = (Instant::now(), Duration::ZERO);
    let gap = loop {
        let c = Instant::now();
        let r = s.try_recv()?;
        worst = worst.max(c.elapsed());
        match r {
            Some(Recv::Gap(g)) => break g,
            Some(Recv::Message(m)) => return Err(format!("message {} from a gone publisher", m.position).into()),
            None if t0.elapsed() > Duration::from_secs(20) => return Err("no gap within 20 s".into()),
            None => {}
        }
    };
    eprintln!("gap {gap:?} after {:?}; the longest poll took {worst:?}", t0.elapsed());
    assert_eq!((gap.expected, gap.resumed_at), (next, 100));
    assert!(worst < Duration::from_millis(50), "a poll waited {worst:?} for the failing READ");
    assert!(s.take_recovery_error().is_some());
    Ok(())
}
