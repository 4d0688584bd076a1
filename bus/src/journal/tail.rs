//! Following a journal while a recorder writes it: the [`Archive`] a late joiner catches up
//! from ([`crate::merge::ReplayMerge`]).
//!
//! A reader lists a journal's segments and maps each at the length it had when mapped; a
//! recorder appends to the last segment and starts new ones. So when the cursor finds nothing
//! more, the tail maps its segment again (at most every [`REFRESH`]: records appended come
//! into view), and once the cursor stands at the segment's end record it opens the journal again
//! and reads on from the start of the next segment. Nothing is delivered twice: the cursor keeps
//! its place across a remap and moves to the next segment only past an end record. (No seek
//! through the index after the first: the index of the segment being written lags its records,
//! so a seek there can scan most of a segment.) A damaged record is an error naming the file and
//! offset (the merge reports what it could not bring as a gap).
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::error::JournalError;
use super::format::{self, Kind};
use super::reader::{Cursor, JournalReader};
use super::source_id;
use crate::merge::{Archive, Entry};

/// How often a tail with nothing more to read maps its segment again to see records written
/// since.
pub const REFRESH: Duration = Duration::from_micros(200);

/// How often a tail that found no segment at all looks for one again.
pub const REOPEN: Duration = Duration::from_millis(20);

/// A journal read from a position on, as it grows.
pub struct JournalTail {
    dir: PathBuf,
    cursor: Option<Cursor>,
    /// The position after the last record taken: where a reopened cursor seeks to.
    next: u64,
    /// The record peeked and not yet taken: where it starts in the cursor's segment, and what
    /// it is.
    current: Option<(usize, Entry)>,
    /// Where the last message peeked has its payload in the cursor's map, and its length (it
    /// stays readable until the next peek).
    payload_at: Option<(usize, usize)>,
    /// Positions before the journal's first record that were asked for: not in it.
    lead: Option<Entry>,
    started: bool,
    refreshed: Option<Instant>,
    remapped: Option<Instant>,
    source: Option<u64>,
    /// Why the journal could not be read: kept, and returned by every later peek (a record
    /// the cursor moved past when it failed is never skipped in silence).
    failed: Option<String>,
}

impl JournalTail {
    /// Follows the journal in `dir` from position `from`. A folder with no segment yet (a
    /// recorder just starting) is read as empty until one appears; a foreign or damaged
    /// journal is an error.
    pub fn open(dir: &Path, from: u64) -> Result<JournalTail, JournalError> {
        let source = source_id::read(dir)?;
        let mut t = JournalTail {
            dir: dir.to_owned(),
            cursor: None,
            next: from,
            current: None,
            payload_at: None,
            lead: None,
            started: false,
            refreshed: None,
            remapped: None,
            source,
            failed: None,
        };
        t.reopen()?;
        Ok(t)
    }

    /// The journal folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the journal holds a record not yet taken, looking again at what was written
    /// since (syscalls: for idle paths). A journal that cannot be read has nothing more.
    pub fn has_more(&mut self) -> bool {
        if self.current.is_some() || self.lead.is_some() {
            return true;
        }
        if self.failed.is_some() {
            return false;
        }
        // Due now, whatever the refresh interval says.
        (self.remapped, self.refreshed) = (None, None);
        matches!(self.peek(), Ok(Some(_)))
    }

    /// Records written since the cursor's segment was mapped: maps it again; at its end record
    /// (the recorder rolled over), opens the journal again to list the next segment and reads
    /// on from its start (no seek: the cursor's place is known).
    fn look_again(&mut self) -> Result<Option<(usize, Entry)>, JournalError> {
        let Some(c) = self.cursor.as_mut() else { return Ok(None) };
        c.remap();
        if let Some(got) = self.read()? {
            return Ok(Some(got));
        }
        let c = self.cursor.as_mut().expect("checked above");
        if !c.sealed() {
            return Ok(None);
        }
        // Sealed: the next segment, looked for at most every REOPEN (a recorder that sealed a
        // segment and stopped must not cost a folder scan every REFRESH).
        if self.refreshed.is_some_and(|t| t.elapsed() < REOPEN) {
            return Ok(None);
        }
        let next = c.segment_number() + 1;
        self.refreshed = Some(Instant::now());
        let r = JournalReader::open(&self.dir)?;
        match r.cursor_at_segment(next) {
            Some(c) => {
                self.cursor = Some(c);
                self.read()
            }
            None => Ok(None), // sealed, but its successor not begun yet
        }
    }

