//! `tickbus trader`: a trading app as the model for your own. It subscribes to normalised market
//! data (what `tickbus feed` publishes), hands every message to the strategy (`strategy.rs`:
//! the book and the rule, nothing about the bus), sends what the strategy decides as IOC orders
//! on a reliable order stream, and reads the execution reports back.
//!
//! The bus plumbing is all here: rings opened by name (the gateway publishes `execs`, this app
//! publishes `orders`, the feed `md`), one busy-polling loop on a pinned core that never
//! allocates or makes a syscall while there is work, and a look at the peers only when idle.
//! Each order carries the trace of the tick that caused it ([`TracedOrder`]): the tick's ingress
//! TSC, when it was received, when the book had applied it and when the decision was made; the
//! order's header adds its publish TSC, and the gateway its arrival.
#[cfg(test)]
mod gap_tests;
pub mod recovery;
#[cfg(test)]
mod recovery_tests;
pub mod reports;
pub mod strategy;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use tickbus::stream::Reliability;
use tickbus::time::Tsc;
use tickbus::{Mode, Recv, RingConfig};
use tickbus_codecs::orders::{NewOrder, OrderTrace, TracedOrder, TRACED_ORDER_LEN};
use tickbus_codecs::{decode, AnyMessage, Message, OrdType, TimeInForce};
use zerocopy::IntoBytes;

use crate::link::{In, Out, OutError};
use crate::pipeline::{self, Peer, RING_SLOTS};
use crate::streams;
pub use strategy::Strategy;
use tickbus::agent::lifecycle::{Ended, Lifecycle, LifecycleConfig, Phase, Step};

#[derive(Args, Debug)]
pub struct TraderArgs {
    /// The streams: market data to read (normalised, as `tickbus feed` or `tickbus exchange`
    /// publish it), orders to publish (reliable, one reader: the gateway), reports to read.
    #[command(flatten)]
    pub streams: crate::streams::StreamArgs,
    /// Stream id of the order stream on shm (rdma-rc carries it in the URI's path).
    #[arg(long, default_value_t = ORDER_STREAM)]
    pub stream: u32,
    /// Shares per order.
    #[arg(long, default_value_t = 100, value_parser = crate::args::within(1, 1_000_000_000))]
    pub qty: u64,
    /// Most orders awaiting their execution report (the strategy skips decisions beyond it;
    /// at most 1024).
    #[arg(long, default_value_t = 64)]
    pub max_in_flight: u64,
    /// Pin the trading loop to this core.
    #[arg(long)]
    pub core: Option<usize>,
    /// How the loop waits when it finds no work: `spin` (its own core) or `yield` (a core it
    /// shares with another busy app).
    #[arg(long, value_enum, default_value_t = crate::pipeline::Idle::Spin)]
    pub idle: crate::pipeline::Idle,
    /// How long to wait for the market-data and execution rings to appear (s).
    #[arg(long, default_value_t = 30.0, value_parser = crate::args::secs)]
    pub wait_secs: f64,
    /// After the market data ends, how long to wait for outstanding execution reports (s).
    #[arg(long, default_value_t = 10.0, value_parser = crate::args::secs)]
    pub drain_secs: f64,
    /// With orders awaiting reports, how long without any report (and no order sent) before
    /// those orders are counted as lost and trading goes on (s). A live gateway answers in
    /// microseconds; reports lost with no later one to show it (a report ring reset) would
    /// otherwise hold the trader at its in-flight limit for good. Not applied while the gateway
    /// is known dead: its orders wait on the ring for the next gateway.
    #[arg(long, default_value_t = 5.0, value_parser = crate::args::secs)]
    pub report_timeout_secs: f64,
    /// Join late (or restart) from the market data's journal: the folder `tickbus record`
    /// writes, or the channel URI another host serves it on (`tickbus journal serve`). The book
    /// is rebuilt from the journal, from --join-from, and the trader cuts over to the live
    /// stream at the exact position, trading only once live. Gaps on the live stream after that
    /// are filled from the journal too.
    #[arg(long, value_name = "DIR|URI")]
    pub join: Option<String>,
    /// With --join: the market-data position to rebuild from (0: the day's start).
    #[arg(long, default_value_t = 0, requires = "join")]
    pub join_from: u64,
    /// Whole-book snapshots on this stream (`tickbus exchange --snapshots`, or `tickbus
    /// snapshot` from a journal; one every second). On market data lost for good (lapped with
    /// nothing to fill it from, a hole in the journal) the trader stops trading, holds the
    /// market data, takes the next snapshot made after the loss by a maker that lost nothing
    /// (of the same stream incarnation, where the transport has one: shm), applies what it held
    /// after it and trades again (instead of halting for the day). Behind `tickbus feed`, its
    /// snapshots (`feed --snapshots URI --glimpse ADDR`) are whole again after a FeedGap: the
    /// feed repairs its book from the venue's. With --join it also starts from the next snapshot and
    /// rebuilds from the journal only after its position, not from the day's start (waiting up
    /// to --wait-secs for one); a served journal (--join URI) must then be served from that
    /// position or before (`journal serve --from-seq`). A first snapshot whose maker had lost
    /// messages is refused (its later ones say the same): the joiner then reads the journal
    /// from the day's start (a served one must be served from there). If that journal has the
    /// same hole (a maker following it), the joiner meets it as a gap and holds: neither has a
    /// whole book to give.
    #[arg(long, value_name = "URI", conflicts_with = "join_from")]
    pub snapshots: Option<String>,
    /// With --snapshots: market-data messages held while a recovery awaits its snapshot (the
    /// newest are kept): enough for the market data's rate times the snapshot period and the
    /// time one takes to arrive (112 bytes each, allocated at start).
    #[arg(long, default_value_t = 1 << 18, value_parser = crate::args::slots, requires = "snapshots")]
    pub recover_hold: usize,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// ud-mcast market data: over after this long without a tick (multicast cannot say that its
    /// publisher finished); before the first tick, after --wait-secs.
    #[arg(long, default_value_t = 2.0, value_parser = crate::args::secs)]
    pub md_quiet_secs: f64,
}

