//! The report as text: every section's table with each percentile as a ratio to the floor and
//! to the best peer, the pipeline's hops beside their floors, the RDMA rounds, fan-out, ITCH,
//! the journal, and the environment. Reads the model; measures nothing.
use std::fmt::Write as _;

use crate::model::book::{BookScale, TARGET_P99_X_FLOOR};
use crate::model::itch::ItchReport;
use crate::model::journal::JournalReport;
use crate::model::pipeline::{RdmaRun, Run};
use crate::model::rdma::{Versus, VsRow};
use crate::model::verdict::Status;
use crate::model::{rate_name, Report, Section, PERCENTILES};

impl Section {
    pub fn table(&self) -> String {
        let mut s = String::new();
        let what = match self.rate {
            Some(r) if self.mode == "wire" => format!(
                "from the wire: MoldUDP64 over a veth, latency from each datagram's send (its stamp) to taken (floors) or md published (tickbus), open loop at {} datagrams/s",
                rate_name(r)
            ),
            Some(r) => format!("one-way latency from the intended send time, open loop at {} msg/s", rate_name(r)),
            None => "round-trip time, closed-loop ping-pong".to_owned(),
        };
        let best = self.best_peer().map(|r| r.name.clone()).unwrap_or_else(|| "-".into());
        let _ = writeln!(s, "{what}, {} B messages; ns (x floor | x best peer = {best})", self.size);
        let _ = write!(s, "{:<50}", "transport");
        for (_, name) in PERCENTILES {
            let _ = write!(s, "{name:>22}");
        }
        let _ = writeln!(s, "{:>22}", "max");
        for r in &self.rows {
            let name = format!("{}{}", r.name, r.marks());
            let _ = write!(s, "{name:<50}");
            for (k, v) in r.ns.iter().enumerate() {
                let f = r.x_floor.as_ref().map_or("-".into(), |x| format!("{:.2}", x[k]));
                let b = r.x_best_peer.as_ref().map_or("-".into(), |x| format!("{:.2}", x[k]));
                let _ = write!(s, "{:>22}", format!("{v} ({f}|{b})"));
            }
            let _ = writeln!(s);
        }
        for r in &self.rows {
            let late = r.late_sends.map_or(String::new(), |l| format!("; {l} sends left late"));
            let suspect = r.suspect.as_ref().map_or(String::new(), |w| format!("; SUSPECT FLOOR: {w}"));
            let backlog = r.backlog.as_ref().map_or(String::new(), |b| format!("; {}", b.says()));
            let _ = writeln!(s, "  {}: {}{late}{suspect}{backlog}", r.name, r.note);
        }
        s
    }
}

impl Report {
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "latency-lab on {} (cores {}/{}, TSC {:.3} ticks/ns)\n",
            self.machine, self.cores.0, self.cores.1, self.ticks_per_ns
        );
        let _ = writeln!(s, "{}", panel(&self.targets()));
        if let Some(env) = &self.environment {
            let _ = writeln!(s, "{}", environment_table(env));
        }
        if let Some(env) = &self.environment_rdma {
            let _ = writeln!(s, "RDMA GUEST {}", environment_table(env));
        }
        if let Some(t) = &self.tick_to_trade {
            let _ = writeln!(s, "TICK-TO-TRADE\n{}", t.table());
        }
        if !self.pipeline.is_empty() {
            let _ = writeln!(s, "TRADING PIPELINE\n{}", pipeline_table(&self.pipeline));
        }
        if let Some(c) = &self.snapshot_cost {
            let _ = writeln!(s, "SNAPSHOT COST\n{}", snapshot_cost_table(c));
        }
        if let Some(c) = &self.join_cost {
            let _ = writeln!(s, "LATE JOINER COST\n{}", join_cost_table(c));
        }
        if !self.wire_trade.is_empty() {
            let _ = writeln!(s, "WIRE-TO-TRADE\n{}", wire_trade_table(&self.wire_trade));
        }
        if let Some(r) = &self.pipeline_rdma {
            let _ = writeln!(s, "{}", rdma_table(r));
        }
        if let Some(v) = &self.rdma_versus {
            let _ = writeln!(s, "{}", versus_table(v));
        }
        for sec in &self.sections {
            let _ = writeln!(s, "{}", sec.table());
        }
        if !self.throughput.is_empty() {
            let _ = writeln!(s, "throughput, sender flat out (x best peer)");
            for t in &self.throughput {
                let x = t.x_best_peer.map_or("-".into(), |x| format!("{x:.2}x"));
                let _ = writeln!(
                    s,
                    "  {:<32} {:>5} B {:>14.0} msg/s {:>10.1} MB/s  {x}",
                    t.name, t.size, t.msgs_per_s, t.mb_per_s
                );
            }
            let _ = writeln!(s);
        }
        for f in &self.fanout {
            let _ = writeln!(s, "{}", f.table());
        }
        if let Some(i) = &self.itch {
            let _ = writeln!(s, "{}", i.table());
        }
        if let Some(b) = &self.book {
            let _ = writeln!(s, "{}", b.table());
        }
        if let Some(j) = &self.journal {
            let _ = writeln!(s, "{}", j.table());
        }
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        s
    }
}