    /// Opens the journal again at the position after the last record taken.
    fn reopen(&mut self) -> Result<(), JournalError> {
        self.refreshed = Some(Instant::now());
        if self.source.is_none() {
            // A tail opened before its recorder wrote the identity learns it here (at most
            // every REOPEN), not never: a snapshot maker stamps it in every chunk.
            self.source = source_id::read(&self.dir)?;
        }
        let r = match JournalReader::open(&self.dir) {
            Ok(r) => r,
            Err(JournalError::Empty { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        self.cursor = Some(r.seek_sequence(self.next)?);
        Ok(())
    }

    /// The next record from the cursor, if there is one now.
    #[inline]
    fn read(&mut self) -> Result<Option<(usize, Entry)>, JournalError> {
        let Some(c) = self.cursor.as_mut() else { return Ok(None) };
        let Some(start) = c.step()? else { return Ok(None) };
        let r = c.record_at(start)?;
        let e = match r.kind {
            Kind::Message(p) => Entry::Message { position: r.sequence, len: p.len() },
            Kind::Gap { count } => Entry::Gap { position: r.sequence, count },
            // The cursor moves past end records itself.
            Kind::End => return Ok(None),
        };
        Ok(Some((start, e)))
    }
}

impl Archive for JournalTail {
    type Error = JournalError;

    #[inline]
    fn peek(&mut self) -> Result<Option<Entry>, JournalError> {
        if let Some(l) = self.lead {
            return Ok(Some(l));
        }
        if let Some(why) = &self.failed {
            return Err(JournalError::Unreadable { path: self.dir.clone(), reason: why.clone() });
        }
        if self.current.is_none() {
            match self.fetch() {
                Ok(true) => {}
                Ok(false) => return Ok(None),
                Err(e) => {
                    self.failed = Some(e.to_string());
                    return Err(e);
                }
            }
            if let Some(l) = self.lead {
                return Ok(Some(l));
            }
        }
        let (start, e) = self.current.expect("fetched");
        self.payload_at = match e {
            Entry::Message { len, .. } => Some((start + format::RECORD_HEADER_BYTES, len)),
            Entry::Gap { .. } => None,
        };
        Ok(Some(e))
    }

    #[inline]
    fn take(&mut self) {
        if let Some(l) = self.lead.take() {
            self.next = self.next.max(l.end());
            return;
        }
        if let Some((_, e)) = self.current.take() {
            self.next = self.next.max(e.end());
        }
    }

    #[inline]
    fn payload(&self) -> &[u8] {
        let (Some((at, len)), Some(c)) = (self.payload_at, self.cursor.as_ref()) else { return &[] };
        // The record was checked (CRC and bounds) when the cursor reached it; `get` keeps a
        // file changed under the map since from panicking here.
        c.bytes().get(at..at + len).unwrap_or(&[])
    }

    fn source_id(&self) -> Option<u64> {
        self.source
    }

    /// The common case straight from the cursor: no record peeked, none failed, the next one a
    /// message at `at_least` or later.
    #[inline]
    fn take_message(&mut self, at_least: u64) -> Result<Option<(u64, usize)>, JournalError> {
        if self.current.is_some() || self.lead.is_some() || self.failed.is_some() || !self.started {
            return crate::merge::take_message_by_peek(self, at_least);
        }
        let got = match self.read() {
            Ok(got) => got,
            Err(e) => {
                self.failed = Some(e.to_string());
                return Err(e);
            }
        };
        match got {
            Some((start, Entry::Message { position, len })) if position >= at_least => {
                self.payload_at = Some((start + format::RECORD_HEADER_BYTES, len));
                self.next = self.next.max(position + 1);
                Ok(Some((position, len)))
            }
            Some(other) => {
                self.current = Some(other); // for peek: nothing taken
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// Forward to `position` through the index, if it is past what was taken.
    fn seek(&mut self, position: u64) -> Result<(), JournalError> {
        if position <= self.next || self.failed.is_some() {
            return Ok(());
        }
        self.next = position;
        (self.current, self.lead, self.payload_at) = (None, None, None);
        self.started = true;
        self.reopen()
    }
}

impl JournalTail {
    /// Reads the next record into `current` (and the lead gap before the first one, if the
    /// journal begins after the position asked for); false when there is none yet.
    #[inline]
    fn fetch(&mut self) -> Result<bool, JournalError> {
        let mut got = self.read()?;
        if got.is_none() && self.remapped.is_none_or(|t| t.elapsed() >= REFRESH) {
            self.remapped = Some(Instant::now());
            got = self.look_again()?;
        }
        if got.is_none() && self.cursor.is_none() && self.refreshed.is_none_or(|t| t.elapsed() >= REOPEN) {
            // No segment yet when last looked: a recorder just starting.
            self.reopen()?;
            got = self.read()?;
        }
        let Some((start, e)) = got else { return Ok(false) };
        if !self.started {
            self.started = true;
            if e.position() > self.next {
                // The journal begins after the position asked for: those are not in it.
                self.lead = Some(Entry::Gap { position: self.next, count: e.position() - self.next });
            }
        }
        self.current = Some((start, e));
        Ok(true)
    }
}

#[cfg(test)]
#[path = "tail_tests.rs"]
mod tests;
