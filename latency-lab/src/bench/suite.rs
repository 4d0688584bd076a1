//! What the lab runs besides the default suite (`default_suite`): the RDMA run, the two-host
//! fan-out, the echo child, and the row makers every run shares.
use std::error::Error;
use std::path::Path;
#[cfg(feature = "rdma")]
use std::time::Duration;
use std::time::SystemTime;

#[cfg(feature = "rdma")]
use tickbus::time::Tsc;
#[cfg(feature = "rdma")]
use tickbus_codecs::synth::{write_itch, DayConfig};

use crate::bench::harness::{self, RunSpec};
use crate::bench::peers::tickbus_shm;
use crate::bench::transport::{CrossProcess, InProcess};
#[cfg(feature = "rdma")]
use crate::model::Section;
use crate::model::{Kind, Report, Row, ThroughputRow};
use crate::SuiteArgs;

pub(super) fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let n = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {n} cores")
}

pub(super) fn kind_of(name: &str) -> Kind {
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

pub(super) fn pp<T: InProcess>(t: &mut T, spec: &RunSpec) -> Result<Row, Box<dyn Error>> {
    let t0 = SystemTime::now();
    let h = harness::ping_pong(t, spec).map_err(|e| format!("{}: {e}", t.name()))?;
    Ok(Row::new(t.name(), kind_of(&t.name()), t.note(), h).taken_since(t0))
}

pub(super) fn pp2<T: CrossProcess + Sync>(t: &T, spec: &RunSpec) -> Result<Row, Box<dyn Error>> {
    let t0 = SystemTime::now();
    let h = harness::ping_pong_processes(t, spec).map_err(|e| format!("{}: {e}", t.name()))?;
    Ok(Row::new(t.name(), kind_of(&t.name()), t.note(), h).taken_since(t0))
}

pub(super) fn ol<T: InProcess>(t: &mut T, spec: &RunSpec, rate: u64) -> Result<Row, Box<dyn Error>> {
    let t0 = SystemTime::now();
    let o = harness::open_loop(t, spec, rate).map_err(|e| format!("{}: {e}", t.name()))?;
    let mut r = Row::new(t.name(), kind_of(&t.name()), t.note(), o.latency_ns).taken_since(t0);
    r.late_sends = Some(o.late_sends);
    r.backlog = o.behind.is_backlogged().then_some(o.behind);
    Ok(r)
}

pub(super) fn tp<T: InProcess>(t: &mut T, spec: &RunSpec) -> Result<ThroughputRow, Box<dyn Error>> {
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
        crate::bench::peers::iceoryx::Iceoryx2::KEY => {
            harness::echo_child(&crate::bench::peers::iceoryx::Iceoryx2, ping, pong, size, total, core, ticks_per_ns)
        }
        other => Err(format!("unknown echo peer {other:?}").into()),
    }
}

