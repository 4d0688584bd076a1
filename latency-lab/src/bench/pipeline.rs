//! The trading pipeline across real processes, as a user runs it: `tickbus exchange` (an ITCH day
//! replayed as market data, open loop, each tick stamped with its intended send time, and the
//! gateway as a second agent on the same core) and `tickbus trader` (book, decision, traced IOC
//! orders) on the other core. With three or more cores the gateway is its own process
//! (`tickbus gateway`) and each app owns a core.
//!
//! Each hop is printed beside its floor from the same invocation: the two hops that cross
//! processes (market data to the trader, orders to the gateway) beside a bare tickbus ring hop
//! across two processes on the same cores with the same payload, at the rate and count the
//! pipeline produced on that hop, open loop at their intended send times and each timed from
//! its publish; and tick-to-trade beside the chained floor (the two hops with a bare relay
//! between them, timed end to end in the same run: [`super::chain_floor`]) plus the book's own
//! apply cost.
//! The crossings beside the floors are timed from their publish too: an order's stamp is taken
//! as it is published, and the venue says in each market-data message when its publish began
//! (`FLAG_PUBLISH_LAG`). The market-data crossing is the first message of each tick's due time:
//! a second message the same exchange event made waits behind the trader's handling of the
//! first (the every-tick row holds that wait). The rows from the tick's due time also hold the
//! venue's own work (its row "tick due -> market data publish begins" shows how much), and
//! tick-to-trade runs from the due time.
use std::error::Error;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use super::cleanup::Rings;
use crate::model::pipeline::{BookWarmth, Hop, PollPasses, Round, Run, SnapshotCost, SnapshotRound};
#[cfg(feature = "rdma")]
use crate::model::pipeline::{RdmaRound, RdmaRun};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tickbus::shm::{self, ShmOptions};
use tickbus::time::{Tsc, TscScale};
use tickbus::{Mode, Recv, RingConfig, StartAt};
use tickbus_apps::summary::{ExchangeSummary, GatewaySummary, HopStats, TraderSummary};

use crate::bench::harness::{histogram, pin, spin_until};

/// Payload of a normalised market-data slot and of a traced order (what the two process
/// crossings carry).
pub const MD_PAYLOAD: usize = 64;
pub const ORDER_PAYLOAD: usize = tickbus_codecs::orders::TRACED_ORDER_LEN;

/// What to run.
pub struct Spec<'a> {
    pub tickbus: &'a Path,
    pub itch: &'a Path,
    pub rate: u64,
    /// ITCH messages to replay.
    pub messages: u64,
    pub cores: &'a [usize],
    pub ticks_per_ns: f64,
    /// Paired rounds (the pipeline beside its floors, back to back).
    pub rounds: usize,
}

/// Runs the pipeline at one rate beside its floors in `s.rounds` rounds: each round runs the
/// pipeline and its floors (the two hops', and the two chained through a bare relay) back to
/// back (the floors first in every second round, at the counts the round before produced), so a phase of the machine that slows both is seen as
/// the same ratio, not as a different verdict. The run's figures are the median round's.
pub fn run(s: &Spec<'_>) -> Result<Run, Box<dyn Error>> {
    check(s)?;
    let mds = normalised_day(s.itch)?;
    let mut back_to_back = histogram();
    let book_p50 = book_p50(&mds, s.ticks_per_ns, &mut back_to_back);
    let book_warmth = book_warmth(&mds, s.ticks_per_ns, &back_to_back)?;
    let mut runs: Vec<Run> = Vec::new();
    let mut rounds = Vec::new();
    for k in 0..s.rounds.max(1) {
        // The floors go first in every second round, at the counts of the round before.
        let early = match runs.last() {
            Some(prev) if k % 2 == 1 => Some(floors(s, (prev.published, prev.orders))?),
            _ => None,
        };
        let (ex, tr, layout) = pipeline(s, &[])?;
        let counts = (ex.md.published, tr.counts.orders);
        let floors_first = early.is_some();
        let f = match early {
            Some(f) => f,
            None => floors(s, counts)?,
        };
        let poll_pass = tr.poll_pass_ns.zip(f.md_pass).map(|(trader, floor)| PollPasses {
            trader,
            floor,
            trader_looks: tr.md_looks_per_pass,
        });
        let r = Run { book_warmth: Some(book_warmth), poll_pass, ..assemble(s, &ex, &tr, layout, &f, book_p50)? };
        let worst = r.crossings().fold(0.0f64, |m, (a, b)| m.max(a).max(b));
        let ttt = r.ttt_judged().ok_or("the gateway reported no tick-to-trade")?.p50;
        rounds.push(Round {
            ttt_p50: ttt,
            budget_p50: r.budget_p50,
            ttt_from_due_p50: r.judged_from_publish().then_some(r.hops[5].p50),
            hops_x: worst,
            md_floor_p50: f.md.0,
            order_floor_p50: f.order.0,
            chain_floor_p50: f.chain.0,
            crossings_p50: r.crossings.as_ref().map_or(0, |c| c.p50),
            chain_crossings_p50: f.chain_crossings,
            relay_span_p50: f.relay_span,
            floors_first,
            backlog: r.backlog.clone(),
            poll_pass,
        });
        eprintln!(
            "latency-lab: pipeline at {} msg/s, round {}: tick-to-trade p50 {} ns against {} ns; worst crossing {:.2}x its floor{}",
            crate::model::rate_name(s.rate),
            k + 1,
            ttt,
            r.budget_p50,
            worst,
            if r.backlog.is_some() { " (backlogged)" } else { "" }
        );
        runs.push(r);
    }
    // The round shown: the median tick-to-trade ratio of the steady rounds whose chain held,
    // else of the steady ones, else of all (every round backlogged).
    let steady = |i: &usize| runs[*i].backlog.is_none();
    let held: Vec<usize> = (0..runs.len()).filter(|i| steady(i) && !rounds[*i].chain_broken()).collect();
    let mut pick = if !held.is_empty() {
        held
    } else if (0..runs.len()).any(|i| steady(&i)) {
        (0..runs.len()).filter(steady).collect()
    } else {
        (0..runs.len()).collect()
    };
    let x = |i: usize| rounds[i].ttt_p50 as f64 / rounds[i].budget_p50.max(1) as f64;
    pick.sort_by(|&a, &b| x(a).total_cmp(&x(b)));
    let mut shown = runs.swap_remove(pick[pick.len() / 2]);
    shown.rounds = rounds;
    Ok(shown)
}

