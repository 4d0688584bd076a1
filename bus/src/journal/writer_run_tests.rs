//! `append_run` against `append_records`, the walk it stands in for: the same bytes must give
//! the same segments and the same index, whatever the run's size, the segment's room left,
//! the index spacing, and where the index count stood when the run began.
use std::path::Path;

use zerocopy::FromBytes;

use super::super::JournalOptions;
use crate::journal::format::{self, RecordHeader, KIND_MESSAGE};
use crate::journal::tests::{meta, Dir};
use crate::journal::{JournalError, JournalWriter};

/// A sealed message record of `len` payload bytes at `sequence`, received at a TSC that names it.
fn record(sequence: u64, len: usize) -> Vec<u8> {
    let payload: Vec<u8> = (0..len).map(|k| (sequence as usize).wrapping_mul(7).wrapping_add(k) as u8).collect();
    let h = format::message_header(sequence, sequence.wrapping_mul(3), sequence.wrapping_mul(11) ^ 1_000_000, len);
    let mut out = vec![0; format::record_bytes(len)];
    format::emit(&mut out, &h, &payload);
    out
}

/// Records `from..to` of `len` payload bytes, back to back.
fn run(from: u64, to: u64, len: usize) -> Vec<u8> {
    (from..to).flat_map(|s| record(s, len)).collect()
}

/// Every segment's records (past its header page, which holds the writer's own clock anchor)
/// and every index file, by name.
fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x != "lock" && x != "id"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let body =
                if name.ends_with(".idx") { bytes } else { bytes[format::DATA_START.min(bytes.len())..].to_vec() };
            (name, body)
        })
        .collect()
}

/// Writes `prefix` (mixed records) with `append_records`, then messages `first..first + count`
/// of `len` bytes in runs of `split` records, once with `append_run` and once with
/// `append_records`; the two journals must hold the same bytes.
fn same_as_walk(opts: JournalOptions, prefix: &[u8], first: u64, count: u64, len: usize, split: u64) {
    let (a, b) = (Dir::new("run-a"), Dir::new("run-b"));
    let rec = format::record_bytes(len);
    let mut records = Vec::new();
    for (dir, by_run) in [(&a, true), (&b, false)] {
        let mut w = JournalWriter::open(&dir.0, meta(), opts).unwrap();
        w.append_records(prefix).unwrap();
        let mut at = first;
        while at < first + count {
            let to = (at + split).min(first + count);
            let bytes = run(at, to, len);
            if by_run {
                w.append_run(&bytes, at, rec).unwrap();
            } else {
                w.append_records(&bytes).unwrap();
            }
            at = to;
        }
        assert_eq!(w.next_sequence(), Some(first + count));
        records.push(w.records());
        w.close().unwrap();
    }
    assert_eq!(records[0], records[1], "records counted");
    let (ca, cb) = (contents(&a.0), contents(&b.0));
    assert!(ca.len() >= 2, "a segment and its index at least");
    assert_eq!(ca.len(), cb.len(), "{opts:?} len {len} split {split}: files");
    for ((na, xa), (nb, xb)) in ca.iter().zip(&cb) {
        assert_eq!(na, nb);
        assert!(xa == xb, "{opts:?} len {len} split {split}: {na} differs");
    }
}

#[test]
fn a_run_writes_what_the_walk_writes_across_segments_and_index_spacings() {
    let end_room = format::record_bytes(0) as u64;
    // A mixed prefix (two sizes and a gap) leaves the segment part-filled and the index count
    // somewhere inside its spacing.
    let mut prefix = run(0, 3, 20);
    let (g, c) = format::gap(3, 2, 5);
    let mut gap = vec![0; format::record_bytes(8)];
    format::emit(&mut gap, &g, &c);
    prefix.extend(gap);
    prefix.extend(run(5, 7, 64));
    for (len, count) in [(8usize, 300), (40, 200), (100, 120), (5000, 5)] {
        let rec = format::record_bytes(len) as u64;
        // The smallest segment (room for 85 of the smallest records), ones whose room ends
        // part-way into a record, and for the largest records one that holds a single record
        // (its first record goes in even where it does not fit).
        let min = 8192u64;
        for seg in [min, min + rec / 2 + 3, min + end_room + 2 * rec - 8, min + 4096] {
            for every in [0, 1, 3, 4, 1024, u64::MAX] {
                let opts = JournalOptions { segment_bytes: seg, index_every: every, ..JournalOptions::default() };
                for split in [1, 2, 7, 64] {
                    same_as_walk(opts, &prefix, 7, count, len, split);
                    same_as_walk(opts, &[], 0, count, len, split);
                }
            }
        }
    }
}

