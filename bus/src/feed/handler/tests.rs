//! The shared feed handler: one message per sequence whatever the lines do, each stamped with
//! its datagram's ingress; losses as `FeedGap`s; what is not MoldUDP64 or not ITCH counted; a
//! reliable stream that stays full holds the feed back until its stop flag is set, then fails
//! the message and counts it.
use std::sync::Arc;

use tickbus_codecs::moldudp64::PacketBuilder;
use tickbus_codecs::normalize::Normalizer;
use tickbus_codecs::synth::{DayConfig, DayGenerator};
use tickbus_codecs::{decode, AnyMessage, Header, FLAG_INGRESS_TSC};

use super::*;
use crate::feed::ArbiterOptions;
use crate::ring::{HeapMemory, RingReader, RingWriter};
use crate::{Mode, Publisher, Recv, RingConfig, StartAt};

const S: [u8; 10] = *b"HANDLER001";

/// A day's first `n` ITCH messages, one per MoldUDP64 packet (sequence k + 1 in packet k).
fn packets(n: usize) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut g = DayGenerator::new(DayConfig::new(5, 4, 2000));
    let mut b = PacketBuilder::new(S, 1, 1400);
    let (mut itch, mut out) = (Vec::new(), Vec::new());
    while out.len() < n {
        let m = g.next_message().expect("the day is long enough");
        itch.push(m.to_vec());
        b.push(m);
        out.push(b.take(|p| p.to_vec()));
    }
    (itch, out)
}

type Heap = Publisher<Arc<HeapMemory>>;

fn ring(mode: Mode, slots: usize) -> (Heap, RingReader<Arc<HeapMemory>>) {
    let cfg = RingConfig { max_consumers: 1, ..RingConfig::with_clock(mode, 7, 128, slots, 1.0) };
    let mem = HeapMemory::new(cfg.ring_bytes());
    let w = RingWriter::create(mem.clone(), &cfg, 1, 0).unwrap();
    let r = match mode {
        Mode::Lossy => RingReader::observer(mem, StartAt::Oldest).unwrap(),
        Mode::Reliable => RingReader::consumer_by_token(mem, 9).unwrap(),
    };
    (Publisher::new(w), r)
}

/// Every message the handler would publish for these ITCH messages, normalised offline.
fn expected(itch: &[Vec<u8>]) -> u64 {
    let mut norm = Normalizer::new();
    let mut n = 0;
    for (k, m) in itch.iter().enumerate() {
        if let Ok(msg) = tickbus_codecs::itch::parse(m, k as u64 + 1) {
            norm.apply(&msg, &mut |_| n += 1);
        }
    }
    n
}

#[test]
fn both_lines_give_one_message_per_sequence_each_stamped_with_its_datagrams_ingress() {
    let (itch, pks) = packets(300);
    let (out, mut r) = ring(Mode::Lossy, 4096);
    let mut h = FeedHandler::new(Arbiter::new(ArbiterOptions::default()), Normalizer::new(), out);
    for (k, p) in pks.iter().enumerate() {
        // B carries every packet, A all but every fifth: nothing is lost, much is duplicated.
        if k % 5 != 0 {
            h.on_datagram(Line::A, p, 1000 + k as u64, k as u64, &mut NoRerequest).unwrap();
        }
        h.on_datagram(Line::B, p, 5000 + k as u64, k as u64, &mut NoRerequest).unwrap();
    }
    let want = expected(&itch);
    assert_eq!(h.counts(), HandlerCounts { published: want, ..Default::default() });
    assert_eq!(h.stats().duplicates, 300 - 60);
    let mut seen = 0;
    while let Some(Recv::Message(d)) = r.try_recv() {
        let head = Header::peek(d.payload).expect("a message header");
        assert_eq!(head.flags & FLAG_INGRESS_TSC, FLAG_INGRESS_TSC);
        assert_eq!((head.stream_id, head.sequence), (7, d.position));
        // The first copy's ingress: line A's stamp, or B's where A missed the packet.
        let k = head.publish_tsc % 1000;
        let from_b = k.is_multiple_of(5);
        assert_eq!(head.publish_tsc, if from_b { 5000 + k } else { 1000 + k }, "position {}", d.position);
        seen += 1;
    }
    assert_eq!(seen, want);
}

/// The publish lag: read as each publish begins, so ingress + lag lies between the ingress and
/// a TSC read after the call, for messages and gaps alike (the ring's scale is 1 tick a ns).
#[test]
fn every_message_and_gap_says_when_its_publish_began() {
    let (itch, _) = packets(40);
    let (out, mut r) = ring(Mode::Lossy, 1024);
    let mut h = FeedHandler::new(Arbiter::new(ArbiterOptions::default()), Normalizer::new(), out);
    let tsc = crate::time::Tsc::new();
    // Taken 20,000 ticks before the handler sees it: every lag is at least that.
    let ingress = tsc.now() - 20_000;
    for (k, m) in itch.iter().enumerate() {
        h.on_message(m, k as u64 + 1, ingress).unwrap();
    }
    h.on_gap(41, 44, Some(&S), ingress).unwrap();
    let after = tsc.now();
    let (mut messages, mut gaps) = (0, 0);
    while let Some(Recv::Message(d)) = r.try_recv() {
        let head = Header::peek(d.payload).expect("a message header");
        let lag = head.publish_lag_ns().unwrap_or_else(|| panic!("no publish lag at {}", d.position));
        let begun = head.publish_begin_tsc(1.0).expect("ingress and lag");
        assert!(lag >= 20_000 && begun <= after, "lag {lag} ns, begun {begun}, read after {after}");
        match decode(d.payload) {
            Ok(AnyMessage::FeedGap(_)) => gaps += 1,
            _ => messages += 1,
        }
    }
    assert_eq!((messages, gaps), (expected(&itch), 1));
}

