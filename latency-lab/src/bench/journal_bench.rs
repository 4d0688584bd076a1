//! Recording and replay beside their floors, in one run:
//! - the recorder's throughput (64 B messages from an in-memory source, through the queue and
//!   the writer thread into a journal) beside a bare sequential write of the same record bytes;
//! - reading a journal (`for_each`) beside the same run's ITCH decoder;
//! - the replay's pacing error (an ITCH day replayed onto a shm ring at a fixed rate) beside a
//!   bare loop that waits for the same intended times and does nothing else;
//! - a sustained recording: a publisher at 1M msg/s on a reliable shm ring for a minute,
//!   recorded with nothing lost.
use std::error::Error;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::model::journal::{JournalReport, Sustained};
use tickbus::agent::{IdleStrategy, Idler};
use tickbus::journal::{
    format, JournalMeta, JournalOptions, JournalReader, JournalWriter, Kind, Recorder, RecorderOptions, Taken, Tap,
};
use tickbus::replay::{self, Pace, Player, Window};
use tickbus::shm::{self, ShmOptions};
use tickbus::time::{Tsc, TscScale};
use tickbus::{Mode, RingConfig};

use crate::bench::cleanup::{Rings, TempDir};
use crate::bench::harness::{histogram, pin, spin_until};
use crate::model::{Kind as RowKind, Row, Section};

const PAYLOAD: usize = 64;

/// A source of `n` messages as fast as the recorder takes them, served from a table of
/// messages built before the timing starts, as a ring's slots hold them. (It used to write each
/// message's number into one buffer just before handing it over: the recorder's first read of
/// those bytes then waited for that store, a stall of the benchmark's own making that a ring
/// written by another process long before never causes.)
struct Synthetic {
    next: u64,
    n: u64,
    table: Vec<[u8; PAYLOAD]>,
}

/// Messages in [`Synthetic`]'s table (256 KiB of 64-byte messages, like a 4096-slot ring).
const TABLE: usize = 4096;

impl Synthetic {
    fn new(n: u64) -> Synthetic {
        let table = (0..TABLE as u64)
            .map(|i| {
                let mut m = [0u8; PAYLOAD];
                m[..8].copy_from_slice(&i.to_le_bytes());
                m
            })
            .collect();
        Synthetic { next: 0, n, table }
    }
}

