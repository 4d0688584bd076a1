//! Agents on pinned cores with idle strategies: a publisher agent and a subscriber agent, each a
//! `do_work` duty cycle driven by an `AgentRunner` on its own thread. The publisher busy-spins
//! (lowest latency, burns its core); the subscriber backs off when idle (spin, yield, park), so
//! a quiet stream does not cost a core.
//!
//! Run: `cargo run --release -p tickbus --example pinned_agents`
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickbus::agent::{Agent, AgentRunner, IdleStrategy};
use tickbus::shm::{self, ShmOptions, ShmPublisher, ShmSubscriber};
use tickbus::{Mode, Recv, RingConfig};

const MESSAGES: u64 = 200_000;

struct Publish {
    p: ShmPublisher,
    sent: Arc<AtomicU64>,
}

impl Agent for Publish {
    fn name(&self) -> &str {
        "publisher"
    }
    fn do_work(&mut self, now: u64) -> usize {
        let n = self.sent.load(Ordering::Relaxed);
        if n == MESSAGES || self.p.publish(&now.to_le_bytes()).is_err() {
            return 0; // done, or the ring is full: idle this cycle
        }
        self.sent.store(n + 1, Ordering::Release);
        1
    }
}

struct Subscribe {
    s: ShmSubscriber,
    received: Arc<AtomicU64>,
}

impl Agent for Subscribe {
    fn name(&self) -> &str {
        "subscriber"
    }
    fn uses_clock(&self) -> bool {
        false // it never looks at `now`: its runner need not read the TSC every cycle
    }
    fn do_work(&mut self, _now: u64) -> usize {
        // Up to 64 messages per duty cycle, then back to the runner.
        let got = self.s.poll(64, |r| assert!(matches!(r, Recv::Message(_)), "reliable: no gaps"));
        self.received.fetch_add(got as u64, Ordering::Release);
        got
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let opts = ShmOptions::default();
    let ring = format!("example-agents-{}", std::process::id());
    let mut cfg = RingConfig::for_payload(Mode::Reliable, 3, 8, 4096);
    cfg.max_consumers = 1;
    let p = shm::open_publisher(&ring, &cfg, &opts)?;
    let s = shm::open_consumer(&ring, &opts)?;
    let (sent, received) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    // The first two cores this process may use (a CI runner may be given other ones).
    let cores: Vec<usize> = core_affinity::get_core_ids().unwrap_or_default().iter().map(|c| c.id).collect();
    let pub_core = *cores.first().ok_or("no core available to this process")?;
    let sub_core = *cores.get(1).unwrap_or(&pub_core);
    let backoff = IdleStrategy::Backoff {
        spins: 10_000,
        yields: 100,
        min_park: Duration::from_micros(10),
        max_park: Duration::from_millis(1),
    };
    let subscriber = AgentRunner::start(Subscribe { s, received: received.clone() }, backoff, Some(sub_core))?;
    let publisher = AgentRunner::start(Publish { p, sent: sent.clone() }, IdleStrategy::BusySpin, Some(pub_core))?;
    let (pp, sp) = (publisher.pinning(), subscriber.pinning());
    let deadline = Instant::now() + Duration::from_secs(60);
    while received.load(Ordering::Acquire) < MESSAGES && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    publisher.stop()?;
    subscriber.stop()?;
    shm::remove(&ring, &opts)?;
    let core = |p: Option<tickbus::agent::Pinning>| p.map_or("unpinned".to_owned(), |p| format!("core {}", p.core));
    println!("publisher agent on {} (busy-spin), subscriber agent on {} (backoff)", core(pp), core(sp));
    println!("{} messages published, {} received", sent.load(Ordering::Acquire), received.load(Ordering::Acquire));
    Ok(())
}
