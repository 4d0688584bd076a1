//! The journal's on-disk format: segment headers and records, as fixed layouts with checked
//! parse and emit. Pure: no I/O.
//!
//! ```text
//!  segment file <dir>/<index:010>.tbj, at most segment_bytes long
//!  byte 0      segment header (SEGMENT_HEADER_BYTES, CRC-32C protected)
//!  byte 4096   record, record, ... (each 8-byte aligned), then, if the journal went on in a
//!              next segment, an end-of-segment record
//!
//!  record (RECORD_HEADER_BYTES + payload padded to 8 + 8):
//!  +0   len         u32   payload bytes
//!  +4   kind        u8    1 message, 2 gap (payload: u64 messages missed), 3 end of segment
//!  +5   flags       u8    0
//!  +6   reserved    u16   0
//!  +8   sequence    u64   message: its stream position; gap: the first position missed
//!  +16  publish_tsc u64   the publisher's TSC from the message header (0: unknown)
//!  +24  receive_tsc u64   the recorder's TSC when it took the message (read once for up to 16
//!                         messages of one poll: never before the message's publish_tsc)
//!  +32  payload, zero-padded to a multiple of 8
//!  then crc32c u32 (of everything above), reserved u32 (0)
//! ```
//! A record is valid only if its CRC matches: a write torn by a crash (or a flipped bit) fails
//! it. A zero `kind` where a record would start is the end of the data written so far.
use core::mem::{offset_of, size_of};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// "TBJRNL01" as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"TBJRNL01");
/// Bumped on any change to this file's layouts.
pub const FORMAT_VERSION: u32 = 1;
/// Where records start in a segment (a page: readers map segments).
pub const DATA_START: usize = 4096;
/// Bytes of description of what was recorded, kept in every segment header.
pub const SOURCE_BYTES: usize = 256;
/// Bytes of a record's fixed front ([`RecordHeader`]).
pub const RECORD_HEADER_BYTES: usize = 32;
/// Bytes after the payload: CRC and a reserved word.
pub const RECORD_TRAILER_BYTES: usize = 8;
/// Largest payload a record carries (a ring slot holds at most 1 MiB).
pub const MAX_PAYLOAD: usize = 1 << 20;

/// A message record: its payload is one message.
pub const KIND_MESSAGE: u8 = 1;
/// A gap record: messages from its sequence on were missed (count in the payload).
pub const KIND_GAP: u8 = 2;
/// The segment's last record: the journal goes on in the next segment.
pub const KIND_END: u8 = 3;

/// The fixed part of every segment's first page.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct SegmentHeader {
    /// [`MAGIC`]: identifies a tickbus journal segment.
    pub magic: u64,
    /// [`FORMAT_VERSION`] of the writer.
    pub version: u32,
    /// Where records start (DATA_START).
    pub data_start: u32,
    /// The stream recorded.
    pub stream_id: u32,
    /// Bytes of `source` in use.
    pub source_len: u32,
    /// This segment's number (its file name).
    pub segment_index: u64,
    /// The most bytes any segment of this journal holds.
    pub segment_bytes: u64,
    /// The recorder's TSC rate, and a wall-clock reading taken at `tsc_anchor`: receive TSCs
    /// convert to wall time as `wall_anchor_ns + (tsc - tsc_anchor) / ticks_per_ns`.
    pub ticks_per_ns_bits: u64,
    /// The TSC reading the wall-clock anchor was taken at.
    pub tsc_anchor: u64,
    /// Wall-clock nanoseconds since the Unix epoch at `tsc_anchor`.
    pub wall_anchor_ns: u64,
    /// When the segment was created (Unix nanoseconds).
    pub created_unix_ns: u64,
    /// What was recorded (UTF-8, `source_len` bytes used).
    pub source: [u8; SOURCE_BYTES],
    /// CRC-32C of every byte above.
    pub crc: u32,
    /// Zero; room for a later version.
    pub reserved: u32,
}

/// Bytes of a [`SegmentHeader`].
pub const SEGMENT_HEADER_BYTES: usize = size_of::<SegmentHeader>();

