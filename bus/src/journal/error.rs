//! Journal errors: each names the file (and offset) and what to do.
use std::path::PathBuf;

use super::format::FormatError;

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: PathBuf, source: std::io::Error },
    /// A segment that is not one of ours, of another version, or whose header is damaged.
    #[error("{path}: {error}")]
    Segment { path: PathBuf, error: FormatError },
    /// A damaged record before the end of the data: everything before it was readable.
    #[error("{path}: {error}; every record before offset {offset} is intact. The journal is damaged there: copy out what precedes it (tickbus journal tools read up to it), or restore the segment from a copy")]
    Corrupt { path: PathBuf, offset: u64, error: FormatError },
    #[error("{path}: {error} at offset {offset}, but intact records follow at offset {next_intact}: that is damage, not a torn tail, and recording on would leave those records unread behind an end-of-segment record. Move the journal aside (readers read it up to the damage) and record into a new folder")]
    DamagedNotTorn { path: PathBuf, offset: u64, error: FormatError, next_intact: u64 },
    #[error("{path}: the segment ends at offset {offset} without its end-of-segment record, but segment {next} follows: a segment was cut short")]
    CutShort { path: PathBuf, offset: u64, next: u64 },
    #[error("{dir}: segment {missing} is missing between the segments present")]
    Missing { dir: PathBuf, missing: u64 },
    #[error("{dir} holds no journal segments (*.tbj): is it the right folder?")]
    Empty { dir: PathBuf },
    #[error("{dir} holds a journal of stream {found}, not {wanted}: record into another folder")]
    Stream { dir: PathBuf, found: u32, wanted: u32 },
    #[error("a {len}-byte message is larger than a journal record holds ({max} bytes)")]
    TooLarge { len: usize, max: usize },
    #[error("{dir} is being recorded into by another process (it holds {dir}/writer.lock): one recorder per journal; stop it first or record into another folder")]
    Busy { dir: PathBuf },
    #[error("records handed to append_records are malformed ({why}): pass records as format::emit lays them out")]
    Queued { why: &'static str },
    #[error("sequence {sequence} (+{count}) is out of range: a record covers 1 to 2^62 positions below 2^62")]
    Range { sequence: u64, count: u64 },
    #[error("sequence {sequence} is not after the last one recorded ({last}): a journal holds a stream in order")]
    Order { sequence: u64, last: u64 },
}

impl JournalError {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> JournalError {
        JournalError::Io { what, path: path.into(), source }
    }
}
