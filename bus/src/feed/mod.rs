//! The feed handler's logic: MoldUDP64 from two redundant lines (A and B) arbitrated into one
//! gap-free stream, with re-requests for what both lines missed ([`arbiter`]). Pure: the
//! caller owns the sockets and the clock, and publishes what comes out (see `tickbus feed`).
pub mod arbiter;

pub use arbiter::{Arbiter, ArbiterOptions, ArbiterStats, Line, Out};
