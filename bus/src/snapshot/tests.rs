//! A late joiner from a snapshot holds the book of one that read the whole day: the maker
//! follows a journal, publishes on a ring, the joiner loads the snapshot and merges the journal
//! from its position on.
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickbus_codecs::book::OrderBook;
use tickbus_codecs::md::SnapshotOrders;
use tickbus_codecs::normalize::Normalizer;
use tickbus_codecs::synth::{DayConfig, DayGenerator};
use tickbus_codecs::{decode, Message};
use zerocopy::IntoBytes;

use super::*;
use crate::journal::{JournalMeta, JournalOptions, JournalTail, JournalWriter};
use crate::merge::{MergeOptions, ReplayMerge};
use crate::ring::{HeapMemory, RingConfig, RingReader, RingWriter, StartAt};
use crate::stream::Subscribe;
use crate::{Mode, Publisher, Subscriber};

/// `n` ITCH messages of a generated day as normalised market data, stamped 0, 1, 2, ...
pub(crate) fn market_data(n: usize) -> Vec<Vec<u8>> {
    let mut g = DayGenerator::new(DayConfig::new(11, 8, 40_000));
    let mut norm = Normalizer::with_capacity(1 << 14, 64);
    let mut out = Vec::new();
    for _ in 0..n {
        let m = g.next_message().expect("a long enough day");
        norm.apply(&tickbus_codecs::itch::parse(m, 0).unwrap(), &mut |mut md| {
            md.header_mut().stamp(1, out.len() as u64, 0);
            out.push(md.as_bytes().to_vec());
        });
    }
    out
}

pub(crate) fn book_of(md: &[Vec<u8>]) -> OrderBook {
    let mut b = OrderBook::with_capacity(1 << 14, 64);
    for m in md {
        let _ = b.apply_md(&decode(m).unwrap());
    }
    b
}

fn journal(tag: &str, md: &[Vec<u8>]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tickbus-snapshot-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let meta = JournalMeta { stream_id: 1, source: "test".into(), ticks_per_ns: crate::time::ticks_per_ns() };
    let mut w = JournalWriter::open(&dir, meta, JournalOptions::default()).unwrap();
    for (s, m) in md.iter().enumerate() {
        w.append(s as u64, 0, 0, m).unwrap();
    }
    w.close().unwrap();
    dir
}