/// The environment in a few lines: who the host is, and every finding that is not plainly ok
/// (the full list, with remedies, is in report.json and `tickbus doctor`).
pub fn environment_table(env: &tickbus::doctor::Diagnosis) -> String {
    use tickbus::doctor::Status;
    let id = &env.identity;
    let mut s = format!(
        "ENVIRONMENT: {} ({}), kernel {}, {} CPUs, {} GiB, {}; doctor: {}\n",
        id.hostname,
        id.cpu_model,
        id.kernel,
        id.cpus,
        id.memory_bytes >> 30,
        id.virtualization,
        if env.ready() { "ready" } else { "NOT ready" }
    );
    for f in env.findings.iter().filter(|f| f.status >= Status::Warn) {
        let _ = writeln!(s, "  [{}] {}: {}", f.status.tag(), f.check, f.detail);
    }
    s
}

/// The report's table for the pipeline runs.
pub fn pipeline_table(runs: &[Run]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for r in runs {
        let _ = writeln!(
            s,
            "trading pipeline across processes at {} msg/s, open loop from each tick's intended time: {}",
            rate_name(r.rate),
            r.layout
        );
        let _ = writeln!(
            s,
            "{:<62}{:>10}{:>10}{:>10}{:>12}{:>26}",
            "hop (ns)", "p50", "p99", "p99.9", "max", "floor p50/p99 (x)"
        );
        for h in [&r.feed, &r.every_tick]
            .into_iter()
            .chain(&r.from_publish)
            .chain(&r.hops)
            .chain(&r.ttt_from_publish)
            .chain(&r.crossings)
        {
            let f = match (h.floor, h.x_floor) {
                (Some((a, b)), Some((x, y))) => format!("{a}/{b} ({x:.2}x/{y:.2}x)"),
                _ => "-".into(),
            };
            let _ = writeln!(s, "{:<62}{:>10}{:>10}{:>10}{:>12}{:>26}", h.name, h.p50, h.p99, h.p99_9, h.max, f);
        }
        let _ = writeln!(
            s,
            "  {} market-data messages published, {} seen by the trader ({} missed), {} orders, {} reports (hops are timed per order; the first row per market-data message)",
            r.published, r.ticks, r.ticks_missed, r.orders, r.reports
        );
        if !r.rounds.is_empty() {
            let _ = writeln!(
                s,
                "  the figures above are the median round's of {} (of the steady rounds whose chained floor held); per round, tick-to-trade p50 / its budget and the worst crossing / its floor:",
                r.rounds.len()
            );
            for (k, x) in r.rounds.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "    round {}{}: {} / {} ns ({:.2}x{}), worst crossing {:.2}x, floors p50 market data {} / orders {} / chained {} ns{}{}{}",
                    k + 1,
                    if x.floors_first { " (floors first)" } else { "" },
                    x.ttt_p50,
                    x.budget_p50,
                    x.ttt_p50 as f64 / x.budget_p50.max(1) as f64,
                    x.ttt_from_due_p50.map_or(String::new(), |d| format!("; {d} ns from the tick's due time")),
                    x.hops_x,
                    x.md_floor_p50,
                    x.order_floor_p50,
                    x.chain_floor_p50,
                    match x.chain_floor_p50 {
                        0 => String::new(),
                        c => format!(
                            " (the chain {:+} ns from the hop floors' sum{}{}){}",
                            c as i64 - (x.md_floor_p50 + x.order_floor_p50) as i64,
                            match (x.crossings_p50, x.chain_crossings_p50) {
                                (a, b) if a > 0 && b > 0 => format!("; two crossings per order {a} ns against the chain's {b}"),
                                _ => String::new(),
                            },
                            match x.relay_span_p50 {
                                0 => String::new(),
                                r => format!("; the relay's own span {r} ns"),
                            },
                            if x.chain_broken() {
                                "; the pipeline BEAT its chained floor (whole, or on its crossings): a broken floor, left out of tick-to-trade's verdict"
                            } else {
                                ""
                            }
                        ),
                    },
                    x.poll_pass.map_or(String::new(), |p| format!(
                        ", empty pass trader/floor reader {}/{} ns",
                        p.trader, p.floor
                    )),
                    x.backlog.as_ref().map_or(String::new(), |b| format!("; BACKLOGGED, left out: {b}"))
                );
            }
        } else if let Some(b) = &r.backlog {
            let _ = writeln!(s, "  {b}");
        }
        let _ = writeln!(
            s,
            "  tick-to-trade's budget: {} + the book's p50 ({} ns, in process and back to back, {}) + 100 ns, held against {}",
            match r.chain_floor {
                Some((p50, p99)) => format!(
                    "the chained floor's p50 ({p50} ns, p99 {p99}: the market-data floor's publisher, a bare relay on the \
                     trader's core answering the share of messages the trader answered, and the order floor's reader on \
                     the gateway's core, timed end to end in the same round between the same cores as tick-to-trade; \
                     the hop floors' sum undercounts the market-data hop, whose reader's RDTSC stamp does not wait \
                     for the slot's loads, while a relay must hold the data before it publishes: the same ordering \
                     puts the end of that read in the relay's span, and likely in the trader's receive -> book row; \
                     a round whose tick-to-trade beat the whole chain, or whose two crossings per order beat the \
                     chain's, is a broken floor, left out of tick-to-trade's verdict)"
                ),
                None => "the two hop floors' p50 (an older report)".into(),
            },
            r.book_p50,
            // An older report's figure is over every message.
            r.book_all_p50.map_or("over every message (an older report)".into(), |a| format!(
                "on the messages that move a top of book: the ones the trader sends its orders on; {a} ns over every message"
            )),
            judged_row(r)
        );
        if let Some(p) = &r.poll_pass {
            let model = match p.expected_wait_excess() {
                x if x > 0.0 => format!(
                    "by that model the trader's longer loop adds about {x:.0} ns to its market-data crossing (a model, not a \
                     measurement: the passes are timed in quiet spells, and passes of uneven length make the wait longer)"
                ),
                _ => "the trader's loop is no longer than the floor's, so its loop adds nothing to the crossing by that model".into(),
            };
            let _ = writeln!(
                s,
                "  one empty pass of the trader's loop (market data, reports, warming the book, {}the pause) {} ns against \
                 {} ns of the floor's bare reader (one look and the pause; median of windows of 64 empty passes in a row): a \
                 tick that lands while a loop is idle waits for its next look, typically about half the span between two; \
                 {model}",
                match p.trader_looks {
                    1 => String::new(),
                    n => format!("the market data again: {n} looks a pass, "),
                },
                p.trader,
                p.floor,
            );
        }
        if let Some(w) = &r.book_warmth {
            let _ = writeln!(
                s,
                "  the book on the messages that move a top among the day's first (p50/p90 ns, in process; {} messages a \
                 pass): back to back {}/{}; {} µs apart, timed from when due {}/{}; as far apart, warmed meanwhile as \
                 the trader's idle cycles warm it (here on every turn of the wait) {}/{}",
                w.messages,
                w.back_to_back.0,
                w.back_to_back.1,
                w.apart_ns / 1_000,
                w.apart.0,
                w.apart.1,
                w.warmed.0,
                w.warmed.1
            );
        }
        for t in r.targets() {
            let _ = writeln!(s, "  target: {}: {}: {} ({})", t.what, t.figure, t.status.says(), t.goal);
        }
        let _ = writeln!(s);
    }
    s
}

