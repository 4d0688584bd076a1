//! `tickbus record`: a stream into a journal. Thin: the recorder and the journal are library
//! code (`tickbus::journal`); this picks the source, shows a live line on a TTY, and stops
//! cleanly on SIGINT/SIGTERM with the journal closed and indexed.
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use tickbus::agent::{Agent, IdleStrategy};
use tickbus::journal::{
    Durability, JournalMeta, JournalOptions, JournalWriter, Recorder, RecorderAgent, RecorderOptions, Tap,
};
use tickbus::shm::{self, ShmOptions};
use tickbus::StartAt;

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The journal folder (created if missing; an existing journal is continued).
    #[arg(long)]
    pub journal: PathBuf,
    /// Record the stream a channel URI names: `shm:NAME` (as --ring; `?lossy` observes),
    /// `rdma-rc://HOST:PORT/STREAM`, `ud-mcast://GROUP/STREAM[?recovery=HOST:PORT]` (those two
    /// need `--features rdma`; the secret is --token or the URI's token-env).
    #[arg(long, value_name = "URI", conflicts_with_all = ["ring", "rdma", "mcast"])]
    pub from: Option<String>,
    /// Record shm ring NAME.
    #[arg(long, value_name = "NAME")]
    pub ring: Option<String>,
    /// Wait up to this many seconds for the ring to be created (a desk starts its recorder
    /// before the publisher); 0 refuses a missing ring at once.
    #[arg(long, default_value_t = 30.0, value_parser = crate::args::secs)]
    pub wait_secs: f64,
    /// Take the ring as an observer (lossy: never slows the publisher; what it misses is
    /// recorded as gaps). Default on reliable rings: a consumer (nothing is lost; the publisher
    /// waits for the recorder).
    #[arg(long)]
    pub observe: bool,
    /// Record an rdma-rc stream from the publisher at ADDR (build with `--features rdma`).
    #[arg(long, value_name = "ADDR")]
    pub rdma: Option<std::net::SocketAddr>,
    /// Record a ud-mcast group (build with `--features rdma`).
    #[arg(long, value_name = "GROUP")]
    pub mcast: Option<std::net::Ipv4Addr>,
    /// Stream id (rdma-rc and ud-mcast).
    #[arg(long, default_value_t = 1)]
    pub stream: u32,
    /// Shared token (rdma-rc and ud-mcast).
    #[arg(long, default_value = "")]
    pub token: String,
    /// Segment size in MiB (1 to 1048576).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub segment_mb: u64,
    /// When to fsync: none (power loss loses what the kernel had not written), segment (at
    /// most the segment being written), or a number of milliseconds (at most that long).
    #[arg(long, default_value = "none")]
    pub durability: String,
    /// MiB of queue between the polling thread and the journal writer thread: on a lossy
    /// stream, a disk stall longer than this holds is recorded as a gap (1 to 4096: it is
    /// allocated and touched up front).
    #[arg(long, default_value_t = 8, value_parser = crate::args::within_usize(1, 4096))]
    pub queue_mb: usize,
    /// Pin the journal writer thread to this core (default: any core the process may use; it
    /// starts before the polling thread is pinned, so it does not inherit that pin).
    #[arg(long)]
    pub writer_core: Option<usize>,
    /// Pin the polling thread to this core.
    #[arg(long)]
    pub core: Option<usize>,
    /// How the polling thread waits while the stream is quiet. backoff: spins a while (10,000
    /// empty polls), then yields, then parks; a stream with a message at least every
    /// millisecond or so keeps it spinning, a core's worth of CPU. park: parks (50 us, doubling
    /// to 1 ms) after every poll that found nothing, for a machine with no core to spare for
    /// the recorder, where its spinning takes time slices from the busy loops; a reliable
    /// ring must then hold what its publisher sends during a park.
    #[arg(long, value_enum, default_value_t = RecordIdle::Backoff)]
    pub idle: RecordIdle,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The recorder's tap on shm ring `name`: a consumer of a reliable ring unless `--observe`, an