/// The order stream's id unless told otherwise.
pub const ORDER_STREAM: u32 = 2;

/// What the trading loop counted (the summary's type, shared with its readers).
pub use tickbus_apps::summary::TraderCounts as Counts;

/// The trading loop: its rings, the strategy and what it counted. [`Trader::duty`] is one
/// cycle; `run` adds idling and looking at the peers around it.
pub struct Trader {
    md: In,
    orders: Out,
    execs: In,
    pub strategy: Strategy,
    order: TracedOrder,
    tsc: Tsc,
    /// This run's order ids are `id_base + n`: unique across trader restarts (a run id from the
    /// OS's random source in the high half, not the pid, which repeats when a pid is reused: pid
    /// 1 in every container), so a report left for a dead predecessor is never taken for ours.
    id_base: u64,
    /// Which reports are ours, lost or repeated (`reports.rs`).
    matcher: reports::Reports,
    pub counts: Counts,
    /// Every tick's hop from the feed's ingress (or publish) stamp to its receive, in ns (the
    /// gateway times only the ticks that led to an order).
    pub tick_hop: hdrhistogram::Histogram<u64>,
    /// The hop from a tick's publish to its receive, in ns, for the first tick of each ingress
    /// stamp whose publisher said when the publish began (`FLAG_PUBLISH_LAG`: `tickbus exchange`
    /// does): the transport's own hop. A tick that shares its ingress with the one before (one
    /// exchange event made both) queued behind this trader's handling of that one: that wait is
    /// the trader's, not the transport's, and is in the every-tick row.
    pub publish_hop: hdrhistogram::Histogram<u64>,
    /// The ingress stamp of the last tick received.
    last_ingress: u64,
    /// How long an empty duty cycle takes, all of it (the streams polled, the book warmed, the
    /// idle pause): a tick that lands while the trader is idle waits for its next look at the
    /// market data, typically about half the span between two looks.
    pub poll: tickbus::agent::PollPeriod,
    /// Looks at the market data so far; and, over the duty cycles that found nothing, how many
    /// cycles and how many looks they made ([`Trader::md_looks_per_idle_cycle`]).
    md_looks: u64,
    idle_cycles: u64,
    idle_looks: u64,
    scale: tickbus::time::TscScale,
    /// When the trader started, and (a late joiner) when it went live: TSC.
    started_tsc: u64,
    live_tsc: u64,
    /// A tick's stamp is timed only from this TSC on (when the trader began opening its
    /// streams) and up to [`Trader::skew_ticks`] after its receive: a stamp from before (a
    /// replayed journal's recorded stamps) or far after (a clock ahead of this one: another
    /// boot's, say) would time the recording or another clock, not the hop. Such ticks are
    /// counted (`md_stale_stamps`), not timed. A stamp of another clock that falls inside this
    /// run's span cannot be told from a true one.
    pub(crate) stamps_from: u64,
    /// 1 ms of TSC ticks: how far a stamp may lie after its receive (cores' TSC offsets on a VM
    /// are ns; the gateway allows the same).
    skew_ticks: u64,
    /// `--snapshots`: recovery from lost market data (None: a loss halts trading for good).
    pub recovery: Option<recovery::Recovery>,
}

/// A run's order-id base: 32 bits from the OS's random source (never 0) in the high half.
fn run_id_base() -> u64 {
    use std::io::Read;
    let mut b = [0u8; 4];
    loop {
        // At start-up only. /dev/urandom never blocks once the kernel's pool is seeded.
        std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)).expect("reading /dev/urandom");
        let id = u32::from_ne_bytes(b);
        if id != 0 {
            return u64::from(id) << 32;
        }
    }
}