/// A late joiner's cost to the venue, round by round.
pub fn join_cost_table(c: &crate::model::pipeline::JoinCost) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "the venue's publish latency (tick due -> market data publish begins, ns) at {} msg/s while a second trader joins at 30% of the day and catches up from the journal (with its own gateway), and the same day without it; a recorder in both; paired rounds",
        rate_name(c.rate)
    );
    let _ = writeln!(
        s,
        "{:<28}{:>24}{:>24}{:>14}{:>14}",
        "round", "without p50/p99/p99.9", "with p50/p99/p99.9", "from journal", "live after"
    );
    for (k, r) in c.rounds.iter().enumerate() {
        let f = |p: (u64, u64, u64)| format!("{}/{}/{}", p.0, p.1, p.2);
        let name = format!("{}{}", k + 1, if r.with_first { " (with first)" } else { "" });
        let live = r.live_after_us.map_or("never: left out".to_string(), |us| format!("{:.1} ms", us as f64 / 1e3));
        let _ = writeln!(s, "{:<28}{:>24}{:>24}{:>14}{:>14}", name, f(r.without), f(r.with), r.from_journal, live);
        if let Some(b) = &r.backlog {
            let _ = writeln!(s, "  BACKLOGGED, left out: {b}");
        }
    }
    let t = c.target();
    let _ = writeln!(s, "  target: {}: {} ({})", t.figure, t.status.says(), t.goal);
    let _ = writeln!(
        s,
        "  the venue's core is its own: the recorder (in both days, parking when the ring is empty), the joiner and its gateway (yielding when idle) share the trader's core, so the figure is the joiner's cost to the publisher from another core (kernel work they cause may still land on the venue's core)"
    );
    s
}

