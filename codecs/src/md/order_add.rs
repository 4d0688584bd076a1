//! L3: a new resting order became visible in the book.
use core::mem::offset_of;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::enums::Side;
use crate::header::Header;
use crate::message::{impl_message, MsgType};

/// Order added to the book.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct OrderAdd {
    /// The common header: type, version, length, sequence and the publish TSC.
    pub header: Header,
    /// The instrument, by the venue's numeric id.
    pub instrument_id: u32,
    /// [`Side`](crate::Side) as its wire byte (`side()` decodes it).
    pub side: u8,
    _pad: [u8; 3],
    /// The venue's order reference number (later events name it).
    pub order_id: u64,
    /// The order's price ([`PRICE_SCALE`](crate::PRICE_SCALE) fixed point).
    pub price: i64,
    /// The order's quantity.
    pub qty: u64,
    /// The venue's timestamp, ns since midnight (exchange time).
    pub exchange_ts_ns: u64,
}

impl_message!(OrderAdd, MsgType::OrderAdd, 72);
const _: () = {
    assert!(offset_of!(OrderAdd, instrument_id) == 32);
    assert!(offset_of!(OrderAdd, side) == 36);
    assert!(offset_of!(OrderAdd, order_id) == 40);
    assert!(offset_of!(OrderAdd, price) == 48);
    assert!(offset_of!(OrderAdd, qty) == 56);
    assert!(offset_of!(OrderAdd, exchange_ts_ns) == 64);
};

impl OrderAdd {
    /// The order's side, if the wire value is known.
    pub fn side(&self) -> Option<Side> {
        Side::from_wire(self.side)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{contract, golden, Message};

    fn sample() -> OrderAdd {
        let mut m = OrderAdd::new();
        m.instrument_id = 3;
        m.side = Side::Buy as u8;
        m.order_id = 0xAABB_CCDD;
        m.price = 995_000_000;
        m.qty = 17;
        m.exchange_ts_ns = 99;
        m
    }

    #[test]
    fn layout_is_the_documented_little_endian_image() {
        let m = sample();
        let b = m.as_bytes();
        golden::at(b, 0, &[3, 0, 1, 0, 72, 0, 0, 0]);
        golden::at(b, 36, &[1]);
        golden::at(b, 40, &[0xDD, 0xCC, 0xBB, 0xAA, 0, 0, 0, 0]);
        golden::at(b, 56, &17u64.to_le_bytes());
        assert_eq!(m.side(), Some(Side::Buy));
    }

    #[test]
    fn satisfies_the_message_contract() {
        contract::check_all(&sample());
    }
}
