//! Ring files and their mappings.
use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::{MmapOptions, MmapRaw};

use super::error::ShmError;
use crate::ring::sync::AtomicU64;
use crate::ring::RingMemory;
use crate::sys::fs::HUGEPAGE_BYTES;

/// What memory a ring file lives in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backing {
    /// 2 MiB pages on hugetlbfs: no TLB misses on the ring.
    Hugepages,
    /// 4 KiB pages on /dev/shm, with the reason hugepages were not used.
    Fallback {
        /// Why hugepages were not used.
        reason: String,
    },
}

/// A mapped ring file. Keeps the file open: its open file description holds the publisher's
/// lock (publisher) or the consumer line's lock (reliable consumer).
pub struct ShmMemory {
    map: MmapRaw,
    file: File,
    path: PathBuf,
    backing: Backing,
}

impl ShmMemory {
    /// The ring file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What memory the ring lives in.
    pub fn backing(&self) -> &Backing {
        &self.backing
    }

    /// Maps all of `file` shared, pre-faulting every page so the hot path never page-faults.
    pub(crate) fn map(file: File, path: PathBuf, backing: Backing) -> Result<ShmMemory, ShmError> {
        let map = MmapOptions::new().populate().map_raw(&file).map_err(|source| ShmError::Io {
            what: "mapping",
            path: path.clone(),
            source,
        })?;
        Ok(ShmMemory { map, file, path, backing })
    }

    /// The open ring file (its locks live on it).
    pub(crate) fn file(&self) -> &File {
        &self.file
    }
}

// SAFETY: the mapping is page-aligned (so 8-aligned), spans `len()` bytes, and stays mapped until
// this ShmMemory (which owns it) is dropped. Other processes touch it only via the ring protocol.
unsafe impl RingMemory for ShmMemory {
    fn base(&self) -> *const AtomicU64 {
        self.map.as_ptr() as *const AtomicU64
    }
    fn len_words(&self) -> usize {
        self.map.len() / 8
    }
}

/// Size of a ring file: hugetlbfs files must be whole hugepages; 2 MiB rounding costs little
/// on /dev/shm too and keeps both the same.
pub(crate) fn file_bytes(ring_bytes: usize) -> u64 {
    ring_bytes.div_ceil(HUGEPAGE_BYTES) as u64 * HUGEPAGE_BYTES as u64
}
