//! [`Publish`] and [`Subscribe`] over ring memory: a [`Publisher`] / [`Subscriber`] on any
//! `RingMemory` (heap for tests, registered memory), and the shm handles that wrap them.
use tickbus_codecs::Message;

use super::{Publish, Reliability, Retry, StreamClaim, Subscribe};
use crate::pubsub::{Publisher, Subscriber};
use crate::ring::{Claim, ClaimError, Mode, Recv, RecvInto, RingMemory};
use crate::shm::{ShmMemory, ShmPublisher, ShmSubscriber};

impl Retry for ClaimError {
    fn retry_helps(&self) -> bool {
        matches!(self, ClaimError::Full { .. })
    }
}

/// A ring slot claimed for writing in place: written with atomic word stores (safe beside
/// lapped observers), published by `commit`, aborted if dropped.
#[must_use = "a claim is published only by commit; dropped, its slot is aborted"]
pub struct ShmClaim<'a, M: RingMemory>(Claim<'a, M>, usize);

impl<M: RingMemory> std::fmt::Debug for ShmClaim<'_, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmClaim").field("position", &self.0.position()).field("len", &self.1).finish()
    }
}

impl<M: RingMemory> StreamClaim for ShmClaim<'_, M> {
    type Error = ClaimError;
    fn position(&self) -> u64 {
        self.0.position()
    }
    fn len(&self) -> usize {
        self.1
    }
    fn write(&mut self, payload: &[u8]) {
        self.0.write(payload)
    }
    #[inline]
    fn store_word(&mut self, k: usize, value: u64) {
        self.0.store_word(k, value)
    }
    #[inline]
    fn commit(self) -> Result<u64, ClaimError> {
        Ok(self.0.commit())
    }
}

fn reliability(mode: Mode) -> Reliability {
    match mode {
        Mode::Reliable => Reliability::Reliable,
        Mode::Lossy => Reliability::Lossy,
    }
}

impl<M: RingMemory> Publish for Publisher<M> {
    type Error = ClaimError;
    type Claim<'a>
        = ShmClaim<'a, M>
    where
        Self: 'a;

    #[inline]
    fn publish(&mut self, payload: &[u8]) -> Result<u64, ClaimError> {
        Publisher::publish(self, payload)
    }
    #[inline]
    fn send<T: Message>(&mut self, msg: &mut T) -> Result<u64, ClaimError> {
        Publisher::send(self, msg)
    }
    #[inline]
    fn try_claim(&mut self, len: usize) -> Result<ShmClaim<'_, M>, ClaimError> {
        self.writer_mut().try_claim(len).map(|c| ShmClaim(c, len))
    }
    #[inline]
    fn position(&self) -> u64 {
        Publisher::position(self)
    }
    fn stream_id(&self) -> u32 {
        self.config().stream_id
    }
    fn max_payload(&self) -> usize {
        self.config().max_payload()
    }
    fn reliability(&self) -> Reliability {
        reliability(self.config().mode)
    }
    fn ticks_per_ns(&self) -> f64 {
        self.config().ticks_per_ns
    }
}

impl<M: RingMemory> Subscribe for Subscriber<M> {
    type Error = core::convert::Infallible;

    #[inline]
    fn try_recv(&mut self) -> Result<Option<Recv<'_>>, Self::Error> {
        Ok(Subscriber::try_recv(self))
    }
    #[inline]
    fn try_recv_into(&mut self, out: &mut [u8]) -> Result<Option<RecvInto>, Self::Error> {
        Ok(Subscriber::try_recv_into(self, out))
    }
    #[inline]
    fn position(&self) -> u64 {
        Subscriber::position(self)
    }
    fn missed(&self) -> u64 {
        self.reader().missed()
    }
    fn max_payload(&self) -> usize {
        self.config().max_payload()
    }
    /// An observer is lossy even on a reliable ring (the publisher never waits for it).
    fn reliability(&self) -> Reliability {
        match self.reader().consumer_index() {
            Some(_) => Reliability::Reliable,
            None => Reliability::Lossy,
        }
    }
    fn ticks_per_ns(&self) -> f64 {
        self.config().ticks_per_ns
    }
    fn set_manual_release(&mut self, manual: bool) -> bool {
        self.reader_mut().set_manual_release(manual);
        self.reader().consumer_index().is_some()
    }
    #[inline]
    fn release_to(&mut self, position: u64) {
        self.reader_mut().release_to(position)
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

/// The shm handles forward to the ring publisher and subscriber they wrap.
impl Publish for ShmPublisher {
    type Error = ClaimError;
    type Claim<'a> = ShmClaim<'a, ShmMemory>;

    #[inline]
    fn publish(&mut self, payload: &[u8]) -> Result<u64, ClaimError> {
        Publisher::publish(self, payload)
    }
    #[inline]
    fn send<T: Message>(&mut self, msg: &mut T) -> Result<u64, ClaimError> {
        Publisher::send(self, msg)
    }
    #[inline]
    fn try_claim(&mut self, len: usize) -> Result<ShmClaim<'_, ShmMemory>, ClaimError> {
        Publish::try_claim(&mut **self, len)
    }
    #[inline]
    fn position(&self) -> u64 {
        Publisher::position(self)
    }
    fn stream_id(&self) -> u32 {
        Publish::stream_id(&**self)
    }
    fn max_payload(&self) -> usize {
        Publish::max_payload(&**self)
    }
    fn reliability(&self) -> Reliability {
        Publish::reliability(&**self)
    }
    fn ticks_per_ns(&self) -> f64 {
        Publish::ticks_per_ns(&**self)
    }
}

