//! `tickbus exchange`: the venue side of the trading pipeline in one process, for a machine with
//! few cores. One pinned thread runs a composite agent ([`Exchange`]): a market-data agent
//! ([`MdAgent`]) replays an ITCH file as normalised market data, open loop at a fixed rate (each
//! message stamped with its *intended* send time as its ingress TSC, so a stalled loop shows up
//! in the latencies instead of hiding in the schedule), and a gateway agent ([`GatewayPart`],
//! over `gateway.rs`: orders in, one execution report each, hops recorded) runs its duty cycle
//! every cycle, fed the quotes directly. `--no-gateway` leaves the gateway to its own process
//! (`tickbus gateway`) so feed, trader and gateway can each own a core.
//!
//! It starts publishing only once the trader is attached (it holds the report ring's consumer
//! line, which it takes after starting to observe the market data), so no tick goes unseen.
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use hdrhistogram::Histogram;
use tickbus::agent::{Agent, IdleStrategy, Pair};
use tickbus::replay::{self, Pace, Pacer};
use tickbus::shm::{self, ShmOptions};
use tickbus::time::{FastNs, Tsc, TscScale};
use tickbus::{Mode, RingConfig, StartAt};
use tickbus_codecs::md::Quote;
use tickbus_codecs::normalize::{Md, Normalizer};
use tickbus_codecs::{Header, FLAG_INGRESS_TSC};

use crate::gateway::{self, Gateway};
use crate::link::{Out, OutError};
use crate::pipeline::{self, Peer};
use crate::streams::{self, Topology};
use tickbus::stream::Endpoint;
use tickbus_apps::summary::{ExchangeSummary, HopStats};

