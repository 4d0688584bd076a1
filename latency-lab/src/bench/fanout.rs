//! Fan-out on shared memory: one reliable ring read by 1, 2 and 4 consumer processes, at a fixed
//! rate (open loop). Per subscriber count: the publisher's cost per message (TSC around each
//! publish, on its own core) and each subscriber's one-way latency.
//!
//! What should hold: the publisher's cost grows at most with the consumer lines it reads to
//! find the slowest (one more line per subscriber), and subscribers do not slow each other,
//! because each writes only its own consumer line and reads the slots nobody writes but the
//! publisher. On a two-core machine the consumers share the second core and yield when idle, so
//! from two subscribers on their latency includes the scheduler's turns: the publisher's cost is
//! the figure that says whether the ring scales.
use std::error::Error;

use crate::model::fanout::{FanoutReport, FanoutRow};

/// Runs the stream for each count in `counts`; fails if any subscriber lost, reordered or tore
/// a message.
pub fn run(rate: u64, seconds: f64, counts: &[usize], cores: (usize, usize)) -> Result<FanoutReport, Box<dyn Error>> {
    if !(seconds > 0.0 && seconds < 60.0) {
        // Consumers report per minute of stream: one line each below a minute.
        return Err(format!("--fanout-seconds takes more than 0 and less than 60 (got {seconds})").into());
    }
    let messages = ((rate as f64 * seconds) as u64).max(1);
    let mut rows = Vec::new();
    for &n in counts {
        eprintln!("latency-lab: fan-out to {n} consumer processes, {messages} messages at {rate} msg/s ...");
        let s = crate::bench::soak::stream("fanout", rate, messages, n, cores, true)?;
        if s.violations != 0 || s.delivered.iter().any(|d| *d != messages) {
            return Err(format!(
                "fan-out to {n}: delivered {:?} of {messages}, {} violations",
                s.delivered, s.violations
            )
            .into());
        }
        let mut mins = s.per_minute.clone();
        mins.sort_by_key(|m| m.consumer);
        if mins.len() != n || mins.iter().any(|m| m.messages != messages) {
            return Err(
                format!("fan-out to {n}: expected one record of {messages} messages per consumer: {mins:?}").into()
            );
        }
        rows.push(FanoutRow {
            subscribers: n,
            publish_p50_ns: s.publish_cost.value_at_quantile(0.5),
            publish_p99_ns: s.publish_cost.value_at_quantile(0.99),
            // A run shorter than a minute gives one line per consumer.
            sub_p50_ns: mins.iter().map(|m| m.p50_ns).collect(),
            sub_p99_ns: mins.iter().map(|m| m.p99_ns).collect(),
            late_sends: s.late_sends,
            delivered: s.delivered.clone(),
        });
    }
    let setup = "one reliable ring of 4096 slots, N consumer processes (sharing the second core, yielding when idle)";
    Ok(FanoutReport { transport: "shm".into(), setup: setup.into(), rate, messages, rows })
}
