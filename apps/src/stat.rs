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
    /// Where the counters files are (default: $TICKBUS_COUNTERS_DIR, or every
    /// /dev/shm/tickbus-counters-UID folder this user can read).
    #[arg(long)]
    counters_dir: Option<PathBuf>,
}

pub fn run(a: StatArgs, opts: &ShmOptions) -> Result<(), String> {
    let dir: Vec<PathBuf> = a.counters_dir.clone().map_or_else(tickbus::counters::counters_dirs, |d| vec![d]);
    if let Some(addr) = &a.listen {
        return serve(addr, &dir, opts, a.count);
    }
    let Some(secs) = a.watch else {
        print!("{}", render(&a, &snapshot(&dir, opts))?);
        // What a crashed process's file said is shown above before the file goes.
        if a.prune {
            for (path, reason) in dir.iter().flat_map(|d| tickbus::counters::prune(d)) {
                eprintln!("tickbus stat: removed {} ({reason})", path.display());
            }
        }
        return Ok(());
    };
    if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
        return Err(format!("--watch {secs}: the refresh interval must be a number of seconds above 0, at most a day"));
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

/// The request line's target of one HTTP request, read until the end of its header (at most
/// 8 KiB and one second, whatever the client does).
fn request_target(conn: &mut std::net::TcpStream) -> Option<(String, String)> {
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    let mut req = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
        let left = deadline.checked_duration_since(std::time::Instant::now())?;
        conn.set_read_timeout(Some(left.max(Duration::from_millis(1)))).ok()?;
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&req);
    let mut words = line.split_whitespace();
    let method = words.next()?.to_owned();
    let target = words.next()?.split('?').next()?.to_owned();
    Some((method, target))
}

/// A minimal HTTP endpoint: every GET of /metrics gets a fresh exposition (Prometheus computes
/// rates). One connection at a time, each bounded to a second of reading and one write.
fn serve(addr: &str, dirs: &[PathBuf], opts: &ShmOptions, count: Option<u64>) -> Result<(), String> {
    let listener = TcpListener::bind(addr).map_err(|e| format!("--listen {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("tickbus stat: serving Prometheus metrics on http://{local}/metrics");
    let mut served = 0;
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
        let (status, body) = match request_target(&mut conn) {
            Some((m, t)) if (m == "GET" || m == "HEAD") && (t == "/metrics" || t == "/") => {
                ("200 OK", prometheus(&snapshot(dirs, opts)))
            }
            Some((m, _)) if m != "GET" && m != "HEAD" => ("405 Method Not Allowed", "GET /metrics\n".to_owned()),
            _ => ("404 Not Found", "tickbus stat serves /metrics\n".to_owned()),
        };
        let reply = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = conn.write_all(reply.as_bytes());
        let _ = conn.shutdown(std::net::Shutdown::Write);
        if status.starts_with("200") {
            served += 1;
        }
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
