//! The trading pipeline across real processes, as a user runs it: `tickbus exchange` (an ITCH day
//! replayed as market data, open loop, each tick stamped with its intended send time, and the
//! gateway as a second agent on the same core) and `tickbus trader` (book, decision, traced IOC
//! orders) on the other core. With three or more cores the gateway is its own process
//! (`tickbus gateway`) and each app owns a core.
//!
//! Each hop is printed beside its floor from the same invocation: the two hops that cross
//! processes (market data to the trader, orders to the gateway) beside a bare tickbus ring hop
//! across two processes on the same cores with the same payload, at the rate and count the
//! pipeline produced on that hop, timed from intended send times as the pipeline is; and
//! tick-to-trade beside the chained floors plus the book's own apply cost. The floor hop starts
//! at the intended time and the message goes out at once; the pipeline's first hop also holds
//! the feed's own work (its row "tick due -> market data published" shows how much).
use std::error::Error;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tickbus::shm::{self, ShmOptions};
use tickbus::time::{Tsc, TscScale};
use tickbus::{Mode, Recv, RingConfig, StartAt};
use tickbus_apps::summary::{ExchangeSummary, HopStats, TraderSummary};

use crate::harness::{histogram, pin, spin_until};

/// Payload of a normalised market-data slot and of a traced order (what the two process
/// crossings carry).
pub const MD_PAYLOAD: usize = 64;
pub const ORDER_PAYLOAD: usize = tickbus_codecs::orders::TRACED_ORDER_LEN;

/// One hop's percentiles (ns) and, for a process crossing, its floor's and the ratios.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hop {
    pub name: String,
    pub count: u64,
    pub p50: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub max: u64,
    /// The bare ring hop's (p50, p99) at the same rate and payload, and this hop's ratios to it.
    pub floor: Option<(u64, u64)>,
    pub x_floor: Option<(f64, f64)>,
}

/// One pipeline run at one rate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub rate: u64,
    /// "exchange+gateway | trader" or "exchange | trader | gateway", with their cores.
    pub layout: String,
    pub hops: Vec<Hop>,
    /// Market-data messages published, ticks the trader saw, orders, reports.
    pub published: u64,
    pub ticks: u64,
    pub ticks_missed: u64,
    pub orders: u64,
    pub reports: u64,
    /// The exchange's own hop, over every market-data message: tick due -> published (the loop's
    /// lateness and the normalising). The trader's first hop includes it.
    pub feed: Hop,
    /// The trader's own view of the market-data hop over every tick (the gateway's rows time
    /// only the ticks that led to an order, which often queue behind the earlier messages of
    /// the same exchange event), beside the same floor.
    pub every_tick: Hop,
    /// The order book's own p50 cost per market-data message (in process, same messages).
    pub book_p50: u64,
    /// Tick-to-trade p50's budget: the two floors' p50s + the book's p50 + 100 ns.
    pub budget_p50: u64,
    /// Hops within 1.15x of their floor at p50 and p99, and tick-to-trade within its budget.
    pub hops_met: bool,
    pub ttt_met: bool,
}

/// What to run.
pub struct Spec<'a> {
    pub tickbus: &'a Path,
    pub itch: &'a Path,
    pub rate: u64,
    /// ITCH messages to replay.
    pub messages: u64,
    pub cores: &'a [usize],
    pub ticks_per_ns: f64,
}

