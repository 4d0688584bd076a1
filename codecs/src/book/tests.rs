use std::collections::{BTreeMap, HashMap};

use zerocopy::big_endian::{U32, U64};
use zerocopy::IntoBytes;

use super::*;
use crate::itch::*;
use crate::synth::{DayConfig, DayGenerator};

fn h(code: u8) -> ItchHeader {
    ItchHeader::new(code, 3, 0, 1)
}

fn add(book: &mut OrderBook, r: u64, side: u8, shares: u32, price: u32) -> Result<Option<Update>, BookError> {
    let m = AddOrder {
        header: h(b'A'),
        order_reference_number: U64::new(r),
        side,
        shares: U32::new(shares),
        stock: *b"ACME    ",
        price: U32::new(price),
    };
    book.apply(&ItchMessage::AddOrder(&m))
}

fn exec(book: &mut OrderBook, r: u64, n: u32) -> Result<Option<Update>, BookError> {
    let m = OrderExecuted {
        header: h(b'E'),
        order_reference_number: U64::new(r),
        executed_shares: U32::new(n),
        match_number: U64::new(1),
    };
    book.apply(&ItchMessage::OrderExecuted(&m))
}

fn delete(book: &mut OrderBook, r: u64) -> Result<Option<Update>, BookError> {
    book.apply(&ItchMessage::OrderDelete(&OrderDelete { header: h(b'D'), order_reference_number: U64::new(r) }))
}

fn replace(book: &mut OrderBook, old: u64, new: u64, shares: u32, price: u32) -> Result<Option<Update>, BookError> {
    let m = OrderReplace {
        header: h(b'U'),
        original_order_reference_number: U64::new(old),
        new_order_reference_number: U64::new(new),
        shares: U32::new(shares),
        price: U32::new(price),
    };
    book.apply(&ItchMessage::OrderReplace(&m))
}

fn cancel(book: &mut OrderBook, r: u64, n: u32) -> Result<Option<Update>, BookError> {
    let m = OrderCancel { header: h(b'X'), order_reference_number: U64::new(r), cancelled_shares: U32::new(n) };
    book.apply(&ItchMessage::OrderCancel(&m))
}

#[test]
fn adds_executions_cancels_replaces_and_deletes_move_the_top_and_the_queue() {
    let mut b = OrderBook::with_capacity(16, 4);
    let u = add(&mut b, 1, b'B', 100, 10_000).unwrap().unwrap();
    assert_eq!(u, Update { locate: 3, side: Side::Bid, top_changed: true });
    assert!(!add(&mut b, 2, b'B', 50, 9_900).unwrap().unwrap().top_changed, "behind the top");
    assert!(add(&mut b, 3, b'B', 70, 10_000).unwrap().unwrap().top_changed, "more shares at the top");
    add(&mut b, 4, b'S', 200, 10_100).unwrap();
    assert_eq!(b.best(3, Side::Bid).map(|l| (l.price, l.shares, l.orders)), Some((10_000, 170, 2)));
    assert_eq!(b.best(3, Side::Ask).map(|l| (l.price, l.shares)), Some((10_100, 200)));
    assert_eq!(b.shares_ahead(3), Some(100));
    assert_eq!(b.shares_ahead(1), Some(0));

    exec(&mut b, 1, 40).unwrap();
    assert_eq!(b.order(1).unwrap().shares, 60);
    exec(&mut b, 1, 60).unwrap();
    assert!(b.order(1).is_none(), "a full execution removes the order");
    assert_eq!(b.shares_ahead(3), Some(0), "order 3 moved to the front");
    cancel(&mut b, 3, 20).unwrap();
    assert_eq!(b.best(3, Side::Bid).unwrap().shares, 50);
    let u = replace(&mut b, 3, 5, 80, 9_900).unwrap().unwrap();
    assert!(u.top_changed);
    assert_eq!(b.best(3, Side::Bid).map(|l| (l.price, l.shares, l.orders)), Some((9_900, 130, 2)));
    assert_eq!(b.shares_ahead(5), Some(50), "a replace goes to the back of the queue");
    delete(&mut b, 2).unwrap();
    assert_eq!(b.shares_ahead(5), Some(0));
    b.check_invariants().unwrap();
    let t = b.totals();
    assert_eq!((t.added, t.executed, t.cancelled, t.replaced, t.deleted), (500, 100, 20, 50, 50));
    assert_eq!(b.resting_shares(), 280);
}

