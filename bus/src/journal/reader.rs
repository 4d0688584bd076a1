//! Reading a journal: segments mapped one at a time, records checked by their CRC, a sparse
//! index to start from a sequence or a time. A damaged record before the end of the data is an
//! error naming the file and offset, after every record before it was delivered; a record cut
//! short at the very end of the last segment is the end of the data (a writer that crashed
//! there, or one still writing).
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::error::JournalError;
use super::folder;
use super::format::{self, FormatError, Kind, Record, SegmentHeader, DATA_START};
use super::index::{self, IndexEntry};
use super::writer::{index_path, segment_path, segments};

/// One segment of an open journal.
#[derive(Debug, Clone)]
pub struct SegmentInfo {
    /// The segment's number (its file name).
    pub index: u64,
    /// The segment file.
    pub path: PathBuf,
    /// Its header, as read and checked at open.
    pub header: SegmentHeader,
    /// Its index entries (loaded at open: small).
    pub entries: Vec<IndexEntry>,
}

/// A journal opened for reading. Cheap to clone (cursors own one).
#[derive(Debug, Clone)]
pub struct JournalReader {
    dir: PathBuf,
    segments: std::sync::Arc<[SegmentInfo]>,
    /// The segment after the last one listed, if it cannot be read: (its path, why).
    damaged: Option<std::sync::Arc<(PathBuf, String)>>,
}

impl JournalReader {
    /// Opens the journal in `dir`: every segment's header is checked (a foreign file, another
    /// format version or a damaged header is an error naming the file), and no segment may be
    /// missing between the first and the last. A segment that cannot be read after readable ones
    /// ends what this reader lists: a cursor delivers every record before it and then returns
    /// [`JournalError::Unreadable`] ([`JournalReader::damage`] says so at once). A last segment
    /// whose header was torn as it was created, with no record after it, is the end of the data
    /// (the writer moves it aside when it reopens). Only regular files are read (a link, a FIFO
    /// or a device is refused), and an index at most as long as its segment can need.
    pub fn open(dir: &Path) -> Result<JournalReader, JournalError> {
        let present = segments(dir)?;
        if present.is_empty() {
            return Err(JournalError::Empty { dir: dir.to_owned() });
        }
        let mut segs = Vec::with_capacity(present.len());
        let mut damaged = None;
        for (k, &i) in present.iter().enumerate() {
            if k > 0 && i != present[k - 1] + 1 {
                return Err(JournalError::Missing { dir: dir.to_owned(), missing: present[k - 1] + 1 });
            }
            let path = segment_path(dir, i);
            let last = k + 1 == present.len();
            if last && super::writer::never_begun(&path) {
                break; // a last segment whose first page never reached the disk: not begun
            }
            let header = match read_header(&path) {
                Ok(h) => h,
                Err(_) if last && matches!(super::writer::torn_at_creation(&path), Ok(Some(_))) => break,
                Err(e) if segs.is_empty() => return Err(e),
                Err(e) => {
                    damaged = Some(std::sync::Arc::new((path, e.to_string())));
                    break;
                }
            };
            if header.segment_index != i {
                let e = JournalError::Misnumbered { path: path.clone(), found: header.segment_index, expected: i };
                if segs.is_empty() {
                    return Err(e);
                }
                damaged = Some(std::sync::Arc::new((path, e.to_string())));
                break;
            }
            if let Some(first) = segs.first().map(|s: &SegmentInfo| s.header.stream_id) {
                if header.stream_id != first {
                    return Err(JournalError::Stream { dir: dir.to_owned(), found: header.stream_id, wanted: first });
                }
            }
            let entries = ordered_prefix(index::read(&index_path(dir, i), header.segment_bytes));
            segs.push(SegmentInfo { index: i, path, header, entries });
        }
        if segs.is_empty() {
            return Err(JournalError::Empty { dir: dir.to_owned() });
        }
        Ok(JournalReader { dir: dir.to_owned(), segments: segs.into(), damaged })
    }

    /// The segment after the readable ones that cannot be read, and why, if there is one: what a
    /// cursor returns as [`JournalError::Unreadable`] after the records before it.
    pub fn damage(&self) -> Option<(&Path, &str)> {
        self.damaged.as_deref().map(|(p, why)| (p.as_path(), why.as_str()))
    }

    fn unreadable(&self) -> Option<JournalError> {
        self.damaged
            .as_deref()
            .map(|(path, reason)| JournalError::Unreadable { path: path.clone(), reason: reason.clone() })
    }

