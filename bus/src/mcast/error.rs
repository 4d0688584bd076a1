//! ud-mcast errors: each says what failed and what to do. Hot-path variants carry no allocation.
use std::net::Ipv4Addr;

use super::frame::FrameError;
use crate::sys::verbs::VerbsError;

/// Why a ud-mcast publisher or subscriber failed. Each message says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McastError {
    /// A verbs call failed (device, port, registration, QP set-up).
    #[error(transparent)]
    Verbs(#[from] VerbsError),
    /// A socket or file call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Setting up gap recovery (the control channel and its authentication).
    #[error("recovery set-up: {0}")]
    Setup(#[from] crate::control::ControlError),
    /// A recovery READ never completed and the provider never said why: recovery is off.
    #[error("a recovery READ did not complete within 2 s, and the provider never reported why: the publisher is gone or its path is broken; recovery is off for this subscriber")]
    RecoveryTimeout,
    /// The group is not an IPv4 multicast address.
    #[error(
        "{group} is not an IPv4 multicast group (224.0.0.0/4); pick one, e.g. in 239.0.0.0/8 for a private fabric"
    )]
    NotMulticast {
        /// The address given.
        group: Ipv4Addr,
    },
    /// The message does not fit one datagram.
    #[error("a {len}-byte message does not fit one datagram: at most {max} bytes (the port's {mtu}-byte UD MTU less the 32-byte frame header); split it, or raise the netdev MTU (RoCE runs 4096 with a 9000-byte Ethernet MTU)")]
    TooLarge {
        /// The message's length.
        len: usize,
        /// The largest message a datagram carries.
        max: usize,
        /// The port's UD MTU.
        mtu: usize,
    },
    /// Every send slot waits for the NIC: retry; the message was not sent.
    #[error("all {depth} send slots wait for the NIC to complete: the NIC is behind the publisher; retry (the message was not sent)")]
    SendQueueFull {
        /// The send queue's depth.
        depth: u64,
    },
    /// A work completion with an error status.
    #[error("{side}: {status_name} (status {status}): {remedy}")]
    Completion {
        /// Which queue (send, receive or recovery).
        side: &'static str,
        /// The verbs status code.
        status: u32,
        /// Its name.
        status_name: &'static str,
        /// What usually causes it and what to do.
        remedy: &'static str,
    },
    /// The subscriber dropped one datagram that was not a frame of ours; it keeps going.
    #[error("dropped a datagram on group {group}: {error}")]
    Frame {
        /// The group the datagram came on.
        group: Ipv4Addr,
        /// What was wrong with it.
        error: FrameError,
    },
}

impl McastError {
    pub(crate) fn io(what: &'static str, source: std::io::Error) -> McastError {
        McastError::Io { what, source }
    }

    pub(crate) fn completion(side: &'static str, status: u32) -> McastError {
        let (status_name, remedy) = match status {
            1 => ("LOC_LEN_ERR", "a datagram was longer than the receive buffer: the receive slots are sized from the port MTU, so publisher and subscriber ports disagree on it; give both the same MTU"),
            4 => ("LOC_PROT_ERR", "a buffer is not covered by its registration: a tickbus bug, please report it"),
            5 => ("WR_FLUSH_ERR", "the QP went to the error state after an earlier failure: re-create the publisher or subscriber"),
            10 => ("REM_ACCESS_ERR", "the publisher's history refused the READ (rkey, address or permissions): it re-registered or the handshake was corrupted; reconnect recovery"),
            12 => ("RETRY_EXC_ERR", "the publisher did not answer within the QP's retry budget: it is gone or the path is broken; recovery is off until reconnected"),
            _ => ("other", "see ibv_wc_status_str for this status; re-create the publisher or subscriber"),
        };
        McastError::Completion { side, status, status_name, remedy }
    }

    /// Whether the same call can succeed later: a full send queue (retry the publish), or one
    /// dropped foreign or corrupt datagram (poll on).
    pub fn is_retryable(&self) -> bool {
        matches!(self, McastError::SendQueueFull { .. } | McastError::Frame { .. })
    }
}
