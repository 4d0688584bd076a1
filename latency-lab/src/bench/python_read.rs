//! The Python package beside the Rust journal reader, in the same run: one journal of real
//! messages (quotes and order adds), read to the end by the Rust reader (each message decoded
//! into its struct) and by `tickbus.read_journal` into numpy structured arrays, in interleaved
//! rounds; each figure is the median of its rounds.
//!
//! The Python is `$TICKBUS_PYTHON`, else the checkout's venv (`target/tools/venv/bin/python3`,
//! where `tools/lab.sh` installs the package). Without one that imports `tickbus`, the report
//! says it was not measured and how to get it measured, and no figure is invented.
use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use tickbus::journal::{JournalMeta, JournalOptions, JournalReader, JournalWriter, Kind};
use tickbus_codecs::md::{OrderAdd, Quote};
use tickbus_codecs::Message;
use zerocopy::{FromBytes, IntoBytes};

use crate::model::journal::PythonRead;

const ROUNDS: usize = 3;

/// The interpreter to measure with, if any.
fn python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TICKBUS_PYTHON") {
        return Some(p.into());
    }
    // target/<profile>/latency-lab -> target/tools/venv/bin/python3
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join("tools/venv/bin/python3");
    p.exists().then_some(p)
}

pub(crate) fn write_journal(dir: &Path, n: u64, ticks_per_ns: f64) -> Result<(), Box<dyn Error>> {
    let _ = std::fs::remove_dir_all(dir);
    let meta = JournalMeta { stream_id: 1, source: "latency-lab python read".into(), ticks_per_ns };
    let mut w = JournalWriter::open(dir, meta, JournalOptions::default())?;
    let t = w.now();
    let (mut q, mut a) = (Quote::new(), OrderAdd::new());
    for k in 0..n {
        if k % 4 == 3 {
            a.header.sequence = k;
            a.order_id = k;
            a.price = k as i64;
            w.append(k, k, t + k, a.as_bytes())?;
        } else {
            q.header.sequence = k;
            q.instrument_id = k as u32;
            q.bid_px = k as i64;
            w.append(k, k, t + k, q.as_bytes())?;
        }
    }
    w.close()?;
    Ok(())
}

/// The Rust reader: every record, each message decoded into its struct (as numpy gets them).
fn rust_read(dir: &Path) -> Result<(u64, f64), Box<dyn Error>> {
    let t0 = Instant::now();
    let r = JournalReader::open(dir)?;
    let (mut quotes, mut adds) = (Vec::new(), Vec::new());
    r.cursor().for_each(|rec| {
        if let Kind::Message(p) = rec.kind {
            if p.len() == Quote::LEN {
                quotes.extend(Quote::read_from_bytes(p).ok());
            } else {
                adds.extend(OrderAdd::read_from_bytes(p).ok());
            }
        }
    })?;
    let secs = t0.elapsed().as_secs_f64();
    std::hint::black_box((&quotes, &adds));
    Ok(((quotes.len() + adds.len()) as u64, secs))
}

const SCRIPT: &str = "import sys, time, tickbus
t = time.perf_counter()
d = tickbus.read_journal(sys.argv[1])
s = time.perf_counter() - t
print(d.total(), s)";

fn python_read(python: &Path, dir: &Path) -> Result<(u64, f64), Box<dyn Error>> {
    let o = Command::new(python).args(["-c", SCRIPT]).arg(dir).output()?;
    if !o.status.success() {
        return Err(format!("{}: {}", python.display(), String::from_utf8_lossy(&o.stderr)).into());
    }
    let out = String::from_utf8_lossy(&o.stdout);
    let mut it = out.split_whitespace();
    let n = it.next().and_then(|x| x.parse().ok()).ok_or("no count from Python")?;
    let s = it.next().and_then(|x| x.parse().ok()).ok_or("no time from Python")?;
    Ok((n, s))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Measures both readers over an `n`-message journal.
pub fn run(n: u64, ticks_per_ns: f64) -> Result<PythonRead, Box<dyn Error>> {
    let Some(py) = python() else {
        return Ok(PythonRead::not_measured(
            "no Python with the tickbus package: run tools/lab.sh (it installs it), or set TICKBUS_PYTHON",
        ));
    };
    let probe = Command::new(&py).args(["-c", "import tickbus"]).output()?;
    if !probe.status.success() {
        return Ok(PythonRead::not_measured(&format!(
            "{} cannot import tickbus: pip install ./python into it (tools/lab.sh does)",
            py.display()
        )));
    }
    let tmp = crate::bench::cleanup::TempDir::new(&format!("lab-python-read-{}", std::process::id()));
    let dir = tmp.path().to_path_buf();
    write_journal(&dir, n, ticks_per_ns)?;
    let (mut rust, mut python) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        // Alternating which goes first: the page cache is warm for both after round 0.
        let order = if round % 2 == 0 { [true, false] } else { [false, true] };
        for is_rust in order {
            let (count, secs) = if is_rust { rust_read(&dir)? } else { python_read(&py, &dir)? };
            if count != n {
                return Err(format!("{} read {count} of {n} messages", if is_rust { "Rust" } else { "Python" }).into());
            }
            let rate = count as f64 / secs;
            if is_rust {
                rust.push(rate)
            } else {
                python.push(rate)
            }
        }
    }
    drop(tmp);
    let (r, p) = (median(rust), median(python));
    Ok(PythonRead { messages: n, rounds: ROUNDS, python_msgs_per_s: p, rust_msgs_per_s: r, x_rust: p / r, note: None })
}
