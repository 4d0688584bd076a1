//! Joining at 10:30 and at 15:59 of the lab's ITCH day (issue 26): how long a late joiner takes
//! to hold the book as of that moment, from the open (the replay-merge over the day's journal,
//! every message applied to a book) and from a whole-book snapshot taken then (its chunks loaded
//! from a ring into a book). Both books are checked equal (by digest) before any figure counts.
//! A snapshot joiner also waits for the next snapshot (at most `tickbus snapshot`'s period) and
//! takes the market data of that wait from the journal: the row says so rather than guessing it.
use std::error::Error;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickbus::journal::{JournalMeta, JournalOptions, JournalTail, JournalWriter};
use tickbus::merge::{MergeOptions, ReplayMerge};
use tickbus::ring::{HeapMemory, RingReader, RingWriter};
use tickbus::snapshot::{load_snapshot, Snapshotter};
use tickbus::stream::Subscribe;
use tickbus::{Mode, Publisher, Recv, RingConfig, StartAt, Subscriber};
use tickbus_codecs::book::OrderBook;
use tickbus_codecs::md::SnapshotOrders;
use tickbus_codecs::normalize::Normalizer;
use tickbus_codecs::{decode, Message};

use crate::bench::cleanup::TempDir;
use crate::model::journal::JoinLive;

const ROUNDS: usize = 3;
/// The moments of the day joined at: ns since midnight.
const MOMENTS: [(&str, u64); 2] = [("10:30", 37_800 * 1_000_000_000), ("15:59", 57_540 * 1_000_000_000)];

/// A book with the trader's reservation, its memory touched (as the trader does before joining).
fn book() -> OrderBook {
    let mut b = OrderBook::with_capacity(1 << 20, 8192);
    b.pre_touch();
    b
}

/// The day's normalised market data journalled; the positions where each moment starts.
fn journal(day: &[u8], dir: &std::path::Path, ticks_per_ns: f64) -> Result<Vec<(String, u64)>, Box<dyn Error>> {
    let _ = std::fs::remove_dir_all(dir);
    let meta = JournalMeta { stream_id: 1, source: "lab join".into(), ticks_per_ns };
    let mut w = JournalWriter::open(dir, meta, JournalOptions::default())?;
    let mut norm = Normalizer::new();
    let (mut position, mut at, mut err) = (0u64, Vec::new(), None);
    for (i, r) in tickbus_codecs::itch::frames(day).enumerate() {
        let Ok(msg) = tickbus_codecs::itch::parse(r?.message.as_bytes(), i as u64) else { continue };
        let ts = msg.header().timestamp_ns();
        for (name, t) in MOMENTS {
            if ts >= t && !at.iter().any(|(n, _)| n == name) {
                at.push((name.to_string(), position));
            }
        }
        norm.apply(&msg, &mut |mut md| {
            md.header_mut().stamp(1, position, 0);
            if let Err(e) = w.append(position, 0, 0, md.as_bytes()) {
                err.get_or_insert(e);
            }
            position += 1;
        });
    }
    w.close()?;
    if let Some(e) = err {
        return Err(e.into());
    }
    Ok(at)
}

/// From the open: the merge over the journal from 0 until `to`, each message applied.
fn from_open(dir: &std::path::Path, to: u64) -> Result<(f64, u64), Box<dyn Error>> {
    let cfg = RingConfig::for_payload(Mode::Lossy, 1, 128, 1024);
    let mem = HeapMemory::new(cfg.ring_bytes());
    let _w = RingWriter::create(mem.clone(), &cfg, 1, 0)?;
    let live = Subscriber::new(RingReader::observer(mem, StartAt::Latest)?);
    let mut b = book();
    let t0 = Instant::now();
    let mut m = ReplayMerge::new(live, JournalTail::open(dir, 0)?, 0, MergeOptions::default())?;
    while m.position() < to {
        match m.try_recv()? {
            Some(Recv::Message(d)) => {
                let _ = b.apply_md(&decode(d.payload)?);
            }
            Some(Recv::Gap(g)) => return Err(format!("the merge reported a gap {g:?} in a whole journal").into()),
            None => {}
        }
    }
    Ok((t0.elapsed().as_secs_f64() * 1e3, b.digest()))
}

