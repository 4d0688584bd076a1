//! Ring files and their mappings.
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
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
    Fallback { reason: String },
}

/// A mapped ring file. Keeps the file open: for a publisher, its descriptor holds the lock.
pub struct ShmMemory {
    map: MmapRaw,
    _file: File,
    path: PathBuf,
    backing: Backing,
}

impl ShmMemory {
    pub fn path(&self) -> &Path {
        &self.path
    }

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
        Ok(ShmMemory { map, _file: file, path, backing })
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

/// Opens (creating, mode 0600) the ring file at `path`.
pub(crate) fn open_file(path: &Path, create: bool) -> Result<File, ShmError> {
    if create {
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|source| ShmError::Io {
                what: "creating the ring folder",
                path: dir.to_owned(),
                source,
            })?;
        }
    }
    OpenOptions::new().read(true).write(true).create(create).mode(0o600).open(path).map_err(|source| ShmError::Io {
        what: "opening the ring file",
        path: path.to_owned(),
        source,
    })
}
