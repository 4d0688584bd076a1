//! The ring protocol over registered memory: a subscriber's ring (and a publisher's mirror of
//! it) is a verbs memory region that the NIC WRITEs and the ring reads. The impl lives here, with
//! the transport that needs it, so the verbs layer (`sys::verbs`) knows nothing of rings.
use std::sync::Arc;

use crate::ring::sync::AtomicU64;
use crate::ring::RingMemory;
use crate::sys::verbs::MemoryRegion;

// SAFETY: the registered memory is an anonymous mapping (page-aligned, so 8-aligned) that lives
// as long as the region, and the NIC and the ring touch it only through the ring protocol.
unsafe impl RingMemory for Arc<MemoryRegion> {
    fn base(&self) -> *const AtomicU64 {
        self.as_ptr() as *const AtomicU64
    }
    fn len_words(&self) -> usize {
        self.len() / 8
    }
}