#[test]
fn bad_messages_are_errors_that_leave_the_book_untouched() {
    let mut b = OrderBook::with_capacity(16, 4);
    add(&mut b, 1, b'B', 100, 10_000).unwrap();
    add(&mut b, 2, b'S', 100, 10_100).unwrap();
    let before = (b.resting_shares(), b.totals(), b.best(3, Side::Bid).copied());
    assert_eq!(add(&mut b, 1, b'B', 5, 1), Err(BookError::DuplicateOrder { reference: 1 }));
    assert_eq!(add(&mut b, 9, b'Z', 5, 1), Err(BookError::BadSide { reference: 9, side: b'Z' }));
    assert_eq!(add(&mut b, 0, b'B', 5, 1), Err(BookError::ZeroReference { code: b'A' }));
    assert_eq!(add(&mut b, 9, b'B', 0, 10_000), Err(BookError::ZeroShares { code: b'A', reference: 9 }));
    assert!(add(&mut b, 9, b'B', 0, 1).unwrap_err().to_string().contains("0 shares"));
    assert_eq!(replace(&mut b, 1, 0, 5, 5), Err(BookError::ZeroReference { code: b'U' }));
    assert_eq!(exec(&mut b, 7, 1), Err(BookError::UnknownOrder { code: b'E', reference: 7 }));
    assert_eq!(
        exec(&mut b, 1, 101),
        Err(BookError::Overfill { code: b'E', reference: 1, resting: 100, requested: 101 })
    );
    assert_eq!(cancel(&mut b, 1, 101).unwrap_err().to_string(), "'X' takes 101 shares from order 1, which has 100");
    assert_eq!(delete(&mut b, 8), Err(BookError::UnknownOrder { code: b'D', reference: 8 }));
    assert_eq!(replace(&mut b, 1, 2, 5, 5), Err(BookError::DuplicateOrder { reference: 2 }));
    assert_eq!(replace(&mut b, 6, 10, 5, 5), Err(BookError::UnknownOrder { code: b'U', reference: 6 }));
    assert!(delete(&mut b, 8).unwrap_err().to_string().contains("joined mid-day"));
    assert_eq!(before, (b.resting_shares(), b.totals(), b.best(3, Side::Bid).copied()));
    b.check_invariants().unwrap();
}

/// A replace to no shares is the old order leaving, and only that: nothing of no shares rests,
/// the new reference is free, and the book still snapshots and loads (an order of 0 shares in
/// it would make every snapshot of it unloadable).
#[test]
fn a_replace_to_no_shares_removes_the_old_order_and_rests_nothing() {
    let mut b = OrderBook::with_capacity(16, 4);
    add(&mut b, 1, b'B', 100, 10_000).unwrap();
    add(&mut b, 2, b'B', 30, 9_900).unwrap();
    let u = replace(&mut b, 1, 5, 0, 10_100).unwrap().unwrap();
    assert_eq!(u, Update { locate: 3, side: Side::Bid, top_changed: true });
    assert!(b.order(1).is_none() && b.order(5).is_none(), "neither the old nor a 0-share new order rests");
    assert_eq!(b.best(3, Side::Bid).map(|l| (l.price, l.shares)), Some((9_900, 30)));
    assert_eq!(b.totals().replaced, 100);
    b.check_invariants().unwrap();
    add(&mut b, 5, b'S', 10, 10_200).expect("the new reference was never taken");
    let mut copy = OrderBook::with_capacity(16, 4);
    let mut l = SnapshotLoader::new();
    let mut last = Step::Waiting;
    for c in b.snapshot_chunks(9, 0, 0) {
        last = l.offer(&mut copy, &c).expect("the book's snapshot loads");
    }
    assert!(matches!(last, Step::Complete(_)), "{last:?}");
    assert_eq!(copy.digest(), b.digest());
}

#[test]
fn the_structure_check_catches_an_order_of_no_shares() {
    let mut b = OrderBook::with_capacity(16, 4);
    add(&mut b, 1, b'B', 100, 10_000).unwrap();
    // The smallest state that fools a check of sums alone: the level's shares agree with its
    // queue, but one order in it has none.
    add(&mut b, 2, b'B', 1, 10_000).unwrap();
    b.orders.get_mut(&2).unwrap().shares = 0;
    b.orders.get_mut(&1).unwrap().shares = 101;
    let e = b.check_structure().unwrap_err();
    assert_eq!(e, InvariantError::NoShares { order: 2 });
    assert_eq!(e.to_string(), "order 2 rests with 0 shares");
}

