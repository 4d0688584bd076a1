//! Kernel-bypass ingest of the feed's datagrams over AF_XDP (`xdp` feature).
//!
//! [`frame`] takes a raw Ethernet frame apart and checks it (no kernel stack did);
//! [`XdpIngest`] is an AF_XDP socket on one receive queue, with the XDP program that steers only
//! the feed's destinations to it and passes every other frame to the kernel.
pub mod frame;
mod ingest;
mod program;

pub use ingest::{IngestInfo, IngestStats, XdpIngest, XdpOptions};
pub use program::{AttachMode, Verdict};

/// Why AF_XDP ingest could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum XdpError {
    /// The options do not make sense.
    #[error("AF_XDP ingest: {0}")]
    Config(String),
    /// No such interface.
    #[error("AF_XDP ingest: interface {iface}: {why} (is it there, in this network namespace? `ip link`)")]
    Iface {
        /// The interface asked for.
        iface: String,
        /// What the kernel said.
        why: String,
    },
    /// A system call failed.
    #[error("AF_XDP ingest: {what}: {why} (run as root: the socket needs CAP_NET_RAW, the UMEM CAP_IPC_LOCK or room in RLIMIT_MEMLOCK, the program CAP_NET_ADMIN and CAP_BPF)")]
    Io {
        /// What was being done.
        what: &'static str,
        /// What the kernel said.
        why: String,
    },
    /// Binding the socket to the queue failed.
    #[error("AF_XDP ingest: binding to {iface} queue {queue} ({}): {why} ({})",
        if *zero_copy { "zero-copy" } else { "copy mode" },
        if *busy { "another AF_XDP socket is bound to that queue, still after 2 s: another feed running?" }
        else if *zero_copy { "a driver without zero-copy: leave it to fall back to copy mode" }
        else { "a queue the interface does not have, or the interface down" })]
    Bind {
        /// The interface.
        iface: String,
        /// The queue.
        queue: u32,
        /// Whether zero-copy was asked for.
        zero_copy: bool,
        /// Whether the queue was busy (another socket bound to it).
        busy: bool,
        /// What the kernel said.
        why: String,
    },
    /// Loading the XDP program or its maps failed.
    #[error("AF_XDP ingest: {what}: {why}")]
    Program {
        /// What was being done.
        what: &'static str,
        /// What aya or the kernel said.
        why: String,
    },
    /// Attaching the program to the interface failed.
    #[error("AF_XDP ingest: attaching the XDP program to {iface}: {why} (another XDP program attached there? `ip link show {iface}` names it: another feed, or another tool's; only a stale one of tickbus's (`tickbus_feed_steer`) is safe to detach, with `ip link set {iface} xdp off`)")]
    Attach {
        /// The interface.
        iface: String,
        /// What the kernel said.
        why: String,
    },
}
