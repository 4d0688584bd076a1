//! The ud-mcast transport on real verbs (Soft-RoCE in the rig's guest): a publisher on one
//! device, subscribers as separate processes on the other device and on the publisher's own,
//! data checked byte for byte. Without RDMA devices these report ignored with the reason, unless
//! TICKBUS_REQUIRE_RDMA=1 (the rig sets it).
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use libtest_mimic::{Failed, Trial};
use tickbus::mcast::{
    frame, McastError, McastPublisher, McastPublisherOptions, McastSubscriber, McastSubscriberOptions, DEFAULT_QKEY,
};
use tickbus::{Gap, Recv};

mod common;
use common::{fill, intact, Subprocess};

#[global_allocator]
static GLOBAL: common::Counting = common::Counting;

const PAYLOAD: usize = 64;
const STREAM: u32 = 21;
const TOKEN: &str = "mcast-history-token";

fn main() {
    let tests = vec![
        Trial::test("subscribers_on_both_devices_get_every_message_once_in_order_intact", || in_order(1)),
        Trial::test("publish_batch_keeps_order_and_rings_one_doorbell_per_burst", || in_order(8)),
        Trial::test("a_chain_cut_short_by_the_provider_sends_no_sequence_twice_and_never_stalls", cut_chain),
        Trial::test("a_subscriber_that_stops_polling_reports_exactly_what_it_lost_heartbeat_included", paused),
        Trial::test("with_recovery_a_paused_subscriber_gets_every_message_from_the_history", paused_recovered),
        Trial::test("losses_older_than_the_history_are_reported_and_the_rest_recovered", paused_beyond_history),
        Trial::test("recovery_refuses_a_wrong_token_on_both_sides", recovery_wrong_token),
        Trial::test("a_publisher_gone_before_recovery_gives_a_gap_and_a_reason_not_a_hang", recovery_publisher_gone),
        Trial::test("foreign_and_corrupt_datagrams_are_reported_and_the_stream_goes_on", foreign),
        Trial::test("oversized_messages_and_unicast_groups_are_refused_before_anything_is_sent", refusals),
        Trial::test("try_recv_into_copies_its_length_and_leaves_another_for_try_recv", recv_into),
        Trial::test("steady_state_publish_and_poll_make_no_allocation_and_only_doorbell_syscalls", hot_path),
        Trial::test("steady_state_publish_batch_makes_no_allocation_and_one_doorbell_per_burst", hot_path_batch),
    ];
    common::rdma_test_main("mcast_transport", "TICKBUS_MC_ROLE", child, tests);
}

fn publisher(group: Ipv4Addr) -> Result<McastPublisher, Failed> {
    let mut opts = McastPublisherOptions::default();
    opts.device = Some(common::rdma_devices().0);
    Ok(McastPublisher::new(group, STREAM, &opts)?)
}

/// Publishes the message for `seq` (retrying while the send queue is full).
fn publish(p: &mut McastPublisher, buf: &mut [u8]) -> Result<(), Failed> {
    fill(p.next_seq(), buf);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match p.publish(buf) {
            Ok(_) => return Ok(()),
            Err(McastError::SendQueueFull { .. }) if Instant::now() < deadline => std::hint::spin_loop(),
            Err(e) => return Err(e.into()),
        }
    }
}

/// A subscriber process on `device`, joined to `group` when this returns.
fn spawn(role: &str, group: Ipv4Addr, device: &str, extra: &[(&str, String)]) -> Result<Subprocess, Failed> {
    let mut env = vec![
        ("TICKBUS_MC_ROLE", role.to_owned()),
        ("TICKBUS_MC_GROUP", group.to_string()),
        ("TICKBUS_RDMA_DEVICE", device.to_owned()),
    ];
    env.extend(extra.iter().cloned());
    let mut p = Subprocess::start(&env)?;
    p.expect("joined")?;
    Ok(p)
}

