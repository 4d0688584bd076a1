//! The sparse index beside each segment: `<index:010>.idx`, fixed 24-byte entries (sequence,
//! receive TSC, offset in the segment) for the first message record of the segment and then one
//! every `index_every` message records. A replay from the middle of a day binary-searches it
//! instead of scanning from the start. Append-only; after a cut, entries past the cut are dropped.
use core::mem::size_of;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// One index entry: where a message record with a given sequence sits in its segment.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct IndexEntry {
    /// The record's stream position.
    pub sequence: u64,
    /// The recorder's TSC when it received the message (for replays that start at a time).
    pub receive_tsc: u64,
    /// Byte offset of the record in its segment.
    pub offset: u64,
}

/// Bytes of an [`IndexEntry`] in an index file.
pub const ENTRY_BYTES: usize = size_of::<IndexEntry>();
const _: () = assert!(ENTRY_BYTES == 24);

/// The entries in `bytes` (a whole index file); a torn last entry is ignored.
pub fn entries(bytes: &[u8]) -> Vec<IndexEntry> {
    bytes.chunks_exact(ENTRY_BYTES).filter_map(|c| IndexEntry::read_from_bytes(c).ok()).collect()
}

/// The most of an index file read (256 MiB: every record of a 256 MiB segment indexed). Entries
/// past it are not used; a seek past them scans from the last one read.
pub const MAX_READ: u64 = 256 << 20;

/// The entries of index file `path` for a segment of `segment_bytes`: nothing if it is missing
/// or not a regular file (an index is a hint: without it a seek scans), and never more than a
/// segment of that size can need (one entry per smallest record) nor past [`MAX_READ`], so a
/// planted file cannot fill memory.
pub(crate) fn read(path: &std::path::Path, segment_bytes: u64) -> Vec<IndexEntry> {
    let most = (segment_bytes / super::format::record_bytes(0) as u64 * ENTRY_BYTES as u64).min(MAX_READ);
    let Ok(f) = crate::sys::fs::open_regular(path) else { return Vec::new() };
    crate::sys::fs::read_at_most(&f, most).map(|b| entries(&b)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_a_torn_tail_is_ignored() {
        let e = [
            IndexEntry { sequence: 1, receive_tsc: 2, offset: 4096 },
            IndexEntry { sequence: 9, receive_tsc: 3, offset: 8192 },
        ];
        let mut b = e.as_bytes().to_vec();
        b.extend_from_slice(&[1, 2, 3]);
        assert_eq!(entries(&b), e.to_vec());
    }
}
