//! Tick-to-trade's floor as one chain, timed end to end in the same run: the pipeline's two
//! process crossings with nothing between them but a bare relay. The lab publishes market-data
//! slots on the venue's core, stamped as each publish begins; a child on the trader's core
//! (`latency-lab __hop-relay`) reads them and, for one message in `every` (the share the
//! trader answers), publishes an order slot carrying that stamp; the lab reads the orders on
//! the gateway's core (on two cores the venue's, between its publishes and once after each, as
//! the exchange's gateway agent does) and times each from the stamp: on two cores both stamps
//! are the venue's core's, on three the venue's and the gateway's, as tick-to-trade's are.
//!
//! The relay also stamps its receive and its publish, as the trader's trace does, so the chain
//! splits into its two crossings and the relay's own span like the pipeline's rows do. Its
//! receive stamp is a plain RDTSC, as the trader's is, so the two splits compare: RDTSC waits
//! for no load, and the end of the slot's read lands in the span (101-117 ns unfenced against
//! 9-16 with an LFENCE before it, the whole chain unchanged; ARCHITECTURE.md). A pipeline that
//! beats the chain, end to end or on its crossings, has beaten a path doing less than it does:
//! the chain is then broken, and the verdict says so.
use std::error::Error;
use std::io::BufRead;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tickbus::shm::{self, ShmOptions};
use tickbus::time::{Tsc, TscScale};
use tickbus::{Mode, Recv, RingConfig, StartAt};

use super::cleanup::Rings;
use super::harness::{histogram, pin};
use super::pipeline::{spawn_ready, Kill, MD_PAYLOAD, ORDER_PAYLOAD};

/// The relay's last order: stamp 0 (no publish is stamped 0), so the lab stops reading.
const END: u64 = 0;

/// What the chain measured: order p50 and p99 (ns, from the market data's publish to the
/// order read), the p50 of the two crossings alone per order (the relay's own span between
/// its receive and its publish left out, as the gateway's crossings row leaves the trader's
/// out), the relay's span p50, and how many market-data slots the relay lost (lapped while its
/// core was away).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chain {
    pub p50: u64,
    pub p99: u64,
    pub crossings_p50: u64,
    pub relay_span_p50: u64,
    pub missed: u64,
}

