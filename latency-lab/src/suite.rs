//! What the lab runs: the default suite, the RDMA run, and the echo child.
use std::error::Error;
use std::path::Path;
use std::time::{Duration, SystemTime};

use indicatif::{ProgressBar, ProgressStyle};
use tickbus::time::Tsc;
use tickbus_codecs::synth::{write_itch, DayConfig};

use crate::harness::{self, RunSpec};
use crate::peers::floor::{Floor, PayloadFloor};
use crate::peers::floor_rungs::{Length, SlotRung};
use crate::peers::{disruptor_peer::Disruptor, kernel, rtrb_peer::Rtrb, tickbus_shm};
use crate::report::{Kind, Report, Row, Section, ThroughputRow};
use crate::transport::{CrossProcess, InProcess};
use crate::Part;
use crate::SuiteArgs;

/// Interleaved rounds per ping-pong size.
const ROUNDS: u64 = 5;

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let n = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {n} cores")
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

fn kind_of(name: &str) -> Kind {
    if name.starts_with("floor rung") {
        Kind::Rung
    } else if name.starts_with("floor") {
        Kind::Floor
    } else if name.starts_with("tickbus") {
        Kind::Tickbus
    } else {
        Kind::Peer
    }
}

fn pp<T: InProcess>(t: &mut T, spec: &RunSpec) -> Result<Row, Box<dyn Error>> {
    let t0 = SystemTime::now();
    let h = harness::ping_pong(t, spec).map_err(|e| format!("{}: {e}", t.name()))?;
    Ok(Row::new(t.name(), kind_of(&t.name()), t.note(), h).taken_since(t0))
}

fn pp2<T: CrossProcess + Sync>(t: &T, spec: &RunSpec) -> Result<Row, Box<dyn Error>> {
    let t0 = SystemTime::now();
    let h = harness::ping_pong_processes(t, spec).map_err(|e| format!("{}: {e}", t.name()))?;
    Ok(Row::new(t.name(), kind_of(&t.name()), t.note(), h).taken_since(t0))
}

fn ol<T: InProcess>(t: &mut T, spec: &RunSpec, rate: u64) -> Result<Row, Box<dyn Error>> {
    let t0 = SystemTime::now();
    let o = harness::open_loop(t, spec, rate).map_err(|e| format!("{}: {e}", t.name()))?;
    let mut r = Row::new(t.name(), kind_of(&t.name()), t.note(), o.latency_ns).taken_since(t0);
    r.late_sends = Some(o.late_sends);
    Ok(r)
}