/// 5,000 messages in rounds of 200 (each round fits the subscribers' receive slots, so nothing
/// may be lost), published one at a time (`burst` 1) or with `publish_batch` in bursts of
/// `burst`: both subscribers deliver every one, once, in order, intact, and report no gap. On
/// Soft-RoCE a burst costs one doorbell write, not one per message.
fn in_order(burst: usize) -> Result<(), Failed> {
    let group = Ipv4Addr::new(239, 77, 1, if burst == 1 { 1 } else { 20 });
    let (local, peer) = common::rdma_devices();
    let rxe = local.starts_with("rxe");
    let mut p = publisher(group)?;
    let mut subs = vec![spawn("sub-order", group, &peer, &[])?, spawn("sub-order", group, &local, &[])?];
    let (posts, doorbells) = publish_in_rounds(&mut p, &mut subs, burst, 5000)?;
    if rxe {
        assert_eq!(doorbells, posts, "one doorbell write per post");
    }
    if burst > 1 {
        assert!(posts <= 5000 / burst as u64 + 25 * 2, "bursts were not batched: {posts} posts");
    }
    finish_in_order(p, subs, 5000)
}

/// Publishes from the publisher's next sequence number up to `total` messages, in rounds ending
/// at multiples of 200 (each round fits the subscribers' receive slots) and waiting for every
/// subscriber to reach the round's end; one at a time or in bursts of `burst`. Returns the posts
/// made and the doorbell writes they cost.
fn publish_in_rounds(
    p: &mut McastPublisher,
    subs: &mut [Subprocess],
    burst: usize,
    total: u64,
) -> Result<(u64, u64), Failed> {
    let (mut posts, mut doorbells) = (0u64, 0u64);
    let mut bufs = vec![[0u8; PAYLOAD]; burst];
    while p.next_seq() < total {
        let end = ((p.next_seq() / 200 + 1) * 200).min(total);
        while p.next_seq() < end {
            let (pos, k) = (p.next_seq(), burst.min((end - p.next_seq()) as usize));
            for (j, b) in bufs[..k].iter_mut().enumerate() {
                fill(pos + j as u64, b);
            }
            let w0 = common::process_write_syscalls();
            let sent = if burst == 1 {
                publish(p, &mut bufs[0])?;
                1
            } else {
                publish_burst(p, &bufs[..k].iter().map(|b| &b[..]).collect::<Vec<_>>())?
            };
            doorbells += common::process_write_syscalls() - w0;
            posts += 1;
            assert_eq!(p.next_seq(), pos + sent as u64);
        }
        for s in subs.iter_mut() {
            s.say(&format!("until {end}"))?;
        }
        for s in subs.iter_mut() {
            assert_eq!(s.expect("at")?, format!("at {end}"));
        }
    }
    Ok((posts, doorbells))
}

/// Flushes, then checks every subscriber delivered `total` messages once each, no gap.
fn finish_in_order(mut p: McastPublisher, subs: Vec<Subprocess>, total: u64) -> Result<(), Failed> {
    p.flush(Duration::from_secs(10))?;
    for mut s in subs {
        s.say("stats")?;
        assert_eq!(s.expect("stats")?, format!("stats delivered {total} missed 0 gaps 0 malformed 0 late 0"));
        s.finish()?;
    }
    Ok(())
}

/// A chain the provider takes only part of (fault injection: 3 of 8 go out, the 4th is
/// refused): `publish_batch` returns the 3 as a short burst and the refusal with the next call.
/// Then 3,000 messages in all reach the subscriber once each, in order, intact, no gap: no
/// sequence number was sent twice or skipped, and no slot of the refused WRs was left marked
/// busy (their completions never come: the next burst would stall on `SendQueueFull`), nor any
/// other as the 1024-slot history wraps twice.
fn cut_chain() -> Result<(), Failed> {
    if !cfg!(tickbus_testing) {
        return Err(format!("this test arms a fault point: {}", tickbus_testkit::TESTING_BUILD).into());
    }
    let group = Ipv4Addr::new(239, 77, 1, 22);
    let mut p = publisher(group)?;
    let mut subs = vec![spawn("sub-order", group, &common::rdma_devices().1, &[])?];
    let mut bufs = [[0u8; PAYLOAD]; 8];
    for (j, b) in bufs.iter_mut().enumerate() {
        fill(j as u64, b);
    }
    let refs: Vec<&[u8]> = bufs.iter().map(|b| &b[..]).collect();
    #[cfg(tickbus_testing)]
    tickbus::fault::cut_next_ud_chain(3);
    assert_eq!(p.publish_batch(&refs)?, (0, 3), "a short burst of what the provider took");
    let e = p.publish_batch(&refs[3..]).err().ok_or("the refusal was not reported by the next call")?;
    assert!(e.to_string().contains("fault injected"), "{e}");
    assert_eq!(p.next_seq(), 3, "the refused messages took no sequence number");
    publish_in_rounds(&mut p, &mut subs, 8, 3000)?;
    finish_in_order(p, subs, 3000)
}