/// The snapshot maker's cost to the venue, round by round.
pub fn snapshot_cost_table(c: &crate::model::pipeline::SnapshotCost) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "the venue's publish latency (tick due -> market data publish begins, ns) at {} msg/s with its {} snapshot maker (a whole book every {} s) and without it, each with its trader, in paired rounds",
        rate_name(c.rate),
        c.maker,
        c.every_secs
    );
    let _ = writeln!(
        s,
        "{:<28}{:>24}{:>24}{:>12}{:>10}",
        "round", "without p50/p99/p99.9", "with p50/p99/p99.9", "snapshots", "tap lost"
    );
    for (k, r) in c.rounds.iter().enumerate() {
        let f = |p: (u64, u64, u64)| format!("{}/{}/{}", p.0, p.1, p.2);
        let name = format!("{}{}", k + 1, if r.with_first { " (with first)" } else { "" });
        let _ = writeln!(s, "{:<28}{:>24}{:>24}{:>12}{:>10}", name, f(r.without), f(r.with), r.snapshots, r.tap_lost);
        if let Some(b) = &r.backlog {
            let _ = writeln!(s, "  BACKLOGGED, left out: {b}");
        }
    }
    let t = c.target();
    let _ = writeln!(s, "  target: {}: {} ({})", t.figure, t.status.says(), t.goal);
    s
}

/// The wire-to-trade runs' table: per ingest and rate, the hops in order, then the end to end.
pub fn wire_trade_table(runs: &[crate::model::wire_trade::WireTrade]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for r in runs {
        let _ = writeln!(
            s,
            "wire-to-trade, feed --ingest {} at {} datagrams/s, open loop, one ITCH message per datagram, over a veth; {}",
            r.ingest,
            rate_name(r.rate),
            r.layout
        );
        let _ = writeln!(s, "{:<72}{:>10}{:>10}{:>10}{:>12}", "hop (ns)", "p50", "p99", "p99.9", "max");
        for h in r.hops.iter().chain([&r.every_tick, &r.ordered_tick, &r.total]) {
            let max = if h.max == 0 { "-".to_string() } else { h.max.to_string() };
            let _ = writeln!(s, "{:<72}{:>10}{:>10}{:>10}{:>12}", h.name, h.p50, h.p99, h.p99_9, max);
        }
        let _ = writeln!(
            s,
            "  {} datagrams sent, {} messages published ({} lost, in {} gaps published), {} seen by the trader ({} missed), {} orders, {} reports",
            r.sent, r.published, r.lost, r.gaps_published, r.ticks, r.missed, r.orders, r.reports
        );
        let _ = writeln!(
            s,
            "  the feed's two hops are per stamped datagram (the second over those that published; it ends when the datagram's last message is published, the ring hop starts as its first one's publish begins, so the two overlap by that); the every-tick row per market-data message (a datagram may make several), {}; the rest per order{}",
            if r.hops.iter().any(|h| h.name.contains("by difference")) {
                "the ring hop by difference of percentiles (this feed gave no publish lag)"
            } else {
                "the ring hop per datagram (its first message, timed by the trader from the feed's publish lag, which counts from the wire send; a lag over 65,535 ns is stored as that, so the hop's tail errs long)"
            },
            if r.ingest == "udp" { "; udp: one ingress stamp per recvmmsg batch, so a batch's later datagrams wait for the earlier ones in the feed hop" } else { "" }
        );
        if let Some(h) = &r.halted {
            let _ = writeln!(s, "  the trader halted ({h}): its orders stopped there");
        }
        if let Some(b) = &r.backlog {
            let _ = writeln!(s, "  {b}");
        }
        let _ = writeln!(s);
    }
    s
}

