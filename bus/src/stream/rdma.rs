//! [`Publish`] and [`Subscribe`] for rdma-rc and ud-mcast. Their claims are staged: the bytes go
//! into a buffer the publisher made at set-up and are published by a copy at commit, since both
//! transports copy every payload onto the fabric anyway (rdma-rc through its mirror ring,
//! ud-mcast through its history slot).
use tickbus_codecs::Message;

use super::{Publish, Reliability, Retry, StreamClaim, Subscribe};
use crate::mcast::{McastError, McastPublisher, McastSubscriber};
use crate::rdma::{RdmaError, RdmaPublisher, RdmaSubscriber};
use crate::ring::{ClaimError, Mode, Recv, RecvInto};
use crate::time::Tsc;

impl Retry for RdmaError {
    /// A full reliable ring: later, yes. Everything else (a failed QP, a dropped subscriber, a
    /// message larger than a slot, a dead device) needs a fix or a reopen.
    fn retry_helps(&self) -> bool {
        matches!(self, RdmaError::Claim(ClaimError::Full { .. }))
    }
}

impl Retry for McastError {
    /// A full send queue (nothing was sent), or one foreign datagram dropped by a subscriber
    /// (it goes on): yes.
    fn retry_helps(&self) -> bool {
        matches!(self, McastError::SendQueueFull { .. } | McastError::Frame { .. })
    }
}

/// The publishers whose claims are staged.
pub trait Staging {
    /// The transport's error.
    type Error: Retry + std::error::Error + Send + Sync + 'static;
    /// The stage buffer (one payload's worth, made at set-up).
    fn stage(&mut self) -> &mut [u8];
    /// Publishes `stage[..len]`.
    fn publish_stage(&mut self, len: usize) -> Result<u64, Self::Error>;
    /// The next position.
    fn next_position(&self) -> u64;
    /// The error for a claim larger than the stage.
    fn too_large(&self, len: usize) -> Self::Error;
}

/// A claim staged in the publisher's buffer, published by a copy at commit.
#[must_use = "a claim is published only by commit; dropped, its slot is aborted"]
pub struct Staged<'a, P: Staging> {
    p: &'a mut P,
    len: usize,
}

impl<P: Staging> std::fmt::Debug for Staged<'_, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Staged").field("position", &self.p.next_position()).field("len", &self.len).finish()
    }
}

impl<'a, P: Staging> Staged<'a, P> {
    fn new(p: &'a mut P, len: usize) -> Result<Self, P::Error> {
        if len > p.stage().len() {
            return Err(p.too_large(len));
        }
        Ok(Staged { p, len })
    }
}

impl<P: Staging> StreamClaim for Staged<'_, P>
where
    P::Error: Retry + std::error::Error + 'static,
{
    type Error = P::Error;
    fn position(&self) -> u64 {
        self.p.next_position()
    }
    fn len(&self) -> usize {
        self.len
    }
    fn write(&mut self, payload: &[u8]) {
        assert_eq!(payload.len(), self.len, "claimed {} bytes, wrote {}", self.len, payload.len());
        self.p.stage()[..self.len].copy_from_slice(payload);
    }
    #[inline]
    fn store_word(&mut self, k: usize, value: u64) {
        assert!(8 * k + 8 <= self.len, "word {k} is beyond the {} claimed bytes", self.len);
        self.p.stage()[8 * k..8 * k + 8].copy_from_slice(&value.to_le_bytes());
    }
    #[inline]
    fn commit(self) -> Result<u64, P::Error> {
        self.p.publish_stage(self.len)
    }
}

impl Staging for RdmaPublisher {
    type Error = RdmaError;
    fn stage(&mut self) -> &mut [u8] {
        &mut self.stage
    }
    fn publish_stage(&mut self, len: usize) -> Result<u64, RdmaError> {
        let stage = std::mem::take(&mut self.stage); // an empty box: no allocation
        let r = RdmaPublisher::publish(self, &stage[..len]);
        self.stage = stage;
        r
    }
    fn next_position(&self) -> u64 {
        RdmaPublisher::position(self)
    }
    fn too_large(&self, len: usize) -> RdmaError {
        ClaimError::TooLarge { len, max: self.config().max_payload() }.into()
    }
}

impl Publish for RdmaPublisher {
    type Error = RdmaError;
    type Claim<'a> = Staged<'a, RdmaPublisher>;

    #[inline]
    fn publish(&mut self, payload: &[u8]) -> Result<u64, RdmaError> {
        RdmaPublisher::publish(self, payload)
    }
    #[inline]
    fn send<T: Message>(&mut self, msg: &mut T) -> Result<u64, RdmaError> {
        RdmaPublisher::send(self, msg)
    }
    fn try_claim(&mut self, len: usize) -> Result<Staged<'_, RdmaPublisher>, RdmaError> {
        Staged::new(self, len)
    }
    #[inline]
    fn position(&self) -> u64 {
        RdmaPublisher::position(self)
    }
    fn stream_id(&self) -> u32 {
        self.config().stream_id
    }
    fn max_payload(&self) -> usize {
        self.config().max_payload()
    }
    fn reliability(&self) -> Reliability {
        match self.config().mode {
            Mode::Reliable => Reliability::Reliable,
            Mode::Lossy => Reliability::Lossy,
        }
    }
    fn ticks_per_ns(&self) -> f64 {
        self.config().ticks_per_ns
    }
    fn idle(&mut self) {
        self.poll();
    }
}

