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
    #[error("records handed to append_records are malformed ({why}): pass records as format::emit lays them out")]
    Queued { why: &'static str },
    #[error("sequence {sequence} is not after the last one recorded ({last}): a journal holds a stream in order")]
    Order { sequence: u64, last: u64 },
}

impl JournalError {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> JournalError {
        JournalError::Io { what, path: path.into(), source }
    }
}