const _: () = {
    assert!(offset_of!(SegmentHeader, magic) == 0);
    assert!(offset_of!(SegmentHeader, version) == 8);
    assert!(offset_of!(SegmentHeader, data_start) == 12);
    assert!(offset_of!(SegmentHeader, stream_id) == 16);
    assert!(offset_of!(SegmentHeader, source_len) == 20);
    assert!(offset_of!(SegmentHeader, segment_index) == 24);
    assert!(offset_of!(SegmentHeader, segment_bytes) == 32);
    assert!(offset_of!(SegmentHeader, ticks_per_ns_bits) == 40);
    assert!(offset_of!(SegmentHeader, tsc_anchor) == 48);
    assert!(offset_of!(SegmentHeader, wall_anchor_ns) == 56);
    assert!(offset_of!(SegmentHeader, created_unix_ns) == 64);
    assert!(offset_of!(SegmentHeader, source) == 72);
    assert!(offset_of!(SegmentHeader, crc) == 72 + SOURCE_BYTES);
    assert!(SEGMENT_HEADER_BYTES == 72 + SOURCE_BYTES + 8);
    assert!(SEGMENT_HEADER_BYTES <= DATA_START);
};

/// The fixed front of a record.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct RecordHeader {
    /// Payload bytes (not counting padding to 8 bytes).
    pub len: u32,
    /// [`KIND_MESSAGE`], [`KIND_GAP`] or [`KIND_END`].
    pub kind: u8,
    /// Zero; room for a later version.
    pub flags: u8,
    /// Zero; room for a later version.
    pub reserved: u16,
    /// The stream position of the message (or the first one missed).
    pub sequence: u64,
    /// The publisher's TSC in the message header (0 when the stream has none).
    pub publish_tsc: u64,
    /// The recorder's TSC when it took the message off the stream.
    pub receive_tsc: u64,
}

const _: () = {
    assert!(size_of::<RecordHeader>() == RECORD_HEADER_BYTES);
    assert!(offset_of!(RecordHeader, len) == 0);
    assert!(offset_of!(RecordHeader, kind) == 4);
    assert!(offset_of!(RecordHeader, flags) == 5);
    assert!(offset_of!(RecordHeader, sequence) == 8);
    assert!(offset_of!(RecordHeader, publish_tsc) == 16);
    assert!(offset_of!(RecordHeader, receive_tsc) == 24);
};

/// Why bytes are not a valid record or header. Offsets are within the segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The file does not start with [`MAGIC`].
    #[error("not a tickbus journal segment (magic {found:#018x})")]
    NotAJournal {
        /// The first eight bytes, as a little-endian u64.
        found: u64,
    },
    /// A segment written by another format version.
    #[error("journal format version {found}, this build reads {FORMAT_VERSION}: read it with the tickbus version that wrote it")]
    Version {
        /// The version the segment says.
        found: u32,
    },
    /// The segment header's CRC-32C does not match its bytes.
    #[error("the segment header's checksum does not match: the header is corrupt (restore the segment from a copy; later segments read on their own)")]
    HeaderCrc,
    /// A header field out of range or inconsistent with another.
    #[error("the segment header is inconsistent: {what} (restore the segment from a copy)")]
    BadHeader {
        /// Which field and why.
        what: &'static str,
    },
    /// The file ends inside a record.
    #[error("record at offset {offset} is cut short: {need} bytes needed, {have} left")]
    Truncated {
        /// Byte offset of the record.
        offset: u64,
        /// Bytes the record needs.
        need: usize,
        /// Bytes left in the file.
        have: usize,
    },
    /// A record kind this version does not know.
    #[error("record at offset {offset} has unknown kind {kind}")]
    Kind {
        /// Byte offset of the record.
        offset: u64,
        /// The kind byte found.
        kind: u8,
    },
    /// A record that claims more payload than a record holds, or a gap record whose payload is
    /// not the 8-byte count.
    #[error("record at offset {offset} claims {len} payload bytes, more than the {MAX_PAYLOAD} a record holds")]
    Length {
        /// Byte offset of the record.
        offset: u64,
        /// The payload length claimed.
        len: u32,
    },
    /// A record whose CRC-32C does not match its bytes.
    #[error("record at offset {offset} fails its CRC-32C check (stored {stored:#010x}, computed {computed:#010x})")]
    Crc {
        /// Byte offset of the record.
        offset: u64,
        /// The CRC in the record's trailer.
        stored: u32,
        /// The CRC of the bytes read.
        computed: u32,
    },
    /// A record whose sequence (plus gap count) is past [`MAX_SEQUENCE`], or a gap record of 0
    /// messages.
    #[error("record at offset {offset} says sequence {sequence} (+{count}), past any real stream (2^62)")]
    Sequence {
        /// Byte offset of the record.
        offset: u64,
        /// The sequence it says.
        sequence: u64,
        /// The positions it covers.
        count: u64,
    },
    /// Zeros where a record should be, with intact records after them.
    #[error("zeros at offset {offset} where a record should be, with intact records after them (a hole, e.g. pages lost to a power failure)")]
    Hole {
        /// Byte offset of the zeros.
        offset: u64,
    },
}

