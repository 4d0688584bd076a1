//! `tickbus gateway`: an order gateway and exchange simulator. It reads orders from the reliable
//! order stream (`tickbus trader` publishes it), matches each with the venue's rule
//! (`matching.rs`: IOC limit orders against the last quote), publishes exactly one execution
//! report per order on the reliable report stream, and records where every order's
//! tick-to-trade went, hop by hop (`hops.rs`), from the trace the order carries.
//!
//! The market data it matches against is the same normalised stream the trader reads (its
//! quotes). A trader that dies is reported and the gateway carries on: its orders already on the
//! ring are answered, and a restarted trader takes the order stream over where it stopped.
pub mod answered;
pub mod hops;
pub mod matching;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use tickbus::time::{Tsc, TscScale};
use tickbus::{Mode, Recv, RingConfig};
use tickbus_apps::summary::GatewaySummary;
use tickbus_codecs::exec::ExecFill;
use tickbus_codecs::orders::{NewOrder, TracedOrder};
use tickbus_codecs::{decode, AnyMessage, Message};

use crate::link::{In, Out, OutError};
use crate::pipeline::{self, Peer, RING_SLOTS};
pub use answered::Answered;
pub use hops::Hops;
use matching::{Report, Venue};

#[derive(Args, Debug)]
pub struct GatewayArgs {
    /// The streams: market data to observe (quotes), orders to read (reliable: an order is
    /// released once answered), reports to publish (reliable, one reader: the trader).
    #[command(flatten)]
    pub streams: crate::streams::StreamArgs,
    /// Stream id of the report ring.
    #[arg(long, default_value_t = REPORT_STREAM)]
    pub stream: u32,
    /// Pin the gateway loop to this core.
    #[arg(long)]
    pub core: Option<usize>,
    /// How the loop waits when it finds no work: `spin` (its own core) or `yield` (a core it
    /// shares with another busy app).
    #[arg(long, value_enum, default_value_t = crate::pipeline::Idle::Spin)]
    pub idle: crate::pipeline::Idle,
    /// How long to wait for the market-data and order rings to appear (s).
    #[arg(long, default_value_t = 30.0, value_parser = crate::args::secs)]
    pub wait_secs: f64,
    /// Stop once the trader has closed its order stream and every order is answered (otherwise
    /// run until Ctrl-C / SIGTERM, waiting for the next trader).
    #[arg(long)]
    pub exit_with_trader: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The report stream's id unless told otherwise.
pub const REPORT_STREAM: u32 = 3;

/// What the gateway counted (the summary's type, shared with its readers).
pub use tickbus_apps::summary::GatewayCounts as Counts;

/// A report went out, or failed for good (not `Full`: that one waits).
#[inline]
fn count_report(c: &mut Counts, sent: Result<u64, OutError>) {
    match sent {
        Ok(_) => c.reports += 1,
        Err(e) => {
            c.reports_failed += 1;
            e.log("an execution report");
        }
    }
}

/// The gateway loop: its rings, the venue, the hop histograms and what it counted.
/// [`Gateway::duty`] is one cycle; `run` adds idling and looking at the trader around it.
pub struct Gateway {
    /// The market data it observes; None when the process that publishes it hands the quotes
    /// over directly ([`Gateway::on_quote`]: the exchange's composite agent).
    md: Option<In>,
    orders: In,
    execs: Out,
    venue: Venue,
    pub hops: Hops,
    pub counts: Counts,
    /// A report waiting for room on the report ring, and the order position it answers.
    pending: Option<(Report, u64)>,
    /// What a gateway before this one answered on the same report ring.
    answered: Answered,
    tsc: Tsc,
    scale: TscScale,
    t0: u64,
}

impl Gateway {
    pub fn new(md: Option<In>, mut orders: In, execs: Out) -> Gateway {
        orders.set_manual_release(true); // an order is released once answered
        let tsc = Tsc::new();
        let scale = TscScale { ticks_per_ns: orders.ticks_per_ns() };
        let t0 = tsc.now();
        Gateway {
            md,
            orders,
            execs,
            venue: Venue::new(),
            hops: Hops::new(scale.ticks_per_ns),
            counts: Counts::default(),
            pending: None,
            answered: Answered::default(),
            tsc,
            scale,
            t0,
        }
    }

    /// Takes over from a gateway that published on the same report ring: what it answered is
    /// not answered again, and execution ids go on after its highest.
    pub fn resume(&mut self, answered: Answered) {
        self.venue.number_after(answered.last_exec_id);
        self.answered = answered;
    }

