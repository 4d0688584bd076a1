//! Rungs between the 1024-slot payload floor and tickbus: the floor's ring with tickbus's slot
//! layout and every store tickbus makes per message but its counters' (the "counters off" row
//! shows what those cost), so the report shows where tickbus's time over the floor goes instead of
//! guessing at it. Rows of kind `Rung`: not yardsticks, and never marked as suspect floors.
//!
//! Rungs run where they are tickbus's slot: messages of up to 104 bytes (32 and 64 B in the lab).
//!
//! Why: at 64 B tickbus sat 1-3 timer quanta (10-30 ns) above the floor in every variant tried,
//! and this VM exposes no hardware counters to say why. A rung isolates one difference at a time,
//! measured in the same interleaved rounds as the floor and tickbus:
//! - "tickbus slot, length known": the lead word stored first (Relaxed, then a Release fence),
//!   the payload one relaxed word store at a time from the slot's second word (at 64 B tickbus's
//!   payload is 8 bytes off a 16-byte boundary, so it stores word by word too), the length word
//!   and the trail (Release) at the slot's end, then the producer position on its own line; the
//!   reader polls the trail, copies the payload out with the length the channel was made with, and
//!   stores its consumer position the first time it finds nothing new, as tickbus's reader does.
//! - "tickbus slot, length checked": the reader loads the slot's length word and checks it is
//!   the length it expects, then copies that many bytes: what a consumer of one fixed-layout
//!   message type does (the length is a branch, not the copy's size).
//! - "tickbus slot, length read": the reader copies as many bytes as the slot's length word
//!   says, as a consumer of variable-size messages must; the lab's tickbus, Aeron and disruptor
//!   receivers all copy this way. The floor, like the first rung, knows the length out of band.
//! - "tickbus slot, copy then check length": the reader copies the length it expects and
//!   only then checks the slot's length word, the order of tickbus's `try_recv_into` (which,
//!   unlike the rung, leaves a message of another length unconsumed).
//!
//! All are ping-pong only (one message in flight: no flow control, no lapping).
use std::error::Error;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

use crate::bench::transport::{InProcess, Rx, Tx};

/// Slots per direction, as tickbus's lab rings have.
const SLOTS: usize = crate::bench::peers::tickbus_shm::SLOTS;
/// Words tickbus adds to a slot: lead, length, trail.
const OVERHEAD_WORDS: usize = tickbus::ring::SLOT_OVERHEAD / 8;

/// One 64-byte line: tickbus's slots are whole lines, so a slot of `k` lines starts on a line.
#[repr(C, align(64))]
struct Line([AtomicU64; 8]);

/// How a rung's reader learns the payload's length (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    Known,
    Checked,
    Read,
    CheckedAfter,
}

/// A rung of the ladder (module doc).
pub struct SlotRung(pub Length);

impl Length {
    /// The rung's name (it fits the tables' 50-column name field) and what its reader does.
    fn describe(self) -> (&'static str, &'static str) {
        match self {
            Length::Known => ("length known", "copies the length the channel was made with"),
            Length::Checked => {
                ("length checked", "checks the slot's length word against the length it expects and copies that")
            }
            Length::Read => ("length read", "copies the length the slot's length word says"),
            Length::CheckedAfter => {
                ("copy then check length", "copies the length it expects, then checks the slot's length word")
            }
        }
    }
}

impl SlotRung {
    /// Whether a rung is tickbus's slot for `size`-byte messages: slots of up to 128 bytes keep
    /// their lead word inside and tickbus stores their payload word by word, as a rung does.
    /// Larger slots start their window a word early and take tickbus's 16-byte stores.
    pub fn fits(size: usize) -> bool {
        size + tickbus::ring::SLOT_OVERHEAD <= tickbus::ring::LEAD_INSIDE_MAX
    }
}

struct Ring {
    lines: Vec<Line>,
    /// Words per slot (a whole number of lines, as tickbus rounds them).
    slot_words: usize,
    /// Payload words.
    n: usize,
    producer: Line,
    consumer: Line,
    length: Length,
}

impl Ring {
    #[inline(always)]
    fn word(&self, slot: usize, i: usize) -> &AtomicU64 {
        let w = slot * self.slot_words + i;
        &self.lines[w / 8].0[w % 8]
    }

    /// The first payload word of `slot` (its second word), for the reader's `memcpy`. Taken from
    /// the whole buffer, so the pointer may reach the slot's every word.
    #[inline(always)]
    fn payload(&self, slot: usize) -> *const u64 {
        debug_assert!((slot + 1) * self.slot_words <= self.lines.len() * 8);
        self.lines.as_ptr().cast::<u64>().wrapping_add(slot * self.slot_words + 1)
    }
}

