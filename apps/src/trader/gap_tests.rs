//! Issue 25 item 3: what `tickbus trader` without `--snapshots` does on a `FeedGap`. It stops
//! sending orders for the rest of the run (its book may be wrong from the gap on; with
//! `--snapshots` it recovers instead: `recovery_tests.rs`), goes on reading the market data
//! and settling the reports of orders already out, and says so in its summary. The real trading
//! loop over shm rings in this process: the test plays the feed and the gateway. The loop's
//! other small cases share the rig: reports that never come, looks per idle cycle, and ticks
//! whose stamps this run's clock cannot have made.
use std::sync::atomic::AtomicBool;

use tickbus::shm::{self, HugepagePolicy, ShmOptions};
use tickbus::{Mode, Recv, RingConfig, StartAt};
use tickbus_codecs::exec::ExecAck;
use tickbus_codecs::md::{FeedGap, OrderAdd};
use tickbus_codecs::orders::TracedOrder;
use tickbus_codecs::{Message, Side, PRICE_SCALE};
use zerocopy::IntoBytes;

use super::{order_ring, Strategy, Trader};
use crate::gateway::report_ring;
use crate::link::{In, Out};

fn add(id: u64, side: Side, price: i64) -> OrderAdd {
    let mut a = OrderAdd::new();
    (a.instrument_id, a.order_id, a.side, a.price, a.qty) = (2, id, side as u8, price * PRICE_SCALE, 300);
    a
}

/// The real trading loop over shm rings in this process, and the ends the test plays: the
/// feed's market data, the gateway's side of the orders and the reports.
struct Rig {
    gone: Gone,
    md: shm::ShmPublisher,
    execs: shm::ShmPublisher,
    gateway_in: shm::ShmSubscriber,
    t: Trader,
}

impl Rig {
    fn new(tag: &str, max_in_flight: u64) -> Rig {
        let tag = format!("tickbus-apps-{tag}-{}", std::process::id());
        let opts =
            ShmOptions::new(format!("/dev/hugepages/{tag}"), format!("/dev/shm/{tag}"), HugepagePolicy::Preferred);
        let md = shm::open_publisher("md", &RingConfig::for_payload(Mode::Lossy, 1, 128, 64), &opts).unwrap();
        let orders = shm::open_publisher("orders", &order_ring(2), &opts).unwrap();
        let execs = shm::open_publisher("execs", &report_ring(3), &opts).unwrap();
        let gateway_in = shm::open_consumer("orders", &opts).unwrap();
        let t_md = shm::open_observer("md", StartAt::Oldest, &opts).unwrap();
        let t_execs = shm::open_consumer("execs", &opts).unwrap();
        let t = Trader::new(In::shm(t_md), Out::shm(orders), In::shm(t_execs), Strategy::new(100, max_in_flight));
        Rig { gone: Gone(opts), md, execs, gateway_in, t }
    }
}

/// The test's two ring folders, removed with their rings when the test ends, passed or not.
/// Removing the rings one by one left them (and their hugepages) behind: `shm::remove` refuses a
/// ring whose publisher is alive, and the test's own publishers were.
struct Gone(ShmOptions);

impl Drop for Gone {
    fn drop(&mut self) {
        // Unlinked while still mapped is fine: the pages go when the last mapping does.
        let _ = std::fs::remove_dir_all(&self.0.hugepage_dir);
        let _ = std::fs::remove_dir_all(&self.0.fallback_dir);
    }
}