/// Sends `burst` with `publish_batch` (retrying while the send queue is full); returns how many
/// went out (all of them unless the queue filled part-way).
fn publish_burst(p: &mut McastPublisher, burst: &[&[u8]]) -> Result<usize, Failed> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let first = p.next_seq();
        match p.publish_batch(burst) {
            Ok((at, n)) => {
                assert_eq!(at, first, "a burst starts at the next sequence number");
                return Ok(n);
            }
            Err(McastError::SendQueueFull { .. }) if Instant::now() < deadline => std::hint::spin_loop(),
            Err(e) => return Err(e.into()),
        }
    }
}

/// How a paused subscriber came out of its pause.
struct PauseResult {
    delivered: u64,
    missed: u64,
    gaps: u64,
    recovered: u64,
    line: String,
}

/// A subscriber with 64 receive slots stops polling while `total` messages go out, then drains
/// what its slots held and polls until it has accounted for all `total` (the publisher's
/// heartbeat reveals the tail). With `history`, the publisher offers recovery from that many
/// slots and the subscriber connects to it. The subscriber checks order and content itself,
/// and handles the gap (and recovers) on a thread where any syscall but the verbs doorbell, or
/// any allocation, is counted: both must be zero.
fn pause(group: Ipv4Addr, total: u64, history: Option<u32>) -> Result<PauseResult, Failed> {
    let mut opts = McastPublisherOptions::default();
    opts.device = Some(common::rdma_devices().0);
    opts.history = history.unwrap_or(opts.history);
    let mut p = McastPublisher::new(group, STREAM, &opts)?;
    let mut env = vec![("TICKBUS_MC_DEPTH", "64".to_owned()), ("TICKBUS_MC_COUNT", total.to_string())];
    if history.is_some() {
        env.push(("TICKBUS_MC_RECOVERY", p.listen_recovery("127.0.0.1:0".parse()?, TOKEN)?.to_string()));
    }
    let mut s = spawn("sub-pause", group, &common::rdma_devices().1, &env)?;
    if history.is_some() {
        p.accept_recovery(Duration::from_secs(30))?;
        s.expect("recovery on")?;
    }
    let mut buf = [0u8; PAYLOAD];
    for _ in 0..total {
        publish(&mut p, &mut buf)?;
    }
    p.flush(Duration::from_secs(10))?;
    std::thread::sleep(Duration::from_millis(300)); // let the fabric deliver or drop
    s.say("go")?;
    s.expect("drained")?;
    p.heartbeat()?;
    let line = s.expect("result")?;
    let f: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    let [delivered, missed, gaps, heartbeats, recovered, expected, syscalls, allocs] = f[..] else {
        return Err(format!("bad result line {line:?}").into());
    };
    assert_eq!((syscalls, allocs), (0, 0), "{line}: the gap or recovery path made a syscall or allocated");
    assert_eq!(delivered + missed, total, "{line}: a message neither delivered nor reported lost");
    assert_eq!(expected, total, "{line}: the tail loss was not learnt from the heartbeat");
    assert!(heartbeats >= 1, "{line}");
    s.finish()?;
    eprintln!("{total} sent, history {history:?}: delivered missed gaps heartbeats recovered expected = {line}");
    Ok(PauseResult { delivered, missed, gaps, recovered, line })
}

