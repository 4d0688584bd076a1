//! The counters file's layout as types, shared by the writer (`file.rs`: the header written
//! once, each record's words stored atomically at these offsets) and the reader (`read.rs`:
//! the header and records read as these structs). Little-endian like every tickbus layout (the
//! codecs crate refuses to build on a big-endian target). The asserts below pin every offset
//! the module documentation's tables give: a field moved is a build error, not a file the
//! other side misreads.
use core::mem::{offset_of, size_of};

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::COUNTERS;

/// `TBCNTRS\x01`.
pub(super) const MAGIC: u64 = u64::from_le_bytes(*b"TBCNTRS\x01");
/// Layout version (bumped on any change below).
pub(super) const VERSION: u32 = 1;
/// Records per file.
pub(super) const CAPACITY: usize = 64;
/// Header bytes.
pub(super) const HEADER: usize = size_of::<FileHeader>();
/// Record bytes.
pub(super) const RECORD: usize = size_of::<Record>();
/// A record's name field, and its length.
pub(super) const NAME_AT: usize = offset_of!(Record, name);
pub(super) const NAME_MAX: usize = 64;
/// A record's counter block.
pub(super) const COUNTERS_AT: usize = offset_of!(Record, counters);
/// A record's (role, transport) word and (stream id, name length) word.
pub(super) const KINDS_AT: usize = offset_of!(Record, role);
pub(super) const IDS_AT: usize = offset_of!(Record, stream_id);
/// The whole file.
pub(super) const FILE_BYTES: usize = HEADER + CAPACITY * RECORD;

/// The file's header (written once, before the file is renamed into place).
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub(super) struct FileHeader {
    pub magic: u64,
    pub version: u32,
    pub header_bytes: u32,
    pub record_bytes: u32,
    pub records: u32,
    pub pid: u64,
    /// Clock ticks since boot (/proc/PID/stat field 22).
    pub start_time: u64,
    /// f64 bits.
    pub ticks_per_ns: u64,
    pub tsc_at_create: u64,
    pub unix_ns_at_create: u64,
    /// The program's name, NUL-padded.
    pub program: [u8; 64],
    pub reserved: [u8; 128],
}

/// One stream's record: `state` stored last (Release) when taken, 0 when freed.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub(super) struct Record {
    /// 0 free, 1 active.
    pub state: u64,
    /// 1 publisher, 2 subscriber.
    pub role: u32,
    /// 1 shm, 2 rdma-rc, 3 ud-mcast.
    pub transport: u32,
    pub stream_id: u32,
    pub name_len: u32,
    pub reserved: [u8; 40],
    /// The ring, or the endpoint and group, UTF-8, NUL-padded.
    pub name: [u8; 64],
    /// Indexed by [`super::Counter`].
    pub counters: [u64; COUNTERS],
}

const _: () = {
    assert!(HEADER == 256 && RECORD == 384);
    assert!(offset_of!(FileHeader, version) == 8 && offset_of!(FileHeader, header_bytes) == 12);
    assert!(offset_of!(FileHeader, record_bytes) == 16 && offset_of!(FileHeader, records) == 20);
    assert!(offset_of!(FileHeader, pid) == 24 && offset_of!(FileHeader, start_time) == 32);
    assert!(offset_of!(FileHeader, ticks_per_ns) == 40 && offset_of!(FileHeader, tsc_at_create) == 48);
    assert!(offset_of!(FileHeader, unix_ns_at_create) == 56 && offset_of!(FileHeader, program) == 64);
    assert!(offset_of!(Record, role) == 8 && offset_of!(Record, transport) == 12);
    assert!(offset_of!(Record, stream_id) == 16 && offset_of!(Record, name_len) == 20);
    assert!(NAME_AT == 64 && COUNTERS_AT == 128 && COUNTERS_AT + 8 * COUNTERS == RECORD);
    // Each record's counters start on a cache line of their own (the file is page-aligned).
    assert!(HEADER.is_multiple_of(64) && RECORD.is_multiple_of(64) && COUNTERS_AT.is_multiple_of(64));
};
