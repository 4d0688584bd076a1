//! The feed handler's logic: MoldUDP64 from two redundant lines (A and B) arbitrated into one
//! gap-free stream, with re-requests for what both lines missed ([`arbiter`]), and the same
//! defence for a capture read from a file ([`capture`]). Pure: the
//! caller owns the sockets and the clock. [`handler`] is the whole per-datagram path (arbitrate,
//! normalise, publish on any stream) that `tickbus feed`, the lab and embedders share;
//! [`ingest`] takes a line's waiting datagrams in one syscall; [`wire_stamp`] carries a sender's
//! TSC in a datagram so a receiver on the same host can time the wire. After a loss for good,
//! [`repair`] puts the venue's book ([`glimpse`]) in the normaliser's place and
//! [`repair_helper`] publishes it whole for traders.
pub mod arbiter;
pub mod capture;
pub mod glimpse;
#[cfg(not(loom))]
pub mod handler;
pub mod ingest;
#[cfg(not(loom))]
pub mod repair;
#[cfg(not(loom))]
pub mod repair_helper;
#[cfg(all(test, not(loom)))]
mod repair_tests;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod sim;
pub mod wire_stamp;

pub use arbiter::{Arbiter, ArbiterOptions, ArbiterStats, Line, Out};
pub use capture::{CaptureOrder, CaptureOut, CaptureStats};
pub use handler::{FeedHandler, HandlerCounts, NoRerequest, PublishFailed, Rerequest};
pub use ingest::DatagramBatch;

/// An interface given by name (`eth0`) or by one of its IPv4 addresses: its name and address
/// (the first, if it has several). The feed joins groups by address and binds AF_XDP by name.
pub fn interface(name_or_address: &str) -> Result<(String, std::net::Ipv4Addr), String> {
    let all = crate::sys::net::ipv4_interfaces().map_err(|e| format!("listing the interfaces: {e}"))?;
    let found = match name_or_address.parse::<std::net::Ipv4Addr>() {
        Ok(ip) => all.into_iter().find(|(_, a)| *a == ip),
        Err(_) => all.into_iter().find(|(n, _)| n == name_or_address),
    };
    found.ok_or_else(|| {
        format!("{name_or_address}: no interface of that name or IPv4 address here (`ip -4 addr` lists them; an interface needs an IPv4 address to join groups on)")
    })
}
