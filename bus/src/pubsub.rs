//! Transport-independent publisher and subscriber: a ring writer or reader plus TSC stamping and
//! typed access through `tickbus-codecs`.
//!
//! Owns: what a message header says about its stream (stream id, sequence = ring position,
//! publish TSC). Never: allocates, blocks or makes a syscall on send or receive.
use tickbus_codecs::{AnyMessage, DecodeError, Message};
use zerocopy::IntoBytes;

use crate::ring::{
    Claim, ClaimError, Delivery, Recv, RecvInto, RingConfig, RingMemory, RingReader, RingWriter, SendError,
};
use crate::time::{Tsc, TscScale};

/// Publishes on one ring.
pub struct Publisher<M: RingMemory> {
    writer: RingWriter<M>,
    tsc: Tsc,
}

impl<M: RingMemory> Publisher<M> {
    /// A publisher writing through `writer`, stamping messages with this host's TSC.
    pub fn new(writer: RingWriter<M>) -> Self {
        Publisher { writer, tsc: Tsc::new() }
    }

    /// The ring's layout.
    pub fn config(&self) -> &RingConfig {
        self.writer.config()
    }

    /// The sequence number the next message will carry.
    pub fn position(&self) -> u64 {
        self.writer.position()
    }

    /// The ring writer underneath.
    pub fn writer(&self) -> &RingWriter<M> {
        &self.writer
    }

    /// The ring writer underneath (for claim-based zero-copy publishing of raw bytes).
    pub fn writer_mut(&mut self) -> &mut RingWriter<M> {
        &mut self.writer
    }

    /// Publishes raw bytes; returns the position.
    #[inline]
    pub fn publish(&mut self, payload: &[u8]) -> Result<u64, ClaimError> {
        self.writer.publish(payload)
    }

    /// Stamps `msg`'s header (stream, sequence, TSC) and publishes a copy of it.
    #[inline]
    pub fn send<T: Message>(&mut self, msg: &mut T) -> Result<u64, ClaimError> {
        let now = self.tsc.now();
        msg.header_mut().stamp(self.writer.config().stream_id, self.writer.position(), now);
        let r = self.writer.publish(msg.as_bytes());
        if r.is_ok() {
            self.writer.counters().set(crate::counters::Counter::LastActivityTsc, now);
        }
        r
    }

    /// Like [`Publisher::send`] but takes the message by value and hands it back on failure, so
    /// a full reliable ring loses nothing.
    #[inline]
    pub fn offer<T: Message>(&mut self, mut msg: T) -> Result<u64, SendError<T>> {
        match self.send(&mut msg) {
            Ok(p) => Ok(p),
            Err(ClaimError::Full { .. }) => Err(SendError::Full(msg)),
            Err(ClaimError::TooLarge { .. }) => Err(SendError::TooLarge(msg)),
        }
    }

    /// Claims a slot for a `T` and lets it be written in place (zero-copy). The header is
    /// initialised; every body field must be set (the slot holds stale bytes).
    #[inline]
    pub fn claim<T: Message>(&mut self) -> Result<MsgClaim<'_, M, T>, ClaimError> {
        let stream_id = self.writer.config().stream_id;
        let mut claim = self.writer.try_claim(T::LEN)?;
        let mut hdr = tickbus_codecs::Header::new(T::TYPE, T::VERSION, T::LEN as u32);
        hdr.stamp(stream_id, claim.position(), 0);
        for (k, w) in hdr.as_bytes().chunks_exact(8).enumerate() {
            claim.store_word(k, u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
        Ok(MsgClaim { claim, tsc: &self.tsc, _t: core::marker::PhantomData })
    }
}

/// Word index of the header's `publish_tsc` in a message.
const TSC_WORD: usize = core::mem::offset_of!(tickbus_codecs::Header, publish_tsc) / 8;

/// A claimed slot typed as `T`; [`MsgClaim::commit`] stamps the TSC and publishes.
#[must_use = "a claim is published only by commit; dropped, its slot is aborted"]
pub struct MsgClaim<'a, M: RingMemory, T: Message> {
    claim: Claim<'a, M>,
    tsc: &'a Tsc,
    _t: core::marker::PhantomData<T>,
}

