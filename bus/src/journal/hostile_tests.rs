//! Journal folders someone else planted things in, damaged segment headers and the folder's
//! durability (issue 25 items 6 to 9). Tests run as root, so "another user" is played by chown
//! and chmod to a uid that is not ours.
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use super::tests::{meta, read_all, read_until_error, small, Dir};
use super::*;

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A journal of messages `0..n` with 8-byte payloads, closed.
fn journal(dir: &Path, n: u64, opts: JournalOptions) {
    let mut w = JournalWriter::open(dir, meta(), opts).unwrap();
    for s in 0..n {
        w.append(s, 0, 0, &s.to_le_bytes()).unwrap();
    }
    w.close().unwrap();
}

/// `f`, which must return within 20 s: what hung forever before is a failure, not a hung suite.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    tickbus_testkit::within(Duration::from_secs(20), what, f)
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", p.display());
}

#[test]
fn links_planted_as_the_next_index_or_the_writer_lock_are_never_written_through() {
    let d = Dir::new("planted");
    journal(&d.0, 10, small());
    let victim = d.0.with_extension("victim");
    std::fs::write(&victim, b"precious").unwrap();
    // The next segment's index: the old writer created it with truncate, through the link.
    symlink(&victim, d.0.join("0000000001.idx")).unwrap();
    let mut w = JournalWriter::open(&d.0, meta(), small()).unwrap();
    w.append(10, 0, 0, b"after").unwrap();
    w.close().unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious", "the link's target was truncated");
    let idx = std::fs::symlink_metadata(d.0.join("0000000001.idx")).unwrap();
    assert!(idx.file_type().is_file(), "the planted link was replaced by the writer's own index");
    assert_eq!(read_all(&JournalReader::open(&d.0).unwrap()).unwrap().len(), 11);

    // The writer lock: the old writer opened it through the link (creating its target).
    let absent = d.0.with_extension("created-through-the-link");
    std::fs::remove_file(d.0.join("writer.lock")).unwrap();
    symlink(&absent, d.0.join("writer.lock")).unwrap();
    let err = JournalWriter::open(&d.0, meta(), small()).err().expect("a linked lock is refused");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert!(!absent.exists(), "the lock's link was followed");
    let _ = std::fs::remove_file(&victim);
}

#[test]
fn a_journal_folder_others_can_write_or_another_user_owns_is_refused_before_anything_is_made() {
    let d = Dir::new("foreign");
    std::fs::create_dir_all(&d.0).unwrap();
    chmod(&d.0, 0o777);
    let err = JournalWriter::open(&d.0, meta(), small()).err().expect("a 0777 folder is refused");
    assert!(matches!(err, JournalError::Unsafe { .. }) && err.to_string().contains("writable by others"), "{err}");
    assert_eq!(std::fs::read_dir(&d.0).unwrap().count(), 0, "nothing may be made in it");

    chmod(&d.0, 0o750);
    std::os::unix::fs::lchown(&d.0, Some(65534), None).unwrap();
    let err = JournalWriter::open(&d.0, meta(), small()).err().expect("a foreign folder is refused");
    assert!(err.to_string().contains("owned by uid 65534"), "{err}");

    // A folder inside a folder another user owns (who could rename ours away and plant theirs).
    let inner = d.0.join("day");
    std::fs::create_dir_all(&inner).unwrap();
    let err = JournalWriter::open(&inner, meta(), small()).err().expect("a foreign parent is refused");
    assert!(err.to_string().contains("owned by uid 65534") && err.to_string().contains("replace"), "{err}");

    // A link where the folder should be.
    let d2 = Dir::new("linked");
    let real = Dir::new("real");
    std::fs::create_dir_all(&real.0).unwrap();
    symlink(&real.0, &d2.0).unwrap();
    let err = JournalWriter::open(&d2.0, meta(), small()).err().expect("a linked folder is refused");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    let _ = std::fs::remove_file(&d2.0);

    // A folder the writer makes is its user's alone to write.
    let fresh = Dir::new("fresh");
    journal(&fresh.0, 1, small());
    let mode = std::fs::metadata(&fresh.0).unwrap().permissions().mode();
    assert_eq!(mode & 0o022, 0, "made with mode {mode:o}");
}