#[derive(Args, Debug)]
pub struct ExchangeArgs {
    /// The ITCH 5.0 file to replay (`tickbus itch generate` writes one).
    #[arg(long)]
    pub itch: PathBuf,
    /// ITCH messages per second (open loop: each is due at start + n / rate).
    #[arg(long, default_value_t = 1_000_000.0, value_parser = crate::args::rate)]
    pub rate: f64,
    /// Stop after this many ITCH messages.
    #[arg(long)]
    pub max: Option<u64>,
    /// The streams: market data to publish (lossy: the trader and the gateway observe it),
    /// orders to read (the trader publishes them), reports to publish (the trader's reader on
    /// them says it is ready).
    #[command(flatten)]
    pub streams: crate::streams::StreamArgs,
    /// Slots of the market-data ring (a trader stalled for longer than this many messages
    /// misses some, and says so).
    #[arg(long, default_value_t = 1 << 16, value_parser = crate::args::slots)]
    pub md_slots: usize,
    /// Leave the gateway to its own `tickbus gateway` process.
    #[arg(long)]
    pub no_gateway: bool,
    /// Pin the loop to this core.
    #[arg(long)]
    pub core: Option<usize>,
    /// How long to wait for the trader (s).
    #[arg(long, default_value_t = 30.0, value_parser = crate::args::secs)]
    pub wait_secs: f64,
    /// After the market data, how long to wait for the trader to finish its orders (s).
    #[arg(long, default_value_t = 30.0, value_parser = crate::args::secs)]
    pub drain_secs: f64,
    /// Publish whole-book snapshots on this lossy stream (`shm:NAME` on this host,
    /// `ud-mcast://GROUP/STREAM` across hosts), made by a thread of this process from a copy of
    /// every market-data message it published: a trader takes one with `--snapshots URI` to
    /// join late or to recover from lost market data, with no recorder needed.
    #[arg(long, value_name = "URI")]
    pub snapshots: Option<String>,
    /// Seconds between snapshots.
    #[arg(long, default_value_t = 1.0, value_parser = crate::args::positive_secs, requires = "snapshots")]
    pub snapshot_every_secs: f64,
    /// Where the snapshots are made: `inline` (in the venue's loop between ticks, a few messages
    /// or two chunks a step; on two busy cores it cost the venue's p50 about 1.16x and its p99
    /// 0.6-1.7x, where a thread took its time slices from the busy loops: p99 4-5x) or `thread`
    /// (a thread of their own, for a machine with a core to spare for it).
    #[arg(long, value_enum, default_value_t = SnapshotMaker::Inline, requires = "snapshots")]
    pub snapshot_maker: SnapshotMaker,
    /// Ring slots of a shm snapshot stream (16 orders a slot: the default holds a book of a
    /// million resting orders).
    #[arg(long, default_value_t = 1 << 16, value_parser = crate::args::slots, requires = "snapshots")]
    pub snapshot_slots: usize,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Where `--snapshots` are made.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotMaker {
    Thread,
    Inline,
}

/// The market data's stream id.
pub const MD_STREAM: u32 = 1;
/// Datagrams a ud-mcast market-data publisher keeps for recovery (at 1M msg/s, 65 ms).
const MD_HISTORY: u32 = 1 << 16;

pub use tickbus_apps::summary::MdCounts;

pub fn run(a: ExchangeArgs) -> Result<(), String> {
    // Bad stream URIs are refused before anything is opened.
    let topology = a.streams.resolve()?;
    let stop = pipeline::stop_flag()?;
    let source = replay::open(&a.itch, None, None).map_err(|e| e.to_string())?;
    if source.kind() != replay::SourceKind::Itch {
        return Err(format!(
            "{}: not an ITCH file (exchange replays ITCH 5.0; `tickbus replay` plays journals and captures)",
            a.itch.display()
        ));
    }
    let mut source = source;
    let max = a.max.unwrap_or(u64::MAX);
    let norm = warm_up(&mut source, max)?;
    // The snapshot stream before the trader's streams: a trader that recovers from it opens it
    // before it says it is ready.
    let (mut snapshots, mut inline, mut tap, mut snap_source) = (None, None, None, None);
    if let Some(uri) = &a.snapshots {
        let o = a.streams.options(a.wait_secs, &stop);
        let every = Duration::from_secs_f64(a.snapshot_every_secs);
        match a.snapshot_maker {
            SnapshotMaker::Thread => {
                let (s, t) = crate::venue_snapshots::start(uri, every, a.snapshot_slots, &o)?;
                (tap, snap_source) = (Some(t), Some(s.source.clone()));
                snapshots = Some(s);
            }
            SnapshotMaker::Inline => {
                let ticks = (every.as_secs_f64() * 1e9 * tickbus::time::ticks_per_ns()) as u64;
                let (s, t, src) = crate::venue_snapshots::start_inline(uri, ticks, a.snapshot_slots, &o)?;
                (inline, tap, snap_source) = (Some(s), Some(t), Some(src));
            }
        }
    }
    let (mut md, gw) = open(&a, &topology, &stop)?;
    if let (Some(s), tickbus::stream::AnyPublisher::Shm(p)) = (&snap_source, md.publisher_mut()) {
        // Before the first message: the snapshots name the stream they are of.
        s.store(p.writer().created_unix_ns(), std::sync::atomic::Ordering::Release);
    }
    let mut md = MdAgent::new(source, norm, md, max, stop.clone());
    md.snapshot_tap = tap;
    md.inline_snapshots = inline;
    let mut gw = gw;
    let wait = Duration::from_secs_f64(a.wait_secs.max(0.0));
    // The trader attached to the market data before it read the reports: once its reader is on
    // the report stream, no tick goes unseen.
    match (&topology.execs.endpoint, gw.as_mut()) {
        (Endpoint::Shm { name, .. }, _) => wait_for_trader(name, wait, &stop)?,
        (_, Some(g)) => crate::streams::wait_for_reader(g.execs_mut(), "the trader", wait, &stop)?,
        (_, None) => {}
    }
    if let Some(core) = a.core {
        tickbus::agent::pin_current_thread(core).map_err(|e| format!("pinning to core {core}: {e}"))?;
    }
    eprintln!("exchange: the trader is attached; replaying {} at {} msg/s", a.itch.display(), a.rate);
    let first_due = md.start(a.rate);
    let over = md.over_flag();
    // The day: the composite agent polls without pausing (the next tick's due time is never far,
    // and a pause would land on it), until the market-data agent says the day is over.
    let (md, mut gw) = match gw {
        Some(g) => {
            let mut x = venue(md, g);
            tickbus::agent::run_until(&mut x, IdleStrategy::NoOp, &over);
            let (md, part) = x.into_parts();
            (md, Some(part.g))
        }
        None => {
            tickbus::agent::run_until(&mut md, IdleStrategy::NoOp, &over);
            (md, None)
        }
    };
    let MdAgent { mut md, counts: mut c, feed_ns, error, tsc, scale, snapshot_tap, mut inline_snapshots, .. } = md;
    c.span_ns = scale.delta_ns(first_due, tsc.now());
    if let Some(e) = error {
        return Err(format!("{}: {e}", a.itch.display()));
    }
    let md_position = md.position();
    md.flush(); // multicast: every datagram sent, and a heartbeat saying where the stream ends
    let md = match md.is_multicast() {
        // Multicast has no close: the trader ends on silence; heartbeats meanwhile say where the
        // stream ended, so a lost tail is recovered.
        true => Some(md),
        // Closes the market data: the trader finishes its orders and closes its stream.
        false => {
            drop(md);
            None
        }
    };
    if let Some(g) = gw.as_mut() {
        // The maker goes on stepping meanwhile: a trader lapped near the day's end still gets
        // a snapshot made after its loss.
        drain(g, md, Duration::from_secs_f64(a.drain_secs.max(0.0)), &stop, &mut inline_snapshots, &tsc);
    }
    // After the drain: a trader recovering at the end of the day still gets snapshots.
    if let Some(i) = inline_snapshots.as_mut() {
        // The day is over: the maker takes in what the tap still holds (bounded: the tap holds
        // at most TAP_MESSAGES), so its summary's position is the day's end.
        for _ in 0..4 * crate::venue_snapshots::TAP_MESSAGES {
            if i.step(tsc.now()) == 0 {
                break;
            }
        }
    }
    let made = match (snapshots, inline_snapshots) {
        (Some(s), _) => Some(s.finish()),
        (None, Some(i)) => Some(match i.failure.clone() {
            Some(why) => Err(why),
            None => Ok(i.stats()),
        }),
        (None, None) => None,
    };
    let snapshots = match (made, snapshot_tap) {
        (Some(Err(e)), _) => {
            // Said, and the day's summary still printed: the market data went out regardless.
            eprintln!("exchange: the snapshot maker stopped: {e}");
            None
        }
        (Some(Ok(st)), Some(tap)) => Some(tickbus_apps::summary::VenueSnapshotSummary {
            snapshots: st.snapshots,
            chunks: st.chunks,
            position: st.position,
            last_orders: st.last_orders,
            last_publish_us: st.last_publish_us,
            tap_lost: tap.lost(),
            book_errors: st.book_errors,
        }),
        _ => None,
    };
    if let Some(s) = snapshots.as_ref().filter(|s| s.tap_lost > 0) {
        eprintln!(
            "exchange: the snapshot maker fell behind and missed {} market-data messages: its snapshots after that say so and no trader trades on them",
            s.tap_lost
        );
    }
    let mut transport_errors: Vec<String> = Vec::new();
    if let Some(g) = gw.as_mut() {
        transport_errors.extend(g.orders().failure().map(|e| format!("order stream: {e}")));
        transport_errors.extend(g.execs_mut().dropped().into_iter().map(|e| format!("report stream: dropped {e}")));
    }
    for e in &transport_errors {
        eprintln!("exchange: {e}");
    }
    let q = |h: &Histogram<u64>, q: f64| if h.is_empty() { 0 } else { h.value_at_quantile(q) };
    if a.json {
        let summary = ExchangeSummary {
            md: c.clone(),
            md_position,
            transport_errors,
            feed_ns: HopStats::of("tick due -> market data publish begins", &feed_ns),
            gateway: gw.as_ref().map(gateway::summary),
            snapshots,
        };
        println!("{}", serde_json::to_string(&summary).map_err(|e| e.to_string())?);
    } else {
        println!(
            "exchange: {} ITCH messages replayed, {} market-data messages published, {} unparsed, {} started more than 1 µs late; tick due -> publish begins p50 {} ns, p99 {} ns",
            c.itch,
            c.published,
            c.unparsed,
            c.late,
            q(&feed_ns, 0.5),
            q(&feed_ns, 0.99)
        );
        if let Some(g) = &gw {
            gateway::print(g);
        }
    }
    // Said wherever the figures are printed: a replay that fell behind measured its queue.
    if let Some(b) = c.backlog(a.rate) {
        eprintln!("exchange: {b}");
    }
    Ok(())
}

/// Reads the day (up to `max` messages) once before the clock starts: the file's pages are
/// mapped in and the normaliser's book has touched the memory it will use (then forgets the
/// day), so page faults do not land in the measured replay. Before any stream is opened: a
/// peer's handshake must not wait on it.
pub fn warm_up(source: &mut replay::Source, max: u64) -> Result<Normalizer, String> {
    let mut norm = Normalizer::new();
    norm.pre_touch();
    let mut n = 0;
    while n < max {
        let Some(item) = source.next().map_err(|e| e.to_string())? else { break };
        if let Ok(msg) = tickbus_codecs::itch::parse(item.payload, item.sequence) {
            norm.apply(&msg, &mut |m| {
                std::hint::black_box(m.as_bytes());
            });
        }
        n += 1;
    }
    norm.clear();
    source.rewind().map_err(|e| e.to_string())?;
    Ok(norm)
}

/// The venue on one thread: the market-data agent, then the gateway agent, each duty cycle
/// (statically dispatched: [`Pair`]). While the next tick is not due the gateway's duty cycle
/// runs; a feed behind its schedule still gives the gateway one cycle per market-data message.
pub type Exchange = Pair<MdAgent, GatewayPart>;

/// Quotes in flight from the market-data agent to the gateway agent on the same thread: one
/// ITCH message makes at most one quote, and the gateway takes all of them every cycle.
const QUOTE_QUEUE: usize = 64;

/// The exchange as a composite agent: `md` publishes the day; `g` answers the orders, fed the
/// quotes of the venue's book as `md` makes them (directly: a queue on this thread, not the ring).
pub fn venue(mut md: MdAgent, g: Gateway) -> Exchange {
    let (tx, rx) = rtrb::RingBuffer::new(QUOTE_QUEUE);
    md.quotes = Some(tx);
    Pair::new(md, GatewayPart { g, quotes: rx, idle: 0 })
}

/// A market-data message normalised and not published yet (one ITCH message makes at most
/// three: a replace's delete and add, and the quote it moved).
#[derive(Default)]
struct Staged {
    md: [Option<Md>; 4],
    next: usize,
    len: usize,
}

impl Staged {
    fn push(&mut self, m: Md) {
        // Never more than three (see above); a fourth would be a normaliser change, caught here.
        assert!(self.len < self.md.len(), "an ITCH message normalised into more than {} messages", self.md.len());
        self.md[self.len] = Some(m);
        self.len += 1;
    }

