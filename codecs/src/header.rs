//! The 32-byte header that starts every bus message.
//!
//! ```text
//!  0      2        4          8           12        16              24             32
//!  +------+--------+----------+-----------+---------+---------------+--------------+
//!  | type | version| length   | stream_id | flags   | sequence      | publish_tsc  |
//!  | u16  | u16    | u32      | u32       | u32     | u64           | u64          |
//!  +------+--------+----------+-----------+---------+---------------+--------------+
//! ```
//! `length` is the whole message including this header. `publish_tsc` is the publisher's raw TSC
//! at commit; convert deltas with the ticks-per-ns stored in the ring header, never with a local
//! calibration (processes calibrate differently).
use core::mem::{offset_of, size_of};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::message::MsgType;

/// Bytes in [`Header`].
pub const HEADER_LEN: usize = 32;

/// Header flag: `publish_tsc` holds the TSC at which the exchange data this message came from
/// entered the host (a feed handler's ingress), not the publish time. Tick-to-trade is measured
/// from it.
pub const FLAG_INGRESS_TSC: u32 = 1;

/// Header flag: with [`FLAG_INGRESS_TSC`], bits 16-31 of `flags` hold how many ns after the
/// ingress the publisher began to publish the message ([`Header::publish_lag_ns`]), so a reader
/// can time the hop from the publish as well as from the ingress: the hop alone is what a
/// transport's floor compares with, and the ingress to the publish is the publisher's own work.
/// A lag of 65,535 ns or more is stored as 65,535 ("at least"): a reader that subtracts it
/// errs toward a longer hop, never a shorter one. Readers of version 1 that do not know it
/// ignore it (it sits in bits they ignore); a check of the whole `flags` word for equality
/// must mask those bits off.
pub const FLAG_PUBLISH_LAG: u32 = 4;
/// Where in `flags` the publish lag ([`FLAG_PUBLISH_LAG`]) starts: bits 16-31, in ns.
pub const PUBLISH_LAG_SHIFT: u32 = 16;

/// Header flag on a `FeedGap`: it stands for positions a recording lacks (a journal's gap
/// record, replayed or served), not for a message of the stream at the header's sequence (a
/// feed handler's own `FeedGap`, which a journal keeps as a message like any other).
pub const FLAG_RECORDING_GAP: u32 = 2;

/// Common header of every message; see the module docs for the layout.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Header {
    /// [`MsgType`] as its wire value.
    pub msg_type: u16,
    /// Schema version of this message type.
    pub version: u16,
    /// Total message length in bytes, header included.
    pub length: u32,
    /// Stream the message was published on.
    pub stream_id: u32,
    /// Flags: [`FLAG_INGRESS_TSC`], [`FLAG_RECORDING_GAP`], [`FLAG_PUBLISH_LAG`] (and its lag in
    /// bits 16-31); other bits zero, ignored by readers of version 1.
    pub flags: u32,
    /// Per-stream sequence number (the ring position), set on publish.
    pub sequence: u64,
    /// Publisher's raw TSC at commit.
    pub publish_tsc: u64,
}

const _: () = {
    assert!(size_of::<Header>() == HEADER_LEN);
    assert!(offset_of!(Header, msg_type) == 0);
    assert!(offset_of!(Header, version) == 2);
    assert!(offset_of!(Header, length) == 4);
    assert!(offset_of!(Header, stream_id) == 8);
    assert!(offset_of!(Header, flags) == 12);
    assert!(offset_of!(Header, sequence) == 16);
    assert!(offset_of!(Header, publish_tsc) == 24);
};

impl Header {
    /// A header for a message of `msg_type`, `version` and total `length`; stream, sequence and
    /// TSC are filled in by the publisher.
    pub const fn new(msg_type: MsgType, version: u16, length: u32) -> Self {
        Header { msg_type: msg_type as u16, version, length, stream_id: 0, flags: 0, sequence: 0, publish_tsc: 0 }
    }

    /// What a publisher writes into every message it sends: its stream, the message's sequence
    /// (ring position) and the raw TSC at publish.
    pub fn stamp(&mut self, stream_id: u32, sequence: u64, publish_tsc: u64) {
        self.stream_id = stream_id;
        self.sequence = sequence;
        self.publish_tsc = publish_tsc;
    }

    /// Records that publishing began `lag_ns` after the ingress TSC in `publish_tsc`
    /// ([`FLAG_PUBLISH_LAG`]), 65,535 ns at most (a longer lag is stored as that: "at least").
    /// Replaces any lag set before (a message published again after a full send queue).
    #[inline]
    pub fn set_publish_lag_ns(&mut self, lag_ns: u64) {
        let lag = u32::from(u16::try_from(lag_ns).unwrap_or(u16::MAX));
        self.flags =
            (self.flags & !(u32::from(u16::MAX) << PUBLISH_LAG_SHIFT)) | FLAG_PUBLISH_LAG | (lag << PUBLISH_LAG_SHIFT);
    }

    /// How many ns after the ingress TSC its publisher began publishing, when it said
    /// ([`FLAG_PUBLISH_LAG`] with [`FLAG_INGRESS_TSC`]).
    #[inline]
    pub fn publish_lag_ns(&self) -> Option<u64> {
        let both = FLAG_PUBLISH_LAG | FLAG_INGRESS_TSC;
        (self.flags & both == both).then_some(u64::from(self.flags >> PUBLISH_LAG_SHIFT))
    }