/// A run that is not what it says is refused before any of it is written.
#[test]
fn a_run_that_is_not_its_shape_is_refused_whole() {
    let d = Dir::new("run-bad");
    let mut w = JournalWriter::open(&d.0, meta(), JournalOptions::default()).unwrap();
    let rec = format::record_bytes(16);
    let good = run(10, 14, 16);
    let queued = |e: JournalError| matches!(e, JournalError::Queued { .. });
    // Wrong first sequence, wrong size (whole multiples of it too), not whole records, a cut
    // record.
    assert!(queued(w.append_run(&good, 11, rec).unwrap_err()));
    assert!(queued(w.append_run(&good, 10, format::record_bytes(24)).unwrap_err()));
    let eight = run(10, 18, 16); // 8 records of 56 bytes: 7 "records" of 64
    assert!(queued(w.append_run(&eight, 10, 64).unwrap_err()));
    assert!(queued(w.append_run(&eight, 10, 2 * rec).unwrap_err()), "two records taken for one");
    assert!(queued(w.append_run(&good[..good.len() - 8], 10, rec).unwrap_err()));
    assert!(queued(w.append_run(&good, 10, 8).unwrap_err()), "smaller than any record");
    // The last record's sequence does not follow (first and last are always checked).
    let mut skip = run(10, 13, 16);
    skip.extend(record(20, 16));
    assert!(queued(w.append_run(&skip, 10, rec).unwrap_err()));
    // A gap record is never part of a run.
    let (g, c) = format::gap(10, 1, 5);
    let mut gap = vec![0; format::record_bytes(8)];
    format::emit(&mut gap, &g, &c);
    assert!(queued(w.append_run(&gap, 10, gap.len()).unwrap_err()));
    assert_eq!(w.records(), 0, "nothing written");
    w.append_run(&good, 10, rec).unwrap();
    // Below what the journal holds, and past the last sequence there is.
    assert!(matches!(w.append_run(&good, 10, rec), Err(JournalError::Order { .. })));
    let far = run(format::MAX_SEQUENCE, format::MAX_SEQUENCE + 2, 16);
    assert!(matches!(w.append_run(&far, format::MAX_SEQUENCE, rec), Err(JournalError::Range { .. })));
    assert_eq!(w.records(), 4);
    assert_eq!(w.next_sequence(), Some(14));
}

/// In debug builds (the tests') every record of a run is checked, not only its ends.
#[cfg(debug_assertions)]
#[test]
fn a_bad_record_inside_a_run_is_refused_in_debug_builds() {
    let d = Dir::new("run-middle");
    let mut w = JournalWriter::open(&d.0, meta(), JournalOptions::default()).unwrap();
    let rec = format::record_bytes(16);
    let mut bytes = run(0, 5, 16);
    let mut h = RecordHeader::read_from_prefix(&bytes[2 * rec..]).unwrap().0;
    assert_eq!(h.kind, KIND_MESSAGE);
    h.sequence = 9;
    bytes[2 * rec..2 * rec + format::RECORD_HEADER_BYTES].copy_from_slice(zerocopy::IntoBytes::as_bytes(&h));
    assert!(matches!(w.append_run(&bytes, 0, rec), Err(JournalError::Queued { .. })));
    assert_eq!(w.records(), 0);
}

/// With the release builds' checks alone (a run's ends and its indexed records), a bad indexed
/// record is refused before any of the run is written, and no index entry is left naming a
/// record that was not: the records before it were checked first.
#[test]
fn with_the_release_checks_alone_a_bad_indexed_record_leaves_no_entry_behind() {
    super::RELEASE_CHECKS.with(|c| c.set(true));
    let d = Dir::new("run-release");
    let opts = JournalOptions { index_every: 2, ..JournalOptions::default() };
    let mut w = JournalWriter::open(&d.0, meta(), opts).unwrap();
    let rec = format::record_bytes(16);
    // A fresh segment indexes records 0, 2, 4, 6: the fifth (4) is wrong.
    let mut bytes = run(0, 8, 16);
    let mut h = RecordHeader::read_from_prefix(&bytes[4 * rec..]).unwrap().0;
    h.sequence = 40;
    bytes[4 * rec..4 * rec + format::RECORD_HEADER_BYTES].copy_from_slice(zerocopy::IntoBytes::as_bytes(&h));
    assert!(matches!(w.append_run(&bytes, 0, rec), Err(JournalError::Queued { .. })));
    assert_eq!(w.records(), 0);
    w.close().unwrap();
    super::RELEASE_CHECKS.with(|c| c.set(false));
    let idx: u64 = contents(&d.0).iter().filter(|(n, _)| n.ends_with(".idx")).map(|(_, b)| b.len() as u64).sum();
    assert!(contents(&d.0).iter().any(|(n, _)| n.ends_with(".idx")), "the segment's index file is there");
    assert_eq!(idx, 0, "index entries were written for records that were not");
    assert_eq!(JournalWriter::open(&d.0, meta(), opts).unwrap().next_sequence(), None);
}
