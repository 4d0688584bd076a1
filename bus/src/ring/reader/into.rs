//! Receiving a message of the size the caller expects straight into the caller's buffer: what a
//! consumer of one fixed-layout message type does.
//!
//! Why a second way to receive: the lab's floor rungs (`latency-lab/src/bench/peers/floor_rungs.rs`)
//! showed that a reader that looks at the slot's length word before it copies the payload (to
//! size its copy, or only to check it) pays one to three 10 ns timer quanta per hop at 32 and
//! 64 B over one that copies the size it expects and checks the length afterwards. That was
//! nearly all of tickbus's distance to its same-payload floor at those sizes. So a reliable
//! consumer here copies `out.len()` bytes first and only then reads the length and flags.
//!
//! For memory whose slots may land out of order (RDMA WRITE_WITH_IMM) the transport passes its
//! landed limit to [`RingReader::try_recv_into_before`], as to [`RingReader::try_recv_before`]:
//! a slot whose completion has not arrived is never copied.
//!
//! Copying before the length is known is sound for a reliable consumer: the trail says the slot
//! is published and the publisher cannot touch it again until this consumer's line passes it, so
//! every byte of the slot's payload region is quiet, including those past a shorter message. An
//! observer copies under the seqlock as [`RingReader::try_recv`] does (it may be lapped, so it
//! must read the length first to validate what it copied) and gains nothing in speed here.
use super::super::slot;
use super::{Gap, RingMemory, RingReader};

/// What [`RingReader::try_recv_into`] found. An [`RecvInto::OtherLength`] must be taken with
/// `try_recv`: until it is, every call reports it again and the stream goes no further.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a message of another length stays in the ring until try_recv takes it"]
pub enum RecvInto {
    /// The next message, exactly `out.len()` bytes, is now in `out`.
    Message {
        /// Its position (per-stream sequence number).
        position: u64,
    },
    /// The next message is `len` bytes, not `out.len()`. It was not consumed: take it with
    /// [`RingReader::try_recv`] (on a lossy ring it may be lapped first, and then comes as a
    /// gap).
    OtherLength {
        /// Its position.
        position: u64,
        /// Its length in bytes.
        len: usize,
    },
    /// Lossy ring: the publisher lapped the reader, as [`super::Recv::Gap`].
    Gap(Gap),
}

impl<M: RingMemory> RingReader<M> {
    /// The next message if it is exactly `out.len()` bytes, copied into `out`; the same order,
    /// gaps, credits and counters as [`RingReader::try_recv`], and `None` when nothing new is
    /// published. A message of another length is left where it is, unconsumed, and reported
    /// ([`RecvInto::OtherLength`]). A buffer larger than the ring's largest payload matches no
    /// message. Never blocks, allocates or makes a syscall.
    ///
    /// `out` holds a message only when [`RecvInto::Message`] is returned; after any other result
    /// its bytes are unspecified (a consumer copies a slot before it knows whether the slot holds
    /// a message of that length, or any message), so receive into a scratch buffer, not into
    /// state that must survive a miss.
    #[inline]
    #[must_use = "a message of another length stays in the ring until try_recv takes it"]
    pub fn try_recv_into(&mut self, out: &mut [u8]) -> Option<RecvInto> {
        self.try_recv_into_before(u64::MAX, out)
    }

    /// [`RingReader::try_recv_into`] reading no slot at or beyond position `limit`, as
    /// [`RingReader::try_recv_before`] (RDMA WRITE_WITH_IMM: only slots whose completion came).
    #[inline(always)]
    #[must_use = "a message of another length stays in the ring until try_recv takes it"]
    pub fn try_recv_into_before(&mut self, limit: u64, out: &mut [u8]) -> Option<RecvInto> {
        if self.consumer.is_none() {
            return self.observe_into(limit, out);
        }
        self.credit_if_due();
        let fits = out.len() <= self.geo.max_payload;
        loop {
            let position = self.position;
            let slot = match self.next_published(limit)? {
                Ok(slot) => slot,
                Err(gap) => return Some(RecvInto::Gap(gap)),
            };
            // Copy first, length after (module doc).
            if fits {
                out.copy_from_slice(self.in_place(slot, out.len()));
            }
            let (len, aborted) = slot::read_len(self.words.range(slot, self.geo.slot_words), &self.geo);
            if aborted {
                self.skip_aborted();
                continue;
            }
            if len != out.len() {
                return Some(RecvInto::OtherLength { position, len });
            }
            self.consume(len);
            return Some(RecvInto::Message { position });
        }
    }