/// observer of a lossy one. The outer error is final; the inner one may be a ring not made yet.
fn open_tap(
    a: &RecordArgs,
    name: &str,
    opts: &ShmOptions,
) -> Result<Result<tickbus::shm::ShmSubscriber, tickbus::shm::ShmError>, String> {
    use tickbus::ring::{AttachError, LayoutError};
    if a.observe {
        return Ok(shm::open_observer(name, StartAt::Latest, opts));
    }
    Ok(match shm::open_consumer(name, opts) {
        // A lossy ring has no consumer lines: record it as an observer, with its gaps.
        Err(tickbus::shm::ShmError::Attach { source: AttachError::Layout(LayoutError::BadConfig { .. }), .. }) => {
            shm::open_observer(name, StartAt::Latest, opts)
        }
        Err(tickbus::shm::ShmError::Attach { source: AttachError::NoFreeConsumer { max }, .. }) => {
            return Err(format!(
                "all {max} consumer lines of reliable ring {name:?} are held: a lossless recording needs a line of its own (create the ring with one more consumer), or record with --observe (lossy: what it misses is recorded as gaps)"
            ));
        }
        other => other,
    })
}

fn durability(s: &str) -> Result<Durability, String> {
    match s {
        "none" => Ok(Durability::None),
        "segment" => Ok(Durability::PerSegment),
        ms => ms
            .parse::<u64>()
            .map(|ms| Durability::Every(Duration::from_millis(ms)))
            .map_err(|_| format!("--durability {ms:?}: use none, segment, or a number of milliseconds")),
    }
}

pub fn run(mut a: RecordArgs) -> Result<(), String> {
    // A bad URI is refused before anything is opened.
    let from = a.from.as_deref().map(|u| crate::streams::channel("--from", u)).transpose()?;
    let stop = crate::pipeline::stop_flag()?;
    if let Some(c) = &from {
        match &c.endpoint {
            // A shm ring keeps --ring's choice of consumer or observer (and its waiting).
            tickbus::stream::Endpoint::Shm { name, .. } => {
                a.observe |= c.reliability == Some(tickbus::stream::Reliability::Lossy);
                a.ring = Some(name.clone());
            }
            _ => return record_uri(&a, c, &stop),
        }
    }
    if let Some(name) = &a.ring {
        let opts = ShmOptions::default();
        let wait = Duration::from_secs_f64(a.wait_secs);
        let started = std::time::Instant::now();
        let (mut said, mut ring) = (false, tickbus::shm::RingWait::new());
        let mut tap = loop {
            match open_tap(&a, name, &opts)? {
                // The ring is not there (or not ready) yet: its publisher may be starting. (A full
                // set of consumer lines, retryable too, is final here: open_tap refuses it.)
                Err(e) if e.is_retryable() && started.elapsed() < wait && !stop.load(Ordering::Acquire) => {
                    if !said {
                        said = true;
                        log::warn!(
                            "waiting up to {} s for ring {name} to be created by its publisher ({e})",
                            a.wait_secs
                        );
                    }
                    // On the ring's folders, not by looking again and again (each look makes
                    // dentries the kernel frees through RCU: `RingWait` says what that costs).
                    ring.pause(&e, wait.saturating_sub(started.elapsed()), Some(&stop));
                }
                Err(e) if e.is_retryable() && a.wait_secs > 0.0 => {
                    return Err(format!("{e}; waited {:.1} s for it (--wait-secs)", started.elapsed().as_secs_f64()))
                }
                r => break r.map_err(|e| e.to_string())?,
            }
        };
        drop(ring); // the watch's descriptor: not kept through the recording
        let source =
            format!("shm ring {name} ({}) on {}", if tap.reliable() { "consumer" } else { "observer" }, host());
        let cfg = *tap.config();
        return record(&a, &mut tap, cfg.stream_id, cfg.ticks_per_ns, source, &stop);
    }
    // --rdma ADDR / --mcast GROUP (with --stream) are channel URIs spelt as flags: recorded
    // through the one stream API, which waits (--wait-secs) for a publisher not there yet.
    #[cfg(feature = "rdma")]
    {
        let uri = match (a.rdma, a.mcast) {
            (Some(addr), _) => Some(format!("rdma-rc://{addr}/{}", a.stream)),
            (None, Some(group)) => Some(format!("ud-mcast://{group}/{}", a.stream)),
            (None, None) => None,
        };
        if let Some(uri) = uri {
            let c = tickbus::stream::Channel::parse(&uri).map_err(|e| format!("{uri}: {e}"))?;
            return record_uri(&a, &c, &stop);
        }
    }
    if a.rdma.is_some() || a.mcast.is_some() {
        return Err("this tickbus was built without RDMA: build it with `--features rdma`".into());
    }
    Err("say what to record: --from URI (shm:NAME, or rdma-rc://HOST:PORT/STREAM or ud-mcast://GROUP/STREAM with --features rdma), or --ring NAME".into())
}

