//! The feed handler's logic: MoldUDP64 from two redundant lines (A and B) arbitrated into one
//! gap-free stream, with re-requests for what both lines missed ([`arbiter`]), and the same
//! defence for a capture read from a file ([`capture`]). Pure: the
//! caller owns the sockets and the clock, and publishes what comes out (see `tickbus feed`);
//! [`ingest`] takes a line's waiting datagrams in one syscall.
pub mod arbiter;
pub mod capture;
pub mod ingest;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod sim;

pub use arbiter::{Arbiter, ArbiterOptions, ArbiterStats, Line, Out};
pub use capture::{CaptureOrder, CaptureOut, CaptureStats};
pub use ingest::DatagramBatch;