    /// One duty cycle: the waiting report or the next order (its arrival stamped at once), then
    /// up to 64 market-data messages (the quotes), then the order matched against the latest
    /// quote (which may have arrived just after the order: this venue matches against the book
    /// as it stands when the order is processed), timed and answered. Taking the order before the quotes keeps a burst of market
    /// data out of its measured arrival (a gateway sharing a core with the feed sees such
    /// bursts). No syscall and no allocation (`hot_path_tests.rs`). Returns the work done (0:
    /// idle).
    #[inline]
    pub fn duty(&mut self) -> usize {
        let Gateway { md, orders, execs, venue, hops, counts: c, pending, answered, tsc, scale, t0 } = self;
        let mut work = 0;
        // A report waiting for room goes first: no order is taken before its predecessor is
        // answered (the order stream backs up instead).
        if let Some((r, position)) = *pending {
            match publish(execs, r, tsc) {
                Err(OutError::Full) => c.report_ring_full += 1,
                sent => {
                    count_report(c, sent);
                    orders.release_to(position + 1);
                    *pending = None;
                }
            }
        }
        let next = if pending.is_none() { orders.try_recv() } else { None };
        let arrival = if next.is_some() { tsc.now() } else { 0 };
        if let Some(md) = md.as_mut() {
            for _ in 0..64 {
                match md.try_recv() {
                    Some(Recv::Message(m)) => {
                        if let Ok(AnyMessage::Quote(q)) = decode(m.payload) {
                            venue.on_quote(q);
                            c.quotes += 1;
                        }
                    }
                    Some(Recv::Gap(g)) => c.md_missed += g.missed(),
                    None => break,
                }
                work += 1;
            }
        }
        match next {
            Some(Recv::Message(m)) => {
                let position = m.position;
                work += 1;
                let order = match TracedOrder::parse(m.payload) {
                    Ok(t) => {
                        hops.record(t, arrival);
                        Some(&t.order)
                    }
                    Err(_) => NewOrder::parse(m.payload).ok().inspect(|_| c.untraced += 1),
                };
                match order {
                    Some(o) if answered.already(o.client_order_id) => {
                        c.already_answered += 1;
                        orders.release_to(position + 1);
                    }
                    Some(o) => {
                        c.orders += 1;
                        let r = venue.match_order(o, scale.delta_ns(*t0, arrival));
                        match r {
                            Report::Fill(_) => c.fills += 1,
                            Report::Expired(_) => c.expired += 1,
                            Report::Reject(_) => c.rejects += 1,
                        }
                        match publish(execs, r, tsc) {
                            Err(OutError::Full) => *pending = Some((r, position)),
                            sent => {
                                count_report(c, sent);
                                crate::crash::point("gateway-after-report");
                                // Released only once answered: a gateway that dies in between
                                // leaves the order for the next one, which finds the report on
                                // the ring and does not answer it again (`answered.rs`).
                                orders.release_to(position + 1);
                            }
                        }
                    }
                    None => {
                        c.malformed += 1;
                        orders.release_to(position + 1);
                    }
                }
            }
            Some(Recv::Gap(g)) => {
                work += 1;
                c.orders_lost += g.missed();
            }
            None => {}
        }
        work
    }

    /// A quote handed over directly by the process that publishes it (instead of observing the
    /// market-data ring).
    #[inline]
    pub fn on_quote(&mut self, q: &tickbus_codecs::md::Quote) {
        self.venue.on_quote(q);
        self.counts.quotes += 1;
    }

    /// The order stream (to look at the trader when idle).
    pub fn orders(&self) -> &In {
        &self.orders
    }

    /// The report stream (idle upkeep: rdma-rc takes in its reader and ships what waited).
    pub fn execs_mut(&mut self) -> &mut Out {
        &mut self.execs
    }

    /// Whether a report still waits for room.
    pub fn pending(&self) -> bool {
        self.pending.is_some()
    }
}

/// The report ring's layout: reliable, one consumer (the trader).
pub fn report_ring(stream: u32) -> RingConfig {
    let mut cfg = RingConfig::for_payload(Mode::Reliable, stream, ExecFill::LEN.max(128), RING_SLOTS);
    cfg.max_consumers = 1;
    cfg
}

/// The standalone gateway as an [`Agent`](tickbus::agent::Agent): each duty cycle is one pass
/// of [`Gateway::duty`]; a cycle that found no work looks at the trader now and then (syscalls,
/// so never while there is work). With `exit_with_trader`, once the trader closed its order
/// stream and every order it sent is answered, it stores `stop`, which ends its runner.
pub struct GatewayAgent {
    pub g: Gateway,
    exit_with_trader: bool,
    stop: Arc<AtomicBool>,
    checks: pipeline::IdleChecks,
    /// The trader as last seen, and whether one was seen at all.
    trader: Peer,
    seen: bool,
}

impl GatewayAgent {
    pub fn new(g: Gateway, exit_with_trader: bool, stop: Arc<AtomicBool>) -> GatewayAgent {
        let checks = pipeline::IdleChecks::new(Duration::from_millis(20));
        GatewayAgent { g, exit_with_trader, stop, checks, trader: Peer::Live, seen: false }
    }

