//! Appending to a journal: fixed-size segment files that roll over, a sparse index beside each,
//! and a write policy the user picks. Opening an existing journal finds its end by the records'
//! CRCs and cuts a torn or corrupt tail, saying how many bytes and why.
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use zerocopy::{FromBytes, IntoBytes};

use super::error::JournalError;
use super::folder;
use super::format::{
    self, FormatError, Kind, SegmentHeader, DATA_START, MAX_PAYLOAD, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES,
};
use super::index::{self, IndexEntry, ENTRY_BYTES};
use crate::time::Tsc;

#[path = "writer_run.rs"]
mod run;

/// When the journal asks the kernel to put written records on disk (fsync). Any policy keeps
/// every record written when the *process* crashes (the kernel has it); they differ in what a
/// *power failure* can take. A file's records survive a power failure only if its *name* does
/// too, so every policy but `None` also syncs the folder whenever a segment is created, moved
/// aside or removed (once per segment: off the record path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Never: the kernel writes back on its own (typically within 30 s). A power failure loses
    /// what it had not written yet, whole segments included (a new segment's name may not have
    /// reached the disk). Fastest.
    None,
    /// When a segment is complete (and on close), and the folder when a segment is created: a
    /// power failure loses at most the records of the segment being written (its name and header
    /// survive; a header torn by the cut is moved aside on reopen).
    PerSegment,
    /// At least this often while records arrive (and on close), and the folder when a segment is
    /// created: a power failure loses at most that much time of records.
    Every(Duration),
}

/// How a journal is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct JournalOptions {
    /// Bytes per segment file (records never span two). Default 64 MiB.
    pub segment_bytes: u64,
    /// When appended records are forced to disk. Default [`Durability::None`].
    pub durability: Durability,
    /// One index entry every this many message records. Default 1024.
    pub index_every: u64,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions { segment_bytes: 64 << 20, durability: Durability::None, index_every: 1024 }
    }
}

/// What a journal records and how its times convert.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalMeta {
    /// The stream recorded.
    pub stream_id: u32,
    /// What was recorded (e.g. `shm:md.nasdaq on host1`), kept in every segment header.
    pub source: String,
    /// The recorder's TSC rate (receive TSCs convert to wall time with it).
    pub ticks_per_ns: f64,
}

/// What opening an existing journal found after its last intact record (a tail a crash tore).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// The segment whose tail was torn.
    pub segment: PathBuf,
    /// Where the intact records end (an end-of-segment record is there now).
    pub offset: u64,
    /// Bytes of torn tail left behind that end record (never read; nothing is truncated).
    pub cut_bytes: u64,
    /// What was wrong at `offset`.
    pub reason: String,
}

/// The path of segment `index` in `dir`.
pub fn segment_path(dir: &Path, index: u64) -> PathBuf {
    dir.join(format!("{index:010}.tbj"))
}

pub(crate) fn index_path(dir: &Path, index: u64) -> PathBuf {
    dir.join(format!("{index:010}.idx"))
}

/// The segment numbers present in `dir`, in order.
pub(crate) fn segments(dir: &Path) -> Result<Vec<u64>, JournalError> {
    let mut v: Vec<u64> = std::fs::read_dir(dir)
        .map_err(|e| JournalError::io("listing the journal folder", dir, e))?
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".tbj")?.parse().ok()
        })
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// Bytes a segment buffers before writing. Runs of records at least this long (a recorder's
/// writer thread catching up) go to the kernel straight from the caller's memory, no copy.
const WRITE_BUFFER: usize = 64 << 10;

struct Segment {
    index: u64,
    path: PathBuf,
    file: BufWriter<File>,
    idx: BufWriter<File>,
    /// Bytes in the segment, buffered ones included.
    len: u64,
    /// Message records since the last index entry.
    since_index: u64,
}

