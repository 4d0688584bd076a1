//! L3: a resting order left the book without trading (cancelled in full).
use core::mem::offset_of;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::header::Header;
use crate::message::{impl_message, MsgType};

/// Order removed from the book.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct OrderDelete {
    /// The common header: type, version, length, sequence and the publish TSC.
    pub header: Header,
    /// The instrument, by the venue's numeric id.
    pub instrument_id: u32,
    _pad: u32,
    /// The venue's order reference number.
    pub order_id: u64,
    /// The venue's timestamp, ns since midnight (exchange time).
    pub exchange_ts_ns: u64,
}

impl_message!(OrderDelete, MsgType::OrderDelete, 56);
const _: () = {
    assert!(offset_of!(OrderDelete, instrument_id) == 32);
    assert!(offset_of!(OrderDelete, order_id) == 40);
    assert!(offset_of!(OrderDelete, exchange_ts_ns) == 48);
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{contract, golden, Message};

    fn sample() -> OrderDelete {
        let mut m = OrderDelete::new();
        m.instrument_id = 1;
        m.order_id = 1 << 40;
        m.exchange_ts_ns = 2;
        m
    }

    #[test]
    fn layout_is_the_documented_little_endian_image() {
        let m = sample();
        let b = m.as_bytes();
        golden::at(b, 0, &[5, 0, 1, 0, 56, 0, 0, 0]);
        golden::at(b, 40, &[0, 0, 0, 0, 0, 1, 0, 0]);
        golden::at(b, 48, &2u64.to_le_bytes());
    }

    #[test]
    fn satisfies_the_message_contract() {
        contract::check_all(&sample());
    }
}
