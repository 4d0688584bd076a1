//! What every transport and peer gives the harness: a one-way channel of `size`-byte messages
//! whose first 8 bytes carry a TSC stamp. One benchmark body ([`crate::bench::harness`]) drives every
//! implementation, so the figures differ only by the transport.
//!
//! Every sender writes the whole message (stamp plus filler) and every receiver copies the whole
//! message out, as a real consumer would read it.
use std::error::Error;

/// The sending end. `try_send` returns false when the channel is full (the caller retries).
pub trait Tx {
    fn try_send(&mut self, stamp: u64) -> bool;
    /// Runs on the thread that will send, before the clock starts (for clients that must be
    /// created on the thread using them).
    fn prepare(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// The receiving end: the stamp of the next message, after copying the message out.
pub trait Rx {
    fn try_recv(&mut self) -> Option<u64>;
    /// See [`Tx::prepare`].
    fn prepare(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// A transport whose two ends live in one process (threads on two cores).
pub trait InProcess {
    type Tx: Tx + Send + 'static;
    type Rx: Rx + Send + 'static;
    fn name(&self) -> String;
    /// Configuration worth printing beside the figures.
    fn note(&self) -> String;
    /// A fresh channel for `size`-byte messages.
    fn channel(&mut self, size: usize, ticks_per_ns: f64) -> Result<(Self::Tx, Self::Rx), Box<dyn Error>>;
}

/// A transport whose ends are opened by name in two processes.
pub trait CrossProcess {
    type Tx: Tx;
    type Rx: Rx;
    /// Selects this transport in the echo child (`latency-lab __echo --peer KEY`).
    const KEY: &'static str;
    fn name(&self) -> String;
    fn note(&self) -> String;
    fn tx(&self, channel: &str, size: usize, ticks_per_ns: f64) -> Result<Self::Tx, Box<dyn Error>>;
    fn rx(&self, channel: &str, size: usize) -> Result<Self::Rx, Box<dyn Error>>;
}

/// A message buffer with the stamp in its first 8 bytes and a non-zero filler after it.
pub fn message(size: usize) -> Vec<u8> {
    (0..size.max(8)).map(|i| (i as u8) | 1).collect()
}

#[inline(always)]
pub fn put_stamp(buf: &mut [u8], stamp: u64) {
    buf[..8].copy_from_slice(&stamp.to_le_bytes());
}

#[inline(always)]
pub fn stamp_of(buf: &[u8]) -> u64 {
    u64::from_le_bytes(buf[..8].try_into().expect("messages are at least 8 bytes"))
}
