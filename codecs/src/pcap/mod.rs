//! Packet captures of market data: pcap and pcapng files of MoldUDP64 over Ethernet/IPv4/UDP,
//! the format market-data teams keep. The container format is read and written by the
//! `pcap-file` crate and the frames by `etherparse`; this module adds what they do not: format
//! detection, pcapng timestamp units, the UDP filter, and accounting for what was skipped.
//!
//! Owns: getting UDP datagrams with their capture times out of a capture, and writing one.
//! Never: does I/O beyond the `Read`/`Write` it is given, or panics on any input.
mod reader;
mod writer;

pub use reader::{CaptureFormat, CaptureReader, Datagram, Skipped};
pub use writer::{Endpoints, MoldPcapWriter};

/// Why a capture cannot be read (or written). Each variant says what was wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// The file starts with neither magic number (its first four bytes).
    #[error("not a pcap or pcapng capture (first bytes {0:02x?}); ITCH files are read with ItchFileReader")]
    NotACapture([u8; 4]),
    /// The capture's link type is not Ethernet (its name).
    #[error("capture link type {0} is not Ethernet: only Ethernet captures are decoded")]
    LinkType(String),
    /// A packet the capture library could not decode.
    #[error("packet {packet}: malformed capture: {source}")]
    Format {
        /// The packet's number in the capture (from 1).
        packet: u64,
        /// What the capture library found wrong.
        source: pcap_file::PcapError,
    },
    /// The capture could not be written.
    #[error("writing the capture: {0}")]
    Write(pcap_file::PcapError),
    /// Reading or writing the file failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

#[cfg(test)]
mod tests;