/// Sequences (and sequence + gap count) above this are refused: stream positions never get
/// near it, and arithmetic on what passes cannot overflow.
pub const MAX_SEQUENCE: u64 = 1 << 62;

/// The bytes a record with `len` payload bytes takes.
pub const fn record_bytes(len: usize) -> usize {
    RECORD_HEADER_BYTES + len.next_multiple_of(8) + RECORD_TRAILER_BYTES
}

/// What a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind<'a> {
    /// A message, borrowed from the segment.
    Message(&'a [u8]),
    /// `count` messages from the record's sequence on were missed.
    Gap {
        /// How many messages were missed.
        count: u64,
    },
    /// The journal goes on in the next segment.
    End,
}

/// A record read from a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The stream position of the message (or the first one missed).
    pub sequence: u64,
    /// The publisher's TSC in the message header.
    pub publish_tsc: u64,
    /// The recorder's TSC when it took the message off the stream.
    pub receive_tsc: u64,
    /// What the record holds.
    pub kind: Kind<'a>,
}

/// Builds a segment header; `source` is cut to [`SOURCE_BYTES`] at a character boundary.
#[allow(clippy::too_many_arguments)]
pub fn segment_header(
    stream_id: u32,
    segment_index: u64,
    segment_bytes: u64,
    ticks_per_ns: f64,
    tsc_anchor: u64,
    wall_anchor_ns: u64,
    created_unix_ns: u64,
    source: &str,
) -> SegmentHeader {
    let mut cut = source.len().min(SOURCE_BYTES);
    while !source.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut h = SegmentHeader {
        magic: MAGIC,
        version: FORMAT_VERSION,
        data_start: DATA_START as u32,
        stream_id,
        source_len: cut as u32,
        segment_index,
        segment_bytes,
        ticks_per_ns_bits: ticks_per_ns.to_bits(),
        tsc_anchor,
        wall_anchor_ns,
        created_unix_ns,
        source: [0; SOURCE_BYTES],
        crc: 0,
        reserved: 0,
    };
    h.source[..cut].copy_from_slice(&source.as_bytes()[..cut]);
    h.crc = crc32c::crc32c(&h.as_bytes()[..offset_of!(SegmentHeader, crc)]);
    h
}

impl SegmentHeader {
    /// Reads and checks a segment header (magic, version, checksum, sizes).
    pub fn parse(bytes: &[u8]) -> Result<SegmentHeader, FormatError> {
        let (h, _) = SegmentHeader::read_from_prefix(bytes).map_err(|_| FormatError::NotAJournal { found: 0 })?;
        if h.magic != MAGIC {
            return Err(FormatError::NotAJournal { found: h.magic });
        }
        if h.version != FORMAT_VERSION {
            return Err(FormatError::Version { found: h.version });
        }
        if crc32c::crc32c(&h.as_bytes()[..offset_of!(SegmentHeader, crc)]) != h.crc {
            return Err(FormatError::HeaderCrc);
        }
        let bad = |what| Err(FormatError::BadHeader { what });
        if h.data_start as usize != DATA_START {
            return bad("records do not start at 4096");
        }
        if (h.segment_bytes as usize) < DATA_START + record_bytes(0) * 2 {
            return bad("segment size too small");
        }
        if h.source_len as usize > SOURCE_BYTES {
            return bad("source description longer than its field");
        }
        let t = f64::from_bits(h.ticks_per_ns_bits);
        if !(1e-3..=1e3).contains(&t) {
            return bad("ticks_per_ns is not a TSC rate (0.001 to 1000 ticks per ns)");
        }
        Ok(h)
    }