/// Appends records to a journal in a folder.
pub struct JournalWriter {
    dir: PathBuf,
    meta: JournalMeta,
    opts: JournalOptions,
    seg: Segment,
    /// The next sequence the stream can continue with (None: nothing recorded yet).
    next: Option<u64>,
    recovery: Option<Recovery>,
    scratch: Vec<u8>,
    last_sync: Instant,
    /// Records were flushed since the last sync.
    unsynced: bool,
    tsc: Tsc,
    records: u64,
    /// This writer's (TSC, wall ns) anchor: one for every segment it creates, so receive times
    /// convert the same way across them.
    anchor: (u64, u64),
    /// Times the folder was synced (a segment created, moved aside or removed, unless the
    /// policy is `None`): what a test of the policy counts.
    folder_syncs: u64,
    /// The journal's writer lock, held while this writer lives.
    _lock: File,
}

/// How far ahead of the record being checked [`prefetch_ahead`] asks for the queue's bytes.
const PREFETCH_AHEAD: usize = 1024;

/// Asks the CPU for the queued bytes [`PREFETCH_AHEAD`] past `at`. Walking the records is a
/// chain of dependent loads (each record's length says where the next starts), and the bytes
/// were just written on the poll side's core: without this each record's first line is a
/// cross-core miss waited for before the next can be asked for (half the writer thread's own
/// time in a profile); with it those misses overlap.
#[inline(always)]
fn prefetch_ahead(bytes: &[u8], at: usize) {
    // Never past the bytes queued: there the poll side lays out its next records, and a line
    // pulled to this core would cost its stores a cross-core invalidation.
    #[cfg(target_arch = "x86_64")]
    if at + PREFETCH_AHEAD < bytes.len() {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let ahead = bytes[at + PREFETCH_AHEAD..].as_ptr().cast();
        // SAFETY: SSE, the feature `_mm_prefetch` needs, is part of every x86_64 CPU; a prefetch
        // only hints the cache, reads nothing the program sees and never faults.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(ahead) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, at);
}

impl JournalWriter {
    /// Opens the journal in `dir` (creating the folder if need be) for this process alone (a
    /// second writer is refused while this one lives). An existing journal must be of
    /// `meta.stream_id`. Its last segment is scanned: a torn tail (a record a crash cut short)
    /// is sealed behind an end-of-segment record, never truncated, so a reader that has the
    /// segment mapped cannot fault (see [`JournalWriter::recovery`]); damage followed by intact
    /// records is refused ([`JournalError::DamagedNotTorn`]). Records go on in a new segment
    /// that carries this writer's TSC anchor.
    pub fn open(dir: &Path, meta: JournalMeta, opts: JournalOptions) -> Result<JournalWriter, JournalError> {
        // The first page and a page of records at least (a record larger than a segment goes
        // in a segment of its own), up to 1 TiB.
        let (min, max) = (2 * DATA_START as u64, 1u64 << 40);
        if !(min..=max).contains(&opts.segment_bytes) {
            return Err(JournalError::SegmentSize { bytes: opts.segment_bytes, min, max });
        }
        folder::check_for_writing(dir)?;
        let lock = lock_journal(dir)?;
        let anchor = (Tsc::new().now(), unix_ns());
        let durable = opts.durability != Durability::None;
        let mut folder_syncs = 0;
        let mut present = segments(dir)?;
        let mut recovery = None;
        if let Some(&last) = present.last() {
            let path = segment_path(dir, last);
            if never_begun(&path) {
                // Its first page never reached the disk (a crash, a power failure or a full
                // disk while it was created): it was never begun. Readers skip it too.
                remove_segment(dir, last)?;
                present.pop();
                sync_folder(dir, durable, &mut folder_syncs)?;
            } else if let Some(torn) = torn_at_creation(&path)? {
                // Its header was torn as it was created and nothing follows it: moved aside (its
                // bytes kept for whoever wants to look), and its number is used again.
                let aside = path.with_extension("tbj.torn");
                std::fs::rename(&path, &aside)
                    .map_err(|e| JournalError::io("moving a torn segment aside", &path, e))?;
                remove_segment(dir, last)?;
                present.pop();
                sync_folder(dir, durable, &mut folder_syncs)?;
                let cut_bytes = std::fs::symlink_metadata(&aside).map_or(0, |m| m.len());
                let reason = format!("{torn}, and no record follows it: torn as it was created; moved aside");
                recovery = Some(Recovery { segment: aside, offset: 0, cut_bytes, reason });
            }
        }
        // A segment before the last one carrying another's number (a copy or a rename) is where
        // readers stop: what this writer records after it would never be read. Refused here, as
        // the last one's is below (one header read per segment, at open only).
        for &i in present.iter().rev().skip(1) {
            let path = segment_path(dir, i);
            if let Ok(h) = super::reader::read_header(&path) {
                if h.segment_index != i {
                    return Err(JournalError::Misnumbered { path, found: h.segment_index, expected: i });
                }
            }
        }
        let mut next = None;
        let index = match present.last() {
            None => 0,
            Some(&last) => {
                let (end, cut) = seal_last_segment(dir, &meta, &opts, last)?;
                recovery = recovery.or(cut);
                next = end.next;
                if end.offset == DATA_START as u64 && !end.closed {
                    remove_segment(dir, last)?; // no record at all: replaced by ours
                    present.pop();
                    sync_folder(dir, durable, &mut folder_syncs)?;
                    last
                } else {
                    last + 1
                }
            }
        };
        if next.is_none() && !present.is_empty() {
            next = last_sequence_in(dir, &present)?;
        }
        let seg = create_segment(dir, &meta, &opts, index, anchor)?;
        sync_folder(dir, durable, &mut folder_syncs)?;
        Ok(JournalWriter {
            dir: dir.to_owned(),
            meta,
            opts,
            seg,
            next,
            recovery,
            scratch: vec![0; format::record_bytes(MAX_PAYLOAD)],
            last_sync: Instant::now(),
            unsynced: false,
            tsc: Tsc::new(),
            records: 0,
            anchor,
            folder_syncs,
            _lock: lock,
        })
    }

    /// What opening had to cut from the journal's tail, if anything.
    pub fn recovery(&self) -> Option<&Recovery> {
        self.recovery.as_ref()
    }

    /// The sequence after the last one recorded (a recorder resumes there), None if empty.
    pub fn next_sequence(&self) -> Option<u64> {
        self.next
    }

    /// The journal folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Records appended by this writer.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Times this writer synced the journal's folder.
    #[cfg(test)]
    pub(crate) fn folder_syncs(&self) -> u64 {
        self.folder_syncs
    }

    /// Appends a message at stream position `sequence` (after every one recorded so far).
    pub fn append(
        &mut self,
        sequence: u64,
        publish_tsc: u64,
        receive_tsc: u64,
        payload: &[u8],
    ) -> Result<(), JournalError> {
        if payload.len() > MAX_PAYLOAD {
            return Err(JournalError::TooLarge { len: payload.len(), max: MAX_PAYLOAD });
        }
        self.check_order(sequence)?;
        let h = format::message_header(sequence, publish_tsc, receive_tsc, payload.len());
        self.write(&h, payload, true)?;
        self.next = Some(sequence + 1);
        Ok(())
    }

    /// Records that `count` messages from `first` were missed (a lossy source lapped us).
    pub fn append_gap(&mut self, first: u64, count: u64, receive_tsc: u64) -> Result<(), JournalError> {
        if count == 0 || count > format::MAX_SEQUENCE {
            return Err(JournalError::Range { sequence: first, count });
        }
        self.check_order(first)?;
        let (h, p) = format::gap(first, count, receive_tsc);
        self.write(&h, &p, false)?;
        self.next = Some(first + count);
        Ok(())
    }

    /// Appends records already laid out (and sealed) as [`format::emit`] writes them (message and gap
    /// records, CRCs included), back to back: what a recorder's poll side queued. They are
    /// written as they are (no re-encoding); each header is still checked for kind, length and
    /// order, and segments roll over between records as with [`JournalWriter::append`].
    pub fn append_records(&mut self, bytes: &[u8]) -> Result<(), JournalError> {
        if self.append_whole(bytes)? != bytes.len() {
            return Err(JournalError::Queued { why: "the last record is cut short" });
        }
        Ok(())
    }

    /// [`JournalWriter::append_records`] up to the first record cut short by the end of
    /// `bytes`; returns the bytes appended. A bad record is an error after every good one
    /// before it is written.
    pub(crate) fn append_whole(&mut self, mut bytes: &[u8]) -> Result<usize, JournalError> {
        let end_room = format::record_bytes(0) as u64;
        let mut done = 0;
        loop {
            // The run of records that fits the current segment, checked and indexed as it goes.
            let mut run = 0usize;
            let mut failed = None;
            let mut cut = false;
            while run < bytes.len() {
                prefetch_ahead(bytes, run);
                let Ok((h, _)) = format::RecordHeader::read_from_prefix(&bytes[run..]) else {
                    cut = true;
                    break;
                };
                let len = h.len as usize;
                let n = format::record_bytes(len);
                let kind_ok = h.kind == format::KIND_MESSAGE || (h.kind == format::KIND_GAP && len == 8);
                if !kind_ok || len > MAX_PAYLOAD {
                    failed = Some(JournalError::Queued { why: "not a message or gap record" });
                    break;
                }
                if run + n > bytes.len() {
                    cut = true;
                    break;
                }
                let at = self.seg.len + run as u64;
                if at + n as u64 + end_room > self.opts.segment_bytes && at > DATA_START as u64 {
                    break; // the rest goes into the next segment
                }
                let count = match h.kind {
                    format::KIND_GAP => {
                        u64::from_le_bytes(bytes[run + RECORD_HEADER_BYTES..][..8].try_into().expect("8 bytes"))
                    }
                    _ => 1,
                };
                if count == 0 || count > format::MAX_SEQUENCE {
                    failed = Some(JournalError::Range { sequence: h.sequence, count });
                    break;
                }
                if let Err(e) = self.check_order(h.sequence) {
                    failed = Some(e);
                    break;
                }
                if h.kind == format::KIND_MESSAGE {
                    self.next = Some(h.sequence + 1);
                    if self.seg.since_index.saturating_add(1) >= self.opts.index_every {
                        self.put_index(IndexEntry { sequence: h.sequence, receive_tsc: h.receive_tsc, offset: at })?;
                        self.seg.since_index = 0;
                    } else {
                        self.seg.since_index += 1;
                    }
                } else {
                    self.next = Some(h.sequence + count);
                }
                self.records += 1;
                run += n;
            }
            let (now, later) = bytes.split_at(run);
            self.seg.file.write_all(now).map_err(|e| JournalError::io("writing", &self.seg.path, e))?;
            self.seg.len += run as u64;
            done += run;
            bytes = later;
            if let Some(e) = failed {
                return Err(e);
            }
            if cut || bytes.is_empty() {
                return Ok(done);
            }
            let (h, _) = format::RecordHeader::read_from_prefix(bytes).expect("a whole header is there");
            self.roll(h.sequence)?;
        }
    }

    fn check_order(&self, sequence: u64) -> Result<(), JournalError> {
        if sequence > format::MAX_SEQUENCE {
            return Err(JournalError::Range { sequence, count: 1 });
        }
        match self.next {
            Some(n) if sequence < n => Err(JournalError::Order { sequence, last: n - 1 }),
            _ => Ok(()),
        }
    }

    fn write(&mut self, h: &format::RecordHeader, payload: &[u8], indexed: bool) -> Result<(), JournalError> {
        let n = format::record_bytes(payload.len()) as u64;
        let end_room = format::record_bytes(0) as u64;
        if self.seg.len + n + end_room > self.opts.segment_bytes && self.seg.len > DATA_START as u64 {
            self.roll(h.sequence)?;
        }
        let len = format::emit(&mut self.scratch, h, payload);
        let at = self.seg.len;
        self.seg.file.write_all(&self.scratch[..len]).map_err(|e| JournalError::io("writing", &self.seg.path, e))?;
        self.seg.len += len as u64;
        if indexed {
            if self.seg.since_index.saturating_add(1) >= self.opts.index_every {
                self.put_index(IndexEntry { sequence: h.sequence, receive_tsc: h.receive_tsc, offset: at })?;
                self.seg.since_index = 0;
            } else {
                self.seg.since_index += 1;
            }
        }
        self.records += 1;
        Ok(())
    }

    /// Adds an entry to the current segment's sparse index (buffered; see `flush`).
    fn put_index(&mut self, e: IndexEntry) -> Result<(), JournalError> {
        self.seg.idx.write_all(e.as_bytes()).map_err(|e| JournalError::io("indexing", &self.seg.path, e))
    }

    /// Ends the current segment (an end record), syncs it if the policy says so, opens the next.
    fn roll(&mut self, next_sequence: u64) -> Result<(), JournalError> {
        let len = format::emit(&mut self.scratch, &format::end(next_sequence), &[]);
        self.seg.file.write_all(&self.scratch[..len]).map_err(|e| JournalError::io("writing", &self.seg.path, e))?;
        self.flush()?;
        self.flush_index()?;
        if self.opts.durability != Durability::None {
            self.sync()?;
        }
        self.seg = create_segment(&self.dir, &self.meta, &self.opts, self.seg.index + 1, self.anchor)?;
        sync_folder(&self.dir, self.opts.durability != Durability::None, &mut self.folder_syncs)
    }

    /// Hands every buffered record to the kernel: after this they survive a crash of this
    /// process. Syncs too when the policy's interval has passed. The sparse index is written
    /// when its buffer fills, at rollover and on close: it is a hint (a missing entry means a
    /// longer scan), so it costs no syscall per flush.
    pub fn flush(&mut self) -> Result<(), JournalError> {
        self.seg.file.flush().map_err(|e| JournalError::io("writing", &self.seg.path, e))?;
        self.unsynced = true;
        if let Durability::Every(d) = self.opts.durability {
            if self.last_sync.elapsed() >= d {
                self.sync()?;
            }
        }
        Ok(())
    }

    /// Under [`Durability::Every`], syncs records flushed since the last sync once the interval
    /// has passed, even if nothing more arrives (a writer that goes idle calls this).
    pub fn sync_if_due(&mut self) -> Result<(), JournalError> {
        if let Durability::Every(d) = self.opts.durability {
            if self.unsynced && self.last_sync.elapsed() >= d {
                self.sync()?;
            }
        }
        Ok(())
    }

    fn flush_index(&mut self) -> Result<(), JournalError> {
        self.seg.idx.flush().map_err(|e| JournalError::io("indexing", &self.seg.path, e))
    }

    /// Puts everything written on disk (fsync of the segment and its index).
    pub fn sync(&mut self) -> Result<(), JournalError> {
        self.flush_index()?;
        self.seg.file.get_ref().sync_data().map_err(|e| JournalError::io("syncing", &self.seg.path, e))?;
        self.seg.idx.get_ref().sync_data().map_err(|e| JournalError::io("syncing", &self.seg.path, e))?;
        self.last_sync = Instant::now();
        self.unsynced = false;
        Ok(())
    }

    /// Flushes (and, unless the policy is `None`, syncs) and closes the journal.
    pub fn close(mut self) -> Result<(), JournalError> {
        self.flush()?;
        self.flush_index()?;
        if self.opts.durability != Durability::None {
            self.sync()?;
        }
        Ok(())
    }

    /// The TSC this writer stamps receive times with (for callers without their own).
    pub fn now(&self) -> u64 {
        self.tsc.now()
    }
}

fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn create_segment(
    dir: &Path,
    meta: &JournalMeta,
    opts: &JournalOptions,
    index: u64,
    (tsc, wall): (u64, u64),
) -> Result<Segment, JournalError> {
    let path = segment_path(dir, index);
    // Never over anything already there: a segment is data.
    let mut file = folder::create(&path, false, "creating the segment")?;
    let h = format::segment_header(
        meta.stream_id,
        index,
        opts.segment_bytes,
        meta.ticks_per_ns,
        tsc,
        wall,
        unix_ns(),
        &meta.source,
    );
    let mut page = vec![0u8; DATA_START];
    page[..SEGMENT_HEADER_BYTES].copy_from_slice(h.as_bytes());
    file.write_all(&page).map_err(|e| JournalError::io("writing the segment header", &path, e))?;
    let idx_path = index_path(dir, index);
    // An index is a hint: a stale one (its segment was removed) or anything planted there is
    // unlinked and a new file made.
    let idx = folder::create(&idx_path, true, "creating the index")?;
    Ok(Segment {
        index,
        path,
        file: BufWriter::with_capacity(WRITE_BUFFER, file),
        idx: BufWriter::new(idx),
        len: DATA_START as u64,
        since_index: opts.index_every, // index the first message record, wherever it starts
    })
}

/// What scanning a segment found: its header, where its intact records end, and the damage
/// that stopped the scan (offset and why), if any.
type Scanned = (SegmentHeader, End, Option<(u64, FormatError)>);

/// Where a segment's intact records end.
struct End {
    offset: u64,
    /// The sequence after its last record (None: no record).
    next: Option<u64>,
    /// It ends with an end-of-segment record.
    closed: bool,
}

/// Scans segment `path` from its first record to the end of its intact records.
fn scan(path: &Path) -> Result<Scanned, JournalError> {
    let bytes = folder::map(path, "reading the segment")?;
    scan_bytes(path, &bytes)
}

fn scan_bytes(path: &Path, bytes: &[u8]) -> Result<Scanned, JournalError> {
    let h = SegmentHeader::parse(bytes).map_err(|error| JournalError::Segment { path: path.to_owned(), error })?;
    let mut at = DATA_START;
    let mut end = End { offset: at as u64, next: None, closed: false };
    if bytes.len() < DATA_START {
        return Ok((h, end, None));
    }
    loop {
        match format::parse(&bytes[at..], at as u64) {
            Ok(None) => return Ok((h, end, None)),
            Ok(Some((r, n))) => {
                at += n;
                end.offset = at as u64;
                match r.kind {
                    Kind::Message(_) => end.next = Some(r.sequence + 1),
                    Kind::Gap { count } => end.next = Some(r.sequence + count),
                    Kind::End => {
                        end.closed = true;
                        return Ok((h, end, None));
                    }
                }
            }
            Err(e) => return Ok((h, end, Some((at as u64, e)))),
        }
    }
}

/// A segment that is shorter than its first page (no record can be in it), or all zeros:
/// created, but nothing of it reached the disk, so it holds nothing. A zero first page followed
/// by anything else is not this: records may be there, so the segment is refused as damaged
/// (its header is bad) instead of being skipped or removed. Reads the whole file: a recovery
/// path, once per open.
pub(crate) fn never_begun(path: &Path) -> bool {
    let Ok(mut f) = folder::open_for_reading(path, "reading the segment") else { return false };
    match f.metadata() {
        Ok(m) if m.len() < DATA_START as u64 => return true,
        Ok(_) => {}
        Err(_) => return false,
    }
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        match std::io::Read::read(&mut f, &mut chunk) {
            Ok(0) => return true,
            Ok(n) if chunk[..n].iter().all(|&b| b == 0) => {}
            Ok(_) | Err(_) => return false,
        }
    }
}

