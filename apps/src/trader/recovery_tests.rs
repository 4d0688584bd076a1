//! Issue 26 item 3: a trader that lost market data recovers its book from the next whole
//! snapshot made after the loss and trades again. The real trading loop over shm rings in this
//! process; the test plays the feed, the snapshot maker and the gateway. The smallest state that
//! could fool the recovery: one message held after the loss, a snapshot from before the loss,
//! one from a maker that lost messages itself, then the right one, whose position is past a held
//! message that must not be applied twice.
use std::sync::atomic::AtomicBool;

use tickbus::shm::{self, HugepagePolicy, ShmOptions};
use tickbus::stream::AnySubscriber;
use tickbus::{Mode, RingConfig, StartAt};
use tickbus_codecs::book::OrderBook;
use tickbus_codecs::md::{FeedGap, OrderAdd, SnapshotOrders};
use tickbus_codecs::{decode, Message, Side, PRICE_SCALE};
use zerocopy::IntoBytes;

use super::recovery::Recovery;
use super::{order_ring, Strategy, Trader};
use crate::gateway::report_ring;
use crate::link::{In, Out};

fn add(id: u64, side: Side, price: i64) -> OrderAdd {
    let mut a = OrderAdd::new();
    (a.instrument_id, a.order_id, a.side, a.price, a.qty) = (2, id, side as u8, price * PRICE_SCALE, 300);
    a
}

fn book_of(adds: &[OrderAdd]) -> OrderBook {
    let mut b = OrderBook::with_capacity(1 << 10, 64);
    for a in adds {
        b.apply_md(&decode(a.as_bytes()).unwrap()).unwrap();
    }
    b
}

#[test]
fn a_trader_that_lost_market_data_takes_the_first_whole_snapshot_after_the_loss_and_trades_again() {
    let tag = format!("tickbus-apps-recover-{}", std::process::id());
    let opts = ShmOptions::new(format!("/dev/hugepages/{tag}"), format!("/dev/shm/{tag}"), HugepagePolicy::Preferred);
    let mut md = shm::open_publisher("md", &RingConfig::for_payload(Mode::Lossy, 1, 128, 64), &opts).unwrap();
    let snap_cfg = RingConfig::for_payload(Mode::Lossy, 5, SnapshotOrders::LEN, 256);
    let mut snap = shm::open_publisher("snap", &snap_cfg, &opts).unwrap();
    let orders = shm::open_publisher("orders", &order_ring(2), &opts).unwrap();
    let _execs = shm::open_publisher("execs", &report_ring(3), &opts).unwrap();
    let mut gateway_in = shm::open_consumer("orders", &opts).unwrap();
    let t_md = shm::open_observer("md", StartAt::Oldest, &opts).unwrap();
    let t_execs = shm::open_consumer("execs", &opts).unwrap();
    let t_snap = shm::open_observer("snap", StartAt::Latest, &opts).unwrap();
    let mut t = Trader::new(In::shm(t_md), Out::shm(orders), In::shm(t_execs), Strategy::new(100, 8));
    let live = t.md.source_id();
    assert!(live.is_some(), "a shm ring has an incarnation");
    t.recovery = Some(Recovery::new(AnySubscriber::Shm(t_snap), 4, live));
    let stop = AtomicBool::new(false);
    // Until idle (not while recovering: a recovering loop always has work).
    let run = |t: &mut Trader| while t.duty(&stop) > 0 {};
    let orders_sent = |g: &mut shm::ShmSubscriber| std::iter::from_fn(|| g.try_recv().map(|_| ())).count();

    // Position 0: a bid (an order out); 1: the feed lost 5 messages; 2: a bid, held.
    let (a1, a2, a3) = (add(1, Side::Buy, 10), add(2, Side::Buy, 9), add(3, Side::Sell, 12));
    md.publish(a1.as_bytes()).unwrap();
    run(&mut t);
    assert_eq!(orders_sent(&mut gateway_in), 1);
    let mut gap = FeedGap::new();
    (gap.first_sequence, gap.count) = (100, 5);
    md.publish(gap.as_bytes()).unwrap();
    md.publish(a2.as_bytes()).unwrap();
    md.publish(a3.as_bytes()).unwrap();
    for _ in 0..10 {
        t.duty(&stop);
    }
    let r = t.recovery.as_ref().unwrap();
    assert!(r.recovering() && t.strategy.halted().is_some(), "halted and holding after the FeedGap");

    // Whole snapshots that must not be taken: one from before the loss (as of position 1),
    // one from a maker that lost messages itself (as of 3, lost 5), one of another stream.
    let live = live.unwrap();
    let publish_snapshot = |snap: &mut shm::ShmPublisher, book: &OrderBook, as_of: u64, lost: u64, source: u64| {
        for c in book.snapshot_chunks(as_of, lost, source) {
            snap.publish(c.as_bytes()).unwrap();
        }
    };
    publish_snapshot(&mut snap, &book_of(&[a1]), 1, 0, live);
    publish_snapshot(&mut snap, &book_of(&[a1, a2]), 3, 5, live);
    // And one right in every way but of another incarnation of the stream (yesterday's).
    publish_snapshot(&mut snap, &book_of(&[a1]), 3, 0, live + 1);
    for _ in 0..10 {
        t.duty(&stop);
    }
    let r = t.recovery.as_ref().unwrap();
    assert!(r.recovering(), "none of them taken");
    assert_eq!(r.stats.refused, 3, "{:?}", r.stats);

    // The right one: as of position 3 (a1 and a2 in it), so the held a2 (position 2) is not
    // applied again and the held a3 (position 3) is.
    publish_snapshot(&mut snap, &book_of(&[a1, a2]), 3, 0, live);
    for _ in 0..10 {
        t.duty(&stop);
    }
    let r = t.recovery.as_ref().unwrap();
    assert!(!r.recovering(), "{:?}", r.stats);
    assert_eq!((r.stats.losses, r.stats.recovered, r.stats.applied_after), (1, 1, 1), "{:?}", r.stats);
    assert_eq!(t.strategy.halted(), None, "trading again");
    assert_eq!(t.strategy.book_digest(), book_of(&[a1, a2, a3]).digest(), "the book of the whole stream");

    // Trading again: a new best bid sends an order.
    md.publish(add(4, Side::Buy, 11).as_bytes()).unwrap();
    while t.duty(&stop) > 0 {}
    assert_eq!(orders_sent(&mut gateway_in), 1, "an order after the recovery");
    drop(opts);
    let _ = std::fs::remove_dir_all(format!("/dev/shm/{tag}"));
    let _ = std::fs::remove_dir_all(format!("/dev/hugepages/{tag}"));
}

