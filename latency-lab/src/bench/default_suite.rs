//! The default suite (`latency-lab` with no subcommand) as a list of parts: each part measures
//! one thing beside its floor and peers and adds it to the report; `--skip` leaves any out.
//! [`PARTS`] is the whole suite in the order it runs.
use std::error::Error;
use std::path::Path;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use tickbus::time::Tsc;
use tickbus_codecs::synth::{write_itch, DayConfig};

use super::harness::RunSpec;
use super::peers::floor::{Floor, PayloadFloor};
use super::peers::floor_rungs::{Length, SlotRung};
use super::peers::{disruptor_peer::Disruptor, kernel, rtrb_peer::Rtrb, tickbus_shm};
use super::suite::{machine, ol, pp, pp2, tp, FANOUT_HOSTS};
use super::transport::InProcess;
use crate::model::{Report, Row, Section, ThroughputRow};
use crate::{Part, SuiteArgs};

/// Interleaved rounds per ping-pong size.
const ROUNDS: u64 = 5;

/// One part of the suite: what `--skip` calls it, how many progress steps it takes, and what it
/// runs.
struct PartSpec {
    part: Part,
    steps: fn(&SuiteArgs) -> u64,
    run: fn(&mut Ctx<'_>) -> Result<(), Box<dyn Error>>,
}

/// The suite, in the order it runs.
const PARTS: [PartSpec; 10] = [
    PartSpec { part: Part::Ttt, steps: |_| 1, run: tick_to_trade },
    PartSpec {
        part: Part::Pipeline,
        steps: |a| a.rates.len() as u64 + u64::from(a.snapshot_rounds > 0) + u64::from(a.join_rounds > 0),
        run: pipeline,
    },
    PartSpec { part: Part::Pingpong, steps: |a| a.sizes.len() as u64, run: ping_pong },
    PartSpec { part: Part::Openloop, steps: |a| a.rates.len() as u64, run: open_loop },
    PartSpec { part: Part::Throughput, steps: |_| 1, run: throughput },
    PartSpec { part: Part::Fanout, steps: |_| 1, run: fanout },
    PartSpec { part: Part::Itch, steps: |_| 1, run: itch },
    PartSpec { part: Part::Book, steps: |_| 1, run: book },
    PartSpec { part: Part::Journal, steps: |_| 1, run: journal_part },
    PartSpec { part: Part::Wire, steps: |_| 1, run: wire },
];

/// What every part shares: the arguments, the report being filled, the cores and TSC rate, the
/// progress bar, the generated ITCH day and the in-process transports.
struct Ctx<'a> {
    a: &'a SuiteArgs,
    rep: Report,
    cores: (usize, usize),
    ticks_per_ns: f64,
    bar: ProgressBar,
    day: DayConfig,
    day_bytes: Vec<u8>,
    streams: Streams,
}

impl Ctx<'_> {
    /// Says what runs next, above the progress bar.
    fn step(&self, msg: String) {
        self.bar.set_message(msg.clone());
        self.bar.suspend(|| eprintln!("latency-lab: {msg}"));
    }
}

/// Runs every part not skipped, then prints the report and writes its files.
pub fn run(a: &SuiteArgs) -> Result<(), Box<dyn Error>> {
    let ticks_per_ns = Tsc::new().measure_ticks_per_ns(Duration::from_millis(200));
    let cores = (a.core_a, a.core_b);
    let skip = |p: Part| a.skip.contains(&p);
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut rep = Report { machine: machine(), command, cores, ticks_per_ns, ..Default::default() };
    rep.diagnose(false, crate::bench::JITTER_WINDOW);
    let peers = if cfg!(feature = "peers") { "" } else { " (built without --features peers: no Aeron or iceoryx2)" };
    eprintln!("latency-lab: cores {}/{}, TSC {ticks_per_ns:.3} ticks/ns{peers}", cores.0, cores.1);
    if !cfg!(feature = "peers") {
        rep.notes.push("built without the `peers` feature: Aeron IPC and iceoryx2 are not in this report".into());
    }
    let bar = ProgressBar::new(PARTS.iter().filter(|p| !skip(p.part)).map(|p| (p.steps)(a)).sum());
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed} elapsed]").expect("valid template"),
    );
    let day = DayConfig::new(1, 100, a.itch_messages);
    // The generated day, unless every part that would replay it has a file or is skipped.
    let mut day_bytes = Vec::new();
    if a.itch.is_none() && !(skip(Part::Ttt) && skip(Part::Pipeline)) || !skip(Part::Journal) {
        write_itch(day, &mut day_bytes)?;
    }
    let mut c = Ctx { a, rep, cores, ticks_per_ns, bar, day, day_bytes, streams: Streams::new() };
    for p in PARTS.iter().filter(|p| !skip(p.part)) {
        (p.run)(&mut c)?;
    }
    c.bar.finish_and_clear();
    let mut rep = c.rep;
    merge_rdma(&mut rep, &a.rdma_report);
    print!("{}", rep.text());
    let at = rep.write(&a.out)?;
    eprintln!(
        "latency-lab: report written to {} (index.html, table.txt, report.json, *.hgrm, latency.hlog, *.svg plots)",
        at.display()
    );
    Ok(())
}