/// Runs the chain: `count` market-data slots at `rate` from `cores.0`, the relay on `cores.1`
/// answering one in `every`, the orders read on `cores.2` (between publishes when that is
/// `cores.0`, as the exchange's gateway agent shares the venue's core on two cores).
pub fn chain_floor(
    rate: u64,
    count: u64,
    every: u64,
    cores: (usize, usize, usize),
    ticks_per_ns: f64,
) -> Result<Chain, Box<dyn Error>> {
    let md_name = format!("lab-chain-md-{}-{rate}", std::process::id());
    let order_name = format!("lab-chain-orders-{}-{rate}", std::process::id());
    let opts = ShmOptions::default();
    // Dropped after the child (declared first): both rings go however the run ends.
    let _rings = Rings::new(&[&md_name, &order_name]);
    let cfg = RingConfig { ticks_per_ns, ..RingConfig::for_payload(Mode::Lossy, 9, MD_PAYLOAD, 1 << 16) };
    let mut md = shm::open_publisher(&md_name, &cfg, &opts)?;
    let (count_arg, every_arg, core_arg) = (count.to_string(), every.max(1).to_string(), cores.1.to_string());
    let args = ["__hop-relay", "--md", &md_name, "--orders", &order_name, "--count", &count_arg];
    let (mut child, mut out) =
        spawn_ready(&[&args[..], &["--every", &every_arg, "--core", &core_arg]].concat(), "the chained floor's relay")?;
    let mut line = String::new();
    // The relay made the order ring; a reliable ring's publisher waits for this consumer.
    let mut orders = shm::open_consumer(&order_name, &opts)?;
    let scale = TscScale { ticks_per_ns };
    let give_up = Instant::now() + Duration::from_secs_f64(count as f64 / rate as f64 + 30.0);
    let mut reader = OrderReader {
        orders: &mut orders,
        scale,
        tsc: Tsc::new(),
        h: histogram(),
        crossings: histogram(),
        ended: false,
    };
    let venue = |md: &mut shm::ShmPublisher, between: &mut dyn FnMut() -> Result<(), String>| -> Result<(), String> {
        pin(cores.0).map_err(|e| e.to_string())?;
        let tsc = Tsc::new();
        let period = ticks_per_ns * 1e9 / rate as f64;
        let start = tsc.now() + (ticks_per_ns * 1e6) as u64;
        let mut buf = [0u8; MD_PAYLOAD];
        for i in 0..count {
            let due = start + (i as f64 * period) as u64;
            while tsc.now() < due {
                between()?;
            }
            // Stamped as its publish begins, as the venue says in each message.
            buf[..8].copy_from_slice(&tsc.now().max(1).to_le_bytes());
            if md.publish(&buf).is_err() {
                return Err("the chained floor's market-data ring refused a publish".into());
            }
            // One look after every publish, as the exchange's pair gives its gateway a turn
            // every cycle: behind its schedule the venue still lets orders in.
            between()?;
        }
        Ok(())
    };
    let venue_failed = std::sync::atomic::AtomicBool::new(false);
    // Whether the relay has exited (a failed relay sends no last order): checked by the
    // reader's drain every 65,536 looks (a waitpid call: an order landing during it waits for
    // it, once in a great many looks).
    let exited = |child: &mut Kill| child.0.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))));
    let ran = std::thread::scope(|sc| -> Result<(), String> {
        if cores.2 == cores.0 {
            // The gateway shares the venue's core (two cores): it looks between publishes.
            sc.spawn(|| {
                venue(&mut md, &mut || reader.look())?;
                reader.drain(give_up, &mut || exited(&mut child))
            })
            .join()
            .map_err(|_| "the chained floor's venue panicked")?
        } else {
            let v = sc.spawn(|| {
                // Set however the venue ends short, a panic included, so the reader stops.
                struct Failed<'a>(&'a std::sync::atomic::AtomicBool, bool);
                impl Drop for Failed<'_> {
                    fn drop(&mut self) {
                        if !self.1 {
                            self.0.store(true, Relaxed);
                        }
                    }
                }
                let mut guard = Failed(&venue_failed, false);
                let v = venue(&mut md, &mut || Ok(()));
                guard.1 = v.is_ok();
                v
            });
            let g = sc.spawn(|| {
                pin(cores.2).map_err(|e| e.to_string())?;
                reader.drain(give_up, &mut || exited(&mut child) || venue_failed.load(Relaxed))
            });
            let v = v.join().map_err(|_| "the chained floor's venue panicked")?;
            let g = g.join().map_err(|_| "the chained floor's gateway panicked")?;
            v.and(g)
        }
    });
    let (h, crossings) = (reader.h, reader.crossings);
    // A failure on the lab's side leaves the relay waiting for market data: stopped now, and
    // its complaint (which would be about that wait) is not the cause.
    if let Err(e) = &ran {
        if !exited(&mut child) {
            drop(child);
            return Err(e.clone().into());
        }
    }
    line.clear();
    out.read_line(&mut line)?;
    let child = child.0.take().expect("a child");
    let status = child.wait_with_output()?;
    let stderr = String::from_utf8_lossy(&status.stderr);
    // A failed run whose relay had ended says what the relay said.
    ran.map_err(|e| format!("{e} (the relay: {}; {})", status.status, stderr.trim()))?;
    let v: RelayReading = serde_json::from_str(line.trim())
        .map_err(|e| format!("the chained floor's relay failed ({}): {e}: {line} {}", status.status, stderr.trim()))?;
    if h.len() != v.relayed {
        return Err(format!("the chained floor's relay sent {} orders and {} were read", v.relayed, h.len()).into());
    }
    if h.is_empty() {
        return Err(format!("the chained floor timed no order ({} market-data slots missed)", v.missed).into());
    }
    Ok(Chain {
        p50: h.value_at_quantile(0.5),
        p99: h.value_at_quantile(0.99),
        crossings_p50: crossings.value_at_quantile(0.5),
        relay_span_p50: v.span_p50,
        missed: v.missed,
    })
}

/// The gateway's side: the order ring and what it has timed.
struct OrderReader<'a> {
    orders: &'a mut shm::ShmSubscriber,
    scale: TscScale,
    tsc: Tsc,
    h: hdrhistogram::Histogram<u64>,
    crossings: hdrhistogram::Histogram<u64>,
    ended: bool,
}