    /// When the message's publish began (TSC ticks), for timing from there: without an ingress
    /// stamp, the stamp itself (the publisher's own stamp; there is no earlier work in it to
    /// leave out); with one, the ingress plus the publish lag at `ticks_per_ns`, rounded down, and
    /// a lag stored as 65,535 ns taken as that ("at least"): either way never after the true
    /// start, so a hop timed from it errs long, never short. None when the publisher gave an
    /// ingress stamp and no lag.
    #[inline]
    pub fn publish_begin_tsc(&self, ticks_per_ns: f64) -> Option<u64> {
        if self.flags & FLAG_INGRESS_TSC == 0 {
            return Some(self.publish_tsc);
        }
        let lag = self.publish_lag_ns()?;
        Some(self.publish_tsc.saturating_add((lag as f64 * ticks_per_ns) as u64))
    }

    /// Reads the header at the start of `bytes` without any alignment requirement.
    pub fn peek(bytes: &[u8]) -> Option<Header> {
        Header::read_from_prefix(bytes).ok().map(|(h, _)| h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static GOLDEN: [u8; 32] = [
        0x01, 0x00, // type = Quote
        0x01, 0x00, // version 1
        0x50, 0x00, 0x00, 0x00, // length 80
        0x07, 0x00, 0x00, 0x00, // stream 7
        0x00, 0x00, 0x00, 0x00, // flags
        0x2a, 0, 0, 0, 0, 0, 0, 0, // sequence 42
        0xef, 0xbe, 0xad, 0xde, 0, 0, 0, 0, // tsc 0xdeadbeef
    ];

    #[test]
    fn emits_little_endian_golden_bytes() {
        let mut h = Header::new(MsgType::Quote, 1, 80);
        h.stream_id = 7;
        h.sequence = 42;
        h.publish_tsc = 0xdead_beef;
        assert_eq!(h.as_bytes(), &GOLDEN);
    }

    #[test]
    fn the_publish_lag_rides_in_the_flags_high_bits_only_with_an_ingress_stamp_and_when_it_fits() {
        let mut h = Header::new(MsgType::Quote, 1, 80);
        h.flags = FLAG_INGRESS_TSC;
        assert_eq!(h.publish_lag_ns(), None);
        h.set_publish_lag_ns(81);
        assert_eq!((h.publish_lag_ns(), h.flags & 0xffff), (Some(81), FLAG_INGRESS_TSC | FLAG_PUBLISH_LAG));
        h.set_publish_lag_ns(65_534);
        assert_eq!(h.publish_lag_ns(), Some(65_534));
        // Longer: stored as the most the bits hold ("at least"), never wrapped.
        for long in [65_535, 65_536, 1 << 40, u64::MAX] {
            h.set_publish_lag_ns(long);
            assert_eq!((h.publish_lag_ns(), h.flags & 0xffff), (Some(65_535), FLAG_INGRESS_TSC | FLAG_PUBLISH_LAG));
        }
        // Published again later: the new lag replaces the old one.
        h.set_publish_lag_ns(3);
        assert_eq!(h.publish_lag_ns(), Some(3));
        // A lag without an ingress stamp means nothing (publish_tsc is then the publish).
        h.set_publish_lag_ns(5);
        h.flags &= !FLAG_INGRESS_TSC;
        assert_eq!(h.publish_lag_ns(), None);
        // The other flags are left alone.
        h.flags = FLAG_INGRESS_TSC | FLAG_RECORDING_GAP;
        h.set_publish_lag_ns(7);
        assert_eq!(h.flags & 0xffff, FLAG_INGRESS_TSC | FLAG_RECORDING_GAP | FLAG_PUBLISH_LAG);
    }

    #[test]
    fn the_publish_begins_at_the_stamp_or_the_ingress_plus_a_lag_that_fit() {
        let mut h = Header::new(MsgType::Quote, 1, 80);
        h.publish_tsc = 1_000;
        assert_eq!(h.publish_begin_tsc(3.0), Some(1_000), "no ingress stamp: the stamp is the publish");
        h.flags = FLAG_INGRESS_TSC;
        assert_eq!(h.publish_begin_tsc(3.0), None, "an ingress stamp and no lag: not known");
        h.set_publish_lag_ns(65);
        assert_eq!(h.publish_begin_tsc(3.0), Some(1_195), "65 ns at 3 ticks a ns after the ingress");
        h.set_publish_lag_ns(65_534);
        assert_eq!(h.publish_begin_tsc(1.0), Some(66_534));
        // Stored as 65,535 ("at least"): the publish taken as no later than that, so the hop
        // from it is never short.
        h.set_publish_lag_ns(70_000);
        assert_eq!(h.publish_begin_tsc(1.0), Some(66_535));
        // Rounded down, never past the true start; a stamp near the top saturates, not wraps.
        h.set_publish_lag_ns(3);
        assert_eq!(h.publish_begin_tsc(2.9), Some(1_008));
        h.publish_tsc = u64::MAX - 1;
        assert_eq!(h.publish_begin_tsc(2.9), Some(u64::MAX));
    }

    #[test]
    fn peeks_unaligned_and_refuses_short_input() {
        let mut buf = [0u8; 33];
        buf[1..].copy_from_slice(&GOLDEN);
        let h = Header::peek(&buf[1..]).expect("32 bytes is enough");
        assert_eq!((h.msg_type, h.length, h.sequence), (MsgType::Quote as u16, 80, 42));
        assert!(Header::peek(&GOLDEN[..31]).is_none());
    }
}