fn tick_to_trade(c: &mut Ctx<'_>) -> Result<(), Box<dyn Error>> {
    let (a, cores, ticks_per_ns) = (c.a, c.cores, c.ticks_per_ns);
    c.step(format!("tick-to-trade demo at {} msg/s", crate::model::rate_name(a.ttt_rate)));
    let map;
    let itch: &[u8] = match &a.itch {
        Some(p) => {
            let f = std::fs::File::open(p).map_err(|e| format!("--itch {}: {e}", p.display()))?;
            // SAFETY: a read-only mapping the demo only reads while `map` lives; the --itch file
            // must not be truncated during the run (its pages would fault), as its help says.
            map = unsafe { memmap2::MmapOptions::new().populate().map(&f) }
                .map_err(|e| format!("mapping --itch {}: {e}", p.display()))?;
            &map[..]
        }
        None => &c.day_bytes,
    };
    let d = crate::bench::tick_to_trade::Demo { itch, rate: a.ttt_rate, cores, ticks_per_ns, opts: Default::default() };
    let o = crate::bench::tick_to_trade::run(&d)?;
    c.rep
        .notes
        .push(format!("tick-to-trade: {} ticks replayed, {} orders sent on top-of-book changes", o.ticks, o.orders));
    c.rep.tick_to_trade = Some(o.section);
    c.bar.inc(1);
    Ok(())
}

