//! A whole journal folder damaged in any way (issue 25's fuzz item): a real three-segment journal
//! with its indexes, then the input's edits (bytes flipped, files cut short, removed, copied over
//! another segment's number, junk appended, words overwritten). Properties:
//! - opening, walking and seeking a reader never panics, hangs or walks past what the files hold;
//! - what a walk delivers is in stream order (each record at or after the end of the previous);
//! - a writer that accepts the folder (it refuses damage followed by intact records) records on,
//!   and its record is read back: the walk then ends with that record, or with an error that
//!   names the damage, never in silence.
#![no_main]
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tickbus::journal::{JournalMeta, JournalOptions, JournalReader, JournalWriter, Kind};

/// Names the edits can touch: three segments, their indexes, a fourth segment number, a stray.
const NAMES: [&str; 8] = [
    "0000000000.tbj",
    "0000000001.tbj",
    "0000000002.tbj",
    "0000000000.idx",
    "0000000001.idx",
    "0000000002.idx",
    "0000000003.tbj",
    "0000000001.tbj.torn",
];

fn opts() -> JournalOptions {
    let mut o = JournalOptions::default();
    (o.segment_bytes, o.index_every) = (16 << 10, 8);
    o
}

fn meta() -> JournalMeta {
    JournalMeta { stream_id: 7, source: "fuzz".into(), ticks_per_ns: 1.0 }
}

/// A private folder of this process's (the writer refuses any other), emptied.
fn folder(name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let d = std::env::temp_dir().join(format!("tickbus-fuzz-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    d
}

/// The template journal's files (made once): 3 segments of messages with a gap among them.
fn template() -> &'static Vec<(usize, Vec<u8>)> {
    static T: OnceLock<Vec<(usize, Vec<u8>)>> = OnceLock::new();
    T.get_or_init(|| {
        let d = folder("template");
        let mut w = JournalWriter::open(&d, meta(), opts()).unwrap();
        let mut seq = 0u64;
        while seq < 400 {
            if seq == 150 {
                w.append_gap(seq, 10, seq).unwrap();
                seq += 10;
            }
            w.append(seq, seq, seq, &[seq as u8; 40]).unwrap();
            seq += 1;
        }
        w.close().unwrap();
        let files = (0..NAMES.len()).filter_map(|i| Some((i, std::fs::read(d.join(NAMES[i])).ok()?))).collect();
        let _ = std::fs::remove_dir_all(&d);
        files
    })
}

/// Walks every record (bounded); checks order; returns the last message's sequence and payload,
/// and whether the walk ended in an error.
fn walk(dir: &Path) -> Option<(Option<(u64, Vec<u8>)>, bool)> {
    let r = JournalReader::open(dir).ok()?;
    let _ = r.seek_sequence(123).map(|mut c| c.next().map(|_| ()));
    let _ = r.seek_time(u64::MAX / 2).map(|mut c| c.next().map(|_| ()));
    let mut c = r.cursor();
    let (mut next_min, mut last, mut n) = (0u64, None, 0u64);
    loop {
        n += 1;
        assert!(n < 1_000_000, "a 3-segment journal of 16 KiB segments cannot hold a million records");
        match c.next() {
            Ok(Some(rec)) => {
                assert!(rec.sequence >= next_min, "record {} after the stream reached {next_min}", rec.sequence);
                match rec.kind {
                    Kind::Message(p) => {
                        next_min = rec.sequence + 1;
                        last = Some((rec.sequence, p.to_vec()));
                    }
                    Kind::Gap { count } => next_min = rec.sequence + count,
                    Kind::End => {}
                }
            }
            Ok(None) => return Some((last, false)),
            Err(_) => return Some((last, true)),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let t = template();
    let dir = folder("case");
    let mut files: Vec<Option<Vec<u8>>> = vec![None; NAMES.len()];
    for (i, bytes) in t {
        files[*i] = Some(bytes.clone());
    }
    for op in data.chunks_exact(5) {
        let (kind, f, at, v) =
            (op[0] % 6, op[1] as usize % NAMES.len(), u16::from_le_bytes([op[2], op[3]]) as usize, op[4]);
        match kind {
            0 => {
                if let Some(b) = files[f].as_mut().filter(|b| !b.is_empty()) {
                    let i = at % b.len();
                    b[i] ^= v.max(1);
                }
            }
            1 => {
                if let Some(b) = files[f].as_mut() {
                    b.truncate(at % (b.len() + 1));
                }
            }
            2 => files[f] = None,
            3 => files[f] = files[v as usize % NAMES.len()].clone(),
            4 => files[f].get_or_insert_with(Vec::new).extend(std::iter::repeat_n(v, at % 512)),
            _ => {
                if let Some(b) = files[f].as_mut().filter(|b| b.len() >= 8) {
                    let i = (at % (b.len() - 7)) & !7;
                    b[i..i + 8].copy_from_slice(&u64::from(v).wrapping_mul(0x0101_0101_0101_0101).to_le_bytes());
                }
            }
        }
    }
    for (i, b) in files.iter().enumerate() {
        if let Some(b) = b {
            std::fs::write(dir.join(NAMES[i]), b).unwrap();
        }
    }
    let _ = walk(&dir);
    // Recording on: accepted or refused, never a panic; what it records is read back.
    if let Ok(mut w) = JournalWriter::open(&dir, meta(), opts()) {
        let seq = w.next_sequence().unwrap_or(0);
        w.append(seq, 1, 1, b"recorded after the damage").unwrap();
        w.close().unwrap();
        if let Some((last, failed)) = walk(&dir) {
            assert!(
                failed || last == Some((seq, b"recorded after the damage".to_vec())),
                "the walk ended in silence before the record made after reopening (last {last:?}, wanted {seq})"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
});