/// Records an rdma-rc or ud-mcast stream named by URI, through the one stream API.
fn record_uri(a: &RecordArgs, c: &tickbus::stream::Channel, stop: &Arc<AtomicBool>) -> Result<(), String> {
    use tickbus::stream::{open_subscriber, Endpoint, OpenOptions, Reliability, Subscribe};
    let mut o = OpenOptions::default();
    o.token = a.token.clone().into_bytes();
    o.wait = Duration::from_secs_f64(a.wait_secs);
    o.stop = Some(stop.clone());
    // An rdma-rc stream is recorded as its publisher made it (reliable unless the URI says).
    o.reliability = Reliability::Reliable;
    let stream = match c.endpoint {
        Endpoint::RdmaRc { stream, .. } | Endpoint::UdMcast { stream, .. } => stream,
        _ => a.stream,
    };
    let mut tap = open_subscriber(c, &o).map_err(|e| format!("--from {e}"))?;
    let t = tap.ticks_per_ns();
    record(a, &mut tap, stream, t, format!("{c} on {}", host()), stop)
}

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned()).unwrap_or_else(|_| "?".into())
}

fn record(
    a: &RecordArgs,
    tap: &mut (impl Tap + Send),
    stream_id: u32,
    ticks_per_ns: f64,
    source: String,
    stop: &Arc<AtomicBool>,
) -> Result<(), String> {
    let mut jopts = JournalOptions::default();
    jopts.segment_bytes = a.segment_mb.max(1) << 20;
    jopts.durability = durability(&a.durability)?;
    let journal =
        JournalWriter::open(&a.journal, JournalMeta { stream_id, source: source.clone(), ticks_per_ns }, jopts)
            .map_err(|e| e.to_string())?;
    if let Some(r) = journal.recovery() {
        eprintln!(
            "tickbus record: {} torn bytes at the end of {} from offset {} ({}): sealed behind an end-of-segment record; every record before it is kept, recording goes on in a new segment",
            r.cut_bytes,
            r.segment.display(),
            r.offset,
            r.reason
        );
    }
    let mut ropts = RecorderOptions::default();
    ropts.writer_core = a.writer_core;
    ropts.queue_bytes = a.queue_mb.max(1) << 20;
    // The writer thread starts before the poll thread is pinned, so it never shares that core.
    let rec = Recorder::start(journal, ropts).map_err(|e| e.to_string())?;
    if let Some(c) = a.core {
        tickbus::agent::pin_current_thread(c).map_err(|e| e.to_string())?;
    }
    if rec.resume_at() > 0 {
        eprintln!("tickbus record: the journal holds the stream up to {}; continuing from there", rec.resume_at());
    }
    eprintln!("tickbus record: recording {source} into {}", a.journal.display());
    let stats = rec.stats().clone();
    let tty = std::io::stderr().is_terminal();
    let t0 = Instant::now();
    let reliable = tap.reliable();
    let mut agent =
        Shown { rec: RecorderAgent::new(rec, tap, stop.clone()), tty, last: (Instant::now(), 0), cycles: 0 };
    // Records until Ctrl-C or a recording error (which stores the stop flag itself).
    tickbus::agent::run_until(&mut agent, a.idle.strategy(), stop);
    agent.rec.finish().map_err(|e| explain(&e, reliable))?;
    if tty {
        eprintln!();
    }
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let summary = serde_json::json!({
        "journal": a.journal.display().to_string(),
        "source": source,
        "messages": load(&stats.messages),
        "bytes": load(&stats.bytes),
        "gaps": load(&stats.gaps),
        "missed": load(&stats.missed),
        "skipped_already_recorded": load(&stats.skipped),
        "records_written": load(&stats.records),
        "next_sequence": load(&stats.written),
        "seconds": t0.elapsed().as_secs_f64(),
    });
    if a.json {
        println!("{summary}");
    } else {
        println!(
            "recorded {} messages ({} bytes), {} gaps ({} missed), {} already in the journal skipped; the journal holds the stream up to {} ({:.1} s)",
            summary["messages"], summary["bytes"], summary["gaps"], summary["missed"], summary["skipped_already_recorded"], summary["next_sequence"], summary["seconds"].as_f64().unwrap_or(0.0)
        );
    }
    Ok(())
}

