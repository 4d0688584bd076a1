//! `tickbus journal`: `inspect` (what a journal holds, checked record by record), `verify`
//! (every CRC and index entry; an exit code for scripts), `cat` (records decoded, by sequence or
//! time), `serve` (to a late joiner elsewhere) and `export --parquet` (the work is
//! `tickbus_export`'s). The logic is the library's (`tickbus::journal`, `tickbus::replay`).
use std::path::Path;
use std::time::Duration;

use tickbus::journal::{JournalReader, Kind};

pub fn inspect(dir: &Path, json: bool) -> Result<(), String> {
    let r = JournalReader::open(dir).map_err(|e| e.to_string())?;
    let mut c = r.cursor();
    let (mut messages, mut bytes, mut gaps, mut missed) = (0u64, 0u64, 0u64, 0u64);
    let (mut first, mut last, mut first_ns, mut last_ns) = (None, None, None, None);
    let error = loop {
        match c.next_timed() {
            Ok(Some((rec, wall))) => {
                first.get_or_insert(rec.sequence);
                first_ns.get_or_insert(wall);
                last_ns = Some(wall);
                match rec.kind {
                    Kind::Message(p) => {
                        messages += 1;
                        bytes = bytes.saturating_add(p.len() as u64);
                        last = Some(rec.sequence);
                    }
                    Kind::Gap { count } => {
                        gaps += 1;
                        // Each gap record covers at most 2^62 positions, but crafted records
                        // can add up past 2^64: saturate rather than overflow.
                        missed = missed.saturating_add(count);
                        last = Some(rec.sequence + count - 1);
                    }
                    Kind::End => {}
                }
            }
            Ok(None) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    let report = serde_json::json!({
        "journal": dir.display().to_string(),
        "stream": r.stream_id(),
        "source": r.source(),
        "segments": r.segments().len(),
        "messages": messages,
        "bytes": bytes,
        "gaps": gaps,
        "missed": missed,
        "first_sequence": first,
        "last_sequence": last,
        "first_receive_unix_ns": first_ns,
        "last_receive_unix_ns": last_ns,
        "error": error,
    });
    if json {
        println!("{report}");
    } else {
        println!("journal   {} (stream {}, {} segments)", dir.display(), r.stream_id(), r.segments().len());
        println!("source    {}", r.source());
        println!("messages  {messages} ({bytes} bytes), sequences {first:?} to {last:?}");
        println!("gaps      {gaps} ({missed} messages missed)");
    }
    match error {
        Some(e) => Err(format!("STOPPED: {e}")),
        None => Ok(()),
    }
}

pub fn export(dir: &Path, out: &Path, json: bool) -> Result<(), String> {
    let (t, written) = tickbus_export::export_parquet(dir, out).map_err(|e| e.to_string())?;
    if json {
        let files: Vec<_> = written
            .iter()
            .map(|(p, rows)| serde_json::json!({ "file": p.display().to_string(), "rows": rows }))
            .collect();
        let report = serde_json::json!({
            "journal": dir.display().to_string(),
            "stream": t.stream_id,
            "files": files,
            "undecoded": t.undecoded,
        });
        println!("{report}");
    } else {
        for (p, rows) in &written {
            println!("{}: {rows} rows", p.display());
        }
        if t.undecoded > 0 {
            println!("{} records were no tickbus message (raw payloads): not exported", t.undecoded);
        }
    }
    Ok(())
}

/// `tickbus journal verify`: every record's CRC and order, every index entry against its
/// record; Err (a non-zero exit) if anything is wrong.
pub fn verify(dir: &Path, json: bool) -> Result<(), String> {
    let r = tickbus::journal::verify(dir).map_err(|e| e.to_string())?;
    let bad: Vec<_> = r
        .segments
        .iter()
        .flat_map(|s| s.bad_index.iter().map(move |(n, why)| format!("{} entry {n}: {why}", s.path.display())))
        .collect();
    if json {
        let segments: Vec<_> = r
            .segments
            .iter()
            .map(|s| {
                serde_json::json!({
                    "segment": s.index, "file": s.path.display().to_string(), "records": s.records,
                    "index_entries": s.index_entries, "bad_index_entries": s.bad_index.len(),
                })
            })
            .collect();
        let report = serde_json::json!({
            "journal": dir.display().to_string(), "ok": r.ok(), "messages": r.messages, "gaps": r.gaps,
            "missed": r.missed, "segments": segments, "bad_index": bad, "error": r.error,
        });
        println!("{report}");
    } else {
        let entries: u64 = r.segments.iter().map(|s| s.index_entries).sum();
        println!(
            "journal {}: {} segments, {} messages, {} gaps ({} missed), {entries} index entries checked",
            dir.display(),
            r.segments.len(),
            r.messages,
            r.gaps,
            r.missed
        );
        for b in &bad {
            println!("BAD INDEX {b} (an index is a hint: readers scan past it; copy the journal with `tickbus replay` + `record` to rebuild it)");
        }
        if let Some(e) = &r.error {
            println!("DAMAGED: {e}");
        }
        if r.ok() {
            println!("OK");
        }
    }
    match r.ok() {
        true => Ok(()),
        false => Err(format!(
            "journal {} failed verification: {}",
            dir.display(),
            r.error.unwrap_or_else(|| format!("{} bad index entries", bad.len()))
        )),
    }
}

/// Where `journal cat` starts or stops: a sequence number or a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Sequence(u64),
    /// Unix ns.
    Time(u64),
}

/// A bound from the command line: digits are a sequence number, anything else an RFC 3339 time
/// (`2026-12-03T10:30:00Z`, fractions allowed; UTC).
pub fn bound(s: &str) -> Result<Bound, String> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map(Bound::Sequence).map_err(|e| format!("{s:?}: {e}"));
    }
    let t = humantime::parse_rfc3339_weak(s)
        .map_err(|e| format!("{s:?} is neither a sequence number nor an RFC 3339 time (2026-12-03T10:30:00Z): {e}"))?;
    let ns = t.duration_since(std::time::UNIX_EPOCH).map_err(|_| format!("{s:?} is before 1970"))?.as_nanos();
    Ok(Bound::Time(u64::try_from(ns).map_err(|_| format!("{s:?} is too far in the future"))?))
}

