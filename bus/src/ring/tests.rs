//! Deterministic tests of the ring protocol: one thread, explicit interleavings.
use std::sync::Arc;

use super::layout::Geometry;
use super::memory::Words;
use super::*;

fn ring(mode: Mode, slots: usize) -> (Arc<HeapMemory>, RingWriter<Arc<HeapMemory>>) {
    let cfg = RingConfig::for_payload(mode, 7, 64, slots);
    let mem = HeapMemory::new(cfg.ring_bytes());
    let w = RingWriter::create(mem.clone(), &cfg, 100, 0).expect("create");
    (mem, w)
}

fn msg(pos: u64) -> [u8; 24] {
    let mut m = [0u8; 24];
    for (k, c) in m.chunks_exact_mut(8).enumerate() {
        c.copy_from_slice(&(pos * 3 + k as u64).to_le_bytes());
    }
    m
}

fn expect_msg<M: RingMemory>(r: &mut RingReader<M>, pos: u64) {
    match r.try_recv() {
        Some(Recv::Message(d)) => {
            assert_eq!(d.position, pos);
            assert_eq!(d.payload, msg(pos));
        }
        other => panic!("expected message {pos}, got {other:?}"),
    }
}

#[test]
fn lossy_delivers_in_order_then_reports_empty() {
    let (mem, mut w) = ring(Mode::Lossy, 8);
    let mut r = RingReader::observer(mem, StartAt::Latest).unwrap();
    assert_eq!(r.try_recv(), None);
    for p in 0..20 {
        assert_eq!(w.publish(&msg(p)).unwrap(), p);
        expect_msg(&mut r, p);
    }
    assert_eq!(r.try_recv(), None);
}

#[test]
fn lossy_reader_that_is_lapped_reports_the_gap_and_resumes_at_the_newest() {
    let (mem, mut w) = ring(Mode::Lossy, 8);
    let mut r = RingReader::observer(mem, StartAt::Latest).unwrap();
    for p in 0..3 {
        w.publish(&msg(p)).unwrap();
    }
    expect_msg(&mut r, 0);
    for p in 3..30 {
        w.publish(&msg(p)).unwrap(); // the publisher never waits
    }
    match r.try_recv() {
        Some(Recv::Gap(g)) => {
            assert_eq!(g.expected, 1);
            assert_eq!(g.resumed_at, 30);
            assert_eq!(g.missed(), 29);
        }
        other => panic!("expected a gap, got {other:?}"),
    }
    assert_eq!(r.try_recv(), None);
    w.publish(&msg(30)).unwrap();
    expect_msg(&mut r, 30);
}

#[test]
fn a_slot_overwritten_during_the_copy_is_reported_as_a_lap_not_delivered() {
    let (mem, mut w) = ring(Mode::Lossy, 4);
    let mut r = RingReader::observer(mem.clone(), StartAt::Latest).unwrap();
    w.publish(&msg(0)).unwrap();
    // An overwrite of position 4 has begun in slot 0 (lead stored, trail still says 0).
    let words = Words::new(&mem);
    let g = Geometry::new(w.config());
    super::slot::begin(words.range(g.slot(4), g.slot_words), 4);
    let s0 = words.range(g.slot(0), g.slot_words);
    assert_eq!(super::slot::peek(s0, 0), super::slot::SlotState::Ready { len: 0, aborted: false });
    assert!(matches!(r.try_recv(), Some(Recv::Gap(Gap { expected: 0, resumed_at: 4 }))));
}

#[test]
fn reliable_publisher_gets_full_until_the_consumer_consumes() {
    let (mem, mut w) = ring(Mode::Reliable, 8);
    for p in 0..8 {
        w.publish(&msg(p)).unwrap();
    }
    let full = w.publish(&msg(8)).unwrap_err();
    assert_eq!(full, ClaimError::Full { position: 8, consumer: 0, consumer_position: 0 });
    assert!(full.is_retryable());
    // messages published before any consumer attached are retained
    let mut r = RingReader::consumer_by_token(mem, 1).unwrap();
    for p in 0..3 {
        expect_msg(&mut r, p);
    }
    // credits flow lazily: after a batch (8/4 = 2 consumed) the publisher may go on
    assert!(w.publish(&msg(8)).is_ok());
    for p in 3..9 {
        expect_msg(&mut r, p);
    }
    assert_eq!(r.try_recv(), None); // an empty poll hands back everything consumed
    for p in 9..17 {
        w.publish(&msg(p)).unwrap();
    }
    assert!(w.publish(&msg(17)).is_err());
}

