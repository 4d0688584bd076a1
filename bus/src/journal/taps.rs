//! [`Tap`] for every tickbus subscriber, so one recorder records any transport.
use super::recorder::{Taken, Tap};
use crate::ring::{Recv, RingMemory};
use crate::Subscriber;

/// Hands `f` the positions from `before` that held dropped claims, then `r`.
fn with_aborted(before: u64, r: Recv<'_>, f: &mut dyn FnMut(Taken<'_>)) {
    if let Recv::Message(m) = &r {
        if m.position > before {
            f(Taken::Aborted { from: before, to: m.position });
        }
    }
    f(taken(r))
}

fn taken(r: Recv<'_>) -> Taken<'_> {
    match r {
        Recv::Message(m) => Taken::Message { position: m.position, payload: m.payload },
        Recv::Gap(g) => Taken::Gap { from: g.expected, to: g.resumed_at },
    }
}

/// A ring subscriber (shm, or any ring memory): an observer is lossy, a consumer reliable.
impl<M: RingMemory> Tap for Subscriber<M> {
    fn take(&mut self, f: &mut dyn FnMut(Taken<'_>)) -> Result<bool, String> {
        self.reader_mut().set_manual_release(true);
        // The reader moves past dropped claims' slots without a word: a message further on
        // than where it stood means those positions held none (a lap is reported as a Gap).
        let before = self.reader().position();
        Ok(self.try_recv().map(|r| with_aborted(before, r, f)).is_some())
    }
    fn reliable(&self) -> bool {
        self.reader().consumer_index().is_some()
    }
    fn release_to(&mut self, position: u64) {
        self.reader_mut().release_to(position);
    }
    fn position(&self) -> u64 {
        self.reader().position()
    }
    fn max_payload(&self) -> usize {
        self.config().max_payload()
    }
    fn window(&self) -> u64 {
        self.config().slot_count as u64
    }
    fn aborted(&self) -> u64 {
        self.reader().aborted_skipped()
    }
    fn source_id(&self) -> Option<u64> {
        Some(self.reader().created_unix_ns())
    }
}

#[cfg(not(loom))]
impl Tap for crate::shm::ShmSubscriber {
    fn take(&mut self, f: &mut dyn FnMut(Taken<'_>)) -> Result<bool, String> {
        (**self).take(f)
    }
    fn reliable(&self) -> bool {
        (**self).reliable()
    }
    fn release_to(&mut self, position: u64) {
        (**self).release_to(position)
    }
    fn position(&self) -> u64 {
        (**self).position()
    }
    fn max_payload(&self) -> usize {
        Tap::max_payload(&**self)
    }
    fn window(&self) -> u64 {
        Tap::window(&**self)
    }
    fn aborted(&self) -> u64 {
        Tap::aborted(&**self)
    }
    fn source_id(&self) -> Option<u64> {
        Tap::source_id(&**self)
    }
}

#[cfg(feature = "rdma")]
impl Tap for crate::rdma::RdmaSubscriber {
    fn take(&mut self, f: &mut dyn FnMut(Taken<'_>)) -> Result<bool, String> {
        self.set_manual_release(true);
        let before = crate::rdma::RdmaSubscriber::position(self);
        match self.try_recv() {
            Ok(Some(r)) => {
                with_aborted(before, r, f);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }
    fn reliable(&self) -> bool {
        self.config().mode == crate::Mode::Reliable
    }
    fn release_to(&mut self, position: u64) {
        crate::rdma::RdmaSubscriber::release_to(self, position)
    }
    fn position(&self) -> u64 {
        crate::rdma::RdmaSubscriber::position(self)
    }
    fn max_payload(&self) -> usize {
        self.config().max_payload()
    }
    fn window(&self) -> u64 {
        self.config().slot_count as u64
    }
    fn aborted(&self) -> u64 {
        self.aborted_skipped()
    }
}

#[cfg(feature = "rdma")]
impl Tap for crate::mcast::McastSubscriber {
    fn take(&mut self, f: &mut dyn FnMut(Taken<'_>)) -> Result<bool, String> {
        match self.try_recv() {
            Ok(Some(r)) => {
                f(taken(r));
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) if e.is_retryable() => Ok(true), // a foreign datagram was dropped; go on
            Err(e) => Err(e.to_string()),
        }
    }
    fn reliable(&self) -> bool {
        false
    }
    fn release_to(&mut self, _position: u64) {}
    fn position(&self) -> u64 {
        self.next_position()
    }
    fn max_payload(&self) -> usize {
        self.max_payload()
    }
    /// A group member starts at the first datagram it sees and recovers only after it.
    fn window(&self) -> u64 {
        0
    }
}