    fn peek(&mut self) -> Option<&mut Md> {
        self.md[..self.len].get_mut(self.next).and_then(|m| m.as_mut())
    }

    fn pop(&mut self) {
        self.next += 1;
        if self.next == self.len {
            (self.next, self.len) = (0, 0);
        }
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Bytes kept of a message read ahead: every ITCH 5.0 message is shorter (the longest, NOII,
/// is 50 bytes).
const AHEAD_BYTES: usize = 128;

/// One message read ahead of its due time, copied out of the file.
struct Ahead {
    bytes: [u8; AHEAD_BYTES],
    len: usize,
    sequence: u64,
    ready: bool,
}

impl Ahead {
    fn fill(&mut self, payload: &[u8], sequence: u64) {
        // Longer than any ITCH message: kept empty, so it fails to parse and is counted.
        self.len = if payload.len() <= AHEAD_BYTES { payload.len() } else { 0 };
        self.bytes[..self.len].copy_from_slice(&payload[..self.len]);
        (self.sequence, self.ready) = (sequence, true);
    }

    fn message(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The market-data half of the venue as an [`Agent`]: the ITCH day replayed open loop,
/// normalised and published, each message stamped with its due time as its ingress. A cycle
/// before the next message is due only reads that message ahead (the gateway's cycle runs
/// meanwhile); at the end of the day, at `max` messages, on Ctrl-C or when the file cannot be
/// read (`error`) it sets its `over` flag, which ends its runner; never while a message is
/// staged (that one is published, or given up after a second, first).
/// No syscall and no allocation (`hot_path_tests.rs`).
pub struct MdAgent {
    source: replay::Source,
    norm: Normalizer,
    md: Out,
    pacer: Pacer,
    tsc: Tsc,
    scale: TscScale,
    /// `scale` by a multiply and a shift: the publish lag is converted between the TSC read it
    /// measures from and the publish ([`send`]).
    fast: FastNs,
    pub counts: MdCounts,
    /// Due -> published, per market-data message: the loop's lateness plus the normalising.
    pub feed_ns: Histogram<u64>,
    /// The next ITCH message's due time, once drawn from the pacer.
    due: Option<u64>,
    /// The next ITCH message, read before it is due (a venue has its next message ready): its
    /// file page and line are in cache when the due time comes.
    ahead: Ahead,
    /// What the last ITCH message became that is not published yet, and its due time.
    staged: Staged,
    staged_due: u64,
    /// Since when a multicast send queue has been full for the staged message.
    full_since: Option<u64>,
    /// Quotes for the gateway on this thread (`venue`); None without one.
    quotes: Option<rtrb::Producer<Quote>>,
    max: u64,
    interrupted: Arc<AtomicBool>,
    over: Arc<AtomicBool>,
    /// Why the day ended early (the file could not be read).
    pub error: Option<String>,
    /// A copy of every message published goes here, for the snapshot maker (`--snapshots`).
    pub snapshot_tap: Option<tickbus::snapshot::tap::SnapshotTap>,
    /// The maker itself, stepped here when no tick is due (`--snapshot-maker inline`).
    pub inline_snapshots: Option<Box<crate::venue_snapshots::InlineSnapshots>>,
}

impl MdAgent {
    /// The agent over a day `source` and a normaliser `norm` (both warmed by [`warm_up`]): at
    /// most `max` ITCH messages; `interrupted` (Ctrl-C) ends the day early.
    pub fn new(source: replay::Source, norm: Normalizer, md: Out, max: u64, interrupted: Arc<AtomicBool>) -> MdAgent {
        let scale = TscScale { ticks_per_ns: md.ticks_per_ns() };
        MdAgent {
            source,
            norm,
            md,
            pacer: Pacer::new(Pace::Rate(1.0), scale.ticks_per_ns, 0),
            tsc: Tsc::new(),
            scale,
            fast: FastNs::new(scale),
            counts: MdCounts::default(),
            // Up to an hour in ns, allocated up front: recording never allocates.
            feed_ns: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
            due: None,
            ahead: Ahead { bytes: [0; AHEAD_BYTES], len: 0, sequence: 0, ready: false },
            staged: Staged::default(),
            staged_due: 0,
            full_since: None,
            quotes: None,
            max,
            interrupted,
            over: Arc::new(AtomicBool::new(false)),
            error: None,
            snapshot_tap: None,
            inline_snapshots: None,
        }
    }

    /// Starts the clock: the first message is due in 1 ms, then one every 1/`rate` s. Returns
    /// the first message's due time (TSC).
    pub fn start(&mut self, rate: f64) -> u64 {
        let first = self.tsc.now() + (self.scale.ticks_per_ns * 1e6) as u64;
        self.pacer = Pacer::new(Pace::Rate(rate), self.scale.ticks_per_ns, first);
        first
    }

    /// The flag the agent sets when the day is over (its runner's stop flag).
    pub fn over_flag(&self) -> Arc<AtomicBool> {
        self.over.clone()
    }

    /// Whether the day is over: every message published, or the day cut short.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn over(&self) -> bool {
        self.over.load(Ordering::Relaxed)
    }

    /// A multicast heartbeat (call when quiet: it says where the market data stands, so a
    /// reader learns of a lost tail). No syscall beyond the doorbell; nothing on shm. (`run`
    /// heartbeats from its drain loop, after the agent is taken apart.)
    #[cfg_attr(not(all(test, feature = "rdma")), allow(dead_code))]
    pub fn heartbeat(&mut self) {
        self.md.heartbeat();
    }

    /// When the next message is due by `now` (TSC): reads, parses and normalises it, publishing
    /// what it becomes (what the stream cannot take yet waits in `staged`). False when nothing
    /// is due yet (or the day is over).
    #[inline]
    fn take_due(&mut self, now: u64) -> bool {
        if self.counts.itch >= self.max || self.interrupted.load(Ordering::Relaxed) {
            self.over.store(true, Ordering::Relaxed);
            return false;
        }
        let MdAgent {
            source,
            norm,
            md,
            pacer,
            tsc,
            scale,
            fast,
            counts: c,
            feed_ns,
            due,
            ahead,
            staged,
            staged_due,
            quotes,
            over,
            error,
            snapshot_tap,
            ..
        } = self;
        if !ahead.ready {
            match source.next() {
                Ok(Some(item)) => ahead.fill(item.payload, item.sequence),
                Ok(None) => {
                    over.store(true, Ordering::Relaxed);
                    return false;
                }
                Err(e) => {
                    *error = Some(e.to_string());
                    over.store(true, Ordering::Relaxed);
                    return false;
                }
            }
        }
        let at = *due.get_or_insert_with(|| pacer.intended(None).expect("a rate paces"));
        if now < at {
            return false;
        }
        *due = None;
        ahead.ready = false;
        if now - at > (scale.ticks_per_ns * 1000.0) as u64 {
            c.late += 1;
            // Off the usual path (on time, it is not taken): how far behind.
            let behind = scale.delta_ns(at, now);
            c.max_behind_ns = c.max_behind_ns.max(behind);
            c.late_100us += u64::from(behind > tickbus_apps::summary::BACKLOG_LATE_NS);
        }
        c.itch += 1;
        match tickbus_codecs::itch::parse(ahead.message(), ahead.sequence) {
            // Each message goes out as the normaliser makes it (an add before the book work
            // that makes its quote); one the stream cannot take now waits, and so does every
            // one after it.
            Ok(msg) => norm.apply(&msg, &mut |mut m| {
                if !staged.is_empty() || !send(md, &mut m, at, tsc, fast, c, feed_ns, quotes, snapshot_tap) {
                    staged.push(m);
                }
            }),
            Err(_) => c.unparsed += 1,
        }
        *staged_due = at;
        true
    }

    /// Publishes what is staged (a multicast send queue was full for a moment: the NIC had not
    /// sent the last ones yet), the gateway's cycle running in between tries, for up to a
    /// second; then it is counted as failed.
    #[inline]
    fn publish_staged(&mut self) {
        let MdAgent {
            md,
            tsc,
            scale,
            fast,
            counts: c,
            feed_ns,
            staged,
            staged_due,
            full_since,
            quotes,
            snapshot_tap,
            ..
        } = self;
        while let Some(m) = staged.peek() {
            if !send(md, m, *staged_due, tsc, fast, c, feed_ns, quotes, snapshot_tap) {
                let now = tsc.now();
                let since = *full_since.get_or_insert(now);
                if now - since < (scale.ticks_per_ns * 1e9) as u64 {
                    return;
                }
                c.failed += 1;
                OutError::Full.log("market data");
                hand_quote(m, quotes);
            }
            *full_since = None;
            staged.pop();
        }
    }
}

/// Publishes `m` stamped with its due time, and hands a quote to the gateway. False when the
/// stream is full for now (a multicast send queue; a lossy ring never is): the caller keeps
/// `m` for later. A message refused for good is counted and logged.
#[inline]
#[allow(clippy::too_many_arguments)]
fn send(
    md: &mut Out,
    m: &mut Md,
    due: u64,
    tsc: &Tsc,
    fast: &FastNs,
    c: &mut MdCounts,
    feed_ns: &mut Histogram<u64>,
    quotes: &mut Option<rtrb::Producer<Quote>>,
    snapshot_tap: &mut Option<tickbus::snapshot::tap::SnapshotTap>,
) -> bool {
    let stream = md.stream_id();
    let position = md.position();
    // The publish begins: the time since the tick was due (the loop seeing it due, the
    // normalising) is the venue's own row; the ring's write belongs to the hop to the trader,
    // as it does in that hop's floor, which the trader times from here (`FLAG_PUBLISH_LAG`).
    // By a multiply and a shift: the conversion is inside the hop this lag starts.
    let lag = fast.delta_ns(due, tsc.now());
    let h: &mut Header = m.header_mut();
    h.stamp(stream, position, due);
    h.flags |= FLAG_INGRESS_TSC;
    h.set_publish_lag_ns(lag);
    match md.publish(m.as_bytes()) {
        Ok(_) => {
            // Published: subscribers have it. The snapshot maker's copy is taken after, outside
            // this message's time (it still delays the next message, and that is measured).
            feed_ns.saturating_record(lag.max(1));
            c.published += 1;
            if let Some(t) = snapshot_tap {
                t.push(position, m.as_bytes());
            }
            hand_quote(m, quotes);
            true
        }
        Err(OutError::Full) => false,
        Err(e) => {
            c.failed += 1;
            e.log("market data");
            hand_quote(m, quotes);
            true
        }
    }
}

/// The venue's own book moved whether or not its market data got out: a quote reaches the
/// gateway either way (as it did before the exchange was a pair of agents), so orders are
/// matched against the venue's top of book, not the last one the stream carried.
#[inline]
fn hand_quote(m: &Md, quotes: &mut Option<rtrb::Producer<Quote>>) {
    if let (Md::Quote(q), Some(tx)) = (m, quotes.as_mut()) {
        // At most one quote per ITCH message, and the gateway takes every quote each cycle.
        let handed = tx.push(*q);
        debug_assert!(handed.is_ok(), "the quote queue is drained every cycle");
    }
}

impl Agent for MdAgent {
    fn name(&self) -> &str {
        "market-data"
    }

    #[inline]
    fn do_work(&mut self, now: u64) -> usize {
        // `now` is the runner's clock, read at the start of this cycle, just before this agent
        // (the first of the pair): a second read here would lengthen every cycle, and so the
        // wait before each due time is seen.
        if !self.staged.is_empty() {
            self.publish_staged();
            return 1;
        }
        if self.take_due(now) {
            // Behind its schedule a venue always has a tick due: its maker still gets a step a
            // tick once it is a quarter of its tap behind (the venue is backlogged already; a
            // maker never stepped would lose messages, and every snapshot after says so).
            let MdAgent { inline_snapshots, tsc, .. } = self;
            if let Some(s) = inline_snapshots.as_mut().filter(|s| s.behind()) {
                s.step_anyway(now, tsc);
            }
            return 1;
        }
        // No tick due: one bounded step of the snapshot maker, if it runs here and the step is
        // expected to end before the next tick is due (`StepGuard`). No tick to come: any time.
        let deadline = self.due.unwrap_or(u64::MAX);
        let MdAgent { inline_snapshots, tsc, .. } = self;
        inline_snapshots.as_mut().map_or(0, |s| s.step_before(now, deadline, tsc))
    }
}

/// The gateway half of the venue as an [`Agent`]: the quotes the market-data agent made,
/// then one gateway duty cycle; every 64th idle cycle, the report stream's upkeep (rdma-rc takes
/// in a reconnecting reader and ships a report that waited for send-queue room).
pub struct GatewayPart {
    pub g: Gateway,
    quotes: rtrb::Consumer<Quote>,
    idle: u32,
}

impl Agent for GatewayPart {
    fn name(&self) -> &str {
        "gateway"
    }

    #[inline]
    fn do_work(&mut self, _now: u64) -> usize {
        let mut work = 0;
        while let Ok(q) = self.quotes.pop() {
            self.g.on_quote(&q);
            work += 1;
        }
        let done = self.g.duty();
        if done == 0 {
            self.idle = self.idle.wrapping_add(1);
            if self.idle.is_multiple_of(64) {
                self.g.execs_mut().idle();
            }
        }
        work + done
    }
}

/// Waits until ring `execs` has a consumer attached: the trader, which takes that line after it
/// starts observing the market data.
fn wait_for_trader(execs: &str, wait: Duration, stop: &AtomicBool) -> Result<(), String> {
    let deadline = Instant::now() + wait;
    let (mut ring, mut absent) = (None, shm::RingWait::new());
    loop {
        let mut not_there = None;
        if ring.is_none() {
            match shm::open_observer(execs, StartAt::Latest, &ShmOptions::default()) {
                Ok(r) => ring = Some(r),
                // What waiting cannot mend (an unsafe folder, a ring of another layout) is said
                // as it is, not as a trader that never came.
                Err(e) if !e.is_retryable() => return Err(format!("the report ring {execs:?}: {e}")),
                Err(e) => not_there = Some(e),
            }
        }
        if ring.as_ref().is_some_and(|r| r.has_live_consumer()) {
            return Ok(());
        }
        if stop.load(Ordering::Acquire) {
            return Err(format!("stopped while waiting for a trader on the report ring {execs:?}"));
        }
        let now = Instant::now();
        if now >= deadline {
            let last = not_there.as_ref().map(|e| format!(" (last: {e})")).unwrap_or_default();
            return Err(format!(
                "no trader attached to the report ring {execs:?} within {wait:?}{last}: start `tickbus trader --execs {execs}` (and, with --no-gateway, `tickbus gateway`)"
            ));
        }
        match not_there {
            // No ring yet: wait on its folders (`RingWait`: looking every 2 ms keeps the kernel
            // freeing lookups through RCU, on whichever core is busy).
            Some(e) => absent.pause(&e, deadline - now, Some(stop)),
            // The ring is there; its consumer line is a word in it, read without a syscall.
            None => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// After the market data: answers orders until the trader closes its order stream and every
/// order is answered, or `wait` passes. A multicast feed still there heartbeats meanwhile.
fn drain(
    g: &mut Gateway,
    mut md: Option<Out>,
    wait: Duration,
    stop: &AtomicBool,
    snapshots: &mut Option<Box<crate::venue_snapshots::InlineSnapshots>>,
    tsc: &Tsc,
) {
    let deadline = Instant::now() + wait;
    let mut checks = pipeline::IdleChecks::new(Duration::from_millis(5));
    let mut beat = Instant::now();
    let mut closed = false; // closed as of the previous idle check
    while !stop.load(Ordering::Relaxed) {
        if g.duty() > 0 {
            continue;
        }
        if let Some(s) = snapshots.as_mut() {
            s.step(tsc.now());
        }
        if !checks.due() {
            continue;
        }
        g.execs_mut().idle();
        if let Some(md) = md.as_mut().filter(|_| beat.elapsed() >= Duration::from_millis(100)) {
            md.heartbeat();
            beat = Instant::now();
        }
        let now = g.orders().peer();
        if closed && now != Peer::Live && !g.pending() {
            return; // gone before an idle cycle found its ring empty: every order was taken
        }
        closed = now != Peer::Live;
        if Instant::now() >= deadline {
            eprintln!("exchange: the trader did not finish within {wait:?} after the market data ended");
            return;
        }
    }
}

/// Opens the market data and (unless `--no-gateway`) the gateway's streams, on any transport by
/// URI, waiting for the trader's order stream.
fn open(a: &ExchangeArgs, t: &Topology, stop: &Arc<AtomicBool>) -> Result<(Out, Option<Gateway>), String> {
    let mut o = a.streams.options(a.wait_secs, stop);
    o.history = Some(MD_HISTORY);
    let md_cfg = RingConfig::for_payload(Mode::Lossy, MD_STREAM, 64, a.md_slots);
    if a.no_gateway && !matches!(t.execs.endpoint, Endpoint::Shm { .. }) {
        // Without its gateway the exchange knows the trader is in only by its consumer line on
        // the shm report ring; elsewhere it would start the feed before the trader listens.
        return Err(format!(
            "--no-gateway needs a shm report stream (the exchange waits for the trader's reader on it), not {}: run the gateway in the exchange",
            t.execs
        ));
    }
    let md = streams::publisher(&t.md, &md_cfg, &o)?;
    if a.no_gateway {
        return Ok((md, None));
    }
    let mut execs = streams::publisher(&t.execs, &gateway::report_ring(gateway::REPORT_STREAM), &o)?;
    let orders = streams::subscriber_polling(&t.orders, true, &o, &mut execs)
        .map_err(|e| format!("{e}; the orders are the trader's: start `tickbus trader --orders {}`", t.orders))?;
    let answered = match &t.execs.endpoint {
        Endpoint::Shm { name, .. } => gateway::Answered::on_ring(name, &o.shm)?,
        // A new report stream each connection (rdma-rc): nothing answered on it yet.
        _ => gateway::Answered::default(),
    };
    // Same process: the quotes go to the gateway directly, not through the ring.
    let mut g = Gateway::new(None, orders, execs);
    g.resume(answered);
    eprintln!("exchange: ready (md {}, orders {}, reports {})", t.md, t.orders, t.execs);
    Ok((md, Some(g)))
}