/// Runs the pipeline at one rate, then its floors.
pub fn run(s: &Spec<'_>) -> Result<Run, Box<dyn Error>> {
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
    let book_p50 = book_cost(s.itch, s.ticks_per_ns)?;
    let (ex, tr, layout) = pipeline(s)?;
    let gw = ex.gateway.as_ref().ok_or("the exchange ran its gateway yet printed no gateway summary")?;
    // The floors, just after: the same payloads between the same cores, at the rates and counts
    // the pipeline produced (market data: the normalised messages of the replay's span; orders:
    // what the trader sent over it).
    let itch = ex.md.itch.max(1);
    let span = itch as f64 / s.rate as f64;
    let (published, orders) = (ex.md.published, tr.counts.orders);
    // (At least 100 messages, over no longer than the replay's span.)
    let count = |n: u64| n.clamp(100, 2_000_000);
    let at = |n: u64| ((n.max(100) as f64 / span) as u64).max(1);
    let gateway_core = if s.cores.len() >= 3 { s.cores[2] } else { s.cores[0] };
    let md_floor =
        hop_floor(MD_PAYLOAD, Mode::Lossy, at(published), count(published), (s.cores[0], s.cores[1]), s.ticks_per_ns)?;
    let order_floor = hop_floor(
        ORDER_PAYLOAD,
        Mode::Reliable,
        at(orders),
        count(orders),
        (s.cores[1], gateway_core),
        s.ticks_per_ns,
    )?;
    let mut hops: Vec<Hop> = gw.hops_ns.iter().map(to_hop).collect();
    if hops.len() != 6 {
        return Err(format!("the gateway reported {} hops, not 6", hops.len()).into());
    }
    for (k, f) in [(0, md_floor), (4, order_floor)] {
        let h = &mut hops[k];
        h.floor = Some((f.0, f.1));
        h.x_floor = Some((h.p50 as f64 / f.0.max(1) as f64, h.p99 as f64 / f.1.max(1) as f64));
    }
    let mut every_tick = to_hop(&tr.tick_hop_ns);
    every_tick.floor = Some(md_floor);
    every_tick.x_floor =
        Some((every_tick.p50 as f64 / md_floor.0.max(1) as f64, every_tick.p99 as f64 / md_floor.1.max(1) as f64));
    let budget_p50 = md_floor.0 + order_floor.0 + book_p50 + 100;
    let hops_met = hops.iter().filter_map(|h| h.x_floor).all(|(a, b)| a <= 1.15 && b <= 1.15);
    Ok(Run {
        rate: s.rate,
        layout,
        ttt_met: hops[5].p50 <= budget_p50,
        hops,
        published: ex.md.published,
        ticks: tr.counts.ticks,
        ticks_missed: tr.counts.md_missed,
        orders: tr.counts.orders,
        reports: tr.counts.reports,
        every_tick,
        feed: to_hop(&ex.feed_ns),
        book_p50,
        budget_p50,
        hops_met,
    })
}

