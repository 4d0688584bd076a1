//! A sender's TSC carried in a MoldUDP64 datagram, so a receiver on the same host can time the
//! wire itself (send -> taken) and everything after it from one clock.
//!
//! The stamp is the low 48 bits of the sender's TSC, written where the datagram's first ITCH
//! message keeps its timestamp (also 48 bits). A real venue writes nanoseconds since midnight
//! there: only a sender that stamps on purpose (the latency lab's, a test's) makes it a TSC, and
//! a receiver reads it as one only when asked (`tickbus feed --wire-stamps`). 48 bits of a GHz
//! TSC wrap every few days; [`sent_tsc`] rebuilds the whole value from the receiver's own TSC,
//! which is right while send and receipt are less than one wrap apart.
//!
//! ```text
//!  MoldUDP64 header (20) | length (2) | type (1) locate (2) tracking (2) | timestamp (6) | ...
//!                                                                         ^ byte 27
//! ```

/// Where the first message's timestamp starts in a MoldUDP64 datagram.
pub const STAMP_AT: usize = 20 + 2 + 1 + 2 + 2;
const MASK: u64 = (1 << 48) - 1;

/// Writes `tsc`'s low 48 bits into the first message's timestamp. False (nothing written) when
/// the datagram has no message long enough to hold one (a heartbeat, an end of session).
#[inline]
pub fn stamp(datagram: &mut [u8], tsc: u64) -> bool {
    if !holds_stamp(datagram) {
        return false;
    }
    let b = (tsc & MASK).to_be_bytes();
    datagram[STAMP_AT..STAMP_AT + 6].copy_from_slice(&b[2..]);
    true
}

/// The sender's whole TSC from the stamp and `now` (the receiver's TSC): the value whose low 48
/// bits are the stamp nearest to `now`, before or after it (a sender's core may read its TSC a
/// little ahead of the receiver's: skew, which the caller sees as `sent > now`). None when the
/// datagram holds no stamp.
#[inline]
pub fn sent_tsc(datagram: &[u8], now: u64) -> Option<u64> {
    if !holds_stamp(datagram) {
        return None;
    }
    let low = datagram[STAMP_AT..STAMP_AT + 6].iter().fold(0u64, |a, &x| (a << 8) | u64::from(x));
    // How far the stamp's low bits lie ahead of now's, modulo 2^48: under half the range is
    // ahead (skew), the rest behind (the usual case).
    let ahead = low.wrapping_sub(now) & MASK;
    Some(if ahead < 1 << 47 { now.wrapping_add(ahead) } else { now.wrapping_sub((1 << 48) - ahead) })
}

/// A first message whose length field says it reaches past the timestamp, and the bytes there.
#[inline]
fn holds_stamp(d: &[u8]) -> bool {
    let count = d.get(18..20).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let first_len = d.get(20..22).map(|b| u16::from_be_bytes([b[0], b[1]]) as usize);
    matches!((count, first_len), (Some(1..=0xFFFE), Some(len)) if len >= 11 && d.len() >= 22 + len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickbus_codecs::moldudp64::PacketBuilder;

    fn datagram(message: &[u8]) -> Vec<u8> {
        let mut b = PacketBuilder::new(*b"STAMPTEST1", 7, 1400);
        b.push(message);
        b.take(|bytes| bytes.to_vec())
    }

    #[test]
    fn a_stamp_comes_back_whole_across_a_wrap_of_its_low_bits() {
        // An ITCH add order's first 11 bytes: type, locate, tracking, timestamp.
        let mut d = datagram(&[b'A', 0, 1, 0, 2, 9, 9, 9, 9, 9, 9, 1, 2, 3]);
        let sent = (5u64 << 48) + MASK - 10; // 11 ticks before the low bits wrap
        assert!(stamp(&mut d, sent));
        assert_eq!(&d[STAMP_AT - 5..STAMP_AT], &[b'A', 0, 1, 0, 2], "only the timestamp is written");
        assert_eq!(sent_tsc(&d, sent), Some(sent));
        assert_eq!(sent_tsc(&d, sent + 100), Some(sent), "received after the wrap");
        assert_eq!(sent_tsc(&d, sent + (1 << 40)), Some(sent));
    }

    #[test]
    fn a_stamp_a_little_ahead_of_the_receiver_or_early_in_uptime_stays_near_now() {
        let mut d = datagram(&[b'A', 0, 1, 0, 2, 9, 9, 9, 9, 9, 9]);
        // A TSC under 2^48 (a host up for less than a day or so): sent before now.
        assert!(stamp(&mut d, 90));
        assert_eq!(sent_tsc(&d, 100), Some(90));
        // The sender's core a tick ahead of the receiver's (skew): one tick after now, not a
        // wrap earlier.
        assert_eq!(sent_tsc(&d, 89), Some(90));
        let sent = (3u64 << 48) + 7;
        assert!(stamp(&mut d, sent));
        assert_eq!(sent_tsc(&d, sent - 1), Some(sent), "ahead across the high bits");
        assert_eq!(sent_tsc(&d, (3u64 << 48) - 5), Some(sent), "ahead across a wrap of the low bits");
    }

    #[test]
    fn a_datagram_without_a_message_long_enough_holds_no_stamp() {
        let mut heartbeat = datagram(&[]);
        heartbeat.truncate(20);
        assert!(!stamp(&mut heartbeat, 1));
        assert_eq!(sent_tsc(&heartbeat, 1), None);
        let mut short = datagram(&[b'S', 0, 1, 0, 2, 9, 9, 9, 9, 9]); // 10 bytes: one short
        assert!(!stamp(&mut short, 1));
        assert_eq!(sent_tsc(&short, 1), None);
        // End of session: count 0xFFFF, no message.
        let mut end = heartbeat.clone();
        end[18..20].copy_from_slice(&0xFFFFu16.to_be_bytes());
        end.extend_from_slice(&[0, 11, b'A', 0, 1, 0, 2, 9, 9, 9, 9, 9, 9]);
        assert_eq!(sent_tsc(&end, 1), None);
        // A length field that says 11 over a datagram cut inside the stamp, and one that says
        // more than the datagram holds.
        let mut cut = datagram(&[b'A', 0, 1, 0, 2, 9, 9, 9, 9, 9, 9]);
        cut.truncate(STAMP_AT + 3);
        assert_eq!(sent_tsc(&cut, 1), None);
        let mut long = datagram(&[b'A', 0, 1, 0, 2, 9, 9, 9, 9, 9, 9]);
        long[20..22].copy_from_slice(&12u16.to_be_bytes());
        assert_eq!(sent_tsc(&long, 1), None);
    }
}