/// Without recovery: it delivers at most what its 64 slots held and reports the rest as lost.
fn paused() -> Result<(), Failed> {
    let r = pause(Ipv4Addr::new(239, 77, 1, 2), 300, None)?;
    assert!(r.delivered <= 64, "{}: more delivered than receive slots", r.line);
    assert!(r.gaps >= 1 && r.recovered == 0, "{}: the loss was not reported", r.line);
    Ok(())
}

/// With recovery from a 1024-message history: every one of the 300 is delivered, in order and
/// intact, most of them read back from the publisher's history; nothing is reported lost.
fn paused_recovered() -> Result<(), Failed> {
    let r = pause(Ipv4Addr::new(239, 77, 1, 6), 300, Some(1024))?;
    assert_eq!((r.delivered, r.missed, r.gaps), (300, 0, 0), "{}", r.line);
    assert!(r.recovered >= 300 - 64, "{}: fewer recovered than the receive slots could not hold", r.line);
    Ok(())
}

/// With a 256-message history and 1,000 sent: what the history still holds is recovered, what
/// it no longer holds is reported in one gap, nothing is invented.
fn paused_beyond_history() -> Result<(), Failed> {
    let r = pause(Ipv4Addr::new(239, 77, 1, 7), 1000, Some(256))?;
    assert!(r.recovered >= 255 && r.recovered <= 256, "{}: the history's messages were not recovered", r.line);
    assert!(r.missed >= 1000 - 64 - 256, "{}: more delivered than slots and history hold", r.line);
    assert!(r.gaps >= 1, "{}", r.line);
    Ok(())
}

/// A publisher and a subscriber, and how the publisher's accept and the subscriber's connect of
/// recovery ended.
type RecoveryPair = (McastPublisher, McastSubscriber, Result<(), McastError>, Result<(), McastError>);

/// A publisher offering recovery and a 16-slot subscriber of `group` presenting `token`.
fn recovery_pair(group: Ipv4Addr, token: &[u8]) -> Result<RecoveryPair, Failed> {
    let mut p = publisher(group)?;
    let at = p.listen_recovery("127.0.0.1:0".parse()?, TOKEN)?;
    let mut so = McastSubscriberOptions::default();
    so.device = Some(common::rdma_devices().1);
    so.depth = 16;
    let mut s = McastSubscriber::join(group, STREAM, &so)?;
    let (pe, se) = std::thread::scope(|sc| {
        let accepting = sc.spawn(|| p.accept_recovery(Duration::from_secs(30)));
        let se = s.connect_recovery(at, token, 64, Duration::from_secs(30));
        (accepting.join().expect("accept thread"), se)
    });
    Ok((p, s, pe, se))
}

/// A subscriber with the wrong token gets no history; both sides say why.
fn recovery_wrong_token() -> Result<(), Failed> {
    let (_p, s, pe, se) = recovery_pair(Ipv4Addr::new(239, 77, 1, 8), b"not-the-token")?;
    let se = se.err().ok_or("a wrong token got the history")?.to_string();
    let pe = pe.err().ok_or("the publisher accepted a wrong token")?.to_string();
    assert!(se.contains("wrong token"), "{se}");
    assert!(pe.contains("wrong token"), "{pe}");
    assert!(!s.recovers());
    Ok(())
}

