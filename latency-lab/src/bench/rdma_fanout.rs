//! Fan-out over RDMA in the guest: one publisher on the first device, 1, 2 and 4 subscribers on
//! the second (threads of this process, so one TSC stamps and reads). rdma-rc WRITEs every
//! message once per subscriber (one QP each): its publish cost should grow at most linearly in
//! N. ud-mcast sends it once to the group whatever N: its publish cost should stay flat.
use std::error::Error;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tickbus::mcast::{McastError, McastPublisher, McastPublisherOptions, McastSubscriber, McastSubscriberOptions};
use tickbus::rdma::{PublisherOptions, RdmaPublisher, RdmaSubscriber, SubscriberOptions};
use tickbus::time::{Tsc, TscScale};
use tickbus::{Mode, Recv, RingConfig};

use crate::bench::harness::{histogram, spin_until};
use crate::bench::transport::{message, put_stamp, stamp_of};
use crate::model::fanout::{FanoutReport, FanoutRow};

/// Longest one subscriber count may take, whatever the guest's speed.
const LIMIT: Duration = Duration::from_secs(120);

/// What a subscriber thread saw: its one-way latencies, and messages delivered and lost.
type Seen = (Histogram<u64>, u64, u64);

/// A subscriber thread: the one-way latency of every message it gets (from the intended send
/// time stamped in it), until `messages` are accounted for (delivered or reported lost), or
/// the publisher is done and the stream has been quiet for half a second, or [`LIMIT`].
/// Datagrams that are not frames of the stream (ud-mcast reports each once) are skipped.
pub(crate) fn subscriber<S: crate::bench::rdma_pingpong::PollRecv + Send + 'static>(
    mut s: S,
    messages: u64,
    scale: TscScale,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Result<Seen, String>> {
    std::thread::spawn(move || {
        let tsc = Tsc::new();
        let mut h: Histogram<u64> = histogram();
        let (mut got, mut lost) = (0u64, 0u64);
        let mut quiet: Option<Instant> = None;
        let deadline = Instant::now() + LIMIT;
        while got + lost < messages && Instant::now() < deadline {
            match s.poll_recv() {
                Ok(Some(Recv::Message(m))) => {
                    let now = tsc.now();
                    h.saturating_record(scale.delta_ns(stamp_of(m.payload), now).max(1));
                    (got, quiet) = (got + 1, None);
                }
                Ok(Some(Recv::Gap(g))) => lost += g.missed(),
                Ok(None) if done.load(Ordering::Acquire) => {
                    if quiet.get_or_insert_with(Instant::now).elapsed() > Duration::from_millis(500) {
                        break;
                    }
                    std::thread::yield_now();
                }
                // Emulated vCPUs shared with rxe's kernel threads and the other subscribers.
                Ok(None) => std::thread::yield_now(),
                Err(e) if S::skippable(&e) => {}
                Err(e) => return Err(format!("subscriber: {e}")),
            }
        }
        Ok((h, got, lost))
    })
}

/// Publishes `messages` messages at `rate` through `publish` (which says whether it took the
/// message; false: retry), each stamped with its intended send time, so a stall shows in the
/// latency of every later message. A publish's cost runs from its first attempt to the one
/// that took it, retries included, as the shm fan-out measures it.
pub(crate) fn publish_paced(
    rate: u64,
    messages: u64,
    ticks_per_ns: f64,
    mut publish: impl FnMut(&[u8]) -> Result<bool, String>,
) -> Result<(Histogram<u64>, u64), String> {
    let tsc = Tsc::new();
    let scale = TscScale { ticks_per_ns };
    let mut cost: Histogram<u64> = histogram();
    let period = ticks_per_ns * 1e9 / rate as f64;
    let mut buf = message(64);
    let start = tsc.now() + (ticks_per_ns * 1e6) as u64;
    let deadline = Instant::now() + LIMIT;
    let mut late = 0;
    for i in 0..messages {
        let intended = start + (i as f64 * period) as u64;
        let before = spin_until(&tsc, intended);
        put_stamp(&mut buf, intended);
        let mut first = true;
        while !publish(&buf)? {
            if first {
                late += 1;
                first = false;
            }
            if Instant::now() > deadline {
                return Err(format!("message {i} of {messages} not taken within {LIMIT:?}"));
            }
            std::thread::yield_now();
        }
        cost.saturating_record(scale.delta_ns(before, tsc.now()).max(1));
    }
    Ok((cost, late))
}

/// A ud-mcast publisher on `device` sends `messages` to `group` at `rate` ([`publish_paced`]; a
/// full send queue is retried), then waits until the NIC has sent them all.
pub(crate) fn mcast_paced(
    device: &str,
    group: Ipv4Addr,
    rate: u64,
    messages: u64,
    ticks_per_ns: f64,
) -> Result<(Histogram<u64>, u64), Box<dyn Error>> {
    let mut po = McastPublisherOptions::default();
    po.device = Some(device.into());
    let mut tx = McastPublisher::new(group, 1, &po)?;
    let paced = publish_paced(rate, messages, ticks_per_ns, |b| match tx.publish(b) {
        Ok(_) => Ok(true),
        Err(McastError::SendQueueFull { .. }) => Ok(false),
        Err(e) => Err(e.to_string()),
    })?;
    tx.flush(Duration::from_secs(10))?;
    Ok(paced)
}