impl OrderReader<'_> {
    /// One look at the order ring, as the gateway's agent makes between the venue's turns.
    fn look(&mut self) -> Result<(), String> {
        match self.orders.try_recv() {
            Some(Recv::Message(m)) => {
                let now = self.tsc.now();
                let word = |k: usize| u64::from_le_bytes(m.payload[8 * k..8 * k + 8].try_into().expect("8 bytes"));
                let (stamp, received, published) = (word(0), word(1), word(2));
                if stamp == END {
                    self.ended = true;
                } else {
                    let d = |a, b| self.scale.delta_ns(a, b);
                    self.h.saturating_record(d(stamp, now).max(1));
                    self.crossings.saturating_record((d(stamp, received) + d(published, now)).max(1));
                }
                Ok(())
            }
            Some(Recv::Gap(g)) => Err(format!("the chained floor's order ring lost {} orders", g.missed())),
            None => Ok(()),
        }
    }

    /// Looks until the relay's last order; gives up at `give_up`, or once `stopped` says the
    /// relay (or the venue) ended without it and the ring holds nothing more. `stopped` and
    /// the clock are read every 65,536 looks.
    fn drain(&mut self, give_up: Instant, stopped: &mut dyn FnMut() -> bool) -> Result<(), String> {
        let mut spins = 0u32;
        while !self.ended {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1 << 16) {
                if stopped() {
                    // What it sent before it ended is read first.
                    for _ in 0..(1 << 16) {
                        self.look()?;
                    }
                    if !self.ended {
                        return Err("the chained floor's relay (or its venue) ended without its last order".into());
                    }
                } else if Instant::now() >= give_up {
                    return Err("the chained floor's relay sent no last order in time".into());
                }
            }
            self.look()?;
        }
        Ok(())
    }
}

/// What the relay prints when done (one JSON line).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RelayReading {
    relayed: u64,
    missed: u64,
    /// The p50 of its own span, receive to publish (ns).
    span_p50: u64,
}

/// The relay (`latency-lab __hop-relay`): makes the order ring, prints "ready", reads `count`
/// market-data slots (or gives up after the ring stays quiet for 10 s), answers the first it
/// reads and one in `every` after it with an order carrying the slot's stamp, its receive and
/// its own publish (TSC, as the trader's trace does), then sends the last order.
pub fn relay(md_ring: &str, order_ring: &str, count: u64, every: u64, core: usize) -> Result<(), Box<dyn Error>> {
    let opts = ShmOptions::default();
    let mut md = shm::open_observer(md_ring, StartAt::Latest, &opts)?;
    let cfg = RingConfig {
        ticks_per_ns: md.config().ticks_per_ns,
        ..RingConfig::for_payload(Mode::Reliable, 9, ORDER_PAYLOAD, 4096)
    };
    let mut orders = shm::open_publisher(order_ring, &cfg, &opts)?;
    pin(core)?;
    let tsc = Tsc::new();
    let scale = TscScale { ticks_per_ns: cfg.ticks_per_ns };
    let mut span = histogram();
    println!("ready");
    let mut order = [0u8; ORDER_PAYLOAD];
    // Answers the first slot, then one in `every`.
    let mut left = 1u64;
    let every = every.max(1);
    let (mut seen, mut missed, mut relayed) = (0u64, 0u64, 0u64);
    let mut quiet_since: Option<Instant> = None;
    let mut spins = 0u32;
    // The clock is read only once a publish was refused: a floor must not time what the
    // trader does not do.
    let send = |orders: &mut shm::ShmPublisher, order: &[u8]| -> Result<(), String> {
        if orders.publish(order).is_ok() {
            return Ok(());
        }
        let give_up = Instant::now() + Duration::from_secs(10);
        while orders.publish(order).is_err() {
            if Instant::now() >= give_up {
                return Err("the chained floor's order reader stopped taking orders".into());
            }
            std::hint::spin_loop();
        }
        Ok(())
    };
    while seen + missed < count {
        match md.try_recv() {
            Some(Recv::Message(m)) => {
                let received = tsc.now();
                order[..8].copy_from_slice(&m.payload[..8]);
                seen += 1;
                quiet_since = None;
                // A countdown, not the index modulo `every`: a 64-bit division is tens of
                // cycles the trader does not spend, and a floor must not time them.
                left -= 1;
                if left == 0 {
                    left = every;
                    let published = tsc.now();
                    order[8..16].copy_from_slice(&received.to_le_bytes());
                    order[16..24].copy_from_slice(&published.to_le_bytes());
                    send(&mut orders, &order)?;
                    relayed += 1;
                    // Recorded after the publish, outside the chain's timing.
                    span.saturating_record(scale.delta_ns(received, published).max(1));
                }
            }
            Some(Recv::Gap(g)) => {
                missed += g.missed();
                quiet_since = None;
            }
            None => {
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(1 << 16) {
                    let since = *quiet_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > Duration::from_secs(10) {
                        return Err(format!("the chained floor's market data went quiet after {seen} slots").into());
                    }
                }
                std::hint::spin_loop();
            }
        }
    }
    send(&mut orders, &[0u8; ORDER_PAYLOAD])?;
    let span_p50 = span.value_at_quantile(0.5);
    println!("{}", serde_json::to_string(&RelayReading { relayed, missed, span_p50 })?);
    Ok(())
}