#[test]
fn after_a_feed_gap_no_order_goes_out_but_ticks_and_reports_are_still_taken() {
    let Rig { gone: _gone, mut md, mut execs, mut gateway_in, mut t } = Rig::new("gap", 8);
    let stop = AtomicBool::new(false);
    let run = |t: &mut Trader| while t.duty(&stop) > 0 {};

    // A new best bid: one order out.
    md.publish(add(1, Side::Buy, 10).as_bytes()).unwrap();
    run(&mut t);
    assert_eq!(t.counts.orders, 1);
    let Some(Recv::Message(m)) = gateway_in.try_recv() else { panic!("no order on the ring") };
    let id = TracedOrder::parse(m.payload).unwrap().order.client_order_id;
    // The feed lost 5 messages; then the top moves again, twice.
    let mut gap = FeedGap::new();
    (gap.first_sequence, gap.count) = (2, 5);
    md.publish(gap.as_bytes()).unwrap();
    md.publish(add(2, Side::Buy, 11).as_bytes()).unwrap();
    md.publish(add(3, Side::Sell, 12).as_bytes()).unwrap();
    run(&mut t);
    assert_eq!(t.counts.orders, 1, "no order after the gap");
    assert_eq!((t.counts.ticks, t.counts.feed_gaps), (4, 1), "the market data is still read");
    assert_eq!(t.strategy.stats.skipped_halted, 2, "both decisions were skipped");
    assert_eq!(t.strategy.halted().as_deref(), Some("halted after a gap of 5 market-data messages"));
    // The order sent before the gap still gets its report, and is settled.
    let mut ack = ExecAck::new();
    ack.client_order_id = id;
    execs.send(&mut ack).unwrap();
    run(&mut t);
    assert_eq!((t.counts.reports, t.counts.reports_unexpected, t.strategy.in_flight()), (1, 0, 0));
}

/// Issue 25 review: every in-flight order's report lost, and no later report to show it. The
/// trader stood at its in-flight limit for good (each decision skipped); after the report wait
/// times out (`reports::Silence`, driven by the run loop) the orders are counted lost and it
/// trades on; a report that comes after all is a duplicate, not a second settlement.
#[test]
fn orders_whose_reports_never_come_are_expired_and_trading_goes_on() {
    let Rig { gone: _gone, mut md, mut execs, mut gateway_in, mut t } = Rig::new("expire", 1);
    let stop = AtomicBool::new(false);
    let run = |t: &mut Trader| while t.duty(&stop) > 0 {};

    md.publish(add(1, Side::Buy, 10).as_bytes()).unwrap();
    run(&mut t);
    let Some(Recv::Message(m)) = gateway_in.try_recv() else { panic!("no order on the ring") };
    let first = TracedOrder::parse(m.payload).unwrap().order.client_order_id;
    // Its report is lost. The top moves: the one order allowed in flight still waits.
    md.publish(add(2, Side::Buy, 11).as_bytes()).unwrap();
    run(&mut t);
    assert_eq!((t.counts.orders, t.strategy.stats.skipped_in_flight), (1, 1), "held at the limit");
    assert_eq!(t.expire_reports(), 1);
    assert_eq!((t.strategy.in_flight(), t.counts.reports_lost), (0, 1));
    md.publish(add(3, Side::Buy, 12).as_bytes()).unwrap();
    run(&mut t);
    assert_eq!(t.counts.orders, 2, "trading goes on");
    // The lost report turns up after all: a duplicate, and the second order still in flight.
    let mut ack = ExecAck::new();
    ack.client_order_id = first;
    execs.send(&mut ack).unwrap();
    run(&mut t);
    assert_eq!((t.counts.reports_duplicate, t.counts.reports, t.strategy.in_flight()), (1, 0, 1));
}

/// An idle duty cycle looks at the market data twice (once more after the reports and the
/// warming, before the idle pause), and the summary's figure counts it; a cycle that took a
/// message is not an idle one.
#[test]
fn an_idle_duty_cycle_looks_at_the_market_data_twice() {
    let Rig { gone: _gone, mut md, mut t, .. } = Rig::new("looks", 8);
    let stop = AtomicBool::new(false);
    assert_eq!(t.md_looks_per_idle_cycle(), 0, "no idle cycle yet");
    md.publish(add(1, Side::Buy, 10).as_bytes()).unwrap();
    assert_eq!(t.duty(&stop), 1);
    assert_eq!(t.md_looks_per_idle_cycle(), 0, "a cycle that took a message is not idle");
    for _ in 0..10 {
        assert_eq!(t.duty(&stop), 0);
    }
    assert_eq!(t.md_looks_per_idle_cycle(), 2);
}