/// Takes the journal's writer lock (`writer.lock` in its folder): one writer per journal.
fn lock_journal(dir: &Path) -> Result<File, JournalError> {
    let path = dir.join("writer.lock");
    let file = folder::lock_file(&path)?;
    match crate::sys::fs::try_lock_range(&file, 0, 1) {
        Ok(true) => Ok(file),
        Ok(false) => Err(JournalError::Busy { dir: dir.to_owned() }),
        Err(e) => Err(JournalError::io("locking", &path, e)),
    }
}

/// Syncs the journal folder if the policy syncs at all (`durable`), counting it.
fn sync_folder(dir: &Path, durable: bool, count: &mut u64) -> Result<(), JournalError> {
    if durable {
        crate::sys::fs::sync_folder(dir).map_err(|e| JournalError::io("syncing the journal folder", dir, e))?;
        *count += 1;
    }
    Ok(())
}

/// What is wrong with segment `path`'s header, if it is damaged and no intact record follows
/// it: a header torn as the segment was created (by a power failure; the page is written in one
/// call, but a disk need not keep all of it). A segment with a bad header and records after it
/// is not this: it is damage, refused as such.
pub(crate) fn torn_at_creation(path: &Path) -> Result<Option<FormatError>, JournalError> {
    let bytes = folder::map(path, "reading the segment")?;
    let error = match SegmentHeader::parse(&bytes) {
        // Another version's segment is not torn: its records are not ours to judge.
        Ok(_) | Err(FormatError::Version { .. }) => return Ok(None),
        Err(e) => e,
    };
    let body_intact = bytes.len() >= DATA_START && format::intact_after(&bytes, DATA_START as u64 - 8).is_some();
    Ok((!body_intact).then_some(error))
}