#[test]
fn an_index_linked_to_dev_zero_and_a_fifo_as_a_segment_or_index_neither_hang_nor_fill_memory() {
    let d = Dir::new("devzero");
    journal(&d.0, 50, small());
    // An index linked to /dev/zero was read whole (forever, growing).
    std::fs::remove_file(d.0.join("0000000000.idx")).unwrap();
    symlink("/dev/zero", d.0.join("0000000000.idx")).unwrap();
    let dir = d.0.clone();
    let n = within("opening with an index linked to /dev/zero", move || {
        let r = JournalReader::open(&dir).unwrap();
        (r.segments()[0].entries.len(), read_all(&r).unwrap().len())
    });
    assert_eq!(n, (0, 50), "the index is ignored (a hint), every record read");

    // A FIFO as the index: opening blocked until a writer came.
    std::fs::remove_file(d.0.join("0000000000.idx")).unwrap();
    mkfifo(&d.0.join("0000000000.idx"));
    let dir = d.0.clone();
    assert_eq!(
        within("opening with a FIFO as the index", move || read_all(&JournalReader::open(&dir).unwrap())
            .unwrap()
            .len()),
        50
    );

    // A FIFO as the last segment: inspect, replay and record blocked forever.
    mkfifo(&d.0.join("0000000001.tbj"));
    let dir = d.0.clone();
    let err = within("opening a journal whose last segment is a FIFO", move || read_until_error(&dir).to_string());
    assert!(err.contains("0000000001.tbj") && err.contains("not a regular file"), "{err}");
    let dir = d.0.clone();
    let err =
        within("reopening to record", move || JournalWriter::open(&dir, meta(), small()).err().map(|e| e.to_string()));
    let err = err.expect("a FIFO segment is refused");
    assert!(err.contains("0000000001.tbj") && err.contains("not a regular file"), "{err}");
}

/// Segment `k` of `dir` with its header's bytes 40..48 garbled (its CRC no longer matches).
fn garble_header(dir: &Path, k: u64) {
    let p = segment_path(dir, k);
    let mut b = std::fs::read(&p).unwrap();
    for x in &mut b[40..48] {
        *x ^= 0x5a;
    }
    std::fs::write(&p, &b).unwrap();
}

#[test]
fn a_header_torn_on_an_empty_last_segment_leaves_the_journal_readable_and_recordable() {
    let d = Dir::new("torn-header");
    journal(&d.0, 30, small());
    // What a power cut leaves when it lands as the next segment is created: its first page, with
    // a header only partly on disk and no record after it.
    let w = JournalWriter::open(&d.0, meta(), small()).unwrap();
    drop(w);
    let last = writer::segments(&d.0).unwrap().pop().unwrap();
    assert_eq!(last, 1, "reopening began segment 1");
    garble_header(&d.0, 1);
    // It was the end of the data, not a journal nobody can open (before: open failed).
    assert_eq!(read_all(&JournalReader::open(&d.0).unwrap()).unwrap().len(), 30);
    // Recording goes on (before: the writer refused too), the torn segment kept aside.
    let mut w = JournalWriter::open(&d.0, meta(), small()).unwrap();
    let rec = w.recovery().cloned().expect("the torn segment is reported");
    assert!(rec.reason.contains("checksum") && rec.reason.contains("moved aside"), "{}", rec.reason);
    assert!(rec.segment.ends_with("0000000001.tbj.torn") && rec.segment.exists(), "{:?}", rec.segment);
    w.append(30, 0, 0, b"on").unwrap();
    w.close().unwrap();
    assert_eq!(read_all(&JournalReader::open(&d.0).unwrap()).unwrap().len(), 31);
}

#[test]
fn a_damaged_header_with_records_after_it_is_an_error_after_every_earlier_record() {
    let d = Dir::new("mid-header");
    let opts = JournalOptions { segment_bytes: 16 << 10, ..small() };
    journal(&d.0, 1000, opts);
    let n = writer::segments(&d.0).unwrap().len();
    assert!(n >= 4, "{n} segments");
    garble_header(&d.0, 2);
    let r = JournalReader::open(&d.0).unwrap();
    let (path, why) = r.damage().expect("open says so");
    assert!(path.ends_with("0000000002.tbj") && why.contains("checksum"), "{path:?}: {why}");
    let e = read_until_error(&d.0);
    assert!(e.to_string().contains("0000000002.tbj") && e.to_string().contains("before it was delivered"), "{e}");
    // The last segment with a bad header and records after it is damage too, not a torn create.
    let d2 = Dir::new("last-header");
    journal(&d2.0, 1000, opts);
    let last = writer::segments(&d2.0).unwrap().pop().unwrap();
    garble_header(&d2.0, last);
    assert!(matches!(read_until_error(&d2.0), JournalError::Unreadable { .. }));
    let err = JournalWriter::open(&d2.0, meta(), opts).err().expect("recording on is refused");
    assert!(err.to_string().contains("checksum"), "{err}");
}