impl Subscribe for ShmSubscriber {
    type Error = core::convert::Infallible;

    #[inline]
    fn try_recv(&mut self) -> Result<Option<Recv<'_>>, Self::Error> {
        Ok(Subscriber::try_recv(self))
    }
    #[inline]
    fn try_recv_into(&mut self, out: &mut [u8]) -> Result<Option<RecvInto>, Self::Error> {
        Ok(Subscriber::try_recv_into(self, out))
    }
    #[inline]
    fn position(&self) -> u64 {
        Subscriber::position(self)
    }
    fn missed(&self) -> u64 {
        Subscribe::missed(&**self)
    }
    fn max_payload(&self) -> usize {
        Subscribe::max_payload(&**self)
    }
    fn reliability(&self) -> Reliability {
        Subscribe::reliability(&**self)
    }
    fn ticks_per_ns(&self) -> f64 {
        Subscribe::ticks_per_ns(&**self)
    }
    fn set_manual_release(&mut self, manual: bool) -> bool {
        Subscribe::set_manual_release(&mut **self, manual)
    }
    #[inline]
    fn release_to(&mut self, position: u64) {
        Subscribe::release_to(&mut **self, position)
    }
    fn window(&self) -> u64 {
        Subscribe::window(&**self)
    }
    fn aborted(&self) -> u64 {
        Subscribe::aborted(&**self)
    }
    fn source_id(&self) -> Option<u64> {
        Subscribe::source_id(&**self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::{HeapMemory, RingConfig, RingReader, RingWriter, StartAt};
    use std::sync::Arc;

    /// A loop written once against the traits: what every transport's users now write.
    fn echo<P: Publish, S: Subscribe>(p: &mut P, s: &mut S, n: u64) -> Vec<u64> {
        let mut got = Vec::new();
        for i in 0..n {
            let mut c = p.try_claim(16).expect("room");
            c.store_word(0, i);
            c.store_word(1, !i);
            c.commit().expect("committed");
            let mut out = [0u8; 16];
            if let Ok(Some(RecvInto::Message { .. })) = s.try_recv_into(&mut out) {
                got.push(u64::from_le_bytes(out[..8].try_into().unwrap()));
            }
        }
        got
    }

    fn pair(mode: Mode) -> (Publisher<Arc<HeapMemory>>, Subscriber<Arc<HeapMemory>>) {
        let cfg = RingConfig::for_payload(mode, 5, 64, 4);
        let mem = HeapMemory::new(cfg.ring_bytes());
        let w = RingWriter::create(mem.clone(), &cfg, 1, 0).unwrap();
        let r = match mode {
            Mode::Lossy => RingReader::observer(mem, StartAt::Oldest).unwrap(),
            Mode::Reliable => RingReader::consumer_by_token(mem, 2).unwrap(),
        };
        (Publisher::new(w), Subscriber::new(r))
    }

    #[test]
    fn claims_publish_in_place_and_a_generic_loop_reads_them_back() {
        for mode in [Mode::Reliable, Mode::Lossy] {
            let (mut p, mut s) = pair(mode);
            assert_eq!(echo(&mut p, &mut s, 10), (0..10).collect::<Vec<_>>(), "{mode:?}");
            assert_eq!(Publish::reliability(&p), reliability(mode));
            assert!(Publish::max_payload(&p) >= 64 && Publish::stream_id(&p) == 5);
        }
    }

    #[test]
    fn a_full_reliable_ring_is_an_error_a_retry_helps_and_a_too_large_one_is_not() {
        let (mut p, s) = pair(Mode::Reliable);
        let too_large = vec![1; Publish::max_payload(&p) + 1];
        let big = Publish::publish(&mut p, &too_large).unwrap_err();
        assert!(!big.retry_helps(), "{big}");
        for _ in 0..4 {
            Publish::publish(&mut p, &[1; 8]).unwrap();
        }
        let full = Publish::publish(&mut p, &[1; 8]).unwrap_err();
        assert!(full.retry_helps(), "{full}");
        assert_eq!(Subscribe::reliability(&s), Reliability::Reliable);
        // A claim dropped uncommitted publishes nothing: the reader skips it.
        let (mut p, mut s) = pair(Mode::Reliable);
        drop(Publish::try_claim(&mut p, 8).unwrap());
        Publish::publish(&mut p, &[7; 8]).unwrap();
        assert!(
            matches!(Subscribe::try_recv(&mut s), Ok(Some(Recv::Message(d))) if d.position == 1 && d.payload == [7; 8])
        );
    }
}
