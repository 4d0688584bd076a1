//! The venue's publish latency while a late joiner catches up (issue 26's benchmark): the
//! pipeline's apps (`tickbus exchange` on the first core, `tickbus trader` on the second) with
//! `tickbus record` journalling the market data, in paired rounds of two days back to back: one
//! as it is, one where, at 30% of the day, a second trader (`--join` the journal, with its own
//! `tickbus gateway`) starts, catches up from the journal and goes live. The figure is the
//! venue's own tick due -> publish begins, with the joiner against without.
//!
//! The venue's core is its own, as a desk lays out a publisher: the recorder (in both days),
//! the joiner and its gateway run on the trader's core (and the lab thread that starts them, so
//! no start-up takes a slice of the venue's core). What the figure holds is what a joiner costs
//! the publisher from another core (the ring it reads, the journal's pages, the caches and memory
//! they share, and kernel work the processes cause that lands on the venue's core, a journal's
//! writeback say), not time slices its processes take: on two cores with the joiner unpinned,
//! its catch-up took the venue's and every round was backlogged. The exchange starts on the
//! trader's core too and moves itself before its day: its set-up (one NUMA node here) is the
//! same in both days. The trader shares its core, so its own latency in these days is not a
//! figure of this benchmark.
use std::error::Error;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tickbus_apps::summary::{ExchangeSummary, HopStats, TraderSummary};

use super::cleanup::{Rings, TempDir};
use super::pipeline::{Kill, Spec};
use crate::model::pipeline::{JoinCost, JoinRound};

/// `s.rounds` paired rounds at `s.rate` (the joiner first in every second round).
pub fn run(s: &Spec<'_>) -> Result<JoinCost, Box<dyn Error>> {
    if s.cores.len() < 2 || !s.tickbus.is_file() {
        return Err(format!("the join benchmark needs two cores and {}", s.tickbus.display()).into());
    }
    // The rounds run with this thread on the trader's core, so every process they start begins
    // there (the venue moves itself to its own core): neither the lab's waking nor a child's
    // start-up takes a time slice of the venue's core. The children (and the thread reading
    // the recorder's stderr) inherit that core, as wanted; the lab's cores come back after.
    let trader_core = s.cores[1];
    tickbus::agent::on_core(trader_core, || rounds(s))
        .map_err(|e| format!("pinning the lab to core {trader_core}: {e}"))?
}

