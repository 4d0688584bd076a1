//! `tickbus stat` and `tickbus ring list`: every stream on this host in one view, from the
//! processes' counters files and the ring headers (the joining lives in `tickbus::stat`).
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::Args;
use tickbus::shm::ShmOptions;
use tickbus::stat::{prometheus, snapshot, Snapshot};

#[derive(Args)]
pub struct StatArgs {
    /// Print JSON (one object per refresh with --watch).
    #[arg(long, conflicts_with = "prometheus")]
    json: bool,
    /// Print the Prometheus text exposition.
    #[arg(long)]
    prometheus: bool,
    /// Refresh every SECS seconds, with message and byte rates, until Ctrl-C.
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "1", value_parser = crate::args::positive_secs)]
    watch: Option<f64>,
    /// Serve the Prometheus exposition (OpenMetrics text) over HTTP on ADDR (e.g.
    /// 127.0.0.1:9464) until Ctrl-C: GET /metrics, up to 64 connections at once, each cut off
    /// after 2 s without a full request head and after 10 s in all.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["watch", "json"])]
    listen: Option<String>,
    /// Stop after N refreshes (--watch) or N scrapes (--listen).
    #[arg(long, value_name = "N", value_parser = crate::args::within(1, u64::MAX))]
    count: Option<u64>,
    /// Remove the counters files of processes that are gone (after reading what they say), and
    /// say which.
    #[arg(long, conflicts_with_all = ["watch", "listen"])]
    prune: bool,
    /// Where the counters files are (default: $TICKBUS_COUNTERS_DIR, or every
    /// /dev/shm/tickbus-counters-UID folder this user can read).
    #[arg(long)]
    counters_dir: Option<PathBuf>,
}

pub fn run(a: StatArgs, opts: &ShmOptions) -> Result<(), String> {
    let dir: Vec<PathBuf> = a.counters_dir.clone().map_or_else(tickbus::counters::counters_dirs, |d| vec![d]);
    if let Some(addr) = &a.listen {
        let stop = crate::pipeline::stop_flag()?;
        return crate::metrics_http::serve(addr, &dir, opts, a.count, &stop);
    }
    let Some(secs) = a.watch else {
        let snap = snapshot(&dir, opts);
        print!("{}", render(&a, &snap)?);
        if a.json || a.prometheus {
            // The table lists them itself; a refused folder is never silent.
            for e in &snap.errors {
                eprintln!("tickbus stat: {e}");
            }
        }
        // What a crashed process's file said is shown above before the file goes.
        if a.prune {
            for (path, reason) in dir.iter().flat_map(|d| tickbus::counters::prune(d)) {
                eprintln!("tickbus stat: removed {} ({reason})", tickbus::stat::shown(&path));
            }
        }
        return Ok(());
    };
    let stop = crate::pipeline::stop_flag()?;
    let mut prev = snapshot(&dir, opts);
    let mut n = 0;
    while !stop.load(Ordering::Acquire) && a.count.is_none_or(|c| n < c) {
        std::thread::sleep(Duration::from_secs_f64(secs));
        let mut now = snapshot(&dir, opts);
        now.rates_since(&prev);
        let text = render(&a, &now)?;
        if a.json || a.prometheus {
            print!("{text}");
        } else {
            // Clear the screen and home the cursor: a refreshing table.
            print!("\x1b[2J\x1b[H{text}");
        }
        let _ = std::io::stdout().flush();
        prev = now;
        n += 1;
    }
    Ok(())
}

fn render(a: &StatArgs, s: &Snapshot) -> Result<String, String> {
    if a.json {
        return serde_json::to_string(s).map(|j| j + "\n").map_err(|e| e.to_string());
    }
    if a.prometheus {
        return Ok(prometheus(s));
    }
    Ok(s.text())
}

/// `tickbus ring list`: every ring file, one line each (or JSON).
pub fn ring_list(json: bool, opts: &ShmOptions) -> Result<(), String> {
    let (rings, errors) = tickbus::stat::rings(opts);
    if json {
        let v = serde_json::json!({ "rings": rings, "errors": errors });
        println!("{v}");
        return Ok(());
    }
    if rings.is_empty() {
        println!("no rings in {} or {}", opts.hugepage_dir.display(), opts.fallback_dir.display());
    }
    for r in &rings {
        println!("{}", tickbus::stat::ring_line(r));
    }
    for e in &errors {
        eprintln!("tickbus ring list: {e}");
    }
    Ok(())
}
