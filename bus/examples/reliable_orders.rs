//! A reliable order stream with back-pressure: the order gateway's consumer is slow, the ring is
//! small, and the trading thread never loses an order. `offer` hands the order back when the
//! ring is full; the app decides what to do meanwhile (here: note it, check the consumer is
//! alive now and then, and try again).
//!
//! Run: `cargo run --release -p tickbus --example reliable_orders`
use std::time::{Duration, Instant};

use tickbus::codecs::orders::NewOrder;
use tickbus::codecs::{Message, OrdType, Side, TimeInForce, PRICE_SCALE};
use tickbus::ring::SendError;
use tickbus::shm::{self, ShmOptions};
use tickbus::{Mode, Recv, RingConfig};

const ORDERS: u64 = 20_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let opts = ShmOptions::default();
    let ring = format!("example-orders-{}", std::process::id());
    let mut cfg = RingConfig::for_payload(Mode::Reliable, 2, NewOrder::LEN, 64); // deliberately small
    cfg.max_consumers = 1;
    let mut orders = shm::open_publisher(&ring, &cfg, &opts)?;

    // The gateway: another process in real life; a thread here. It pauses now and then.
    let gateway = {
        let (ring, opts) = (ring.clone(), opts.clone());
        std::thread::spawn(move || -> Result<u64, String> {
            let mut s = shm::open_consumer(&ring, &opts).map_err(|e| e.to_string())?;
            let mut next = 1u64;
            let deadline = Instant::now() + Duration::from_secs(60);
            while next <= ORDERS {
                if Instant::now() > deadline {
                    return Err(format!("only {} orders in 60 s", next - 1));
                }
                match s.try_recv() {
                    Some(Recv::Message(m)) => {
                        let o = m.decode::<NewOrder>().map_err(|e| e.to_string())?;
                        if o.client_order_id != next {
                            return Err(format!("order {} arrived, expected {next}", o.client_order_id));
                        }
                        next += 1;
                        if next.is_multiple_of(1000) {
                            std::thread::sleep(Duration::from_millis(1)); // a slow moment
                        }
                    }
                    Some(Recv::Gap(g)) => return Err(format!("reliable streams have no gaps: {g:?}")),
                    None => std::hint::spin_loop(),
                }
            }
            Ok(next - 1)
        })
    };

    let mut order = NewOrder::new();
    (order.instrument_id, order.side, order.qty) = (7, Side::Buy as u8, 100);
    (order.time_in_force, order.ord_type) = (TimeInForce::ImmediateOrCancel as u8, OrdType::Limit as u8);
    order.price = 101 * PRICE_SCALE;
    let (mut full, mut checked) = (0u64, Instant::now());
    let deadline = Instant::now() + Duration::from_secs(60);
    for id in 1..=ORDERS {
        order.client_order_id = id;
        let mut pending = order;
        loop {
            match orders.offer(pending) {
                Ok(_) => break,
                Err(SendError::Full(back)) => {
                    // Back-pressure: the order comes back untouched. Keep it and retry; look at
                    // the consumer (a syscall) only every few ms, never per attempt.
                    full += 1;
                    pending = back;
                    if checked.elapsed() > Duration::from_millis(5) {
                        checked = Instant::now();
                        if checked > deadline {
                            return Err("the gateway stopped taking orders for 60 s".into());
                        }
                        if orders.consumer_status().iter().all(|c| !c.alive) {
                            eprintln!("no live gateway on the order ring yet: waiting");
                        }
                    }
                    std::hint::spin_loop();
                }
                Err(e) => return Err(format!("{e:?}").into()),
            }
        }
    }
    let received = gateway.join().map_err(|_| "gateway panicked")??;
    println!("sent {ORDERS} orders; the ring was full {full} times (back-pressure, nothing lost)");
    println!("gateway received {received} orders in order");
    drop(orders);
    shm::remove(&ring, &opts)?;
    Ok(())
}