/// `tickbus journal cat`: the records from `from` to `to` (inclusive), one line each, decoded
/// (text, or JSON lines with every field by name); the start is found through the index.
pub fn cat(dir: &Path, from: Option<Bound>, to: Option<Bound>, json: bool) -> Result<(), String> {
    use std::io::Write;
    let r = JournalReader::open(dir).map_err(|e| e.to_string())?;
    let mut c = match from {
        None => r.cursor(),
        Some(Bound::Sequence(s)) => r.seek_sequence(s).map_err(|e| e.to_string())?,
        Some(Bound::Time(t)) => r.seek_time(t).map_err(|e| e.to_string())?,
    };
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    let stopped = loop {
        let (rec, wall) = match c.next_timed() {
            Ok(Some(x)) => x,
            Ok(None) => break None,
            Err(e) => break Some(e.to_string()),
        };
        let past = match to {
            Some(Bound::Sequence(s)) => rec.sequence > s,
            Some(Bound::Time(t)) => wall > t,
            None => false,
        };
        if past {
            break None;
        }
        let line = render(&rec, wall, json);
        if writeln!(out, "{line}").is_err() {
            return Ok(()); // the reader went away (`| head`): not an error
        }
    };
    let _ = out.flush();
    match stopped {
        Some(e) => Err(format!("STOPPED: {e}")),
        None => Ok(()),
    }
}