impl Subscribe for RdmaSubscriber {
    type Error = RdmaError;

    #[inline]
    fn try_recv(&mut self) -> Result<Option<Recv<'_>>, RdmaError> {
        RdmaSubscriber::try_recv(self)
    }
    #[inline]
    fn try_recv_into(&mut self, out: &mut [u8]) -> Result<Option<RecvInto>, RdmaError> {
        RdmaSubscriber::try_recv_into(self, out)
    }
    #[inline]
    fn position(&self) -> u64 {
        RdmaSubscriber::position(self)
    }
    fn missed(&self) -> u64 {
        RdmaSubscriber::missed(self)
    }
    fn max_payload(&self) -> usize {
        self.config().max_payload()
    }
    fn reliability(&self) -> Reliability {
        match self.config().mode {
            Mode::Reliable => Reliability::Reliable,
            Mode::Lossy => Reliability::Lossy,
        }
    }
    fn ticks_per_ns(&self) -> f64 {
        self.config().ticks_per_ns
    }
    fn set_manual_release(&mut self, manual: bool) -> bool {
        RdmaSubscriber::set_manual_release(self, manual);
        self.config().mode == Mode::Reliable
    }
    #[inline]
    fn release_to(&mut self, position: u64) {
        RdmaSubscriber::release_to(self, position)
    }
    fn window(&self) -> u64 {
        self.config().slot_count as u64
    }
    fn aborted(&self) -> u64 {
        self.aborted_skipped()
    }
}

impl Staging for McastPublisher {
    type Error = McastError;
    fn stage(&mut self) -> &mut [u8] {
        &mut self.stage
    }
    fn publish_stage(&mut self, len: usize) -> Result<u64, McastError> {
        let stage = std::mem::take(&mut self.stage);
        let r = McastPublisher::publish(self, &stage[..len]);
        self.stage = stage;
        r
    }
    fn next_position(&self) -> u64 {
        self.next_seq()
    }
    fn too_large(&self, len: usize) -> McastError {
        McastError::TooLarge { len, max: self.max_payload(), mtu: self.mtu() }
    }
}

impl Publish for McastPublisher {
    type Error = McastError;
    type Claim<'a> = Staged<'a, McastPublisher>;

    #[inline]
    fn publish(&mut self, payload: &[u8]) -> Result<u64, McastError> {
        McastPublisher::publish(self, payload)
    }
    /// Stamps the header with this host's TSC (`Tsc` is a zero-sized reader on x86_64).
    #[inline]
    fn send<T: Message>(&mut self, msg: &mut T) -> Result<u64, McastError> {
        let (stream, seq) = (McastPublisher::stream(self), self.next_seq());
        msg.header_mut().stamp(stream, seq, Tsc::new().now());
        McastPublisher::publish(self, zerocopy::IntoBytes::as_bytes(msg))
    }
    fn try_claim(&mut self, len: usize) -> Result<Staged<'_, McastPublisher>, McastError> {
        Staged::new(self, len)
    }
    #[inline]
    fn position(&self) -> u64 {
        self.next_seq()
    }
    fn stream_id(&self) -> u32 {
        McastPublisher::stream(self)
    }
    fn max_payload(&self) -> usize {
        McastPublisher::max_payload(self)
    }
    fn reliability(&self) -> Reliability {
        Reliability::Lossy
    }
    fn ticks_per_ns(&self) -> f64 {
        crate::time::ticks_per_ns()
    }
}

impl Subscribe for McastSubscriber {
    type Error = McastError;

    #[inline]
    fn try_recv(&mut self) -> Result<Option<Recv<'_>>, McastError> {
        McastSubscriber::try_recv(self)
    }
    #[inline]
    fn try_recv_into(&mut self, out: &mut [u8]) -> Result<Option<RecvInto>, McastError> {
        McastSubscriber::try_recv_into(self, out)
    }
    #[inline]
    fn position(&self) -> u64 {
        self.next_position()
    }
    fn missed(&self) -> u64 {
        self.stats().missed
    }
    fn max_payload(&self) -> usize {
        McastSubscriber::max_payload(self)
    }
    fn reliability(&self) -> Reliability {
        Reliability::Lossy
    }
    fn ticks_per_ns(&self) -> f64 {
        crate::time::ticks_per_ns()
    }
    fn set_manual_release(&mut self, _manual: bool) -> bool {
        false
    }
    fn release_to(&mut self, _position: u64) {}
}
