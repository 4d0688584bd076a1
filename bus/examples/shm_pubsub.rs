//! A publisher and a subscriber in two processes on one shared-memory ring. This program is the
//! publisher; it starts itself again as the subscriber (`shm_pubsub sub RING`), as your own two
//! apps would each name the ring.
//!
//! Run: `cargo run --release -p tickbus --example shm_pubsub`
use std::process::Command;

use tickbus::codecs::{md::Quote, Message, PRICE_SCALE};
use tickbus::shm::{self, ShmOptions};
use tickbus::{Mode, Recv, RingConfig};

const QUOTES: u64 = 100_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let opts = ShmOptions::default(); // /dev/hugepages/tickbus, else /dev/shm/tickbus
    let args: Vec<String> = std::env::args().collect();
    if let [_, role, ring] = &args[..] {
        if role == "sub" {
            return subscribe(ring, &opts);
        }
    }
    let ring = format!("example-quotes-{}", std::process::id());
    // Reliable, one consumer: the publisher waits for the subscriber, so it sees every quote.
    // (A market-data feed would use Mode::Lossy: a slow subscriber then sees a gap instead.)
    let mut cfg = RingConfig::for_payload(Mode::Reliable, 1, Quote::LEN, 1024);
    cfg.max_consumers = 1;
    let mut publisher = shm::open_publisher(&ring, &cfg, &opts)?;
    let mut subscriber = Command::new(std::env::current_exe()?).args(["sub", &ring]).spawn()?;

    let mut quote = Quote::new();
    quote.instrument_id = 7;
    quote.bid_qty = 100;
    let mut full = 0u64;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for i in 0..QUOTES {
        quote.bid_px = (100 + (i % 50) as i64) * PRICE_SCALE;
        // `send` stamps stream, sequence and TSC. Full means the subscriber is behind (or not
        // attached yet): nothing is lost, the quote is simply sent again.
        while publisher.send(&mut quote).is_err() {
            full += 1;
            if full.is_multiple_of(1_000_000) && std::time::Instant::now() > deadline {
                let _ = subscriber.kill();
                return Err("the subscriber stopped taking quotes (is it alive?)".into());
            }
            std::hint::spin_loop();
        }
    }
    println!("publisher: sent {QUOTES} quotes (waited on a full ring {full} times)");
    let status = subscriber.wait()?;
    drop(publisher);
    shm::remove(&ring, &opts)?; // refused while a publisher is alive
    if !status.success() {
        return Err(format!("the subscriber failed: {status}").into());
    }
    Ok(())
}

fn subscribe(ring: &str, opts: &ShmOptions) -> Result<(), Box<dyn std::error::Error>> {
    let mut s = shm::open_consumer(ring, opts)?; // the ring's one consumer line
    let (mut received, mut last_bid) = (0u64, 0i64);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while received < QUOTES {
        if received.is_multiple_of(1024) && std::time::Instant::now() > deadline {
            return Err(format!("only {received} quotes in 60 s: is the publisher alive?").into());
        }
        match s.try_recv() {
            Some(Recv::Message(m)) => {
                let q = m.decode::<Quote>()?; // zero-copy; checks type, version and length
                assert_eq!(q.header.sequence, received, "in order, none missing");
                last_bid = q.bid_px;
                received += 1;
            }
            Some(Recv::Gap(g)) => return Err(format!("a reliable consumer never sees a gap: {g:?}").into()),
            None => std::hint::spin_loop(), // busy-poll (on a pinned core, in a real app)
        }
    }
    println!("subscriber: received {received} quotes in order, last bid {}", last_bid / PRICE_SCALE);
    Ok(())
}
