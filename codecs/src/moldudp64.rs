//! MoldUDP64: the UDP framing NASDAQ sends ITCH in. A packet is session (10 ASCII), then
//! sequence (u64 BE, of its first message), then count (u16 BE; 0 = heartbeat, 0xFFFF = end of
//! session), then count times `[u16 BE length][message]`. A re-request asks the retransmitter for
//! `count` messages from `sequence`.
//!
//! Owns: packet views, the message iterator, the re-request encoding and per-session gap
//! tracking. Never: allocates, does I/O, or panics on any packet.
use zerocopy::big_endian::{U16, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of the packet header.
pub const HEADER_LEN: usize = 20;
/// `count` of a heartbeat.
pub const HEARTBEAT: u16 = 0;
/// `count` of the end-of-session packet.
pub const END_OF_SESSION: u16 = 0xFFFF;

/// The 20-byte header; also the whole re-request packet.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct MoldHeader {
    /// The session's name (ASCII, space-padded).
    pub session: [u8; 10],
    /// The sequence number of the packet's first message (of the next message, in a heartbeat).
    pub sequence: U64,
    /// Messages in the packet ([`HEARTBEAT`], [`END_OF_SESSION`] mark the special packets).
    pub count: U16,
}
const _: () = assert!(core::mem::size_of::<MoldHeader>() == HEADER_LEN);

/// Why a packet is malformed; offsets are within the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MoldError {
    /// Fewer bytes than a header.
    #[error("packet of {got} bytes is shorter than the 20-byte MoldUDP64 header")]
    TooShort {
        /// The packet's length.
        got: usize,
    },
    /// A message that runs past the packet's end.
    #[error("message {index} at offset {offset} overruns the packet ({need} bytes needed, {have} left)")]
    Overrun {
        /// The message's index in the packet (from 0).
        index: u16,
        /// Its offset in the packet.
        offset: usize,
        /// Bytes it needs.
        need: usize,
        /// Bytes left.
        have: usize,
    },
    /// Bytes after the declared messages.
    #[error("packet declares {declared} messages but has {trailing} bytes after message {parsed}")]
    Trailing {
        /// Messages the header declares.
        declared: u16,
        /// Messages parsed.
        parsed: u16,
        /// Bytes left after them.
        trailing: usize,
    },
    /// A sequence past any real session.
    #[error("sequence {sequence} is past any real session (above 2^62): a damaged or forged packet")]
    Sequence {
        /// The sequence found.
        sequence: u64,
    },
}

/// Sequences above this are refused: no session comes near it, and sequence arithmetic on what
/// passes can never overflow.
pub const MAX_SEQUENCE: u64 = 1 << 62;

/// What kind of packet it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketKind {
    /// A packet of messages.
    Messages,
    /// A heartbeat: no messages; its sequence is the next message's.
    Heartbeat,
    /// The session's end: no more messages will follow.
    EndOfSession,
}

/// A validated packet: after [`Packet::parse`], iterating its messages cannot fail or panic.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// The packet's header.
    pub header: &'a MoldHeader,
    body: &'a [u8],
}

