//! The bench layer: runs what is measured (the harness, the transports and peers, the trading
//! pipeline, fan-out, the journal, ITCH, perftest, the soak) and produces [`crate::model`]
//! values. Never formats a report (the render layer does).
pub mod book_scale;
pub mod catch_up;
pub mod chain_floor;
pub mod cleanup;
pub mod default_suite;
pub mod fanout;
#[cfg(feature = "rdma")]
pub mod fanout_hosts;
pub mod harness;
pub mod itch_bench;
pub mod join_cost;
pub mod join_live;
pub mod journal_bench;
#[cfg(feature = "rdma")]
pub mod mcast_pingpong;
pub mod peers;
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
pub mod perftest;
pub mod pipeline;
pub mod python_read;
#[cfg(feature = "rdma")]
pub mod rdma_fanout;
#[cfg(feature = "rdma")]
pub mod rdma_pingpong;
pub mod rdma_rounds;
pub mod soak;
pub mod suite;
pub mod tick_to_trade;
pub mod transport;
#[cfg(feature = "xdp")]
pub mod wire;
#[cfg(feature = "xdp")]
pub mod wire_trade;

/// How long the lab watches its two cores (at once) for time taken from them before it
/// measures anything (`tickbus doctor`'s jitter check): a host that deschedules a vCPU for
/// milliseconds is what marks open loops backlogged, and the environment says so.
pub const JITTER_WINDOW: std::time::Duration = std::time::Duration::from_secs(1);