    /// The description of what was recorded.
    pub fn source(&self) -> String {
        String::from_utf8_lossy(&self.source[..(self.source_len as usize).min(SOURCE_BYTES)]).into_owned()
    }

    /// The recorder's TSC rate (ticks per nanosecond).
    pub fn ticks_per_ns(&self) -> f64 {
        f64::from_bits(self.ticks_per_ns_bits)
    }

    /// Wall-clock nanoseconds (since the Unix epoch) of a receive TSC.
    pub fn wall_ns(&self, receive_tsc: u64) -> u64 {
        let dt = receive_tsc as i128 - self.tsc_anchor as i128;
        (self.wall_anchor_ns as i128 + (dt as f64 / self.ticks_per_ns()) as i128).max(0) as u64
    }
}

/// Writes a record into `out` (at least [`record_bytes`]`(payload.len())` long); returns its length.
pub fn emit(out: &mut [u8], h: &RecordHeader, payload: &[u8]) -> usize {
    let n = emit_unsealed(out, h, payload);
    seal(&mut out[..n]);
    n
}

/// [`emit`] without the CRC (left 0), for a batch sealed at once with [`seal_all`], which
/// checksums runs of same-size records side by side. A record must be sealed before it is
/// written: readers take an unsealed one for damage. `h.len` must be `payload.len()` (what
/// [`seal_all`] walks by). Returns the record's length.
///
/// Always inlined: the header is stored a field at a time, straight from the caller's
/// registers. Copied as bytes from a header the caller had just built in memory, it was read
/// back in wide loads the CPU cannot serve from the narrower stores still in flight, a stall
/// that was most of laying a record out in the recorder's profile.
#[inline(always)]
pub fn emit_unsealed(out: &mut [u8], h: &RecordHeader, payload: &[u8]) -> usize {
    debug_assert_eq!(h.len as usize, payload.len(), "a record header's len is its payload's");
    let n = record_bytes(payload.len());
    let out = &mut out[..n];
    // The padding (at most 7 bytes) and the trailer, zeroed in one fixed-size store before the
    // header and payload go over whatever of it they own (an empty payload's record is 40 bytes,
    // so these 16 never start before byte 24).
    out[n - 16..].fill(0);
    put_header(out, h);
    out[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + payload.len()].copy_from_slice(payload);
    n
}

/// Writes `h` into the front of `out` a field at a time (see [`emit_unsealed`] for why).
#[inline(always)]
fn put_header(out: &mut [u8], h: &RecordHeader) {
    let front = u64::from(h.len) | u64::from(h.kind) << 32 | u64::from(h.flags) << 40 | u64::from(h.reserved) << 48;
    let words = [front, h.sequence, h.publish_tsc, h.receive_tsc];
    for (w, to) in words.iter().zip(out[..RECORD_HEADER_BYTES].chunks_exact_mut(8)) {
        to.copy_from_slice(&w.to_le_bytes());
    }
}