impl Trader {
    pub fn new(md: In, orders: Out, execs: In, strategy: Strategy) -> Trader {
        let mut order = TracedOrder { order: NewOrder::new(), trace: OrderTrace::default() };
        order.order.time_in_force = TimeInForce::ImmediateOrCancel as u8;
        order.order.ord_type = OrdType::Limit as u8;
        let id_base = run_id_base();
        let scale = tickbus::time::TscScale { ticks_per_ns: md.ticks_per_ns() };
        // Up to an hour in ns, allocated up front: recording never allocates.
        let tick_hop = hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds");
        let publish_hop = tick_hop.clone();
        let tsc = Tsc::new();
        let started_tsc = tsc.now();
        Trader {
            md,
            orders,
            execs,
            strategy,
            order,
            started_tsc,
            live_tsc: 0,
            stamps_from: started_tsc,
            skew_ticks: (scale.ticks_per_ns * 1e6) as u64,
            tsc,
            id_base,
            matcher: reports::Reports::new(id_base),
            counts: Counts::default(),
            tick_hop,
            publish_hop,
            last_ingress: 0,
            poll: tickbus::agent::PollPeriod::new(),
            md_looks: 0,
            idle_cycles: 0,
            idle_looks: 0,
            scale,
            recovery: None,
        }
    }

    /// One duty cycle: one market-data message (book, decision, and the order if any), then
    /// every execution report waiting; a cycle that found nothing warms one stock of the book
    /// ([`Strategy::warm`]) and looks at the market data once more before the idle pause.
    /// No syscall and no allocation (`hot_path_tests.rs`). Returns the work done (0: idle).
    ///
    /// Why the second look: a tick that lands while the loop is busy elsewhere waits for the
    /// next look at the market data. With one look a cycle, an idle cycle (the reports, the
    /// warming, the idle pause of about 25 ns on this machine's kind) was about 55 ns against
    /// the bare reader's 28 (a look and the pause), so a tick waited about 14 ns longer than on
    /// the floor's hop. A second look splits the cycle into two spans of about the floor's.
    #[inline]
    pub fn duty(&mut self, stop: &AtomicBool) -> usize {
        let looks_before = self.md_looks;
        let mut work = self.take_md(stop);
        work += self.upkeep();
        if work == 0 {
            // Nothing came: keep the book's next stock warm for the tick to come, then look
            // again before the pause.
            self.strategy.warm();
            work = self.take_md(stop);
        }
        if work == 0 {
            self.idle_cycles += 1;
            self.idle_looks += self.md_looks - looks_before;
            self.poll.empty(&self.tsc);
        } else {
            self.poll.busy();
        }
        work
    }

    /// One market-data message, if one is there: the book, the decision, and the order if any
    /// (or held, while a recovery is under way). Returns 1 if a message or a gap was taken.
    #[inline]
    fn take_md(&mut self, stop: &AtomicBool) -> usize {
        self.md_looks += 1;
        // A late joiner rebuilds its book from the journal and trades only once live.
        let catching_up = self.md.catching_up();
        let Trader {
            md,
            orders,
            strategy,
            order,
            tsc,
            id_base,
            counts: c,
            tick_hop,
            publish_hop,
            last_ingress,
            scale,
            recovery,
            live_tsc,
            stamps_from,
            skew_ticks,
            ..
        } = self;
        let mut work = 0;
        if let Some(r) = md.try_recv() {
            work = 1;
            let receive_tsc = tsc.now();
            match r {
                // Recovering from a loss: held for after the snapshot, not applied or traded on.
                Recv::Message(m) if recovery.as_ref().is_some_and(|r| r.recovering()) => {
                    hold(c, recovery.as_mut().expect("recovering"), m.position, m.payload);
                }
                // Already in the book a recovery loaded (its maker was ahead of this trader).
                Recv::Message(m) if recovery.as_ref().is_some_and(|r| r.in_book(m.position)) => c.ticks += 1,
                Recv::Message(m) => {
                    c.ticks += 1;
                    match decode(m.payload) {
                        Ok(AnyMessage::FeedGap(g)) => {
                            c.feed_gaps += 1;
                            strategy.on_gap(g.count);
                            if let Some(r) = recovery.as_mut() {
                                r.lost(m.position + 1);
                            }
                        }
                        Ok(msg) => {
                            // The feed's ingress TSC (FLAG_INGRESS_TSC), else the publisher's
                            // commit; 0 (not timed) unless this run's clock could have made it.
                            // A late joiner's catch-up is never timed (nor traded): its wait
                            // is the journal's age, counted by the merge, not a stale stamp.
                            let head = tickbus_codecs::Header::peek(m.payload).filter(|_| !catching_up);
                            let stamp = head.map_or(0, |h| h.publish_tsc);
                            let fresh = stamp >= *stamps_from && stamp <= receive_tsc.saturating_add(*skew_ticks);
                            c.md_stale_stamps += u64::from(stamp != 0 && !fresh);
                            let head = head.filter(|_| fresh);
                            let ingress_tsc = head.map_or(0, |h| h.publish_tsc);
                            // Converted before the book's work, which it overlaps, not between
                            // the decision and the order's publish, which it would lengthen.
                            let md_publish_tsc =
                                head.and_then(|h| h.publish_begin_tsc(scale.ticks_per_ns)).unwrap_or(0);
                            if let Some(moved) = strategy.apply(&msg).filter(|_| !catching_up) {
                                let book_tsc = tsc.now();
                                if let Some(i) = strategy.decide(moved) {
                                    let o = &mut order.order;
                                    (o.client_order_id, o.instrument_id, o.side) =
                                        (*id_base + c.orders + 1, i.instrument, i.side as u8);
                                    (o.price, o.qty) = (i.price, i.qty);
                                    order.trace = OrderTrace {
                                        tick_sequence: m.position,
                                        ingress_tsc,
                                        receive_tsc,
                                        book_tsc,
                                        decision_tsc: tsc.now(),
                                        md_publish_tsc,
                                    };
                                    if !send(orders, order, tsc, c, stop) {
                                        strategy.unsent();
                                    }
                                }
                            }
                            // Recorded after the order went: the histograms' lines are not in
                            // any hop of it.
                            if ingress_tsc != 0 {
                                let hop = scale.delta_ns(ingress_tsc, receive_tsc);
                                tick_hop.saturating_record(hop.max(1));
                                let first = ingress_tsc != *last_ingress;
                                if let Some(lag) = head.and_then(|h| h.publish_lag_ns()).filter(|_| first) {
                                    publish_hop.saturating_record(hop.saturating_sub(lag).max(1));
                                }
                                *last_ingress = ingress_tsc;
                            }
                        }
                        Err(_) => c.md_undecodable += 1,
                    }
                }
                Recv::Gap(g) => {
                    c.md_missed += g.missed();
                    strategy.on_gap(g.missed());
                    if let Some(r) = recovery.as_mut() {
                        r.lost(g.resumed_at);
                    }
                }
            }
        }
        // The first cut-over only: a merge that fills a later gap from the journal goes back
        // to catching up and live again.
        if catching_up && *live_tsc == 0 && !md.catching_up() {
            *live_tsc = tsc.now();
        }
        work
    }

