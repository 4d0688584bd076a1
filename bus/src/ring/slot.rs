//! The per-slot seqlock: how a publisher writes one slot and how a reader copies one out.
//!
//! Writer: `lead := pos+1` (Relaxed), Release fence, payload words, `len`, `trail := pos+1` (Release).
//! Reader: `trail` (Acquire) == pos+1, `len`, copy payload, Acquire fence, `lead` still pos+1.
//! If any payload word the reader copied came from a later overwrite, the fences make the
//! overwrite's `lead` store visible to the re-check, so a torn copy is always detected. RDMA gets
//! the same guarantee from in-order placement of one WRITE (lead first, trail last).
//!
//! Every function takes the slot's window (lead word, payload, `len`, trail: see `layout`) as one
//! bounds-checked slice of words (`Words::range`), so the word indices below cannot leave it. Positions come from memory a hostile peer may have
//! written, so `pos + 1` wraps instead of overflowing.
#[cfg(not(loom))]
use super::layout::SLOT_OVERHEAD;
use super::layout::{Geometry, FLAG_ABORTED, LEAD_INSIDE_MAX, SLOT_LEAD, SLOT_PAYLOAD};
use super::sync::{fence, AtomicU64, Ordering};

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

/// The validity value of position `pos`.
#[inline(always)]
pub(crate) fn stamp(pos: u64) -> u64 {
    pos.wrapping_add(1)
}

#[inline(always)]
fn trail(s: &[AtomicU64]) -> &AtomicU64 {
    &s[s.len() - 1]
}

/// Beside the trail, in the line the reader already holds once it sees the trail published.
#[inline(always)]
fn len_word(s: &[AtomicU64]) -> &AtomicU64 {
    &s[s.len() - 2]
}

/// Marks the slot `s` as being written for `pos`. Must precede any payload store.
#[inline(always)]
pub(crate) fn begin(s: &[AtomicU64], pos: u64) {
    s[SLOT_LEAD].store(stamp(pos), Ordering::Relaxed);
    fence(Ordering::Release);
}

/// Stores `payload` as whole words (the tail word zero-padded), as relaxed atomic stores (16 bytes
/// at a time where that is still one, see `wide`), so a racing lapped reader is free of
/// undefined behaviour.
#[inline(always)]
pub(crate) fn write_payload(s: &[AtomicU64], payload: &[u8]) {
    let words = &s[SLOT_PAYLOAD..s.len() - 2];
    // A slot of at most 128 bytes has its payload 8 bytes past a line, so on line-aligned memory
    // (every mapping, and HeapMemory) it is never 16-byte aligned and the pair stores could not
    // run: go straight to the word loop.
    if s.len() * 8 <= LEAD_INSIDE_MAX {
        super::wide::store_words(words, payload);
    } else {
        super::wide::store(words, payload);
    }
}

/// Writes the whole slot `s` of `pos`: lead, `payload`, length and trail, in that order (what
/// [`begin`], [`write_payload`] and [`commit`] do), in one function every `publish` calls
/// (claims, filled by their caller between `reserve` and `finish`, stay inlined).
// inline(never): inlined into each caller, the same stores were laid out differently at each
// site, and where LLVM put the length and trail stores behind a jump away from the payload loop,
// the 64 B ping-pong's round trip was about 100-150 ns longer (the lab's stream API and C ABI
// rows against the direct handle's, and an in-process copy of the ring against hand-written
// stores on the same memory). One out-of-line copy keeps one layout for every publishing handle.
#[inline(never)]
pub(crate) fn write(s: &[AtomicU64], pos: u64, payload: &[u8]) {
    begin(s, pos);
    super::hook::report(super::hook::WriterStep::AfterLead);
    write_payload(s, payload);
    commit(s, pos, payload.len(), 0);
}

/// Publishes the slot `s` of `pos` holding `len` payload bytes.
#[inline(always)]
pub(crate) fn commit(s: &[AtomicU64], pos: u64, len: usize, flags: u64) {
    len_word(s).store(len as u64 | flags, Ordering::Relaxed);
    trail(s).store(stamp(pos), Ordering::Release);
}

/// Reads the trail word only: is `pos` published (and not lapped)?
#[inline(always)]
pub(crate) fn peek(s: &[AtomicU64], pos: u64) -> SlotState {
    let t = trail(s).load(Ordering::Acquire);
    if t == stamp(pos) {
        SlotState::Ready { len: 0, aborted: false }
    } else if t > stamp(pos) {
        SlotState::Lapped { seen: t }
    } else {
        SlotState::Empty
    }
}

/// The position+1 the slot's trail word says is published in it (0: never published).
#[inline(always)]
pub(crate) fn published(s: &[AtomicU64]) -> u64 {
    trail(s).load(Ordering::Acquire)
}

/// Copies the slot `s` of `pos` into `out` (as words) and validates it with the seqlock re-check.
#[inline(always)]
pub(crate) fn read_copy(s: &[AtomicU64], g: &Geometry, pos: u64, out: &mut [u64]) -> SlotState {
    match peek(s, pos) {
        SlotState::Ready { .. } => {}
        other => return other,
    }
    let lenw = len_word(s).load(Ordering::Relaxed);
    let len = ((lenw & 0xFFFF_FFFF) as usize).min(g.max_payload);
    let words = len.div_ceil(8).min(out.len());
    super::wide::load(&s[SLOT_PAYLOAD..s.len() - 2], &mut out[..words]);
    fence(Ordering::Acquire);
    let lead = s[SLOT_LEAD].load(Ordering::Relaxed);
    if lead != stamp(pos) {
        return SlotState::Lapped { seen: lead };
    }
    SlotState::Ready { len, aborted: lenw & FLAG_ABORTED != 0 }
}

/// Reads length and flags of a slot that cannot be overwritten (reliable mode, already peeked).
#[inline(always)]
pub(crate) fn read_len(s: &[AtomicU64], g: &Geometry) -> (usize, bool) {
    let lenw = len_word(s).load(Ordering::Relaxed);
    (((lenw & 0xFFFF_FFFF) as usize).min(g.max_payload), lenw & FLAG_ABORTED != 0)
}

/// The payload bytes of slot `s`, `len <= max_payload` of them, as a raw pointer (no reference
/// is made here; callers that read in place say why the bytes cannot change meanwhile).
#[cfg(not(loom))]
#[inline(always)]
pub(crate) fn payload_ptr(s: &[AtomicU64], len: usize) -> *const u8 {
    assert!(len <= s.len() * 8 - SLOT_OVERHEAD, "payload of {len} bytes outside its slot");
    s[SLOT_PAYLOAD..].as_ptr() as *const u8
}
