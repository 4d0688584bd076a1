//! L3: a resting order traded (in part or in full).
use core::mem::offset_of;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::header::Header;
use crate::message::{impl_message, MsgType};

/// Resting order executed. `price` is 0 when the execution was at the order's own price (ITCH
/// `E`), or the execution price otherwise (ITCH `C`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct OrderExecute {
    /// The common header: type, version, length, sequence and the publish TSC.
    pub header: Header,
    /// The instrument, by the venue's numeric id.
    pub instrument_id: u32,
    _pad: u32,
    /// The venue's order reference number.
    pub order_id: u64,
    /// Shares executed.
    pub exec_qty: u64,
    /// The execution's price ([`PRICE_SCALE`](crate::PRICE_SCALE) fixed point).
    pub price: i64,
    /// The venue's match number for the execution.
    pub match_id: u64,
    /// The venue's timestamp, ns since midnight (exchange time).
    pub exchange_ts_ns: u64,
}

impl_message!(OrderExecute, MsgType::OrderExecute, 80);
const _: () = {
    assert!(offset_of!(OrderExecute, instrument_id) == 32);
    assert!(offset_of!(OrderExecute, order_id) == 40);
    assert!(offset_of!(OrderExecute, exec_qty) == 48);
    assert!(offset_of!(OrderExecute, price) == 56);
    assert!(offset_of!(OrderExecute, match_id) == 64);
    assert!(offset_of!(OrderExecute, exchange_ts_ns) == 72);
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{contract, golden, Message};

    fn sample() -> OrderExecute {
        let mut m = OrderExecute::new();
        m.instrument_id = 2;
        m.order_id = 10;
        m.exec_qty = 25;
        m.price = 0;
        m.match_id = 555;
        m.exchange_ts_ns = 3;
        m
    }

    #[test]
    fn layout_is_the_documented_little_endian_image() {
        let m = sample();
        let b = m.as_bytes();
        golden::at(b, 0, &[6, 0, 1, 0, 80, 0, 0, 0]);
        golden::at(b, 48, &25u64.to_le_bytes());
        golden::at(b, 64, &555u64.to_le_bytes());
    }

    #[test]
    fn satisfies_the_message_contract() {
        contract::check_all(&sample());
    }
}