fn check(s: &Spec<'_>) -> Result<(), Box<dyn Error>> {
    if s.cores.len() < 2 {
        return Err("the pipeline needs two cores at least (--cores)".into());
    }
    if !s.tickbus.is_file() {
        return Err(format!(
            "{} not found: build it (`cargo build --release -p tickbus-apps`; tools/lab.sh does) or give --tickbus",
            s.tickbus.display()
        )
        .into());
    }
    Ok(())
}

/// A floor's (p50, p99), ns.
type P50P99 = (u64, u64);

/// One round's floors.
struct Floors {
    /// The two hop floors, (p50, p99) ns each.
    md: P50P99,
    order: P50P99,
    /// The two chained through a bare relay, timed end to end ([`super::chain_floor`]), and
    /// the p50 of its two crossings alone per order.
    chain: P50P99,
    chain_crossings: u64,
    /// The relay's own span's p50 (its receive to its publish, ns).
    relay_span: u64,
    /// The market-data floor reader's empty poll (median ns, if timed).
    md_pass: Option<u64>,
}

/// The two process-crossing hops' floors, (p50, p99) each: the same payloads between the same
/// cores, at the rates and counts the pipeline produced (market data: the normalised messages
/// of the replay's span; orders: what the trader sent over it); and the two as one chain, the
/// relay answering the same share of the market data as the trader did.
fn floors(s: &Spec<'_>, (published, orders): (u64, u64)) -> Result<Floors, Box<dyn Error>> {
    let span = s.messages as f64 / s.rate as f64;
    // (At least 100 messages, over no longer than the replay's span.)
    let count = |n: u64| n.clamp(100, 2_000_000);
    let at = |n: u64| ((n.max(100) as f64 / span) as u64).max(1);
    let gateway_core = if s.cores.len() >= 3 { s.cores[2] } else { s.cores[0] };
    let (md, md_pass) =
        hop_floor(MD_PAYLOAD, Mode::Lossy, at(published), count(published), (s.cores[0], s.cores[1]), s.ticks_per_ns)?;
    let (order, _) = hop_floor(
        ORDER_PAYLOAD,
        Mode::Reliable,
        at(orders),
        count(orders),
        (s.cores[1], gateway_core),
        s.ticks_per_ns,
    )?;
    let every = (published as f64 / orders.max(1) as f64).round().max(1.0) as u64;
    let chain = super::chain_floor::chain_floor(
        at(published),
        count(published),
        every,
        (s.cores[0], s.cores[1], gateway_core),
        s.ticks_per_ns,
    )?;
    if chain.missed > 0 {
        eprintln!(
            "latency-lab: the chained floor's relay lost {} market-data slots (lapped while its core was away); its orders are timed",
            chain.missed
        );
    }
    Ok(Floors {
        md,
        order,
        chain: (chain.p50, chain.p99),
        chain_crossings: chain.crossings_p50,
        relay_span: chain.relay_span_p50,
        md_pass,
    })
}

/// One round's figures from the apps' summaries and the floors measured beside them.
fn assemble(
    s: &Spec<'_>,
    ex: &ExchangeSummary,
    tr: &TraderSummary,
    layout: String,
    f: &Floors,
    book: BookP50,
) -> Result<Run, Box<dyn Error>> {
    let (md_floor, order_floor) = (f.md, f.order);
    let gw = ex.gateway.as_ref().ok_or("the exchange ran its gateway yet printed no gateway summary")?;
    let mut hops: Vec<Hop> = gw.hops_ns.iter().map(to_hop).collect();
    if hops.len() != 6 {
        return Err(format!("the gateway reported {} hops, not 6", hops.len()).into());
    }
    // The crossings beside their floors: market data from its publish when the venue said when
    // that began (the floor's clock starts at its publish too), else from the tick's due time;
    // orders from their publish. Only the rows judged carry a floor.
    let mut from_publish = tr.publish_hop_ns.as_ref().map(to_hop);
    match from_publish.as_mut() {
        Some(h) => beside(h, md_floor),
        None => beside(&mut hops[0], md_floor),
    }
    beside(&mut hops[4], order_floor);
    let every_tick = to_hop(&tr.tick_hop_ns);
    let budget_p50 = f.chain.0 + book.top_movers + 100;
    let mut r = Run {
        rate: s.rate,
        layout,
        ttt_met: false,
        ttt_from_publish: gw.ttt_from_publish_ns.as_ref().map(to_hop),
        hops,
        published: ex.md.published,
        ticks: tr.counts.ticks,
        ticks_missed: tr.counts.md_missed,
        orders: tr.counts.orders,
        reports: tr.counts.reports,
        every_tick,
        from_publish,
        feed: to_hop(&ex.feed_ns),
        book_p50: book.top_movers,
        book_all_p50: Some(book.all),
        book_warmth: None,
        poll_pass: None,
        budget_p50,
        chain_floor: Some(f.chain),
        crossings: gw.crossings_ns.as_ref().map(to_hop),
        chain_crossings_p50: Some(f.chain_crossings),
        hops_met: false,
        backlog: ex.md.backlog(s.rate as f64),
        rounds: Vec::new(),
    };
    let met = r.crossings().all(|(a, b)| a <= 1.15 && b <= 1.15);
    r.hops_met = met;
    r.ttt_met = r.ttt_judged().is_some_and(|h| h.p50 <= budget_p50);
    Ok(r)
}

