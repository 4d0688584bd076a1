//! The tick-to-trade demo: a feed handler replays an ITCH day onto a tickbus shm ring at a fixed
//! rate (open loop); a strategy on the other core keeps an L3 book from it and, on every change
//! at the top of a stock's book, sends an IOC order at that price on a second ring; a gateway
//! (sharing the feed handler's core as a second agent) takes the orders.
//!
//! Two figures, both from the tick's *intended* send time (no coordinated omission): market data
//! one-way (feed -> strategy) and tick-to-trade (feed -> book -> decision -> order at the
//! gateway). Rings are reliable: nothing is dropped, a full ring only delays.
use std::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tickbus::shm::{self, ShmOptions};
use tickbus::time::{Tsc, TscScale};
use tickbus::{Mode, Recv, RingConfig};
use tickbus_codecs::book::{OrderBook, Side};
use tickbus_codecs::itch::{frames, parse};
use tickbus_codecs::orders::NewOrder;
use tickbus_codecs::{Message, OrdType, TimeInForce};

use crate::bench::cleanup::Rings;
use crate::bench::harness::{histogram, pin, Start};
use crate::model::{Kind, Row, Section};

pub struct Demo<'a> {
    /// The ITCH file's bytes (`[len][msg]` frames).
    pub itch: &'a [u8],
    pub rate: u64,
    pub cores: (usize, usize),
    pub ticks_per_ns: f64,
    pub opts: ShmOptions,
}

/// What the strategy saw, for the report and the tests.
pub struct Outcome {
    pub section: Section,
    pub ticks: u64,
    pub orders: u64,
}