impl<M: RingMemory, T: Message> MsgClaim<'_, M, T> {
    /// The message in the slot, to fill in place.
    ///
    /// # Safety
    /// As [`Claim::bytes_mut`]: no lapped observer may be copying this slot meanwhile (a
    /// reliable ring read by consumers only), or you accept that seqlock race. Otherwise build
    /// the message and [`MsgClaim::write`] it.
    #[inline]
    pub unsafe fn msg_mut(&mut self) -> &mut T {
        // SAFETY: forwarded contract.
        let bytes = unsafe { self.claim.bytes_mut() };
        T::mut_from_bytes(bytes).expect("slot payloads are 8-aligned and exactly T::LEN bytes")
    }

    /// Writes `msg`'s body into the slot (atomic word stores), keeping the header the claim
    /// stamped (type, version, length, stream, sequence).
    #[inline]
    pub fn write(&mut self, msg: &T) {
        let keep = (core::mem::size_of::<tickbus_codecs::Header>()) / 8;
        for (k, w) in msg.as_bytes().chunks_exact(8).enumerate().skip(keep) {
            self.claim.store_word(k, u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
    }

    /// Stamps the publish TSC and publishes; returns the position.
    #[inline]
    pub fn commit(mut self) -> u64 {
        let now = self.tsc.now();
        self.claim.store_word(TSC_WORD, now);
        self.claim.counters().set(crate::counters::Counter::LastActivityTsc, now);
        self.claim.commit()
    }
}

/// Subscribes to one ring.
pub struct Subscriber<M: RingMemory> {
    reader: RingReader<M>,
}

impl<M: RingMemory> Subscriber<M> {
    /// A subscriber reading through `reader` (an observer or a reliable consumer).
    pub fn new(reader: RingReader<M>) -> Self {
        Subscriber { reader }
    }

    /// The ring's layout and stream, as its creator wrote them.
    pub fn config(&self) -> &RingConfig {
        self.reader.config()
    }

    /// The conversion every process of this ring uses for TSC deltas.
    pub fn tsc_scale(&self) -> TscScale {
        TscScale { ticks_per_ns: self.reader.config().ticks_per_ns }
    }

    /// The position of the next message this subscriber will read (one past the last one it
    /// was given, or where a gap resumed).
    pub fn position(&self) -> u64 {
        self.reader.position()
    }

    /// The ring reader underneath (status, consumer line, counters).
    pub fn reader(&self) -> &RingReader<M> {
        &self.reader
    }

    /// The ring reader underneath (manual credit release, for a recorder).
    pub fn reader_mut(&mut self) -> &mut RingReader<M> {
        &mut self.reader
    }

    /// The next message or gap in stream order, or `None` when nothing new is published.
    /// Never blocks, allocates or makes a syscall: call it in the busy-poll loop.
    ///
    /// A [`Recv::Message`] borrows the slot's bytes (in place for a reliable consumer, which
    /// holds the publisher back until it returns; copied once for an observer, which a lossy
    /// publisher may lap). A [`Recv::Gap`] says which positions were lost to a lap, and reading
    /// goes on after them; it never repeats or reorders a message.
    #[inline]
    #[must_use = "a message taken and not looked at is lost to this reader"]
    pub fn try_recv(&mut self) -> Option<Recv<'_>> {
        self.reader.try_recv()
    }

    /// The next message if it is exactly `out.len()` bytes, copied into `out` (a fixed-layout
    /// message's bytes, say): same order, gaps and guarantees as [`Subscriber::try_recv`]. A
    /// message of another length is reported and left unconsumed for `try_recv` (which must
    /// take it before the stream goes on). `out` holds a message only when
    /// [`RecvInto::Message`] is returned: receive into a scratch buffer. For a reliable consumer
    /// this is the faster receive at small sizes: it copies before it reads the length (see
    /// [`RingReader::try_recv_into`]).
    #[inline]
    #[must_use = "a message of another length stays in the ring until try_recv takes it"]
    pub fn try_recv_into(&mut self, out: &mut [u8]) -> Option<RecvInto> {
        self.reader.try_recv_into(out)
    }

    /// Hands up to `limit` messages or gaps to `f`, in order, and returns how many: a batch
    /// without a call per message, for a duty cycle that bounds its work per pass. Same
    /// guarantees as [`Subscriber::try_recv`].
    #[inline]
    pub fn poll(&mut self, limit: usize, f: impl FnMut(Recv<'_>)) -> usize {
        self.reader.poll(limit, f)
    }
}

impl<'a> Delivery<'a> {
    /// The payload as a `T` (zero-copy; delivered payloads are 8-byte aligned).
    pub fn decode<T: Message>(&self) -> Result<&'a T, DecodeError> {
        T::parse(self.payload)
    }

    /// The payload as whichever message type its header names.
    pub fn decode_any(&self) -> Result<AnyMessage<'a>, DecodeError> {
        tickbus_codecs::decode(self.payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::Counter;
    use crate::ring::{HeapMemory, Mode, StartAt};
    use tickbus_codecs::md::Quote;
    use tickbus_codecs::orders::NewOrder;

    fn pair(mode: Mode) -> (Publisher<std::sync::Arc<HeapMemory>>, Subscriber<std::sync::Arc<HeapMemory>>) {
        let cfg = RingConfig::for_payload(mode, 5, 128, 2);
        let mem = HeapMemory::new(cfg.ring_bytes());
        let mut w = RingWriter::create(mem.clone(), &cfg, 1, 0).unwrap();
        w.set_counters(crate::counters::Counters::private());
        let r = match mode {
            Mode::Lossy => RingReader::observer(mem, StartAt::Latest).unwrap(),
            Mode::Reliable => RingReader::consumer_by_token(mem, 2).unwrap(),
        };
        (Publisher::new(w), Subscriber::new(r))
    }

    #[test]
    fn send_stamps_the_header_and_decodes_typed() {
        let (mut p, mut s) = pair(Mode::Lossy);
        let mut q = Quote::new();
        q.bid_px = 42;
        p.send(&mut q).unwrap();
        let Some(Recv::Message(d)) = s.try_recv() else { panic!("nothing delivered") };
        let got = d.decode::<Quote>().unwrap();
        assert_eq!((got.bid_px, got.header.stream_id, got.header.sequence), (42, 5, 0));
        assert!(got.header.publish_tsc > 0);
        let tsc = got.header.publish_tsc;
        assert!(matches!(d.decode_any(), Ok(AnyMessage::Quote(_))));
        assert_eq!(p.writer().counters().get(Counter::LastActivityTsc), tsc, "send records its stamp");
        assert!(d.decode::<NewOrder>().is_err());
    }

    #[test]
    fn offer_hands_the_message_back_when_full() {
        let (mut p, mut s) = pair(Mode::Reliable);
        let mut o = NewOrder::new();
        o.client_order_id = 7;
        assert_eq!(p.offer(o), Ok(0));
        assert_eq!(p.offer(o), Ok(1));
        let back = p.offer(o).unwrap_err();
        assert!(matches!(back, SendError::Full(_)));
        assert_eq!(back.into_inner().client_order_id, 7);
        assert!(matches!(s.try_recv(), Some(Recv::Message(d)) if d.decode::<NewOrder>().unwrap().client_order_id == 7));
    }

    #[test]
    fn typed_claim_writes_in_place_with_sequence_and_tsc() {
        let (mut p, mut s) = pair(Mode::Reliable);
        let mut c = p.claim::<NewOrder>().unwrap();
        // SAFETY: a reliable ring read by one consumer, which reads a slot only once committed.
        unsafe { c.msg_mut() }.qty = 300;
        assert_eq!(c.commit(), 0);
        let Some(Recv::Message(d)) = s.try_recv() else { panic!("nothing delivered") };
        let o = d.decode::<NewOrder>().unwrap();
        assert_eq!((o.qty, o.header.sequence, o.header.stream_id), (300, 0, 5));
        assert!(o.header.publish_tsc > 0);
        assert_eq!(
            p.writer().counters().get(Counter::LastActivityTsc),
            o.header.publish_tsc,
            "commit records its stamp"
        );
    }

    #[test]
    fn typed_claim_write_keeps_the_stamped_header() {
        let (mut p, mut s) = pair(Mode::Lossy);
        let mut o = NewOrder::new();
        o.qty = 500;
        o.header.sequence = 999; // ignored: the claim stamped the real one
        let mut c = p.claim::<NewOrder>().unwrap();
        c.write(&o);
        assert_eq!(c.commit(), 0);
        let Some(Recv::Message(d)) = s.try_recv() else { panic!("nothing delivered") };
        let got = d.decode::<NewOrder>().unwrap();
        assert_eq!((got.qty, got.header.sequence, got.header.stream_id), (500, 0, 5));
    }
}
