//! Buffers the NIC reads and writes: anonymous hugepage memory, registered with a PD.
use std::sync::Arc;

use memmap2::{MmapMut, MmapOptions};
use rdma_sys as ffi;

use super::device::Context;
use super::error::VerbsError;

/// Page-aligned anonymous memory, on 2 MiB hugepages when asked (MAP_HUGETLB).
pub struct HugeBuf {
    map: MmapMut,
    huge: bool,
}

impl HugeBuf {
    /// `bytes` rounded up to whole 2 MiB hugepages; an error (with the remedy) if none are free.
    pub fn hugepages(bytes: usize) -> Result<HugeBuf, VerbsError> {
        let len = bytes.div_ceil(2 << 20) * (2 << 20);
        let map = MmapOptions::new()
            .len(len)
            .huge(Some(21))
            .populate()
            .map_anon()
            .map_err(|source| VerbsError::NoHugepages { bytes: len, source })?;
        Ok(HugeBuf { map, huge: true })
    }

    /// Hugepages if any are free; otherwise 4 KiB pages, unless `require_huge` (then the
    /// hugepage error, which says how to reserve them).
    pub fn hugepages_or_pages(bytes: usize, require_huge: bool) -> Result<HugeBuf, VerbsError> {
        match HugeBuf::hugepages(bytes) {
            Ok(b) => Ok(b),
            Err(e) if require_huge => Err(e),
            Err(_) => HugeBuf::pages(bytes),
        }
    }

    /// `bytes` of ordinary 4 KiB pages (tests, machines without hugepages).
    pub fn pages(bytes: usize) -> Result<HugeBuf, VerbsError> {
        let map = MmapOptions::new()
            .len(bytes.max(1))
            .populate()
            .map_anon()
            .map_err(|source| VerbsError::Call { call: "mmap", source })?;
        Ok(HugeBuf { map, huge: false })
    }

    /// Whether the buffer is on 2 MiB pages.
    pub fn is_huge(&self) -> bool {
        self.huge
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// A registered buffer. Owns the buffer (or, for a sub-range, holds the region that does), so
/// the memory outlives the registration.
pub struct MemoryRegion {
    mr: *mut ffi::ibv_mr,
    buf: Backing,
    _ctx: Arc<Context>,
}

enum Backing {
    Owned(HugeBuf),
    Within { parent: Arc<MemoryRegion>, offset: usize, len: usize },
}

// SAFETY: an ibv_mr is immutable after registration; the buffer is owned here.
unsafe impl Send for MemoryRegion {}
// SAFETY: as above; shared access to the bytes goes through raw pointers and volatile/atomic ops.
unsafe impl Sync for MemoryRegion {}

impl MemoryRegion {
    /// Registers `buf` with `access` (ibv_access_flags bits). Grant the least the peer needs:
    /// a ring a remote publisher writes into needs LOCAL_WRITE | REMOTE_WRITE, nothing more.
    pub fn register(ctx: &Arc<Context>, buf: HugeBuf, access: u32) -> Result<MemoryRegion, VerbsError> {
        // SAFETY: the PD is live (ctx), and buf's mapping is valid for buf.len() bytes and owned by
        // the MemoryRegion we return, so it outlives the registration.
        let mr = unsafe { ffi::ibv_reg_mr(ctx.pd, buf.map.as_ptr() as *mut _, buf.len(), access as i32) };
        if mr.is_null() {
            return Err(VerbsError::last("ibv_reg_mr"));
        }
        Ok(MemoryRegion { mr, buf: Backing::Owned(buf), _ctx: ctx.clone() })
    }

    /// Registers bytes `[offset, offset + len)` of `parent` again with other `access`: e.g. a
    /// peer may write one page of a buffer (REMOTE_WRITE) and nothing else of it.
    pub fn register_within(
        ctx: &Arc<Context>,
        parent: &Arc<MemoryRegion>,
        offset: usize,
        len: usize,
        access: u32,
    ) -> Result<MemoryRegion, VerbsError> {
        assert!(offset + len <= parent.len(), "sub-range [{offset}, +{len}) outside a {}-byte region", parent.len());
        // SAFETY: the range lies inside parent's live mapping, which the new region keeps alive
        // through its Arc for as long as the registration exists.
        let mr = unsafe { ffi::ibv_reg_mr(ctx.pd, parent.as_ptr().add(offset) as *mut _, len, access as i32) };
        if mr.is_null() {
            return Err(VerbsError::last("ibv_reg_mr"));
        }
        Ok(MemoryRegion { mr, buf: Backing::Within { parent: parent.clone(), offset, len }, _ctx: ctx.clone() })
    }

    /// The region's start as the address a work request names.
    pub fn addr(&self) -> u64 {
        self.as_ptr() as u64
    }

    /// The region's first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        match &self.buf {
            Backing::Owned(b) => b.map.as_ptr() as *mut u8,
            // SAFETY: offset is inside the parent's mapping (checked at registration).
            Backing::Within { parent, offset, .. } => unsafe { parent.as_ptr().add(*offset) },
        }
    }

    /// The region's length in bytes.
    pub fn len(&self) -> usize {
        match &self.buf {
            Backing::Owned(b) => b.len(),
            Backing::Within { len, .. } => *len,
        }
    }

    /// Whether the region has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The local key work requests on this side name.
    pub fn lkey(&self) -> u32 {
        // SAFETY: mr is a live registration.
        unsafe { (*self.mr).lkey }
    }

    /// The remote key a peer names to READ or WRITE the region.
    pub fn rkey(&self) -> u32 {
        // SAFETY: mr is a live registration.
        unsafe { (*self.mr).rkey }
    }

    /// Whether the memory is on hugepages.
    pub fn is_huge(&self) -> bool {
        match &self.buf {
            Backing::Owned(b) => b.is_huge(),
            Backing::Within { parent, .. } => parent.is_huge(),
        }
    }

    /// A scatter/gather entry for `len` bytes at `offset`. Panics if it would leave the buffer.
    pub fn sge(&self, offset: usize, len: usize) -> ffi::ibv_sge {
        assert!(offset + len <= self.len(), "sge [{offset}, +{len}) outside a {}-byte region", self.len());
        ffi::ibv_sge { addr: self.addr() + offset as u64, length: len as u32, lkey: self.lkey() }
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: mr is live and deregistered once, before the buffer (a later field) unmaps.
        unsafe { ffi::ibv_dereg_mr(self.mr) };
    }
}
