//! ITCH decode and order-book results beside itchy.
use serde::{Deserialize, Serialize};

/// One decoder's best pass.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DecodeResult {
    pub name: String,
    pub messages: u64,
    pub seconds: f64,
    pub msgs_per_s: f64,
    pub gb_per_s: f64,
    pub x_itchy: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BookResult {
    pub messages: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    /// Cost of the empty timing pair, included in every per-message sample above.
    pub timer_ns: u64,
    /// Whether each message was timed between fenced TSC reads (as [`super::book::BookScale`]'s:
    /// None in a report that does not say).
    #[serde(default)]
    pub fenced: Option<bool>,
    pub resting_orders_at_close: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ItchReport {
    pub file_bytes: usize,
    pub messages: u64,
    pub seed: u64,
    pub stocks: u16,
    pub passes: u32,
    pub decode: Vec<DecodeResult>,
    pub book: BookResult,
    /// `next_record`'s and itchy's time over the whole day (ns), run back to back in each of
    /// `passes` rounds, the order alternating: the verdict's paired speed-ups. Empty in a
    /// report from before they were kept (its verdict falls back to the best passes).
    #[serde(default)]
    pub paired_ns: Vec<(u64, u64)>,
}
