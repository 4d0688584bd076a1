//! Control-channel errors: each names the peer and what went wrong.

/// Why a control connection (an rdma-rc stream's set-up or a ud-mcast recovery connection)
/// failed. rdma-rc reports these as the [`crate::rdma::RdmaError`] variants of the same names;
/// ud-mcast as `McastError::Setup`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// A socket call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Nothing answered at the publisher's control address.
    #[error("connecting to {addr}: {source}; is the publisher listening there?")]
    Connect {
        /// The address tried.
        addr: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The handshake failed (a timeout, a wrong token, a malformed line).
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
}

impl ControlError {
    pub(crate) fn io(what: &'static str, source: std::io::Error) -> ControlError {
        ControlError::Io { what, source }
    }

    /// Whether the same connection may work later: nobody listening yet, the publisher busy
    /// with other handshakes or its lines all taken, or a handshake that timed out while the
    /// publisher was busy. A wrong token or version is refused too: the caller that waits on
    /// this gives up at its own deadline, with the refusal's reason.
    pub fn may_work_later(&self) -> bool {
        matches!(self, ControlError::Connect { .. } | ControlError::Refused { .. } | ControlError::Handshake { .. })
    }
}