impl<'a> Packet<'a> {
    /// Checks the header and that the declared messages exactly fill the packet.
    pub fn parse(bytes: &'a [u8]) -> Result<Packet<'a>, MoldError> {
        let (header, body) =
            MoldHeader::ref_from_prefix(bytes).map_err(|_| MoldError::TooShort { got: bytes.len() })?;
        if header.sequence.get() > MAX_SEQUENCE {
            return Err(MoldError::Sequence { sequence: header.sequence.get() });
        }
        let count = header.count.get();
        let n = if count == END_OF_SESSION { 0 } else { count };
        let mut at = 0usize;
        for index in 0..n {
            let have = body.len() - at;
            if have < 2 {
                return Err(MoldError::Overrun { index, offset: HEADER_LEN + at, need: 2, have });
            }
            let len = usize::from(u16::from_be_bytes([body[at], body[at + 1]]));
            if have - 2 < len {
                return Err(MoldError::Overrun { index, offset: HEADER_LEN + at, need: 2 + len, have });
            }
            at += 2 + len;
        }
        if at != body.len() {
            return Err(MoldError::Trailing { declared: count, parsed: n, trailing: body.len() - at });
        }
        Ok(Packet { header, body })
    }

    /// What kind of packet it is.
    pub fn kind(&self) -> PacketKind {
        match self.header.count.get() {
            HEARTBEAT => PacketKind::Heartbeat,
            END_OF_SESSION => PacketKind::EndOfSession,
            _ => PacketKind::Messages,
        }
    }

    /// Messages in this packet (0 for heartbeats and end of session).
    pub fn message_count(&self) -> u16 {
        if self.kind() == PacketKind::Messages {
            self.header.count.get()
        } else {
            0
        }
    }

    /// Each message with its sequence number.
    pub fn messages(&self) -> impl Iterator<Item = (u64, &'a [u8])> + 'a {
        let first = self.header.sequence.get();
        let mut rest = self.body;
        (0..u64::from(self.message_count())).map(move |i| {
            let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
            let msg = &rest[2..2 + len];
            rest = &rest[2 + len..];
            (first + i, msg)
        })
    }
}

/// The re-request packet asking for `count` messages of `session` from `sequence`.
pub fn rerequest(session: &[u8; 10], sequence: u64, count: u16) -> MoldHeader {
    MoldHeader { session: *session, sequence: sequence.into(), count: count.into() }
}

/// Packs messages into MoldUDP64 packets of at most `max_len` bytes (the UDP payload; 1,400 keeps
/// a packet inside a 1,500-byte Ethernet MTU), numbering them from the session's next sequence.
pub struct PacketBuilder {
    session: [u8; 10],
    next: u64,
    max_len: usize,
    buf: Vec<u8>,
    count: u16,
}

impl PacketBuilder {
    /// A builder of packets of session `session` starting at `first_sequence`, each at most
    /// `max_len` bytes.
    pub fn new(session: [u8; 10], first_sequence: u64, max_len: usize) -> PacketBuilder {
        let mut b =
            PacketBuilder { session, next: first_sequence, max_len, buf: Vec::with_capacity(max_len), count: 0 };
        b.reset();
        b
    }

    fn reset(&mut self) {
        self.buf.clear();
        self.buf.extend_from_slice(&self.session);
        self.buf.extend_from_slice(&self.next.to_be_bytes());
        self.buf.extend_from_slice(&[0, 0]);
        self.count = 0;
    }

    /// True when `msg` still fits in the open packet.
    pub fn fits(&self, msg: &[u8]) -> bool {
        self.buf.len() + 2 + msg.len() <= self.max_len && self.count < END_OF_SESSION - 1
    }

    /// Appends a message; false (nothing appended) when it does not fit: take the packet first.
    /// A message that cannot fit even an empty packet is refused for good.
    pub fn push(&mut self, msg: &[u8]) -> bool {
        if !self.fits(msg) || msg.len() > usize::from(u16::MAX) {
            return false;
        }
        self.buf.extend_from_slice(&(msg.len() as u16).to_be_bytes());
        self.buf.extend_from_slice(msg);
        self.count += 1;
        true
    }

    /// Messages in the open packet.
    pub fn count(&self) -> u16 {
        self.count
    }

    /// Closes the open packet, hands its bytes to `f`, and opens the next one.
    pub fn take<T>(&mut self, f: impl FnOnce(&[u8]) -> T) -> T {
        let at = self.buf.len();
        self.buf[HEADER_LEN - 2..HEADER_LEN].copy_from_slice(&self.count.to_be_bytes());
        let out = f(&self.buf[..at]);
        self.next += u64::from(self.count);
        self.reset();
        out
    }

    /// A heartbeat (count 0, the next sequence) or the end-of-session packet.
    pub fn control(&self, end_of_session: bool) -> MoldHeader {
        let count = if end_of_session { END_OF_SESSION } else { HEARTBEAT };
        MoldHeader { session: self.session, sequence: self.next.into(), count: count.into() }
    }
}

/// Sequence tracking of one session: says which messages are new, and which were missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GapTracker {
    /// The next sequence number expected (sequences start at 1).
    pub next: u64,
}

/// What a packet meant for the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Messages `from..to` are new and in order.
    InOrder {
        /// The first new sequence.
        from: u64,
        /// One past the last new sequence.
        to: u64,
    },
    /// Messages `missing_from..missing_to` never arrived (re-request them); `from..to` are new.
    Gap {
        /// The first missing sequence.
        missing_from: u64,
        /// One past the last missing.
        missing_to: u64,
        /// The first new sequence.
        from: u64,
        /// One past the last new sequence.
        to: u64,
    },
    /// Everything in the packet was seen before (a duplicate from a redundant feed).
    Duplicate,
}

impl GapTracker {
    /// A tracker expecting sequence 1 (a session's first).
    pub fn new() -> GapTracker {
        GapTracker { next: 1 }
    }