fn row(n: usize, messages: u64, cost: &Histogram<u64>, late: u64, subs: Vec<Seen>) -> Result<FanoutRow, String> {
    if let Some((k, s)) = subs.iter().enumerate().find(|(_, s)| s.1 != messages || s.2 > 0) {
        return Err(format!(
            "fan-out to {n}: subscriber {k} received {} of {messages} and lost {} (rate too high for this guest?)",
            s.1, s.2
        ));
    }
    Ok(FanoutRow {
        subscribers: n,
        publish_p50_ns: cost.value_at_quantile(0.5),
        publish_p99_ns: cost.value_at_quantile(0.99),
        sub_p50_ns: subs.iter().map(|s| s.0.value_at_quantile(0.5)).collect(),
        sub_p99_ns: subs.iter().map(|s| s.0.value_at_quantile(0.99)).collect(),
        late_sends: late,
        delivered: subs.iter().map(|s| s.1).collect(),
    })
}

/// rdma-rc: a lossy ring, N subscribers each on its own QP.
pub fn rc(
    devices: (&str, &str),
    rate: u64,
    messages: u64,
    counts: &[usize],
    ticks_per_ns: f64,
) -> Result<FanoutReport, Box<dyn Error>> {
    let mut rows = Vec::new();
    for &n in counts {
        eprintln!("latency-lab: rdma-rc fan-out to {n} subscribers ...");
        let cfg = RingConfig { ticks_per_ns, ..RingConfig::for_payload(Mode::Lossy, 1, 64, 1024) };
        let mut po = PublisherOptions::new("latency-lab-fanout");
        po.device = Some(devices.0.into());
        let mut tx = RdmaPublisher::bind("127.0.0.1:0".parse()?, &cfg, po)?;
        let addr = tx.local_addr();
        let connecting: Vec<_> = (0..n)
            .map(|_| {
                let mut so = SubscriberOptions::new("latency-lab-fanout");
                so.device = Some(devices.1.into());
                std::thread::spawn(move || RdmaSubscriber::connect(addr, 1, &so).map_err(|e| e.to_string()))
            })
            .collect();
        for _ in 0..n {
            tx.accept(Duration::from_secs(30))?;
        }
        let done = Arc::new(AtomicBool::new(false));
        let scale = TscScale { ticks_per_ns };
        let subs: Vec<_> = connecting
            .into_iter()
            .map(|c| {
                let s = c.join().map_err(|_| "subscriber thread panicked")??;
                Ok(subscriber(s, messages, scale, done.clone()))
            })
            .collect::<Result<_, Box<dyn Error>>>()?;
        let (cost, late) = publish_paced(rate, messages, ticks_per_ns, |b| {
            tx.publish(b).map(|_| true).map_err(|e| e.to_string())?;
            match tx.take_dropped().into_iter().next() {
                Some((peer, e)) => Err(format!("subscriber {peer} dropped: {e}")),
                None => Ok(true),
            }
        })?;
        done.store(true, Ordering::Release);
        let mut results = Vec::new();
        for s in subs {
            while !s.is_finished() {
                tx.poll();
                std::thread::yield_now();
            }
            results.push(s.join().map_err(|_| "subscriber panicked")??);
        }
        rows.push(row(n, messages, &cost, late, results)?);
    }
    let setup = format!("{} -> {}, one QP per subscriber, lossy ring of 1024 slots", devices.0, devices.1);
    Ok(FanoutReport { transport: "rdma-rc (Soft-RoCE guest)".into(), setup, rate, messages, rows })
}

/// ud-mcast: one group, N subscribers joined on the second device.
pub fn mcast(
    devices: (&str, &str),
    rate: u64,
    messages: u64,
    counts: &[usize],
    ticks_per_ns: f64,
) -> Result<FanoutReport, Box<dyn Error>> {
    let mut rows = Vec::new();
    for (k, &n) in counts.iter().enumerate() {
        eprintln!("latency-lab: ud-mcast fan-out to {n} subscribers ...");
        let group = Ipv4Addr::new(239, 77, 4, k as u8);
        let scale = TscScale { ticks_per_ns };
        let done = Arc::new(AtomicBool::new(false));
        let subs: Vec<_> = (0..n)
            .map(|_| {
                let mut so = McastSubscriberOptions::default();
                so.device = Some(devices.1.into());
                Ok(subscriber(McastSubscriber::join(group, 1, &so)?, messages, scale, done.clone()))
            })
            .collect::<Result<_, Box<dyn Error>>>()?;
        let (cost, late) = mcast_paced(devices.0, group, rate, messages, ticks_per_ns)?;
        done.store(true, Ordering::Release);
        let results = subs
            .into_iter()
            .map(|s| s.join().map_err(|_| "subscriber panicked")?)
            .collect::<Result<Vec<_>, String>>()?;
        rows.push(row(n, messages, &cost, late, results)?);
    }
    let setup = format!("{} -> {}, one UD SEND per message to a group all N joined", devices.0, devices.1);
    Ok(FanoutReport { transport: "ud-mcast (Soft-RoCE guest)".into(), setup, rate, messages, rows })
}