/// Puts hop `h` beside its floor `f` (p50, p99): the floor and the two ratios.
fn beside(h: &mut Hop, f: P50P99) {
    h.floor = Some(f);
    h.x_floor = Some((h.p50 as f64 / f.0.max(1) as f64, h.p99 as f64 / f.1.max(1) as f64));
}

/// The venue's publish latency with its whole-book snapshot maker (`--snapshots`, `maker`,
/// every `every_secs`) and without, in `s.rounds` paired rounds (which first alternating),
/// each venue with its trader as in the pipeline.
pub fn snapshot_cost(s: &Spec<'_>, maker: &str, every_secs: f64) -> Result<SnapshotCost, Box<dyn Error>> {
    check(s)?;
    let pct = |h: &HopStats| (h.p50, h.p99, h.p99_9);
    let mut rounds = Vec::new();
    for k in 0..s.rounds.max(1) {
        let ring = format!("lab-snap-{}-{k}", std::process::id());
        let every = every_secs.to_string();
        let snap_args =
            ["--snapshots", &format!("shm:{ring}"), "--snapshot-every-secs", &every, "--snapshot-maker", maker];
        let with_first = k % 2 == 1;
        let mut without = None;
        if !with_first {
            without = Some(pipeline(s, &[])?.0);
        }
        let with = {
            let _ring = Rings::new(&[&ring]);
            pipeline(s, &snap_args)
        }?
        .0;
        let without = match without {
            Some(w) => w,
            None => pipeline(s, &[])?.0,
        };
        let made =
            with.snapshots.as_ref().ok_or("the exchange ran with --snapshots yet printed no snapshot summary")?;
        let backlog = match (without.md.backlog(s.rate as f64), with.md.backlog(s.rate as f64)) {
            (None, None) => None,
            (a, b) => Some(
                [a.map(|a| format!("without snapshots: {a}")), b.map(|b| format!("with snapshots: {b}"))]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
        };
        let r = SnapshotRound {
            without: pct(&without.feed_ns),
            with: pct(&with.feed_ns),
            snapshots: made.snapshots,
            tap_lost: made.tap_lost,
            with_first,
            backlog,
        };
        eprintln!(
            "latency-lab: snapshot cost at {} msg/s, round {}: publish p99 {} ns with {} snapshots, {} ns without{}",
            crate::model::rate_name(s.rate),
            k + 1,
            r.with.1,
            r.snapshots,
            r.without.1,
            if r.backlog.is_some() { " (backlogged)" } else { "" }
        );
        rounds.push(r);
    }
    Ok(SnapshotCost { rate: s.rate, maker: maker.into(), every_secs, rounds })
}

/// A hop as an app's summary reports it, before the lab adds its floor.
pub(super) fn to_hop(h: &HopStats) -> Hop {
    Hop {
        name: h.hop.clone(),
        count: h.count,
        p50: h.p50,
        p99: h.p99,
        p99_9: h.p99_9,
        max: h.max,
        floor: None,
        x_floor: None,
    }
}

/// Runs the apps; returns the exchange's summary (with the gateway's), the trader's, and the
/// layout.
/// `exchange` adds to the exchange's arguments.
fn pipeline(s: &Spec<'_>, exchange: &[&str]) -> Result<(ExchangeSummary, TraderSummary, String), Box<dyn Error>> {
    let tag = format!("lab-pipe-{}-{}", std::process::id(), s.rate);
    let (md, orders, execs) = (format!("{tag}-md"), format!("{tag}-orders"), format!("{tag}-execs"));
    // Made before the apps: dropped after them, so the rings go on every way out.
    let _rings = Rings::new(&[&md, &orders, &execs]);
    let names = ["--md", &md, "--orders", &orders, "--execs", &execs];
    let (rate, max, itch) = (s.rate.to_string(), s.messages.to_string(), s.itch.to_str().ok_or("ITCH path not UTF-8")?);
    let split = s.cores.len() >= 3;
    let spawn = |args: &[&str], core: usize| -> Result<Kill, Box<dyn Error>> {
        let child = Command::new(s.tickbus)
            .args(args)
            .args(names)
            .args(["--core", &core.to_string(), "--json", "-q"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", s.tickbus.display()))?;
        Ok(Kill(Some(child)))
    };
    let mut ex_args = vec!["exchange", "--itch", itch, "--rate", &rate, "--max", &max];
    ex_args.extend_from_slice(exchange);
    if split {
        ex_args.push("--no-gateway");
    }
    let ex = spawn(&ex_args, s.cores[0])?;
    let gw = if split { Some(spawn(&["gateway", "--exit-with-trader"], s.cores[2])?) } else { None };
    let tr = spawn(&["trader"], s.cores[1])?;
    // Bounded: the replay's own length, plus start-up and draining.
    let limit = Duration::from_secs_f64(s.messages as f64 / s.rate as f64 + 60.0);
    let deadline = Instant::now() + limit;
    let tr: TraderSummary = tr.finish("trader", deadline)?;
    let ex: ExchangeSummary = ex.finish("exchange", deadline)?;
    let (ex, layout) = match gw {
        Some(g) => {
            let mut ex = ex;
            ex.gateway = Some(g.finish("gateway", deadline)?);
            let c = s.cores;
            (ex, format!("exchange (core {}) | trader (core {}) | gateway (core {})", c[0], c[1], c[2]))
        }
        None => (ex, format!("exchange+gateway (core {}) | trader (core {})", s.cores[0], s.cores[1])),
    };
    Ok((ex, tr, layout))
}

/// A child process killed if the run is abandoned.
pub(super) struct Kill(pub(super) Option<Child>);

/// Starts this binary with `args` (a hidden subcommand: a floor's other side) and waits for the
/// "ready" it prints once its rings are open; `what` names it in the error.
pub(super) fn spawn_ready(args: &[&str], what: &str) -> Result<(Kill, BufReader<ChildStdout>), Box<dyn Error>> {
    let mut child = Kill(Some(
        Command::new(std::env::current_exe()?).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?,
    ));
    let mut out = BufReader::new(child.0.as_mut().and_then(|c| c.stdout.take()).ok_or("no stdout")?);
    let mut line = String::new();
    out.read_line(&mut line)?;
    if line.trim() != "ready" {
        // Dropping `child` kills it.
        return Err(format!("{what} did not start: {line}").into());
    }
    Ok((child, out))
}

impl Kill {
    /// Waits (bounded) for the app to end, and parses the JSON summary it printed.
    /// Waits for the app to exit and reads its `--json` summary (its last line) as `T`: a field
    /// the app renamed is an error here, not a 0.
    pub(super) fn finish<T: serde::de::DeserializeOwned>(
        mut self,
        app: &str,
        deadline: Instant,
    ) -> Result<T, Box<dyn Error>> {
        let mut child = self.0.take().expect("a child");
        loop {
            if let Some(status) = child.try_wait()? {
                let out = child.wait_with_output()?;
                let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
                if !status.success() {
                    return Err(format!("tickbus {app} failed ({status}): {stderr}").into());
                }
                let last = stdout.lines().last().unwrap_or("");
                return serde_json::from_str(last)
                    .map_err(|e| format!("tickbus {app} printed no JSON summary ({e}): {stdout} {stderr}").into());
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let out = child.wait_with_output()?;
                return Err(format!(
                    "tickbus {app} did not finish in time (killed): {}",
                    String::from_utf8_lossy(&out.stderr)
                )
                .into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(feature = "xdp")]
impl Kill {
    /// Waits up to `wait` for the app to end by itself; if it has not, asks it to stop (SIGTERM:
    /// the apps then end their loop and print their summary). True if it had to be asked.
    pub(super) fn stop_after(&mut self, wait: Duration) -> bool {
        let Some(c) = self.0.as_mut() else { return false };
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if !matches!(c.try_wait(), Ok(None)) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: kill(2) on our own child's pid, not yet reaped (try_wait said it runs).
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
        true
    }
}

impl Drop for Kill {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The lab's day as the trader gets it: its first 500,000 ITCH messages, normalised.
fn normalised_day(itch: &Path) -> Result<Vec<Vec<u8>>, Box<dyn Error>> {
    use tickbus_codecs::normalize::Normalizer;
    let file = std::fs::File::open(itch).map_err(|e| format!("{}: {e}", itch.display()))?;
    // SAFETY: the lab's own ITCH file, not changed while mapped (a file truncated under the map
    // would fault, never be misread as valid memory).
    let map = unsafe { memmap2::Mmap::map(&file)? };
    let mut norm = Normalizer::new();
    let mut mds: Vec<Vec<u8>> = Vec::new();
    for f in tickbus_codecs::itch::frames(&map).take(500_000) {
        norm.apply(&f?.message, &mut |m| mds.push(m.as_bytes().to_vec()));
    }
    Ok(mds)
}

/// One pass of the day's messages `mds` over a fresh book, reserved and touched as the
/// trader's is (`Strategy::pre_touch`), each message after its wait and TSC-timed (a spaced
/// one from when it was due). Records every message in `all`, those that moved a top in
/// `movers`, and those among the first [`APART_MESSAGES`] that moved a top in `top`; a spaced
/// pass applies only the first [`APART_MESSAGES`].
fn book_pass(
    mds: &[Vec<u8>],
    wait: Wait,
    ticks_per_ns: f64,
    all: &mut Histogram<u64>,
    (top, movers): (&mut Histogram<u64>, &mut Histogram<u64>),
) {
    use tickbus_codecs::book::{HotStocks, OrderBook};
    let (tsc, scale) = (Tsc::new(), TscScale { ticks_per_ns });
    let apart = (ticks_per_ns * APART_NS as f64) as u64;
    let mut book = OrderBook::with_capacity(1 << 20, 8192);
    book.pre_touch();
    let mut hot = HotStocks::default();
    let take = if wait == Wait::None { mds.len() } else { APART_MESSAGES };
    for (i, m) in mds.iter().take(take).enumerate() {
        let Ok(msg) = tickbus_codecs::decode(m) else { continue };
        let t0 = if wait == Wait::None {
            tsc.now()
        } else {
            let due = tsc.now() + apart;
            while tsc.now() < due {
                if wait == Wait::Warmed {
                    hot.warm(&book, tickbus::cache::prefetch_l2);
                }
                std::hint::spin_loop();
            }
            due
        };
        let r = std::hint::black_box(book.apply_md(&msg));
        let ns = scale.delta_ns(t0, tsc.now()).max(1);
        all.saturating_record(ns);
        if let Ok(Some(u)) = r {
            hot.note(u.locate);
            if u.top_changed {
                movers.saturating_record(ns);
                if i < APART_MESSAGES {
                    top.saturating_record(ns);
                }
            }
        }
    }
}

/// The order book's p50 cost (in process, back to back, as the trader's book applies them):
/// over the messages of the day that move a top of book, the budget's figure, and over every
/// message. Tick-to-trade is timed per order, and the trader sends one only on a message that
/// moved a top, so the book's work inside it is that of those messages: they cost more than the
/// rest (a level's best changes), and the p50 over every message left that out. The pass also
/// records, in `top`, the messages among the first [`APART_MESSAGES`] that moved a top (for
/// [`book_warmth`]).
fn book_p50(mds: &[Vec<u8>], ticks_per_ns: f64, top: &mut Histogram<u64>) -> BookP50 {
    let (mut all, mut movers) = (histogram(), histogram());
    book_pass(mds, Wait::None, ticks_per_ns, &mut all, (top, &mut movers));
    let p50 = |h: &Histogram<u64>| if h.is_empty() { 0 } else { h.value_at_quantile(0.5) };
    BookP50 { top_movers: p50(&movers), all: p50(&all) }
}

/// [`book_p50`]'s two figures (ns).
#[derive(Debug, Clone, Copy)]
struct BookP50 {
    /// Over the messages that moved a top of book: the tick-to-trade budget's.
    top_movers: u64,
    /// Over every message of the day.
    all: u64,
}

/// The book's cost on the messages among the day's first [`APART_MESSAGES`] that move a top
/// of book: back to back (`back_to_back`, recorded by [`book_p50`]'s pass), and [`APART_NS`]
/// apart (as ticks come at 100k msg/s) with the book left alone between them or warmed
/// meanwhile as the trader's idle cycles warm it (`HotStocks`, prefetched). A spaced message
/// is timed from when it was due, so a warming step it had to wait for counts (and so does the
/// wait loop's overshoot, up to one spin-loop pause: part of what "apart" costs over back to
/// back is that, in both spaced kinds alike). The wait loop warms on every turn, where the
/// trader warms once per idle duty cycle, which also polls its rings. The two spaced kinds run
/// twice each, in the order apart, warmed, warmed, apart.
fn book_warmth(
    mds: &[Vec<u8>],
    ticks_per_ns: f64,
    back_to_back: &Histogram<u64>,
) -> Result<BookWarmth, Box<dyn Error>> {
    let (mut cold, mut warmed, mut unused) = (histogram(), histogram(), histogram());
    for wait in [Wait::Idle, Wait::Warmed, Wait::Warmed, Wait::Idle] {
        let into = if wait == Wait::Idle { &mut cold } else { &mut warmed };
        book_pass(mds, wait, ticks_per_ns, &mut unused, (into, &mut histogram()));
    }
    let p50_p90 = |h: &Histogram<u64>| (h.value_at_quantile(0.5), h.value_at_quantile(0.9));
    let warmth = BookWarmth {
        apart_ns: APART_NS,
        messages: back_to_back.len(),
        back_to_back: p50_p90(back_to_back),
        apart: p50_p90(&cold),
        warmed: p50_p90(&warmed),
    };
    // The same messages on the same book: the same ones move a top in every pass.
    if (cold.len(), warmed.len()) != (2 * warmth.messages, 2 * warmth.messages) {
        return Err(format!(
            "the book's spaced passes moved a top {} and {} times, not twice {}",
            cold.len(),
            warmed.len(),
            warmth.messages
        )
        .into());
    }
    Ok(warmth)
}

/// How far apart [`book_warmth`]'s spaced messages come (100k msg/s), and how many it applies so.
const APART_NS: u64 = 10_000;
const APART_MESSAGES: usize = 30_000;

/// What [`book_pass`] does between two messages.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    None,
    Idle,
    Warmed,
}

/// A bare tickbus ring hop across two processes: this process publishes `count` messages of
/// `payload` bytes at `rate` from core `cores.0`, each stamped with the TSC as its publish
/// begins (at its intended send time, or as soon after as the publisher gets there); a
/// child (`latency-lab __hop-floor`) on `cores.1` reads them. Returns its (p50, p99) in ns and
/// the median ns of the reader's empty poll (its loop's whole pass, as the trader's is timed).
pub fn hop_floor(
    payload: usize,
    mode: Mode,
    rate: u64,
    count: u64,
    cores: (usize, usize),
    ticks_per_ns: f64,
) -> Result<(P50P99, Option<u64>), Box<dyn Error>> {
    let name = format!("lab-hop-{}-{payload}-{rate}", std::process::id());
    let opts = ShmOptions::default();
    let _ring = Rings::new(&[&name]);
    let slots = if mode == Mode::Lossy { 1 << 16 } else { 4096 };
    let cfg = RingConfig { ticks_per_ns, ..RingConfig::for_payload(mode, 9, payload, slots) };
    let mut p = shm::open_publisher(&name, &cfg, &opts)?;
    let (count_arg, core_arg) = (count.to_string(), cores.1.to_string());
    let mut args = vec!["__hop-floor", "--ring", &name, "--count", &count_arg, "--core", &core_arg];
    if mode == Mode::Reliable {
        args.push("--consumer");
    }
    let (mut child, mut out) = spawn_ready(&args, "the hop floor's reader")?;
    let mut line = String::new();
    let publisher = std::thread::scope(|sc| {
        sc.spawn(|| -> Result<(), String> {
            pin(cores.0).map_err(|e| e.to_string())?;
            let tsc = Tsc::new();
            let period = ticks_per_ns * 1e9 / rate as f64;
            let start = tsc.now() + (ticks_per_ns * 1e6) as u64;
            let mut buf = vec![0u8; payload];
            let give_up = Instant::now() + Duration::from_secs_f64(count as f64 / rate as f64 + 30.0);
            for i in 0..count {
                let due = start + (i as f64 * period) as u64;
                spin_until(&tsc, due);
                // Timed from its publish, as the pipeline's crossings are: the publisher's own
                // lateness (the spin's overshoot, a preemption) is not the hop's.
                buf[..8].copy_from_slice(&tsc.now().to_le_bytes());
                while p.publish(&buf).is_err() {
                    if Instant::now() >= give_up {
                        return Err("the hop floor's reader stopped taking messages".into());
                    }
                    std::hint::spin_loop();
                }
            }
            Ok(())
        })
        .join()
    })
    .map_err(|_| "the hop floor's publisher panicked")?;
    publisher?;
    line.clear();
    out.read_line(&mut line)?;
    let child = child.0.take().expect("a child");
    let status = child.wait_with_output()?;
    drop(p);
    let v: FloorReading = serde_json::from_str(line.trim())
        .map_err(|e| format!("the hop floor's reader failed ({}): {e}: {line}", status.status))?;
    Ok(((v.p50, v.p99), v.poll_pass_ns))
}

/// What the hop floor's reading process prints (one JSON line).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FloorReading {
    p50: u64,
    p99: u64,
    count: u64,
    missed: u64,
    /// The median ns of one empty poll, whole ([`tickbus::agent::PollPeriod`]).
    poll_pass_ns: Option<u64>,
}

/// The hop floor's reading side (`latency-lab __hop-floor`): prints "ready", reads `count`
/// messages (or gives up after the ring stays quiet for 10 s) and prints its percentiles.
pub fn hop_floor_reader(ring: &str, count: u64, consumer: bool, core: usize) -> Result<(), Box<dyn Error>> {
    let opts = ShmOptions::default();
    let mut s =
        if consumer { shm::open_consumer(ring, &opts)? } else { shm::open_observer(ring, StartAt::Latest, &opts)? };
    pin(core)?;
    let scale = TscScale { ticks_per_ns: s.config().ticks_per_ns };
    let tsc = Tsc::new();
    let mut h = histogram();
    println!("ready");
    let (mut seen, mut missed) = (0u64, 0u64);
    // Quiet since (checked every 64k empty polls, so the clock stays out of the measured loop).
    let mut quiet_since: Option<Instant> = None;
    let mut spins = 0u32;
    // Timed as the trader times its empty duty cycles, so the two loops' passes compare.
    let mut poll = tickbus::agent::PollPeriod::new();
    while seen + missed < count {
        match s.try_recv() {
            Some(Recv::Message(m)) => {
                let due = u64::from_le_bytes(m.payload[..8].try_into()?);
                h.saturating_record(scale.delta_ns(due, tsc.now()).max(1));
                seen += 1;
                quiet_since = None;
                poll.busy();
            }
            Some(Recv::Gap(g)) => {
                missed += g.missed();
                poll.busy();
            }
            None => {
                poll.empty(&tsc);
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(1 << 16) {
                    let since = *quiet_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > Duration::from_secs(10) {
                        return Err(format!("the ring went quiet after {seen} messages").into());
                    }
                }
                std::hint::spin_loop();
            }
        }
    }
    let q = |q: f64| h.value_at_quantile(q);
    let poll_pass_ns = poll.median_ns(scale.ticks_per_ns).map(|ns| ns.round() as u64);
    println!(
        "{}",
        serde_json::to_string(&FloorReading { p50: q(0.5), p99: q(0.99), count: seen, missed, poll_pass_ns })?
    );
    Ok(())
}

/// Where `tickbus` is by default: beside this binary (same target folder).
pub fn default_tickbus() -> PathBuf {
    std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join("tickbus"))).unwrap_or_else(|| "tickbus".into())
}

/// The RDMA pipeline's rounds (`latency-lab rdma --pipeline-*`).
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
#[derive(Debug, Clone, Copy)]
pub struct RdmaPipeline {
    pub rounds: usize,
    /// ITCH messages per second.
    pub rate: u64,
    /// ITCH messages per round.
    pub messages: u64,
}

/// `pipe.rounds` rounds of: perftest UD and RC one-way, then the pipeline over RDMA at
/// `pipe.rate` (`pipe.messages` ITCH messages), exchange on `devices.0` and trader on
/// `devices.1`.
#[cfg(feature = "rdma")]
pub fn rdma_rounds(
    tickbus: &Path,
    itch: &Path,
    devices: (&str, &str),
    pipe: &RdmaPipeline,
    perftest_iters: u64,
    ticks_per_ns: f64,
) -> Result<RdmaRun, Box<dyn Error>> {
    let RdmaPipeline { rounds, rate, messages } = *pipe;
    let book_p50 = book_p50(&normalised_day(itch)?, ticks_per_ns, &mut histogram()).top_movers;
    let mut out = Vec::new();
    let mut hops = Vec::new();
    for round in 0..rounds {
        // One at a time (for reference), then the same-load floor: both at once, as the
        // pipeline's two hops run.
        let ud_alone = crate::bench::perftest::one_way(
            "ib_send_lat",
            &["-c", "UD"],
            devices,
            MD_PAYLOAD,
            perftest_iters,
            ticks_per_ns,
        )?
        .0;
        let rc_alone =
            crate::bench::perftest::one_way("ib_write_lat", &[], devices, ORDER_PAYLOAD, perftest_iters, ticks_per_ns)?
                .0;
        let (ud, rc) = crate::bench::perftest::one_way_together(
            ("ib_send_lat", &["-c", "UD"], MD_PAYLOAD),
            ("ib_write_lat", &[], ORDER_PAYLOAD),
            devices,
            perftest_iters,
            ticks_per_ns,
        )?;
        let (ud, rc) = (ud.0, rc.0);
        let (ex, tr) = rdma_pipeline(tickbus, itch, devices, rate, messages, round)?;
        let gw = ex.gateway.as_ref().ok_or("the exchange (rdma) printed no gateway summary")?;
        let h: Vec<Hop> = gw.hops_ns.iter().map(to_hop).collect();
        let (ttt, from_due_p50) = judged_ttt(gw)?;
        let budget = ud.saturating_add(rc).saturating_add(book_p50);
        out.push(RdmaRound {
            ttt_p50: ttt.p50,
            ttt_p99: ttt.p99,
            ttt_from_due_p50: from_due_p50,
            ud_one_way: ud,
            rc_one_way: rc,
            alone: Some((ud_alone, rc_alone)),
            budget,
            ratio: ttt.p50 as f64 / budget.max(1) as f64,
            ticks: tr.counts.ticks,
            orders: tr.counts.orders,
            backlog: ex.md.backlog(rate as f64),
        });
        eprintln!(
            "latency-lab: rdma pipeline round {}: tick-to-trade p50 {} ns against UD {ud} + RC {rc} (perftest's two at once; one at a time {ud_alone} + {rc_alone}) + book {book_p50} ns",
            round + 1,
            ttt.p50
        );
        hops = h;
    }
    let mut r: Vec<f64> = out.iter().map(|r| r.ratio).collect();
    r.sort_by(f64::total_cmp);
    let ratio = (r[r.len() / 2], r[0], r[r.len() - 1]);
    Ok(RdmaRun { rate, rounds: out, book_p50, hops, ratio })
}

/// The tick-to-trade row an RDMA round judges, as on shm: from the market data's publish when
/// the gateway timed every order so (the perftest floors start at their post, and the venue's
/// work before is its own), with the p50 from the tick's due time beside it; else from the due
/// time.
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
fn judged_ttt(gw: &GatewaySummary) -> Result<(Hop, Option<u64>), Box<dyn Error>> {
    let from_due = gw.hops_ns.get(5).map(to_hop).ok_or("the gateway reported no tick-to-trade")?;
    let from_publish = gw.ttt_from_publish_ns.as_ref().map(to_hop);
    let (ttt, is_from_publish) = crate::model::pipeline::pick_ttt(&from_due, from_publish.as_ref());
    Ok((ttt.clone(), is_from_publish.then_some(from_due.p50)))
}

/// One run of `tickbus exchange` and `tickbus trader` over RDMA; returns their summaries.
#[cfg(feature = "rdma")]
fn rdma_pipeline(
    tickbus: &Path,
    itch: &Path,
    devices: (&str, &str),
    rate: u64,
    messages: u64,
    round: usize,
) -> Result<(ExchangeSummary, TraderSummary), Box<dyn Error>> {
    let port = |k: u16| format!("127.0.0.1:{}", 47400 + 10 * round as u16 + k);
    let net = [
        "--md".to_owned(),
        format!("ud-mcast://239.77.55.{}/1?recovery={}", round + 1, port(1)),
        "--orders".into(),
        format!("rdma-rc://{}/2", port(2)),
        "--execs".into(),
        format!("rdma-rc://{}/3", port(3)),
        "--token".into(),
        "latency-lab".into(),
        "--json".into(),
        "-q".into(),
    ];
    let spawn = |args: Vec<String>| -> Result<Kill, Box<dyn Error>> {
        let c = Command::new(tickbus).args(args).args(&net).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        Ok(Kill(Some(c)))
    };
    let itch = itch.to_str().ok_or("ITCH path not UTF-8")?.to_owned();
    let ex = spawn(vec![
        "exchange".into(),
        "--itch".into(),
        itch,
        "--rate".into(),
        rate.to_string(),
        "--max".into(),
        messages.to_string(),
        "--device".into(),
        devices.0.into(),
    ])?;
    let tr = spawn(vec!["trader".into(), "--md-quiet-secs".into(), "3".into(), "--device".into(), devices.1.into()])?;
    let deadline = Instant::now() + Duration::from_secs_f64(messages as f64 / rate as f64 + 180.0);
    let tr = tr.finish("trader (rdma)", deadline)?;
    let ex = ex.finish("exchange (rdma)", deadline)?;
    Ok((ex, tr))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(name: &str, p50: u64) -> HopStats {
        HopStats { hop: name.into(), count: 10, p50, p99: 2 * p50, p99_9: 3 * p50, max: 4 * p50 }
    }

    /// A spec at 100k msg/s on cores 0 and 1, one tick a ns, for `assemble`.
    fn spec() -> Spec<'static> {
        Spec {
            tickbus: Path::new("tickbus"),
            itch: Path::new("day.itch"),
            rate: 100_000,
            messages: 10,
            cores: &[0, 1],
            ticks_per_ns: 1.0,
            rounds: 1,
        }
    }

    /// The tests' floors: both hops 200/400 ns, the chain 450/900 (its crossings 430).
    fn floors() -> Floors {
        Floors {
            md: (200, 400),
            order: (200, 400),
            chain: (450, 900),
            chain_crossings: 430,
            relay_span: 20,
            md_pass: None,
        }
    }

    /// The book's two p50s in the tests: on the messages that move a top, and over all.
    const BOOK: BookP50 = BookP50 { top_movers: 50, all: 30 };

    /// The book's pass puts in `movers` exactly the messages that moved a top of book (the
    /// ones the trader sends orders on), every message in `all`: a worse bid moves no top.
    #[test]
    fn the_books_budget_figure_is_over_the_messages_that_moved_a_top() {
        use tickbus_codecs::md::OrderAdd;
        use tickbus_codecs::{Message, Side, PRICE_SCALE};
        use zerocopy::IntoBytes;
        let add = |id: u64, side: Side, price: i64| {
            let mut a = OrderAdd::new();
            (a.instrument_id, a.order_id, a.side, a.price, a.qty) = (2, id, side as u8, price * PRICE_SCALE, 100);
            a.as_bytes().to_vec()
        };
        // A first bid (a top), a worse one (none), a better one (a top), a first offer (a top).
        let day = [add(1, Side::Buy, 10), add(2, Side::Buy, 9), add(3, Side::Buy, 11), add(4, Side::Sell, 20)];
        let (mut all, mut top, mut movers) = (histogram(), histogram(), histogram());
        book_pass(&day, Wait::None, 1.0, &mut all, (&mut top, &mut movers));
        assert_eq!((all.len(), movers.len(), top.len()), (4, 3, 3));
    }

    /// The market-data crossing beside its floor is the trader's hop from each message's publish
    /// when the venue said when that began, else the per-order hop from the due time; orders are
    /// judged from their publish either way; only the rows judged carry a floor.
    #[test]
    fn the_market_data_crossing_is_judged_from_its_publish_when_the_venue_said_when_that_began() {
        let spec = spec();
        let ex = ExchangeSummary {
            gateway: Some(GatewaySummary {
                hops_ns: [300, 100, 30, 20, 230, 700].iter().map(|&p| hop("hop", p)).collect(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let floors = floors();
        // From the due time only (a trader that got no lag): the per-order hop at 1.5x fails.
        let tr = TraderSummary { tick_hop_ns: hop("tick", 320), ..Default::default() };
        let r = assemble(&spec, &ex, &tr, "x".into(), &floors, BOOK).unwrap();
        assert_eq!((r.hops[0].x_floor, r.hops[4].x_floor), (Some((1.5, 1.5)), Some((1.15, 1.15))));
        assert!(r.every_tick.floor.is_none() && r.from_publish.is_none() && !r.hops_met);
        assert_eq!(r.crossings().count(), 2);
        // From the publish, 220 ns: the crossing judged is that one (1.10x), and both are met.
        let tr = TraderSummary { publish_hop_ns: Some(hop("publish", 220)), ..tr };
        let r = assemble(&spec, &ex, &tr, "x".into(), &floors, BOOK).unwrap();
        let p = r.from_publish.as_ref().expect("the hop from the publish");
        assert_eq!((p.floor, p.x_floor), (Some((200, 400)), Some((1.1, 1.1))));
        assert!(r.hops[0].floor.is_none() && r.every_tick.floor.is_none());
        assert!(r.hops_met, "{:?}", r.crossings().collect::<Vec<_>>());
        // One crossing over 1.15x at p99 fails them.
        let tr = TraderSummary { publish_hop_ns: Some(HopStats { p99: 461, ..hop("publish", 220) }), ..tr };
        assert!(!assemble(&spec, &ex, &tr, "x".into(), &floors, BOOK).unwrap().hops_met);
        // The budget starts from the chained floor (450 ns), not the hops' sum (400); the
        // book's figure in it is its p50 on the messages that move a top (50 ns), the ones
        // orders are sent on, not over every message (30 ns).
        assert_eq!(r.budget_p50, 450 + 50 + 100);
        assert_eq!((r.book_p50, r.book_all_p50), (50, Some(30)));
        // Tick-to-trade from the due time, 700 ns, is over that budget of 600.
        assert!(!r.ttt_met && r.ttt_from_publish.is_none() && r.hops[5].p50 == 700);
    }

    #[test]
    fn tick_to_trade_is_judged_from_the_market_data_publish_when_the_gateway_timed_it() {
        let spec = spec();
        let gw = |from_publish: u64| GatewaySummary {
            hops_ns: [300, 100, 30, 20, 230, 700].iter().map(|&p| hop("hop", p)).collect(),
            ttt_from_publish_ns: Some(hop("from publish", from_publish)),
            ..Default::default()
        };
        let ex = |g| ExchangeSummary { gateway: Some(g), ..Default::default() };
        let tr = TraderSummary { tick_hop_ns: hop("tick", 320), ..Default::default() };
        let floors = floors();
        // 65 ns of the venue's own work before the publish: 635 from there, over 600.
        let r = assemble(&spec, &ex(gw(635)), &tr, "x".into(), &floors, BOOK).unwrap();
        assert_eq!((r.ttt_judged().map(|h| h.p50), r.ttt_met), (Some(635), false));
        // At the budget exactly: met, though the row from the due time (700) is over it.
        let r = assemble(&spec, &ex(gw(600)), &tr, "x".into(), &floors, BOOK).unwrap();
        assert_eq!((r.ttt_judged().map(|h| h.p50), r.ttt_met, r.hops[5].p50), (Some(600), true, 700));
        assert!(r.judged_from_publish());
        // A figure from the publish that left an order out (9 of 10 timed) is not judged: the
        // row from the due time is, and it is over.
        let mut g = gw(600);
        g.ttt_from_publish_ns.as_mut().unwrap().count = 9;
        let r = assemble(&spec, &ex(g), &tr, "x".into(), &floors, BOOK).unwrap();
        assert_eq!((r.ttt_judged().map(|h| h.p50), r.ttt_met, r.judged_from_publish()), (Some(700), false, false));
        // The RDMA rounds take the same rule.
        let pick = |g: &GatewaySummary| judged_ttt(g).map(|(h, due)| (h.p50, due)).unwrap();
        assert_eq!(pick(&gw(550)), (550, Some(700)));
        let mut g = gw(550);
        g.ttt_from_publish_ns.as_mut().unwrap().count = 9;
        assert_eq!(pick(&g), (700, None));
        assert!(judged_ttt(&GatewaySummary::default()).is_err(), "no tick-to-trade row");
    }
}