/// A tick's stamp is timed only where this run's clock could have made it. The smallest stale
/// stamp before: one tick before the trader began (a replayed recording's); after its receive:
/// past the 1 ms cores' skew allowance (a clock ahead of this one). Each still trades, its
/// order's trace without the stamp (so the gateway does not time it either), and is counted;
/// a stamp taken now, or within the allowance ahead, is timed; a tick stamped 0 is neither.
#[test]
fn ticks_stamped_before_the_trader_or_by_another_clock_are_counted_not_timed() {
    let Rig { gone: _gone, mut md, mut gateway_in, mut t, .. } = Rig::new("stamps", 8);
    let stop = AtomicBool::new(false);
    let run = |t: &mut Trader| while t.duty(&stop) > 0 {};
    let tsc = tickbus::time::Tsc::new();
    let mut order_trace = || {
        let Some(Recv::Message(m)) = gateway_in.try_recv() else { panic!("no order on the ring") };
        TracedOrder::parse(m.payload).unwrap().trace
    };
    // Each a new best bid: an order each.
    let stamped = |id: u64, at: u64| {
        let mut a = add(id, Side::Buy, 10 + id as i64);
        a.header.publish_tsc = at;
        a
    };
    md.publish(stamped(1, t.stamps_from - 1).as_bytes()).unwrap();
    run(&mut t);
    assert_eq!((t.counts.ticks, t.counts.orders, t.counts.md_stale_stamps, t.tick_hop.len()), (1, 1, 1, 0));
    let trace = order_trace();
    assert_eq!((trace.ingress_tsc, trace.md_publish_tsc), (0, 0), "{trace:?}");
    // 100 ms ahead of this clock, 100 times the allowance (a host's stall between the publish
    // and the receive shortens it by its length: tens of ms here would not fool the test).
    let ms = t.skew_ticks;
    md.publish(stamped(2, tsc.now() + 100 * ms).as_bytes()).unwrap();
    run(&mut t);
    assert_eq!((t.counts.ticks, t.counts.orders, t.counts.md_stale_stamps, t.tick_hop.len()), (2, 2, 2, 0));
    assert_eq!(order_trace().ingress_tsc, 0);
    assert_eq!(ms, (t.scale.ticks_per_ns * 1e6) as u64, "the allowance is 1 ms of ticks");
    // This run's: timed, and its trace carries it.
    let now = tsc.now();
    md.publish(stamped(3, now).as_bytes()).unwrap();
    run(&mut t);
    assert_eq!((t.counts.ticks, t.counts.orders, t.counts.md_stale_stamps, t.tick_hop.len()), (3, 3, 2, 1));
    let trace = order_trace();
    assert_eq!((trace.ingress_tsc, trace.md_publish_tsc), (now, now), "{trace:?}");
    // The stamp the trader began at is its own clock's: timed.
    md.publish(stamped(4, t.stamps_from).as_bytes()).unwrap();
    run(&mut t);
    assert_eq!((t.counts.md_stale_stamps, t.tick_hop.len()), (2, 2));
    // Half the allowance ahead (another core's skew): timed (as 1 ns, unless the receive came
    // that much later).
    md.publish(stamped(5, tsc.now() + ms / 2).as_bytes()).unwrap();
    run(&mut t);
    assert_eq!((t.counts.md_stale_stamps, t.tick_hop.len()), (2, 3));
    // No stamp at all: neither timed nor stale.
    md.publish(stamped(6, 0).as_bytes()).unwrap();
    run(&mut t);
    assert_eq!((t.counts.ticks, t.counts.md_stale_stamps, t.tick_hop.len()), (6, 2, 3));
}