pub fn run(d: &Demo<'_>) -> Result<Outcome, Box<dyn Error>> {
    let t0 = std::time::SystemTime::now();
    // One pass checks every frame (a bad file fails here, not mid-run) and counts them. The feed
    // then walks the same bytes in place: an mmap'd file is never copied, and this pass has
    // already faulted its pages in, so the timed loop takes no page faults.
    let mut total = 0u64;
    for r in frames(d.itch) {
        r?;
        total += 1;
    }
    let itch = d.itch;
    let tag = format!("ttt-{}", std::process::id());
    let (md_name, ord_name) = (format!("{tag}-md"), format!("{tag}-orders"));
    // Made before the rings: dropped after them, so they go on every way out.
    let _rings = Rings::with_options(&[&md_name, &ord_name], d.opts.clone());
    let cfg = |stream, payload| RingConfig {
        ticks_per_ns: d.ticks_per_ns,
        ..RingConfig::for_payload(Mode::Reliable, stream, payload, 4096)
    };
    let mut md = shm::open_publisher(&md_name, &cfg(1, 64), &d.opts)?;
    let mut md_rx = shm::open_consumer(&md_name, &d.opts)?;
    let mut ord_tx = shm::open_publisher(&ord_name, &cfg(2, NewOrder::LEN), &d.opts)?;
    let mut ord_rx = shm::open_consumer(&ord_name, &d.opts)?;
    let scale = TscScale { ticks_per_ns: d.ticks_per_ns };
    let period = d.ticks_per_ns * 1e9 / d.rate as f64;
    let ticks_per_ns = d.ticks_per_ns;
    let ready = Start::new();
    let ready_b = ready.clone();
    let orders_sent = Arc::new(AtomicU64::new(u64::MAX));
    let orders_sent_b = orders_sent.clone();
    let (core_a, core_b) = d.cores;

    // Strategy: book + decision + order, on core B.
    let strategy = std::thread::Builder::new().name("strategy".into()).spawn(
        move || -> Result<(hdrhistogram::Histogram<u64>, u64), String> {
            let tsc = Tsc::new();
            let mut book = OrderBook::with_capacity(1 << 16, 1024);
            let mut md_h = histogram();
            let mut order = NewOrder::new();
            order.time_in_force = TimeInForce::ImmediateOrCancel as u8;
            order.ord_type = OrdType::Limit as u8;
            let (mut seen, mut sent) = (0u64, 0u64);
            ready_b.go(pin(core_b).map_err(|e| e.to_string())).map_err(|e| e.to_string())?;
            while seen < total {
                let Some(r) = md_rx.try_recv() else {
                    std::hint::spin_loop();
                    continue;
                };
                let Recv::Message(m) = r else { return Err("a reliable consumer was lapped".into()) };
                let intended = u64::from_le_bytes(m.payload[..8].try_into().expect("8-byte stamp"));
                md_h.saturating_record(scale.delta_ns(intended, tsc.now()).max(1));
                let position = m.position;
                let msg = parse(&m.payload[8..], position).map_err(|e| e.to_string())?;
                seen += 1;
                let Ok(Some(u)) = book.apply(&msg) else { continue };
                if !u.top_changed {
                    continue;
                }
                // Take the new best price on the side that moved (an IOC that would hit it).
                let Some(top) = book.best(u.locate, u.side) else { continue };
                order.client_order_id = position;
                order.instrument_id = u32::from(u.locate);
                order.side = match u.side {
                    Side::Bid => tickbus_codecs::Side::Sell as u8,
                    Side::Ask => tickbus_codecs::Side::Buy as u8,
                };
                order.price = i64::from(top.price) * (tickbus_codecs::PRICE_SCALE / 10_000);
                order.qty = 100;
                while ord_tx.send(&mut order).is_err() {
                    std::hint::spin_loop();
                }
                sent += 1;
            }
            orders_sent_b.store(sent, Ordering::Release);
            Ok((md_h, sent))
        },
    )?;

    // Feed handler and gateway: two duties on core A.
    let (md_h, sent, ttt) = std::thread::scope(|s| -> Result<_, Box<dyn Error>> {
        let feed = std::thread::Builder::new().name("feed".into()).spawn_scoped(
            s,
            move || -> Result<(hdrhistogram::Histogram<u64>, Behind), String> {
                let tsc = Tsc::new();
                let late_bound = (crate::model::BACKLOG_LATE_NS as f64 * ticks_per_ns) as u64;
                let (mut max_behind, mut very_late, mut last) = (0u64, 0u64, 0u64);
                let mut ttt = histogram();
                let mut buf = [0u8; 64];
                ready.go(pin(core_a).map_err(|e| e.to_string())).map_err(|e| e.to_string())?;
                let start = tsc.now() + (ticks_per_ns * 1e6) as u64;
                let intended = |i: u64| start + (i as f64 * period) as u64;
                let drain = |ord_rx: &mut tickbus::shm::ShmSubscriber, ttt: &mut hdrhistogram::Histogram<u64>| {
                    let mut n = 0;
                    while let Some(Recv::Message(m)) = ord_rx.try_recv() {
                        if let Ok(o) = NewOrder::parse(m.payload) {
                            ttt.saturating_record(scale.delta_ns(intended(o.client_order_id), tsc.now()).max(1));
                            n += 1;
                        }
                    }
                    n
                };
                let (mut next, mut got) = (0u64, 0u64);
                let mut msgs = frames(itch).map_while(Result::ok).map(|r| r.message.as_bytes());
                let mut pending = msgs.next();
                while let Some(m) = pending {
                    let due = intended(next);
                    if tsc.now() >= due {
                        buf[..8].copy_from_slice(&due.to_le_bytes());
                        buf[8..8 + m.len()].copy_from_slice(m);
                        if md.publish(&buf[..8 + m.len()]).is_ok() {
                            // How far behind its schedule the feed published (backlog, if far).
                            last = tsc.now();
                            let behind = last - due;
                            max_behind = max_behind.max(behind);
                            very_late += u64::from(behind > late_bound);
                            next += 1;
                            pending = msgs.next();
                        }
                    }
                    got += drain(&mut ord_rx, &mut ttt);
                }
                // Take every order the strategy sent (it says how many when it has seen every tick).
                while got != orders_sent.load(Ordering::Acquire) {
                    got += drain(&mut ord_rx, &mut ttt);
                }
                Ok((ttt, (max_behind, very_late, start, last)))
            },
        )?;
        let (md_h, sent) = strategy.join().map_err(|_| "strategy panicked")??;
        let (ttt, behind) = feed.join().map_err(|_| "feed panicked")??;
        Ok((md_h, sent, (ttt, behind)))
    })?;
    let (ttt, (max_behind, very_late, start, last)) = ttt;
    let backlog = crate::model::Backlog {
        max_behind_ns: scale.delta_ns(0, max_behind),
        late_sends: very_late,
        sends: total,
        asked_msgs_per_s: d.rate as f64,
        sustained_msgs_per_s: total as f64 * 1e9 / scale.delta_ns(start, last).max(1) as f64,
    };
    let backlog = backlog.is_backlogged().then_some(backlog);
    let note = format!(
        "ITCH replay at {} msg/s on core {}, book + IOC decision on core {}",
        crate::model::rate_name(d.rate),
        d.cores.0,
        d.cores.1
    );
    let mut section = Section {
        mode: "tick-to-trade".into(),
        size: 64,
        rate: Some(d.rate),
        rows: vec![
            Row::new("market data one-way (feed -> strategy)".into(), Kind::Tickbus, note.clone(), md_h)
                .taken_since(t0),
            Row::new(
                "tick-to-trade (feed -> book -> order -> gateway)".into(),
                Kind::Tickbus,
                format!("{sent} orders on top-of-book changes"),
                ttt,
            )
            .taken_since(t0),
        ],
    };
    for r in &mut section.rows {
        r.backlog = backlog;
    }
    section.ratios();
    Ok(Outcome { section, ticks: total, orders: sent })
}

/// How far the feed fell behind: (max ticks behind, sends over 100 µs late, first due, last send).
type Behind = (u64, u64, u64, u64);

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> ShmOptions {
        let mut o = ShmOptions::default();
        o.hugepages = tickbus::shm::HugepagePolicy::Preferred;
        o
    }

    /// The replay path on the third-party file: every message reaches the strategy, orders come
    /// back for top-of-book changes, and every order is timed.
    #[test]
    fn the_demo_replays_the_third_party_itch_file_end_to_end() {
        let _cores = crate::CORES.lock().unwrap_or_else(|e| e.into_inner());
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data/itch/ex20101224.TEST_ITCH_50");
        let itch = std::fs::read(path).unwrap();
        let tsc = Tsc::new();
        let d = Demo {
            itch: &itch,
            rate: 200_000,
            cores: (0, 1),
            ticks_per_ns: tsc.measure_ticks_per_ns(std::time::Duration::from_millis(50)),
            opts: opts(),
        };
        let o = run(&d).unwrap();
        assert_eq!(o.ticks, 12_012);
        assert_eq!(o.section.rows[0].count, 12_012, "every tick reached the strategy");
        assert!(o.orders > 100, "{} orders", o.orders);
        assert_eq!(o.section.rows[1].count, o.orders, "every order reached the gateway and was timed");
    }
}