#[test]
fn too_large_is_not_retryable_and_loses_nothing() {
    let (mem, mut w) = ring(Mode::Lossy, 4);
    let mut r = RingReader::observer(mem, StartAt::Latest).unwrap();
    let err = w.publish(&[0u8; 105]).unwrap_err();
    assert_eq!(err, ClaimError::TooLarge { len: 105, max: 104 });
    assert!(!err.is_retryable());
    assert_eq!(w.position(), 0);
    assert_eq!(r.try_recv(), None);
}

#[test]
fn claim_writes_in_place_and_a_dropped_claim_is_skipped() {
    let (mem, mut w) = ring(Mode::Reliable, 4);
    let mut r = RingReader::consumer_by_token(mem, 1).unwrap();
    let mut c = w.try_claim(24).unwrap();
    assert_eq!(c.position(), 0);
    // SAFETY: a reliable ring read by one consumer, which reads a slot only once committed.
    unsafe { c.bytes_mut() }.copy_from_slice(&msg(0));
    assert_eq!(c.commit(), 0);
    drop(w.try_claim(24).unwrap()); // position 1 aborted
    let mut c = w.try_claim(24).unwrap();
    c.write(&msg(2));
    c.commit();
    expect_msg(&mut r, 0);
    expect_msg(&mut r, 2);
    assert_eq!(r.try_recv(), None);
}

/// Every length a 128-byte slot holds (its payload stored word by word, the tail word built from
/// the last bytes), read by an observer's copy and a consumer's in-place read.
#[test]
fn odd_lengths_round_trip_exactly() {
    for mode in [Mode::Lossy, Mode::Reliable] {
        let (mem, mut w) = ring(mode, 4);
        let mut r = match mode {
            Mode::Lossy => RingReader::observer(mem, StartAt::Latest).unwrap(),
            _ => RingReader::consumer_by_token(mem, 1).unwrap(),
        };
        for len in 0..=104usize {
            let data: Vec<u8> = (0..len).map(|i| i as u8 ^ 0x5a).collect();
            w.publish(&data).unwrap();
            match r.try_recv() {
                Some(Recv::Message(d)) => assert_eq!(d.payload, &data[..]),
                other => panic!("{mode:?} len {len}: {other:?}"),
            }
        }
    }
}

#[test]
fn consumers_take_the_lines_their_transport_grants_and_resume_where_the_last_stopped() {
    let cfg = RingConfig { max_consumers: 2, ..RingConfig::for_payload(Mode::Reliable, 1, 64, 8) };
    let mem = HeapMemory::new(cfg.ring_bytes());
    let mut w = RingWriter::create(mem.clone(), &cfg, 100, 0).unwrap();
    let a = RingReader::consumer_by_token(mem.clone(), 11).unwrap();
    let mut b = RingReader::consumer_by_token(mem.clone(), 12).unwrap();
    assert_eq!((a.consumer_index(), b.consumer_index()), (Some(0), Some(1)));
    assert_eq!(RingReader::consumer_by_token(mem.clone(), 13).err(), Some(AttachError::NoFreeConsumer { max: 2 }));
    // both consumers bound the publisher: b reads everything, a nothing
    for p in 0..8 {
        w.publish(&msg(p)).unwrap();
    }
    while b.try_recv().is_some() {}
    assert!(matches!(w.publish(&msg(8)), Err(ClaimError::Full { consumer: 0, .. })));
    // a's owner dies (its transport lock is gone): the transport grants line 0 to a newcomer,
    // whatever the owner word still says, and it resumes at a's position.
    std::mem::forget(a);
    let mut c = RingReader::consumer(mem.clone(), 13, |i| i == 0).unwrap();
    assert_eq!(c.consumer_index(), Some(0));
    assert_eq!(c.status().consumers[0].owner, 13);
    expect_msg(&mut c, 0);
    drop(c);
    let mut d = RingReader::consumer_by_token(mem.clone(), 14).unwrap();
    expect_msg(&mut d, 1);
    // a transport that grants nothing: no line
    assert_eq!(RingReader::consumer(mem, 15, |_| false).err(), Some(AttachError::NoFreeConsumer { max: 2 }));
}

#[test]
fn a_second_publisher_continues_the_stream_and_bumps_the_epoch() {
    let (mem, mut w) = ring(Mode::Lossy, 8);
    let mut r = RingReader::observer(mem.clone(), StartAt::Latest).unwrap();
    w.publish(&msg(0)).unwrap();
    assert!(matches!(RingWriter::attach(mem.clone(), 300), Err(LayoutError::PublisherLive { token: 100 })));
    drop(w); // hands the ring back
    assert_eq!(r.publisher(), (0, 1));
    let mut w2 = RingWriter::attach(mem, 200).unwrap();
    assert_eq!((w2.epoch(), w2.position()), (2, 1));
    assert_eq!(r.publisher(), (200, 2));
    w2.publish(&msg(1)).unwrap();
    expect_msg(&mut r, 0);
    expect_msg(&mut r, 1);
}

