//! The trading apps' streams on either fabric: shared memory on one host, or RDMA between hosts
//! (market data by ud-mcast, orders and reports by rdma-rc; feature `rdma`). The apps' loops are
//! written once against these; each call is one `match` on a variant that never changes, so the
//! branch is predicted and the loops stay free of syscalls and allocation on either fabric
//! (Soft-RoCE's doorbell `write` aside, which the bus's own proofs count).
//!
//! A transport error on the hot path (a QP that failed, a publisher that went) is kept, not
//! returned: the stream reads as empty from then on, and the app looks at [`In::failure`] when
//! idle, as it looks at its peers.
use tickbus::ring::ClaimError;
use tickbus::shm::{ShmPublisher, ShmSubscriber};
use tickbus::Recv;

use crate::pipeline::{self, Peer};

/// A stream the app reads: market data, orders (gateway) or reports (trader).
// One per stream per app, never moved on the hot path: the state stays inline, one load away,
// rather than boxed behind a pointer.
#[allow(clippy::large_enum_variant)]
pub enum In {
    Shm(ShmSubscriber),
    #[cfg(feature = "rdma")]
    Rdma {
        sub: tickbus::rdma::RdmaSubscriber,
        failed: Option<String>,
    },
    #[cfg(feature = "rdma")]
    Mcast {
        sub: tickbus::mcast::McastSubscriber,
        failed: Option<String>,
    },
}

impl In {
    /// The next message or gap, or None (also once the transport failed: see `failure`).
    #[inline]
    pub fn try_recv(&mut self) -> Option<Recv<'_>> {
        match self {
            In::Shm(s) => s.try_recv(),
            #[cfg(feature = "rdma")]
            In::Rdma { sub, failed } => match failed {
                Some(_) => None,
                None => keep_error(sub.try_recv(), failed),
            },
            #[cfg(feature = "rdma")]
            In::Mcast { sub, failed } => match failed {
                Some(_) => None,
                None => keep_error(sub.try_recv(), failed),
            },
        }
    }

    /// Reliable streams: positions are released only by [`In::release_to`] (a gateway releases
    /// an order once it is answered).
    pub fn set_manual_release(&mut self, manual: bool) {
        match self {
            In::Shm(s) => s.reader_mut().set_manual_release(manual),
            #[cfg(feature = "rdma")]
            In::Rdma { sub, .. } => sub.set_manual_release(manual),
            #[cfg(feature = "rdma")]
            In::Mcast { .. } => {}
        }
    }

    #[inline]
    pub fn release_to(&mut self, position: u64) {
        match self {
            In::Shm(s) => s.reader_mut().release_to(position),
            #[cfg(feature = "rdma")]
            In::Rdma { sub, .. } => sub.release_to(position),
            #[cfg(feature = "rdma")]
            In::Mcast { .. } => {}
        }
    }

    /// TSC ticks per ns of the stream's publisher (shm, rdma-rc: from the ring's header), or
    /// this host's (ud-mcast).
    pub fn ticks_per_ns(&self) -> f64 {
        match self {
            In::Shm(s) => s.config().ticks_per_ns,
            #[cfg(feature = "rdma")]
            In::Rdma { sub, .. } => sub.config().ticks_per_ns,
            #[cfg(feature = "rdma")]
            In::Mcast { .. } => tickbus::time::ticks_per_ns(),
        }
    }

    /// What became of the stream's publisher (a syscall on shm: call it when idle). rdma-rc
    /// cannot tell a clean close from a crash: a publisher gone counts as closed. ud-mcast has
    /// no way to tell at all: always live (the apps end a multicast feed by its silence).
    pub fn peer(&self) -> Peer {
        match self {
            In::Shm(s) => pipeline::peer(s),
            #[cfg(feature = "rdma")]
            In::Rdma { sub, failed } => match failed.is_some() || sub.publisher_gone() {
                true => Peer::Closed,
                false => Peer::Live,
            },
            #[cfg(feature = "rdma")]
            In::Mcast { .. } => Peer::Live,
        }
    }

    /// Why the transport failed, if it did.
    pub fn failure(&self) -> Option<&str> {
        match self {
            In::Shm(_) => None,
            #[cfg(feature = "rdma")]
            In::Rdma { failed, .. } | In::Mcast { failed, .. } => failed.as_deref(),
        }
    }

    /// ud-mcast: messages recovered from the publisher's history after the fabric lost them.
    pub fn recovered(&self) -> u64 {
        match self {
            #[cfg(feature = "rdma")]
            In::Mcast { sub, .. } => sub.stats().recovered,
            _ => 0,
        }
    }
}

/// A transport's receive result with its error kept in `failed` (read when idle) instead of
/// returned: the stream reads as empty from then on.
#[cfg(feature = "rdma")]
#[inline]
fn keep_error<'a, E: std::fmt::Display>(
    r: Result<Option<Recv<'a>>, E>,
    failed: &mut Option<String>,
) -> Option<Recv<'a>> {
    r.unwrap_or_else(|e| {
        *failed = Some(e.to_string());
        None
    })
}

