//! RDMA transport errors: each says what failed and what to check. Hot-path variants carry no
//! allocation.
use crate::control::ControlError;
use crate::ring::ClaimError;
use crate::sys::verbs::VerbsError;

/// Why an rdma-rc publisher or subscriber failed. Each message says what failed and what to check.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RdmaError {
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
    /// The subscriber could not reach the publisher's control address.
    #[error("connecting to {addr}: {source}; is the publisher listening there?")]
    Connect {
        /// The address tried.
        addr: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The control handshake failed (a timeout, a wrong token, a malformed line).
    #[error("handshake with {peer} failed: {reason}")]
    Handshake {
        /// The other side's address.
        peer: String,
        /// What went wrong.
        reason: String,
    },
    /// The other side refused the handshake and said why.
    #[error("{peer} refused the handshake: {reason}")]
    Refused {
        /// The other side's address.
        peer: String,
        /// Its reason.
        reason: String,
    },
    /// A work completion with an error status. On the publisher, a WRITE to that subscriber
    /// (which is dropped); on the subscriber, a receive or a credit WRITE.
    #[error("subscriber {subscriber}: {status_name} (status {status}): {remedy}")]
    Completion {
        /// The subscriber's consumer line (0 when the subscriber itself reports it).
        subscriber: usize,
        /// The verbs status code.
        status: u32,
        /// Its name.
        status_name: &'static str,
        /// What usually causes it and what to check.
        remedy: &'static str,
    },
    /// A subscriber's WRITEs stopped completing and the provider never said why; it is dropped.
    #[error("subscriber {subscriber} completed {completed} of {need} WRITEs and held publishing back for four times its QP retry budget: it is dead or its path is broken, and the provider never reported it; dropped")]
    Unresponsive {
        /// The subscriber's index.
        subscriber: usize,
        /// WRITEs completed.
        completed: u64,
        /// WRITEs the publisher waited for.
        need: u64,
    },
    /// Lossy mode: a WRITE to this subscriber still read a mirror slot the writer had to reuse;
    /// the publisher never waits for one subscriber, so it was dropped.
    #[error("subscriber {subscriber} ({peer}) fell a whole ring behind on the fabric (its WRITEs did not complete): dropped so the others are not slowed; it may reconnect")]
    TooSlow {
        /// The subscriber's index.
        subscriber: usize,
        /// Its address.
        peer: String,
    },
    /// The subscriber closed its control connection (it left, or its process ended).
    #[error("subscriber {subscriber} closed its control connection (it left or its process ended); dropped")]
    Left {
        /// The subscriber's index.
        subscriber: usize,
    },
    /// The subscriber broke the protocol (e.g. a credit that went backwards): dropped.
    #[error("subscriber {subscriber} broke the protocol: {reason}; dropped")]
    Protocol {
        /// The subscriber's index.
        subscriber: usize,
        /// What it did.
        reason: String,
    },
    /// A slot could not be claimed (full in reliable mode, or a message larger than a slot).
    #[error(transparent)]
    Claim(#[from] ClaimError),
    /// The device said the local port went down (a cut link, a cable pulled, the netdev under
    /// a Soft-RoCE device taken down): every subscriber on it is dropped at once, instead of when
    /// each QP's retry budget runs out.
    #[error("port {port} of {device} went down (the device's async event): every subscriber on it is dropped; check the link (`ip link`, `rdma link`), then let the subscribers reconnect")]
    PortDown {
        /// The device.
        device: String,
        /// The port.
        port: u8,
    },
    /// The device said this subscriber's QP failed (fatal, a request or an access error).
    #[error("subscriber {subscriber}: its QP failed (the device's async event): dropped; it may reconnect")]
    QpFailed {
        /// The subscriber's consumer line.
        subscriber: usize,
    },
    /// The device failed: nothing on it works until it is reopened.
    #[error("device {device} failed (IBV_EVENT_DEVICE_FATAL): every subscriber is dropped; check dmesg, then restart the publisher")]
    DeviceFatal {
        /// The device.
        device: String,
    },
    /// Publishing needs at least one connected subscriber.
    #[error("no subscriber connected; accept one first")]
    NoSubscriber,
}

/// A control-channel failure is reported under the same names rdma-rc always used.
impl From<ControlError> for RdmaError {
    fn from(e: ControlError) -> RdmaError {
        match e {
            ControlError::Io { what, source } => RdmaError::Io { what, source },
            ControlError::Connect { addr, source } => RdmaError::Connect { addr, source },
            ControlError::Handshake { peer, reason } => RdmaError::Handshake { peer, reason },
            ControlError::Refused { peer, reason } => RdmaError::Refused { peer, reason },
        }
    }
}

impl RdmaError {
    pub(crate) fn io(what: &'static str, source: std::io::Error) -> RdmaError {
        RdmaError::Io { what, source }
    }

    /// A failed work completion, with the remedy for its status.
    pub fn completion(subscriber: usize, status: u32) -> RdmaError {
        let (status_name, remedy) = explain(status);
        RdmaError::Completion { subscriber, status, status_name, remedy }
    }

    /// Whether retrying the same operation can succeed (back-pressure), as opposed to a broken
    /// connection that needs a reconnect.
    pub fn is_retryable(&self) -> bool {
        matches!(self, RdmaError::Claim(c) if c.is_retryable())
    }
}

/// Name and remedy of an ibv_wc_status.
pub fn explain(status: u32) -> (&'static str, &'static str) {
    match status {
        1 => ("LOC_LEN_ERR", "a local buffer is shorter than the message: check slot sizes on both sides"),
        2 => ("LOC_QP_OP_ERR", "the QP was asked for something it cannot do: a tickbus bug, please report it"),
        4 => ("LOC_PROT_ERR", "a local buffer is not covered by its registration (lkey/registration): a tickbus bug, please report it"),
        5 => ("WR_FLUSH_ERR", "the QP is in error after an earlier failure: reconnect"),
        9 => ("REM_INV_REQ_ERR", "the subscriber rejected the request (ring too small, or access flags): check both sides run the same tickbus version"),
        10 => ("REM_ACCESS_ERR", "rkey, address or permissions do not match the subscriber's ring registration: the subscriber re-registered, lied, or the handshake was corrupted; reconnect"),
        11 => ("REM_OP_ERR", "the subscriber could not complete the operation: check its logs and resources"),
        12 => ("RETRY_EXC_ERR", "no ACK from the subscriber within the retry budget: it died or the path is broken; check the link, PFC/ECN and retry_cnt/timeout"),
        13 => ("RNR_RETRY_EXC_ERR", "the subscriber had no receive posted (WRITE_WITH_IMM mode): it stopped polling or died"),
        _ => ("other", "see ibv_wc_status_str for this status; reconnect"),
    }
}
