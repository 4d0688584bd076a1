//! The trading apps' streams, on any transport: thin wrappers over the library's
//! [`AnySubscriber`] and [`AnyPublisher`] (`tickbus::stream`), which hold the one `match` per
//! call. What the apps add is policy: a transport error on the hot path (a QP that failed, a
//! publisher that went) is kept, not returned, so the stream reads as empty from then on and
//! the app looks at [`In::failure`] when idle, as it looks at its peers.
use tickbus::merge::{AnyArchive, MergeOptions, MergeStats, ReplayMerge};
#[cfg(test)]
use tickbus::shm::{ShmPublisher, ShmSubscriber};
use tickbus::stream::{AnyError, AnyPublisher, AnySubscriber, Publish, Retry, Subscribe};
use tickbus::Recv;

use crate::pipeline::Peer;

/// A stream the app reads: market data, orders (gateway) or reports (trader).
pub struct In {
    sub: Source,
    failed: Option<String>,
}

/// The live stream, or (a late joiner's market data) the stream's journal merged into it. The
/// live subscriber is kept inline (every app's hot path); the merge, made once per join, is
/// boxed.
#[allow(clippy::large_enum_variant)]
enum Source {
    Live(AnySubscriber),
    Joined(Box<ReplayMerge<AnySubscriber, AnyArchive>>),
}

impl In {
    pub fn new(sub: AnySubscriber) -> In {
        In { sub: Source::Live(sub), failed: None }
    }

    /// This live stream joined late: the stream from position `from`, caught up from the
    /// journal `tail` (local or served) and then live (`tickbus::merge`).
    pub fn into_joined(self, tail: AnyArchive, from: u64) -> Result<In, String> {
        let Source::Live(sub) = self.sub else { return Err("already joined".into()) };
        let m = ReplayMerge::new(sub, tail, from, MergeOptions::default()).map_err(|e| e.to_string())?;
        Ok(In { sub: Source::Joined(Box::new(m)), failed: self.failed })
    }

    /// The live stream's incarnation, where its transport knows it (shm).
    pub fn source_id(&self) -> Option<u64> {
        self.live().source_id()
    }

    /// A late joiner still catching up from the journal (false once live, and for a live
    /// stream).
    #[inline]
    pub fn catching_up(&self) -> bool {
        matches!(&self.sub, Source::Joined(m) if !m.is_live())
    }

    /// A late joiner's merge so far, and why its journal could not be read further, if so.
    pub fn join_stats(&self) -> Option<(MergeStats, Option<String>)> {
        match &self.sub {
            Source::Joined(m) => Some((m.stats(), m.archive_failure().map(str::to_owned))),
            Source::Live(_) => None,
        }
    }

    fn live(&self) -> &AnySubscriber {
        match &self.sub {
            Source::Live(s) => s,
            Source::Joined(m) => m.live(),
        }
    }

    /// A shm ring's subscriber.
    #[cfg(test)]
    pub fn shm(s: ShmSubscriber) -> In {
        In::new(AnySubscriber::Shm(s))
    }

    /// The next message or gap, or None (also once the transport failed: see `failure`).
    /// Always inlined, as the subscriber's own `try_recv` is: a result returned through memory
    /// is read back in wide loads that stall on the narrower stores just made.
    #[inline(always)]
    pub fn try_recv(&mut self) -> Option<Recv<'_>> {
        let In { sub, failed } = self;
        if failed.is_some() {
            return None;
        }
        match sub {
            Source::Live(s) => match s.try_recv() {
                Ok(r) => r,
                // One foreign datagram dropped (ud-mcast): counted by the transport, poll on.
                Err(e) if e.retry_helps() => None,
                Err(e) => {
                    fail(failed, e.to_string());
                    None
                }
            },
            Source::Joined(m) => match m.try_recv() {
                Ok(r) => r,
                Err(e) if e.retry_helps() => None,
                Err(e) => {
                    fail(failed, e.to_string());
                    None
                }
            },
        }
    }

    /// Reliable streams: positions are released only by [`In::release_to`] (a gateway releases
    /// an order once it is answered).
    pub fn set_manual_release(&mut self, manual: bool) {
        match &mut self.sub {
            Source::Live(s) => s.set_manual_release(manual),
            Source::Joined(m) => m.set_manual_release(manual),
        };
    }

    #[inline]
    pub fn release_to(&mut self, position: u64) {
        match &mut self.sub {
            Source::Live(s) => s.release_to(position),
            Source::Joined(m) => m.release_to(position),
        }
    }

    /// TSC ticks per ns of the stream's publisher (shm, rdma-rc: from the ring's header), or
    /// this host's (ud-mcast).
    pub fn ticks_per_ns(&self) -> f64 {
        self.live().ticks_per_ns()
    }

    /// What became of the stream's publisher (a syscall on shm and rdma-rc: call it when idle).
    /// rdma-rc cannot tell a clean close from a crash: a publisher gone counts as closed.
    /// ud-mcast has no way to tell at all: always live (the apps end a multicast feed by its
    /// silence).
    pub fn peer(&self) -> Peer {
        if self.failed.is_some() {
            return Peer::Closed;
        }
        self.live().publisher()
    }

    /// As [`In::peer`], but a late joiner whose publisher is gone stays live while its journal
    /// holds more to catch up on (the journal is reopened to see: idle path).
    pub fn peer_or_journal(&mut self) -> Peer {
        let p = self.peer();
        if let (Source::Joined(m), false) = (&mut self.sub, p == Peer::Live || self.failed.is_some()) {
            if !m.is_live() && m.archive_mut().has_more() {
                return Peer::Live;
            }
        }
        p
    }

    /// Whether this is a ud-mcast stream.
    pub fn is_multicast(&self) -> bool {
        #[cfg(feature = "rdma")]
        if let AnySubscriber::UdMcast(_) = self.live() {
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
        self.live().recovered()
    }
}

#[cold]
fn fail(failed: &mut Option<String>, why: String) {
    *failed = Some(why);
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

    /// The publisher underneath (set-up paths: waiting for its reader).
    pub fn publisher_mut(&mut self) -> &mut AnyPublisher {
        &mut self.p
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
