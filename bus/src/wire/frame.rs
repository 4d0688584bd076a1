//! The datagram a ud-mcast publisher sends: a 32-byte header, then the message's bytes.
//!
//! The header carries what UD does not: which stream, which publisher run (`session`, random
//! per publisher, so a restarted publisher is told apart from a replay), and the per-stream
//! sequence number that gap detection runs on. Little-endian, like every tickbus layout.
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// "TBMC" read as a little-endian u32.
pub const MAGIC: u32 = u32::from_le_bytes(*b"TBMC");
/// Bumped on any change to the header.
pub const VERSION: u8 = 1;
/// Bytes of a [`FrameHeader`].
pub const HEADER_BYTES: usize = 32;
/// A frame with no message: `seq` is the number the *next* message will carry, so a subscriber
/// that missed the stream's last messages learns of the gap without waiting for more traffic.
pub const HEARTBEAT: u8 = 1;

/// The 32-byte header in front of every ud-mcast datagram's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct FrameHeader {
    /// [`MAGIC`].
    pub magic: u32,
    /// [`VERSION`].
    pub version: u8,
    /// [`HEARTBEAT`] or 0.
    pub flags: u8,
    /// Bytes of header; a later version may grow it and older readers skip the rest.
    pub header_len: u16,
    /// The stream; subscribers skip other streams sharing the group.
    pub stream: u32,
    /// Bytes of message after the header.
    pub len: u32,
    /// The publisher run's session id (it changes when the publisher restarts).
    pub session: u64,
    /// The message's sequence number (a heartbeat: the next message's).
    pub seq: u64,
}

const _: () = assert!(size_of::<FrameHeader>() == HEADER_BYTES);

impl FrameHeader {
    /// The header of message `seq` (of `len` bytes) on `stream` in `session`.
    pub fn new(stream: u32, session: u64, seq: u64, len: usize) -> FrameHeader {
        FrameHeader {
            magic: MAGIC,
            version: VERSION,
            flags: 0,
            header_len: HEADER_BYTES as u16,
            stream,
            len: len as u32,
            session,
            seq,
        }
    }

    /// A heartbeat's header: `next_seq` is the number the next message will carry.
    pub fn heartbeat(stream: u32, session: u64, next_seq: u64) -> FrameHeader {
        FrameHeader { flags: HEARTBEAT, ..FrameHeader::new(stream, session, next_seq, 0) }
    }

    /// Whether the frame is a heartbeat.
    pub fn is_heartbeat(&self) -> bool {
        self.flags & HEARTBEAT != 0
    }
}

/// Why a datagram is not a tickbus frame. The subscriber drops it, counts it and goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The datagram is shorter than a frame header.
    #[error("a {got}-byte datagram is shorter than the {HEADER_BYTES}-byte frame header: something other than a tickbus publisher sends to this group")]
    Short {
        /// Its length.
        got: usize,
    },
    /// The header does not start with [`MAGIC`].
    #[error("magic {found:#010x} is not tickbus's {MAGIC:#010x}: something other than a tickbus publisher sends to this group; give the stream a group of its own")]
    Magic {
        /// What it starts with.
        found: u32,
    },
    /// Another frame version.
    #[error("frame version {found}, this subscriber reads version {VERSION}: run the same tickbus version on publisher and subscribers")]
    Version {
        /// The version it says.
        found: u8,
    },
    /// A heartbeat that carries message bytes.
    #[error("a heartbeat frame carries {len} message bytes: a corrupt frame")]
    HeartbeatLen {
        /// The length it says.
        len: u32,
    },
    /// A header length below [`HEADER_BYTES`].
    #[error("header length {found} is below {HEADER_BYTES}: a corrupt or foreign frame")]
    HeaderLen {
        /// The length it says.
        found: u16,
    },
    /// The header's message length disagrees with the datagram.
    #[error("the header says {claimed} message bytes but the datagram carries {got}: a truncated or corrupt frame")]
    Length {
        /// The length the header says.
        claimed: u32,
        /// The bytes the datagram carries after the header.
        got: usize,
    },
    /// A sequence number past any real stream.
    #[error("sequence number {seq} is beyond any real stream (2^63 or more): a corrupt or forged frame")]
    Sequence {
        /// The number it says.
        seq: u64,
    },
}

/// Sequence numbers at or above this are refused: no stream gets there, and `seq + 1` can then
/// never overflow.
pub const MAX_SEQ: u64 = 1 << 63;

