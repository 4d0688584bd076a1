//! Loom model checks of the ring's synchronisation: every interleaving (to a preemption bound)
//! of one publisher and one reader. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p tickbus --lib --release loom`.
use std::sync::Arc;

use loom::thread;

use super::sync::spin_hint;
use super::*;

fn payload(pos: u64) -> [u8; 16] {
    let mut m = [0u8; 16];
    m[..8].copy_from_slice(&(pos + 10).to_le_bytes());
    m[8..].copy_from_slice(&(pos + 20).to_le_bytes());
    m
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// Calls `f` until it succeeds (a publisher retrying while its reliable ring is full).
fn retry<T, E>(mut f: impl FnMut() -> Result<T, E>) -> T {
    loop {
        match f() {
            Ok(v) => return v,
            Err(_) => spin_hint(),
        }
    }
}

/// A publisher thread that publishes payloads 0, 1 and 2, retrying while the ring is full.
fn publish_three(mut w: RingWriter<Arc<HeapMemory>>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        for p in 0..3 {
            retry(|| w.publish(&payload(p)));
        }
    })
}

fn small_ring(mode: Mode) -> (Arc<HeapMemory>, RingWriter<Arc<HeapMemory>>) {
    let cfg = RingConfig { slot_size: 48, ..RingConfig::for_payload(mode, 1, 16, 2) };
    let mem = HeapMemory::new(cfg.ring_bytes());
    let w = RingWriter::create(mem.clone(), &cfg, 1, 0).unwrap();
    (mem, w)
}

/// Lossy: the publisher laps a 2-slot ring while a reader copies. Whatever the interleaving, a
/// delivered message is exactly what was published at its position, in increasing order.
#[test]
fn loom_lossy_reader_never_delivers_a_torn_or_reordered_message() {
    model(|| {
        let (mem, mut w) = small_ring(Mode::Lossy);
        let mut r = RingReader::observer(mem, StartAt::Position(0)).unwrap();
        let t = thread::spawn(move || {
            for p in 0..3 {
                w.publish(&payload(p)).unwrap();
            }
        });
        let mut last = None;
        for _ in 0..3 {
            if let Some(Recv::Message(d)) = r.try_recv() {
                assert_eq!(d.payload, payload(d.position), "torn message at {}", d.position);
                assert!(last.is_none_or(|l| d.position > l));
                last = Some(d.position);
            }
        }
        t.join().unwrap();
    });
}

/// Reliable: a publisher that retries on Full and a consumer on a 2-slot ring; every message
/// arrives once, in order, intact, and the publisher never overwrites an unconsumed slot.
#[test]
fn loom_reliable_delivers_every_message_once_in_order() {
    model(|| {
        let (mem, w) = small_ring(Mode::Reliable);
        let mut r = RingReader::consumer_by_token(mem, 2).unwrap();
        let t = publish_three(w);
        let mut next = 0;
        while next < 3 {
            match r.try_recv() {
                Some(Recv::Message(d)) => {
                    assert_eq!(d.position, next);
                    assert_eq!(d.payload, payload(next));
                    next += 1;
                }
                Some(Recv::Gap(g)) => panic!("reliable ring lapped its consumer: {g:?}"),
                None => spin_hint(),
            }
        }
        t.join().unwrap();
    });
}

/// Reliable, receiving into a buffer: the consumer copies each slot before it reads the length
/// (`try_recv_into`); every message still arrives once, in order, intact, and the publisher
/// never rewrites a slot the copy is reading.
#[test]
fn loom_reliable_receive_into_copies_every_message_intact() {
    model(|| {
        let (mem, w) = small_ring(Mode::Reliable);
        let mut r = RingReader::consumer_by_token(mem, 2).unwrap();
        let t = publish_three(w);
        let (mut next, mut out) = (0, [0u8; 16]);
        while next < 3 {
            match r.try_recv_into(&mut out) {
                Some(RecvInto::Message { position }) => {
                    assert_eq!((position, out), (next, payload(next)));
                    next += 1;
                }
                None => spin_hint(),
                other => panic!("expected message {next}, got {other:?}"),
            }
        }
        t.join().unwrap();
    });
}

/// Reliable, receiving into a 16-byte buffer while the publisher sends a 16-byte message, an
/// 8-byte one and drops a claim, then a 16-byte one: the 8-byte message is reported and left for
/// `try_recv` (never consumed or torn), the dropped claim is skipped, and the copy that precedes
/// every length read only ever sees published slots.
#[test]
fn loom_receive_into_with_mixed_lengths_and_a_dropped_claim() {
    model(|| {
        let (mem, mut w) = small_ring(Mode::Reliable);
        let mut r = RingReader::consumer_by_token(mem, 2).unwrap();
        let t = thread::spawn(move || {
            retry(|| w.publish(&payload(0)));
            retry(|| w.publish(&payload(1)[..8]));
            retry(|| w.try_claim(16).map(drop));
            retry(|| w.publish(&payload(3)));
        });
        let mut out = [0u8; 16];
        let mut got = Vec::new();
        while got.len() < 3 {
            match r.try_recv_into(&mut out) {
                Some(RecvInto::Message { position }) => {
                    assert_eq!(out, payload(position));
                    got.push(position);
                }
                Some(RecvInto::OtherLength { position, len }) => {
                    assert_eq!((position, len), (1, 8));
                    match r.try_recv() {
                        Some(Recv::Message(d)) => assert_eq!((d.position, d.payload), (1, &payload(1)[..8])),
                        other => panic!("the 8-byte message: {other:?}"),
                    }
                    got.push(position);
                }
                Some(RecvInto::Gap(g)) => panic!("reliable ring lapped its consumer: {g:?}"),
                None => spin_hint(),
            }
        }
        assert_eq!(got, [0, 1, 3]);
        t.join().unwrap();
    });
}