    /// The journal folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The segments, in order.
    pub fn segments(&self) -> &[SegmentInfo] {
        &self.segments
    }

    /// The stream recorded.
    pub fn stream_id(&self) -> u32 {
        self.segments[0].header.stream_id
    }

    /// What was recorded, as the first segment says.
    pub fn source(&self) -> String {
        self.segments[0].header.source()
    }

    /// A cursor at the first record.
    pub fn cursor(&self) -> Cursor {
        Cursor { journal: self.clone(), seg: 0, map: None, at: DATA_START, reached: 0 }
    }

    /// A cursor at the first record of segment number `number`, if the journal lists it.
    pub(super) fn cursor_at_segment(&self, number: u64) -> Option<Cursor> {
        let k = self.segments.iter().position(|s| s.index == number)?;
        Some(self.at((k, DATA_START)))
    }

    /// A cursor at the first record whose sequence is `sequence` or later (or whose gap covers
    /// it), found through the index.
    pub fn seek_sequence(&self, sequence: u64) -> Result<Cursor, JournalError> {
        let start = self.indexed(|e| e.sequence <= sequence);
        let mut c = self.at_checked(start)?;
        c.skip_while(|r, _| end_of(r) <= sequence)?;
        Ok(c)
    }

    /// A cursor at the first record received at wall time `unix_ns` or later, through the index.
    pub fn seek_time(&self, unix_ns: u64) -> Result<Cursor, JournalError> {
        let start = self.indexed_time(unix_ns);
        let mut c = self.at_checked(start)?;
        c.skip_while(|_, wall| wall < unix_ns)?;
        Ok(c)
    }

    /// The last (segment, entry) whose index entry satisfies `before`.
    fn indexed(&self, before: impl Fn(&IndexEntry) -> bool) -> (usize, Option<IndexEntry>) {
        let mut best = (0, None);
        for (k, s) in self.segments.iter().enumerate() {
            let n = s.entries.partition_point(|e| before(e));
            if n > 0 {
                best = (k, Some(s.entries[n - 1]));
            }
            if n < s.entries.len() {
                break;
            }
        }
        best
    }

    fn indexed_time(&self, unix_ns: u64) -> (usize, Option<IndexEntry>) {
        let mut best = (0, None);
        for (k, s) in self.segments.iter().enumerate() {
            let n = s.entries.partition_point(|e| s.header.wall_ns(e.receive_tsc) <= unix_ns);
            if n > 0 {
                best = (k, Some(s.entries[n - 1]));
            }
            if n < s.entries.len() {
                break;
            }
        }
        best
    }

    fn at(&self, (seg, at): (usize, usize)) -> Cursor {
        Cursor { journal: self.clone(), seg, map: None, at, reached: 0 }
    }

    /// A cursor at an index entry's record if it is the record the entry names, else at the
    /// start of that segment (a stale or damaged index costs a scan, never a wrong place).
    fn at_checked(&self, (seg, entry): (usize, Option<IndexEntry>)) -> Result<Cursor, JournalError> {
        let Some(e) = entry else { return Ok(self.at((seg, DATA_START))) };
        let mut c = self.at((seg, DATA_START));
        let named = {
            let m = c.map()?;
            let at = e.offset as usize;
            matches!(format::parse(m.get(at..).unwrap_or(&[]), e.offset), Ok(Some((r, _))) if r.sequence == e.sequence)
        };
        if named {
            c.at = e.offset as usize;
        }
        Ok(c)
    }

    /// Wall time of a record's receive TSC, converted with its segment's anchors.
    pub fn wall_ns(&self, segment: usize, receive_tsc: u64) -> u64 {
        self.segments[segment].header.wall_ns(receive_tsc)
    }
}

/// Segment `path`'s header, read from a regular file and checked.
pub(super) fn read_header(path: &Path) -> Result<SegmentHeader, JournalError> {
    use std::io::Read;
    let mut head = vec![0u8; format::SEGMENT_HEADER_BYTES];
    folder::open_for_reading(path, "opening")?.read_exact(&mut head).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => JournalError::Segment {
            path: path.to_owned(),
            error: FormatError::Truncated { offset: 0, need: format::SEGMENT_HEADER_BYTES, have: 0 },
        },
        _ => JournalError::io("reading", path, e),
    })?;
    SegmentHeader::parse(&head).map_err(|error| JournalError::Segment { path: path.to_owned(), error })
}

