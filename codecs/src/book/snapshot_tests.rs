//! Whole-book snapshots: a book loaded from one equals the book it was taken from, and stays
//! equal as the day goes on; a snapshot with a chunk lost, one interleaved with another's, or
//! one whose counts lie does not load, and says which.
use super::{OrderBook, SnapshotError, SnapshotLoader, Step};
use crate::md::{RestingOrder, SnapshotOrders};
use crate::synth::{DayConfig, DayGenerator};
use crate::Side;

/// A generated day: its ITCH messages, parsed in turn.
struct Day(DayGenerator);

impl Day {
    fn new() -> Day {
        Day(DayGenerator::new(DayConfig::new(3, 6, 20_000)))
    }

    fn apply(&mut self, books: &mut [&mut OrderBook], n: usize) {
        for _ in 0..n {
            let m = self.0.next_message().expect("a long enough day");
            let msg = crate::itch::parse(m, 0).expect("generated ITCH parses");
            for b in books.iter_mut() {
                let _ = b.apply(&msg);
            }
        }
    }
}

fn load(into: &mut OrderBook, chunks: impl IntoIterator<Item = SnapshotOrders>) -> Result<Step, SnapshotError> {
    let mut l = SnapshotLoader::new();
    let mut last = Step::Waiting;
    for c in chunks {
        last = l.offer(into, &c)?;
    }
    Ok(last)
}

#[test]
fn a_loaded_book_equals_the_source_and_stays_equal_through_the_rest_of_the_day() {
    let mut day = Day::new();
    let mut source = OrderBook::with_capacity(1 << 12, 16);
    let mut copy = OrderBook::with_capacity(16, 4);
    for (at, (n, more)) in [(3000, 2000), (1500, 2000), (4000, 3000)].into_iter().enumerate() {
        day.apply(&mut [&mut source], n);
        let chunks = source.snapshot_chunks(7 + at as u64, 0, 0);
        assert!(chunks.len() > 2, "several chunks: {}", chunks.len());
        let Step::Complete(done) = load(&mut copy, chunks).unwrap() else { panic!("did not complete") };
        assert_eq!((done.orders, done.lost, done.as_of), (source.resting_orders() as u64, 0, 7 + at as u64));
        assert_eq!(copy.digest(), source.digest(), "snapshot {at}: the same orders in the same queues");
        copy.check_invariants().unwrap();
        // Executions take from the head of each queue: a queue rebuilt in the wrong order would
        // part from the source here.
        day.apply(&mut [&mut source, &mut copy], more);
        assert_eq!(copy.digest(), source.digest(), "snapshot {at}: equal {more} messages on");
    }
}

#[test]
fn an_empty_book_is_one_chunk_of_no_orders_and_loading_it_empties_the_book() {
    let empty = OrderBook::with_capacity(4, 4);
    let chunks: Vec<_> = empty.snapshot_chunks(0, 0, 0).collect();
    assert_eq!((chunks.len(), chunks[0].count, chunks[0].chunks), (1, 0, 1));
    let mut b = OrderBook::with_capacity(16, 4);
    Day::new().apply(&mut [&mut b], 500);
    assert!(b.resting_orders() > 0);
    assert!(matches!(load(&mut b, chunks), Ok(Step::Complete(_))));
    assert_eq!(b.digest(), empty.digest());
}

/// Three chunks, the middle one lost: the smallest snapshot that can lose one and still end.
#[test]
fn a_lost_chunk_is_named_and_the_next_whole_snapshot_loads() {
    let mut source = OrderBook::with_capacity(64, 4);
    for k in 1..=40u64 {
        source.restore(&RestingOrder::new(k, 1, Side::Buy, 100_000 * (k as i64 % 5 + 1), 10)).unwrap();
    }
    let chunks: Vec<_> = source.snapshot_chunks(50, 0, 0).collect();
    assert_eq!(chunks.len(), 3);
    let (mut b, mut l) = (OrderBook::with_capacity(64, 4), SnapshotLoader::new());
    assert_eq!(l.offer(&mut b, &chunks[0]), Ok(Step::Partial));
    assert_eq!(l.offer(&mut b, &chunks[2]), Err(SnapshotError::MissingChunk { as_of: 50, want: 1, got: 2, chunks: 3 }));
    // The next snapshot's chunks, whole: it loads.
    let next: Vec<_> = source.snapshot_chunks(60, 0, 0).collect();
    assert_eq!(l.offer(&mut b, &next[1]), Ok(Step::Waiting), "mid-snapshot: wait for its start");
    let mut last = Step::Waiting;
    for c in &next {
        last = l.offer(&mut b, c).unwrap();
    }
    assert!(matches!(last, Step::Complete(d) if d.as_of == 60 && d.orders == 40));
    assert_eq!(b.digest(), source.digest());
    // A snapshot whose end is lost, then the next one's first chunk: that one starts at once.
    let (mut b, mut l) = (OrderBook::with_capacity(64, 4), SnapshotLoader::new());
    assert_eq!(l.offer(&mut b, &chunks[0]), Ok(Step::Partial));
    for c in &next {
        last = l.offer(&mut b, c).unwrap();
    }
    assert!(matches!(last, Step::Complete(d) if d.as_of == 60));
    assert_eq!((l.abandoned(), b.digest()), (1, source.digest()));
}

