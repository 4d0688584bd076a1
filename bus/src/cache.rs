//! Cache hints for busy-polling loops: asking for a line ahead of its use without waiting for
//! it (`tickbus_codecs::book::OrderBook::hot_lines` names a book's, and the trader asks for
//! them between ticks).

/// Asks for the cache line holding `p` to be brought toward this core (x86-64's
/// `PREFETCHT1`; nothing elsewhere), without waiting for it. A hint: Intel's cores fill their
/// L2 (not L1) with it, AMD's Zen may treat it as `PREFETCHT0` and fill L1 too; either way the
/// line is near when the next message needs it, and the loop does not stall on it.
#[inline(always)]
pub fn prefetch_l2(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT1 needs SSE, which every x86-64 CPU has; a prefetch never faults and
    // changes nothing the program can observe, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T1 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_prefetch_of_any_address_is_harmless() {
        let x = [7u8; 128];
        super::prefetch_l2(x.as_ptr());
        super::prefetch_l2(std::ptr::null());
        super::prefetch_l2(usize::MAX as *const u8);
        assert_eq!(x, [7u8; 128]);
    }
}