/// How `tickbus record` waits for a quiet stream (`--idle`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordIdle {
    /// Spin, then yield, then park (the default).
    Backoff,
    /// Park after every poll that found nothing.
    Park,
}

impl RecordIdle {
    fn strategy(self) -> IdleStrategy {
        match self {
            RecordIdle::Backoff => RECORD_IDLE,
            RecordIdle::Park => IdleStrategy::Backoff { spins: 0, yields: 0, min_park: PARK.0, max_park: PARK.1 },
        }
    }
}

/// The recorder's idling: it polls in batches, so it backs off sooner than the trading loops.
const RECORD_IDLE: IdleStrategy =
    IdleStrategy::Backoff { spins: 10_000, yields: 100, min_park: PARK.0, max_park: PARK.1 };

/// The recorder's parks: the first, and the longest (each doubles up to it).
const PARK: (Duration, Duration) = (Duration::from_micros(50), Duration::from_millis(1));

/// The recorder agent, and on a terminal its live line once a second.
struct Shown<T: Tap + Send> {
    rec: RecorderAgent<T>,
    tty: bool,
    /// When the line was last shown, and the bytes recorded then.
    last: (Instant, u64),
    /// Duty cycles counted, to look at the clock every 1024th (a clock read per cycle would
    /// lengthen every poll for a line shown once a second).
    cycles: u32,
}

impl<T: Tap + Send> Agent for Shown<T> {
    fn name(&self) -> &str {
        "record"
    }

    fn uses_clock(&self) -> bool {
        self.rec.uses_clock()
    }

    fn do_work(&mut self, now: u64) -> usize {
        let n = self.rec.do_work(now);
        // The recorder's own statistics (gone once a recording error ended it).
        if !self.tty {
            return n;
        }
        self.cycles = self.cycles.wrapping_add(1);
        if !self.cycles.is_multiple_of(1024) {
            return n;
        }
        let Some(s) = self.rec.recorder().map(|r| r.stats()) else { return n };
        if self.last.0.elapsed() >= Duration::from_secs(1) {
            let bytes = s.bytes.load(Ordering::Relaxed);
            let mbs = (bytes - self.last.1) as f64 / self.last.0.elapsed().as_secs_f64() / 1e6;
            let written = s.written.load(Ordering::Relaxed);
            eprint!(
                "\r{} messages, {mbs:.1} MB/s, lag {} messages, {} gaps ({} missed)    ",
                s.messages.load(Ordering::Relaxed),
                self.rec.tap().position().saturating_sub(written),
                s.gaps.load(Ordering::Relaxed),
                s.missed.load(Ordering::Relaxed)
            );
            self.last = (Instant::now(), bytes);
        }
        n
    }
}

/// A recording error, with what it means for the data and what to do.
fn explain(e: &tickbus::journal::RecordError, reliable: bool) -> String {
    if reliable {
        format!("{e}. Nothing the journal does not hold was released from the ring: fix the cause (e.g. free disk space) and run tickbus record again to continue where the journal ends")
    } else {
        format!("{e}. Messages from here on are not in the journal; a recorder started again records the positions it missed as a gap")
    }
}