/// Which tick-to-trade row the budget was held against, over the rounds (or the one run).
fn judged_row(r: &crate::model::pipeline::Run) -> String {
    let (n, m) = match r.rounds.len() {
        0 => (usize::from(r.judged_from_publish()), 1),
        m => (r.rounds.iter().filter(|x| x.judged_from_publish()).count(), m),
    };
    format!(
        "tick-to-trade {} (the floors start at a publish, and the venue's work before it is the first row; a run is \
         judged from the due time when the gateway did not time every order from its publish)",
        crate::model::pipeline::judged_from(n, m)
    )
}

/// The RDMA pipeline's table.
pub fn rdma_table(r: &RdmaRun) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "trading pipeline over RDMA in the guest at {} msg/s (exchange on rxe0: ud-mcast market data, gateway on rdma-rc; trader on rxe1), rounds interleaved with perftest",
        rate_name(r.rate)
    );
    for (k, x) in r.rounds.iter().enumerate() {
        let _ = writeln!(
            s,
            "  round {}: tick-to-trade p50 {} ns, p99 {} ns{}; ib_send_lat UD {} + ib_write_lat {} + book {} = {} ns; {:.2}x ({} ticks, {} orders){}",
            k + 1,
            x.ttt_p50,
            x.ttt_p99,
            x.ttt_from_due_p50.map_or(String::new(), |d| format!(
                " from the market data's publish (p50 {d} ns from the tick's due time)"
            )),
            x.ud_one_way,
            x.rc_one_way,
            r.book_p50,
            x.budget,
            x.ratio,
            x.ticks,
            x.orders,
            x.alone.map_or(String::new(), |(u, c)| format!(
                "; the two perftests ran at once (one at a time: UD {u}, RC {c}, {:.2}x)",
                x.ttt_p50 as f64 / (u + c + r.book_p50).max(1) as f64
            ))
        );
        if let Some(b) = &x.backlog {
            let _ = writeln!(s, "    {b}");
        }
    }
    let t = r.target();
    let _ = writeln!(s, "  target: {}: {} ({})", t.figure, t.status.says(), t.goal);
    for h in &r.hops {
        let _ = writeln!(s, "  {:<62} p50 {:>10} ns  p99 {:>10} ns", h.name, h.p50, h.p99);
    }
    s
}

/// Both tables as text.
pub fn versus_table(v: &Versus) -> String {
    let mut s = String::new();
    let mut one = |title: &str, unit: &str, rows: &[VsRow], fmt: fn(f64) -> String| {
        let _ = writeln!(
            s,
            "{title} ({} rounds, perftest and tickbus back to back in each, in turn first; median ratio [min-max])",
            v.rounds
        );
        for r in rows {
            let per: Vec<String> =
                r.ours.iter().zip(&r.theirs).map(|(o, t)| format!("{}/{}", fmt(*o), fmt(*t))).collect();
            let _ = writeln!(
                s,
                "  {:<34} {:>5} B  {:.2}x {} [{:.2}-{:.2}]   {unit} per round: {}{}",
                r.name,
                r.size,
                r.median,
                r.tool,
                r.min,
                r.max,
                per.join(" "),
                if r.note.is_empty() { String::new() } else { format!("  ({})", r.note) }
            );
        }
        let _ = writeln!(s);
    };
    if !v.rtt.is_empty() {
        one(
            "RDMA RTT p50 beside 2 x perftest's typical one-way, lower is better",
            "ns tickbus/perftest",
            &v.rtt,
            |x| format!("{x:.0}"),
        );
    }
    if !v.rate.is_empty() {
        one(
            "RDMA message rate beside perftest's bandwidth tools, higher is better",
            "msg/s tickbus/perftest",
            &v.rate,
            |x| format!("{x:.0}"),
        );
    }
    s
}

