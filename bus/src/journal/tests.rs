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

/// Opens the journal in `dir` (which must open) and reads it to its first error, which must be
/// that a segment after the readable ones cannot be read: returned only at the end record of the
/// last readable segment, so after every record before it.
pub(super) fn read_until_error(dir: &std::path::Path) -> JournalError {
    let r = JournalReader::open(dir).unwrap();
    assert!(r.damage().is_some(), "open says at once that a segment cannot be read");
    let mut c = r.cursor();
    let mut n = 0;
    loop {
        match c.next() {
            Ok(Some(_)) => n += 1,
            Ok(None) => panic!("the damage went unnoticed after {n} records"),
            Err(e) => {
                assert!(n > 0 && matches!(e, JournalError::Unreadable { .. }), "after {n} records: {e}");
                return e;
            }
        }
    }
}

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
fn reopening_for_recording_refuses_to_cut_intact_records_after_damage_in_the_middle() {
    let d = Dir::new("mid-damage");
    write(&d.0, 500);
    let last = super::writer::segments(&d.0).unwrap().pop().unwrap();
    let path = segment_path(&d.0, last);
    let mut bytes = std::fs::read(&path).unwrap();
    let len = bytes.len();
    bytes[format::DATA_START + 40] ^= 0x10; // inside the segment's first record
    std::fs::write(&path, &bytes).unwrap();
    let err = JournalWriter::open(&d.0, meta(), small()).err().expect("refused");
    assert!(
        matches!(err, JournalError::DamagedNotTorn { offset, next_intact, .. } if offset == format::DATA_START as u64 && next_intact > offset),
        "{err}"
    );
    assert!(err.to_string().contains("record into a new folder"), "{err}");
    assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, len, "nothing was cut");
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
    // Segment 0 stays readable (issue 25 item 8: one bad header used to make open fail).
    let e = read_until_error(&d.0).to_string();
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
    assert!(read_until_error(&d.0).to_string().contains("0000000001.tbj"));
    let other = JournalMeta { stream_id: 8, ..meta() };
    let d2 = Dir::new("other");
    write(&d2.0, 10);
    assert!(matches!(
        JournalWriter::open(&d2.0, other, small()),
        Err(JournalError::Stream { found: 7, wanted: 8, .. })
    ));
}

/// A whole last record whose CRC does not match (a power failure wrote its length but not all
/// its bytes) is a torn tail to the reader as to the writer: every record before it is read, and
/// the writer seals it on reopen.
#[test]
fn a_last_record_with_a_bad_crc_is_the_torn_tail_for_reader_and_writer_alike() {
    let d = Dir::new("bad-crc-tail");
    write(&d.0, 300);
    let last = super::writer::segments(&d.0).unwrap().pop().unwrap();
    let path = segment_path(&d.0, last);
    let mut rec = vec![0u8; format::record_bytes(40)];
    format::emit(&mut rec, &format::message_header(300, 0, 0, 40), &[9; 40]);
    rec[60] ^= 0xff; // a payload byte that never reached the disk
    use std::io::Write;
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&rec).unwrap();
    assert_eq!(read_all(&JournalReader::open(&d.0).unwrap()).unwrap().len(), 300 - 5 + 1);
    let w = JournalWriter::open(&d.0, meta(), small()).unwrap();
    assert_eq!(w.recovery().map(|r| r.cut_bytes), Some(rec.len() as u64));
    assert_eq!(w.next_sequence(), Some(300));
}

/// Kilobytes of random bytes at the tail (a torn write of binary payloads) are a torn tail, not
/// damage: the bounded scan for intact records after it charges only what it checks by CRC.
#[test]
fn a_long_random_torn_tail_is_cut_not_taken_for_damage() {
    let d = Dir::new("random-tail");
    write(&d.0, 300);
    let last = super::writer::segments(&d.0).unwrap().pop().unwrap();
    let path = segment_path(&d.0, last);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let junk: Vec<u8> = (0..16 << 10)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8 | 1 // never a zero kind byte: every offset looks like a record start
        })
        .collect();
    use std::io::Write;
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&junk).unwrap();
    let w = JournalWriter::open(&d.0, meta(), small()).unwrap();
    assert_eq!(w.recovery().map(|r| r.cut_bytes), Some(junk.len() as u64));
    assert_eq!(w.next_sequence(), Some(300));
}

#[test]
fn a_reader_mapping_the_torn_segment_reads_on_after_a_writer_seals_it() {
    let d = Dir::new("sealed");
    write(&d.0, 300);
    let last = super::writer::segments(&d.0).unwrap().pop().unwrap();
    let path = segment_path(&d.0, last);
    let len = std::fs::metadata(&path).unwrap().len();
    use std::io::Write;
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&[0x55; 21]).unwrap();
    // A reader that is already through the segment's records when the writer reopens.
    let r = JournalReader::open(&d.0).unwrap();
    let mut c = r.cursor();
    let mut before = 0;
    while c.next().unwrap().is_some() {
        before += 1;
    }
    let mut w = JournalWriter::open(&d.0, meta(), small()).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len + 40, "sealed (an end record), never truncated");
    assert_eq!(w.recovery().map(|r| r.cut_bytes), Some(21));
    w.append(300, 0, 0, b"new").unwrap();
    w.close().unwrap();
    assert!(c.next().unwrap().is_none(), "the open reader sees the end of its snapshot, no fault");
    let all = read_all(&JournalReader::open(&d.0).unwrap()).unwrap();
    assert_eq!(all.len(), before + 1);
    assert_eq!(all.last().unwrap(), &(300, Some(b"new".to_vec())));
}