#[test]
fn a_joiner_from_a_snapshot_and_the_journal_after_it_holds_the_whole_days_book() {
    let md = market_data(6000);
    let dir = journal("join", &md);
    // The maker, over a lossy ring that holds a whole snapshot.
    let cfg = RingConfig::for_payload(Mode::Lossy, 5, SnapshotOrders::LEN, 4096);
    let mem = HeapMemory::new(cfg.ring_bytes());
    let mut p = Publisher::new(RingWriter::create(mem.clone(), &cfg, 1, 0).unwrap());
    let mut sub = Subscriber::new(RingReader::observer(mem.clone(), StartAt::Oldest).unwrap());
    let mut maker = Snapshotter::new(OrderBook::with_capacity(1 << 14, 64));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tail = JournalTail::open(&dir, 0).unwrap();
    run(&mut maker, &mut tail, &mut p, Duration::from_secs(60), &stop, Some(Duration::from_millis(100))).unwrap();
    let s = maker.stats();
    assert_eq!((s.snapshots, s.position, s.lost), (2, md.len() as u64, 0), "{s:?}");
    assert!(s.last_orders > 100 && s.chunks > 2 * (s.last_orders / 16), "{s:?}");

    let mut joiner = OrderBook::with_capacity(1 << 14, 64);
    let loaded = load_snapshot(&mut sub, &mut joiner, u64::MAX, Duration::from_secs(5), &stop).unwrap();
    assert_eq!((loaded.as_of, loaded.lost), (md.len() as u64, 0));
    assert_eq!(joiner.digest(), book_of(&md).digest());

    // Joined at a snapshot taken partway: the maker's book at position 2500, then the journal.
    let mut part = Snapshotter::new(OrderBook::with_capacity(1 << 14, 64));
    let mut tail = JournalTail::open(&dir, 0).unwrap();
    assert_eq!(part.apply(&mut tail, 2500).unwrap(), 2500);
    let mut sub = Subscriber::new(RingReader::observer(mem, StartAt::Latest).unwrap());
    part.publish(&mut p, &stop).unwrap();
    let mut joiner = OrderBook::with_capacity(1 << 14, 64);
    let loaded = load_snapshot(&mut sub, &mut joiner, u64::MAX, Duration::from_secs(5), &stop).unwrap();
    assert_eq!(loaded.as_of, 2500);
    assert_eq!(joiner.digest(), book_of(&md[..2500]).digest());
    let live_cfg = RingConfig::for_payload(Mode::Lossy, 1, 128, 64);
    let live_mem = HeapMemory::new(live_cfg.ring_bytes());
    let _live_w = RingWriter::create(live_mem.clone(), &live_cfg, 1, 0).unwrap();
    let live = Subscriber::new(RingReader::observer(live_mem, StartAt::Latest).unwrap());
    let archive = JournalTail::open(&dir, loaded.as_of).unwrap();
    let mut m = ReplayMerge::new(live, archive, loaded.as_of, MergeOptions::default()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while m.position() < md.len() as u64 {
        assert!(Instant::now() < deadline, "stuck at {}", m.position());
        if let Some(Recv::Message(d)) = m.try_recv().unwrap() {
            let _ = joiner.apply_md(&decode(d.payload).unwrap());
        }
    }
    assert_eq!(m.stats().from_archive, md.len() as u64 - 2500);
    assert_eq!(joiner.digest(), book_of(&md).digest(), "snapshot + journal = the whole day");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A snapshot whose middle chunk the stream lost (the smallest that can lose one and end): not
/// loaded, and the wait ends saying which chunk was missing.
#[test]
fn a_snapshot_missing_a_chunk_is_not_loaded_and_the_timeout_says_why() {
    let md = market_data(600);
    let book = book_of(&md);
    let chunks: Vec<_> = book.snapshot_chunks(md.len() as u64, 0, 0).take(3).collect();
    assert!(chunks.len() == 3 && chunks[2].chunks >= 3);
    let cfg = RingConfig::for_payload(Mode::Lossy, 5, SnapshotOrders::LEN, 64);
    let mem = HeapMemory::new(cfg.ring_bytes());
    let mut p = Publisher::new(RingWriter::create(mem.clone(), &cfg, 1, 0).unwrap());
    let mut sub = Subscriber::new(RingReader::observer(mem, StartAt::Oldest).unwrap());
    for c in [chunks[0], chunks[2]] {
        p.publish(c.as_bytes()).unwrap();
    }
    let mut joiner = OrderBook::with_capacity(1 << 10, 64);
    let e =
        load_snapshot(&mut sub, &mut joiner, u64::MAX, Duration::from_millis(50), &AtomicBool::new(false)).unwrap_err();
    let why = e.to_string();
    assert!(why.contains("chunk 2 came where chunk 1"), "{why}");
}

/// A hostile publisher: the first chunk of a snapshot of 2^30 orders, then chunk after chunk
/// of new orders, never the last. The joiner's wait still ends on time, with an empty book.
#[test]
fn chunks_that_never_complete_a_snapshot_do_not_hold_the_joiner_past_its_wait() {
    let cfg = RingConfig::for_payload(Mode::Lossy, 5, SnapshotOrders::LEN, 1024);
    let mem = HeapMemory::new(cfg.ring_bytes());
    let mut p = Publisher::new(RingWriter::create(mem.clone(), &cfg, 1, 0).unwrap());
    let mut sub = Subscriber::new(RingReader::observer(mem, StartAt::Oldest).unwrap());
    let done = Arc::new(AtomicBool::new(false));
    let hostile = {
        let done = done.clone();
        std::thread::spawn(move || {
            let total = 1u64 << 30;
            let deadline = Instant::now() + Duration::from_secs(20);
            for chunk in 0..(total / 16) as u32 {
                if done.load(std::sync::atomic::Ordering::Acquire) || Instant::now() > deadline {
                    break;
                }
                let mut c = SnapshotOrders::new();
                (c.as_of, c.total_orders, c.chunk, c.chunks, c.count) = (1, total, chunk, (total / 16) as u32, 16);
                for (k, o) in c.orders.iter_mut().enumerate() {
                    let id = u64::from(chunk) * 16 + k as u64 + 1;
                    *o = tickbus_codecs::md::RestingOrder::new(id, 1, tickbus_codecs::Side::Buy, 100_000_000, 1);
                }
                c.header_mut().stamp(5, u64::from(chunk), 0);
                p.publish(c.as_bytes()).unwrap();
            }
        })
    };
    let mut b = OrderBook::with_capacity(1 << 10, 4);
    let t0 = Instant::now();
    let e = load_snapshot(&mut sub, &mut b, u64::MAX, Duration::from_millis(200), &AtomicBool::new(false)).unwrap_err();
    let took = t0.elapsed();
    done.store(true, std::sync::atomic::Ordering::Release);
    hostile.join().unwrap();
    assert!(matches!(e, LoadError::TimedOut { .. }), "{e}");
    assert!(took < Duration::from_secs(5), "the wait of 200 ms took {took:?}");
    assert_eq!(b.resting_orders(), 0, "no part of a snapshot is left in the book");
    // With a limit, the same first chunk is refused at once.
    let mut l = tickbus_codecs::book::SnapshotLoader::with_limit(1 << 20);
    let mut c = SnapshotOrders::new();
    (c.total_orders, c.chunks, c.count) = (1 << 30, 1 << 26, 16);
    assert!(matches!(l.offer(&mut b, &c), Err(tickbus_codecs::book::SnapshotError::TooLarge { .. })));
}

/// A damaged chunk (cut short: its header says snapshot, its length does not) in the middle of
/// one snapshot: that snapshot breaks off, the wait goes on, and the next whole one loads. It is
/// not taken for a stream of something else.
#[test]
fn a_damaged_chunk_is_skipped_and_the_next_whole_snapshot_loads() {
    let md = market_data(600);
    let book = book_of(&md);
    let first: Vec<_> = book.snapshot_chunks(500, 0, 0).collect();
    let second: Vec<_> = book.snapshot_chunks(md.len() as u64, 0, 0).collect();
    assert!(first.len() >= 3);
    let cfg = RingConfig::for_payload(Mode::Lossy, 5, SnapshotOrders::LEN, 1024);
    let mem = HeapMemory::new(cfg.ring_bytes());
    let mut p = Publisher::new(RingWriter::create(mem.clone(), &cfg, 1, 0).unwrap());
    let mut sub = Subscriber::new(RingReader::observer(mem, StartAt::Oldest).unwrap());
    p.publish(first[0].as_bytes()).unwrap();
    p.publish(&first[1].as_bytes()[..100]).unwrap();
    for c in &first[2..] {
        p.publish(c.as_bytes()).unwrap();
    }
    for c in &second {
        p.publish(c.as_bytes()).unwrap();
    }
    let mut joiner = OrderBook::with_capacity(1 << 14, 64);
    let loaded =
        load_snapshot(&mut sub, &mut joiner, u64::MAX, Duration::from_secs(30), &AtomicBool::new(false)).unwrap();
    assert_eq!(loaded.as_of, md.len() as u64, "the second snapshot, not the damaged first");
    assert_eq!(joiner.digest(), book.digest());
}

/// The market data itself given as the snapshot stream: said at once, not waited out.
#[test]
fn a_stream_of_something_else_is_named_not_waited_on() {
    let md = market_data(300);
    let cfg = RingConfig::for_payload(Mode::Lossy, 1, 128, 64);
    let mem = HeapMemory::new(cfg.ring_bytes());
    let mut p = Publisher::new(RingWriter::create(mem.clone(), &cfg, 1, 0).unwrap());
    let mut sub = Subscriber::new(RingReader::observer(mem, StartAt::Oldest).unwrap());
    p.publish(&md[0]).unwrap();
    let mut b = OrderBook::with_capacity(16, 4);
    let e = load_snapshot(&mut sub, &mut b, u64::MAX, Duration::from_secs(30), &AtomicBool::new(false)).unwrap_err();
    assert!(matches!(e, LoadError::NotSnapshots { .. }), "{e}");
    assert!(e.to_string().contains("not snapshot chunks"), "{e}");
}

/// The maker's input lost messages (a journal gap record; the feed's own `FeedGap`, a message
/// of the stream): every snapshot after says how many.
#[test]
fn a_snapshot_after_lost_market_data_says_so() {
    let md = market_data(300);
    let dir = std::env::temp_dir().join(format!("tickbus-snapshot-lost-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let meta = JournalMeta { stream_id: 1, source: "test".into(), ticks_per_ns: crate::time::ticks_per_ns() };
    let mut w = JournalWriter::open(&dir, meta, JournalOptions::default()).unwrap();
    let mut feed_gap = tickbus_codecs::md::FeedGap::new();
    (feed_gap.first_sequence, feed_gap.count) = (77, 4);
    feed_gap.header_mut().stamp(1, 200, 0);
    for (s, m) in md.iter().enumerate() {
        match s {
            100 => w.append_gap(100, 3, 0).unwrap(),
            101..=102 => {}
            200 => w.append(200, 0, 0, feed_gap.as_bytes()).unwrap(),
            _ => w.append(s as u64, 0, 0, m).unwrap(),
        }
    }
    w.close().unwrap();
    let cfg = RingConfig::for_payload(Mode::Lossy, 5, SnapshotOrders::LEN, 1024);
    let mem = HeapMemory::new(cfg.ring_bytes());
    let mut p = Publisher::new(RingWriter::create(mem.clone(), &cfg, 1, 0).unwrap());
    let mut sub = Subscriber::new(RingReader::observer(mem, StartAt::Oldest).unwrap());
    let mut maker = Snapshotter::new(OrderBook::with_capacity(1 << 12, 64));
    let mut tail = JournalTail::open(&dir, 0).unwrap();
    maker.apply(&mut tail, usize::MAX).unwrap();
    assert_eq!(maker.stats().lost, 3 + 4);
    maker.publish(&mut p, &AtomicBool::new(false)).unwrap();
    let mut joiner = OrderBook::with_capacity(1 << 12, 64);
    let loaded =
        load_snapshot(&mut sub, &mut joiner, u64::MAX, Duration::from_secs(5), &AtomicBool::new(false)).unwrap();
    assert_eq!((loaded.as_of, loaded.lost), (md.len() as u64, 3 + 4));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A maker fed in process by the publisher's tap (`tap.rs`) holds the stream's book; once the
/// tap could not hand a message over (the smallest queue that can drop one), its snapshots say
/// it lost one, so no trader takes its book for whole.
#[test]
fn a_maker_fed_by_the_publishers_tap_holds_the_book_and_says_what_the_tap_dropped() {
    let md = market_data(3000);
    let (mut tap, mut archive) = tap::channel(64, Arc::new(std::sync::atomic::AtomicU64::new(42)));
    let mut maker = Snapshotter::new(OrderBook::with_capacity(1 << 14, 64));
    for chunk in md.chunks(64) {
        for m in chunk {
            let position = tickbus_codecs::Header::peek(m).unwrap().sequence;
            assert!(tap.push(position, m));
        }
        assert_eq!(maker.apply(&mut archive, 1000).unwrap(), chunk.len());
    }
    let s = maker.stats();
    assert_eq!((s.position, s.lost, s.book_errors), (md.len() as u64, 0, 0), "{s:?}");
    assert_eq!(maker.book().digest(), book_of(&md).digest());
    // The snapshot carries the tap's stream incarnation.
    let cfg = RingConfig::for_payload(Mode::Lossy, 5, SnapshotOrders::LEN, 4096);
    let mem = HeapMemory::new(cfg.ring_bytes());
    let mut p = Publisher::new(RingWriter::create(mem.clone(), &cfg, 1, 0).unwrap());
    let mut sub = Subscriber::new(RingReader::observer(mem, StartAt::Oldest).unwrap());
    let stop = AtomicBool::new(false);
    assert!(maker.publish(&mut p, &stop).unwrap());
    let mut joiner = OrderBook::with_capacity(1 << 14, 64);
    let loaded = load_snapshot(&mut sub, &mut joiner, u64::MAX, Duration::from_secs(5), &stop).unwrap();
    assert_eq!((loaded.as_of, loaded.lost, loaded.source), (md.len() as u64, 0, 42));
    assert_eq!(joiner.digest(), book_of(&md).digest());

    // A tap of one slot, given two messages before the maker reads: the second is lost.
    let (mut tap, mut archive) = tap::channel(1, Arc::default());
    let mut maker = Snapshotter::new(OrderBook::with_capacity(1 << 14, 64));
    assert!(tap.push(0, &md[0]));
    assert!(!tap.push(1, &md[1]));
    assert_eq!(maker.apply(&mut archive, 10).unwrap(), 1);
    assert!(tap.push(2, &md[2]));
    assert_eq!(maker.apply(&mut archive, 10).unwrap(), 2, "the gap, then message 2");
    assert_eq!((tap.lost(), maker.stats().lost, maker.stats().position), (1, 1, 3));
}