fn remove_segment(dir: &Path, index: u64) -> Result<(), JournalError> {
    for path in [segment_path(dir, index), index_path(dir, index)] {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(JournalError::io("removing", &path, e)),
            _ => {}
        }
    }
    Ok(())
}

/// Ends the last segment where its intact records end: an end-of-segment record written there
/// (over a torn tail, which stays behind it; nothing is truncated), and index entries past it
/// dropped. Refuses damage that intact records follow.
fn seal_last_segment(
    dir: &Path,
    meta: &JournalMeta,
    opts: &JournalOptions,
    index: u64,
) -> Result<(End, Option<Recovery>), JournalError> {
    let path = segment_path(dir, index);
    let bytes = folder::map(&path, "reading the segment")?;
    let (h, end, damage) = scan_bytes(&path, &bytes)?;
    if h.segment_index != index {
        return Err(JournalError::Misnumbered { path, found: h.segment_index, expected: index });
    }
    if h.stream_id != meta.stream_id {
        return Err(JournalError::Stream { dir: dir.to_owned(), found: h.stream_id, wanted: meta.stream_id });
    }
    if end.closed {
        return Ok((end, None));
    }
    let mut recovery = None;
    if bytes.len() as u64 > end.offset {
        let error = damage.map_or(FormatError::Hole { offset: end.offset }, |(_, e)| e);
        if let Some(next_intact) = format::intact_after(&bytes, end.offset) {
            return Err(JournalError::DamagedNotTorn { path, offset: end.offset, error, next_intact });
        }
        let reason = match damage {
            Some((_, e)) => e.to_string(),
            None => "bytes after the last intact record".into(),
        };
        recovery = Some(Recovery {
            segment: path.clone(),
            offset: end.offset,
            cut_bytes: bytes.len() as u64 - end.offset,
            reason,
        });
    }
    if let Some(next) = end.next {
        let mut rec = vec![0u8; format::record_bytes(0)];
        format::emit(&mut rec, &format::end(next), &[]);
        let file = folder::open_for_writing(&path, "opening the segment")?;
        std::os::unix::fs::FileExt::write_all_at(&file, &rec, end.offset)
            .map_err(|e| JournalError::io("ending the segment", &path, e))?;
        if opts.durability != Durability::None {
            file.sync_data().map_err(|e| JournalError::io("syncing", &path, e))?;
        }
    }
    // The index: keep the entries before the end (it is read whole by readers, not mapped).
    let idx_path = index_path(dir, index);
    let entries = index::read(&idx_path, h.segment_bytes);
    let keep = entries.iter().take_while(|e| e.offset < end.offset).count();
    if keep < entries.len() {
        let idx = folder::open_for_writing(&idx_path, "opening the index")?;
        idx.set_len((keep * ENTRY_BYTES) as u64).map_err(|e| JournalError::io("cutting the index", &idx_path, e))?;
    }
    Ok((end, recovery))
}

/// The sequence after the last record of the latest segment that has one.
fn last_sequence_in(dir: &Path, present: &[u64]) -> Result<Option<u64>, JournalError> {
    for &i in present.iter().rev() {
        let (_, end, _) = scan(&segment_path(dir, i))?;
        if end.next.is_some() {
            return Ok(end.next);
        }
    }
    Ok(None)
}