/// The publisher disappears before a gap is recovered: the READ fails (its QP is gone), the
/// subscriber reports the gap, turns recovery off and says why; it does not hang.
fn recovery_publisher_gone() -> Result<(), Failed> {
    let (mut p, mut s, pe, se) = recovery_pair(Ipv4Addr::new(239, 77, 1, 9), TOKEN.as_bytes())?;
    pe?;
    se?;
    let mut buf = [0u8; PAYLOAD];
    for _ in 0..100 {
        publish(&mut p, &mut buf)?; // 16 receive slots: most of these are dropped
    }
    p.flush(Duration::from_secs(10))?;
    std::thread::sleep(Duration::from_millis(300));
    let mut next = 0;
    while let Some(r) = s.try_recv()? {
        match r {
            Recv::Message(m) if m.position == next => next += 1,
            other => return Err(format!("{other:?} while draining at {next}").into()),
        }
    }
    assert!(next <= 16, "delivered {next} with 16 receive slots");
    p.heartbeat()?; // reveals the loss; lands in a free slot
    std::thread::sleep(Duration::from_millis(300));
    drop(p);
    let t0 = Instant::now();
    match poll(&mut s)? {
        Event::Gap(g) => assert_eq!((g.expected, g.resumed_at), (next, 100)),
        e => return Err(format!("expected the gap, got {e:?}").into()),
    }
    assert!(t0.elapsed() < Duration::from_secs(10), "took {:?}", t0.elapsed());
    assert!(!s.recovers());
    let e = s.take_recovery_error().ok_or("no recovery error")?.to_string();
    assert!(e.contains("recovery READ") || e.contains("did not complete"), "{e}");
    assert_eq!(s.stats().recovery_failures, 1);
    eprintln!("publisher gone: gap after {:?}: {e}", t0.elapsed());
    Ok(())
}

/// On one subscriber: a datagram with a foreign magic, one of another frame version, one cut
/// short, and a frame of another stream arrive between real messages. The first three come
/// back as errors that say what was wrong; the other stream is skipped; no message is lost.
fn foreign() -> Result<(), Failed> {
    let group = Ipv4Addr::new(239, 77, 1, 3);
    let (local, peer) = common::rdma_devices();
    let mut p = publisher(group)?;
    let mut so = McastSubscriberOptions::default();
    so.device = Some(peer);
    so.depth = 64;
    let mut s = McastSubscriber::join(group, STREAM, &so)?;
    let mut raw = common::RawSender::new(&local, group, DEFAULT_QKEY)?;
    let mut bad_magic = frame_bytes(STREAM, 0);
    bad_magic[0] = b'X';
    let mut bad_version = frame_bytes(STREAM, 0);
    bad_version[4] = 9;
    let mut cut = frame_bytes(STREAM, 0);
    cut.truncate(40);
    let other_stream = frame_bytes(STREAM + 1, 0);
    let mut buf = [0u8; PAYLOAD];
    let mut seen = Vec::new();
    for (i, junk) in [bad_magic, bad_version, cut, other_stream].iter().enumerate() {
        publish(&mut p, &mut buf)?;
        seen.push(next_event(&mut s)?);
        raw.send(junk)?;
        if i < 3 {
            seen.push(next_event(&mut s)?);
        } else {
            // Another stream's frame is skipped without an event: wait until it was seen.
            let deadline = Instant::now() + Duration::from_secs(30);
            while s.stats().other_streams == 0 {
                assert!(s.try_recv()?.is_none(), "something besides the other stream's frame arrived");
                assert!(Instant::now() < deadline, "the other stream's frame never arrived");
            }
        }
    }
    publish(&mut p, &mut buf)?;
    seen.push(next_event(&mut s)?);
    let want = [
        "message 0",
        "error dropped a datagram on group 239.77.1.3: magic 0x434d4258 is not tickbus's",
        "message 1",
        "error dropped a datagram on group 239.77.1.3: frame version 9, this subscriber reads version 1",
        "message 2",
        "error dropped a datagram on group 239.77.1.3: the header says 64 message bytes but the datagram carries 8",
        "message 3",
        "message 4",
    ];
    assert_eq!(seen.len(), want.len(), "{seen:?}");
    for (got, want) in seen.iter().zip(want) {
        assert!(got.starts_with(want), "got {got:?}, want {want:?} (all: {seen:?})");
    }
    assert!(seen[1].contains("give the stream a group of its own"), "{}", seen[1]);
    let st = s.stats();
    assert_eq!((st.delivered, st.malformed, st.other_streams, st.gaps), (5, 3, 1, 0), "{st:?}");
    Ok(())
}

