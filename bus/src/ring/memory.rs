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
///
/// Line-aligned, as a mapping is: the layout puts each small slot on whole cache lines of the
/// memory's own alignment, and on 8-byte-aligned heap memory a 128-byte slot straddled three lines
/// (the lab's 64 B ping-pong over the ring code on the heap took 705 ns against 594 on a mapping).
pub struct HeapMemory {
    #[cfg(not(loom))]
    lines: Box<[Line]>,
    /// Words asked for (the lines may hold up to 7 more, never handed out).
    #[cfg(not(loom))]
    len: usize,
    #[cfg(loom)]
    words: Box<[AtomicU64]>,
}

/// One cache line of words; only its alignment matters.
#[cfg(not(loom))]
#[repr(C, align(64))]
struct Line([AtomicU64; 8]);

impl HeapMemory {
    /// Zeroed, line-aligned memory of `bytes` bytes (rounded up to whole words), shareable between
    /// a writer and readers.
    pub fn new(bytes: usize) -> Arc<HeapMemory> {
        #[cfg(not(loom))]
        {
            let lines = (0..bytes.div_ceil(64)).map(|_| Line(std::array::from_fn(|_| AtomicU64::new(0)))).collect();
            Arc::new(HeapMemory { lines, len: bytes.div_ceil(8) })
        }
        #[cfg(loom)]
        {
            let words = (0..bytes.div_ceil(8)).map(|_| AtomicU64::new(0)).collect();
            Arc::new(HeapMemory { words })
        }
    }
}

// SAFETY: the boxed slice is owned by the Arc'd HeapMemory, never moves or shrinks while any Arc
// clone lives, and holds real AtomicU64s: outside loom, `8 * lines.len() >= len` of them (a `Line`
// is 8 with no padding: 64 bytes aligned to 64, so the lines' words are one contiguous array);
// under loom, `words.len()` of them.
unsafe impl RingMemory for Arc<HeapMemory> {
    #[cfg(not(loom))]
    fn base(&self) -> *const AtomicU64 {
        self.lines.as_ptr().cast()
    }
    #[cfg(not(loom))]
    fn len_words(&self) -> usize {
        self.len
    }
    #[cfg(loom)]
    fn base(&self) -> *const AtomicU64 {
        self.words.as_ptr()
    }
    #[cfg(loom)]
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Heap rings start on a cache line and hold the words asked for, zeroed: the
    /// layout's line-sized slots are lines of the memory only if its base is line-aligned (on
    /// 8-byte-aligned memory a 128-byte slot straddled three lines).
    #[test]
    fn heap_memory_is_line_aligned_zeroed_and_large_enough() {
        for bytes in [1usize, 8, 63, 64, 65, 4096 + 128 * 3, 4096 + 128 * 1024] {
            let m = HeapMemory::new(bytes);
            assert_eq!(m.base() as usize % 64, 0, "{bytes} B");
            assert_eq!(m.len_words(), bytes.div_ceil(8), "{bytes} B");
            let words = Words::new(&m);
            assert!((0..words.len()).all(|i| words.word(i).load(core::sync::atomic::Ordering::Relaxed) == 0));
        }
    }
}