#[test]
fn observers_can_start_at_the_oldest_retained_or_an_explicit_position() {
    let (mem, mut w) = ring(Mode::Lossy, 4);
    for p in 0..10 {
        w.publish(&msg(p)).unwrap();
    }
    let mut r = RingReader::observer(mem.clone(), StartAt::Oldest).unwrap();
    for p in 7..10 {
        expect_msg(&mut r, p);
    }
    let mut r = RingReader::observer(mem, StartAt::Position(8)).unwrap();
    expect_msg(&mut r, 8);
}

#[test]
fn attach_refuses_uninitialised_small_and_foreign_memory() {
    let cfg = RingConfig::for_payload(Mode::Lossy, 1, 64, 8);
    let mem = HeapMemory::new(cfg.ring_bytes());
    assert_eq!(
        RingReader::observer(mem.clone(), StartAt::Latest).err(),
        Some(AttachError::Layout(LayoutError::NotReady))
    );
    let small = HeapMemory::new(cfg.ring_bytes() - 8);
    assert!(matches!(RingWriter::create(small, &cfg, 1, 0).err(), Some(LayoutError::TooSmall { .. })));
    let w = Words::new(&mem);
    w.word(0).store(0xfeed, super::sync::Ordering::Relaxed);
    assert!(RingWriter::create(HeapMemory::new(64), &cfg, 1, 0).is_err(), "smaller than a header");
    assert_eq!(RingWriter::attach(mem, 1).err(), Some(LayoutError::NotARing { found_magic: 0xfeed }));
}

#[test]
fn status_reports_positions_tokens_and_consumer_lines() {
    let (mem, mut w) = ring(Mode::Reliable, 8);
    let mut c = RingReader::consumer_by_token(mem.clone(), 42).unwrap();
    for p in 0..3 {
        w.publish(&msg(p)).unwrap();
    }
    while c.try_recv().is_some() {}
    let st = RingReader::observer(mem, StartAt::Latest).unwrap().status();
    assert_eq!((st.producer_position, st.producer_token, st.epoch), (3, 100, 1));
    assert_eq!(st.consumers, vec![ConsumerLine { index: 0, position: 3, owner: 42, attaches: 1 }]);
    assert_eq!(st.config, *w.config());
}

#[test]
fn consumer_on_a_lossy_ring_is_refused() {
    let (mem, _w) = ring(Mode::Lossy, 4);
    assert!(matches!(RingReader::consumer_by_token(mem, 1), Err(AttachError::Layout(LayoutError::BadConfig { .. }))));
}

/// A hammering writer thread and a reader thread: every delivered payload must be intact (its
/// words all derive from its position), and the run must actually have lapped the reader.
#[test]
fn no_torn_message_under_a_hammering_writer() {
    let cfg = RingConfig::for_payload(Mode::Lossy, 1, 104, 4);
    let mem = HeapMemory::new(cfg.ring_bytes());
    let mut w = RingWriter::create(mem.clone(), &cfg, 1, 0).unwrap();
    let total = 1_000_000u64;
    let writer = std::thread::spawn(move || {
        let mut m = [0u8; 104];
        for p in 0..total {
            for (k, c) in m.chunks_exact_mut(8).enumerate() {
                c.copy_from_slice(&(p.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ k as u64).to_le_bytes());
            }
            w.publish(&m).unwrap();
            if p % 64 == 63 {
                // Bursts lap the reader mid-copy; pauses let it deliver.
                for _ in 0..5_000 {
                    std::hint::spin_loop();
                }
            }
        }
    });
    let mut r = RingReader::observer(mem, StartAt::Oldest).unwrap();
    let (mut delivered, mut gaps, mut last) = (0u64, 0u64, None);
    while r.position() < total {
        match r.try_recv() {
            Some(Recv::Message(d)) => {
                for (k, c) in d.payload.chunks_exact(8).enumerate() {
                    let v = u64::from_le_bytes(c.try_into().unwrap());
                    assert_eq!(
                        v,
                        d.position.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ k as u64,
                        "torn message at {}",
                        d.position
                    );
                }
                assert!(last.is_none_or(|l| d.position > l), "out of order");
                last = Some(d.position);
                delivered += 1;
            }
            Some(Recv::Gap(_)) => gaps += 1,
            None => std::hint::spin_loop(),
        }
    }
    writer.join().unwrap();
    assert!(delivered > 0, "reader delivered nothing");
    assert!(gaps > 0, "the writer never lapped the reader: the test did not exercise overwrites");
}