/// A hop as an app's summary reports it, before the lab adds its floor.
fn to_hop(h: &HopStats) -> Hop {
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
fn pipeline(s: &Spec<'_>) -> Result<(ExchangeSummary, TraderSummary, String), Box<dyn Error>> {
    let tag = format!("lab-pipe-{}-{}", std::process::id(), s.rate);
    let (md, orders, execs) = (format!("{tag}-md"), format!("{tag}-orders"), format!("{tag}-execs"));
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
    for name in [&md, &orders, &execs] {
        let _ = shm::remove(name, &ShmOptions::default());
    }
    Ok((ex, tr, layout))
}

/// A child process killed if the run is abandoned.
struct Kill(Option<Child>);

impl Kill {
    /// Waits (bounded) for the app to end, and parses the JSON summary it printed.
    /// Waits for the app to exit and reads its `--json` summary (its last line) as `T`: a field
    /// the app renamed is an error here, not a 0.
    fn finish<T: serde::de::DeserializeOwned>(mut self, app: &str, deadline: Instant) -> Result<T, Box<dyn Error>> {
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

impl Drop for Kill {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The order book's p50 cost per normalised message of the day (in process, TSC-timed), as the
/// trader's book applies them.
fn book_cost(itch: &Path, ticks_per_ns: f64) -> Result<u64, Box<dyn Error>> {
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
    let mut book = tickbus_codecs::book::OrderBook::with_capacity(1 << 20, 8192);
    let (tsc, scale) = (Tsc::new(), TscScale { ticks_per_ns });
    let mut h = histogram();
    for m in &mds {
        let Ok(msg) = tickbus_codecs::decode(m) else { continue };
        let t0 = tsc.now();
        let _ = std::hint::black_box(book.apply_md(&msg));
        h.saturating_record(scale.delta_ns(t0, tsc.now()).max(1));
    }
    Ok(if h.is_empty() { 0 } else { h.value_at_quantile(0.5) })
}

/// A bare tickbus ring hop across two processes: this process publishes `count` messages of
/// `payload` bytes at `rate` from core `cores.0`, each stamped with its intended send time; a
/// child (`latency-lab __hop-floor`) on `cores.1` reads them. Returns its (p50, p99) in ns.
pub fn hop_floor(
    payload: usize,
    mode: Mode,
    rate: u64,
    count: u64,
    cores: (usize, usize),
    ticks_per_ns: f64,
) -> Result<(u64, u64), Box<dyn Error>> {
    let name = format!("lab-hop-{}-{payload}-{rate}", std::process::id());
    let opts = ShmOptions::default();
    let slots = if mode == Mode::Lossy { 1 << 16 } else { 4096 };
    let cfg = RingConfig { ticks_per_ns, ..RingConfig::for_payload(mode, 9, payload, slots) };
    let mut p = shm::open_publisher(&name, &cfg, &opts)?;
    let mut child = Kill(Some(
        Command::new(std::env::current_exe()?)
            .args(["__hop-floor", "--ring", &name, "--count", &count.to_string(), "--core", &cores.1.to_string()])
            .args(if mode == Mode::Reliable { &["--consumer"][..] } else { &[][..] })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?,
    ));
    let mut out = BufReader::new(child.0.as_mut().and_then(|c| c.stdout.take()).ok_or("no stdout")?);
    let mut line = String::new();
    out.read_line(&mut line)?;
    if line.trim() != "ready" {
        let _ = child.0.as_mut().map(|c| c.kill());
        return Err(format!("the hop floor's reader did not start: {line}").into());
    }
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
                buf[..8].copy_from_slice(&due.to_le_bytes());
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
    let _ = shm::remove(&name, &opts);
    let v: FloorReading = serde_json::from_str(line.trim())
        .map_err(|e| format!("the hop floor's reader failed ({}): {e}: {line}", status.status))?;
    Ok((v.p50, v.p99))
}

/// What the hop floor's reading process prints (one JSON line).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FloorReading {
    p50: u64,
    p99: u64,
    count: u64,
    missed: u64,
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
    while seen + missed < count {
        match s.try_recv() {
            Some(Recv::Message(m)) => {
                let due = u64::from_le_bytes(m.payload[..8].try_into()?);
                h.saturating_record(scale.delta_ns(due, tsc.now()).max(1));
                seen += 1;
                quiet_since = None;
            }
            Some(Recv::Gap(g)) => missed += g.missed(),
            None => {
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
    println!("{}", serde_json::to_string(&FloorReading { p50: q(0.5), p99: q(0.99), count: seen, missed })?);
    Ok(())
}

/// The report's table for the pipeline runs.
pub fn table(runs: &[Run]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for r in runs {
        let _ = writeln!(
            s,
            "trading pipeline across processes at {} msg/s, open loop from each tick's intended time: {}",
            crate::report::rate_name(r.rate),
            r.layout
        );
        let _ = writeln!(
            s,
            "{:<62}{:>10}{:>10}{:>10}{:>12}{:>22}",
            "hop (ns)", "p50", "p99", "p99.9", "max", "floor p50/p99 (x)"
        );
        for h in [&r.feed, &r.every_tick].into_iter().chain(&r.hops) {
            let f = match (h.floor, h.x_floor) {
                (Some((a, b)), Some((x, y))) => format!("{a}/{b} ({x:.2}x/{y:.2}x)"),
                _ => "-".into(),
            };
            let _ = writeln!(s, "{:<62}{:>10}{:>10}{:>10}{:>12}{:>22}", h.name, h.p50, h.p99, h.p99_9, h.max, f);
        }
        let _ = writeln!(
            s,
            "  {} market-data messages published, {} seen by the trader ({} missed), {} orders, {} reports (hops are timed per order; the first row per market-data message)",
            r.published, r.ticks, r.ticks_missed, r.orders, r.reports
        );
        let _ = writeln!(
            s,
            "  targets: process-crossing hops within 1.15x of their floor at p50 and p99: {}; tick-to-trade p50 {} ns <= floors + book p50 ({} ns) + 100 ns = {} ns: {}\n",
            if r.hops_met { "met" } else { "NOT met" },
            r.hops[5].p50,
            r.book_p50,
            r.budget_p50,
            if r.ttt_met { "met" } else { "NOT met" }
        );
    }
    s
}

/// The per-hop breakdown as stacked bars: two panels (p50, p99, each on its own scale), one bar
/// per rate, each hop's percentile stacked in pipeline order. The bar's height is the sum of the
/// hops, which tick-to-trade's own percentile need not equal (percentiles do not add); the
/// label above a bar gives both.
pub fn stacked_plot(runs: &[Run], path: &Path) -> Result<(), Box<dyn Error>> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1100, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled("tick-to-trade per hop, stacked (ns), across processes over shm", ("sans-serif", 22))?;
    let panels = root.split_evenly((1, 2));
    let names: Vec<String> =
        runs.first().map(|r| r.hops[..5].iter().map(|h| h.name.clone()).collect()).unwrap_or_default();
    for (panel, (label, pick)) in panels.iter().zip([("p50", 0usize), ("p99", 1)]) {
        let value = |h: &Hop| if pick == 0 { h.p50 } else { h.p99 };
        let bars: Vec<(String, Vec<u64>, u64)> = runs
            .iter()
            .map(|r| (crate::report::rate_name(r.rate), r.hops[..5].iter().map(value).collect(), value(&r.hops[5])))
            .collect();
        let ymax = bars.iter().map(|b| b.1.iter().sum::<u64>().max(b.2)).max().unwrap_or(1).max(1) as f64 * 1.2;
        let mut chart = ChartBuilder::on(panel)
            .caption(label, ("sans-serif", 18))
            .margin(15)
            .x_label_area_size(20)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..bars.len().max(1) as f64, 0f64..ymax)?;
        chart.configure_mesh().disable_x_mesh().disable_x_axis().y_desc("ns").draw()?;
        for (k, name) in names.iter().enumerate() {
            let rects: Vec<_> = bars
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let base: u64 = b.1[..k].iter().sum();
                    let (x0, x1) = (i as f64 + 0.2, i as f64 + 0.8);
                    Rectangle::new([(x0, base as f64), (x1, (base + b.1[k]) as f64)], Palette99::pick(k).filled())
                })
                .collect();
            let series = chart.draw_series(rects)?;
            if pick == 0 {
                series
                    .label(name.clone())
                    .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], Palette99::pick(k).filled()));
            }
        }
        chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
            let sum: u64 = b.1.iter().sum();
            Text::new(
                format!("{} msg/s: hops {sum}, tick-to-trade {}", b.0, b.2),
                (i as f64 + 0.05, sum.max(b.2) as f64 * 1.05),
                ("sans-serif", 13),
            )
        }))?;
        if pick == 0 {
            chart.configure_series_labels().position(SeriesLabelPosition::UpperLeft).border_style(BLACK).draw()?;
        }
    }
    root.present()?;
    Ok(())
}