#[test]
fn the_invariant_check_catches_a_crossed_book() {
    let mut b = OrderBook::with_capacity(16, 4);
    add(&mut b, 1, b'B', 100, 10_100).unwrap();
    add(&mut b, 2, b'S', 100, 10_000).unwrap();
    let e = b.check_invariants().unwrap_err();
    assert!(matches!(e, InvariantError::Crossed { .. }) && e.to_string().contains("crossed"), "{e}");
    // Its structure is sound: a venue's book may cross (before its opening cross).
    b.check_structure().unwrap();
    // A structural fault is still found when prices are not checked.
    b.orders.get_mut(&1).unwrap().shares += 1;
    assert!(matches!(b.check_structure(), Err(InvariantError::Level { .. })), "{:?}", b.check_structure());
}

/// The slowest obviously-right book: per stock and side a BTreeMap price -> shares, and a map
/// of orders. The real book must agree with it on every level after every message.
#[derive(Default)]
struct Reference {
    orders: HashMap<u64, (u16, u8, u32, u32)>,
    levels: BTreeMap<(u16, u8, u32), u64>,
}

impl Reference {
    fn apply(&mut self, m: &ItchMessage<'_>) {
        let locate = m.header().stock_locate.get();
        let mut take = |orders: &mut HashMap<u64, (u16, u8, u32, u32)>, r: u64, n: u32| {
            let o = orders.get_mut(&r).unwrap();
            o.3 -= n;
            *self.levels.get_mut(&(o.0, o.1, o.2)).unwrap() -= u64::from(n);
            if o.3 == 0 {
                orders.remove(&r);
            }
        };
        match m {
            ItchMessage::AddOrder(a) => {
                self.orders.insert(a.order_reference_number.get(), (locate, a.side, a.price.get(), a.shares.get()));
                *self.levels.entry((locate, a.side, a.price.get())).or_default() += u64::from(a.shares.get());
            }
            ItchMessage::AddOrderMpid(a) => {
                self.orders.insert(a.order_reference_number.get(), (locate, a.side, a.price.get(), a.shares.get()));
                *self.levels.entry((locate, a.side, a.price.get())).or_default() += u64::from(a.shares.get());
            }
            ItchMessage::OrderExecuted(e) => {
                take(&mut self.orders, e.order_reference_number.get(), e.executed_shares.get())
            }
            ItchMessage::OrderExecutedWithPrice(e) => {
                take(&mut self.orders, e.order_reference_number.get(), e.executed_shares.get())
            }
            ItchMessage::OrderCancel(x) => {
                take(&mut self.orders, x.order_reference_number.get(), x.cancelled_shares.get())
            }
            ItchMessage::OrderDelete(d) => {
                let r = d.order_reference_number.get();
                let n = self.orders[&r].3;
                take(&mut self.orders, r, n);
            }
            ItchMessage::OrderReplace(u) => {
                let r = u.original_order_reference_number.get();
                let (l, side, _, n) = self.orders[&r];
                take(&mut self.orders, r, n);
                self.orders.insert(u.new_order_reference_number.get(), (l, side, u.price.get(), u.shares.get()));
                *self.levels.entry((l, side, u.price.get())).or_default() += u64::from(u.shares.get());
            }
            _ => {}
        }
        self.levels.retain(|_, v| *v > 0);
    }

    fn agrees_with(&self, b: &OrderBook, stocks: u16) -> Result<(), String> {
        for locate in 1..=stocks {
            for (side, code) in [(Side::Bid, b'B'), (Side::Ask, b'S')] {
                let want: Vec<(u32, u64)> =
                    self.levels.range((locate, code, 0)..=(locate, code, u32::MAX)).map(|(k, v)| (k.2, *v)).collect();
                let mut got: Vec<(u32, u64)> = b
                    .stock(locate)
                    .map(|s| s.side(side).as_slice().iter().map(|l| (l.price, l.shares)).collect())
                    .unwrap_or_default();
                got.sort();
                if want != got {
                    return Err(format!("locate {locate} {side:?}: reference {want:?} != book {got:?}"));
                }
            }
        }
        Ok(())
    }
}