fn pipeline(c: &mut Ctx<'_>) -> Result<(), Box<dyn Error>> {
    let (a, cores, ticks_per_ns) = (c.a, c.cores, c.ticks_per_ns);
    let file = match &a.itch {
        Some(p) => p.clone(),
        None => {
            std::fs::create_dir_all(&a.out)?;
            let f = a.out.join("pipeline-day.itch");
            std::fs::write(&f, &c.day_bytes)?;
            f
        }
    };
    let in_file = {
        let f = std::fs::File::open(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        // SAFETY: a file this run wrote or was given, not changed while mapped.
        let map = unsafe { memmap2::Mmap::map(&f)? };
        tickbus_codecs::itch::frames(&map).count() as u64
    };
    let lab_cores = if a.cores.is_empty() { vec![cores.0, cores.1] } else { a.cores.clone() };
    let tickbus = a.tickbus.clone().unwrap_or_else(crate::bench::pipeline::default_tickbus);
    for &rate in &a.rates {
        c.step(format!("trading pipeline across processes at {} msg/s", crate::model::rate_name(rate)));
        let messages = ((rate as f64 * a.pipeline_seconds) as u64).clamp(1, in_file);
        let spec = crate::bench::pipeline::Spec {
            tickbus: &tickbus,
            itch: &file,
            rate,
            messages,
            cores: &lab_cores,
            ticks_per_ns,
            rounds: a.pipeline_rounds,
        };
        c.rep.pipeline.push(crate::bench::pipeline::run(&spec)?);
        c.bar.inc(1);
    }
    // The snapshot maker's cost to the venue, at the lowest rate (where the venue keeps its
    // schedule: a backlogged round judges nothing).
    if let (Some(&rate), true) = (a.rates.iter().min(), a.snapshot_rounds > 0) {
        c.step(format!(
            "the venue's publish latency with its snapshot maker, at {} msg/s",
            crate::model::rate_name(rate)
        ));
        let messages = ((rate as f64 * a.pipeline_seconds) as u64).clamp(1, in_file);
        let spec = crate::bench::pipeline::Spec {
            tickbus: &tickbus,
            itch: &file,
            rate,
            messages,
            cores: &lab_cores,
            ticks_per_ns,
            rounds: a.snapshot_rounds,
        };
        c.rep.snapshot_cost = Some(crate::bench::pipeline::snapshot_cost(&spec, "inline", 0.2)?);
        c.bar.inc(1);
    }
    // A late joiner's cost to the venue, at the lowest rate.
    if let (Some(&rate), true) = (a.rates.iter().min(), a.join_rounds > 0) {
        c.step(format!(
            "the venue's publish latency while a late joiner catches up, at {} msg/s",
            crate::model::rate_name(rate)
        ));
        let messages = ((rate as f64 * a.pipeline_seconds) as u64).clamp(1, in_file);
        let spec = crate::bench::pipeline::Spec {
            tickbus: &tickbus,
            itch: &file,
            rate,
            messages,
            cores: &lab_cores,
            ticks_per_ns,
            rounds: a.join_rounds,
        };
        c.rep.join_cost = Some(crate::bench::join_cost::run(&spec)?);
        c.bar.inc(1);
    }
    if a.itch.is_none() {
        let _ = std::fs::remove_file(&file);
    }
    Ok(())
}

fn ping_pong(c: &mut Ctx<'_>) -> Result<(), Box<dyn Error>> {
    let (a, cores, ticks_per_ns) = (c.a, c.cores, c.ticks_per_ns);
    for &size in &a.sizes {
        c.step(format!("ping-pong {size} B"));
        let iterations = if size == 64 { a.iterations } else { a.iterations / 3 };
        // Interleaved rounds: every transport runs a slice of its iterations in each round, so
        // drift on a shared machine (vCPU placement, neighbours) lands on all of them alike.
        let per_round =
            RunSpec { size, iterations: iterations / ROUNDS, warmup: iterations / ROUNDS / 10, cores, ticks_per_ns };
        let mut rows: Vec<Row> = Vec::new();
        let mut uncounted = tickbus_shm::TickbusShmUncounted::default();
        let mut lossy = tickbus_shm::TickbusShmLossy::default();
        let mut into = tickbus_shm::TickbusShmInto::default();
        let mut via_uri = tickbus_shm::TickbusStream::default();
        let mut cpp = crate::bench::peers::tickbus_cpp::TickbusCpp::default();
        for _ in 0..ROUNDS {
            let spec = per_round;
            let mut round = vec![
                pp(&mut Floor, &spec)?,
                pp(&mut PayloadFloor { slots: 1 }, &spec)?,
                pp(&mut PayloadFloor { slots: tickbus_shm::SLOTS }, &spec)?,
            ];
            round.extend(c.streams.each(|t| t.ping_pong(&spec))?);
            round.push(pp(&mut uncounted, &spec)?);
            round.push(pp(&mut lossy, &spec)?);
            round.push(pp(&mut into, &spec)?);
            round.push(pp(&mut via_uri, &spec)?);
            round.push(pp(&mut cpp, &spec)?);
            if size == 64 {
                round.insert(4, pp2(&tickbus_shm::TickbusShmProcesses::default(), &spec)?);
                #[cfg(feature = "peers")]
                round.push(pp2(&crate::bench::peers::iceoryx::Iceoryx2, &spec)?);
                let k = RunSpec {
                    iterations: (spec.iterations / 10).max(1),
                    warmup: (spec.iterations / 100).max(1),
                    ..spec
                };
                round.push(pp(&mut kernel::Udp, &k)?);
                round.push(pp(&mut kernel::Tcp, &k)?);
            }
            if SlotRung::fits(size) {
                // Where tickbus's time over the payload floor goes: its slot on the floor's ring.
                for (i, length) in
                    [Length::Known, Length::Checked, Length::Read, Length::CheckedAfter].into_iter().enumerate()
                {
                    round.insert(3 + i, pp(&mut SlotRung(length), &spec)?);
                }
            }
            crate::model::merge_round(&mut rows, round)?;
        }
        let mut sec = Section { mode: "rtt".into(), size, rate: None, rows };
        sec.ratios();
        if let Some(n) = counters_note(&sec) {
            c.rep.notes.push(n);
        }
        if let Some(n) = cpp_note(&sec) {
            c.rep.notes.push(n);
        }
        c.rep.sections.push(sec);
        c.bar.inc(1);
    }
    Ok(())
}

/// The C++ pair beside the Rust pair it wraps, at p50 (issue 28's target: at most 1.05x).
fn cpp_note(sec: &Section) -> Option<String> {
    let p50 = |name: &str| sec.rows.iter().find(|r| r.name == name).map(|r| r.ns[0]);
    let (cpp, rust) = (p50("tickbus shm (C++ via the C ABI)")?, p50("tickbus shm (stream API, URI)")?);
    let x = cpp as f64 / rust.max(1) as f64;
    Some(format!(
        "ping-pong {} B: C++ through the C ABI {cpp} ns p50, {x:.2}x the Rust pair through the stream API ({rust} ns){}",
        sec.size,
        if x <= 1.05 { "" } else { ": over the 1.05x target" }
    ))
}

fn open_loop(c: &mut Ctx<'_>) -> Result<(), Box<dyn Error>> {
    let (a, cores, ticks_per_ns) = (c.a, c.cores, c.ticks_per_ns);
    for &rate in &a.rates {
        c.step(format!("open loop {} msg/s, 64 B", crate::model::rate_name(rate)));
        let n = (rate as f64 * a.open_loop_seconds) as u64;
        let spec = RunSpec { size: 64, iterations: n, warmup: n / 10, cores, ticks_per_ns };
        let rows = c.streams.each(|t| t.open_loop(&spec, rate))?;
        let mut sec = Section { mode: "one-way".into(), size: 64, rate: Some(rate), rows };
        sec.ratios();
        c.rep.sections.push(sec);
        c.bar.inc(1);
    }
    Ok(())
}

fn throughput(c: &mut Ctx<'_>) -> Result<(), Box<dyn Error>> {
    let (a, cores, ticks_per_ns) = (c.a, c.cores, c.ticks_per_ns);
    c.step("throughput, 64 B".into());
    let spec = RunSpec {
        size: 64,
        iterations: a.throughput_messages,
        warmup: a.throughput_messages / 10,
        cores,
        ticks_per_ns,
    };
    c.rep.throughput = c.streams.each(|t| t.throughput(&spec))?;
    c.rep.throughput_ratios();
    c.bar.inc(1);
    Ok(())
}

fn fanout(c: &mut Ctx<'_>) -> Result<(), Box<dyn Error>> {
    let (a, cores) = (c.a, c.cores);
    c.step("fan-out: one shm ring, 1, 2 and 4 consumer processes".into());
    c.rep.fanout.push(crate::bench::fanout::run(a.fanout_rate, a.fanout_seconds, &[1, 2, 4], cores)?);
    c.bar.inc(1);
    Ok(())
}

fn itch(c: &mut Ctx<'_>) -> Result<(), Box<dyn Error>> {
    let ticks_per_ns = c.ticks_per_ns;
    c.step("ITCH decode and book update beside itchy".into());
    c.rep.itch = Some(crate::bench::itch_bench::run(c.day, 5, ticks_per_ns)?);
    c.bar.inc(1);
    Ok(())
}

/// The order book at TotalView scale beside its floor (see `bench::book_scale`).
fn book(c: &mut Ctx<'_>) -> Result<(), Box<dyn Error>> {
    let a = c.a;
    c.step(format!(
        "order book at TotalView scale: {} stocks, {} live orders at the peak, beside its floor in {} rounds",
        a.book_stocks, a.book_peak_orders, a.book_rounds
    ));
    let day = DayConfig::new(7, a.book_stocks, a.book_messages).with_peak_orders(a.book_peak_orders);
    c.rep.book = Some(crate::bench::book_scale::run(day, a.book_rounds, c.cores.0, c.ticks_per_ns)?);
    c.bar.inc(1);
    Ok(())
}

/// From the wire: datagrams over a veth into a namespace the lab makes, four ways of taking
/// them (see `bench::wire`).
fn wire(c: &mut Ctx<'_>) -> Result<(), Box<dyn Error>> {
    c.step("wire: MoldUDP64 over a veth, AF_XDP and UDP ingest beside their floors".into());
    #[cfg(feature = "xdp")]
    {
        let (a, cores, ticks_per_ns) = (c.a, c.cores, c.ticks_per_ns);
        match crate::bench::wire::run(&a.rates, a.wire_round_seconds, a.wire_rounds, cores, ticks_per_ns) {
            Ok(secs) => {
                c.rep.notes.extend(secs.iter().map(crate::bench::wire::verdict));
                c.rep.sections.extend(secs);
            }
            // Not root, or no veth: said in the report, the rest of the suite still runs.
            Err(e) => c.rep.notes.push(format!("no wire section: {e}")),
        }
        c.step("wire: datagrams/s each way takes with zero loss".into());
        match crate::bench::wire::zero_loss(cores, ticks_per_ns) {
            Ok(notes) => c.rep.notes.extend(notes),
            Err(e) => c.rep.notes.push(format!("no zero-loss rates: {e}")),
        }
        c.step("wire-to-trade: MoldUDP64 over a veth through tickbus feed (xdp, udp), trader and gateway".into());
        let lab_cores = if a.cores.is_empty() { vec![cores.0, cores.1] } else { a.cores.clone() };
        let tickbus = a.tickbus.clone().unwrap_or_else(crate::bench::pipeline::default_tickbus);
        let spec = crate::bench::wire_trade::Spec {
            tickbus: &tickbus,
            rates: &a.rates,
            seconds: a.wire_seconds,
            cores: &lab_cores,
            ticks_per_ns,
        };
        match crate::bench::wire_trade::run(&spec) {
            Ok((runs, failed)) => {
                c.rep.wire_trade = runs;
                c.rep.notes.extend(failed);
            }
            Err(e) => c.rep.notes.push(format!("no wire-to-trade section: {e}")),
        }
    }
    #[cfg(not(feature = "xdp"))]
    c.rep.notes.push("no wire section: built without the `xdp` feature (tools/lab-build.sh builds with it)".into());
    c.bar.inc(1);
    Ok(())
}

fn journal_part(c: &mut Ctx<'_>) -> Result<(), Box<dyn Error>> {
    let (a, cores, ticks_per_ns) = (c.a, c.cores, c.ticks_per_ns);
    c.step("journal: recorder, read, replay pacing, sustained recording".into());
    journal(a, &mut c.rep, &c.day_bytes, cores, ticks_per_ns)?;
    c.bar.inc(1);
    Ok(())
}

/// What the live counters cost on the round trip: tickbus shm beside the same rings uncounted.
fn counters_note(sec: &Section) -> Option<String> {
    let row = |n: &str| sec.rows.iter().find(|r| r.name == n);
    let (on, off) = (row("tickbus shm")?, row("tickbus shm (counters off)")?);
    let r = |k: usize| on.ns[k] as f64 / off.ns[k].max(1) as f64;
    Some(format!(
        "counters, rtt {} B: tickbus shm p50 {} ns counted against {} ns uncounted ({:.2}x), p99 {} against {} ({:.2}x)",
        sec.size, on.ns[0], off.ns[0], r(0), on.ns[2], off.ns[2], r(2)
    ))
}

/// The in-process transports that queue (everything but the floor and the kernel sockets).
struct Streams {
    shm: tickbus_shm::TickbusShm,
    rtrb: Rtrb,
    disruptor: Disruptor,
}

impl Streams {
    fn new() -> Streams {
        Streams { shm: tickbus_shm::TickbusShm::default(), rtrb: Rtrb, disruptor: Disruptor }
    }

    /// Runs `g` on each, in report order.
    fn each<R>(
        &mut self,
        mut g: impl FnMut(&mut dyn StreamT) -> Result<R, Box<dyn Error>>,
    ) -> Result<Vec<R>, Box<dyn Error>> {
        #[allow(unused_mut)]
        let mut v = vec![g(&mut self.shm)?, g(&mut self.rtrb)?, g(&mut self.disruptor)?];
        // Aeron's driver and client conductor threads wake up periodically; they run only while
        // Aeron is measured, so they cannot disturb the other transports on two cores.
        #[cfg(feature = "peers")]
        {
            let mut aeron = crate::bench::peers::aeron::AeronIpc::launch()?;
            v.push(g(&mut aeron)?);
        }
        Ok(v)
    }
}

/// Object-safe face of an in-process stream transport, for iterating over them.
trait StreamT {
    fn ping_pong(&mut self, spec: &RunSpec) -> Result<Row, Box<dyn Error>>;
    fn open_loop(&mut self, spec: &RunSpec, rate: u64) -> Result<Row, Box<dyn Error>>;
    fn throughput(&mut self, spec: &RunSpec) -> Result<ThroughputRow, Box<dyn Error>>;
}

impl<T: InProcess> StreamT for T {
    fn ping_pong(&mut self, spec: &RunSpec) -> Result<Row, Box<dyn Error>> {
        pp(self, spec)
    }
    fn open_loop(&mut self, spec: &RunSpec, rate: u64) -> Result<Row, Box<dyn Error>> {
        ol(self, spec, rate)
    }
    fn throughput(&mut self, spec: &RunSpec) -> Result<ThroughputRow, Box<dyn Error>> {
        tp(self, spec)
    }
}

/// The journal's benchmarks beside their floors (recorder vs a bare write, read vs the ITCH
/// decoder, replay pacing vs a bare wait loop at each rate, a sustained recording at 1M msg/s).
fn journal(
    a: &SuiteArgs,
    rep: &mut Report,
    day: &[u8],
    cores: (usize, usize),
    ticks_per_ns: f64,
) -> Result<(), Box<dyn Error>> {
    let itch_rate =
        rep.itch.as_ref().and_then(|i| i.decode.iter().find(|d| d.name.contains("walk")).map(|d| d.msgs_per_s));
    let mut j = crate::bench::journal_bench::throughput(a.journal_messages, cores, ticks_per_ns, itch_rate)?;
    j.python_read = Some(crate::bench::python_read::run(a.journal_messages, ticks_per_ns)?);
    j.catch_up = Some(crate::bench::catch_up::run(a.journal_messages, ticks_per_ns)?);
    j.join_live = crate::bench::join_live::run(day, ticks_per_ns)?;
    let file = std::env::temp_dir().join(format!("lab-day-{}.itch", std::process::id()));
    std::fs::write(&file, day)?;
    let messages = tickbus_codecs::itch::frames(day).count() as u64;
    for &rate in &a.rates {
        let n = ((rate as f64 * a.open_loop_seconds) as u64).min(messages) / ROUNDS;
        rep.sections.push(crate::bench::journal_bench::pacing(
            &file,
            rate,
            n.max(1),
            ROUNDS as u32,
            cores.0,
            ticks_per_ns,
        )?);
    }
    let _ = std::fs::remove_file(&file);
    if a.record_seconds > 0.0 {
        j.sustained = Some(crate::bench::journal_bench::sustained(1_000_000, a.record_seconds, cores, ticks_per_ns)?);
    }
    rep.journal = Some(j);
    Ok(())
}

/// Adds the Soft-RoCE guest's sections (tools/lab-rdma.sh) when that report exists.
fn merge_rdma(rep: &mut Report, path: &Path) {
    if path.as_os_str() == "none" {
        rep.notes.push("no RDMA figures in this run (tools/lab.sh --full runs them in the Soft-RoCE guest)".into());
        return;
    }
    let Ok(text) = std::fs::read_to_string(path) else {
        rep.notes.push(format!("no RDMA figures: {} not found (run tools/lab-rdma.sh)", path.display()));
        return;
    };
    match serde_json::from_str::<Report>(&text) {
        Ok(r) => {
            rep.pipeline_rdma = r.pipeline_rdma;
            rep.rdma_versus = r.rdma_versus;
            rep.fanout.extend(r.fanout);
            rep.environment_rdma = r.environment;
            for mut s in r.sections {
                s.mode = format!("rdma-guest-{}", s.mode);
                rep.sections.push(s);
            }
            rep.notes.push(format!(
                "rdma-guest sections come from {} (Soft-RoCE under QEMU TCG, its own run)",
                path.display()
            ));
            rep.notes.extend(r.notes);
        }
        Err(e) => rep.notes.push(format!("{} is not a lab report ({e}); RDMA figures left out", path.display())),
    }
    let hosts = path.with_file_name(FANOUT_HOSTS);
    match std::fs::read_to_string(&hosts) {
        Ok(text) => match serde_json::from_str::<crate::model::fanout::FanoutReport>(&text) {
            Ok(f) => {
                rep.fanout.push(f);
                rep.notes
                    .push(format!("the two-guest fan-out comes from {} (its own boot of two guests)", hosts.display()));
                let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
                if let (Some(h), Some(r)) = (modified(&hosts), modified(path)) {
                    if h < r {
                        rep.notes.push(format!(
                            "{} is older than {}: it is from an earlier run of tools/lab-rdma.sh",
                            hosts.display(),
                            path.display()
                        ));
                    }
                }
            }
            Err(e) => rep.notes.push(format!("{} is not a fan-out report ({e}); left out", hosts.display())),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            rep.notes.push(format!("no two-guest fan-out: {} not found (tools/lab-rdma.sh writes it)", hosts.display()))
        }
        Err(e) => rep.notes.push(format!("{} could not be read ({e}); left out", hosts.display())),
    }
}