impl JournalReport {
    pub fn table(&self) -> String {
        let mut s = format!("journal: {} messages of {} B\n", self.messages, self.message_bytes);
        let (ours, floor): (Vec<u64>, Vec<u64>) = self.paired_ns.iter().copied().unzip();
        let ratio = match crate::model::verdict::Paired::speedup(&ours, &floor) {
            Some(p) => format!(
                "{} floor (target >= 0.8x; median of {} paired rounds' ratios, {} noisy left out",
                p.ratio.as_ratio(),
                p.kept,
                p.noisy
            ),
            None => format!("{:.2}x floor (medians of {} interleaved rounds", self.recorder_x_floor, self.rounds),
        };
        s += &format!(
            "  recorder            {:>12.0} msg/s   bare sequential write of the same bytes (floor) {:>12.0} msg/s   {ratio}; queue full {} times in the last round)\n",
            self.recorder_msgs_per_s, self.floor_write_msgs_per_s, self.recorder_queue_full
        );
        let itch = self.itch_decode_msgs_per_s.map_or("-".into(), |r| format!("{r:.0} msg/s"));
        s += &format!(
            "  journal read        {:>12.0} msg/s {:>6.2} GB/s   ITCH decode (same run) {itch}\n",
            self.read_msgs_per_s, self.read_gb_per_s
        );
        match &self.python_read {
            Some(p) if p.note.is_none() => {
                s += &format!(
                    "  Python into numpy   {:>12.0} msg/s   Rust reader decoding each message {:>12.0} msg/s   {:.2}x Rust (target >= 0.5x; {} messages, medians of {} interleaved rounds)\n",
                    p.python_msgs_per_s, p.rust_msgs_per_s, p.x_rust, p.messages, p.rounds
                )
            }
            Some(p) => s += &format!("  Python into numpy   not measured: {}\n", p.note.as_deref().unwrap_or("")),
            None => {}
        }
        if let Some(c) = &self.catch_up {
            s += &format!(
                "  late-join catch-up  {:>12.0} msg/s   the journal's own read (floor) {:>12.0} msg/s   {:.2}x floor (target >= 0.8x; median of {} paired rounds, {:.2}-{:.2}x; {} messages caught up in {:.0} ms)\n",
                c.merge_msgs_per_s, c.journal_read_msgs_per_s, c.x_floor, c.rounds, c.x_min, c.x_max, c.messages,
                c.messages as f64 / c.merge_msgs_per_s * 1e3
            );
        }
        for j in &self.join_live {
            s += &format!(
                "  join at {:<5}       replay from the open {:>8.1} ms ({} messages)   load a snapshot {:>6.1} ms ({} orders in {} chunks; its maker took {:.1} ms; {:.0}x the replay's speed)   medians of {}; a snapshot joiner also waits for the next snapshot (at most the maker's period, 1 s by default) and takes what came meanwhile from the journal: it is live sooner once the replay takes longer than that wait\n",
                j.at, j.from_open_ms, j.position, j.from_snapshot_ms, j.snapshot_orders, j.snapshot_chunks,
                j.snapshot_publish_ms, j.x_faster, j.rounds
            );
        }
        if let Some(x) = &self.sustained {
            s += &format!(
                "  sustained           {} msg/s for {:.1} s: {} published, {} recorded ({} lost), achieved {:.0} msg/s, ring full {} times\n",
                x.rate,
                x.seconds,
                x.published,
                x.recorded,
                x.published - x.recorded,
                x.achieved_msgs_per_s,
                x.full
            );
        }
        s
    }
}