fn rounds(s: &Spec<'_>) -> Result<JoinCost, Box<dyn Error>> {
    let pct = |h: &HopStats| (h.p50, h.p99, h.p99_9);
    let mut rounds = Vec::new();
    for k in 0..s.rounds.max(1) {
        let with_first = k % 2 == 1;
        let mut without = None;
        if !with_first {
            without = Some(day(s, k, false)?.0);
        }
        let (with, joiner) = day(s, k, true)?;
        let joiner = joiner.ok_or("the joiner ran yet printed no summary")?;
        // A joiner that never went live (the day ended first) measured no catch-up beside a
        // live day: the round is kept, said, and left out of the verdict.
        let join = joiner.join.as_ref().ok_or("the joiner printed no join summary")?;
        let without = match without {
            Some(w) => w,
            None => day(s, k, false)?.0,
        };
        let backlog = match (without.md.backlog(s.rate as f64), with.md.backlog(s.rate as f64)) {
            (None, None) => None,
            (a, b) => Some(
                [a.map(|a| format!("without the joiner: {a}")), b.map(|b| format!("with it: {b}"))]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
        };
        let r = JoinRound {
            without: pct(&without.feed_ns),
            with: pct(&with.feed_ns),
            from_journal: join.from_journal,
            live_after_us: join.live_after_us,
            with_first,
            backlog,
        };
        eprintln!(
            "latency-lab: late joiner at {} msg/s, round {}: publish p99 {} ns while it caught up ({} messages from the journal{}), {} ns without{}",
            crate::model::rate_name(s.rate),
            k + 1,
            r.with.1,
            r.from_journal,
            if r.live_after_us.is_none() { "; it never went live: left out" } else { "" },
            r.without.1,
            if r.backlog.is_some() { " (backlogged)" } else { "" }
        );
        rounds.push(r);
    }
    Ok(JoinCost { rate: s.rate, rounds })
}

/// One day: the venue, its trader and the recorder; with `join`, the joiner and its gateway
/// from 30% of the day. Returns the venue's summary and the joiner's.
fn day(s: &Spec<'_>, round: usize, join: bool) -> Result<(ExchangeSummary, Option<TraderSummary>), Box<dyn Error>> {
    let tag = format!("lab-join-{}-{round}-{}", std::process::id(), u8::from(join));
    let (md, dir) = (format!("{tag}-md"), TempDir::new(&format!("{tag}-journal")));
    let journal = dir.path();
    let ring = |n: &str| format!("{tag}-{n}");
    let (rate, max) = (s.rate.to_string(), s.messages.to_string());
    let itch = s.itch.to_str().ok_or("ITCH path not UTF-8")?;
    let journal_s = journal.to_str().ok_or("temp path not UTF-8")?.to_owned();
    let spawn = |args: &[&str]| -> Result<Kill, Box<dyn Error>> {
        let child = Command::new(s.tickbus)
            .args(args)
            .arg("--json")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", s.tickbus.display()))?;
        Ok(Kill(Some(child)))
    };
    let (c0, c1) = (s.cores[0].to_string(), s.cores[1].to_string());
    let (o0, e0, o1, e1) = (ring("orders0"), ring("execs0"), ring("orders1"), ring("execs1"));
    // Made before the apps: dropped after them, so rings and journal go on every way out.
    let _rings = Rings::new(&[&md, &o0, &e0, &o1, &e1]);
    let ex = spawn(&[
        "exchange", "--itch", itch, "--rate", &rate, "--max", &max, "--md", &md, "--orders", &o0, "--execs", &e0,
        "--core", &c0, "-q",
    ])?;
    // On the trader's core, and it parks when the ring is empty: spinning, it would take time
    // slices from the trader (with --idle backoff and unpinned, the venue fell up to 1 ms behind
    // its schedule at 100k msg/s with no joiner at all).
    let mut recorder = spawn(&[
        "record",
        "--ring",
        &md,
        "--journal",
        &journal_s,
        "--wait-secs",
        "30",
        "--idle",
        "park",
        "--core",
        &c1,
        "--writer-core",
        &c1,
    ])?;
    // The recorder attached before the trader: the exchange starts the day once the trader is
    // in, and the journal must hold it from its first message.
    recording(&mut recorder)?;
    let tr = spawn(&["trader", "--md", &md, "--orders", &o0, "--execs", &e0, "--core", &c1, "-q"])?;
    let limit = Duration::from_secs_f64(s.messages as f64 / s.rate as f64 + 60.0);
    let deadline = Instant::now() + limit;
    let mut joiner = None;
    if join {
        // 30% into the day (from about when it started: the trader attached).
        std::thread::sleep(Duration::from_secs_f64(0.3 * s.messages as f64 / s.rate as f64 + 0.2));
        // Both yield the core when idle, as on a machine whose cores the venue and its trader
        // already own: the joiner's catch-up is what takes CPU, not its polling once live.
        let gw = spawn(&[
            "gateway",
            "--md",
            &md,
            "--orders",
            &o1,
            "--execs",
            &e1,
            "--exit-with-trader",
            "--idle",
            "yield",
            "--core",
            &c1,
            "-q",
        ])?;
        let b = spawn(&[
            "trader", "--md", &md, "--orders", &o1, "--execs", &e1, "--join", &journal_s, "--idle", "yield", "--core",
            &c1, "-q",
        ])?;
        joiner = Some((gw, b));
    }
    let _: TraderSummary = tr.finish("trader", deadline)?;
    let ex: ExchangeSummary = ex.finish("exchange", deadline)?;
    let joined = match joiner {
        Some((gw, b)) => {
            let b: TraderSummary = b.finish("joining trader", deadline)?;
            let _: serde_json::Value = gw.finish("joiner's gateway", deadline)?;
            Some(b)
        }
        None => None,
    };
    if let Some(c) = recorder.0.as_ref() {
        // SAFETY: kill(2) on our own child, not yet reaped: it ends its recording and exits.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
    }
    let _: serde_json::Value = std::mem::replace(&mut recorder, Kill(None)).finish("recorder", deadline)?;
    Ok((ex, joined))
}

/// Waits (30 s at most) until the recorder says it is recording; its stderr is read to the end
/// by a thread of its own from then on (a full pipe would stall it).
fn recording(recorder: &mut Kill) -> Result<(), Box<dyn Error>> {
    use std::io::BufRead;
    let err = recorder.0.as_mut().and_then(|c| c.stderr.take()).ok_or("the recorder has no stderr")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if line.contains("recording") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(30)).map_err(|_| "the recorder did not start recording within 30 s".into())
}
