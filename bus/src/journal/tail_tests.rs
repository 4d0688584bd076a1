//! A tail follows a journal while it is written: across segment rolls, from any position, with
//! gaps the journal recorded and those before its first record, and stops at damage saying
//! where.
use std::path::Path;

use super::super::tests::{meta, payload, small, Dir};
use super::super::JournalWriter;
use super::*;

/// Peeks and takes until the tail has nothing more now; returns what it read.
fn drain(t: &mut JournalTail, out: &mut Vec<(u64, Option<Vec<u8>>)>) {
    while let Some(e) = t.peek().unwrap() {
        match e {
            Entry::Message { position, len } => {
                assert_eq!(t.payload().len(), len);
                out.push((position, Some(t.payload().to_vec())));
            }
            Entry::Gap { position, .. } => out.push((position, None)),
        }
        t.take();
    }
}

fn wait_refresh() {
    std::thread::sleep(REFRESH + Duration::from_micros(100));
}

#[test]
fn a_tail_follows_a_journal_as_it_is_written_across_segments() {
    let d = Dir::new("tail-follow");
    let mut w = JournalWriter::open(&d.0, meta(), small()).unwrap();
    let mut t = JournalTail::open(&d.0, 0).unwrap();
    let mut got = Vec::new();
    drain(&mut t, &mut got);
    assert!(got.is_empty(), "nothing written yet");
    let mut seq = 0u64;
    for round in 0..40 {
        for _ in 0..50 {
            if seq == 700 {
                w.append_gap(700, 3, 0).unwrap();
                seq += 3;
                continue;
            }
            w.append(seq, 0, 0, &payload(seq)).unwrap();
            seq += 1;
        }
        w.flush().unwrap();
        if round % 3 == 0 {
            wait_refresh(); // also read with the refresh due, not only right away
        }
        drain(&mut t, &mut got);
        // Appended records show after a remap is due, a new segment after a reopen is.
        for wait in [REFRESH, REOPEN] {
            if got.last().map(|g| g.0) == Some(seq - 1) {
                break;
            }
            std::thread::sleep(wait + Duration::from_micros(200));
            drain(&mut t, &mut got);
        }
    }
    assert!(std::fs::read_dir(&d.0).unwrap().count() > 4, "the test must cross segments");
    let mut want = Vec::new();
    let mut s = 0;
    while s < seq {
        if s == 700 {
            want.push((700, None));
            s += 3;
            continue;
        }
        want.push((s, Some(payload(s))));
        s += 1;
    }
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the tail read other records than were written");
}

fn written(dir: &Path, first: u64, n: u64) {
    let mut w = JournalWriter::open(dir, meta(), small()).unwrap();
    for s in first..first + n {
        if s == first + 10 {
            continue; // an aborted claim: no record
        }
        w.append(s, 0, 0, &payload(s)).unwrap();
    }
    w.append_gap(first + n, 4, 0).unwrap();
    w.append(first + n + 4, 0, 0, &payload(first + n + 4)).unwrap();
    w.close().unwrap();
}

#[test]
fn a_tail_starts_at_the_position_asked_for_even_inside_a_gap() {
    let d = Dir::new("tail-from");
    written(&d.0, 0, 600);
    let mut t = JournalTail::open(&d.0, 333).unwrap();
    let mut got = Vec::new();
    drain(&mut t, &mut got);
    assert_eq!(got.first().map(|g| g.0), Some(333));
    assert_eq!(got.len(), 600 - 333 + 2);
    // Inside the gap: the gap record is the first thing read (the merge clips it).
    let mut t = JournalTail::open(&d.0, 602).unwrap();
    assert_eq!(t.peek().unwrap(), Some(Entry::Gap { position: 600, count: 4 }));
}

#[test]
fn positions_before_the_journal_begins_are_a_gap_not_silence() {
    let d = Dir::new("tail-lead");
    written(&d.0, 50, 20);
    let mut t = JournalTail::open(&d.0, 40).unwrap();
    assert_eq!(t.peek().unwrap(), Some(Entry::Gap { position: 40, count: 10 }));
    t.take();
    assert_eq!(t.peek().unwrap(), Some(Entry::Message { position: 50, len: payload(50).len() }));
    assert_eq!(t.payload(), payload(50));
    // Asked for exactly the first record: no gap.
    let mut t = JournalTail::open(&d.0, 50).unwrap();
    assert_eq!(t.peek().unwrap().map(|e| e.position()), Some(50));
}

#[test]
fn a_damaged_record_stops_the_tail_naming_the_file_and_offset() {
    let d = Dir::new("tail-damage");
    written(&d.0, 0, 300);
    let seg = super::super::segment_path(&d.0, 0);
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(&seg, &bytes).unwrap();
    let mut t = JournalTail::open(&d.0, 0).unwrap();
    let e = loop {
        match t.peek() {
            Ok(Some(_)) => t.take(),
            Ok(None) => panic!("damage read as the end of the journal"),
            Err(e) => break e,
        }
    };
    let s = e.to_string();
    assert!(s.contains(&seg.display().to_string()) && s.contains("offset"), "{s}");
    // Kept: the record after the damage is never offered as the next one.
    let again = t.peek().expect_err("the failure is kept").to_string();
    assert!(again.contains("offset"), "{again}");
    assert!(!t.has_more());
}

#[test]
fn a_folder_that_is_not_there_is_an_error() {
    let d = Dir::new("tail-none");
    let e = JournalTail::open(&d.0.join("nope"), 0).err().expect("refused");
    assert!(e.to_string().contains("nope"), "{e}");
}
