//! The per-slot seqlock: how a publisher writes one slot and how a reader copies one out.
//!
//! Writer: `lead := pos+1` (Relaxed), Release fence, payload words, `len`, `trail := pos+1` (Release).
//! Reader: `trail` (Acquire) == pos+1, copy `len` and payload, Acquire fence, `lead` still pos+1.
//! If any payload word the reader copied came from a later overwrite, the fences make the
//! overwrite's `lead` store visible to the re-check, so a torn copy is always detected. RDMA gets
//! the same guarantee from in-order placement of one WRITE (lead first, trail last).
use super::layout::{Geometry, FLAG_ABORTED, SLOT_LEAD, SLOT_LEN, SLOT_PAYLOAD};
use super::memory::Words;
use super::sync::{fence, Ordering};

/// What a reader found in the slot of the position it expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// Not yet published.
    Empty,
    /// Published and copied intact: payload `len` bytes; `aborted` slots carry no message.
    Ready { len: usize, aborted: bool },
    /// Overwritten by a later lap; `seen` is the newest position+1 observed in the slot.
    Lapped { seen: u64 },
}

/// Marks the slot of `pos` as being written. Must precede any payload store.
#[inline(always)]
pub(crate) fn begin(w: &Words, slot: usize, pos: u64) {
    w.word(slot + SLOT_LEAD).store(pos + 1, Ordering::Relaxed);
    fence(Ordering::Release);
}

/// Stores `payload` as whole words (the tail word zero-padded). Relaxed atomic stores compile to
/// plain moves and keep a racing lapped reader free of undefined behaviour.
#[inline(always)]
pub(crate) fn write_payload(w: &Words, slot: usize, payload: &[u8]) {
    let mut chunks = payload.chunks_exact(8);
    let mut i = slot + SLOT_PAYLOAD;
    for c in &mut chunks {
        let v = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        w.word(i).store(v, Ordering::Relaxed);
        i += 1;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        w.word(i).store(u64::from_le_bytes(last), Ordering::Relaxed);
    }
}

/// Publishes the slot of `pos` holding `len` payload bytes.
#[inline(always)]
pub(crate) fn commit(w: &Words, g: &Geometry, slot: usize, pos: u64, len: usize, flags: u64) {
    w.word(slot + SLOT_LEN).store(len as u64 | flags, Ordering::Relaxed);
    w.word(g.trail(slot)).store(pos + 1, Ordering::Release);
}

/// Reads the trail word only: is `pos` published (and not lapped)?
#[inline(always)]
pub(crate) fn peek(w: &Words, g: &Geometry, slot: usize, pos: u64) -> SlotState {
    let t = w.word(g.trail(slot)).load(Ordering::Acquire);
    if t == pos + 1 {
        SlotState::Ready { len: 0, aborted: false }
    } else if t > pos + 1 {
        SlotState::Lapped { seen: t }
    } else {
        SlotState::Empty
    }
}

/// Copies the slot of `pos` into `out` (as words) and validates it with the seqlock re-check.
#[inline(always)]
pub(crate) fn read_copy(w: &Words, g: &Geometry, slot: usize, pos: u64, out: &mut [u64]) -> SlotState {
    match peek(w, g, slot, pos) {
        SlotState::Ready { .. } => {}
        other => return other,
    }
    let lenw = w.word(slot + SLOT_LEN).load(Ordering::Relaxed);
    let len = ((lenw & 0xFFFF_FFFF) as usize).min(g.max_payload);
    let words = len.div_ceil(8).min(out.len());
    for (k, o) in out[..words].iter_mut().enumerate() {
        *o = w.word(slot + SLOT_PAYLOAD + k).load(Ordering::Relaxed);
    }
    fence(Ordering::Acquire);
    let lead = w.word(slot + SLOT_LEAD).load(Ordering::Relaxed);
    if lead != pos + 1 {
        return SlotState::Lapped { seen: lead };
    }
    SlotState::Ready { len, aborted: lenw & FLAG_ABORTED != 0 }
}

/// Reads length and flags of a slot that cannot be overwritten (reliable mode, already peeked).
#[inline(always)]
pub(crate) fn read_len(w: &Words, g: &Geometry, slot: usize) -> (usize, bool) {
    let lenw = w.word(slot + SLOT_LEN).load(Ordering::Relaxed);
    (((lenw & 0xFFFF_FFFF) as usize).min(g.max_payload), lenw & FLAG_ABORTED != 0)
}