impl ItchReport {
    pub fn table(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "ITCH 5.0 decode: generated day (seed {}, {} stocks), {} messages, {:.1} MB in memory, best of {} passes",
            self.seed,
            self.stocks,
            self.messages,
            self.file_bytes as f64 / 1e6,
            self.passes
        );
        let _ = writeln!(s, "{:<56} {:>14} {:>10} {:>10}", "decoder", "msgs/s", "GB/s", "x itchy");
        for d in &self.decode {
            let _ = writeln!(s, "{:<56} {:>14.0} {:>10.2} {:>9.2}x", d.name, d.msgs_per_s, d.gb_per_s, d.x_itchy);
        }
        if !self.paired_ns.is_empty() {
            let per_round: Vec<String> =
                self.paired_ns.iter().map(|(o, i)| format!("{:.2}x", *i as f64 / (*o).max(1) as f64)).collect();
            let _ = writeln!(
                s,
                "next_record beside itchy, back to back in each of {} rounds (order alternating): {} (the verdict takes the median of the rounds whose itchy time stayed within 2x of its median)",
                self.paired_ns.len(),
                per_round.join(" ")
            );
        }
        let b = &self.book;
        let _ = writeln!(
            s,
            "order book apply: mean {:.1} ns/msg over the whole day; per message p50 {} ns, p99 {} ns, p99.9 {} ns, max {} ns (each includes the {} ns timer pair; {}); {} orders resting at the close",
            b.mean_ns, b.p50_ns, b.p99_ns, b.p999_ns, b.max_ns, b.timer_ns, timing(b.fenced), b.resting_orders_at_close
        );
        s
    }
}

/// How a book figure was timed, for its line.
fn timing(fenced: Option<bool>) -> &'static str {
    match fenced {
        Some(true) => "timed between fenced TSC reads, so each holds its message's misses; the mean is the day's time per message, the fences' included",
        Some(false) => "timed between plain TSC reads (the lab fences only on x86_64): not comparable with fenced figures",
        None => "timing not recorded: fenced if the report was made at or after commit 702c100, plain TSC reads (not comparable) before it",
    }
}

impl BookScale {
    pub fn table(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "order book at TotalView scale: generated day (seed {}, {} stocks), {} messages, {} live orders at the peak ({} at the close)",
            self.seed, self.stocks, self.messages, self.peak_orders, self.close_orders
        );
        let _ = writeln!(
            s,
            "  floor: {}; both with room for {} orders, touched before timing",
            self.floor_is, self.reserved_orders
        );
        let _ = writeln!(
            s,
            "  {:<8} {:>9} {:>9} {:>9} {:>10} {:>9}  (ns per message, median of {} rounds kept; each includes the {} ns timer pair; {})",
            "",
            "p50",
            "p99",
            "p99.9",
            "max",
            "mean",
            self.rounds.len() - self.noisy_rounds,
            self.timer_ns,
            timing(self.fenced)
        );
        for (name, c) in [("book", &self.book), ("floor", &self.floor)] {
            let _ = writeln!(
                s,
                "  {:<8} {:>9} {:>9} {:>9} {:>10} {:>9.1}",
                name, c.p50_ns, c.p99_ns, c.p999_ns, c.max_ns, c.mean_ns
            );
        }

