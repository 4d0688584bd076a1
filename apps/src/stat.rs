//! `tickbus stat` and `tickbus ring list`: every stream on this host in one view, from the
//! processes' counters files and the ring headers (the joining lives in `tickbus::stat`).
use std::io::{Read, Write};
use std::net::TcpListener;
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
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "1")]
    watch: Option<f64>,
    /// Serve the Prometheus exposition over HTTP on ADDR (e.g. 127.0.0.1:9464) until Ctrl-C.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["watch", "json"])]
    listen: Option<String>,
    /// Stop after N refreshes (--watch) or N scrapes (--listen).
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Remove the counters files of processes that are gone (after reading what they say), and
    /// say which.
    #[arg(long, conflicts_with_all = ["watch", "listen"])]
    prune: bool,
    /// Where the counters files are (default $TICKBUS_COUNTERS_DIR or /dev/shm/tickbus-counters).
    #[arg(long)]
    counters_dir: Option<PathBuf>,
}

pub fn run(a: StatArgs, opts: &ShmOptions) -> Result<(), String> {
    let dir = a.counters_dir.clone().unwrap_or_else(tickbus::counters::counters_dir);
    if let Some(addr) = &a.listen {
        return serve(addr, &dir, opts, a.count);
    }
    if a.prune {
        for (path, reason) in tickbus::counters::prune(&dir) {
            eprintln!("tickbus stat: removed {} ({reason})", path.display());
        }
    }
    let Some(secs) = a.watch else {
        print!("{}", render(&a, &snapshot(&dir, opts))?);
        return Ok(());
    };
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!("--watch {secs}: the refresh interval must be a positive number of seconds"));
    }
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

/// A minimal HTTP endpoint: every request gets a fresh exposition (Prometheus computes rates).
fn serve(addr: &str, dir: &std::path::Path, opts: &ShmOptions, count: Option<u64>) -> Result<(), String> {
    let listener = TcpListener::bind(addr).map_err(|e| format!("--listen {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("tickbus stat: serving Prometheus metrics on http://{local}/metrics");
    let mut served = 0;
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        // Slow or silent clients cannot hold the endpoint.
        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
        let mut req = [0u8; 1024];
        let n = conn.read(&mut req).unwrap_or(0);
        let line = String::from_utf8_lossy(&req[..n]);
        let path = line.split_whitespace().nth(1).unwrap_or("");
        let (status, body) = if path == "/metrics" || path == "/" {
            ("200 OK", prometheus(&snapshot(dir, opts)))
        } else {
            ("404 Not Found", "tickbus stat serves /metrics\n".to_owned())
        };
        let _ = write!(
            conn,
            "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        served += 1;
        if count.is_some_and(|c| served >= c) {
            break;
        }
    }
    Ok(())
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