/// Where `tickbus` is by default: beside this binary (same target folder).
pub fn default_tickbus() -> PathBuf {
    std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join("tickbus"))).unwrap_or_else(|| "tickbus".into())
}

/// One round of the RDMA pipeline in the guest, beside perftest's one-way figures measured just
/// before it in the same boot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RdmaRound {
    pub ttt_p50: u64,
    pub ttt_p99: u64,
    /// perftest's typical one-way latency (ns): `ib_send_lat` UD (market data) and
    /// `ib_write_lat` RC (orders), at the payloads the pipeline sends.
    pub ud_one_way: u64,
    pub rc_one_way: u64,
    /// ud + rc + the book's p50: what tick-to-trade p50 is held against.
    pub budget: u64,
    pub ratio: f64,
    pub ticks: u64,
    pub orders: u64,
}

/// The pipeline over RDMA (exchange on one device, trader on the other), rounds interleaved
/// with perftest, and the last round's hops.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RdmaRun {
    pub rate: u64,
    pub rounds: Vec<RdmaRound>,
    pub book_p50: u64,
    pub hops: Vec<Hop>,
    /// Median, min and max of the rounds' ratios; the target is median <= 1.25.
    pub ratio: (f64, f64, f64),
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
    let book_p50 = book_cost(itch, ticks_per_ns)?;
    let mut out = Vec::new();
    let mut hops = Vec::new();
    for round in 0..rounds {
        let ud = crate::perftest::one_way("ib_send_lat", &["-c", "UD"], devices, MD_PAYLOAD, perftest_iters)?.0;
        let rc = crate::perftest::one_way("ib_write_lat", &[], devices, ORDER_PAYLOAD, perftest_iters)?.0;
        let (ex, tr) = rdma_pipeline(tickbus, itch, devices, rate, messages, round)?;
        let gw = ex.gateway.as_ref().ok_or("the exchange (rdma) printed no gateway summary")?;
        let h: Vec<Hop> = gw.hops_ns.iter().map(to_hop).collect();
        let ttt = h.get(5).ok_or("the gateway reported no tick-to-trade")?;
        let budget = ud + rc + book_p50;
        out.push(RdmaRound {
            ttt_p50: ttt.p50,
            ttt_p99: ttt.p99,
            ud_one_way: ud,
            rc_one_way: rc,
            budget,
            ratio: ttt.p50 as f64 / budget.max(1) as f64,
            ticks: tr.counts.ticks,
            orders: tr.counts.orders,
        });
        eprintln!(
            "latency-lab: rdma pipeline round {}: tick-to-trade p50 {} ns against UD {ud} + RC {rc} + book {book_p50} ns",
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

/// The RDMA pipeline's table.
pub fn rdma_table(r: &RdmaRun) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "trading pipeline over RDMA in the guest at {} msg/s (exchange on rxe0: ud-mcast market data, gateway on rdma-rc; trader on rxe1), rounds interleaved with perftest",
        crate::report::rate_name(r.rate)
    );
    for (k, x) in r.rounds.iter().enumerate() {
        let _ = writeln!(
            s,
            "  round {}: tick-to-trade p50 {} ns, p99 {} ns; ib_send_lat UD {} + ib_write_lat {} + book {} = {} ns; {:.2}x ({} ticks, {} orders)",
            k + 1,
            x.ttt_p50,
            x.ttt_p99,
            x.ud_one_way,
            x.rc_one_way,
            r.book_p50,
            x.budget,
            x.ratio,
            x.ticks,
            x.orders
        );
    }
    let (m, lo, hi) = r.ratio;
    let _ = writeln!(
        s,
        "  median {m:.2}x (spread {lo:.2}x-{hi:.2}x) against perftest one-way UD + RC + the book: target <= 1.25x {}",
        if m <= 1.25 { "met" } else { "NOT met" }
    );
    for h in &r.hops {
        let _ = writeln!(s, "  {:<62} p50 {:>10} ns  p99 {:>10} ns", h.name, h.p50, h.p99);
    }
    s
}