/// Two snapshots of the same size (same chunk count and total) but different positions: only
/// the position tells a chunk of one from the other's.
#[test]
fn a_chunk_of_another_snapshot_in_the_middle_is_refused() {
    let mut source = OrderBook::with_capacity(64, 4);
    for k in 1..=20u64 {
        source.restore(&RestingOrder::new(k, 2, Side::Sell, 200_000, 5)).unwrap();
    }
    let a: Vec<_> = source.snapshot_chunks(10, 0, 0).collect();
    let b: Vec<_> = source.snapshot_chunks(11, 0, 0).collect();
    let (mut book, mut l) = (OrderBook::with_capacity(64, 4), SnapshotLoader::new());
    l.offer(&mut book, &a[0]).unwrap();
    assert_eq!(l.offer(&mut book, &b[1]), Err(SnapshotError::Interleaved { as_of: 10, other: 11 }));
    assert!(!l.in_progress());
    // The same position and size, of another incarnation of the stream.
    let other: Vec<_> = source.snapshot_chunks(10, 0, 7).collect();
    l.offer(&mut book, &a[0]).unwrap();
    assert!(matches!(l.offer(&mut book, &other[1]), Err(SnapshotError::Interleaved { .. })));
}

#[test]
fn counts_that_lie_are_refused() {
    let mut source = OrderBook::with_capacity(64, 4);
    for k in 1..=3u64 {
        source.restore(&RestingOrder::new(k, 2, Side::Buy, 300_000, 5)).unwrap();
    }
    let one: Vec<_> = source.snapshot_chunks(9, 0, 0).collect();
    let mut book = OrderBook::with_capacity(64, 4);
    // A total the chunk does not hold; more than a chunk holds; no chunks; a chunk past the
    // last; a chunk count the total does not need (a first chunk claiming 4 billion chunks).
    for (what, lie) in [
        ("total 4", (|c: &mut SnapshotOrders| c.total_orders = 4) as fn(&mut SnapshotOrders)),
        ("count 17", |c| c.count = 17),
        ("no chunks", |c| c.chunks = 0),
        ("chunk past the last", |c| c.chunk = 1),
        ("u32::MAX chunks", |c| c.chunks = u32::MAX),
        // `chunk + 1` overflowed in u32 (a panic in debug builds) before the bounds check.
        ("chunk u32::MAX", |c| c.chunk = u32::MAX),
        ("chunk and chunks u32::MAX", |c| (c.chunk, c.chunks) = (u32::MAX, u32::MAX)),
    ] {
        let mut c = one[0];
        lie(&mut c);
        assert!(matches!(load(&mut book, [c]), Err(SnapshotError::BadChunk { .. })), "{what}");
    }
    // An order twice, an order of no shares: the book's own checks name them.
    let mut c = one[0];
    c.orders[1] = c.orders[0];
    assert!(matches!(load(&mut book, [c]), Err(SnapshotError::Order { .. })));
    let mut c = one[0];
    c.orders[2].qty = 0;
    assert!(matches!(load(&mut book, [c]), Err(SnapshotError::Order { .. })));
}

/// Two chunks where the first holds 15 of 17 orders (a chunk but the last must be full).
#[test]
fn a_short_chunk_before_the_last_is_refused() {
    let mut source = OrderBook::with_capacity(64, 4);
    for k in 1..=17u64 {
        source.restore(&RestingOrder::new(k, 2, Side::Buy, 300_000, 5)).unwrap();
    }
    let mut c: Vec<_> = source.snapshot_chunks(9, 0, 0).collect();
    c[0].count = 15;
    let mut book = OrderBook::with_capacity(64, 4);
    assert!(matches!(load(&mut book, c), Err(SnapshotError::BadChunk { chunk: 0, count: 15, .. })));
}

#[test]
fn a_snapshot_over_the_loaders_limit_is_refused_at_its_first_chunk() {
    let mut source = OrderBook::with_capacity(64, 4);
    for k in 1..=20u64 {
        source.restore(&RestingOrder::new(k, 2, Side::Buy, 300_000, 5)).unwrap();
    }
    let c: Vec<_> = source.snapshot_chunks(9, 0, 0).collect();
    let (mut book, mut l) = (OrderBook::with_capacity(64, 4), SnapshotLoader::with_limit(19));
    assert_eq!(l.offer(&mut book, &c[0]), Err(SnapshotError::TooLarge { as_of: 9, total: 20, limit: 19 }));
    assert_eq!(book.resting_orders(), 0, "nothing loaded");
}

/// Three orders at one price (the smallest queue whose order can be wrong two ways): loaded in
/// the same order, each with the same shares ahead of it.
#[test]
fn a_queue_keeps_its_order() {
    let mut source = OrderBook::with_capacity(64, 4);
    for k in [30u64, 10, 20] {
        source.restore(&RestingOrder::new(k, 2, Side::Sell, 500_000, k)).unwrap();
    }
    let mut book = OrderBook::with_capacity(64, 4);
    assert!(matches!(load(&mut book, source.snapshot_chunks(1, 0, 0)), Ok(Step::Complete(_))));
    let ids: Vec<u64> = book.walk().map(|o| o.order_id).collect();
    assert_eq!(ids, [30, 10, 20]);
    for k in [30, 10, 20] {
        assert_eq!(book.shares_ahead(k), source.shares_ahead(k), "order {k}");
    }
    assert_eq!(book.shares_ahead(20), Some(40));
}