pub use crate::bench::pipeline::RdmaPipeline;

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
    use crate::bench::mcast_pingpong::UdMcast;
    use crate::bench::rdma_pingpong::RdmaRc;
    use crate::bench::rdma_rounds::{back_to_back, mcast_rate, rc_rate};
    use crate::model::rdma::{Versus, VsRow};
    use tickbus::rdma::WriteMode;
    let d: Vec<&str> = devices.split(',').collect();
    let [da, db] = d[..] else {
        return Err(format!("--devices takes two device names, e.g. rxe0,rxe1 (got {devices:?})").into());
    };
    let ticks_per_ns = Tsc::new().measure_ticks_per_ns(Duration::from_millis(200));
    let cores = (a.core_a, a.core_b);
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut rep = Report { machine: machine(), command, cores, ticks_per_ns, ..Default::default() };
    rep.diagnose(true, crate::bench::JITTER_WINDOW);
    let rounds = vs.rounds.max(1);
    let mut versus = Versus { rounds: rounds as u32, ..Versus::default() };
    for &size in sizes {
        let spec = RunSpec { size, iterations, warmup: (iterations / 10).max(10), cores, ticks_per_ns };
        // Per transport (WRITE, WRITE_WITH_IMM, ud-mcast): tickbus's RTT p50 and perftest's RTT.
        let mut per: [(Vec<f64>, Vec<f64>); 3] = Default::default();
        let mut rows = Vec::new();
        for round in 1..=rounds {
            let perftest = || -> Result<(u64, u64), Box<dyn Error>> {
                let (write, _) =
                    crate::bench::perftest::one_way("ib_write_lat", &[], (da, db), size, iterations, ticks_per_ns)?;
                let (send, _) = crate::bench::perftest::one_way(
                    "ib_send_lat",
                    &["-c", "UD"],
                    (da, db),
                    size,
                    iterations,
                    ticks_per_ns,
                )?;
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
            rep.notes.push(crate::bench::perftest::compare(p, size, &sec.rows)?);
        }
        rep.sections.push(sec);
    }
    // perftest twice a round: as it runs by default (one WR per doorbell) and chaining as many
    // WRs per post as tickbus's publish_batch does (`--post_list`), the stricter yardstick.
    // perftest wants a whole number of chains: the chained run sends n rounded down to a
    // multiple of 32 (at least 32). The two perftest runs swap order each round, as perftest
    // and tickbus do, so drift within the boot does not favour either.
    use tickbus::rdma::MAX_CHAIN;
    let chain = MAX_CHAIN.to_string();
    let chained = ["--post_list", chain.as_str()];
    let pt_rates = |tool: &str, extra: &[&str], size: usize, n: u64, round: usize| {
        let one = || crate::bench::perftest::msg_rate(tool, extra, (da, db), size, n);
        let whole = (n / MAX_CHAIN as u64).max(1) * MAX_CHAIN as u64;
        let many = || crate::bench::perftest::msg_rate(tool, &[extra, &chained[..]].concat(), (da, db), size, whole);
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
        let got = |v: &[crate::bench::rdma_rounds::RateRun]| {
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
        rep.fanout.push(crate::bench::rdma_fanout::rc((da, db), r, m, &[1, 2, 4], ticks_per_ns)?);
        rep.fanout.push(crate::bench::rdma_fanout::mcast((da, db), r, m, &[1, 2, 4], ticks_per_ns)?);
    }
    if pipe.rounds > 0 {
        let day = DayConfig::new(1, 20, pipe.messages * 2);
        let mut bytes = Vec::new();
        write_itch(day, &mut bytes)?;
        std::fs::create_dir_all(&a.out)?;
        let file = a.out.join("pipeline-day.itch");
        std::fs::write(&file, &bytes)?;
        let tickbus = a.tickbus.clone().unwrap_or_else(crate::bench::pipeline::default_tickbus);
        eprintln!("latency-lab: trading pipeline over RDMA, {} rounds beside perftest ...", pipe.rounds);
        rep.pipeline_rdma =
            Some(crate::bench::pipeline::rdma_rounds(&tickbus, &file, (da, db), pipe, iterations, ticks_per_ns)?);
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
        return crate::bench::fanout_hosts::subscriber_side(var("RIG_PEER_ADDR")?.parse()?);
    }
    let ticks_per_ns = Tsc::new().measure_ticks_per_ns(Duration::from_millis(200));
    let r = crate::bench::fanout_hosts::publisher_side(rate, messages, &[1, 2, 4], rounds, ticks_per_ns)?;
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

/// The environment, as measured for a report.
impl Report {
    /// Runs `tickbus doctor`'s checks for the cores the lab pins to and keeps them in the report,
    /// watching those cores for `jitter` (zero: not watched) for the time taken from them.
    pub fn diagnose(&mut self, require_rdma: bool, jitter: std::time::Duration) {
        let mut o = tickbus::doctor::DoctorOptions::default();
        o.cores = vec![self.cores.0, self.cores.1];
        o.require_rdma = require_rdma;
        o.jitter_window = jitter;
        self.environment = Some(tickbus::doctor::diagnose(&o));
    }
}
