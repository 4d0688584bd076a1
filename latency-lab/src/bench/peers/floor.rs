//! The floor: a u64 bounced through one cache line per direction, the least any shared-memory
//! transport can cost for a round trip. It holds one message, so it runs ping-pong only.
use std::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::bench::transport::{InProcess, Rx, Tx};

#[repr(align(128))]
pub struct Line(AtomicU64);

pub struct Floor;

pub struct FloorTx(Arc<Line>);
pub struct FloorRx(Arc<Line>, u64);

impl Tx for FloorTx {
    #[inline]
    fn try_send(&mut self, stamp: u64) -> bool {
        self.0 .0.store(stamp, Ordering::Release);
        true
    }
}

impl Rx for FloorRx {
    #[inline]
    fn try_recv(&mut self) -> Option<u64> {
        let v = self.0 .0.load(Ordering::Acquire);
        (v != self.1).then(|| {
            self.1 = v;
            v
        })
    }
}

impl InProcess for Floor {
    type Tx = FloorTx;
    type Rx = FloorRx;
    fn name(&self) -> String {
        "floor (cache-line ping-pong)".into()
    }
    fn note(&self) -> String {
        "a u64 on one 128-byte-aligned line per direction, whatever the message size".into()
    }
    fn channel(&mut self, _size: usize, _: f64) -> Result<(FloorTx, FloorRx), Box<dyn Error>> {
        let line = Arc::new(Line(AtomicU64::new(0)));
        Ok((FloorTx(line.clone()), FloorRx(line, 0)))
    }
}

/// The floor for a message of `size` bytes: slots holding the payload (one `memcpy` of whole
/// words each way) and a sequence word stored last with Release; the reader spins on the word,
/// then copies the payload out. No framing, no flow control, no per-word atomics. With one slot per direction it is what moving `size` bytes between two cores
/// costs at least; with a ring of slots (the shape every queue has) it adds what walking fresh
/// cache lines costs.
pub struct PayloadFloor {
    pub slots: usize,
}

/// 128 bytes: slots are whole numbers of these, so each starts on its own pair of lines.
#[repr(C, align(128))]
pub struct Chunk([AtomicU64; 16]);

/// One direction: `slots` slots of `stride` chunks; the payload's `n` words, then the sequence.
pub struct Ring {
    chunks: Vec<Chunk>,
    stride: usize,
    n: usize,
}

impl Ring {
    #[inline(always)]
    fn word(&self, slot: usize, i: usize) -> &AtomicU64 {
        let c = &self.chunks[slot * self.stride + i / 16];
        &c.0[i % 16]
    }
    fn slots(&self) -> usize {
        self.chunks.len() / self.stride
    }
}

pub struct SlotTx(Arc<Ring>, u64, Vec<u64>);
pub struct SlotRx(Arc<Ring>, u64, Vec<u64>);

impl Ring {
    /// The first payload word of slot `k`: its `n` words are contiguous (a slot is `stride`
    /// adjacent chunks). Taken from the whole buffer, so the pointer may reach all of them; the
    /// words are atomics (interior mutability), so writing through it is allowed.
    #[inline(always)]
    fn payload(&self, k: usize) -> *mut u64 {
        debug_assert!((k + 1) * self.stride <= self.chunks.len());
        self.chunks.as_ptr().cast::<u64>().cast_mut().wrapping_add(k * self.stride * 16)
    }
}

impl Tx for SlotTx {
    /// The fastest way to move the bytes: one `memcpy` of whole words (vectorised), then the
    /// sequence word with Release. Nothing else: no framing, no per-word atomics.
    #[inline]
    fn try_send(&mut self, stamp: u64) -> bool {
        let SlotTx(ring, seq, buf) = self;
        let k = (*seq as usize) % ring.slots();
        buf[0] = stamp;
        // SAFETY: the slot's `n` payload words lie inside `chunks` (stride covers n + 1 words).
        // Ping-pong keeps one message in flight per direction: this slot is rewritten only after
        // the reader's answer, which it sends after copying the slot out (ordered by the
        // Release/Acquire pairs on the sequence words), so no read of these words races this copy.
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), ring.payload(k), ring.n) };
        *seq += 1;
        ring.word(k, ring.n).store(*seq, Ordering::Release);
        true
    }
}

impl Rx for SlotRx {
    #[inline]
    fn try_recv(&mut self) -> Option<u64> {
        let SlotRx(ring, seq, buf) = self;
        let k = (*seq as usize) % ring.slots();
        if ring.word(k, ring.n).load(Ordering::Acquire) != *seq + 1 {
            return None;
        }
        *seq += 1;
        // SAFETY: as in `try_send`: the Acquire above saw the writer's Release after its copy,
        // and the writer does not touch this slot again before our answer.
        unsafe { std::ptr::copy_nonoverlapping(ring.payload(k), buf.as_mut_ptr(), ring.n) };
        Some(buf[0])
    }
}

impl InProcess for PayloadFloor {
    type Tx = SlotTx;
    type Rx = SlotRx;
    fn name(&self) -> String {
        match self.slots {
            1 => "floor, same payload (one slot)".into(),
            n => format!("floor, same payload ({n}-slot ring)"),
        }
    }
    fn note(&self) -> String {
        format!("the message's bytes (one memcpy each way) and a sequence word stored last; {} slot(s) per direction, 128-byte steps, no flow control (ping-pong only)", self.slots)
    }
    fn channel(&mut self, size: usize, _: f64) -> Result<(SlotTx, SlotRx), Box<dyn Error>> {
        let n = size.div_ceil(8).max(1);
        // Slots sized like the message plus its word, in 128-byte steps, as tickbus's are.
        let stride = (n + 1).div_ceil(16);
        let chunks = (0..self.slots * stride).map(|_| Chunk(std::array::from_fn(|_| AtomicU64::new(0)))).collect();
        let ring = Arc::new(Ring { chunks, stride, n });
        Ok((SlotTx(ring.clone(), 0, vec![1; n]), SlotRx(ring, 0, vec![0; n])))
    }
}
