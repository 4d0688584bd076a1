//! The journal: a stream recorded to disk, in order, that never loses what it wrote.
//!
//! Owns: the on-disk format ([`mod@format`]: a versioned segment header, records of `[length | kind
//! | sequence | publish TSC | receive TSC | payload | CRC-32C]`, gap records for what a lossy
//! source lost), fixed-size segment files that roll over, a sparse index per segment
//! ([`index`]), the write policy ([`Durability`]), crash recovery on reopen, and the recorder
//! ([`recorder`]) that feeds it from a live stream without ever letting the disk stall the poll
//! loop. Never: runs on a publishing or polling thread (the recorder's writer thread owns it).
//!
//! Like Aeron Archive: a recording is a folder of fixed-size segments named by number, the
//! recorder is just another subscriber, and replay is just another publisher.
//!
//! Crash safety: every record carries a CRC-32C. Reopening a journal for writing scans its last
//! segment, keeps every intact record, and cuts what follows (a record torn by a crash, or
//! damaged bytes), reporting how many bytes and why ([`JournalWriter::recovery`]). A reader
//! delivers every intact record and stops with an error naming the file and offset at the first
//! damaged one before the end of the data.
mod crc_lanes;
mod error;
mod folder;
pub mod format;
pub mod index;
mod reader;
pub mod recorder;
mod recorder_agent;
mod recorder_writer;
mod source_id;
mod tail;
mod taps;
mod verify;
mod writer;

#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod tests;

pub use error::JournalError;
pub use format::{Kind, Record};
pub use reader::{Cursor, JournalReader, SegmentInfo};
pub use recorder::{RecordError, Recorder, RecorderOptions, RecorderStats, SourceError, Taken, Tap};
pub use recorder_agent::{RecorderAgent, RECORD_BATCH};
pub use tail::JournalTail;
pub use verify::{verify, SegmentCheck, VerifyReport};
pub use writer::{segment_path, Durability, JournalMeta, JournalOptions, JournalWriter, Recovery};