/// Writes the CRC of one whole record laid out by [`emit_unsealed`] (`record` is exactly it).
/// Sealing twice writes the same CRC (it covers everything before the trailer).
pub fn seal(record: &mut [u8]) {
    let body = record.len() - RECORD_TRAILER_BYTES;
    let crc = crc32c::crc32c(&record[..body]);
    record[body..body + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Seals every record in `records`: whole records laid out back to back by
/// [`emit_unsealed`], nothing else. Four records of the same size in a row are checksummed
/// side by side (one record's CRC-32C is a chain of dependent instructions; four interleaved
/// keep the CPU's CRC unit busy): in the recorder's profile this took sealing from about 30% of
/// the poll side's time to about 20%.
///
/// # Panics
/// If `records` ends inside a record, or a record's length field is not its payload's.
pub fn seal_all(records: &mut [u8]) {
    use super::crc_lanes::{crc32c_lanes, LANES};
    let whole_at = |records: &[u8], at: usize| {
        let len = u32::from_le_bytes(records[at..at + 4].try_into().expect("a whole record header"));
        let n = record_bytes(len as usize);
        assert!(at + n <= records.len(), "seal_all: a record cut short at byte {at}");
        n
    };
    let mut at = 0;
    while at < records.len() {
        let n = whole_at(records, at);
        // The next records of the same length, a lane's worth: checksummed side by side.
        let same = |k: usize| {
            let next = at + k * n;
            next + RECORD_HEADER_BYTES <= records.len() && whole_at(records, next) == n
        };
        if (1..LANES).all(same) {
            let body = n - RECORD_TRAILER_BYTES;
            let crcs = {
                let run = &records[at..at + LANES * n];
                crc32c_lanes(std::array::from_fn(|k| &run[k * n..k * n + body]))
            };
            for (k, crc) in crcs.iter().enumerate() {
                records[at + k * n + body..][..4].copy_from_slice(&crc.to_le_bytes());
            }
            at += LANES * n;
        } else {
            seal(&mut records[at..at + n]);
            at += n;
        }
    }
}

/// The header of a message record.
pub fn message_header(sequence: u64, publish_tsc: u64, receive_tsc: u64, len: usize) -> RecordHeader {
    RecordHeader { len: len as u32, kind: KIND_MESSAGE, flags: 0, reserved: 0, sequence, publish_tsc, receive_tsc }
}

/// A gap record's header and payload: `count` messages from `first` were missed.
pub fn gap(first: u64, count: u64, receive_tsc: u64) -> (RecordHeader, [u8; 8]) {
    let h =
        RecordHeader { len: 8, kind: KIND_GAP, flags: 0, reserved: 0, sequence: first, publish_tsc: 0, receive_tsc };
    (h, count.to_le_bytes())
}

/// An end-of-segment record's header.
pub fn end(next_sequence: u64) -> RecordHeader {
    RecordHeader {
        len: 0,
        kind: KIND_END,
        flags: 0,
        reserved: 0,
        sequence: next_sequence,
        publish_tsc: 0,
        receive_tsc: 0,
    }
}

/// What starts at the front of `rest` (at file offset `offset`): a valid record and its length,
/// the end of the data (`Ok(None)`: a zero kind, or nothing left), or why it is not a record.
pub fn parse(rest: &[u8], offset: u64) -> Result<Option<(Record<'_>, usize)>, FormatError> {
    if rest.len() < 8 || rest[4] == 0 {
        return Ok(None);
    }
    let (h, _) = RecordHeader::read_from_prefix(rest).map_err(|_| FormatError::Truncated {
        offset,
        need: RECORD_HEADER_BYTES,
        have: rest.len(),
    })?;
    if !(KIND_MESSAGE..=KIND_END).contains(&h.kind) {
        return Err(FormatError::Kind { offset, kind: h.kind });
    }
    let len = h.len as usize;
    if len > MAX_PAYLOAD {
        return Err(FormatError::Length { offset, len: h.len });
    }
    let n = record_bytes(len);
    if rest.len() < n {
        return Err(FormatError::Truncated { offset, need: n, have: rest.len() });
    }
    let body = RECORD_HEADER_BYTES + len.next_multiple_of(8);
    let stored = u32::from_le_bytes(rest[body..body + 4].try_into().expect("4 bytes"));
    let computed = crc32c::crc32c(&rest[..body]);
    if stored != computed {
        return Err(FormatError::Crc { offset, stored, computed });
    }
    let payload = &rest[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + len];
    let kind = match h.kind {
        KIND_MESSAGE => Kind::Message(payload),
        KIND_GAP if len == 8 => Kind::Gap { count: u64::from_le_bytes(payload.try_into().expect("8 bytes")) },
        KIND_GAP => return Err(FormatError::Length { offset, len: h.len }),
        _ => Kind::End,
    };
    let count = match kind {
        Kind::Gap { count } => count,
        _ => 1,
    };
    if count == 0 || h.sequence > MAX_SEQUENCE || count > MAX_SEQUENCE {
        return Err(FormatError::Sequence { offset, sequence: h.sequence, count });
    }
    Ok(Some((Record { sequence: h.sequence, publish_tsc: h.publish_tsc, receive_tsc: h.receive_tsc, kind }, n)))
}

/// The record at the front of `rest`, which [`parse`] has already accepted (no second CRC).
/// Every access is still bounds-checked: a mapped file can change under its reader. None if
/// the bytes are no longer a record.
pub(crate) fn parsed_again(rest: &[u8]) -> Option<Record<'_>> {
    let (h, _) = RecordHeader::read_from_prefix(rest).ok()?;
    let payload = rest.get(RECORD_HEADER_BYTES..RECORD_HEADER_BYTES.checked_add(h.len as usize)?)?;
    let kind = match h.kind {
        KIND_MESSAGE => Kind::Message(payload),
        KIND_GAP => Kind::Gap { count: u64::from_le_bytes(payload.try_into().ok()?) },
        KIND_END => Kind::End,
        _ => return None,
    };
    Some(Record { sequence: h.sequence, publish_tsc: h.publish_tsc, receive_tsc: h.receive_tsc, kind })
}

/// The offset of the first intact record after the damage at `offset` in a segment's bytes
/// (8-aligned offsets, each checked by its CRC), if any. The work is bounded: a crafted file
/// whose every offset looks like a long record is answered after 256 MiB of CRC with the
/// offset reached, as if a record were there (refusing to cut is the safe answer).
pub fn intact_after(bytes: &[u8], offset: u64) -> Option<u64> {
    let mut at = usize::try_from(offset).ok()?.checked_add(8)?;
    let mut budget: usize = 256 << 20;
    while at + record_bytes(0) <= bytes.len() {
        let rest = &bytes[at..];
        if rest[4] != 0 {
            let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
            // Only a length that fits costs a CRC; other garbage is refused at once and costs
            // nothing (a torn tail of random bytes must not use the budget up).
            if len <= MAX_PAYLOAD && record_bytes(len) <= rest.len() {
                budget = budget.saturating_sub(len + RECORD_HEADER_BYTES);
            }
            if let Ok(Some(_)) = parse(rest, at as u64) {
                return Some(at as u64);
            }
            if budget == 0 {
                return Some(at as u64);
            }
        }
        at += 8;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0xEE; record_bytes(payload.len())];
        emit(&mut v, &message_header(42, 7, 9, payload.len()), payload);
        v
    }

    #[test]
    fn golden_record_bytes() {
        let v = rec(b"hi");
        assert_eq!(v.len(), 32 + 8 + 8);
        assert_eq!(&v[..8], &[2, 0, 0, 0, KIND_MESSAGE, 0, 0, 0]);
        assert_eq!(&v[8..16], &42u64.to_le_bytes());
        assert_eq!(&v[16..24], &7u64.to_le_bytes());
        assert_eq!(&v[24..32], &9u64.to_le_bytes());
        assert_eq!(&v[32..40], b"hi\0\0\0\0\0\0");
        assert_eq!(&v[40..44], &crc32c::crc32c(&v[..40]).to_le_bytes());
        assert_eq!(&v[44..48], &[0; 4]);
    }

    #[test]
    fn a_batch_sealed_at_once_is_byte_for_byte_the_records_emitted_one_by_one() {
        // Lengths that pad differently, a gap record and an empty payload, back to back.
        let payloads: [&[u8]; 5] = [b"", b"a", b"12345678", &[7; 64], b"nine byte"];
        let (mut one_by_one, mut batch) = (Vec::new(), Vec::new());
        for (i, p) in payloads.iter().enumerate() {
            let h = message_header(100 + i as u64, 7, 9, p.len());
            let mut r = vec![0xAA; record_bytes(p.len())];
            emit(&mut r, &h, p);
            one_by_one.extend_from_slice(&r);
            r.fill(0xAA);
            emit_unsealed(&mut r, &h, p);
            assert_eq!(&r[r.len() - 8..], &[0; 8], "unsealed: the CRC is left 0");
            batch.extend_from_slice(&r);
        }
        let (h, count) = gap(105, 3, 11);
        let mut r = vec![0; record_bytes(8)];
        emit(&mut r, &h, &count);
        one_by_one.extend_from_slice(&r);
        emit_unsealed(&mut r, &h, &count);
        batch.extend_from_slice(&r);
        seal_all(&mut batch);
        assert_eq!(batch, one_by_one);
        let (mut at, mut n) = (0, 0);
        while let Some((_, len)) = parse(&batch[at..], at as u64).unwrap() {
            (at, n) = (at + len, n + 1);
        }
        assert_eq!((at, n), (batch.len(), 6), "every sealed record parses, CRC checked");
    }

    /// Runs of same-size records (sealed four side by side) of every run length around the
    /// lane count, with records of other sizes between them, seal exactly as one by one.
    #[test]
    fn runs_sealed_side_by_side_match_the_records_sealed_one_by_one() {
        // 57 and 64 bytes make records of the same size with different headers.
        let lengths = [64, 64, 64, 57, 64, 3, 64, 64, 64, 64, 64, 64, 64, 64, 64, 0, 0, 0, 0, 200, 64, 64];
        for start in 0..lengths.len() {
            let (mut one_by_one, mut batch) = (Vec::new(), Vec::new());
            for (i, &len) in lengths[start..].iter().enumerate() {
                let p: Vec<u8> = (0..len).map(|b| (b * 7 + i) as u8).collect();
                let h = message_header(i as u64, i as u64 * 3, i as u64 * 5, len);
                let mut r = vec![0; record_bytes(len)];
                emit(&mut r, &h, &p);
                one_by_one.extend_from_slice(&r);
                r.fill(0xEE); // whatever the queue held before: every byte is laid over
                emit_unsealed(&mut r, &h, &p);
                batch.extend_from_slice(&r);
            }
            seal_all(&mut batch);
            assert_eq!(batch, one_by_one, "from record {start}");
        }
    }

    #[test]
    fn records_round_trip_and_every_damage_is_named() {
        let v = rec(b"hello, journal");
        let (r, n) = parse(&v, 4096).unwrap().unwrap();
        assert_eq!((n, r.sequence, r.kind), (v.len(), 42, Kind::Message(b"hello, journal")));
        for cut in 8..v.len() {
            assert!(matches!(parse(&v[..cut], 4096), Err(FormatError::Truncated { offset: 4096, .. })), "cut {cut}");
        }
        for bit in 0..(v.len() - 8) * 8 {
            let mut w = v.clone();
            w[bit / 8] ^= 1 << (bit % 8);
            let r = parse(&w, 0);
            assert!(
                !matches!(r, Ok(Some((x, _))) if x == parse(&v, 0).unwrap().unwrap().0),
                "bit {bit} went unnoticed"
            );
        }
        assert_eq!(parse(&[0u8; 64], 0), Ok(None), "zeros are the end of the data");
        let (gh, gp) = gap(100, 5, 1);
        let mut g = vec![0; record_bytes(8)];
        emit(&mut g, &gh, &gp);
        assert_eq!(parse(&g, 0).unwrap().unwrap().0.kind, Kind::Gap { count: 5 });
    }

    #[test]
    fn headers_round_trip_and_refuse_foreign_newer_and_corrupt_ones() {
        let h = segment_header(7, 3, 1 << 26, 2.5, 1000, 5_000_000_000, 6, "shm ring md on host x");
        let b = h.as_bytes().to_vec();
        let p = SegmentHeader::parse(&b).unwrap();
        assert_eq!((p.source(), p.segment_index, p.stream_id), ("shm ring md on host x".to_owned(), 3, 7));
        assert_eq!(p.wall_ns(1000 + 2500), 5_000_001_000);
        let mut v = b.clone();
        v[8] = 2;
        assert_eq!(SegmentHeader::parse(&v), Err(FormatError::Version { found: 2 }));
        let mut c = b.clone();
        c[100] ^= 1;
        assert_eq!(SegmentHeader::parse(&c), Err(FormatError::HeaderCrc));
        assert!(matches!(SegmentHeader::parse(&[0xAB; 400]), Err(FormatError::NotAJournal { .. })));
        let long = "é".repeat(300);
        assert_eq!(segment_header(1, 0, 1 << 20, 1.0, 0, 0, 0, &long).source_len, 256);
    }
}