/// Splits a datagram into its header and message, or says what is wrong with it.
pub fn parse(datagram: &[u8]) -> Result<(FrameHeader, &[u8]), FrameError> {
    let (h, _) = FrameHeader::read_from_prefix(datagram).map_err(|_| FrameError::Short { got: datagram.len() })?;
    if h.magic != MAGIC {
        return Err(FrameError::Magic { found: h.magic });
    }
    if h.version != VERSION {
        return Err(FrameError::Version { found: h.version });
    }
    let start = usize::from(h.header_len);
    if start < HEADER_BYTES {
        return Err(FrameError::HeaderLen { found: h.header_len });
    }
    if h.is_heartbeat() && h.len != 0 {
        return Err(FrameError::HeartbeatLen { len: h.len });
    }
    if h.seq >= MAX_SEQ {
        return Err(FrameError::Sequence { seq: h.seq });
    }
    let body = datagram.get(start..).unwrap_or(&[]);
    if body.len() != h.len as usize {
        return Err(FrameError::Length { claimed: h.len, got: datagram.len().saturating_sub(start) });
    }
    Ok((h, body))
}

/// Writes the header and `payload` into `out` (at least `HEADER_BYTES + payload.len()` long);
/// returns the frame's length.
#[inline]
pub fn write(out: &mut [u8], header: &FrameHeader, payload: &[u8]) -> usize {
    let n = HEADER_BYTES + payload.len();
    out[..HEADER_BYTES].copy_from_slice(header.as_bytes());
    out[HEADER_BYTES..n].copy_from_slice(payload);
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0; HEADER_BYTES + payload.len()];
        write(&mut v, &FrameHeader::new(7, 0xABCD, 42, payload.len()), payload);
        v
    }

    #[test]
    fn golden_bytes() {
        let v = frame(b"hi");
        assert_eq!(&v[..4], b"TBMC");
        assert_eq!(&v[4..8], &[1, 0, 32, 0]);
        assert_eq!(&v[8..12], &7u32.to_le_bytes());
        assert_eq!(&v[12..16], &2u32.to_le_bytes());
        assert_eq!(&v[16..24], &0xABCDu64.to_le_bytes());
        assert_eq!(&v[24..32], &42u64.to_le_bytes());
        assert_eq!(&v[32..], b"hi");
    }

    #[test]
    fn round_trip() {
        let v = frame(b"payload");
        let (h, body) = parse(&v).unwrap();
        assert_eq!((h.stream, h.session, h.seq, body), (7, 0xABCD, 42, &b"payload"[..]));
    }

    #[test]
    fn refusals_name_the_problem() {
        assert_eq!(parse(&[0; 31]), Err(FrameError::Short { got: 31 }));
        let mut v = frame(b"x");
        v[0] = b'X';
        assert!(matches!(parse(&v), Err(FrameError::Magic { .. })));
        let mut v = frame(b"x");
        v[4] = 2;
        assert_eq!(parse(&v), Err(FrameError::Version { found: 2 }));
        assert!(parse(&v).unwrap_err().to_string().contains("same tickbus version"));
        let mut v = frame(b"x");
        v[6] = 8;
        assert_eq!(parse(&v), Err(FrameError::HeaderLen { found: 8 }));
        let mut v = frame(b"abc");
        v.pop();
        assert_eq!(parse(&v), Err(FrameError::Length { claimed: 3, got: 2 }));
        let mut v = frame(b"abc");
        v.push(0);
        assert_eq!(parse(&v), Err(FrameError::Length { claimed: 3, got: 4 }));
    }

    #[test]
    fn heartbeats_carry_the_next_sequence_and_no_bytes() {
        let mut v = vec![0; HEADER_BYTES];
        write(&mut v, &FrameHeader::heartbeat(7, 1, 99), &[]);
        assert_eq!(v[5], HEARTBEAT);
        let (h, body) = parse(&v).unwrap();
        assert!(h.is_heartbeat() && body.is_empty() && h.seq == 99);
        v[12] = 1;
        v.push(0);
        assert_eq!(parse(&v), Err(FrameError::HeartbeatLen { len: 1 }));
    }

    #[test]
    fn a_longer_header_from_a_later_minor_layout_is_skipped() {
        let mut v = frame(b"");
        v[6] = 40;
        v.extend_from_slice(&[0; 8]);
        v.extend_from_slice(b"xy");
        v[12] = 2;
        assert_eq!(parse(&v).unwrap().1, b"xy");
    }

    #[test]
    fn every_truncation_and_byte_flip_is_refused_or_self_consistent() {
        let v = frame(b"some message bytes");
        for cut in 0..v.len() {
            assert!(parse(&v[..cut]).is_err(), "a frame cut to {cut} bytes was accepted");
        }
        for at in 0..v.len() {
            for bit in 0..8 {
                let mut w = v.clone();
                w[at] ^= 1 << bit;
                if let Ok((h, body)) = parse(&w) {
                    assert_eq!(body.len(), h.len as usize);
                    assert!(usize::from(h.header_len) + body.len() == w.len());
                }
            }
        }
    }
}