    /// What a cycle does besides the market data: a recovery's share of its snapshot, the
    /// moment a late joiner goes live, and every execution report waiting. Returns the work
    /// done.
    #[inline]
    fn upkeep(&mut self) -> usize {
        let catching_up = self.md.catching_up();
        let Trader { md, execs, strategy, tsc, matcher, counts: c, recovery, live_tsc, .. } = self;
        let mut work = 0;
        if let Some(r) = recovery.as_mut().filter(|r| r.recovering()) {
            // Everything the market data has (up to a bound) is held before each share of a
            // snapshot is loaded, so loading a large book does not fall behind the stream.
            for _ in 0..RECOVERY_MD_PER_CYCLE {
                match md.try_recv() {
                    Some(Recv::Message(m)) => hold(c, r, m.position, m.payload),
                    Some(Recv::Gap(g)) => {
                        c.md_missed += g.missed();
                        r.lost(g.resumed_at);
                    }
                    None => break,
                }
                work += 1;
            }
            // A bounded share of a snapshot each cycle. Chunks read are work (an idle cycle
            // still looks at the peers and the market data's end).
            let (chunks, recovered) = r.poll(strategy.book_mut(), RECOVERY_CHUNKS_PER_CYCLE);
            work += chunks;
            if recovered {
                strategy.resume();
                if r.stats.recovered == 1 {
                    r.stats.orders_before_first = c.orders;
                }
                r.stats.orders_before_last = c.orders;
            }
        }
        // The first cut-over only: a merge that fills a later gap from the journal goes back
        // to catching up and live again.
        if catching_up && *live_tsc == 0 && !md.catching_up() {
            *live_tsc = tsc.now();
        }
        while let Some(Recv::Message(m)) = execs.try_recv() {
            work += 1;
            let report = decode(m.payload).ok();
            let id = match report {
                Some(AnyMessage::ExecFill(f)) => Some(f.client_order_id),
                Some(AnyMessage::ExecAck(a)) => Some(a.client_order_id),
                Some(AnyMessage::ExecReject(r)) => Some(r.client_order_id),
                _ => None,
            };
            // The gateway answers in order: a report for a later order than the next due means
            // the ones between will never be answered (`reports.rs`).
            match (report, id.map(|id| matcher.on_report(id, c.orders))) {
                (Some(r), Some(reports::Match::Ours { lost })) => {
                    c.reports += 1;
                    c.reports_lost += lost;
                    strategy.on_lost(lost);
                    strategy.on_report(&r);
                }
                (_, Some(reports::Match::Duplicate)) => c.reports_duplicate += 1,
                _ => c.reports_unexpected += 1,
            }
        }
        work
    }
}

impl Trader {
    /// Looks at the market data per duty cycle that found nothing, over the run (rounded; 0
    /// before the first such cycle): the summary's `md_looks_per_pass`, beside the cycle's
    /// length (`poll`).
    pub fn md_looks_per_idle_cycle(&self) -> u32 {
        if self.idle_cycles == 0 {
            return 0;
        }
        u32::try_from((self.idle_looks + self.idle_cycles / 2) / self.idle_cycles).unwrap_or(u32::MAX)
    }

