//! L3: a resting order changed price and/or size (it keeps its id; queue priority is the
//! exchange's business and is not implied).
use core::mem::offset_of;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::header::Header;
use crate::message::{impl_message, MsgType};

/// Order modified in place.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct OrderModify {
    /// The common header: type, version, length, sequence and the publish TSC.
    pub header: Header,
    /// The instrument, by the venue's numeric id.
    pub instrument_id: u32,
    _pad: u32,
    /// The venue's order reference number.
    pub order_id: u64,
    /// The new price ([`PRICE_SCALE`](crate::PRICE_SCALE) fixed point).
    pub new_price: i64,
    /// The new quantity.
    pub new_qty: u64,
    /// The venue's timestamp, ns since midnight (exchange time).
    pub exchange_ts_ns: u64,
}

impl_message!(OrderModify, MsgType::OrderModify, 72);
const _: () = {
    assert!(offset_of!(OrderModify, instrument_id) == 32);
    assert!(offset_of!(OrderModify, order_id) == 40);
    assert!(offset_of!(OrderModify, new_price) == 48);
    assert!(offset_of!(OrderModify, new_qty) == 56);
    assert!(offset_of!(OrderModify, exchange_ts_ns) == 64);
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{contract, golden, Message};

    fn sample() -> OrderModify {
        let mut m = OrderModify::new();
        m.instrument_id = 5;
        m.order_id = 77;
        m.new_price = 1_000_000;
        m.new_qty = 50;
        m.exchange_ts_ns = 12;
        m
    }

    #[test]
    fn layout_is_the_documented_little_endian_image() {
        let m = sample();
        let b = m.as_bytes();
        golden::at(b, 0, &[4, 0, 1, 0, 72, 0, 0, 0]);
        golden::at(b, 40, &77u64.to_le_bytes());
        golden::at(b, 48, &1_000_000i64.to_le_bytes());
        golden::at(b, 56, &50u64.to_le_bytes());
    }

    #[test]
    fn satisfies_the_message_contract() {
        contract::check_all(&sample());
    }
}
