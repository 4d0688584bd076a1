//! The journal's results beside their floors.
use serde::{Deserialize, Serialize};

/// What the journal benchmarks measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JournalReport {
    pub messages: u64,
    pub message_bytes: usize,
    /// A bare buffered sequential write of the same record bytes.
    pub floor_write_msgs_per_s: f64,
    pub recorder_msgs_per_s: f64,
    pub recorder_x_floor: f64,
    /// Interleaved rounds the recorder and floor figures are medians of (0: a report from
    /// before this was recorded).
    #[serde(default)]
    pub rounds: usize,
    /// Each paired round's (recorder, floor) time for the same messages, in ns: the verdict's
    /// rounds (empty: a report from before paired rounds, judged on the medians).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paired_ns: Vec<(u64, u64)>,
    /// Times the recorder's poll side found its queue to the writer thread full (last round):
    /// zero means the poll side set the pace, many means the writer thread did.
    #[serde(default)]
    pub recorder_queue_full: u64,
    pub read_msgs_per_s: f64,
    pub read_gb_per_s: f64,
    /// The same run's ITCH walk, for comparison.
    pub itch_decode_msgs_per_s: Option<f64>,
    pub sustained: Option<Sustained>,
    /// The Python package reading a journal into numpy beside the Rust reader (issue 28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_read: Option<PythonRead>,
    /// A late joiner's catch-up from a journal beside the journal's own read (issue 26).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<CatchUp>,
    /// Joining at 10:30 and 15:59 of the day, from the open and from a snapshot (issue 26).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub join_live: Vec<JoinLive>,
}

/// A late joiner's way to the book as of one moment of the day: the merge from the open, each
/// message applied, beside loading a whole-book snapshot taken then (books checked equal).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JoinLive {
    /// The moment ("10:30").
    pub at: String,
    /// Its market-data position.
    pub position: u64,
    pub rounds: usize,
    /// Median: the merge from position 0 to here, applying every message to a book.
    pub from_open_ms: f64,
    /// Median: the snapshot's chunks from a ring into a book.
    pub from_snapshot_ms: f64,
    pub snapshot_orders: u64,
    pub snapshot_chunks: u64,
    /// What one snapshot cost its maker (walk and publish), off every hot path.
    pub snapshot_publish_ms: f64,
    /// from_open_ms / from_snapshot_ms: the load alone (the wait for the next snapshot is not
    /// in it).
    pub x_faster: f64,
}

/// The replay-merge catching up from a journal beside the journal's cursor over the same
/// records: paired rounds in alternating order, a ratio per round.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CatchUp {
    pub messages: u64,
    pub rounds: usize,
    /// Median of the rounds: the floor.
    pub journal_read_msgs_per_s: f64,
    /// Median of the rounds: the merge.
    pub merge_msgs_per_s: f64,
    /// Median of the per-round ratios (target: at least 0.8).
    pub x_floor: f64,
    /// The lowest and highest per-round ratio.
    pub x_min: f64,
    pub x_max: f64,
}

/// `tickbus.read_journal` (numpy structured arrays) beside the Rust reader decoding every
/// message into its struct, over one journal, medians of interleaved rounds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PythonRead {
    pub messages: u64,
    pub rounds: usize,
    pub python_msgs_per_s: f64,
    pub rust_msgs_per_s: f64,
    /// Python over Rust (target: at least 0.5).
    pub x_rust: f64,
    /// Why it was not measured (then the figures are 0).
    pub note: Option<String>,
}

impl PythonRead {
    pub fn not_measured(why: &str) -> PythonRead {
        PythonRead {
            messages: 0,
            rounds: 0,
            python_msgs_per_s: 0.0,
            rust_msgs_per_s: 0.0,
            x_rust: 0.0,
            note: Some(why.to_owned()),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sustained {
    pub rate: u64,
    pub seconds: f64,
    pub published: u64,
    pub recorded: u64,
    /// Publishes that found the ring full (the recorder's back-pressure).
    pub full: u64,
    pub achieved_msgs_per_s: f64,
}
