//! Fixed-layout messages that travel on the tickbus, and exchange codecs (NASDAQ ITCH 5.0, MoldUDP64).
//!
//! Owns: the byte layout of every bus message. Must never: do I/O, read a clock, allocate on a
//! decode path, or panic on any input.
//!
//! Every message is a `#[repr(C)]` struct that starts with a 32-byte [`Header`], derives zerocopy's
//! traits, has 8-byte aligned fields, and asserts its size and field offsets at compile time. The
//! wire is little-endian: the crate refuses to build on a big-endian target rather than silently
//! emitting the wrong byte order (every platform trading firms deploy on is little-endian).
//!
//! Decoding is zero-copy: [`Message::parse`] checks length, type and version once and returns a
//! reference into the buffer; after that no accessor can panic.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(not(target_endian = "little"))]
compile_error!("tickbus-codecs lays messages out little-endian on the wire; big-endian targets are unsupported");

pub mod any;
pub mod book;
pub mod capture_format;
pub mod enums;
pub mod exec;
pub mod header;
pub mod itch;
pub mod layout;
pub mod md;
pub mod message;
pub mod moldudp64;
pub mod normalize;
pub mod orders;
#[cfg(feature = "pcap")]
pub mod pcap;
#[cfg(feature = "synth")]
pub mod synth;

pub use any::{decode, AnyMessage};
pub use enums::{OrdType, Side, TimeInForce};
pub use header::{Header, FLAG_INGRESS_TSC, FLAG_PUBLISH_LAG, FLAG_RECORDING_GAP, HEADER_LEN, PUBLISH_LAG_SHIFT};
pub use message::{DecodeError, Message, MsgType};

/// Prices are signed fixed-point integers with eight decimal places (`1.0` = `100_000_000`).
///
/// Eight places hold ITCH's Price(4) and Price(8) exactly and leave an i64 range of +/-92 billion.
pub const PRICE_SCALE: i64 = 100_000_000;

#[cfg(test)]
mod testutil {
    /// `len` deterministic pseudo-random bytes (xorshift32) for never-panics tests.
    pub fn junk(seed: u32, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    }
}

/// This crate's README (what crates.io shows), compiled and run as doctests so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctests;