#[test]
fn new_segments_names_are_synced_unless_the_policy_is_none() {
    for (durability, synced) in
        [(Durability::None, false), (Durability::PerSegment, true), (Durability::Every(Duration::from_secs(1)), true)]
    {
        let d = Dir::new("dirsync");
        let opts = JournalOptions { segment_bytes: 16 << 10, durability, ..small() };
        let mut w = JournalWriter::open(&d.0, meta(), opts).unwrap();
        assert_eq!(w.folder_syncs(), u64::from(synced), "{durability:?}: the first segment's name");
        for s in 0..1000 {
            w.append(s, 0, 0, &[1; 32]).unwrap();
        }
        let segments = writer::segments(&d.0).unwrap().len() as u64;
        assert!(segments >= 3, "{segments}");
        assert_eq!(w.folder_syncs(), if synced { segments } else { 0 }, "{durability:?}: once per segment");
        w.close().unwrap();
    }
}

/// Found by the whole-folder fuzz target (`bus/fuzz/fuzz_targets/journal_folder.rs`): segment 0
/// copied over segment 2's name was read as if the stream went on, delivering messages 0.. a
/// second time after the stream had reached the end of segment 1, and a writer recorded on
/// behind it. Its header names segment 0: readers stop before it and say so, writers refuse.
#[test]
fn a_segment_copied_into_another_ones_place_is_never_delivered_as_the_stream_going_on() {
    let d = Dir::new("copied-segment");
    let opts = JournalOptions { segment_bytes: 16 << 10, ..small() };
    journal(&d.0, 1000, opts);
    assert!(writer::segments(&d.0).unwrap().len() >= 4);
    std::fs::copy(segment_path(&d.0, 0), segment_path(&d.0, 2)).unwrap();
    let e = read_until_error(&d.0);
    assert!(e.to_string().contains("0000000002.tbj") && e.to_string().contains("says it is segment 0"), "{e}");
    // A writer refuses too: what it recorded after the middle segment would never be read (the
    // code before checked only the last segment's number and recorded on).
    let err = JournalWriter::open(&d.0, meta(), opts).err().expect("recording behind a misnumbered segment is refused");
    assert!(matches!(err, JournalError::Misnumbered { found: 0, expected: 2, .. }), "{err}");
    // As the last segment, the writer refuses to record on behind it.
    let d2 = Dir::new("copied-last");
    journal(&d2.0, 1000, opts);
    let last = writer::segments(&d2.0).unwrap().pop().unwrap();
    std::fs::copy(segment_path(&d2.0, 0), segment_path(&d2.0, last)).unwrap();
    let err = JournalWriter::open(&d2.0, meta(), opts).err().expect("recording on is refused");
    assert!(matches!(err, JournalError::Misnumbered { found: 0, .. }), "{err}");
}

/// A segment with the right number whose records are behind the stream (restored from another
/// recording of the same stream): the records before it are delivered, then an error; never the
/// same positions twice.
#[test]
fn records_behind_the_stream_are_an_error_not_a_redelivery() {
    let opts = JournalOptions { segment_bytes: 16 << 10, ..small() };
    let (a, b) = (Dir::new("order-a"), Dir::new("order-b"));
    journal(&a.0, 1000, opts);
    // The other recording of the stream, with larger messages: its segment 2 holds lower
    // positions than A's first two segments reach.
    let mut w = JournalWriter::open(&b.0, meta(), opts).unwrap();
    for s in 0..1000 {
        w.append(s, 0, 0, &[s as u8; 200]).unwrap();
    }
    w.close().unwrap();
    std::fs::copy(segment_path(&b.0, 2), segment_path(&a.0, 2)).unwrap();
    let r = JournalReader::open(&a.0).unwrap();
    let mut c = r.cursor();
    let mut seen = std::collections::HashSet::new();
    let err = loop {
        match c.next() {
            Ok(Some(rec)) => assert!(seen.insert(rec.sequence), "position {} delivered twice", rec.sequence),
            Ok(None) => panic!("the out-of-place records went unnoticed"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, JournalError::OutOfOrder { .. }), "{err}");
    assert!(err.to_string().contains("0000000002.tbj"), "{err}");
}