pub struct RungTx(Arc<Ring>, u64, Vec<u64>);
pub struct RungRx {
    ring: Arc<Ring>,
    seq: u64,
    released: u64,
    buf: Vec<u64>,
}

impl Tx for RungTx {
    #[inline]
    fn try_send(&mut self, stamp: u64) -> bool {
        let RungTx(r, seq, buf) = self;
        let k = (*seq as usize) % SLOTS;
        buf[0] = stamp;
        let next = *seq + 1;
        r.word(k, 0).store(next, Ordering::Relaxed);
        fence(Ordering::Release);
        for (i, w) in buf.iter().enumerate() {
            r.word(k, 1 + i).store(*w, Ordering::Relaxed);
        }
        r.word(k, r.slot_words - 2).store(8 * r.n as u64, Ordering::Relaxed);
        r.word(k, r.slot_words - 1).store(next, Ordering::Release);
        *seq = next;
        r.producer.0[0].store(next, Ordering::Release);
        true
    }
}

impl Rx for RungRx {
    #[inline]
    fn try_recv(&mut self) -> Option<u64> {
        let r = &*self.ring;
        let k = (self.seq as usize) % SLOTS;
        if r.word(k, r.slot_words - 1).load(Ordering::Acquire) != self.seq + 1 {
            if self.released != self.seq {
                r.consumer.0[0].store(self.seq, Ordering::Release);
                self.released = self.seq;
            }
            return None;
        }
        let len = || r.word(k, r.slot_words - 2).load(Ordering::Relaxed) as usize / 8;
        let n = match r.length {
            Length::Known => r.n,
            Length::Checked => {
                assert_eq!(len(), r.n, "the rung's writer stores the length it was made with");
                r.n
            }
            Length::Read => len().min(r.n),
            Length::CheckedAfter => r.n,
        };
        self.seq += 1;
        // SAFETY: `n <= r.n` payload words lie inside slot `k` (slot_words >= n + 3) and inside
        // `buf` (n words). Ping-pong keeps one message in flight per direction: the writer rewrites
        // this slot only after our answer, which we send after this copy (ordered by the
        // Release/Acquire pairs on the trails), so no store races these loads.
        unsafe { std::ptr::copy_nonoverlapping(r.payload(k), self.buf.as_mut_ptr(), n) };
        if r.length == Length::CheckedAfter {
            assert_eq!(len(), r.n, "the rung's writer stores the length it was made with");
        }
        Some(self.buf[0])
    }
}

impl InProcess for SlotRung {
    type Tx = RungTx;
    type Rx = RungRx;
    fn name(&self) -> String {
        format!("floor rung: tickbus slot, {}", self.0.describe().0)
    }
    fn note(&self) -> String {
        let reader = self.0.describe().1;
        format!("the 1024-slot payload floor with tickbus's slot layout and stores (lead, word-by-word payload, length, trail, producer position, consumer release); the reader {reader}")
    }
    fn channel(&mut self, size: usize, _: f64) -> Result<(RungTx, RungRx), Box<dyn Error>> {
        let n = size.div_ceil(8).max(1);
        let slot_words = (n + OVERHEAD_WORDS).div_ceil(8) * 8;
        let line = || Line(std::array::from_fn(|_| AtomicU64::new(0)));
        let lines = (0..SLOTS * slot_words / 8).map(|_| line()).collect();
        let ring = Arc::new(Ring { lines, slot_words, n, producer: line(), consumer: line(), length: self.0 });
        let rx = RungRx { ring: ring.clone(), seq: 0, released: 0, buf: vec![0; n] };
        Ok((RungTx(ring, 0, vec![1; n]), rx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rung carries every stamp in order through more than one lap of the ring, and a reader
    /// that finds nothing new says so and credits what it read.
    #[test]
    fn every_rung_delivers_every_stamp_in_order_across_laps() {
        for length in [Length::Known, Length::Checked, Length::Read, Length::CheckedAfter] {
            let (mut tx, mut rx) = SlotRung(length).channel(64, 1.0).unwrap();
            assert_eq!(rx.ring.slot_words, 16, "64 B + 3 words round to two lines, as tickbus's slot");
            assert!(SlotRung::fits(64) && SlotRung::fits(32) && !SlotRung::fits(288));
            assert_eq!(rx.try_recv(), None);
            for s in 0..(2 * SLOTS as u64 + 5) {
                assert!(tx.try_send(s + 100));
                assert_eq!(rx.try_recv(), Some(s + 100), "{length:?}, message {s}");
                assert_eq!(rx.try_recv(), None);
                assert_eq!(rx.ring.consumer.0[0].load(Ordering::Relaxed), s + 1, "credited when dry");
            }
        }
    }
}