/// A snapshot published whole into a ring of its own.
struct Taken {
    /// What the maker took to walk and publish it.
    publish_ms: f64,
    orders: u64,
    chunks: u64,
    mem: Arc<HeapMemory>,
}

/// A snapshot of the book at `to`.
fn snapshot(dir: &std::path::Path, to: u64) -> Result<Taken, Box<dyn Error>> {
    let mut maker = Snapshotter::new(OrderBook::with_capacity(1 << 20, 8192));
    let mut tail = JournalTail::open(dir, 0)?;
    let (mut applied, deadline) = (0, Instant::now() + Duration::from_secs(60));
    while (applied as u64) < to {
        // Nothing for a moment at a segment boundary (the tail looks for the next segment at
        // most every 20 ms): wait, up to a deadline.
        let n = maker.apply(&mut tail, (to - applied as u64).min(1 << 16) as usize)?;
        if n == 0 && Instant::now() > deadline {
            return Err(format!("the journal ended at {applied} of {to}").into());
        }
        applied += n;
    }
    let chunks = u64::from(maker.book().snapshot_chunks(to, 0, 0).len());
    let cfg = RingConfig::for_payload(Mode::Lossy, 5, SnapshotOrders::LEN, (chunks as usize + 1).next_power_of_two());
    let mem = HeapMemory::new(cfg.ring_bytes());
    let mut p = Publisher::new(RingWriter::create(mem.clone(), &cfg, 1, 0)?);
    maker.publish(&mut p, &AtomicBool::new(false))?;
    let s = maker.stats();
    Ok(Taken { publish_ms: s.last_publish_us as f64 / 1e3, orders: s.last_orders, chunks, mem })
}

/// From the snapshot in `mem`: its chunks loaded into a book.
fn from_snapshot(mem: Arc<HeapMemory>, as_of: u64) -> Result<(f64, u64), Box<dyn Error>> {
    let mut sub = Subscriber::new(RingReader::observer(mem, StartAt::Oldest)?);
    let mut b = book();
    let t0 = Instant::now();
    let loaded = load_snapshot(&mut sub, &mut b, u64::MAX, Duration::from_secs(10), &AtomicBool::new(false))?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    if loaded.as_of != as_of {
        return Err(format!("loaded the snapshot as of {}, not {as_of}", loaded.as_of).into());
    }
    Ok((ms, b.digest()))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Both ways of joining at 10:30 and 15:59 of `day`, medians of a few rounds each.
pub fn run(day: &[u8], ticks_per_ns: f64) -> Result<Vec<JoinLive>, Box<dyn Error>> {
    let tmp = TempDir::new(&format!("lab-join-live-{}", std::process::id()));
    let dir = tmp.path();
    let at = journal(day, dir, ticks_per_ns)?;
    let mut rows = Vec::new();
    for (name, position) in at {
        let taken = snapshot(dir, position)?;
        let (mut opens, mut loads) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let (open_ms, open_digest) = from_open(dir, position)?;
            let (load_ms, load_digest) = from_snapshot(taken.mem.clone(), position)?;
            if open_digest != load_digest {
                return Err(format!("joining at {name}: the snapshot's book differs from the replayed one").into());
            }
            opens.push(open_ms);
            loads.push(load_ms);
        }
        let (from_open_ms, from_snapshot_ms) = (median(opens), median(loads));
        rows.push(JoinLive {
            at: name,
            position,
            rounds: ROUNDS,
            from_open_ms,
            from_snapshot_ms,
            snapshot_orders: taken.orders,
            snapshot_chunks: taken.chunks,
            snapshot_publish_ms: taken.publish_ms,
            x_faster: from_open_ms / from_snapshot_ms.max(1e-6),
        });
    }
    Ok(rows)
}
