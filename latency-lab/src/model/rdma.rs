//! tickbus over RDMA beside perftest, round by round.
use serde::{Deserialize, Serialize};

/// Every comparison of one `latency-lab rdma` run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Versus {
    pub rounds: u32,
    /// RTT p50 against 2 x perftest's typical one-way latency: lower is better (1.0: as fast).
    pub rtt: Vec<VsRow>,
    /// Messages per second against perftest's message rate: higher is better.
    pub rate: Vec<VsRow>,
}

/// One tickbus transport at one size beside its perftest yardstick, round by round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VsRow {
    pub name: String,
    pub tool: String,
    pub size: usize,
    /// Per round: tickbus's figure (RTT p50 ns, or msgs/s) ...
    pub ours: Vec<f64>,
    /// ... and perftest's, measured just before it in the same round.
    pub theirs: Vec<f64>,
    /// ours / theirs per round.
    pub ratios: Vec<f64>,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// What the figure does not say by itself (rate rows: what the subscriber received).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl VsRow {
    /// A row from per-round figures (same length, perftest's all positive).
    #[cfg_attr(not(feature = "rdma"), allow(dead_code))]
    pub fn new(name: &str, tool: &str, size: usize, ours: Vec<f64>, theirs: Vec<f64>, note: String) -> VsRow {
        assert_eq!(ours.len(), theirs.len(), "one perftest figure per round");
        let ratios: Vec<f64> = ours.iter().zip(&theirs).map(|(o, t)| o / t).collect();
        let super::Spread { median, min, max } = super::Spread::of(ratios.clone());
        VsRow { name: name.into(), tool: tool.into(), size, ours, theirs, ratios, median, min, max, note }
    }
}