    /// How is the trader? True once it closed and everything it sent is answered (and the
    /// gateway is to end with it).
    fn look_around(&mut self) -> bool {
        let GatewayAgent { g, trader, seen, .. } = self;
        let now = g.orders.peer();
        // A trader counts once seen (live, or through its orders): an order ring left closed by
        // an earlier run is waited on, not taken for the trader's end.
        *seen |= now == Peer::Live || g.counts.orders > 0;
        if self.exit_with_trader && *seen && now == Peer::Closed && *trader == Peer::Closed && !g.pending() {
            return true; // closed before this idle cycle found its ring empty: every order was taken
        }
        if now != *trader && *seen {
            match now {
                Peer::Died { pid } => {
                    g.counts.trader_deaths += 1;
                    eprintln!(
                        "gateway: the trader (pid {pid}) died after {} orders; every order it sent is answered; waiting for a trader to take the order stream over",
                        g.counts.orders
                    );
                }
                Peer::Closed => {
                    eprintln!("gateway: the trader closed its order stream after {} orders", g.counts.orders)
                }
                Peer::Live => eprintln!("gateway: a trader is publishing orders"),
            }
            *trader = now;
        }
        false
    }
}

impl tickbus::agent::Agent for GatewayAgent {
    fn name(&self) -> &str {
        "gateway"
    }

    fn uses_clock(&self) -> bool {
        false // its duty stamps what it receives with its own reads
    }

    fn do_work(&mut self, _now: u64) -> usize {
        let work = self.g.duty();
        if work == 0 && self.checks.due() && self.look_around() {
            self.stop.store(true, Ordering::Release);
        }
        work
    }
}

pub fn run(a: GatewayArgs) -> Result<(), String> {
    let stop = pipeline::stop_flag()?;
    let t = a.streams.resolve()?;
    let o = a.streams.options(a.wait_secs, &stop);
    let mut execs = crate::streams::publisher(&t.execs, &report_ring(a.stream), &o)?;
    let md = crate::streams::subscriber(&t.md, false, &o)?;
    let orders = crate::streams::subscriber_polling(&t.orders, true, &o, &mut execs)
        .map_err(|e| format!("{e}; the orders are the trader's: start `tickbus trader --orders {}`", t.orders))?;
    if let Some(core) = a.core {
        tickbus::agent::pin_current_thread(core).map_err(|e| format!("pinning to core {core}: {e}"))?;
    }
    eprintln!("gateway: ready (md {}, orders {}, reports {})", t.md, t.orders, t.execs);
    let answered = match &t.execs.endpoint {
        tickbus::stream::Endpoint::Shm { name, .. } => Answered::on_ring(name, &o.shm)?,
        _ => Answered::default(),
    };
    if answered.len() > 0 {
        eprintln!(
            "gateway: report stream {} holds {} earlier answers (execution ids up to {}): none is answered twice",
            t.execs,
            answered.len(),
            answered.last_exec_id
        );
    }
    let mut g = Gateway::new(Some(md), orders, execs);
    g.resume(answered);
    let mut agent = GatewayAgent::new(g, a.exit_with_trader, stop.clone());
    tickbus::agent::run_until(&mut agent, a.idle.strategy(), &stop);
    let g = agent.g;
    if a.json {
        println!("{}", serde_json::to_string(&summary(&g)).map_err(|e| e.to_string())?);
    } else {
        print(&g);
    }
    Ok(())
}

/// What the gateway counted and its hops, for `--json`.
pub fn summary(g: &Gateway) -> GatewaySummary {
    GatewaySummary {
        counts: g.counts.clone(),
        timed: g.hops.timed(),
        hops_ns: g.hops.summary(),
        ttt_from_publish_ns: g.hops.ttt_from_publish(),
        crossings_ns: g.hops.crossings(),
        unordered_traces: g.hops.unordered,
        unstamped_traces: g.hops.unstamped,
        skewed_traces: g.hops.skewed,
    }
}

/// Prints what the gateway counted and its hops.
pub fn print(g: &Gateway) {
    let c = &g.counts;
    println!(
        "gateway: {} orders ({} untraced): {} filled, {} expired unfilled, {} rejected; {} reports; {} malformed; {} trader deaths",
        c.orders, c.untraced, c.fills, c.expired, c.rejects, c.reports, c.malformed, c.trader_deaths
    );
    for h in g.hops.summary().into_iter().chain(g.hops.ttt_from_publish()).chain(g.hops.crossings()) {
        println!(
            "  {:<58} p50 {:>9} ns  p99 {:>9} ns  p99.9 {:>9} ns  max {:>9} ns  ({} orders)",
            h.hop, h.p50, h.p99, h.p99_9, h.max, h.count
        );
    }
}

/// Publishes a report.
#[inline]
fn publish(execs: &mut Out, r: Report, tsc: &Tsc) -> Result<u64, OutError> {
    match r {
        Report::Fill(mut m) => execs.send(&mut m, tsc.now()),
        Report::Expired(mut m) => execs.send(&mut m, tsc.now()),
        Report::Reject(mut m) => execs.send(&mut m, tsc.now()),
    }
}