/// Replays a generated day through a fresh book and the reference model; checks the invariants
/// every `every` messages and at the end.
fn replay(cfg: DayConfig, every: u64) {
    let mut g = DayGenerator::new(cfg);
    let mut book = OrderBook::with_capacity(1 << 12, 8);
    let mut reference = Reference::default();
    let mut n = 0u64;
    let mut top_changes = 0u64;
    while let Some(bytes) = g.next_message() {
        let m = parse(bytes, n).unwrap();
        if let Some(u) = book.apply(&m).unwrap_or_else(|e| panic!("message {n}: {e}")) {
            top_changes += u64::from(u.top_changed);
        }
        reference.apply(&m);
        n += 1;
        if n.is_multiple_of(every) {
            book.check_invariants().unwrap_or_else(|e| panic!("after message {n}: {e}"));
            reference.agrees_with(&book, cfg.stocks).unwrap_or_else(|e| panic!("after message {n}: {e}"));
        }
    }
    book.check_invariants().unwrap();
    reference.agrees_with(&book, cfg.stocks).unwrap();
    assert!(book.resting_orders() > 0 && top_changes > cfg.messages / 10, "a live day: {top_changes} top changes");
    let t = book.totals();
    assert!(t.executed > 0 && t.cancelled > 0 && t.deleted > 0 && t.replaced > 0, "{t:?}");
    assert_eq!(book.resting_shares(), g.book().resting_shares(), "the generator's book and the replay agree");
}

#[test]
fn replayed_generated_days_keep_every_invariant_and_agree_with_the_reference() {
    replay(DayConfig::new(1, 5, 20_000), 97);
    replay(DayConfig::new(2, 40, 60_000), 1_009);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(8))]
    #[test]
    fn any_seed_replays_cleanly(seed in 0u64..u64::MAX, stocks in 1u16..30) {
        replay(DayConfig::new(seed, stocks, 5_000), 499);
    }
}

#[test]
fn the_book_reads_the_stock_directory() {
    let mut b = OrderBook::with_capacity(4, 1);
    let mut g = DayGenerator::new(DayConfig::new(5, 3, 0));
    while let Some(bytes) = g.next_message() {
        b.apply(&parse(bytes, 0).unwrap()).unwrap();
    }
    let names: Vec<_> = g.stocks().iter().map(|s| s.name).collect();
    assert_eq!((1..=3).map(|l| *b.name(l).unwrap()).collect::<Vec<_>>(), names);
    assert!(b.name(9).is_none());
    let _ = ().as_bytes();
}

#[test]
fn a_pre_touched_or_cleared_book_replays_a_day_exactly_as_a_new_one() {
    let day = |b: &mut OrderBook| {
        let mut g = DayGenerator::new(DayConfig::new(9, 6, 5_000));
        while let Some(bytes) = g.next_message() {
            let _ = b.apply(&parse(bytes, 0).unwrap());
        }
    };
    let mut fresh = OrderBook::with_capacity(1024, 8);
    day(&mut fresh);
    let mut reused = OrderBook::with_capacity(1024, 8);
    let room = (reused.orders.slots(), reused.orders.spill_room());
    reused.pre_touch();
    assert_eq!((reused.orders.slots(), reused.orders.spill_room()), room, "pre-touching never grows the table");
    assert_eq!((reused.resting_orders(), reused.totals()), (0, Totals::default()));
    day(&mut reused);
    // Pre-touching a book in use keeps what it holds (it once emptied the levels, leaving
    // orders in no queue).
    let held = (reused.resting_orders(), reused.digest());
    reused.pre_touch();
    assert_eq!((reused.resting_orders(), reused.digest()), held);
    reused.check_invariants().unwrap();
    reused.clear();
    assert_eq!(reused.totals(), Totals::default());
    assert!(reused.name(1).is_none() && reused.resting_orders() == 0);
    day(&mut reused);
    assert_eq!(reused.totals(), fresh.totals());
    assert_eq!(reused.resting_orders(), fresh.resting_orders());
    assert_eq!(reused.digest(), fresh.digest());
    assert!(fresh.resting_orders() > 0 && fresh.name(1).is_some());
    for locate in 1..=6 {
        for side in [Side::Bid, Side::Ask] {
            let levels = |b: &OrderBook| b.stock(locate).map(|s| s.side(side).as_slice().to_vec());
            assert_eq!(levels(&reused), levels(&fresh));
        }
    }
}
