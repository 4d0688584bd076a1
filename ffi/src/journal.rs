//! Journal reading: open a journal folder, seek by sequence or wall time, read records in stream
//! order (messages and gaps, each once, CRC-checked), as `tickbus journal inspect` does.
use core::ffi::c_char;

use bus::journal::{Cursor, JournalError, JournalReader, Kind};

use crate::error::{fail, guard, non_null, tb_status};
use crate::handle::{Handle, Kind as HandleKind};
use crate::options::utf8;

/// A journal being read (opaque). Owned by the caller from `tb_journal_open` until
/// `tb_journal_destroy`; used by one thread at a time.
#[allow(non_camel_case_types)]
pub struct tb_journal {
    _opaque: [u8; 0],
}

pub(crate) struct Journal {
    reader: JournalReader,
    cursor: Cursor,
}

impl HandleKind for Journal {
    const MAGIC: u64 = u64::from_le_bytes(*b"tb:jrnl\0");
    const NAME: &'static str = "tb_journal";
}

/// What a journal record holds.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum tb_record_kind {
    /// The end of the journal's data (nothing more yet).
    TB_RECORD_END = 0,
    /// A message: `data`, `len`.
    TB_RECORD_MESSAGE = 1,
    /// `gap_count` messages from `sequence` on were lost before the recorder saw them.
    TB_RECORD_GAP = 2,
}

/// One journal record.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tb_journal_record {
    /// What the record holds.
    pub kind: tb_record_kind,
    /// The message's stream position (or the first position lost).
    pub sequence: u64,
    /// The publisher's TSC in the message header.
    pub publish_tsc: u64,
    /// The recorder's TSC when it took the message off the stream.
    pub receive_tsc: u64,
    /// `receive_tsc` as wall-clock ns since the Unix epoch (UTC).
    pub receive_unix_ns: u64,
    /// A gap: how many messages were lost.
    pub gap_count: u64,
    /// A message: its bytes, valid until the next call on this journal. NULL otherwise.
    pub data: *const u8,
    /// A message: its length.
    pub len: usize,
}

/// The journal's stream id and the number of its segments.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tb_journal_info {
    /// The stream the journal recorded.
    pub stream_id: u32,
    /// Segment files in the folder.
    pub segments: u32,
}

fn journal_failed(e: &JournalError) -> tb_status {
    fail!(tb_status::TB_ERROR_JOURNAL, "{e}")
}

/// # Safety
/// `j` is NULL or a handle from this library, not destroyed, used by one thread at a time.
unsafe fn get<'a>(j: *mut tb_journal) -> Result<&'a mut Journal, tb_status> {
    // SAFETY: the caller's promise.
    unsafe { Handle::<Journal>::get(j, "journal") }
}

/// Opens the journal in folder `dir` (as `tickbus record --out` wrote it), at its first record.
///
/// # Safety
/// `dir` is NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tb_journal_open(dir: *const c_char, out: *mut *mut tb_journal) -> tb_status {
    guard(|| {
        non_null(out, "out")?;
        non_null(dir, "dir")?;
        // SAFETY: non-null; the caller promises NUL-terminated.
        let d = unsafe { utf8(dir, "dir") }?;
        let reader = JournalReader::open(std::path::Path::new(d)).map_err(|e| journal_failed(&e))?;
        let cursor = reader.cursor();
        // SAFETY: non-null; the caller promises writable.
        unsafe { out.write(Handle::into_raw(Journal { reader, cursor })) };
        Ok(())
    })
}

/// Moves to the first record whose sequence is `sequence` or later (or the gap covering it).
///
/// # Safety
/// As `tb_journal_next`.
#[no_mangle]
pub unsafe extern "C" fn tb_journal_seek_sequence(j: *mut tb_journal, sequence: u64) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let j = unsafe { get(j) }?;
        j.cursor = j.reader.seek_sequence(sequence).map_err(|e| journal_failed(&e))?;
        Ok(())
    })
}

/// Moves to the first record received at wall time `unix_ns` (ns since the epoch, UTC) or later.
///
/// # Safety
/// As `tb_journal_next`.
#[no_mangle]
pub unsafe extern "C" fn tb_journal_seek_time(j: *mut tb_journal, unix_ns: u64) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let j = unsafe { get(j) }?;
        j.cursor = j.reader.seek_time(unix_ns).map_err(|e| journal_failed(&e))?;
        Ok(())
    })
}

/// The next record into `*out` (`TB_RECORD_END` at the end of the data). A damaged record is
/// `TB_ERROR_JOURNAL` naming the file and offset.
///
/// # Safety
/// `j` is NULL or a journal handle, not destroyed, used by one thread at a time; `out` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn tb_journal_next(j: *mut tb_journal, out: *mut tb_journal_record) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let j = unsafe { get(j) }?;
        non_null(out, "out")?;
        let empty = tb_journal_record {
            kind: tb_record_kind::TB_RECORD_END,
            sequence: 0,
            publish_tsc: 0,
            receive_tsc: 0,
            receive_unix_ns: 0,
            gap_count: 0,
            data: core::ptr::null(),
            len: 0,
        };
        let r = match j.cursor.next_timed().map_err(|e| journal_failed(&e))? {
            None => empty,
            Some((r, wall)) => {
                let base = tb_journal_record {
                    sequence: r.sequence,
                    publish_tsc: r.publish_tsc,
                    receive_tsc: r.receive_tsc,
                    receive_unix_ns: wall,
                    ..empty
                };
                match r.kind {
                    Kind::Message(m) => tb_journal_record {
                        kind: tb_record_kind::TB_RECORD_MESSAGE,
                        data: m.as_ptr(),
                        len: m.len(),
                        ..base
                    },
                    Kind::Gap { count } => {
                        tb_journal_record { kind: tb_record_kind::TB_RECORD_GAP, gap_count: count, ..base }
                    }
                    Kind::End => empty,
                }
            }
        };
        // SAFETY: non-null; the caller promises writable.
        unsafe { out.write(r) };
        Ok(())
    })
}

/// The journal's stream id and segment count.
///
/// # Safety
/// As `tb_journal_next`; `info` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tb_journal_get_info(j: *mut tb_journal, info: *mut tb_journal_info) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let j = unsafe { get(j) }?;
        non_null(info, "info")?;
        let i = tb_journal_info { stream_id: j.reader.stream_id(), segments: j.reader.segments().len() as u32 };
        // SAFETY: non-null; the caller promises writable.
        unsafe { info.write(i) };
        Ok(())
    })
}

/// Frees the journal handle; NULL is ignored.
///
/// # Safety
/// `j` is NULL or a journal handle not yet destroyed, not in use on another thread.
#[no_mangle]
pub unsafe extern "C" fn tb_journal_destroy(j: *mut tb_journal) {
    guard(|| {
        // SAFETY: the caller's promise.
        unsafe { Handle::<Journal>::destroy(j, "journal") };
        Ok(())
    });
}
