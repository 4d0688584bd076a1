//! The trading apps' streams, on any transport: thin wrappers over the library's
//! [`AnySubscriber`] and [`AnyPublisher`] (`tickbus::stream`), which hold the one `match` per
//! call. What the apps add is policy: a transport error on the hot path (a QP that failed, a
//! publisher that went) is kept, not returned, so the stream reads as empty from then on and
//! the app looks at [`In::failure`] when idle, as it looks at its peers.
#[cfg(test)]
use tickbus::shm::{ShmPublisher, ShmSubscriber};
use tickbus::stream::{AnyError, AnyPublisher, AnySubscriber, Publish, Retry, Subscribe};
use tickbus::Recv;

use crate::pipeline::Peer;

/// A stream the app reads: market data, orders (gateway) or reports (trader).
pub struct In {
    sub: AnySubscriber,
    failed: Option<String>,
}

impl In {
    pub fn new(sub: AnySubscriber) -> In {
        In { sub, failed: None }
    }

    /// A shm ring's subscriber.
    #[cfg(test)]
    pub fn shm(s: ShmSubscriber) -> In {
        In::new(AnySubscriber::Shm(s))
    }

    /// The next message or gap, or None (also once the transport failed: see `failure`).
    #[inline]
    pub fn try_recv(&mut self) -> Option<Recv<'_>> {
        let In { sub, failed } = self;
        if failed.is_some() {
            return None;
        }
        match sub.try_recv() {
            Ok(r) => r,
            // One foreign datagram dropped (ud-mcast): counted by the transport, poll on.
            Err(e) if e.retry_helps() => None,
            Err(e) => {
                fail(failed, e);
                None
            }
        }
    }

    /// Reliable streams: positions are released only by [`In::release_to`] (a gateway releases
    /// an order once it is answered).
    pub fn set_manual_release(&mut self, manual: bool) {
        self.sub.set_manual_release(manual);
    }

    #[inline]
    pub fn release_to(&mut self, position: u64) {
        self.sub.release_to(position)
    }

    /// TSC ticks per ns of the stream's publisher (shm, rdma-rc: from the ring's header), or
    /// this host's (ud-mcast).
    pub fn ticks_per_ns(&self) -> f64 {
        self.sub.ticks_per_ns()
    }

    /// What became of the stream's publisher (a syscall on shm and rdma-rc: call it when idle).
    /// rdma-rc cannot tell a clean close from a crash: a publisher gone counts as closed.
    /// ud-mcast has no way to tell at all: always live (the apps end a multicast feed by its
    /// silence).
    pub fn peer(&self) -> Peer {
        if self.failed.is_some() {
            return Peer::Closed;
        }
        self.sub.publisher()
    }

    /// Whether this is a ud-mcast stream.
    pub fn is_multicast(&self) -> bool {
        #[cfg(feature = "rdma")]
        if let AnySubscriber::UdMcast(_) = self.sub {
            return true;
        }
        false
    }

    /// Why the transport failed, if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// ud-mcast: messages recovered from the publisher's history after the fabric lost them.
    pub fn recovered(&self) -> u64 {
        self.sub.recovered()
    }
}

#[cold]
fn fail(failed: &mut Option<String>, e: AnyError) {
    *failed = Some(e.to_string());
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
pub struct Out {
    p: AnyPublisher,
}

impl Out {
    pub fn new(p: AnyPublisher) -> Out {
        Out { p }
    }

    /// A shm ring's publisher.
    #[cfg(test)]
    pub fn shm(p: ShmPublisher) -> Out {
        Out::new(AnyPublisher::Shm(p))
    }

    #[inline]
    pub fn publish(&mut self, payload: &[u8]) -> Result<u64, OutError> {
        self.p.publish(payload).map_err(out_error)
    }

    /// Stamps `msg`'s header (stream, sequence = position, `tsc`) and publishes it.
    #[inline]
    pub fn send<T: tickbus_codecs::Message>(&mut self, msg: &mut T, tsc: u64) -> Result<u64, OutError> {
        msg.header_mut().stamp(self.p.stream_id(), self.p.position(), tsc);
        self.publish(zerocopy::IntoBytes::as_bytes(msg))
    }

    /// The position (sequence number) the next message gets.
    #[inline]
    pub fn position(&self) -> u64 {
        self.p.position()
    }

    #[inline]
    pub fn stream_id(&self) -> u32 {
        self.p.stream_id()
    }

    pub fn ticks_per_ns(&self) -> f64 {
        self.p.ticks_per_ns()
    }

    /// Call when idle: rdma-rc takes in subscribers, reaps completions and ships what waited for
    /// credit. Nothing to do on shm and ud-mcast.
    #[inline]
    pub fn idle(&mut self) {
        self.p.idle();
    }

    /// Multicast: sends what is queued and a heartbeat saying where the stream is (so a
    /// subscriber learns of a lost tail); others: nothing to do. Set-up path (may wait 1 s).
    pub fn flush(&mut self) {
        if let Err(e) = self.p.flush(std::time::Duration::from_secs(1)) {
            log::warn!("flushing stream {}: {e}", self.p.stream_id());
        }
    }

    /// Multicast: a heartbeat (call when quiet); others: nothing to do.
    pub fn heartbeat(&mut self) {
        if let Err(e) = self.p.heartbeat() {
            log::warn!("stream {} heartbeat: {e}", self.p.stream_id());
        }
    }

    /// rdma-rc: subscribers dropped since the last call, with why (call when idle). A reader
    /// that left cleanly (closed its connection) is not a failure and is not listed.
    pub fn dropped(&mut self) -> Vec<String> {
        self.p.dropped()
    }

    /// Whether a reader is there (rdma-rc: connected; shm and ud-mcast: always).
    pub fn has_reader(&mut self) -> bool {
        self.p.has_reader()
    }

    /// Whether this is a ud-mcast stream (no close: its readers end on silence).
    pub fn is_multicast(&self) -> bool {
        #[cfg(feature = "rdma")]
        if let AnyPublisher::UdMcast(_) = self.p {
            return true;
        }
        false
    }
}

/// A full reliable stream (or a full send queue) is `Full`: try again; anything else failed.
#[inline]
fn out_error(e: AnyError) -> OutError {
    if e.retry_helps() {
        OutError::Full
    } else {
        OutError::Failed(e.to_string())
    }
}