#[test]
fn a_second_writer_is_refused_while_the_first_lives() {
    let d = Dir::new("two-writers");
    let w = JournalWriter::open(&d.0, meta(), small()).unwrap();
    let err = JournalWriter::open(&d.0, meta(), small()).err().expect("refused");
    assert!(matches!(err, JournalError::Busy { .. }) && err.to_string().contains("writer.lock"), "{err}");
    drop(w);
    JournalWriter::open(&d.0, meta(), small()).expect("free once the first is gone");
}

#[test]
fn a_segment_whose_first_page_never_reached_the_disk_is_not_begun() {
    // A crash (or a full disk) while the next segment was created: 100 bytes of its page; or a
    // power failure: its page allocated but all zeros.
    for page in [vec![0u8; 100], vec![0u8; format::DATA_START]] {
        let d = Dir::new("not-begun");
        write(&d.0, 200);
        let last = super::writer::segments(&d.0).unwrap().pop().unwrap();
        std::fs::write(segment_path(&d.0, last + 1), page).unwrap();
        assert_eq!(read_all(&JournalReader::open(&d.0).unwrap()).unwrap().len(), 200 - 5 + 1);
        let mut w = JournalWriter::open(&d.0, meta(), small()).unwrap();
        assert_eq!(w.next_sequence(), Some(200));
        w.append(200, 0, 0, b"on").unwrap();
        w.close().unwrap();
        assert_eq!(read_all(&JournalReader::open(&d.0).unwrap()).unwrap().len(), 200 - 5 + 2);
    }
}

/// A last segment whose first page was lost but whose records reached the disk is damaged, not
/// "never begun": neither the reader nor the writer may skip or remove its records.
#[test]
fn a_last_segment_with_a_zeroed_header_but_records_is_refused_not_removed() {
    let d = Dir::new("zero-head");
    write(&d.0, 300);
    let last = super::writer::segments(&d.0).unwrap().pop().unwrap();
    let path = segment_path(&d.0, last);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[..format::DATA_START].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    let err = JournalReader::open(&d.0).and_then(|r| read_all(&r)).expect_err("refused by the reader");
    assert!(err.to_string().contains(path.file_name().unwrap().to_str().unwrap()), "{err}");
    assert!(JournalWriter::open(&d.0, meta(), small()).is_err(), "refused by the writer");
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "the segment is left as it was");
}

#[test]
fn zeros_with_intact_records_after_them_are_a_hole_not_the_end() {
    let d = Dir::new("hole");
    write(&d.0, 300);
    let last = super::writer::segments(&d.0).unwrap().pop().unwrap();
    let path = segment_path(&d.0, last);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[format::DATA_START..format::DATA_START + 4096].fill(0); // a lost page
    std::fs::write(&path, &bytes).unwrap();
    let err = read_all(&JournalReader::open(&d.0).unwrap()).unwrap_err();
    assert!(matches!(err, JournalError::Corrupt { error: format::FormatError::Hole { .. }, .. }), "{err}");
    let err = JournalWriter::open(&d.0, meta(), small()).err().expect("refused");
    assert!(matches!(err, JournalError::DamagedNotTorn { .. }), "{err}");
}

#[test]
fn gap_and_sequence_ranges_are_checked_on_write_and_read() {
    let d = Dir::new("ranges");
    let mut w = JournalWriter::open(&d.0, meta(), small()).unwrap();
    assert!(matches!(w.append_gap(5, 0, 0), Err(JournalError::Range { .. })));
    assert!(matches!(w.append_gap(5, u64::MAX, 0), Err(JournalError::Range { .. })));
    assert!(matches!(w.append(u64::MAX, 0, 0, b"x"), Err(JournalError::Range { .. })));
    let mut rec = vec![0u8; format::record_bytes(8)];
    let (h, _) = format::gap(7, 1, 0);
    format::emit(&mut rec, &h, &0u64.to_le_bytes());
    assert!(matches!(format::parse(&rec, 0), Err(format::FormatError::Sequence { count: 0, .. })));
    assert!(matches!(w.append_records(&rec), Err(JournalError::Range { count: 0, .. })));
}

/// `record --segment-mb` past 2^44 wrapped the segment size to 0 and left a journal that could
/// be neither read nor reopened: a size no journal can use is refused before anything is made.
#[test]
fn a_segment_size_no_journal_can_use_is_refused_before_anything_is_written() {
    for bytes in [0u64, 4096, (1 << 40) + 1, u64::MAX] {
        let d = Dir::new("segsize");
        let opts = JournalOptions { segment_bytes: bytes, ..JournalOptions::default() };
        let err = JournalWriter::open(&d.0, meta(), opts).err().expect("refused");
        assert!(matches!(err, JournalError::SegmentSize { .. }), "{bytes}: {err}");
        assert!(std::fs::read_dir(&d.0).map_or(true, |mut r| r.next().is_none()), "{bytes}: nothing made");
    }
}
