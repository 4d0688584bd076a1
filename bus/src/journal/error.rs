//! Journal errors: each names the file (and offset) and what to do.
use std::path::PathBuf;

use super::format::FormatError;

/// Why a journal could not be opened, read or written. Every message names the file (and offset
/// where it matters) and what to do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// A filesystem call failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done (opening, reading, syncing ...).
        what: &'static str,
        /// The file or folder it was done to.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A segment that is not one of ours, of another version, or whose header is damaged.
    #[error("{path}: {error}")]
    Segment {
        /// The segment file.
        path: PathBuf,
        /// What is wrong with its header.
        error: FormatError,
    },
    /// A damaged record before the end of the data: everything before it was readable.
    #[error("{path}: {error}; every record before offset {offset} is intact. The journal is damaged there: copy out what precedes it (tickbus journal tools read up to it), or restore the segment from a copy")]
    Corrupt {
        /// The segment file.
        path: PathBuf,
        /// Byte offset of the damaged record; every record before it is intact.
        offset: u64,
        /// What is wrong with the record.
        error: FormatError,
    },
    /// A damaged record with intact records after it, found when reopening to record on: damage,
    /// not a torn write, so recording is refused.
    #[error("{path}: {error} at offset {offset}, but intact records follow at offset {next_intact}: that is damage, not a torn tail, and recording on would leave those records unread behind an end-of-segment record. Move the journal aside (readers read it up to the damage) and record into a new folder")]
    DamagedNotTorn {
        /// The segment file.
        path: PathBuf,
        /// Byte offset of the damaged record.
        offset: u64,
        /// What is wrong with the record.
        error: FormatError,
        /// Byte offset of the next intact record.
        next_intact: u64,
    },
    /// A segment that is not the last ends without its end-of-segment record.
    #[error("{path}: the segment ends at offset {offset} without its end-of-segment record, but segment {next} follows: a segment was cut short")]
    CutShort {
        /// The segment cut short.
        path: PathBuf,
        /// Where its records end.
        offset: u64,
        /// The number of the segment that follows it.
        next: u64,
    },
    /// A segment after readable ones that cannot be read (its header damaged, or it is not a
    /// regular file): returned by a cursor once every record before it was delivered.
    #[error("{reason}; every record of the segments before it was delivered. Restore the segment from a copy, or move it and the segments after it aside (they read on their own once it is first) to record on")]
    Unreadable {
        /// The segment that cannot be read.
        path: PathBuf,
        /// Why (the error opening it gave, naming the file).
        reason: String,
    },
    /// A segment number is missing between the segments present.
    #[error("{dir}: segment {missing} is missing between the segments present")]
    Missing {
        /// The journal folder.
        dir: PathBuf,
        /// The number of the missing segment.
        missing: u64,
    },
    /// The folder holds no segments.
    #[error("{dir} holds no journal segments (*.tbj): is it the right folder?")]
    Empty {
        /// The folder opened.
        dir: PathBuf,
    },
    /// The folder holds another stream's journal.
    #[error("{dir} holds a journal of stream {found}, not {wanted}: record into another folder")]
    Stream {
        /// The journal folder.
        dir: PathBuf,
        /// The stream its segments record.
        found: u32,
        /// The stream asked for.
        wanted: u32,
    },
    /// A message larger than a record holds.
    #[error("a {len}-byte message is larger than a journal record holds ({max} bytes)")]
    TooLarge {
        /// The message's length in bytes.
        len: usize,
        /// The most a record holds ([`MAX_PAYLOAD`](super::format::MAX_PAYLOAD)).
        max: usize,
    },
    /// Another process is recording into the folder (it holds the writer lock).
    #[error("{dir} is being recorded into by another process (it holds {dir}/writer.lock): one recorder per journal; stop it first or record into another folder")]
    Busy {
        /// The journal folder.
        dir: PathBuf,
    },
    /// Records handed to `append_records` (or a recorder's run of them) are not laid out as
    /// `format::emit` lays them out, or not as their run was described.
    #[error("records handed to the journal writer are malformed ({why}): pass records as format::emit lays them out")]
    Queued {
        /// What is wrong with them.
        why: &'static str,
    },
    /// A sequence (or sequence plus gap count) past [`MAX_SEQUENCE`](super::format::MAX_SEQUENCE),
    /// or a gap of 0 messages.
    #[error("sequence {sequence} (+{count}) is out of range: a record covers 1 to 2^62 positions below 2^62")]
    Range {
        /// The record's first sequence.
        sequence: u64,
        /// How many positions it covers.
        count: u64,
    },
    /// A segment size no journal can use (`record --segment-mb` past 2^44 once wrapped to 0 and
    /// left a journal that could be neither read nor reopened).
    #[error("a segment of {bytes} bytes cannot hold a journal: segments are {min} bytes to {max} bytes (1 TiB)")]
    SegmentSize {
        /// The size asked for.
        bytes: u64,
        /// The smallest accepted.
        min: u64,
        /// The largest accepted.
        max: u64,
    },
    /// A journal folder (or its parent) that another user could tamper with, or a link where
    /// the folder should be: recording there could truncate or overwrite files through planted
    /// links.
    #[error("{path} is refused as a journal folder: {reason}. Record into a folder only you can write (owned by you, mode 0750 or stricter)")]
    Unsafe {
        /// The folder refused.
        path: PathBuf,
        /// What is unsafe about it.
        reason: String,
    },
    /// A segment whose header names another segment number: a copy or a rename into another
    /// segment's place (found by the whole-folder fuzz target: a copy of segment 0 as segment 2
    /// was read as if the stream went on, delivering its records a second time).
    #[error("{path}: its header says it is segment {found}, but its name is segment {expected}'s: a segment copied or renamed into another's place. Readers stop before it (every record before it is read) and recording on is refused. Move it out of the journal folder, and if a backup of this journal holds the real segment {expected}, copy that one in its place")]
    Misnumbered {
        /// The segment file.
        path: PathBuf,
        /// The number its header carries.
        found: u64,
        /// The number its name gives.
        expected: u64,
    },
    /// A record behind the stream's position: delivered records are in stream order, once.
    #[error("{path}: the record at offset {offset} is at sequence {sequence}, but the stream had reached {reached}: records out of place (a segment restored from another copy, or another journal's); every record before it was delivered in order")]
    OutOfOrder {
        /// The segment file.
        path: PathBuf,
        /// Byte offset of the record.
        offset: u64,
        /// Its sequence.
        sequence: u64,
        /// The first sequence the records before it leave to come.
        reached: u64,
    },
    /// A sequence not after the last one recorded.
    #[error("sequence {sequence} is not after the last one recorded ({last}): a journal holds a stream in order")]
    Order {
        /// The sequence offered.
        sequence: u64,
        /// The last sequence the journal holds.
        last: u64,
    },
}

impl JournalError {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> JournalError {
        JournalError::Io { what, path: path.into(), source }
    }
}