#[test]
fn a_full_hold_keeps_the_newest_and_a_snapshot_older_than_them_is_refused() {
    let tag = format!("tickbus-apps-recover-hold-{}", std::process::id());
    let opts = ShmOptions::new(format!("/dev/hugepages/{tag}"), format!("/dev/shm/{tag}"), HugepagePolicy::Preferred);
    let snap_cfg = RingConfig::for_payload(Mode::Lossy, 5, SnapshotOrders::LEN, 256);
    let mut snap = shm::open_publisher("snap", &snap_cfg, &opts).unwrap();
    let sub = shm::open_observer("snap", StartAt::Latest, &opts).unwrap();
    // A hold of 2: lost before position 10; messages 10, 11 and 12 come; 10 is dropped.
    let mut r = Recovery::new(AnySubscriber::Shm(sub), 2, None);
    r.lost(10);
    let adds = [add(1, Side::Buy, 10), add(2, Side::Buy, 9), add(3, Side::Buy, 8)];
    for (i, a) in adds.iter().enumerate() {
        r.hold(10 + i as u64, a.as_bytes());
    }
    let mut book = OrderBook::with_capacity(1 << 10, 64);
    // As of 10: made after the loss, but message 10 is no longer held.
    for c in book_of(&[]).snapshot_chunks(10, 0, 0) {
        snap.publish(c.as_bytes()).unwrap();
    }
    assert!(!r.poll(&mut book, 16).1);
    assert_eq!(r.stats.refused, 1);
    // As of 11 (message 10 in it): 11 and 12 applied from the hold.
    for c in book_of(&adds[..1]).snapshot_chunks(11, 0, 0) {
        snap.publish(c.as_bytes()).unwrap();
    }
    assert!(r.poll(&mut book, 16).1);
    assert_eq!(book.digest(), book_of(&adds).digest());
    assert!(r.in_book(10) && !r.in_book(13));
    drop(opts);
    let _ = std::fs::remove_dir_all(format!("/dev/shm/{tag}"));
    let _ = std::fs::remove_dir_all(format!("/dev/hugepages/{tag}"));
}