    /// Counts every order still awaiting its report as lost (the wait for them timed out:
    /// [`reports::Silence`]); returns how many. Idle path.
    pub fn expire_reports(&mut self) -> u64 {
        let lost = self.matcher.expire(self.counts.orders);
        self.counts.reports_lost += lost;
        self.strategy.on_lost(lost);
        lost
    }

    /// The order stream (idle upkeep: rdma-rc takes in its reader and ships what waited).
    pub fn orders_mut(&mut self) -> &mut Out {
        &mut self.orders
    }
}

/// Snapshot chunks (16 orders each) a recovering trader loads per duty cycle, and market-data
/// messages it holds first.
const RECOVERY_CHUNKS_PER_CYCLE: usize = 16;
const RECOVERY_MD_PER_CYCLE: usize = 256;

/// A market-data message taken while recovering: counted as a tick (and a feed gap, if it is
/// one), and held for after the snapshot.
#[inline]
fn hold(c: &mut Counts, r: &mut recovery::Recovery, position: u64, payload: &[u8]) {
    c.ticks += 1;
    c.feed_gaps += u64::from(is_feed_gap(payload));
    r.hold(position, payload);
}

/// Whether `payload` is the feed's `FeedGap` (by its header: not decoded).
fn is_feed_gap(payload: &[u8]) -> bool {
    tickbus_codecs::Header::peek(payload).is_some_and(|h| h.msg_type == tickbus_codecs::MsgType::FeedGap as u16)
}

/// The most orders that may await reports: well inside both rings, so the trader never waits
/// for room on the order ring while the gateway waits for room on the report ring.
pub const MAX_IN_FLIGHT: u64 = RING_SLOTS as u64 / 4;

/// The order ring's layout: traced orders, reliable, one consumer (the gateway).
pub fn order_ring(stream: u32) -> RingConfig {
    let mut cfg = RingConfig::for_payload(Mode::Reliable, stream, TRACED_ORDER_LEN, RING_SLOTS);
    cfg.max_consumers = 1;
    cfg
}

pub fn run(a: TraderArgs) -> Result<(), String> {
    if a.max_in_flight == 0 || a.max_in_flight > MAX_IN_FLIGHT {
        return Err(format!(
            "--max-in-flight {}: give 1..={MAX_IN_FLIGHT} (a quarter of the order and report rings, so neither app ever waits on the other)",
            a.max_in_flight
        ));
    }
    let stop = pipeline::stop_flag()?;
    // Made and touched before attaching (the feed starts once we are attached), and on the
    // trader's core: the book's pages are first touched where its loop will use them, and a
    // late joiner's page faults for its book take no time slice from the app that owns another
    // core. The loop itself is pinned once the streams are up, so the threads they start keep
    // every core (and so does a snapshot's load, which opens a stream).
    let made = || {
        let mut s = Strategy::new(a.qty, a.max_in_flight);
        s.pre_touch();
        s
    };
    let mut strategy = match a.core {
        Some(core) => tickbus::agent::on_core(core, made).map_err(|e| format!("pinning to core {core}: {e}"))?,
        None => made(),
    };
    let (mut snapshot, mut refused) = (None, None);
    // Before the streams open: a publisher that starts once it sees this trader stamps after it.
    let opening_tsc = Tsc::new().now();
    let (orders, md, execs, recovery) = open(&a, &stop, &mut strategy, &mut snapshot, &mut refused)?;
    let mut t = Trader::new(md, orders, execs, strategy);
    (t.recovery, t.stamps_from) = (recovery, opening_tsc);
    let mut agent = TraderAgent::new(t, &a, stop.clone());
    tickbus::agent::run_until(&mut agent, a.idle.strategy(), &stop);
    let t = agent.t;
    if let Some(why) = t.execs.failure() {
        eprintln!("trader: the report stream failed: {why}");
    }
    let recovered = t.md.recovered();
    let join = join_summary(&t, &a, snapshot, refused);
    let recovery = t
        .recovery
        .as_ref()
        .map(|r| tickbus_apps::summary::RecoveryStats { recovering_at_end: r.recovering(), ..r.stats });
    if let Some(why) = t.recovery.as_ref().and_then(|r| r.failure.as_deref()) {
        eprintln!("trader: the snapshot stream failed ({why}); recovery kept trying it");
    }
    if let Some(r) = recovery {
        if r.losses > 0 {
            eprintln!(
                "trader: {} market-data losses, {} recovered from snapshots ({} refused; the last in {} ms){}",
                r.losses,
                r.recovered,
                r.refused,
                r.last_us / 1000,
                if r.recovering_at_end { "; still recovering at the end: not trading" } else { "" }
            );
        }
    }
    let looks_per_pass = t.md_looks_per_idle_cycle();
    let Trader { orders, strategy, counts: c, tick_hop: h, publish_hop, poll, scale, .. } = t;
    drop(orders); // closes the order stream: the gateway sees the trader finished
    if a.json {
        let summary = tickbus_apps::summary::TraderSummary {
            tick_hop_ns: tickbus_apps::summary::HopStats::of(
                "feed ingress (or publish) -> strategy receive, every tick",
                &h,
            ),
            publish_hop_ns: (!publish_hop.is_empty()).then(|| {
                tickbus_apps::summary::HopStats::of(
                    "market data publish -> strategy receive, first of each due time",
                    &publish_hop,
                )
            }),
            counts: c.clone(),
            poll_pass_ns: poll.median_ns(scale.ticks_per_ns).map(|ns| ns.round() as u64),
            md_looks_per_pass: looks_per_pass,
            md_recovered: recovered,
            strategy: strategy.stats,
            in_flight: strategy.in_flight(),
            halted: strategy.halted(),
            book_digest: format!("{:016x}", strategy.book_digest()),
            join,
            recovery,
        };
        println!("{}", serde_json::to_string(&summary).map_err(|e| e.to_string())?);
    } else {
        println!(
            "trader: {} ticks, {} orders, {} reports ({} filled, {} unfilled, {} rejected; {} never came, {} repeated), {} awaiting; {} md lost, {} feed gaps{}{}",
            c.ticks,
            c.orders,
            c.reports,
            strategy.stats.filled_orders,
            strategy.stats.unfilled_orders,
            strategy.stats.rejected_orders,
            c.reports_lost,
            c.reports_duplicate,
            strategy.in_flight(),
            c.md_missed,
            c.feed_gaps,
            stale_note(c.md_stale_stamps),
            strategy.halted().map(|h| format!("; {h}")).unwrap_or_default()
        );
    }
    Ok(())
}