fn tp<T: InProcess>(t: &mut T, spec: &RunSpec) -> Result<ThroughputRow, Box<dyn Error>> {
    let m = harness::throughput(t, spec).map_err(|e| format!("{}: {e}", t.name()))?;
    Ok(ThroughputRow {
        name: t.name(),
        kind: kind_of(&t.name()),
        size: spec.size,
        msgs_per_s: m,
        mb_per_s: m * spec.size as f64 / 1e6,
        x_best_peer: None,
    })
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
            let mut aeron = crate::peers::aeron::AeronIpc::launch()?;
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

pub fn run(a: &SuiteArgs) -> Result<(), Box<dyn Error>> {
    let ticks_per_ns = Tsc::new().measure_ticks_per_ns(Duration::from_millis(200));
    let cores = (a.core_a, a.core_b);
    let skip = |p: Part| a.skip.contains(&p);
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut rep = Report { machine: machine(), command, cores, ticks_per_ns, ..Default::default() };
    rep.diagnose(false);
    let peers = if cfg!(feature = "peers") { "" } else { " (built without --features peers: no Aeron or iceoryx2)" };
    eprintln!("latency-lab: cores {}/{}, TSC {ticks_per_ns:.3} ticks/ns{peers}", cores.0, cores.1);
    if !cfg!(feature = "peers") {
        rep.notes.push("built without the `peers` feature: Aeron IPC and iceoryx2 are not in this report".into());
    }
    let mut streams = Streams::new();
    let steps = [
        !skip(Part::Ttt),
        !skip(Part::Pingpong),
        !skip(Part::Openloop),
        !skip(Part::Throughput),
        !skip(Part::Itch),
        !skip(Part::Journal),
        !skip(Part::Pipeline),
        !skip(Part::Fanout),
    ];
    let n_steps = (steps[0] as u64)
        + if steps[1] { a.sizes.len() as u64 } else { 0 }
        + if steps[2] { a.rates.len() as u64 } else { 0 }
        + steps[3] as u64
        + steps[4] as u64
        + steps[5] as u64
        + if steps[6] { a.rates.len() as u64 } else { 0 }
        + steps[7] as u64;
    let bar = ProgressBar::new(n_steps);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed} elapsed]").expect("valid template"),
    );
    let step = |msg: String| {
        bar.set_message(msg.clone());
        bar.suspend(|| eprintln!("latency-lab: {msg}"));
    };

    let day = DayConfig::new(1, 100, a.itch_messages);
    // The generated day, unless every part that would replay it has a file or is skipped.
    let mut day_bytes = Vec::new();
    if a.itch.is_none() && !(skip(Part::Ttt) && skip(Part::Pipeline)) || !skip(Part::Journal) {
        write_itch(day, &mut day_bytes)?;
    }

    if !skip(Part::Ttt) {
        step(format!("tick-to-trade demo at {} msg/s", crate::report::rate_name(a.ttt_rate)));
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
            None => &day_bytes,
        };
        let d = crate::tick_to_trade::Demo { itch, rate: a.ttt_rate, cores, ticks_per_ns, opts: Default::default() };
        let o = crate::tick_to_trade::run(&d)?;
        rep.notes.push(format!(
            "tick-to-trade: {} ticks replayed, {} orders sent on top-of-book changes",
            o.ticks, o.orders
        ));
        rep.tick_to_trade = Some(o.section);
        bar.inc(1);
    }
    if !skip(Part::Pipeline) {
        let file = match &a.itch {
            Some(p) => p.clone(),
            None => {
                std::fs::create_dir_all(&a.out)?;
                let f = a.out.join("pipeline-day.itch");
                std::fs::write(&f, &day_bytes)?;
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
        let tickbus = a.tickbus.clone().unwrap_or_else(crate::pipeline::default_tickbus);
        for &rate in &a.rates {
            step(format!("trading pipeline across processes at {} msg/s", crate::report::rate_name(rate)));
            let messages = ((rate as f64 * a.pipeline_seconds) as u64).clamp(1, in_file);
            let spec = crate::pipeline::Spec {
                tickbus: &tickbus,
                itch: &file,
                rate,
                messages,
                cores: &lab_cores,
                ticks_per_ns,
            };
            rep.pipeline.push(crate::pipeline::run(&spec)?);
            bar.inc(1);
        }
        if a.itch.is_none() {
            let _ = std::fs::remove_file(&file);
        }
    }
    if !skip(Part::Pingpong) {
        for &size in &a.sizes {
            step(format!("ping-pong {size} B"));
            let iterations = if size == 64 { a.iterations } else { a.iterations / 3 };
            // Interleaved rounds: every transport runs a slice of its iterations in each round, so
            // drift on a shared machine (vCPU placement, neighbours) lands on all of them alike.
            let per_round = RunSpec {
                size,
                iterations: iterations / ROUNDS,
                warmup: iterations / ROUNDS / 10,
                cores,
                ticks_per_ns,
            };
            let mut rows: Vec<Row> = Vec::new();
            let mut uncounted = tickbus_shm::TickbusShmUncounted::default();
            let mut lossy = tickbus_shm::TickbusShmLossy::default();
            let mut into = tickbus_shm::TickbusShmInto::default();
            let mut via_uri = tickbus_shm::TickbusStream::default();
            for _ in 0..ROUNDS {
                let spec = per_round;
                let mut round = vec![
                    pp(&mut Floor, &spec)?,
                    pp(&mut PayloadFloor { slots: 1 }, &spec)?,
                    pp(&mut PayloadFloor { slots: tickbus_shm::SLOTS }, &spec)?,
                ];
                round.extend(streams.each(|t| t.ping_pong(&spec))?);
                round.push(pp(&mut uncounted, &spec)?);
                round.push(pp(&mut lossy, &spec)?);
                round.push(pp(&mut into, &spec)?);
                round.push(pp(&mut via_uri, &spec)?);
                if size == 64 {
                    round.insert(4, pp2(&tickbus_shm::TickbusShmProcesses::default(), &spec)?);
                    #[cfg(feature = "peers")]
                    round.push(pp2(&crate::peers::iceoryx::Iceoryx2, &spec)?);
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
                crate::report::merge_round(&mut rows, round)?;
            }
            let mut sec = Section { mode: "rtt".into(), size, rate: None, rows };
            sec.ratios();
            if let Some(n) = counters_note(&sec) {
                rep.notes.push(n);
            }
            rep.sections.push(sec);
            bar.inc(1);
        }
    }
    if !skip(Part::Openloop) {
        for &rate in &a.rates {
            step(format!("open loop {} msg/s, 64 B", crate::report::rate_name(rate)));
            let n = (rate as f64 * a.open_loop_seconds) as u64;
            let spec = RunSpec { size: 64, iterations: n, warmup: n / 10, cores, ticks_per_ns };
            let rows = streams.each(|t| t.open_loop(&spec, rate))?;
            let mut sec = Section { mode: "one-way".into(), size: 64, rate: Some(rate), rows };
            sec.ratios();
            rep.sections.push(sec);
            bar.inc(1);
        }
    }
    if !skip(Part::Throughput) {
        step("throughput, 64 B".into());
        let spec = RunSpec {
            size: 64,
            iterations: a.throughput_messages,
            warmup: a.throughput_messages / 10,
            cores,
            ticks_per_ns,
        };
        rep.throughput = streams.each(|t| t.throughput(&spec))?;
        rep.throughput_ratios();
        bar.inc(1);
    }
    if !skip(Part::Fanout) {
        step("fan-out: one shm ring, 1, 2 and 4 consumer processes".into());
        rep.fanout.push(crate::fanout::run(a.fanout_rate, a.fanout_seconds, &[1, 2, 4], cores)?);
        bar.inc(1);
    }
    if !skip(Part::Itch) {
        step("ITCH decode and book update beside itchy".into());
        rep.itch = Some(crate::itch_bench::run(day, 5, ticks_per_ns)?);
        bar.inc(1);
    }
    if !skip(Part::Journal) {
        step("journal: recorder, read, replay pacing, sustained recording".into());
        journal(a, &mut rep, &day_bytes, cores, ticks_per_ns)?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    merge_rdma(&mut rep, &a.rdma_report);
    print!("{}", rep.text());
    let at = rep.write(&a.out)?;
    eprintln!(
        "latency-lab: report written to {} (index.html, table.txt, report.json, *.hgrm, latency.hlog, *.svg plots)",
        at.display()
    );
    Ok(())
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
    let mut j = crate::journal_bench::throughput(a.journal_messages, cores, ticks_per_ns, itch_rate)?;
    let file = std::env::temp_dir().join(format!("lab-day-{}.itch", std::process::id()));
    std::fs::write(&file, day)?;
    let messages = tickbus_codecs::itch::frames(day).count() as u64;
    for &rate in &a.rates {
        let n = ((rate as f64 * a.open_loop_seconds) as u64).min(messages) / ROUNDS;
        rep.sections.push(crate::journal_bench::pacing(&file, rate, n.max(1), ROUNDS as u32, cores.0, ticks_per_ns)?);
    }
    let _ = std::fs::remove_file(&file);
    if a.record_seconds > 0.0 {
        j.sustained = Some(crate::journal_bench::sustained(1_000_000, a.record_seconds, cores, ticks_per_ns)?);
    }
    rep.journal = Some(j);
    Ok(())
}

/// Adds the Soft-RoCE guest's sections (tools/lab-rdma.sh) when that report exists.
fn merge_rdma(rep: &mut Report, path: &Path) {
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
        Ok(text) => match serde_json::from_str::<crate::fanout::FanoutReport>(&text) {
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

pub fn echo(
    peer: &str,
    ping: &str,
    pong: &str,
    size: usize,
    total: u64,
    core: usize,
    ticks_per_ns: f64,
) -> Result<(), Box<dyn Error>> {
    match peer {
        tickbus_shm::TickbusShmProcesses::KEY => harness::echo_child(
            &tickbus_shm::TickbusShmProcesses::default(),
            ping,
            pong,
            size,
            total,
            core,
            ticks_per_ns,
        ),
        #[cfg(feature = "peers")]
        crate::peers::iceoryx::Iceoryx2::KEY => {
            harness::echo_child(&crate::peers::iceoryx::Iceoryx2, ping, pong, size, total, core, ticks_per_ns)
        }
        other => Err(format!("unknown echo peer {other:?}").into()),
    }
}

pub use crate::pipeline::RdmaPipeline;

/// `latency-lab rdma`'s rounds beside perftest: how many, and the message-rate runs' sizes and
/// message count.
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
#[derive(Debug, Clone)]
pub struct RdmaVersus {
    pub rounds: usize,
    pub rate_sizes: Vec<usize>,
    pub rate_messages: u64,
    /// Fan-out to 1, 2 and 4 subscribers: paced rate and messages per count (0: none).
    pub fanout_rate: u64,
    pub fanout_messages: u64,
}

#[cfg(feature = "rdma")]
pub fn rdma(
    a: &SuiteArgs,
    devices: &str,
    sizes: &[usize],
    iterations: u64,
    perftest: Option<&Path>,
    pipe: &RdmaPipeline,
    vs: &RdmaVersus,
) -> Result<(), Box<dyn Error>> {
    use crate::mcast_pingpong::UdMcast;
    use crate::rdma_pingpong::RdmaRc;
    use crate::rdma_rounds::{back_to_back, mcast_rate, rc_rate, Versus, VsRow};
    use tickbus::rdma::WriteMode;
    let d: Vec<&str> = devices.split(',').collect();
    let [da, db] = d[..] else {
        return Err(format!("--devices takes two device names, e.g. rxe0,rxe1 (got {devices:?})").into());
    };
    let ticks_per_ns = Tsc::new().measure_ticks_per_ns(Duration::from_millis(200));
    let cores = (a.core_a, a.core_b);
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut rep = Report { machine: machine(), command, cores, ticks_per_ns, ..Default::default() };
    rep.diagnose(true);
    let rounds = vs.rounds.max(1);
    let mut versus = Versus { rounds: rounds as u32, ..Versus::default() };
    for &size in sizes {
        let spec = RunSpec { size, iterations, warmup: (iterations / 10).max(10), cores, ticks_per_ns };
        // Per transport (WRITE, WRITE_WITH_IMM, ud-mcast): tickbus's RTT p50 and perftest's RTT.
        let mut per: [(Vec<f64>, Vec<f64>); 3] = Default::default();
        let mut rows = Vec::new();
        for round in 1..=rounds {
            let perftest = || -> Result<(u64, u64), Box<dyn Error>> {
                let (write, _) = crate::perftest::one_way("ib_write_lat", &[], (da, db), size, iterations)?;
                let (send, _) = crate::perftest::one_way("ib_send_lat", &["-c", "UD"], (da, db), size, iterations)?;
                Ok((write, send))
            };
            let tickbus = || -> Result<Vec<Row>, Box<dyn Error>> {
                let mut rows = Vec::new();
                for mode in [WriteMode::Write, WriteMode::WriteWithImm] {
                    let mut t = RdmaRc { devices: (da.into(), db.into()), write_mode: mode, note: String::new() };
                    eprintln!("latency-lab: {} {size} B ...", t.name());
                    rows.push(pp(&mut t, &spec)?);
                }
                let mut t = UdMcast::new((da.into(), db.into()));
                eprintln!("latency-lab: {} {size} B ...", t.name());
                rows.push(pp(&mut t, &spec)?);
                Ok(rows)
            };
            let ((write, send), round_rows) = back_to_back(size, "", round, rounds, perftest, tickbus)?;
            rows = round_rows;
            for (k, row) in rows.iter().enumerate() {
                per[k].0.push(row.ns[0] as f64);
                per[k].1.push(2.0 * if k < 2 { write } else { send } as f64);
            }
        }
        for (k, row) in rows.iter().enumerate() {
            let tool = if k < 2 { "ib_write_lat" } else { "ib_send_lat UD" };
            let (ours, theirs) = std::mem::take(&mut per[k]);
            versus.rtt.push(VsRow::new(&row.name, tool, size, ours, theirs, String::new()));
        }
        // The report's section and plots: the last round's runs.
        let mut sec = Section { mode: "rtt".into(), size, rate: None, rows };
        sec.ratios();
        if let Some(p) = perftest {
            rep.notes.push(crate::perftest::compare(p, size, &sec.rows)?);
        }
        rep.sections.push(sec);
    }
    // perftest twice a round: as it runs by default (one WR per doorbell) and chaining as many
    // WRs per post as tickbus's publish_batch does (`--post_list`), the stricter yardstick.
    // perftest wants a whole number of chains: the chained run sends n rounded down to a
    // multiple of 32 (at least 32). The two perftest runs swap order each round, as perftest
    // and tickbus do, so drift within the boot does not favour either.
    use tickbus::sys::verbs::MAX_CHAIN;
    let chain = MAX_CHAIN.to_string();
    let chained = ["--post_list", chain.as_str()];
    let pt_rates = |tool: &str, extra: &[&str], size: usize, n: u64, round: usize| {
        let one = || crate::perftest::msg_rate(tool, extra, (da, db), size, n);
        let whole = (n / MAX_CHAIN as u64).max(1) * MAX_CHAIN as u64;
        let many = || crate::perftest::msg_rate(tool, &[extra, &chained[..]].concat(), (da, db), size, whole);
        if round % 2 == 1 {
            let one = one()?;
            Ok::<_, Box<dyn Error>>((one, many()?))
        } else {
            let many = many()?;
            Ok((one()?, many))
        }
    };
    for &size in &vs.rate_sizes {
        let n = vs.rate_messages;
        let (mut rc, mut rc_pt, mut ud, mut ud_pt) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut rc_ptl, mut ud_ptl) = (Vec::new(), Vec::new());
        let (mut rc_got, mut ud_got) = (Vec::new(), Vec::new());
        for round in 1..=rounds {
            let what = "message rate ";
            let ((pt, ptl), r) = back_to_back(
                size,
                what,
                round,
                rounds,
                || pt_rates("ib_write_bw", &[], size, n, round),
                || rc_rate((da, db), size, n, ticks_per_ns),
            )?;
            rc_pt.push(pt);
            rc_ptl.push(ptl);
            rc.push(r.msgs_per_s);
            rc_got.push(r);
            let ((pt, ptl), r) = back_to_back(
                size,
                what,
                round,
                rounds,
                || pt_rates("ib_send_bw", &["-c", "UD"], size, n, round),
                || mcast_rate((da, db), size, n, round as u8),
            )?;
            ud_pt.push(pt);
            ud_ptl.push(ptl);
            ud.push(r.msgs_per_s);
            ud_got.push(r);
        }
        let got = |v: &[crate::rdma_rounds::RateRun]| {
            let each: Vec<String> = v.iter().map(|r| format!("{}+{}", r.delivered, r.missed)).collect();
            let goodput: Vec<String> = v.iter().map(|r| format!("{:.0}", r.goodput)).collect();
            let foreign: u64 = v.iter().map(|r| r.foreign).sum();
            format!(
                "{n} messages a round; delivered+missed per round: {}; subscriber msg/s: {}{}",
                each.join(" "),
                goodput.join(" "),
                if foreign > 0 { format!("; {foreign} foreign datagrams skipped") } else { String::new() }
            )
        };
        let (rc_name, ud_name) = ("tickbus rdma-rc (reliable, publish_batch)", "tickbus ud-mcast (publish_batch)");
        let same = "the same tickbus runs as the row above";
        versus.rate.push(VsRow::new(rc_name, "ib_write_bw", size, rc.clone(), rc_pt, got(&rc_got)));
        let tool = format!("ib_write_bw --post_list {chain}");
        versus.rate.push(VsRow::new(rc_name, &tool, size, rc, rc_ptl, same.into()));
        versus.rate.push(VsRow::new(ud_name, "ib_send_bw UD", size, ud.clone(), ud_pt, got(&ud_got)));
        let tool = format!("ib_send_bw UD --post_list {chain}");
        versus.rate.push(VsRow::new(ud_name, &tool, size, ud, ud_ptl, same.into()));
    }
    rep.rdma_versus = Some(versus);
    if vs.fanout_messages > 0 {
        let (r, m) = (vs.fanout_rate, vs.fanout_messages);
        rep.fanout.push(crate::rdma_fanout::rc((da, db), r, m, &[1, 2, 4], ticks_per_ns)?);
        rep.fanout.push(crate::rdma_fanout::mcast((da, db), r, m, &[1, 2, 4], ticks_per_ns)?);
    }
    if pipe.rounds > 0 {
        let day = DayConfig::new(1, 20, pipe.messages * 2);
        let mut bytes = Vec::new();
        write_itch(day, &mut bytes)?;
        std::fs::create_dir_all(&a.out)?;
        let file = a.out.join("pipeline-day.itch");
        std::fs::write(&file, &bytes)?;
        let tickbus = a.tickbus.clone().unwrap_or_else(crate::pipeline::default_tickbus);
        eprintln!("latency-lab: trading pipeline over RDMA, {} rounds beside perftest ...", pipe.rounds);
        rep.pipeline_rdma =
            Some(crate::pipeline::rdma_rounds(&tickbus, &file, (da, db), pipe, iterations, ticks_per_ns)?);
        let _ = std::fs::remove_file(&file);
    }
    print!("{}", rep.text());
    let at = rep.write(&a.out)?;
    eprintln!("latency-lab: report written to {}", at.display());
    Ok(())
}

/// `latency-lab rdma-fanout-hosts`: guest 1 subscribes, guest 0 publishes and writes
/// `fanout-hosts.json` into `out`.
#[cfg(feature = "rdma")]
pub fn rdma_fanout_hosts(out: &Path, rate: u64, messages: u64, rounds: usize) -> Result<(), Box<dyn Error>> {
    let var = |k: &str| {
        std::env::var(k)
            .map_err(|_| format!("{k} is not set: run this in the rig's two guests (tools/rig/rig run --guests 2)"))
    };
    if var("RIG_GUESTS")? != "2" {
        return Err("rdma-fanout-hosts needs the rig's two guests (tools/rig/rig run --guests 2)".into());
    }
    if rounds == 0 {
        return Err("--rounds takes 1 or more".into());
    }
    if var("RIG_GUEST")? == "1" {
        return crate::fanout_hosts::subscriber_side(var("RIG_PEER_ADDR")?.parse()?);
    }
    let ticks_per_ns = Tsc::new().measure_ticks_per_ns(Duration::from_millis(200));
    let r = crate::fanout_hosts::publisher_side(rate, messages, &[1, 2, 4], rounds, ticks_per_ns)?;
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join(FANOUT_HOSTS), serde_json::to_string_pretty(&r)?)?;
    eprint!("{}", r.table());
    Ok(())
}

#[cfg(not(feature = "rdma"))]
pub fn rdma_fanout_hosts(_: &Path, _: u64, _: u64, _: usize) -> Result<(), Box<dyn Error>> {
    Err("this latency-lab was built without RDMA: cargo build --release -p tickbus-lab --features rdma".into())
}

/// The two-guest ud-mcast fan-out's file, beside the one-guest RDMA report.
pub const FANOUT_HOSTS: &str = "fanout-hosts.json";

#[cfg(not(feature = "rdma"))]
pub fn rdma(
    _: &SuiteArgs,
    _: &str,
    _: &[usize],
    _: u64,
    _: Option<&Path>,
    _: &RdmaPipeline,
    _: &RdmaVersus,
) -> Result<(), Box<dyn Error>> {
    Err("this latency-lab was built without RDMA: cargo build --release -p tickbus-lab --features rdma".into())
}
