//! The memory a ring lives in, seen as an array of 64-bit atomic words.
//!
//! Owns: the contract every backing (heap, shm mapping, registered RDMA buffer) must keep.
//! Never: hands out a reference covering the whole ring. Words are touched one `&AtomicU64` at a
//! time and payload bytes only through raw pointers, so no shared reference ever overlaps bytes
//! a publisher writes.
use std::sync::Arc;

use super::sync::AtomicU64;

/// Memory holding a ring.
///
/// # Safety
/// `base()` must point to `len_words()` properly aligned `AtomicU64`s that stay valid (mapped,
/// not freed, not moved) for as long as `self` exists, and that other processes or threads may
/// only touch through atomic operations or the ring protocol.
pub unsafe trait RingMemory {
    /// The first word of the region.
    fn base(&self) -> *const AtomicU64;
    /// The region's length in 8-byte words.
    fn len_words(&self) -> usize;
}

/// A ring on the heap, shared by threads of one process (tests, in-process hand-off, loom models).
pub struct HeapMemory {
    words: Box<[AtomicU64]>,
}

impl HeapMemory {
    /// Zeroed memory of at least `bytes` bytes, shareable between a writer and readers.
    pub fn new(bytes: usize) -> Arc<HeapMemory> {
        let words = (0..bytes.div_ceil(8)).map(|_| AtomicU64::new(0)).collect();
        Arc::new(HeapMemory { words })
    }
}

// SAFETY: the boxed slice is owned by the Arc'd HeapMemory, never moves or shrinks while any Arc
// clone lives, and holds real AtomicU64s.
unsafe impl RingMemory for Arc<HeapMemory> {
    fn base(&self) -> *const AtomicU64 {
        self.words.as_ptr()
    }
    fn len_words(&self) -> usize {
        self.words.len()
    }
}

/// Ring memory as words. Every accessor checks its bounds against the mapping, so no value read
/// from a ring (a corrupt descriptor, a hostile peer's position) can reach outside it from safe
/// code; the hot path takes a whole slot as one checked slice and indexes inside it.
pub(crate) struct Words {
    base: *const AtomicU64,
    len: usize,
}

impl Words {
    pub fn new<M: RingMemory>(mem: &M) -> Words {
        Words { base: mem.base(), len: mem.len_words() }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The word at index `i`. Panics if `i` is outside the memory.
    #[inline(always)]
    pub fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.len, "ring word {i} outside a {}-word mapping", self.len);
        // SAFETY: `i < len` (checked above), and the RingMemory contract keeps `len` aligned
        // atomics alive while the owning writer/reader (which holds the memory handle) lives.
        unsafe { &*self.base.add(i) }
    }

    /// Words `[start, start + n)` as a slice. Panics if any of them is outside the memory.
    #[inline(always)]
    pub fn range(&self, start: usize, n: usize) -> &[AtomicU64] {
        assert!(start <= self.len && n <= self.len - start, "ring words [{start}, +{n}) outside {}", self.len);
        // SAFETY: the range lies inside the memory (checked above); shared references to atomics
        // stay sound while other threads or processes store to the same words atomically.
        unsafe { core::slice::from_raw_parts(self.base.add(start), n) }
    }
}

// SAFETY: Words is a pointer to atomics whose owner (kept beside it) is Send; all access is atomic
// or governed by the ring protocol.
unsafe impl Send for Words {}