#[test]
fn what_both_lines_lost_is_rerequested_then_published_as_a_gap() {
    let (_, pks) = packets(20);
    let (out, mut r) = ring(Mode::Lossy, 1024);
    let o = ArbiterOptions { wait_other_line_ns: 10, give_up_ns: 1000, confirm_ns: 100, ..ArbiterOptions::default() };
    let mut h = FeedHandler::new(Arbiter::new(o), Normalizer::new(), out);
    let mut asks = Vec::new();
    let mut ask = |s: &[u8; 10], seq: u64, n: u16| asks.push((*s, seq, n));
    for (k, p) in pks.iter().enumerate() {
        if !(5..8).contains(&k) {
            h.on_datagram(Line::A, p, 1, 0, &mut ask).unwrap();
        }
    }
    h.poll(50, 2, &mut ask).unwrap();
    h.poll(5000, 3, &mut ask).unwrap();
    // Asked once, from the gap to the newest sequence seen (the arbiter's rule), in the
    // session the packets came in.
    assert_eq!(asks, vec![(S, 6, 15)]);
    assert_eq!(h.counts().gaps_published, 1);
    let mut gaps = Vec::new();
    while let Some(Recv::Message(d)) = r.try_recv() {
        if let Ok(AnyMessage::FeedGap(g)) = decode(d.payload) {
            gaps.push((g.first_sequence, g.count, g.header.publish_tsc));
        }
    }
    assert_eq!(gaps, vec![(6, 3, 3)], "the gap, stamped at the poll that gave it up");
}

#[test]
fn datagrams_that_are_not_mold_and_messages_that_are_not_itch_are_counted_not_published() {
    let (out, mut r) = ring(Mode::Lossy, 64);
    let mut h = FeedHandler::new(Arbiter::new(ArbiterOptions::default()), Normalizer::new(), out);
    // Shorter than a MoldUDP64 header; then a header whose count runs past the datagram.
    h.on_datagram(Line::A, &[1, 2, 3], 0, 0, &mut NoRerequest).unwrap();
    let mut b = PacketBuilder::new(S, 1, 1400);
    b.push(b"Zjunk");
    let mut p = b.take(|p| p.to_vec());
    let cut = p.len() - 2;
    h.on_datagram(Line::A, &p[..cut], 0, 0, &mut NoRerequest).unwrap();
    assert_eq!(h.counts().malformed, 2);
    // A whole packet whose message is no ITCH type: delivered by the arbiter, not parsed.
    p.truncate(p.len());
    h.on_datagram(Line::A, &p, 0, 0, &mut NoRerequest).unwrap();
    assert_eq!(h.counts(), HandlerCounts { malformed: 2, unparsed: 1, ..Default::default() });
    assert!(r.try_recv().is_none(), "nothing published");
}

#[test]
fn raw_output_publishes_the_itch_bytes_as_they_came() {
    let (itch, pks) = packets(10);
    let (out, mut r) = ring(Mode::Lossy, 64);
    let mut h = FeedHandler::new(Arbiter::new(ArbiterOptions::default()), Normalizer::new(), out).raw(true);
    for p in &pks {
        h.on_datagram(Line::A, p, 0, 0, &mut NoRerequest).unwrap();
    }
    assert_eq!(h.counts().published, 10);
    for m in &itch {
        match r.try_recv() {
            Some(Recv::Message(d)) => assert_eq!(d.payload, &m[..]),
            other => panic!("expected message bytes, got {other:?}"),
        }
    }
}

#[test]
fn a_reliable_stream_that_stays_full_waits_until_stopped_then_fails_the_message() {
    // Four slots and a consumer that never reads: the fifth message cannot go.
    let (_, pks) = packets(6);
    let (out, _reader) = ring(Mode::Reliable, 4);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut h = FeedHandler::new(Arbiter::new(ArbiterOptions::default()), Normalizer::new(), out)
        .raw(true)
        .stop_on(stop.clone());
    for p in &pks[..4] {
        h.on_datagram(Line::A, p, 0, 0, &mut NoRerequest).unwrap();
    }
    // The fifth waits for room until the flag is set from another thread, 100 ms on.
    let t0 = std::time::Instant::now();
    let setter = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(100));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let e = h.on_datagram(Line::A, &pks[4], 0, 0, &mut NoRerequest).unwrap_err();
    let waited = t0.elapsed();
    setter.join().unwrap();
    assert!(waited >= std::time::Duration::from_millis(100), "it waited for room, not failed at once: {waited:?}");
    assert_eq!(e.position, 4);
    assert!(e.to_string().contains("position 4"), "{e}");
    assert_eq!((h.counts().published, h.counts().failed), (4, 1));
}

#[test]
fn without_a_stop_flag_a_full_reliable_stream_fails_at_once() {
    let (_, pks) = packets(3);
    let (out, _reader) = ring(Mode::Reliable, 2);
    let mut h = FeedHandler::new(Arbiter::new(ArbiterOptions::default()), Normalizer::new(), out).raw(true);
    for p in &pks[..2] {
        h.on_datagram(Line::A, p, 0, 0, &mut NoRerequest).unwrap();
    }
    assert_eq!(h.on_datagram(Line::A, &pks[2], 0, 0, &mut NoRerequest).unwrap_err().position, 2);
    assert_eq!(h.counts().failed, 1);
}