/// One record as a line: JSON with every field by name (header fields first, in the message's
/// order), or text with the sequence, the receive time, the type and `field=value` for the
/// message's own fields and its publish TSC.
fn render(rec: &tickbus::journal::Record<'_>, wall: u64, json: bool) -> String {
    use tickbus_codecs::layout::{self, FieldKind};
    let utc = humantime::format_rfc3339_nanos(std::time::UNIX_EPOCH + std::time::Duration::from_nanos(wall));
    let mut kv: Vec<(String, serde_json::Value)> = Vec::new();
    let mut kind = String::new();
    match rec.kind {
        Kind::Gap { count } => {
            kind = "gap".into();
            kv.push(("gap".into(), count.into()));
        }
        Kind::Message(p) => match layout::message_type(p) {
            Some(t) => {
                kind = layout::snake_name(t).into();
                for f in layout::fields(t) {
                    let v: serde_json::Value = match f.kind {
                        FieldKind::I64 => (f.read_u64(p) as i64).into(),
                        FieldKind::Bytes(n) => {
                            let b = &p[f.offset..f.offset + n];
                            let end = b.iter().position(|&x| x == 0).unwrap_or(n);
                            String::from_utf8_lossy(&b[..end]).trim_end().into()
                        }
                        _ => f.read_u64(p).into(),
                    };
                    kv.push((f.name, v));
                }
            }
            None => {
                kind = "raw".into();
                kv.push(("raw_bytes".into(), p.len().into()));
            }
        },
        Kind::End => {}
    }
    if json {
        let mut line = format!(r#"{{"sequence":{},"received":"{utc}","type":"{kind}""#, rec.sequence);
        for (k, v) in &kv {
            line.push_str(&format!(",{}:{v}", serde_json::Value::from(k.as_str())));
        }
        line.push('}');
        return line;
    }
    let mut line = format!("{:>10} {utc} {kind}", rec.sequence);
    for (k, v) in &kv {
        if matches!(k.as_str(), "msg_type" | "version" | "length" | "stream_id" | "flags" | "sequence") {
            continue; // said already, or the layout's own business
        }
        match v {
            serde_json::Value::String(s) => line.push_str(&format!(" {k}={s:?}")),
            _ => line.push_str(&format!(" {k}={v}")),
        }
    }
    line
}

/// `tickbus journal serve`: what to serve, where.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The journal folder (followed as the recorder goes on writing it).
    pub dir: std::path::PathBuf,
    /// Where to serve it: a channel URI (rdma-rc across hosts: `rdma-rc://ADDR:PORT/STREAM`;
    /// a reliable shm ring on one host). The late joiner gives the same URI to `trader --join`.
    #[arg(long, value_name = "URI")]
    pub dest: String,
    /// The first position to serve (the joiner's --join-from).
    #[arg(long, default_value_t = 0)]
    pub from_seq: u64,
    /// Stop once the journal has had nothing new for this long (the recorder finished);
    /// otherwise serve until Ctrl-C / SIGTERM.
    #[arg(long, value_parser = crate::args::secs)]
    pub idle_end_secs: Option<f64>,
    /// The shared secret of an rdma-rc destination whose URI names no `token-env`.
    #[arg(long, default_value = "")]
    pub token: String,
    /// The RDMA device (default: TICKBUS_RDMA_DEVICE, else the first).
    #[arg(long)]
    pub device: Option<String>,
    /// How long to wait for the joiner to connect (rdma-rc) (s).
    #[arg(long, default_value_t = 30.0, value_parser = crate::args::secs)]
    pub wait_secs: f64,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Serves a journal to one late joiner on a reliable stream (`tickbus::replay::serve`).
pub fn serve(a: ServeArgs) -> Result<(), String> {
    use tickbus::stream::{open_publisher, Channel, Endpoint, OpenOptions, Reliability};
    let stop = crate::pipeline::stop_flag()?;
    let c = Channel::parse(&a.dest).map_err(|e| format!("--dest: {e}"))?;
    if matches!(c.endpoint, Endpoint::UdMcast { .. }) {
        return Err(format!(
            "--dest {}: a journal is served on a reliable stream (rdma-rc, or shm on one host), not ud-mcast",
            a.dest
        ));
    }
    let mut tail = tickbus::journal::JournalTail::open(&a.dir, a.from_seq).map_err(|e| e.to_string())?;
    let mut o = OpenOptions::default();
    o.reliability = Reliability::Reliable;
    // Room for any market-data message (a book snapshot is the largest); a URI may say more.
    (o.slots, o.payload) = (4096, 512);
    o.token = a.token.clone().into_bytes();
    o.device = a.device.clone();
    o.wait = Duration::from_secs_f64(a.wait_secs);
    o.stop = Some(stop.clone());
    let mut p = open_publisher(&c, &o).map_err(|e| format!("--dest {e}"))?;
    // rdma-rc: the joiner connects here first (other transports have their reader at once).
    crate::streams::wait_for_subscriber(&mut p, "the joiner", o.wait, &stop)
        .map_err(|e| format!("--dest {}: {e}: start `tickbus trader --join {}` (it connects here)", a.dest, a.dest))?;
    eprintln!("journal serve: serving {} from position {} on {}", a.dir.display(), a.from_seq, a.dest);
    let mut served = tickbus::replay::Served::default();
    let idle_end = a.idle_end_secs.map(Duration::from_secs_f64);
    let r = tickbus::replay::serve(&mut tail, &mut p, &stop, idle_end, &mut served);
    // Everything out before the process ends (rdma-rc ships what waited for credit).
    let flushed = p.flush(Duration::from_secs(10));
    drop(p);
    if a.json {
        println!(
            "{}",
            serde_json::json!({"journal": a.dir.display().to_string(), "dest": a.dest, "messages": served.messages,
                "gaps": served.gaps, "position": served.position})
        );
    } else {
        println!(
            "served {} messages and {} gap records, up to position {}",
            served.messages, served.gaps, served.position
        );
    }
    r.map_err(|e| e.to_string())?;
    flushed.map_err(|e| format!("flushing at the end: {e}"))
}
