//! The trading pipeline's results: per rate, hop by hop beside its floors (across processes on
//! shm), and over RDMA in the Soft-RoCE guest beside perftest.
use serde::{Deserialize, Serialize};

/// One hop's percentiles (ns) and, for a process crossing, its floor's and the ratios.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hop {
    pub name: String,
    pub count: u64,
    pub p50: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub max: u64,
    /// The bare ring hop's (p50, p99) at the same rate and payload, and this hop's ratios to it.
    pub floor: Option<(u64, u64)>,
    pub x_floor: Option<(f64, f64)>,
}

/// One pipeline run at one rate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub rate: u64,
    /// "exchange+gateway | trader" or "exchange | trader | gateway", with their cores.
    pub layout: String,
    pub hops: Vec<Hop>,
    /// Market-data messages published, ticks the trader saw, orders, reports.
    pub published: u64,
    pub ticks: u64,
    pub ticks_missed: u64,
    pub orders: u64,
    pub reports: u64,
    /// The exchange's own hop, over every market-data message: tick due -> published (the loop's
    /// lateness and the normalising). The trader's first hop includes it.
    pub feed: Hop,
    /// The trader's own view of the market-data hop over every tick (the gateway's rows time
    /// only the ticks that led to an order, which often queue behind the earlier messages of
    /// the same exchange event), beside the same floor.
    pub every_tick: Hop,
    /// The order book's own p50 cost per market-data message (in process, same messages).
    pub book_p50: u64,
    /// Tick-to-trade p50's budget: the two floors' p50s + the book's p50 + 100 ns.
    pub budget_p50: u64,
    /// Hops within 1.15x of their floor at p50 and p99, and tick-to-trade within its budget.
    pub hops_met: bool,
    pub ttt_met: bool,
    /// The exchange fell behind its schedule: what it says (the rate it sustained); the hops
    /// then measure queueing, and neither target is judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<String>,
}

/// One round of the RDMA pipeline in the guest, beside perftest's one-way figures measured just
/// before it in the same boot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RdmaRound {
    pub ttt_p50: u64,
    pub ttt_p99: u64,
    /// perftest's typical one-way latency (ns): `ib_send_lat` UD (market data) and
    /// `ib_write_lat` RC (orders), at the payloads the pipeline sends.
    pub ud_one_way: u64,
    pub rc_one_way: u64,
    /// ud + rc + the book's p50: what tick-to-trade p50 is held against.
    pub budget: u64,
    pub ratio: f64,
    pub ticks: u64,
    pub orders: u64,
    /// The exchange fell behind its schedule this round (what it said): no verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<String>,
}

/// The pipeline over RDMA (exchange on one device, trader on the other), rounds interleaved
/// with perftest, and the last round's hops.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RdmaRun {
    pub rate: u64,
    pub rounds: Vec<RdmaRound>,
    pub book_p50: u64,
    pub hops: Vec<Hop>,
    /// Median, min and max of the rounds' ratios; the target is median <= 1.25.
    pub ratio: (f64, f64, f64),
}