/// The summary's word on ticks not timed for their stamps (nothing when there were none).
fn stale_note(n: u64) -> String {
    if n == 0 {
        return String::new();
    }
    format!(
        "; {n} ticks not timed: stamped before this trader began opening its streams (a replayed recording) or ahead of its clock"
    )
}

/// How a late joiner caught up, for the summary.
fn join_summary(
    t: &Trader,
    a: &TraderArgs,
    snapshot: Option<tickbus_apps::summary::SnapshotSummary>,
    refused_snapshot: Option<tickbus_apps::summary::SnapshotSummary>,
) -> Option<tickbus_apps::summary::JoinSummary> {
    let (m, why) = t.md.join_stats()?;
    let live_after_us = (t.live_tsc != 0).then(|| t.scale.delta_ns(t.started_tsc, t.live_tsc) / 1000);
    Some(tickbus_apps::summary::JoinSummary {
        journal: a.join.clone().unwrap_or_default(),
        from: snapshot.as_ref().map_or(a.join_from, |s| s.as_of),
        from_journal: m.from_archive,
        duplicates: m.duplicates,
        filled: m.filled,
        journal_gaps: m.archive_gaps,
        unfilled: m.unfilled,
        cut_over: m.cut_over,
        live_after_us,
        journal_error: why,
        snapshot,
        refused_snapshot,
    })
}

/// The trader as an [`Agent`](tickbus::agent::Agent): each duty cycle is one pass of the
/// trading loop ([`Trader::duty`]); a cycle that found no work looks at the peers now and then
/// (syscalls, so never while there is work) and steps the market data's [`Lifecycle`]. Once the
/// day is drained (or the drain timed out) it stores `stop`, which ends its runner.
pub struct TraderAgent<'a> {
    pub t: Trader,
    a: &'a TraderArgs,
    stop: Arc<AtomicBool>,
    checks: pipeline::IdleChecks,
    gateway_gone: bool,
    /// A multicast feed cannot say it finished and ends on its silence (before its first tick,
    /// after --wait-secs); shm and rdma-rc end when their publisher does.
    multicast: bool,
    md: Lifecycle,
    silence: reports::Silence,
    report_timeout: Duration,
}

