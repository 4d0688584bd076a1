//! The soak: minutes of a reliable shm stream at a fixed rate, read by consumer processes, with
//! every message checked (nothing lost, nothing reordered, nothing torn), memory sampled, and
//! one-way percentiles per minute. Open loop: each message carries its *intended* send time, so
//! a stall shows in every later message's latency instead of hiding (no coordinated omission).
//!
//! The publisher is a thread of this process on core A; each consumer is a process
//! (`latency-lab __soak-consumer`) on core B. With two cores the consumers share core B and yield
//! when idle, so their tails include the scheduler's time slices: that is what this machine is.
use std::error::Error;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tickbus::shm::{self, PublisherState, ShmOptions};
use tickbus::time::{Tsc, TscScale};
use tickbus::{Mode, Recv, RingConfig};

use crate::bench::harness::{histogram, pin, spin_until};

const PAYLOAD: usize = 64;
const SLOTS: usize = 4096;

/// One consumer's figures for one minute.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Minute {
    pub consumer: usize,
    pub minute: u64,
    pub messages: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub p9999_ns: u64,
    pub max_ns: u64,
    /// The consumer's resident memory at the end of the minute (kB).
    pub rss_kb: u64,
}

/// How the soak ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SoakReport {
    pub minutes: u64,
    pub rate: u64,
    pub consumers: usize,
    pub published: u64,
    /// Messages each consumer received, in order and intact.
    pub delivered: Vec<u64>,
    /// Out of order, missing or torn messages seen (must be 0).
    pub violations: u64,
    /// Publishes that found the ring full (a consumer a whole ring behind) and were retried.
    pub late_sends: u64,
    pub publisher_rss_kb: Vec<u64>,
    pub per_minute: Vec<Minute>,
}

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// What one run of the stream gave.
pub struct Streamed {
    pub late_sends: u64,
    pub publisher_rss_kb: Vec<u64>,
    /// Each publish's cost on the publisher's core (TSC before and after, retries on a full
    /// ring included), when asked for.
    pub publish_cost: Histogram<u64>,
    pub per_minute: Vec<Minute>,
    /// Messages each consumer received, in order and intact.
    pub delivered: Vec<u64>,
    pub violations: u64,
}

/// The consumer processes and the ring of one stream: killed and removed if the run ends early.
struct Cleanup {
    children: Vec<Child>,
    name: String,
    opts: ShmOptions,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = shm::remove(&self.name, &self.opts);
    }
}

/// Longest a publish may wait on a full ring before the stream is given up (a consumer that
/// stopped reading without dying holds a reliable ring forever).
const FULL_PATIENCE: Duration = Duration::from_secs(10);