/// The index entries up to the first that is out of order or misplaced (an index is a hint;
/// each entry is checked again against the record it points at before it is used).
fn ordered_prefix(mut entries: Vec<IndexEntry>) -> Vec<IndexEntry> {
    let mut keep = 0;
    while keep < entries.len() {
        let e = &entries[keep];
        let ok = e.offset >= DATA_START as u64
            && e.offset.is_multiple_of(8)
            && (keep == 0 || (e.offset > entries[keep - 1].offset && e.sequence >= entries[keep - 1].sequence));
        if !ok {
            break;
        }
        keep += 1;
    }
    entries.truncate(keep);
    entries
}

/// The sequence after what a record covers.
fn end_of(r: &Record<'_>) -> u64 {
    match r.kind {
        Kind::Gap { count } => r.sequence + count,
        _ => r.sequence + 1,
    }
}

/// A position in a journal; `next` reads on.
pub struct Cursor {
    journal: JournalReader,
    seg: usize,
    map: Option<Mmap>,
    at: usize,
    /// The lowest sequence the next record may carry: records are delivered in stream order,
    /// once, whatever the folder holds.
    reached: u64,
}

impl Cursor {
    /// Which segment the cursor is in (for [`JournalReader::wall_ns`]).
    pub fn segment(&self) -> usize {
        self.seg
    }

    /// Wall time of a receive TSC read in the current segment.
    pub fn wall_ns(&self, receive_tsc: u64) -> u64 {
        self.journal.wall_ns(self.seg, receive_tsc)
    }

    /// Where the cursor is: the current segment's file and the offset of the next record.
    pub fn location(&self) -> (&Path, u64) {
        (&self.journal.segments[self.seg].path, self.at as u64)
    }

    fn map(&mut self) -> Result<&Mmap, JournalError> {
        if self.map.is_none() {
            let path = &self.journal.segments[self.seg].path;
            let f = folder::open_for_reading(path, "opening")?;
            // SAFETY: mapped read-only. Journal writers never truncate or rewrite a segment's
            // records: they append, and a reopening writer writes an end record over a torn
            // tail (bytes that never formed a record). Bytes that change under the map anyway
            // are caught, not trusted: every record is bounds-checked and CRC-checked when
            // reached and bounds-checked again when read. A program truncating a segment being
            // read would fault this process (SIGBUS), as with any mapped file: journals are not
            // to be shared with such programs.
            let m = unsafe { Mmap::map(&f) }.map_err(|e| JournalError::io("mapping", path, e))?;
            // Read front to back: let the kernel read ahead (a hint; failing it changes nothing).
            let _ = m.advise(memmap2::Advice::Sequential);
            self.map = Some(m);
        }
        Ok(self.map.as_ref().expect("mapped above"))
    }

