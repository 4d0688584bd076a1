//! Appending a run of same-size message records with consecutive sequences, described by the
//! one who laid them out (a recorder's poll side): the journal checks the run's ends, not every
//! record, and computes where segments end and index entries fall from the run's shape.
//!
//! Why: [`JournalWriter::append_records`] reads every record's header to find the next and to
//! check it. On a recorder's writer thread that walk was what fell behind at full rate (each
//! header a line just written on the poll side's core): the lab's recorder benchmark measured
//! 0.55-0.75x the bare sequential write in the rounds it bound, and 0.99-1.05x with no walk.
use std::io::Write;

use zerocopy::FromBytes;

use super::JournalWriter;
use crate::journal::error::JournalError;
use crate::journal::format::{self, RecordHeader, DATA_START, KIND_MESSAGE, MAX_PAYLOAD};
use crate::journal::index::IndexEntry;

impl JournalWriter {
    /// Appends `bytes`: whole message records of `rec` bytes each, laid out and sealed as
    /// [`format::emit`] writes them, with sequences `first`, `first + 1`, … in order. Segments
    /// roll and index entries fall exactly where [`JournalWriter::append_records`] puts them
    /// (for well-formed records). Only the run's first and last records and those indexed are
    /// checked against its shape (every one in debug builds, which the tests run): the caller
    /// vouches for the rest, as the journal's own recorder does for what it laid out.
    pub(crate) fn append_run(&mut self, mut bytes: &[u8], mut first: u64, rec: usize) -> Result<(), JournalError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if rec < format::record_bytes(0) || rec > format::record_bytes(MAX_PAYLOAD) || !bytes.len().is_multiple_of(rec)
        {
            return Err(JournalError::Queued { why: "a run is not whole records of its size" });
        }
        let count = (bytes.len() / rec) as u64;
        self.check_order(first)?;
        if first.checked_add(count - 1).is_none_or(|last| last > format::MAX_SEQUENCE) {
            return Err(JournalError::Range { sequence: first, count });
        }
        check_header(&bytes[..rec], first, rec)?;
        check_header(&bytes[bytes.len() - rec..], first + count - 1, rec)?;
        if check_every_record() {
            for (i, r) in bytes.chunks_exact(rec).enumerate() {
                check_header(r, first + i as u64, rec)?;
            }
        }
        let end_room = format::record_bytes(0) as u64;
        let every = self.opts.index_every.max(1);
        loop {
            // How many of the run's records fit this segment (the first record of a segment
            // always does, whatever its size).
            let at = self.seg.len;
            let room = self.opts.segment_bytes.saturating_sub(at + end_room) / rec as u64;
            let fits = if at <= DATA_START as u64 { room.max(1) } else { room };
            let k = fits.min((bytes.len() / rec) as u64) as usize;
            if k == 0 {
                self.roll(first)?;
                continue; // a new segment: its first record fits
            }
            let (now, later) = bytes.split_at(k * rec);
            // Message records since the last entry: the next entry is that many short of
            // `every` away, then every `every`th.
            let since = self.seg.since_index;
            let indexed =
                ((every - 1).saturating_sub(since)..k as u64).step_by(usize::try_from(every).unwrap_or(usize::MAX));
            // The headers of the records indexed are read anyway: checked like the run's ends,
            // all of them before any entry is written (an entry must never name a record that
            // was not written).
            for i in indexed.clone() {
                check_header(&now[i as usize * rec..][..rec], first + i, rec)?;
            }
            let mut last_entry = None;
            for i in indexed {
                let (h, _) = RecordHeader::read_from_prefix(&now[i as usize * rec..]).expect("a whole record is there");
                self.put_index(IndexEntry {
                    sequence: h.sequence,
                    receive_tsc: h.receive_tsc,
                    offset: at + i * rec as u64,
                })?;
                last_entry = Some(i);
            }
            self.seg.since_index = match last_entry {
                Some(j) => k as u64 - 1 - j,
                None => since.saturating_add(k as u64),
            };
            self.seg.file.write_all(now).map_err(|e| JournalError::io("writing", &self.seg.path, e))?;
            self.seg.len += now.len() as u64;
            self.records += k as u64;
            first += k as u64;
            self.next = Some(first);
            bytes = later;
            if bytes.is_empty() {
                return Ok(());
            }
            self.roll(first)?;
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Set by a test to run the release builds' checks alone (see [`check_every_record`]).
    static RELEASE_CHECKS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Every record of a run is checked, not only its ends and indexed ones: in debug builds
/// (unless a test asks for the release builds' checks alone).
fn check_every_record() -> bool {
    #[cfg(test)]
    if RELEASE_CHECKS.with(|c| c.get()) {
        return false;
    }
    cfg!(debug_assertions)
}

/// A record of the run is a message of `rec` bytes at `sequence`.
fn check_header(record: &[u8], sequence: u64, rec: usize) -> Result<(), JournalError> {
    let (h, _) = RecordHeader::read_from_prefix(record)
        .map_err(|_| JournalError::Queued { why: "a run's record is cut short" })?;
    if h.kind != KIND_MESSAGE || format::record_bytes(h.len as usize) != rec || h.sequence != sequence {
        return Err(JournalError::Queued { why: "a record is not the message its run says (kind, size or sequence)" });
    }
    Ok(())
}

#[cfg(test)]
#[path = "writer_run_tests.rs"]
mod tests;
