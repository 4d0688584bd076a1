//! Messages a feed handler could not recover: the gap, said out loud on the stream instead of
//! skipped in silence.
use core::mem::offset_of;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::header::Header;
use crate::message::{impl_message, MsgType};

/// `count` exchange messages from `first_sequence` (the exchange's sequence numbers, e.g.
/// MoldUDP64) were lost: neither line delivered them and re-requests did not recover them in
/// time. A subscriber's book may be wrong from here: rebuild it (snapshot, or replay).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct FeedGap {
    /// The common header: type, version, length, sequence and the publish TSC.
    pub header: Header,
    /// The first sequence number lost.
    pub first_sequence: u64,
    /// How many messages were lost.
    pub count: u64,
}

impl_message!(FeedGap, MsgType::FeedGap, 48);
const _: () = {
    assert!(offset_of!(FeedGap, first_sequence) == 32);
    assert!(offset_of!(FeedGap, count) == 40);
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{contract, golden, Message};

    fn sample() -> FeedGap {
        let mut m = FeedGap::new();
        m.first_sequence = 1001;
        m.count = 7;
        m
    }

    #[test]
    fn layout_is_the_documented_little_endian_image() {
        let m = sample();
        let b = m.as_bytes();
        golden::at(b, 0, &[8, 0, 1, 0, 48, 0, 0, 0]);
        golden::at(b, 32, &1001u64.to_le_bytes());
        golden::at(b, 40, &7u64.to_le_bytes());
    }

    #[test]
    fn satisfies_the_message_contract() {
        contract::check_all(&sample());
    }
}