/// `try_recv_into` (issue 24: the `Subscribe` trait has it on every transport): a message of the
/// buffer's length is copied in; one of another length is reported and delivered again by
/// `try_recv`, so nothing is lost and nothing comes twice.
fn recv_into() -> Result<(), Failed> {
    use tickbus::RecvInto;
    let group = Ipv4Addr::new(239, 77, 1, 6);
    let mut p = publisher(group)?;
    let mut so = McastSubscriberOptions::default();
    so.device = Some(common::rdma_devices().1);
    so.depth = 64;
    let mut s = McastSubscriber::join(group, STREAM, &so)?;
    for (i, len) in [16, PAYLOAD, 16].into_iter().enumerate() {
        let mut buf = vec![0u8; len];
        fill(i as u64, &mut buf);
        p.publish(&buf)?;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let next = |s: &mut McastSubscriber| -> Result<RecvInto, Failed> {
        let mut out = [0u8; 16];
        loop {
            if let Some(r) = s.try_recv_into(&mut out)? {
                if let RecvInto::Message { position } = r {
                    assert!(intact(position, &out), "message {position} copied wrong");
                }
                return Ok(r);
            }
            if Instant::now() > deadline {
                return Err("the messages never arrived".into());
            }
        }
    };
    assert_eq!(next(&mut s)?, RecvInto::Message { position: 0 });
    assert_eq!(next(&mut s)?, RecvInto::OtherLength { position: 1, len: PAYLOAD });
    // Still there: try_recv delivers it, intact.
    match s.try_recv()? {
        Some(Recv::Message(d)) => assert!(d.position == 1 && intact(1, d.payload), "message 1 redelivered wrong"),
        other => return Err(format!("message 1 was lost: {:?}", other.map(|_| ())).into()),
    }
    assert_eq!(next(&mut s)?, RecvInto::Message { position: 2 });
    assert_eq!(s.stats().delivered, 3, "each delivered once");
    Ok(())
}

fn refusals() -> Result<(), Failed> {
    let group = Ipv4Addr::new(239, 77, 1, 4);
    let mut opts = McastPublisherOptions::default();
    opts.device = Some(common::rdma_devices().0);
    let e = McastPublisher::new(Ipv4Addr::new(10, 1, 2, 3), STREAM, &opts).err().ok_or("a unicast group was taken")?;
    assert!(e.to_string().contains("not an IPv4 multicast group"), "{e}");
    let e = McastSubscriber::join(Ipv4Addr::new(10, 1, 2, 3), STREAM, &McastSubscriberOptions::default())
        .err()
        .ok_or("a unicast group was joined")?;
    assert!(matches!(e, McastError::NotMulticast { .. }), "{e}");

    let mut p = publisher(group)?;
    let mut so = McastSubscriberOptions::default();
    so.device = Some(common::rdma_devices().1);
    so.depth = 16;
    let mut s = McastSubscriber::join(group, STREAM, &so)?;
    let big = vec![7u8; p.max_payload() + 1];
    let e = p.publish(&big).err().ok_or("an oversized message was sent")?;
    assert!(matches!(e, McastError::TooLarge { .. }) && e.to_string().contains("raise the netdev MTU"), "{e}");
    assert_eq!(p.next_seq(), 0, "a refused message took a sequence number");
    let ok = [7u8; PAYLOAD];
    let e = p.publish_batch(&[&ok, &big, &ok]).err().ok_or("a burst with an oversized message was sent")?;
    assert!(matches!(e, McastError::TooLarge { .. }), "{e}");
    assert_eq!(p.next_seq(), 0, "a refused burst sent part of itself");
    assert_eq!(p.publish_batch(&[])?, (0, 0), "an empty burst");
    let most = vec![7u8; p.max_payload()];
    assert_eq!(p.publish(&most)?, 0);
    match poll(&mut s)? {
        Event::Message(0, bytes) => assert_eq!(bytes, most),
        e => return Err(format!("expected message 0 of {} bytes, got {e:?}", most.len()).into()),
    }
    Ok(())
}

/// Publishing and polling in steady state: no allocation, and no syscall but the provider's
/// doorbell `write` per send on Soft-RoCE (none on a real NIC). The subscriber measures on a
/// thread that traps every syscall.
fn hot_path() -> Result<(), Failed> {
    let n = 2_000u64;
    let group = Ipv4Addr::new(239, 77, 1, 5);
    let p = publisher(group)?;
    let mut s = spawn("sub-hot", group, &common::rdma_devices().1, &[("TICKBUS_MC_COUNT", n.to_string())])?;
    s.expect("warm")?;
    // The subscriber is already polling: publish 4n (lossy: it measures n of them).
    let rxe = common::rdma_devices().0.starts_with("rxe");
    common::publish_with_doorbells_only(p, 4 * n, 1, rxe, |p, m| usize::from(p.publish(m[0]).is_ok()));
    assert_eq!(s.expect("counts")?, format!("counts syscalls 0 allocs 0 delivered {n}"), "subscriber");
    s.finish()
}

/// `publish_batch` in steady state, bursts of 8: no allocation, and no syscall but one doorbell
/// `write` per burst on Soft-RoCE (none on a real NIC). Delivery is `in_order(8)`'s to check.
fn hot_path_batch() -> Result<(), Failed> {
    let p = publisher(Ipv4Addr::new(239, 77, 1, 21))?;
    let rxe = common::rdma_devices().0.starts_with("rxe");
    common::publish_with_doorbells_only(p, 8_000, 8, rxe, |p, m| p.publish_batch(m).map_or(0, |(_, n)| n));
    Ok(())
}

#[derive(Debug)]
enum Event {
    Message(u64, Vec<u8>),
    Gap(Gap),
}

/// The next message or gap within 30 s; errors pass through.
fn poll(s: &mut McastSubscriber) -> Result<Event, McastError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match s.try_recv()? {
            Some(Recv::Message(m)) => return Ok(Event::Message(m.position, m.payload.to_vec())),
            Some(Recv::Gap(g)) => return Ok(Event::Gap(g)),
            None if Instant::now() > deadline => {
                return Err(McastError::Io {
                    what: "waiting for a datagram",
                    source: std::io::ErrorKind::TimedOut.into(),
                })
            }
            None => std::hint::spin_loop(),
        }
    }
}