impl Tap for Synthetic {
    fn take(&mut self, f: &mut dyn FnMut(Taken<'_>)) -> Result<bool, tickbus::journal::SourceError> {
        if self.next == self.n {
            return Ok(false);
        }
        f(Taken::Message { position: self.next, payload: &self.table[self.next as usize % TABLE] });
        self.next += 1;
        Ok(true)
    }
    fn reliable(&self) -> bool {
        true // a full queue stops taking, never drops
    }
    fn release_to(&mut self, _position: u64) {}
    fn position(&self) -> u64 {
        self.next
    }
    fn max_payload(&self) -> usize {
        PAYLOAD
    }
    fn window(&self) -> u64 {
        0 // a fresh journal each run: nothing is ever redelivered
    }
}

/// A scratch folder, removed however the bench ends.
fn scratch(tag: &str) -> TempDir {
    TempDir::new(&format!("tickbus-lab-{tag}-{}", std::process::id()))
}

fn meta(ticks_per_ns: f64) -> JournalMeta {
    JournalMeta { stream_id: 1, source: "latency-lab".into(), ticks_per_ns }
}

type BenchResult<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// Runs `f` on a thread pinned to `core` (the caller's own affinity is left alone, so later
/// steps can still use every core).
fn on_core<T: Send>(core: usize, f: impl FnOnce() -> BenchResult<T> + Send) -> Result<T, Box<dyn Error>> {
    std::thread::scope(|s| {
        s.spawn(|| {
            pin(core)?;
            f()
        })
        .join()
        .map_err(|_| "a journal benchmark thread panicked")?
    })
    .map_err(|e| e.to_string().into())
}

/// Throughput figures (recorder, floor, read).
/// The poll side runs on `cores.0`, the recorder's writer thread on `cores.1`.
pub fn throughput(
    n: u64,
    cores: (usize, usize),
    ticks_per_ns: f64,
    itch_rate: Option<f64>,
) -> Result<JournalReport, Box<dyn Error>> {
    on_core(cores.0, || throughput_here(n, cores.1, ticks_per_ns, itch_rate))
}

/// Paired rounds of floor and recorder, back to back in alternating order, so both see the
/// same page-cache and writeback weather: the verdict is the median of the rounds' ratios
/// (`model::verdict`, which leaves out rounds whose floor moved more than 2x). Twenty-one: on
/// a two-core VM a round's two arms each swing from about 40 to 75 ms with the machine (a
/// round's ratio from 0.6x to 1.6x), and a round costs about 0.15 s.
const ROUNDS: usize = 21;

fn throughput_here(
    n: u64,
    writer_core: usize,
    ticks_per_ns: f64,
    itch_rate: Option<f64>,
) -> BenchResult<JournalReport> {
    let (mut floors, mut recorders, mut paired_ns) = (Vec::new(), Vec::new(), Vec::new());
    let mut queue_full = 0;
    let tmp = scratch("journal");
    let dir = tmp.path().to_path_buf();
    for round in 0..ROUNDS {
        let mut recorder = || -> BenchResult<f64> {
            let _ = std::fs::remove_dir_all(&dir);
            let (rate, full) = record_synthetic(&dir, n, writer_core, ticks_per_ns)?;
            queue_full = full;
            Ok(rate)
        };
        let (f, r) = if round % 2 == 0 {
            let f = floor_write(n)?;
            (f, recorder()?)
        } else {
            let r = recorder()?;
            (floor_write(n)?, r)
        };
        floors.push(f);
        recorders.push(r);
        let ns = |rate: f64| (n as f64 / rate * 1e9) as u64;
        paired_ns.push((ns(r), ns(f)));
    }
    let (floor, recorder) = (median(&mut floors), median(&mut recorders));
    let x_floor = crate::model::verdict::Paired::speedup(
        &paired_ns.iter().map(|p| p.0).collect::<Vec<_>>(),
        &paired_ns.iter().map(|p| p.1).collect::<Vec<_>>(),
    )
    .filter(|p| p.kept > 0)
    .map_or(recorder / floor, |p| p.ratio.median);

    // Reading the last round's journal back.
    let r = JournalReader::open(&dir)?;
    let bytes: u64 = r.segments().iter().filter_map(|s| std::fs::metadata(&s.path).ok()).map(|m| m.len()).sum();
    let rate = read_back(&r, n)?;
    drop(tmp);
    Ok(JournalReport {
        messages: n,
        message_bytes: PAYLOAD,
        floor_write_msgs_per_s: floor,
        recorder_msgs_per_s: recorder,
        recorder_x_floor: x_floor,
        rounds: ROUNDS,
        paired_ns,
        recorder_queue_full: queue_full,
        read_msgs_per_s: rate,
        read_gb_per_s: bytes as f64 * rate / n as f64 / 1e9,
        itch_decode_msgs_per_s: itch_rate,
        sustained: None,
        python_read: None,
        catch_up: None,
        join_live: Vec::new(),
    })
}

/// The journal's cursor over every record, touching each message's first byte; msgs/s. All
/// `n` messages must be there. (Also the floor of the late joiner's catch-up.)
pub(crate) fn read_back(r: &JournalReader, n: u64) -> BenchResult<f64> {
    let t0 = Instant::now();
    let (mut count, mut sum) = (0u64, 0u64);
    r.cursor().for_each(|rec| {
        if let Kind::Message(p) = rec.kind {
            count += 1;
            sum = sum.wrapping_add(u64::from(p[0]));
        }
    })?;
    let secs = t0.elapsed().as_secs_f64();
    std::hint::black_box(sum);
    if count != n {
        return Err(format!("the journal read back {count} of {n} messages").into());
    }
    Ok(n as f64 / secs)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The floor: the same record bytes, written sequentially through a 1 MiB buffer; msgs/s.
fn floor_write(n: u64) -> BenchResult<f64> {
    let tmp = scratch("floor");
    let dir = tmp.path();
    std::fs::create_dir_all(dir)?;
    let mut record = vec![0u8; format::record_bytes(PAYLOAD)];
    format::emit(&mut record, &format::message_header(0, 0, 0, PAYLOAD), &[7u8; PAYLOAD]);
    let t0 = Instant::now();
    {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(dir.join("floor.bin"))?);
        for _ in 0..n {
            w.write_all(&record)?;
        }
        w.flush()?;
    }
    let rate = n as f64 / t0.elapsed().as_secs_f64();
    drop(tmp);
    Ok(rate)
}

/// The recorder, its poll side on this thread and its writer on `writer_core`, recording `n`
/// messages into `dir` until the journal is closed; (msgs/s, times its queue was full).
fn record_synthetic(dir: &Path, n: u64, writer_core: usize, ticks_per_ns: f64) -> BenchResult<(f64, u64)> {
    let journal = JournalWriter::open(dir, meta(ticks_per_ns), JournalOptions::default())?;
    let mut ropts = RecorderOptions::default();
    ropts.writer_core = Some(writer_core);
    let mut rec = Recorder::start(journal, ropts)?;
    let mut tap = Synthetic::new(n);
    // A poll that took nothing (the queue full: the writer is behind) idles with a spin-loop
    // hint, as `tickbus record` does for its first 10,000 empty polls in a row (then it yields
    // and parks) and an agent runner with `BusySpin` does always. Polling again at once without
    // one is not what a recorder does: in journal-only runs (rounds timed by a print since
    // removed; the report keeps the last round's queue-full count only), rounds that filled the
    // queue then mostly took 70-100 ms, and 48-63 ms with the hint (a few 150-330 ms either
    // way), so the hot re-polling slowed the writer on the other core (how is not known: no
    // hardware counters on this VM). The median ratio was 0.78x and 0.88x before, 1.02x and
    // 0.88x after. With the hint, the queue-full count counts the hinted polls too.
    let mut idler = Idler::new(IdleStrategy::BusySpin);
    let t0 = Instant::now();
    while tap.next < n {
        idler.idle(rec.poll(&mut tap, 1024)?);
    }
    let full = rec.stats().queue_full.load(std::sync::atomic::Ordering::Relaxed);
    rec.finish(&mut tap)?;
    Ok((n as f64 / t0.elapsed().as_secs_f64(), full))
}

/// Replay pacing error at `rate` beside the bare wait loop, in `rounds` interleaved rounds of
/// `n` messages each: a section of two rows (floor, replay).
pub fn pacing(
    itch: &Path,
    rate: u64,
    n: u64,
    rounds: u32,
    core: usize,
    ticks_per_ns: f64,
) -> Result<Section, Box<dyn Error>> {
    on_core(core, || pacing_here(itch, rate, n, rounds, ticks_per_ns))
}

fn pacing_here(itch: &Path, rate: u64, n: u64, rounds: u32, ticks_per_ns: f64) -> BenchResult<Section> {
    // The floor's and the replay's rounds alternate, so both rows span the whole run.
    let t0 = std::time::SystemTime::now();
    let scale = TscScale { ticks_per_ns };
    let tsc = Tsc::new();
    let opts = ShmOptions::default();
    let name = format!("lab-replay-{}", std::process::id());
    // Made before the publisher: dropped after it, so the ring goes on every way out.
    let _ring = Rings::with_options(&[&name], opts.clone());
    let cfg = RingConfig::for_payload(Mode::Lossy, 1, PAYLOAD, 4096);
    let mut p = shm::open_publisher(&name, &cfg, &opts)?;
    let (mut floor_h, mut replay_h) = (histogram(), histogram());
    let stop = AtomicBool::new(false);
    for _ in 0..rounds {
        // The floor: wait for each intended time, record how late we woke, nothing else.
        let period = ticks_per_ns * 1e9 / rate as f64;
        let start = tsc.now() + (ticks_per_ns * 1e6) as u64;
        for i in 0..n {
            let due = start + (i as f64 * period) as u64;
            spin_until(&tsc, due);
            floor_h.saturating_record(scale.delta_ns(due, tsc.now()).max(1));
        }
        // The replay: the same intended times, an ITCH day read from a memory map, published.
        let source = replay::open(itch, None, None)?;
        let window = Window { to_sequence: Some(n - 1), ..Window::default() };
        let mut player = Player::new(source, window, Pace::Rate(rate as f64), ticks_per_ns, false);
        player.run(
            |m| Ok(p.publish(m).map(|_| true)?),
            |due, now, _| {
                if let Some(due) = due {
                    replay_h.saturating_record(scale.delta_ns(due, now).max(1));
                }
            },
            &stop,
        )?;
    }
    let rows = vec![
        Row::new(
            "floor: bare wait for the intended time".into(),
            RowKind::Floor,
            "spin until due, nothing else".into(),
            floor_h,
        )
        .taken_since(t0),
        Row::new(
            "tickbus replay (ITCH mmap -> shm)".into(),
            RowKind::Tickbus,
            "replay::Player, lossy shm ring".into(),
            replay_h,
        )
        .taken_since(t0),
    ];
    let mut sec = Section { mode: "replay-pacing-error".into(), size: PAYLOAD, rate: Some(rate), rows };
    sec.ratios();
    Ok(sec)
}

/// A publisher at `rate` (open loop) on a reliable shm ring for `seconds`, recorded into a
/// journal by a recorder on the other core; checks nothing is lost.
pub fn sustained(
    rate: u64,
    seconds: f64,
    cores: (usize, usize),
    ticks_per_ns: f64,
) -> Result<Sustained, Box<dyn Error>> {
    // A thread of its own (not pinned yet, so the recorder it starts can take the other core).
    std::thread::scope(|s| {
        s.spawn(|| sustained_here(rate, seconds, cores, ticks_per_ns))
            .join()
            .map_err(|_| "the sustained recording panicked")?
    })
    .map_err(|e| e.to_string().into())
}

fn sustained_here(rate: u64, seconds: f64, cores: (usize, usize), ticks_per_ns: f64) -> BenchResult<Sustained> {
    let opts = ShmOptions::default();
    let name = format!("lab-record-{}", std::process::id());
    let _ring = Rings::with_options(&[&name], opts.clone());
    let cfg = RingConfig::for_payload(Mode::Reliable, 2, PAYLOAD, 4096);
    let mut p = shm::open_publisher(&name, &cfg, &opts)?;
    let mut tap = shm::open_consumer(&name, &opts)?;
    let tmp = scratch("sustained");
    let dir = tmp.path().to_path_buf();
    let total = (rate as f64 * seconds) as u64;
    let recorder = std::thread::spawn(move || -> Result<u64, String> {
        let journal =
            JournalWriter::open(&dir, meta(ticks_per_ns), JournalOptions::default()).map_err(|e| e.to_string())?;
        // Started before this thread is pinned: on two cores the writer floats between them.
        let mut rec = Recorder::start(journal, RecorderOptions::default()).map_err(|e| e.to_string())?;
        pin(cores.1).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + Duration::from_secs_f64(seconds * 3.0 + 10.0);
        while tickbus::journal::Tap::position(&tap) < total && Instant::now() < deadline {
            if rec.poll(&mut tap, 256).map_err(|e| e.to_string())? == 0 {
                std::hint::spin_loop();
            }
        }
        rec.finish(&mut tap).map_err(|e| e.to_string())?;
        let mut n = 0;
        JournalReader::open(&dir)
            .map_err(|e| e.to_string())?
            .cursor()
            .for_each(|r| n += u64::from(matches!(r.kind, Kind::Message(_))))
            .map_err(|e| e.to_string())?;
        Ok(n)
    });
    pin(cores.0)?;
    let tsc = Tsc::new();
    let period = ticks_per_ns * 1e9 / rate as f64;
    let start = tsc.now() + (ticks_per_ns * 1e7) as u64;
    let (mut full, mut buf) = (0u64, [0u8; PAYLOAD]);
    let t0 = Instant::now();
    let give_up = t0 + Duration::from_secs_f64(seconds * 3.0 + 10.0);
    for i in 0..total {
        let due = start + (i as f64 * period) as u64;
        spin_until(&tsc, due);
        buf[..8].copy_from_slice(&i.to_le_bytes());
        let mut first = true;
        while let Err(e) = p.publish(&buf) {
            if first {
                full += 1;
                first = false;
            }
            if recorder.is_finished() {
                let why = recorder.join().map_err(|_| "the recorder panicked")?.err().unwrap_or_default();
                return Err(format!("the recorder stopped at message {i} of {total}: {why}").into());
            }
            if Instant::now() > give_up {
                return Err(format!("message {i} not published after {:.0} s: {e}", seconds * 3.0 + 10.0).into());
            }
            std::hint::spin_loop();
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let recorded = recorder.join().map_err(|_| "the recorder panicked")??;
    if recorded != total {
        return Err(
            format!("the sustained recording lost messages: {total} published, {recorded} in the journal").into()
        );
    }
    Ok(Sustained { rate, seconds, published: total, recorded, full, achieved_msgs_per_s: total as f64 / secs })
}