impl<'a> TraderAgent<'a> {
    pub fn new(t: Trader, a: &'a TraderArgs, stop: Arc<AtomicBool>) -> TraderAgent<'a> {
        let multicast = t.md.is_multicast();
        let md = Lifecycle::new(
            LifecycleConfig {
                wait: if multicast { Duration::from_secs_f64(a.wait_secs) } else { Duration::MAX },
                quiet: multicast.then(|| Duration::from_secs_f64(a.md_quiet_secs)),
                drain: Duration::from_secs_f64(a.drain_secs),
            },
            Instant::now(),
        );
        TraderAgent {
            t,
            a,
            stop,
            checks: pipeline::IdleChecks::new(Duration::from_millis(20)),
            gateway_gone: false,
            multicast,
            md,
            silence: reports::Silence::new(Instant::now()),
            report_timeout: Duration::from_secs_f64(a.report_timeout_secs),
        }
    }

    /// Looks at the peers and the market data's life (idle time only); true once the day is over.
    fn look_around(&mut self) -> bool {
        let TraderAgent { t, a, gateway_gone, multicast, md, silence, report_timeout, .. } = self;
        let multicast = *multicast;
        for why in t.orders.dropped() {
            eprintln!("trader: the gateway was dropped from the order stream: {why}");
        }
        t.orders_mut().idle();
        match t.execs.peer() {
            Peer::Died { pid } if !*gateway_gone => {
                *gateway_gone = true;
                eprintln!(
                    "trader: the gateway (pid {pid}) died; {} orders await reports and stay on the order ring for the next gateway",
                    t.strategy.in_flight()
                );
            }
            Peer::Live => *gateway_gone = false,
            // With multicast market data the venue's process runs the gateway and the feed: its
            // report stream gone means the market data is over too (multicast cannot say so).
            Peer::Closed if multicast && md.phase() < Phase::Over => {
                eprintln!(
                    "trader: the gateway's report stream is gone ({}); ending",
                    t.execs.failure().unwrap_or("its publisher closed")
                );
                md.finish(Instant::now());
            }
            _ => {}
        }
        let waiting = t.strategy.in_flight() > 0 && !*gateway_gone;
        if silence.expired((t.counts.reports, t.counts.orders), waiting, Instant::now(), *report_timeout) {
            let lost = t.expire_reports();
            eprintln!(
                "trader: no execution report for {} s with {lost} orders awaiting one: counted as lost, trading on \
                 (a report that comes later is counted as repeated)",
                a.report_timeout_secs
            );
        }
        if let Some(why) = t.md.failure().filter(|_| md.phase() < Phase::Over) {
            eprintln!("trader: the market data failed: {why}");
            md.finish(Instant::now());
        }
        // Looked at only after a duty cycle found no work: a feed seen gone here had nothing
        // left to read, and the step after that settles (or waits for the reports).
        match md.step(Instant::now(), t.md.peer_or_journal(), t.counts.ticks, t.strategy.in_flight()) {
            Step::Over(Ended::NeverSeen) if multicast => {
                eprintln!("trader: no market data within {} s (--wait-secs); ending", a.wait_secs);
                false
            }
            Step::Drained => true,
            Step::DrainTimedOut { outstanding } => {
                eprintln!("trader: {outstanding} orders got no execution report within {} s", a.drain_secs);
                true
            }
            _ => false,
        }
    }
}

impl tickbus::agent::Agent for TraderAgent<'_> {
    fn name(&self) -> &str {
        "trader"
    }

    fn uses_clock(&self) -> bool {
        false // its duty stamps what it receives with its own reads
    }

    fn do_work(&mut self, _now: u64) -> usize {
        let work = self.t.duty(&self.stop);
        if work == 0 && self.checks.due() && self.look_around() {
            self.stop.store(true, Ordering::Release);
        }
        work
    }
}

/// Opens the trader's streams (any transport, by URI), waiting for the peers; pins the thread;
/// says ready. Returns (orders, market data, reports). The order stream first: the gateway
/// waits for it; then the market data, so no tick after the reports' reader is seen goes unread.
fn open(
    a: &TraderArgs,
    stop: &Arc<AtomicBool>,
    strategy: &mut Strategy,
    snapshot: &mut Option<tickbus_apps::summary::SnapshotSummary>,
    refused: &mut Option<tickbus_apps::summary::SnapshotSummary>,
) -> Result<(Out, In, In, Option<recovery::Recovery>), String> {
    let t = a.streams.resolve()?;
    let o = a.streams.options(a.wait_secs, stop);
    // The snapshot first, before any stream that needs this thread's attention is open (an
    // rdma-rc gateway finishes its handshake on the order publisher's thread).
    if let Some(uri) = a.snapshots.as_ref().filter(|_| a.join.is_some()) {
        let s = load_snapshot(uri, strategy, &o, stop)?;
        if s.lost > 0 {
            // Its maker lost messages, so every later snapshot of its says so too: the journal
            // from the day's start is the only way left to a whole book (slower: every message
            // is read). A journal with the same hole (the maker followed it) reports it as a
            // gap, and the trader then holds rather than trade on a wrong book.
            eprintln!(
                "trader: the snapshot's maker had lost {} market-data messages before position {}: its book may be wrong, so this trader joins through the journal from position {} instead",
                s.lost, s.as_of, a.join_from
            );
            strategy.book_mut().clear();
            *refused = Some(s);
        } else {
            *snapshot = Some(s);
        }
    }
    let mut orders = streams::publisher(&t.orders, &order_ring(a.stream), &o)?;
    let mut md = streams::subscriber(&t.md, false, &o)?;
    if let Some(spec) = &a.join {
        // After the live stream is attached: together they hold every position.
        let from = snapshot.as_ref().map_or(a.join_from, |s| s.as_of);
        if let (Some(s), Some(live)) = (snapshot.as_ref(), md.source_id()) {
            if s.source != 0 && s.source != live {
                return Err(format!(
                    "--snapshots: the snapshot is of another incarnation of the market-data stream ({:016x}, the live one is {live:016x}): its maker follows another day's journal",
                    s.source
                ));
            }
        }
        let archive = tickbus::merge::AnyArchive::open(spec, from, &o).map_err(|e| format!("--join {spec}: {e}"))?;
        md = md.into_joined(archive, from).map_err(|e| format!("--join {spec}: {e}"))?;
    }
    let execs = streams::subscriber_polling(&t.execs, true, &o, &mut orders)
        .map_err(|e| format!("{e}; the reports are the gateway's: start `tickbus gateway` or `tickbus exchange`"))?;
    streams::wait_for_reader(&mut orders, "the gateway", o.wait, stop)?;
    if let Some(core) = a.core {
        tickbus::agent::pin_current_thread(core).map_err(|e| format!("pinning to core {core}: {e}"))?;
    }
    let recovery = match &a.snapshots {
        Some(uri) => Some(recovery::Recovery::new(snapshot_stream(uri, &o)?, a.recover_hold, md.source_id())),
        None => None,
    };
    eprintln!("trader: ready (md {}, orders {}, reports {})", t.md, t.orders, t.execs);
    Ok((orders, md, execs, recovery))
}

