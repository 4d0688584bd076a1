//! The journal on disk: round trips across segments, seeks, torn tails, damage in the middle,
//! foreign and newer files, and resuming.
use std::path::PathBuf;

use super::*;

/// A fresh folder for one test, removed on drop.
pub(super) struct Dir(pub(super) PathBuf);

impl Dir {
    pub(super) fn new(tag: &str) -> Dir {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("tickbus-journal-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(super) fn meta() -> JournalMeta {
    JournalMeta { stream_id: 7, source: "test".into(), ticks_per_ns: crate::time::ticks_per_ns() }
}

pub(super) fn small() -> JournalOptions {
    JournalOptions { segment_bytes: 64 << 10, index_every: 16, ..JournalOptions::default() }
}

pub(super) fn payload(seq: u64) -> Vec<u8> {
    (0..(seq % 97) as usize + 8).map(|k| (seq as usize * 31 + k) as u8).collect()
}

/// Writes messages `0..n` (a gap of 5 at 100), received 1,000 TSC ticks apart from `base`
/// (this process's TSC, as the segments' anchors are); returns `base`.
fn write(dir: &std::path::Path, n: u64) -> u64 {
    let mut w = JournalWriter::open(dir, meta(), small()).unwrap();
    let base = w.now();
    let mut seq = 0;
    while seq < n {
        if seq == 100 {
            w.append_gap(100, 5, base + seq * 1000).unwrap();
            seq += 5;
            continue;
        }
        w.append(seq, seq * 2, base + seq * 1000, &payload(seq)).unwrap();
        seq += 1;
    }
    w.close().unwrap();
    base
}

/// Every record as (sequence, payload; None for a gap).
pub(super) type Read = Vec<(u64, Option<Vec<u8>>)>;

pub(super) fn read_all(r: &JournalReader) -> Result<Read, JournalError> {
    let mut c = r.cursor();
    let mut out = Vec::new();
    while let Some(rec) = c.next()? {
        out.push(match rec.kind {
            Kind::Message(p) => (rec.sequence, Some(p.to_vec())),
            Kind::Gap { .. } => (rec.sequence, None),
            Kind::End => unreachable!("end records are not delivered"),
        });
    }
    Ok(out)
}

#[test]
fn records_round_trip_across_segments_in_order_with_gaps() {
    let d = Dir::new("rt");
    write(&d.0, 3000);
    let r = JournalReader::open(&d.0).unwrap();
    assert!(r.segments().len() > 3, "small segments should roll: {}", r.segments().len());
    assert_eq!((r.stream_id(), r.source()), (7, "test".to_owned()));
    let got = read_all(&r).unwrap();
    assert_eq!(got.len(), 3000 - 5 + 1);
    let mut want_seq = 0;
    for (seq, p) in got {
        assert_eq!(seq, want_seq);
        match p {
            Some(p) => {
                assert_eq!(p, payload(seq));
                want_seq += 1;
            }
            None => want_seq += 5,
        }
    }
}

#[test]
fn seeks_by_sequence_and_time_start_at_the_right_record_through_the_index() {
    let d = Dir::new("seek");
    let base = write(&d.0, 3000);
    let r = JournalReader::open(&d.0).unwrap();
    for target in [0u64, 1, 99, 100, 102, 105, 1777, 2999] {
        let mut c = r.seek_sequence(target).unwrap();
        let rec = c.next().unwrap().unwrap();
        let want = if (100..105).contains(&target) { 100 } else { target };
        assert_eq!(rec.sequence, want, "seek to {target}");
    }
    assert!(r.seek_sequence(5000).unwrap().next().unwrap().is_none());
    let h = r.segments()[0].header;
    let mut c = r.seek_time(h.wall_ns(base + 2500 * 1000)).unwrap();
    let got = c.next().unwrap().unwrap().sequence;
    assert!((2499..=2500).contains(&got), "seek to the wall time of 2500 found {got}");
}

#[test]
fn a_torn_tail_is_cut_on_reopen_saying_how_much_and_why_and_writing_resumes() {
    let d = Dir::new("torn");
    write(&d.0, 500);
    let last = super::writer::segments(&d.0).unwrap().pop().unwrap();
    let path = segment_path(&d.0, last);
    let len = std::fs::metadata(&path).unwrap().len();
    // A record torn by a crash: its header and half its payload.
    let mut partial = vec![0u8; format::record_bytes(40)];
    format::emit(&mut partial, &format::message_header(500, 0, 0, 40), &[9; 40]);
    use std::io::Write;
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&partial[..50]).unwrap();
    let r = JournalReader::open(&d.0).unwrap();
    assert_eq!(read_all(&r).unwrap().len(), 500 - 5 + 1, "a reader stops at the torn tail");
    let mut w = JournalWriter::open(&d.0, meta(), small()).unwrap();
    let rec = w.recovery().cloned().expect("the torn tail was cut");
    assert_eq!((rec.offset, rec.cut_bytes), (len, 50));
    assert!(rec.reason.contains("cut short"), "{}", rec.reason);
    assert_eq!(w.next_sequence(), Some(500));
    assert!(matches!(w.append(499, 0, 0, b"x"), Err(JournalError::Order { .. })));
    w.append(500, 0, 0, b"after").unwrap();
    w.close().unwrap();
    let all = read_all(&JournalReader::open(&d.0).unwrap()).unwrap();
    assert_eq!(all.last().unwrap(), &(500, Some(b"after".to_vec())));
}

#[test]
fn a_flipped_bit_in_the_middle_is_an_error_naming_file_and_offset_after_everything_before_it() {
    let d = Dir::new("flip");
    write(&d.0, 3000);
    let path = segment_path(&d.0, 1);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = format::DATA_START + 200;
    bytes[at] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let r = JournalReader::open(&d.0).unwrap();
    let mut c = r.cursor();
    let mut n = 0;
    let err = loop {
        match c.next() {
            Ok(Some(_)) => n += 1,
            Ok(None) => panic!("the damage went unnoticed"),
            Err(e) => break e,
        }
    };
    let text = err.to_string();
    assert!(text.contains(&path.display().to_string()) && text.contains("CRC"), "{text}");
    assert!(matches!(err, JournalError::Corrupt { offset, .. } if (offset as usize) <= at), "{err}");
    assert!(n > 100, "the records before the damage were delivered ({n})");
}

#[test]
fn foreign_newer_cut_and_missing_segments_are_named() {
    let d = Dir::new("bad");
    assert!(matches!(JournalReader::open(&d.0), Err(JournalError::Io { .. } | JournalError::Empty { .. })));
    write(&d.0, 3000);
    let p1 = segment_path(&d.0, 1);
    let good = std::fs::read(&p1).unwrap();
    let mut newer = good.clone();
    newer[8] = 9; // format version
    std::fs::write(&p1, &newer).unwrap();
    let e = JournalReader::open(&d.0).unwrap_err().to_string();
    assert!(e.contains("version 9") && e.contains("0000000001.tbj"), "{e}");
    std::fs::write(&p1, &good[..good.len() / 2]).unwrap();
    let r = JournalReader::open(&d.0).unwrap();
    let e = read_all(&r).unwrap_err().to_string();
    assert!(e.contains("0000000001.tbj"), "{e}");
    std::fs::remove_file(&p1).unwrap();
    assert!(matches!(JournalReader::open(&d.0), Err(JournalError::Missing { missing: 1, .. })));
    std::fs::write(
        segment_path(&d.0, 1),
        b"not a journal at all, just some bytes; long enough to hold a header maybe not",
    )
    .unwrap();
    assert!(JournalReader::open(&d.0).unwrap_err().to_string().contains("0000000001.tbj"));
    let other = JournalMeta { stream_id: 8, ..meta() };
    let d2 = Dir::new("other");
    write(&d2.0, 10);
    assert!(matches!(
        JournalWriter::open(&d2.0, other, small()),
        Err(JournalError::Stream { found: 7, wanted: 8, .. })
    ));
}