        let _ = writeln!(
            s,
            "  book / floor per round, median [spread]: p50 {}, p99 {}, p99.9 {}",
            self.p50_ratio.as_ratio(),
            self.p99_ratio.as_ratio(),
            self.p999_ratio.as_ratio()
        );
        let _ = write!(s, "  rounds (book/floor p99, ns):");
        for r in &self.rounds {
            let _ = write!(s, " {}/{}{}", r.book.p99_ns, r.floor.p99_ns, if r.noisy { " (noisy)" } else { "" });
        }
        let _ = writeln!(s);
        if !self.by_type.is_empty() {
            let _ = write!(s, "  by message type, one pass each after the rounds (book/floor p50 and p99, ns):");
            for t in &self.by_type {
                let _ = write!(
                    s,
                    " {} x{}: {}/{}, {}/{};",
                    t.code, t.messages, t.book_p50_ns, t.floor_p50_ns, t.book_p99_ns, t.floor_p99_ns
                );
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(
            s,
            "  memory per live order at the peak: book {:.0} B, floor {:.0} B (resident memory of the room reserved, over the peak's live orders){}",
            self.book_bytes_per_order,
            self.floor_bytes_per_order,
            self.most_spilled
                .map(|n| format!("; at most {n} orders spilled at once (their slot in the order table held an older live order: each lookup of one also reads a hash map)"))
                .unwrap_or_default()
        );
        let verdict = match self.verdict {
            Status::Noisy => "no verdict: half the rounds or more were noisy".to_string(),
            other => other.says().to_string(),
        };
        let _ = writeln!(
            s,
            "  target: book p99 <= {TARGET_P99_X_FLOOR}x the floor's (median of per-round ratios): {verdict}{}",
            if self.noisy_rounds > 0 {
                format!(" ({} noisy rounds left out)", self.noisy_rounds)
            } else {
                String::new()
            }
        );
        s
    }
}

/// The panel as text, for the top of table.txt.
pub fn panel(targets: &[crate::model::verdict::Target]) -> String {
    use std::fmt::Write as _;
    let mut s = String::from("VERDICTS\n");
    for t in targets {
        let _ = writeln!(s, "  [{:<22}] {}: {}; target {}", t.status.says(), t.what, t.figure, t.goal);
    }
    if targets.is_empty() {
        s.push_str("  (no part with a target ran)\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use crate::model::rdma::{Versus, VsRow};

    #[test]
    fn the_panel_names_each_target_its_figure_and_its_status() {
        use crate::model::verdict::{Status, Target};
        let t = |what: &str, status| Target {
            what: what.into(),
            figure: "1.20x [1.10-1.30]".into(),
            goal: "<= 1.5x".into(),
            status,
            anchor: "book".into(),
        };
        let p = super::panel(&[t("the book", Status::Met), t("tick-to-trade", Status::Backlogged)]);
        assert!(p.starts_with("VERDICTS\n"), "{p}");
        assert!(p.contains("[met                   ] the book: 1.20x [1.10-1.30]; target <= 1.5x"), "{p}");
        assert!(p.contains("[backlogged: no verdict] tick-to-trade"), "{p}");
        assert!(super::panel(&[]).contains("no part with a target ran"));
    }

    #[test]
    fn the_book_table_says_its_verdict_and_what_it_left_out() {
        let scale = crate::model::book::tests::scale;
        let t = scale(&[(160, 100), (140, 100), (170, 100)]).table();
        assert!(t.contains("p99 1.60x [1.40-1.70]") && t.contains("NOT met"), "{t}");
        let t = scale(&[(100, 100), (100, 100), (100, 500)]).table();
        assert!(t.contains(": met (1 noisy rounds left out)") && t.contains("100/500 (noisy)"), "{t}");
        let t = scale(&[(100, 20), (100, 100), (100, 500)]).table();
        assert!(t.contains("no verdict: half the rounds or more were noisy (2 noisy rounds left out)"), "{t}");
    }

    /// The book's line says how it was timed, and a report that does not say (made before the
    /// field) says that, not "plain".
    #[test]
    fn the_book_table_says_how_it_was_timed() {
        let mut b = crate::model::book::tests::scale(&[(160, 100)]);
        assert!(b.table().contains("timed between fenced TSC reads"), "{}", b.table());
        b.fenced = Some(false);
        assert!(b.table().contains("timed between plain TSC reads (the lab fences only on x86_64)"), "{}", b.table());
        let mut json = serde_json::to_value(&b).unwrap();
        json.as_object_mut().unwrap().remove("fenced");
        let old: crate::model::book::BookScale = serde_json::from_value(json).unwrap();
        assert_eq!(old.fenced, None);
        assert!(old.table().contains("timing not recorded: fenced if the report was made at or after commit 702c100"));
    }

    #[test]
    fn rows_take_the_median_ratio_and_its_spread() {
        let r =
            VsRow::new("t", "ib_write_lat", 64, vec![300.0, 100.0, 240.0], vec![200.0, 100.0, 100.0], String::new());
        assert_eq!(r.ratios, vec![1.5, 1.0, 2.4]);
        assert_eq!((r.median, r.min, r.max), (1.5, 1.0, 2.4));
        let even = VsRow::new("t", "x", 64, vec![1.0, 3.0], vec![1.0, 1.0], String::new());
        assert_eq!(even.median, 2.0);
        let v = Versus { rounds: 3, rtt: vec![r], rate: vec![] };
        let t = super::versus_table(&v);
        assert!(t.contains("1.50x ib_write_lat [1.00-2.40]") && t.contains("300/200 100/100 240/100"), "{t}");
    }
}