/// Why a publish did not go out.
#[derive(Debug)]
pub enum OutError {
    /// A reliable stream's reader has not made room yet: try again.
    Full,
    /// Anything else (the transport failed): do not retry.
    Failed(String),
}

impl OutError {
    /// Says why a message on stream `what` was lost (the failure path: off the hot path).
    #[cold]
    pub fn log(&self, what: &str) {
        if let OutError::Failed(why) = self {
            log::error!("{what}: not sent: {why}");
        }
    }
}

/// A stream the app publishes: orders (trader), reports (gateway), market data (exchange).
#[allow(clippy::large_enum_variant)] // as `In`: inline on purpose
pub enum Out {
    Shm(ShmPublisher),
    #[cfg(feature = "rdma")]
    Rdma(tickbus::rdma::RdmaPublisher),
    #[cfg(feature = "rdma")]
    Mcast {
        publisher: tickbus::mcast::McastPublisher,
        stream: u32,
    },
}

impl Out {
    #[inline]
    pub fn publish(&mut self, payload: &[u8]) -> Result<u64, OutError> {
        match self {
            Out::Shm(p) => p.publish(payload).map_err(|e| match e {
                ClaimError::Full { .. } => OutError::Full,
                e => OutError::Failed(e.to_string()),
            }),
            #[cfg(feature = "rdma")]
            Out::Rdma(p) => p.publish(payload).map_err(|e| match e {
                tickbus::rdma::RdmaError::Claim(ClaimError::Full { .. }) => OutError::Full,
                e => OutError::Failed(e.to_string()),
            }),
            #[cfg(feature = "rdma")]
            Out::Mcast { publisher, .. } => publisher.publish(payload).map_err(|e| match e {
                tickbus::mcast::McastError::SendQueueFull { .. } => OutError::Full,
                e => OutError::Failed(e.to_string()),
            }),
        }
    }

    /// Stamps `msg`'s header (stream, sequence = position, `tsc`) and publishes it.
    #[inline]
    pub fn send<T: tickbus_codecs::Message>(&mut self, msg: &mut T, tsc: u64) -> Result<u64, OutError> {
        msg.header_mut().stamp(self.stream_id(), self.position(), tsc);
        self.publish(zerocopy::IntoBytes::as_bytes(msg))
    }

    /// The position (sequence number) the next message gets.
    #[inline]
    pub fn position(&self) -> u64 {
        match self {
            Out::Shm(p) => p.position(),
            #[cfg(feature = "rdma")]
            Out::Rdma(p) => p.position(),
            #[cfg(feature = "rdma")]
            Out::Mcast { publisher, .. } => publisher.next_seq(),
        }
    }

    #[inline]
    pub fn stream_id(&self) -> u32 {
        match self {
            Out::Shm(p) => p.config().stream_id,
            #[cfg(feature = "rdma")]
            Out::Rdma(p) => p.config().stream_id,
            #[cfg(feature = "rdma")]
            Out::Mcast { stream, .. } => *stream,
        }
    }

    pub fn ticks_per_ns(&self) -> f64 {
        match self {
            Out::Shm(p) => p.config().ticks_per_ns,
            #[cfg(feature = "rdma")]
            Out::Rdma(p) => p.config().ticks_per_ns,
            #[cfg(feature = "rdma")]
            Out::Mcast { .. } => tickbus::time::ticks_per_ns(),
        }
    }

    /// Call when idle: rdma-rc takes in subscribers, reaps completions and ships what waited for
    /// credit. Nothing to do on shm and ud-mcast.
    #[inline]
    pub fn idle(&mut self) {
        #[cfg(feature = "rdma")]
        if let Out::Rdma(p) = self {
            p.poll();
        }
    }

    /// Multicast: sends what is queued and a heartbeat saying where the stream is (so a
    /// subscriber learns of a lost tail); others: nothing to do. Set-up path (may wait 1 s).
    pub fn flush(&mut self) {
        #[cfg(feature = "rdma")]
        if let Out::Mcast { publisher, .. } = self {
            if let Err(e) = publisher.flush(std::time::Duration::from_secs(1)) {
                log::warn!("flushing the market data: {e}");
            }
        }
    }

    /// Multicast: a heartbeat (call when quiet); others: nothing to do.
    pub fn heartbeat(&mut self) {
        #[cfg(feature = "rdma")]
        if let Out::Mcast { publisher, .. } = self {
            if let Err(e) = publisher.heartbeat() {
                log::warn!("market-data heartbeat: {e}");
            }
        }
    }

    /// rdma-rc: subscribers dropped since the last call, with why (call when idle). A reader
    /// that left cleanly (closed its connection) is not a failure and is not listed.
    pub fn dropped(&mut self) -> Vec<String> {
        match self {
            #[cfg(feature = "rdma")]
            Out::Rdma(p) => p
                .take_dropped()
                .into_iter()
                .filter(|(_, e)| !matches!(e, tickbus::rdma::RdmaError::Left { .. }))
                .map(|(peer, e)| format!("{peer}: {e}"))
                .collect(),
            _ => Vec::new(),
        }
    }
}
