//! Checking a whole journal, for scripts (`tickbus journal verify`): every record's CRC and
//! order (a cursor checks both as it reads), and every index entry against the record it names.
//! A reader trusts an index only as a hint (it checks the entry it starts from), so a bad index
//! costs a scan, not a wrong record; verify says which entries are bad so they can be rebuilt.
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::format::Kind;
use super::index;
use super::reader::JournalReader;
use super::writer::index_path;

/// What verify found in one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentCheck {
    /// The segment's number.
    pub index: u64,
    /// Its file.
    pub path: PathBuf,
    /// Message and gap records read in it.
    pub records: u64,
    /// Entries in its index file.
    pub index_entries: u64,
    /// Entries that name no record, another sequence or another receive time, or are out of
    /// order: (entry number, why).
    pub bad_index: Vec<(u64, String)>,
}

/// What verify found in a journal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Every segment listed, in order.
    pub segments: Vec<SegmentCheck>,
    /// Message records.
    pub messages: u64,
    /// Gap records, and the positions they say were lost.
    pub gaps: u64,
    /// Positions the gap records cover.
    pub missed: u64,
    /// Why reading stopped before the end of the data (a damaged record, a segment missing or
    /// unreadable), naming the file and offset.
    pub error: Option<String>,
}

impl VerifyReport {
    /// Whether everything checked out: no damage and no bad index entry.
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.segments.iter().all(|s| s.bad_index.is_empty())
    }
}

/// Reads the whole journal in `dir`, checking every record and every index entry. Opening
/// errors (no journal, a foreign file) are the `Err`; damage found while reading is in the
/// report, after everything before it was counted.
pub fn verify(dir: &Path) -> Result<VerifyReport, super::JournalError> {
    let r = JournalReader::open(dir)?;
    let mut report = VerifyReport::default();
    // The current segment's record starts: offset -> (sequence, receive TSC), message records
    // only (the index names message records). One segment at a time: memory is bounded by a
    // segment, not the day.
    let mut starts: HashMap<u64, (u64, u64)> = HashMap::new();
    let (mut seg, mut records) = (0usize, 0u64);
    let mut c = r.cursor();
    loop {
        let step = c.step();
        // Leaving segment `seg` (the cursor moved on, or reading ended): check its index.
        if !matches!(step, Ok(Some(_))) || c.segment() != seg {
            check_index(dir, &r.segments()[seg], &starts, records, &mut report);
            starts.clear();
            records = 0;
            seg = c.segment();
        }
        match step {
            Ok(Some(at)) => {
                let rec = match c.record_at(at) {
                    Ok(rec) => rec,
                    Err(e) => {
                        report.error = Some(e.to_string());
                        break;
                    }
                };
                records += 1;
                match rec.kind {
                    Kind::Message(_) => {
                        report.messages += 1;
                        starts.insert(at as u64, (rec.sequence, rec.receive_tsc));
                    }
                    Kind::Gap { count } => {
                        report.gaps += 1;
                        report.missed = report.missed.saturating_add(count);
                    }
                    Kind::End => {}
                }
            }
            Ok(None) => break,
            Err(e) => {
                report.error = Some(e.to_string());
                break;
            }
        }
    }
    if let Some((path, why)) = r.damage() {
        report.error.get_or_insert_with(|| format!("{}: {why}", path.display()));
    }
    Ok(report)
}

/// Checks segment `s`'s index entries against its record starts; adds the segment's line to
/// the report.
fn check_index(
    dir: &Path,
    s: &super::reader::SegmentInfo,
    starts: &HashMap<u64, (u64, u64)>,
    records: u64,
    report: &mut VerifyReport,
) {
    if report.segments.iter().any(|c| c.index == s.index) {
        return; // already checked (reading ended right after leaving it)
    }
    {
        let entries = index::read(&index_path(dir, s.index), s.header.segment_bytes);
        let mut bad = Vec::new();
        for (n, e) in entries.iter().enumerate() {
            let why = match starts.get(&e.offset) {
                None => Some(format!("offset {} is not the start of a message record", e.offset)),
                Some(&(seq, _)) if seq != e.sequence => {
                    Some(format!("offset {} holds sequence {seq}, the entry says {}", e.offset, e.sequence))
                }
                Some(&(_, tsc)) if tsc != e.receive_tsc => {
                    Some(format!("offset {} was received at TSC {tsc}, the entry says {}", e.offset, e.receive_tsc))
                }
                Some(_) if n > 0 && e.offset <= entries[n - 1].offset => {
                    Some(format!("offset {} is not after the entry before it", e.offset))
                }
                Some(_) => None,
            };
            if let Some(why) = why {
                bad.push((n as u64, why));
            }
        }
        report.segments.push(SegmentCheck {
            index: s.index,
            path: s.path.clone(),
            records,
            index_entries: entries.len() as u64,
            bad_index: bad,
        });
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Seek, SeekFrom, Write};

    use super::super::tests::{meta, payload, small, Dir};
    use super::super::JournalWriter;
    use super::*;

    fn written(dir: &Path, n: u64) {
        let mut w = JournalWriter::open(dir, meta(), small()).unwrap();
        for s in 0..n {
            if s == 50 {
                w.append_gap(50, 3, 0).unwrap();
            }
            if (50..53).contains(&s) {
                continue;
            }
            w.append(s, 0, s, &payload(s)).unwrap();
        }
        w.close().unwrap();
    }

    #[test]
    fn a_sound_journal_verifies_with_every_count() {
        let d = Dir::new("verify-ok");
        written(&d.0, 2000);
        let r = verify(&d.0).unwrap();
        assert!(r.ok(), "{r:?}");
        assert_eq!((r.messages, r.gaps, r.missed), (1997, 1, 3));
        assert!(r.segments.len() > 2, "crosses segments");
        assert!(r.segments.iter().all(|s| s.index_entries > 0));
    }

    #[test]
    fn one_index_entry_pointing_elsewhere_is_named() {
        let d = Dir::new("verify-index");
        written(&d.0, 2000);
        // Entry 1 of segment 0 moved 8 bytes on: no record starts there.
        let path = index_path(&d.0, 0);
        let mut f = std::fs::OpenOptions::new().write(true).read(true).open(&path).unwrap();
        let entries = index::entries(&std::fs::read(&path).unwrap());
        f.seek(SeekFrom::Start((index::ENTRY_BYTES + 16) as u64)).unwrap();
        f.write_all(&(entries[1].offset + 8).to_le_bytes()).unwrap();
        let r = verify(&d.0).unwrap();
        assert!(!r.ok());
        assert_eq!(r.error, None, "the records themselves are sound");
        let bad = &r.segments[0].bad_index;
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert_eq!(bad[0].0, 1);
        assert!(bad[0].1.contains("not the start of a message record"), "{bad:?}");
    }

    #[test]
    fn a_flipped_bit_is_reported_with_file_and_offset_after_the_records_before_it() {
        let d = Dir::new("verify-crc");
        written(&d.0, 2000);
        let seg = super::super::segment_path(&d.0, 1);
        let mut b = std::fs::read(&seg).unwrap();
        let at = b.len() / 2;
        b[at] ^= 1;
        std::fs::write(&seg, &b).unwrap();
        let r = verify(&d.0).unwrap();
        assert!(!r.ok());
        let e = r.error.as_deref().unwrap();
        assert!(e.contains(&seg.display().to_string()) && e.contains("offset"), "{e}");
        assert!(r.messages > 0 && r.messages < 1997, "{}", r.messages);
    }
}