#[test]
fn one_ring_has_one_writer_and_out_of_range_consumer_lines_are_refused() {
    let (mem, w) = ring(Mode::Reliable, 8);
    let cfg = *w.config();
    assert!(matches!(RingWriter::attach(mem.clone(), 2), Err(LayoutError::PublisherLive { token: 100 })));
    assert!(matches!(RingWriter::create(mem.clone(), &cfg, 2, 0), Err(LayoutError::PublisherLive { token: 100 })));
    assert!(matches!(RingWriter::open_or_create(mem.clone(), &cfg, 2, 0), Err(LayoutError::PublisherLive { .. })));
    let other = RingConfig { slot_count: 4, ..cfg };
    assert!(matches!(RingWriter::open_or_create(mem.clone(), &other, 2, 0), Err(LayoutError::Mismatch { .. })));
    assert_eq!(set_consumer_position(&mem, MAX_CONSUMERS, 0), Err(AttachError::NoSuchConsumer { index: 16, max: 16 }));
    assert!(set_consumer_position(&HeapMemory::new(512), 0, 0).is_err(), "memory smaller than a header");
    assert_eq!(set_consumer_position(&mem, 0, 3), Ok(()));
    drop(w);
    assert_eq!(RingWriter::attach(mem, 2).map(|w| w.epoch()).ok(), Some(2));
}

/// WRITE_WITH_IMM delivery is gated by which slots have landed: an aborted slot at 0 whose
/// completion came, then a slot at 1 already in memory whose completion has not. Counting
/// completions (one arrived, so read one) lets the reader skip the aborted slot and deliver 1;
/// a limit by position does not.
#[test]
fn a_reader_limited_to_landed_positions_never_reads_past_them_even_after_an_aborted_slot() {
    for mode in [Mode::Lossy, Mode::Reliable] {
        let (mem, mut w) = ring(mode, 8);
        let mut r = match mode {
            Mode::Lossy => RingReader::observer(mem, StartAt::Position(0)).unwrap(),
            Mode::Reliable => RingReader::consumer_by_token(mem, 1).unwrap(),
        };
        drop(w.try_claim(8).unwrap()); // position 0: aborted
        w.publish(&msg(1)).unwrap();
        let landed = 1; // only position 0's completion has arrived
        assert_eq!(r.try_recv_before(landed), None, "{mode:?}: read a slot that has not landed");
        let landed = 2;
        expect_msg_before(&mut r, 1, landed);
    }
}

fn expect_msg_before<M: RingMemory>(r: &mut RingReader<M>, pos: u64, limit: u64) {
    match r.try_recv_before(limit) {
        Some(Recv::Message(d)) => assert_eq!((d.position, d.payload), (pos, &msg(pos)[..])),
        other => panic!("expected message {pos}, got {other:?}"),
    }
}

#[test]
fn a_restarted_writer_continues_after_a_slot_published_without_its_position() {
    let (mem, mut w) = ring(Mode::Reliable, 8);
    for p in 0..3 {
        w.publish(&msg(p)).unwrap();
    }
    // The writer dies after publishing slot 2's trail, before storing position 3.
    let words = Words::new(&mem);
    words.word(super::layout::W_PRODUCER_POSITION).store(2, super::sync::Ordering::Release);
    std::mem::forget(w);
    // SAFETY: the old writer is gone (forgotten, never used again).
    let w2 = unsafe { RingWriter::reclaim(mem.clone(), 7) }.unwrap();
    assert_eq!((w2.position(), w2.previous_publisher()), (3, Some(100)));
    let mut r = RingReader::consumer_by_token(mem, 1).unwrap();
    for p in 0..3 {
        expect_msg(&mut r, p);
    }
}

/// A consumer line whose position no real stream reaches (a corrupt or hostile ring file) is
/// refused at attach, naming the line, and handed back: at u64::MAX, `pos + 1` would wrap to the
/// stamp of a slot never written, and the consumer would read an unwritten slot as published.
#[test]
fn a_consumer_line_past_any_real_stream_is_refused_and_left_free() {
    let (mem, _w) = ring(Mode::Reliable, 8);
    let words = Words::new(&mem);
    for bad in [u64::MAX, (1 << 62) + 1] {
        words.word(super::layout::consumer_position_word(0)).store(bad, std::sync::atomic::Ordering::Relaxed);
        match RingReader::consumer_by_token(mem.clone(), 5) {
            Err(AttachError::CorruptConsumerPosition { index: 0, position }) => assert_eq!(position, bad),
            Ok(_) => panic!("attached at position {bad}"),
            Err(e) => panic!("{e}"),
        }
    }
    words.word(super::layout::consumer_position_word(0)).store(3, std::sync::atomic::Ordering::Relaxed);
    let r = RingReader::consumer_by_token(mem.clone(), 5).expect("the refused line was handed back");
    assert_eq!((r.consumer_index(), r.position()), (Some(0), 3));
}