/// The snapshot stream on `uri`, observed from its newest message (a lossy stream: shm or
/// ud-mcast).
fn snapshot_stream(uri: &str, o: &tickbus::stream::OpenOptions) -> Result<tickbus::stream::AnySubscriber, String> {
    let c = tickbus::stream::Channel::parse(uri).map_err(|e| format!("--snapshots: {e}"))?;
    if matches!(c.endpoint, tickbus::stream::Endpoint::RdmaRc { .. }) {
        return Err(format!(
            "--snapshots {uri}: snapshots go to many joiners on a lossy stream (shm or ud-mcast), not rdma-rc"
        ));
    }
    let mut o = o.clone();
    o.payload = tickbus_codecs::md::SnapshotOrders::LEN;
    o.reliability = Reliability::Lossy;
    o.start_at = tickbus::StartAt::Latest;
    tickbus::stream::open_subscriber(&c, &o).map_err(|e| {
        format!(
            "--snapshots: reading {e}: start `tickbus exchange --snapshots {uri}` or `tickbus snapshot --dest {uri}`"
        )
    })
}

/// The most orders a snapshot may hold (16 times a TotalView day's peak of about a million):
/// a damaged first chunk claiming more is refused, not loaded until memory runs out.
const MAX_SNAPSHOT_ORDERS: u64 = 1 << 24;

/// Loads the next whole-book snapshot on `uri` into the strategy's book.
fn load_snapshot(
    uri: &str,
    strategy: &mut Strategy,
    o: &tickbus::stream::OpenOptions,
    stop: &AtomicBool,
) -> Result<tickbus_apps::summary::SnapshotSummary, String> {
    let started = Instant::now();
    let mut sub = snapshot_stream(uri, o)?;
    let loaded = tickbus::snapshot::load_snapshot(&mut sub, strategy.book_mut(), MAX_SNAPSHOT_ORDERS, o.wait, stop)
        .map_err(|e| format!("--snapshots {uri}: {e}"))?;
    let waited_us = started.elapsed().as_micros() as u64;
    eprintln!(
        "trader: loaded the snapshot as of position {} ({} orders) in {} ms",
        loaded.as_of,
        loaded.orders,
        waited_us / 1000
    );
    Ok(tickbus_apps::summary::SnapshotSummary {
        as_of: loaded.as_of,
        orders: loaded.orders,
        lost: loaded.lost,
        waited_us,
        source: loaded.source,
    })
}

/// Stamps the order's header and publishes it with its trace, waiting while the gateway has not
/// taken enough (the in-flight limit keeps that rare: it is far below the ring's slots). False
/// if it did not go out (stopping, or the order stream failed).
#[inline]
fn send(orders: &mut Out, o: &mut TracedOrder, tsc: &Tsc, c: &mut Counts, stop: &AtomicBool) -> bool {
    let stream = orders.stream_id();
    loop {
        o.order.header.stamp(stream, orders.position(), tsc.now());
        match orders.publish(o.as_bytes()) {
            Ok(_) => {
                c.orders += 1;
                return true;
            }
            Err(OutError::Full) if !stop.load(Ordering::Relaxed) => {
                c.order_ring_full += 1;
                std::hint::spin_loop();
            }
            Err(OutError::Full) => return false,
            Err(e) => {
                c.orders_failed += 1;
                e.log("an order");
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// Two runs of one pid (a reused pid: pid 1 in every container) got the same order ids
    /// when the base was the pid; a base from the OS's random source differs between runs.
    #[test]
    fn two_runs_in_one_process_get_different_order_id_bases() {
        let bases: std::collections::HashSet<u64> = (0..64).map(|_| super::run_id_base()).collect();
        assert!(bases.len() >= 63, "64 bases, {} distinct", bases.len());
        assert!(bases.iter().all(|b| b >> 32 != 0 && b & 0xffff_ffff == 0));
    }
}