/// A reliable shm stream of `total` 64-byte messages at `rate` msg/s from a publisher thread
/// on `cores.0` to `consumers` consumer processes on `cores.1`: what the soak (`what`: "soak")
/// and the fan-out run. `measure_cost` times every publish (one more TSC read per message).
pub fn stream(
    what: &str,
    rate: u64,
    total: u64,
    consumers: usize,
    cores: (usize, usize),
    measure_cost: bool,
) -> Result<Streamed, Box<dyn Error>> {
    let opts = ShmOptions::default();
    let name = format!("lab-{what}-{}-{consumers}", std::process::id());
    let mut cfg = RingConfig::for_payload(Mode::Reliable, 77, PAYLOAD, SLOTS);
    cfg.max_consumers = consumers;
    // Declared before the publisher, so dropped after it: the ring is removed once unpublished.
    let mut guard = Cleanup { children: Vec::new(), name: name.clone(), opts: opts.clone() };
    let mut p = shm::open_publisher(&name, &cfg, &opts)?;
    guard.children = (0..consumers)
        .map(|i| {
            Command::new(std::env::current_exe()?)
                .args(["__soak-consumer", "--ring", &name, "--index", &i.to_string()])
                .args(["--total", &total.to_string(), "--core", &cores.1.to_string()])
                .stdout(Stdio::piped())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    let readers: Vec<_> = guard
        .children
        .iter_mut()
        .map(|c| {
            let out = c.stdout.take().expect("piped");
            std::thread::spawn(move || BufReader::new(out).lines().map_while(Result::ok).collect::<Vec<String>>())
        })
        .collect();
    // Wait until every consumer holds its line, so none misses the start.
    let deadline = Instant::now() + Duration::from_secs(10);
    while p.consumer_status().iter().filter(|c| c.alive).count() < consumers {
        if Instant::now() > deadline {
            return Err(format!("the {what}'s consumers did not attach within 10 s").into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let ticks_per_ns = cfg.ticks_per_ns;
    let me = std::process::id();
    let publisher = std::thread::spawn(move || -> Result<(u64, Vec<u64>, Histogram<u64>), String> {
        pin(cores.0).map_err(|e| e.to_string())?;
        let tsc = Tsc::new();
        let scale = TscScale { ticks_per_ns };
        let mut cost: Histogram<u64> = histogram();
        let period = ticks_per_ns * 1e9 / rate as f64;
        let minute = rate * 60;
        let start = tsc.now() + (ticks_per_ns * 1e6) as u64;
        let (mut late, mut rss) = (0u64, Vec::new());
        let mut buf = [0u8; PAYLOAD];
        for i in 0..total {
            let intended = start + (i as f64 * period) as u64;
            let before = spin_until(&tsc, intended);
            buf[..8].copy_from_slice(&i.to_le_bytes());
            buf[8..16].copy_from_slice(&intended.to_le_bytes());
            let mut full_since = None;
            loop {
                match p.publish(&buf) {
                    Ok(_) => break,
                    Err(e) if e.is_retryable() => {
                        let since = *full_since.get_or_insert_with(|| {
                            late += 1;
                            Instant::now()
                        });
                        if since.elapsed() > FULL_PATIENCE {
                            return Err(format!("message {i}: the ring stayed full for {FULL_PATIENCE:?}: {e}"));
                        }
                        std::hint::spin_loop();
                    }
                    Err(e) => return Err(format!("message {i}: {e}")),
                }
            }
            if measure_cost {
                cost.saturating_record(scale.delta_ns(before, tsc.now()).max(1));
            }
            if (i + 1).is_multiple_of(minute) {
                rss.push(rss_kb(me));
            }
        }
        Ok((late, rss, cost))
    });
    let (late_sends, publisher_rss_kb, publish_cost) = publisher
        .join()
        .map_err(|_| format!("the {what}'s publisher panicked"))?
        .map_err(|e| format!("the {what}'s publisher: {e}"))?;
    let mut per_minute = Vec::new();
    let (mut delivered, mut violations) = (Vec::new(), 0);
    for (i, r) in readers.into_iter().enumerate() {
        let status = guard.children[i].wait()?;
        let lines = r.join().map_err(|_| "a reader panicked")?;
        for l in &lines {
            if let Some(j) = l.strip_prefix("minute ") {
                per_minute.push(serde_json::from_str::<Minute>(j)?);
            } else if let Some(d) = l.strip_prefix("done ") {
                let f: Vec<u64> = d.split_whitespace().filter_map(|w| w.parse().ok()).collect();
                delivered.push(f.first().copied().unwrap_or(0));
                violations += f.get(1).copied().unwrap_or(1);
            }
        }
        if !status.success() || delivered.len() != i + 1 {
            return Err(format!("{what} consumer {i} failed ({status}): {lines:?}").into());
        }
    }
    drop(guard);
    Ok(Streamed { late_sends, publisher_rss_kb, publish_cost, per_minute, delivered, violations })
}

/// Runs the soak and writes `soak.json` and `soak.txt` into `out`. Fails if any message was
/// lost, reordered or torn, or if memory grew.
pub fn run(minutes: u64, rate: u64, consumers: usize, cores: (usize, usize), out: &Path) -> Result<(), Box<dyn Error>> {
    let total = rate * minutes * 60;
    let s = stream("soak", rate, total, consumers, cores, false)?;
    let report = SoakReport {
        minutes,
        rate,
        consumers,
        published: total,
        delivered: s.delivered,
        violations: s.violations,
        late_sends: s.late_sends,
        publisher_rss_kb: s.publisher_rss_kb,
        per_minute: s.per_minute,
    };
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("soak.json"), serde_json::to_string_pretty(&report)?)?;
    let text = text(&report);
    std::fs::write(out.join("soak.txt"), &text)?;
    print!("{text}");
    check(&report)
}

fn text(r: &SoakReport) -> String {
    let mut t = format!(
        "soak: {} min at {} msg/s, reliable shm ({SLOTS} slots of {PAYLOAD} B payload), {} consumer processes\n\
         published {}, delivered {:?}, violations {}, late sends {}\n\
         consumer minute  messages      p50      p99    p99.9   p99.99       max   RSS kB\n",
        r.minutes, r.rate, r.consumers, r.published, r.delivered, r.violations, r.late_sends
    );
    for m in &r.per_minute {
        t += &format!(
            "{:>8} {:>6} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8}\n",
            m.consumer, m.minute, m.messages, m.p50_ns, m.p99_ns, m.p999_ns, m.p9999_ns, m.max_ns, m.rss_kb
        );
    }
    t += &format!("publisher RSS kB per minute: {:?}\n", r.publisher_rss_kb);
    t
}

/// Nothing lost, reordered or torn; memory flat (the last minute within 1 MiB of the first).
fn check(r: &SoakReport) -> Result<(), Box<dyn Error>> {
    if r.violations != 0 || r.delivered.iter().any(|d| *d != r.published) {
        return Err(format!(
            "soak lost or reordered messages: published {}, delivered {:?}, violations {}",
            r.published, r.delivered, r.violations
        )
        .into());
    }
    let grew = |v: &[u64]| v.first().zip(v.last()).is_some_and(|(a, b)| b.saturating_sub(*a) > 1024);
    if grew(&r.publisher_rss_kb) {
        return Err(format!("the publisher's memory grew: {:?} kB", r.publisher_rss_kb).into());
    }
    for c in 0..r.consumers {
        let v: Vec<u64> = r.per_minute.iter().filter(|m| m.consumer == c).map(|m| m.rss_kb).collect();
        if grew(&v) {
            return Err(format!("consumer {c}'s memory grew: {v:?} kB").into());
        }
    }
    Ok(())
}

/// A consumer process: reads `total` messages, checks each, and prints a JSON line per minute
/// of stream (by intended send time) and `done <delivered> <violations>` at the end.
pub fn consumer(ring: &str, index: usize, total: u64, core: usize) -> Result<(), Box<dyn Error>> {
    pin(core)?;
    let opts = ShmOptions::default();
    let mut s = shm::open_consumer(ring, &opts)?;
    let scale = TscScale { ticks_per_ns: s.config().ticks_per_ns };
    let tsc = Tsc::new();
    let mut h: Histogram<u64> = histogram();
    let (mut next, mut violations, mut minute, mut first_intended) = (0u64, 0u64, 0u64, None::<u64>);
    let minute_ticks = (scale.ticks_per_ns * 60e9) as u64;
    let mut idle = 0u32;
    let me = std::process::id();
    let flush = |minute: u64, h: &mut Histogram<u64>| {
        let m = Minute {
            consumer: index,
            minute,
            messages: h.len(),
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            p9999_ns: h.value_at_quantile(0.9999),
            max_ns: h.max(),
            rss_kb: rss_kb(me),
        };
        println!("minute {}", serde_json::to_string(&m).expect("serialisable"));
        h.reset();
    };
    while next < total {
        match s.try_recv() {
            Some(Recv::Message(m)) => {
                idle = 0;
                let seq = u64::from_le_bytes(m.payload[..8].try_into()?);
                let intended = u64::from_le_bytes(m.payload[8..16].try_into()?);
                if m.position != next || seq != next {
                    violations += 1;
                }
                let t0 = *first_intended.get_or_insert(intended);
                let now_minute = intended.saturating_sub(t0) / minute_ticks.max(1);
                if now_minute > minute {
                    flush(minute, &mut h);
                    minute = now_minute;
                }
                h.saturating_record(scale.delta_ns(intended, tsc.now()).max(1));
                next = m.position + 1;
            }
            Some(Recv::Gap(_)) => violations += 1,
            None => {
                idle = idle.wrapping_add(1);
                // Now and then, whether anyone still publishes: a consumer never outlives its
                // stream spinning (its publisher's run ended early).
                if idle.is_multiple_of(1 << 20) && !matches!(s.publisher_state(), PublisherState::Live { .. }) {
                    return Err(format!("consumer {index}: the publisher is gone at message {next} of {total}").into());
                }
                if idle > 8 {
                    std::thread::yield_now(); // share core B with the other consumer
                }
            }
        }
    }
    flush(minute, &mut h);
    println!("done {next} {violations}");
    Ok(())
}
