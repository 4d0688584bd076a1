//! `tickbus journal inspect`: what a journal holds, checked record by record; `tickbus journal
//! export --parquet`: the journal as Parquet files (the work is `tickbus_export`'s).
use std::path::Path;

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