    /// Accounts for a packet's sequence range. Heartbeats carry the next sequence with count 0,
    /// so a heartbeat ahead of `next` reveals a gap too.
    pub fn on_packet(&mut self, p: &Packet<'_>) -> Arrival {
        let first = p.header.sequence.get();
        let end = first + u64::from(p.message_count());
        if end <= self.next && !(p.message_count() == 0 && first > self.next) {
            return Arrival::Duplicate;
        }
        let arrival = if first > self.next {
            Arrival::Gap { missing_from: self.next, missing_to: first, from: first, to: end }
        } else {
            Arrival::InOrder { from: self.next, to: end }
        };
        self.next = self.next.max(end);
        arrival
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(seq: u64, msgs: &[&[u8]], count: Option<u16>) -> Vec<u8> {
        let mut v = b"SESSION001".to_vec();
        v.extend(seq.to_be_bytes());
        v.extend(count.unwrap_or(msgs.len() as u16).to_be_bytes());
        for m in msgs {
            v.extend((m.len() as u16).to_be_bytes());
            v.extend(*m);
        }
        v
    }

    #[test]
    fn parses_messages_heartbeats_and_end_of_session() {
        let p = packet(7, &[b"abc", b"", b"xy"], None);
        let pk = Packet::parse(&p).unwrap();
        assert_eq!(pk.kind(), PacketKind::Messages);
        let got: Vec<(u64, &[u8])> = pk.messages().collect();
        assert_eq!(got, vec![(7, &b"abc"[..]), (8, &b""[..]), (9, &b"xy"[..])]);
        assert_eq!(&pk.header.session, b"SESSION001");
        let hb = packet(10, &[], None);
        assert_eq!(Packet::parse(&hb).unwrap().kind(), PacketKind::Heartbeat);
        let eos = packet(10, &[], Some(END_OF_SESSION));
        let e = Packet::parse(&eos).unwrap();
        assert_eq!((e.kind(), e.messages().count()), (PacketKind::EndOfSession, 0));
    }

    #[test]
    fn malformed_packets_are_errors_that_say_where() {
        assert_eq!(Packet::parse(&[0; 19]).unwrap_err(), MoldError::TooShort { got: 19 });
        let mut p = packet(1, &[b"abcd"], None);
        p.truncate(p.len() - 1);
        assert_eq!(Packet::parse(&p).unwrap_err(), MoldError::Overrun { index: 0, offset: 20, need: 6, have: 5 });
        let p = packet(1, &[b"ab", b"cd"], Some(1));
        assert_eq!(Packet::parse(&p).unwrap_err(), MoldError::Trailing { declared: 1, parsed: 1, trailing: 4 });
        for len in 0..200 {
            if let Ok(p) = Packet::parse(&crate::testutil::junk(len as u32, len)) {
                let _ = p.messages().count();
            }
        }
    }

    #[test]
    fn rerequest_is_the_20_byte_header_golden() {
        let r = rerequest(b"SESSION001", 0x0102, 3);
        assert_eq!(r.as_bytes(), b"SESSION001\0\0\0\0\0\0\x01\x02\0\x03");
    }

    #[test]
    fn gap_tracker_reports_gaps_duplicates_and_heartbeat_revealed_gaps() {
        let mut g = GapTracker::new();
        let p = |seq, n: usize| packet(seq, &vec![&b"m"[..]; n], None);
        let pk = |b: &Vec<u8>| Packet::parse(b).unwrap().header.sequence.get();
        let a = p(1, 3);
        assert_eq!(g.on_packet(&Packet::parse(&a).unwrap()), Arrival::InOrder { from: 1, to: 4 });
        let b = p(6, 2);
        assert_eq!(pk(&b), 6);
        assert_eq!(
            g.on_packet(&Packet::parse(&b).unwrap()),
            Arrival::Gap { missing_from: 4, missing_to: 6, from: 6, to: 8 }
        );
        assert_eq!(g.on_packet(&Packet::parse(&a).unwrap()), Arrival::Duplicate);
        let hb = p(10, 0);
        assert_eq!(
            g.on_packet(&Packet::parse(&hb).unwrap()),
            Arrival::Gap { missing_from: 8, missing_to: 10, from: 10, to: 10 }
        );
        assert_eq!(g.next, 10);
        let hb2 = p(10, 0);
        assert_eq!(g.on_packet(&Packet::parse(&hb2).unwrap()), Arrival::Duplicate);
    }

    #[test]
    fn the_builder_packs_up_to_the_limit_and_numbers_packets_in_sequence() {
        let mut b = PacketBuilder::new(*b"SESSION001", 5, HEADER_LEN + 2 * (2 + 3));
        assert!(b.push(b"abc") && b.push(b"def"));
        assert!(!b.push(b"g"), "a third message does not fit");
        let first = b.take(|p| p.to_vec());
        assert_eq!(first, packet(5, &[b"abc", b"def"], None));
        assert!(b.push(b"g"));
        let second = b.take(|p| p.to_vec());
        let pk = Packet::parse(&second).unwrap();
        assert_eq!(pk.messages().collect::<Vec<_>>(), vec![(7, &b"g"[..])]);
        let hb = b.control(false);
        assert_eq!((hb.sequence.get(), hb.count.get()), (8, HEARTBEAT));
        assert_eq!(b.control(true).count.get(), END_OF_SESSION);
        let mut t = GapTracker::new();
        t.next = 5;
        assert_eq!(t.on_packet(&Packet::parse(&first).unwrap()), Arrival::InOrder { from: 5, to: 7 });
        assert!(!PacketBuilder::new(*b"SESSION001", 1, 30).push(&[0u8; 20]), "too big for any packet");
    }
}
