//! Fan-out results: one publisher, 1, 2 and 4 subscribers, per transport.
use serde::{Deserialize, Serialize};

/// One subscriber count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FanoutRow {
    pub subscribers: usize,
    pub publish_p50_ns: u64,
    pub publish_p99_ns: u64,
    /// Per subscriber, one-way latency from the intended send time.
    pub sub_p50_ns: Vec<u64>,
    pub sub_p99_ns: Vec<u64>,
    /// Publishes that found the ring full (a subscriber behind by a whole ring).
    pub late_sends: u64,
    /// Per subscriber, messages delivered (empty where the run does not record them).
    #[serde(default)]
    pub delivered: Vec<u64>,
}

/// One transport's fan-out run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FanoutReport {
    /// `shm`, `rdma-rc` or `ud-mcast`, and where it ran.
    pub transport: String,
    /// How the subscribers are set up and what one publish does.
    pub setup: String,
    pub rate: u64,
    pub messages: u64,
    pub rows: Vec<FanoutRow>,
}