    /// The next message or gap record, `Ok(None)` at the end of the data.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Record<'_>>, JournalError> {
        let Some(start) = self.advance()? else { return Ok(None) };
        let m = self.map.as_ref().expect("mapped by advance");
        Ok(Some(format::parsed_again(&m[start..]).ok_or_else(|| self.changed(start))?))
    }

    /// A record that passed its check no longer parses: the file changed under the map.
    fn changed(&self, at: usize) -> JournalError {
        JournalError::Corrupt {
            path: self.journal.segments[self.seg].path.clone(),
            offset: at as u64,
            error: FormatError::Truncated { offset: at as u64, need: format::RECORD_HEADER_BYTES, have: 0 },
        }
    }

    /// [`Cursor::next`], with the record's receive time as wall-clock ns since the epoch.
    pub fn next_timed(&mut self) -> Result<Option<(Record<'_>, u64)>, JournalError> {
        let Some(start) = self.advance()? else { return Ok(None) };
        let header = &self.journal.segments[self.seg].header;
        let m = self.map.as_ref().expect("mapped by advance");
        let r = format::parsed_again(&m[start..]).ok_or_else(|| self.changed(start))?;
        Ok(Some((r, header.wall_ns(r.receive_tsc))))
    }

    /// Moves past the next message or gap record; returns where it starts in the current
    /// segment (None at the end of the data).
    fn advance(&mut self) -> Result<Option<usize>, JournalError> {
        loop {
            let last = self.seg + 1 == self.journal.segments.len();
            let at = self.at;
            let parsed = {
                let m = self.map()?;
                format::parse(m.get(at..).unwrap_or(&[]), at as u64).map(|r| {
                    r.map(|(r, n)| {
                        let count = match r.kind {
                            Kind::Gap { count } => count,
                            _ => 1,
                        };
                        (r.kind == Kind::End, n, r.sequence, count)
                    })
                })
            };
            let path = || self.journal.segments[self.seg].path.clone();
            match parsed {
                // The next segment is not begun yet, or cannot be read.
                Ok(Some((true, ..))) if last => return self.journal.unreadable().map_or(Ok(None), Err),
                Ok(Some((true, ..))) => {
                    self.seg += 1;
                    self.map = None;
                    self.at = DATA_START;
                }
                Ok(Some((false, _, sequence, _))) if sequence < self.reached => {
                    return Err(JournalError::OutOfOrder {
                        path: path(),
                        offset: at as u64,
                        sequence,
                        reached: self.reached,
                    });
                }
                Ok(Some((false, n, sequence, count))) => {
                    // Parsed records keep sequence + count within 2^63: no overflow.
                    self.reached = sequence + count;
                    self.at += n;
                    return Ok(Some(at));
                }
                Ok(None) | Err(_) if last => {
                    // The end of the data, or a record a live or crashed writer left torn (cut
                    // short, or its CRC not matching yet), as the writer judges it on reopen;
                    // unless intact records (a clean close's end record among them) follow:
                    // then it is a hole or damage.
                    if self.map.as_deref().and_then(|m| format::intact_after(m, at as u64)).is_some() {
                        let error = match parsed {
                            Err(e) => e,
                            _ => FormatError::Hole { offset: at as u64 },
                        };
                        return Err(JournalError::Corrupt { path: path(), offset: at as u64, error });
                    }
                    return self.journal.unreadable().map_or(Ok(None), Err);
                }
                Ok(None) => {
                    let next = self.journal.segments[self.seg + 1].index;
                    return Err(JournalError::CutShort { path: path(), offset: at as u64, next });
                }
                Err(error) => return Err(JournalError::Corrupt { path: path(), offset: at as u64, error }),
            }
        }
    }

    /// Moves past the next message or gap record and returns where it starts in the current
    /// segment (read it with [`Cursor::record_at`]); None at the end of the data.
    #[inline]
    pub(super) fn step(&mut self) -> Result<Option<usize>, JournalError> {
        self.advance()
    }

    /// Whether the cursor stands at its segment's end record: the segment is complete and the
    /// records go on in the next one (which a reader opened before it existed does not list).
    pub(super) fn sealed(&mut self) -> bool {
        let at = self.at;
        let Ok(m) = self.map() else { return false };
        matches!(format::parse(m.get(at..).unwrap_or(&[]), at as u64), Ok(Some((r, _))) if r.kind == Kind::End)
    }

    /// The current segment's mapped bytes (empty before the first read).
    #[inline]
    pub(super) fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// The number of the segment the cursor is in.
    pub(super) fn segment_number(&self) -> u64 {
        self.journal.segments[self.seg].index
    }

    /// Maps the current segment again on the next read, at its length then: records a writer
    /// appended since come into view (a map keeps the length it was made with).
    pub(super) fn remap(&mut self) {
        self.map = None;
    }

    /// The record `step` returned, read again from the map (it was checked when reached).
    #[inline]
    pub(super) fn record_at(&self, start: usize) -> Result<Record<'_>, JournalError> {
        let m = self.map.as_ref().ok_or_else(|| self.changed(start))?;
        format::parsed_again(m.get(start..).unwrap_or(&[])).ok_or_else(|| self.changed(start))
    }

    /// Calls `f` for every record from here to the end of the data; returns how many.
    pub fn for_each(&mut self, mut f: impl FnMut(&Record<'_>)) -> Result<u64, JournalError> {
        let mut n = 0;
        while let Some(r) = self.next()? {
            f(&r);
            n += 1;
        }
        Ok(n)
    }

    /// Moves past records for which `skip` holds, stopping before the first that does not.
    fn skip_while(&mut self, skip: impl Fn(&Record<'_>, u64) -> bool) -> Result<(), JournalError> {
        let mut reached = self.reached;
        while let Some(start) = self.advance()? {
            let m = self.map.as_ref().expect("mapped by advance");
            let r = format::parsed_again(&m[start..]).ok_or_else(|| self.changed(start))?;
            if !skip(&r, self.journal.wall_ns(self.seg, r.receive_tsc)) {
                // Back before this record: it is the next one delivered.
                (self.at, self.reached) = (start, reached);
                return Ok(());
            }
            reached = self.reached;
        }
        Ok(())
    }
}