/// The next event as text: "message N" (content checked), "gap ..." or "error ...".
fn next_event(s: &mut McastSubscriber) -> Result<String, Failed> {
    Ok(match poll(s) {
        Ok(Event::Message(pos, bytes)) if intact(pos, &bytes) => format!("message {pos}"),
        Ok(Event::Message(pos, _)) => return Err(format!("message {pos} arrived corrupt").into()),
        Ok(Event::Gap(g)) => format!("gap {g:?}"),
        Err(e @ McastError::Frame { .. }) => format!("error {e}"),
        Err(e) => return Err(e.into()),
    })
}

/// A well-formed frame of `stream` carrying 64 bytes.
fn frame_bytes(stream: u32, seq: u64) -> Vec<u8> {
    let mut v = vec![0; frame::HEADER_BYTES + PAYLOAD];
    frame::write(&mut v, &frame::FrameHeader::new(stream, 1, seq, PAYLOAD), &[5; PAYLOAD]);
    v
}

/// Subscriber roles (a process each).
fn child(role: &str) -> Result<(), Failed> {
    let group: Ipv4Addr = std::env::var("TICKBUS_MC_GROUP")?.parse()?;
    let depth = std::env::var("TICKBUS_MC_DEPTH").ok().and_then(|d| d.parse().ok()).unwrap_or(1024);
    let mut s = McastSubscriber::join(group, STREAM, &{
        let mut o = McastSubscriberOptions::default();
        o.depth = depth;
        o
    })?;
    println!("joined");
    if let Ok(at) = std::env::var("TICKBUS_MC_RECOVERY") {
        s.connect_recovery(at.parse()?, TOKEN.as_bytes(), 64, Duration::from_secs(30))?;
        println!("recovery on");
    }
    let mut stdin = std::io::stdin().lines();
    match role {
        "sub-order" => {
            let mut next = 0u64;
            for line in stdin.by_ref() {
                let line = line?;
                if line == "stats" {
                    let st = s.stats();
                    println!(
                        "stats delivered {} missed {} gaps {} malformed {} late {}",
                        st.delivered, st.missed, st.gaps, st.malformed, st.late
                    );
                    continue;
                }
                let until: u64 = line.strip_prefix("until ").ok_or("bad command")?.parse()?;
                while next < until {
                    match poll(&mut s)? {
                        Event::Message(pos, bytes) => {
                            if pos != next || !intact(pos, &bytes) {
                                return Err(format!(
                                    "message {pos} (intact: {}) where {next} was due",
                                    intact(pos, &bytes)
                                )
                                .into());
                            }
                            next += 1;
                        }
                        Event::Gap(g) => return Err(format!("lost messages with room to spare: {g:?}").into()),
                    }
                }
                println!("at {next}");
            }
            Ok(())
        }
        "sub-pause" => {
            let total: u64 = std::env::var("TICKBUS_MC_COUNT")?.parse()?;
            stdin.next().ok_or("no go")??;
            let mut expected = 0u64;
            let check = |e: Event, expected: &mut u64| -> Result<(), Failed> {
                match e {
                    Event::Message(pos, bytes) if pos == *expected && intact(pos, &bytes) => *expected += 1,
                    Event::Gap(g) if g.expected == *expected && g.resumed_at > g.expected => *expected = g.resumed_at,
                    other => return Err(format!("{other:?} where {expected} was due").into()),
                }
                Ok(())
            };
            // Drain what the receive slots held: until nothing arrives for 300 ms.
            let mut quiet = Instant::now();
            while quiet.elapsed() < Duration::from_millis(300) {
                if let Some(r) = s.try_recv()? {
                    let e = match r {
                        Recv::Message(m) => Event::Message(m.position, m.payload.to_vec()),
                        Recv::Gap(g) => Event::Gap(g),
                    };
                    check(e, &mut expected)?;
                    quiet = Instant::now();
                }
            }
            println!("drained");
            // The rest (the gap, and its recovery when connected) runs on a thread that traps
            // every syscall but the verbs doorbell and counts allocations.
            let fds = common::uverbs_fds();
            let ((expected, ok, st), c) = common::on_trapped_thread_allowing(
                &fds,
                move || (s, expected),
                move |(s, expected)| {
                    let mut budget = 400_000_000u64;
                    while *expected < total && budget > 0 {
                        budget -= 1;
                        let ok = match s.try_recv() {
                            Ok(Some(Recv::Message(m))) => {
                                let ok = m.position == *expected && intact(m.position, m.payload);
                                *expected += 1;
                                ok
                            }
                            Ok(Some(Recv::Gap(g))) => {
                                let ok = g.expected == *expected && g.resumed_at > g.expected;
                                *expected = g.resumed_at;
                                ok
                            }
                            Ok(None) => true,
                            Err(_) => false,
                        };
                        if !ok {
                            return (*expected, false, s.stats());
                        }
                    }
                    // Consume the heartbeat itself (held behind the gap it revealed).
                    let ok = s.try_recv().is_ok();
                    (*expected, ok, s.stats())
                },
            );
            if !ok {
                return Err(format!("out of order, corrupt or failed near {expected}: {st:?}").into());
            }
            println!(
                "result {} {} {} {} {} {} syscalls {} allocs {}",
                st.delivered, st.missed, st.gaps, st.heartbeats, st.recovered, expected, c.syscalls, c.allocs
            );
            Ok(())
        }
        "sub-hot" => {
            let n: u64 = std::env::var("TICKBUS_MC_COUNT")?.parse()?;
            // Warm up the poll path before measuring (first touches of the CQ and slots).
            let _ = s.try_recv()?;
            common::poll_trapped_and_report(s, n, |s| match s.try_recv() {
                Ok(Some(Recv::Message(m))) => {
                    std::hint::black_box(m.payload[0]);
                    true
                }
                _ => false,
            });
            Ok(())
        }
        other => Err(format!("unknown role {other}").into()),
    }
}