    /// An observer's [`RingReader::try_recv_into`]: copied out and validated as `try_recv` does,
    /// handed over only at the expected length, left in place (not consumed) otherwise.
    fn observe_into(&mut self, limit: u64, out: &mut [u8]) -> Option<RecvInto> {
        match self.observe_next(limit)? {
            Err(gap) => Some(RecvInto::Gap(gap)),
            Ok((position, len)) if len != out.len() => Some(RecvInto::OtherLength { position, len }),
            Ok((position, len)) => {
                out.copy_from_slice(&zerocopy::IntoBytes::as_bytes(&self.buf[..])[..len]);
                self.consume(len);
                Some(RecvInto::Message { position })
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Arc;

    use super::RecvInto;
    use crate::ring::{HeapMemory, Mode, Recv, RingConfig, RingReader, RingWriter, StartAt};

    fn ring(mode: Mode, slots: usize) -> (Arc<HeapMemory>, RingWriter<Arc<HeapMemory>>) {
        let cfg = RingConfig::for_payload(mode, 7, 64, slots);
        let mem = HeapMemory::new(cfg.ring_bytes());
        (mem.clone(), RingWriter::create(mem, &cfg, 100, 0).expect("create"))
    }

    fn msg(pos: u64, len: usize) -> Vec<u8> {
        (0..len).map(|i| (pos as u8).wrapping_mul(31).wrapping_add(i as u8) | 1).collect()
    }

    fn readers(mem: &Arc<HeapMemory>) -> [RingReader<Arc<HeapMemory>>; 2] {
        let consumer = RingReader::consumer(mem.clone(), 9, |_| true).unwrap();
        [consumer, RingReader::observer(mem.clone(), StartAt::Oldest).unwrap()]
    }

    /// A consumer and an observer each get every message of the expected size, byte for byte and
    /// in order across laps; one of another size is reported and left in place (try_recv then
    /// takes it, and the next one comes into the buffer again); an aborted slot is skipped; a
    /// buffer larger than any payload matches nothing and consumes nothing.
    #[test]
    fn delivers_the_expected_size_and_leaves_any_other_in_place() {
        let (mem, mut w) = ring(Mode::Reliable, 4);
        let [mut consumer, mut observer] = readers(&mem);
        let mut out = [0u8; 32];
        for r in [&mut consumer, &mut observer] {
            assert_eq!(r.try_recv_into(&mut out), None);
        }
        for p in 0..10u64 {
            let len = if p == 5 { 24 } else { 32 };
            if p == 7 {
                drop(w.try_claim(32).unwrap()); // aborted: no message at position 7
            }
            let at = w.publish(&msg(p, len)).unwrap();
            for r in [&mut consumer, &mut observer] {
                if len != 32 {
                    assert_eq!(r.try_recv_into(&mut out), Some(RecvInto::OtherLength { position: at, len }));
                    assert_eq!(r.try_recv_into(&mut [0u8; 1024]), Some(RecvInto::OtherLength { position: at, len }));
                    match r.try_recv() {
                        Some(Recv::Message(d)) => assert_eq!((d.position, d.payload), (at, &msg(p, len)[..])),
                        other => panic!("message {p} was consumed or lost: {other:?}"),
                    }
                } else {
                    assert_eq!(r.try_recv_into(&mut out), Some(RecvInto::Message { position: at }), "message {p}");
                    assert_eq!(out[..], msg(p, 32)[..], "message {p}'s bytes");
                }
                assert_eq!(r.try_recv_into(&mut out), None);
            }
            // The consumer credited everything it took, so the 4-slot ring never fills.
            assert_eq!(w.slowest_consumer().1, w.position());
        }
        assert_eq!(consumer.position(), 11);
    }

    /// A dropped claim alone: the consumer skips it, finds nothing after it, and credits past it,
    /// so the publisher's next message goes into the freed slot and arrives.
    #[test]
    fn a_consumer_skips_an_aborted_slot_and_credits_past_it() {
        let (mem, mut w) = ring(Mode::Reliable, 2);
        let [mut r, _] = readers(&mem);
        drop(w.try_claim(16).unwrap());
        let mut out = [0u8; 16];
        assert_eq!(r.try_recv_into(&mut out), None);
        assert_eq!((r.position(), w.slowest_consumer().1), (1, 1));
        for p in 1..4 {
            assert_eq!(w.publish(&msg(p, 16)).unwrap(), p);
            assert_eq!(r.try_recv_into(&mut out), Some(RecvInto::Message { position: p }));
            assert_eq!(out[..], msg(p, 16)[..]);
        }
    }

    /// A publisher and a consumer on two threads over a 4-slot reliable ring: 20,000 messages,
    /// every 7th of another length and every 13th claim dropped. The consumer receives into a
    /// buffer and takes the other lengths with try_recv: every message arrives once, in order,
    /// byte for byte (the copy before the length read never sees a slot being rewritten).
    #[test]
    fn two_threads_with_mixed_lengths_and_dropped_claims_lose_and_tear_nothing() {
        const N: u64 = 20_000;
        let (mem, mut w) = ring(Mode::Reliable, 4);
        let [mut r, _] = readers(&mem);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let len = |k: u64| if k % 7 == 3 { 40 } else { 24 };
        let writer = std::thread::spawn(move || {
            for k in 0..N {
                if k % 13 == 5 {
                    while w.try_claim(24).map(drop).is_err() {
                        assert!(std::time::Instant::now() < deadline, "the consumer stopped crediting");
                    }
                }
                while w.publish(&msg(k, len(k))).is_err() {
                    assert!(std::time::Instant::now() < deadline, "the consumer stopped crediting");
                }
            }
        });
        let (mut k, mut last, mut out) = (0u64, None, [0u8; 24]);
        while k < N {
            assert!(std::time::Instant::now() < deadline, "stalled at message {k}");
            let position = match r.try_recv_into(&mut out) {
                None => continue,
                Some(RecvInto::Message { position }) => {
                    assert_eq!(out[..], msg(k, 24)[..], "message {k}");
                    position
                }
                Some(RecvInto::OtherLength { position, len: l }) => {
                    assert_eq!(l, len(k), "message {k}");
                    match r.try_recv() {
                        Some(Recv::Message(d)) => assert_eq!((d.position, d.payload), (position, &msg(k, l)[..])),
                        other => panic!("message {k}: {other:?}"),
                    }
                    position
                }
                Some(RecvInto::Gap(g)) => panic!("a reliable ring lapped its consumer: {g:?}"),
            };
            assert!(last.is_none_or(|p| position > p), "message {k} at {position} after {last:?}");
            (k, last) = (k + 1, Some(position));
        }
        writer.join().unwrap();
        assert_eq!(r.try_recv_into(&mut out), None);
    }

    /// An observer lapped by a lossy publisher gets the gap, as try_recv does, and reads on from
    /// where the publisher is.
    #[test]
    fn a_lapped_observer_gets_the_gap_and_reads_on() {
        let (mem, mut w) = ring(Mode::Lossy, 4);
        let mut r = RingReader::observer(mem, StartAt::Latest).unwrap();
        for p in 0..9 {
            w.publish(&msg(p, 16)).unwrap();
        }
        let mut out = [0u8; 16];
        match r.try_recv_into(&mut out) {
            Some(RecvInto::Gap(g)) => assert_eq!((g.expected, g.resumed_at), (0, 9)),
            other => panic!("expected a gap, got {other:?}"),
        }
        assert_eq!(r.try_recv_into(&mut out), None);
        w.publish(&msg(9, 16)).unwrap();
        assert_eq!(r.try_recv_into(&mut out), Some(RecvInto::Message { position: 9 }));
        assert_eq!(out[..], msg(9, 16)[..]);
    }
}
