//! A trade print: a match that may not involve a visible order.
use core::mem::offset_of;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::enums::Side;
use crate::header::Header;
use crate::message::{impl_message, MsgType};

/// Trade print; `side` is the aggressor's side as a [`Side`] wire value (0 if unknown).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Trade {
    /// The common header: type, version, length, sequence and the publish TSC.
    pub header: Header,
    /// The instrument, by the venue's numeric id.
    pub instrument_id: u32,
    /// [`Side`](crate::Side) as its wire byte, as the feed gives it (normalised from ITCH `P`:
    /// the side of the resting non-displayed order matched); 0 when the feed does not say.
    pub side: u8,
    _pad: [u8; 3],
    /// The trade's price ([`PRICE_SCALE`](crate::PRICE_SCALE) fixed point).
    pub price: i64,
    /// Shares traded.
    pub qty: u64,
    /// The venue's id for the trade.
    pub trade_id: u64,
    /// The venue's timestamp, ns since midnight (exchange time).
    pub exchange_ts_ns: u64,
}

impl_message!(Trade, MsgType::Trade, 72);
const _: () = {
    assert!(offset_of!(Trade, instrument_id) == 32);
    assert!(offset_of!(Trade, side) == 36);
    assert!(offset_of!(Trade, price) == 40);
    assert!(offset_of!(Trade, qty) == 48);
    assert!(offset_of!(Trade, trade_id) == 56);
    assert!(offset_of!(Trade, exchange_ts_ns) == 64);
};

impl Trade {
    /// The side (see the `side` field), if the wire value is known.
    pub fn side(&self) -> Option<Side> {
        Side::from_wire(self.side)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{contract, golden, Message};

    fn sample() -> Trade {
        let mut t = Trade::new();
        t.instrument_id = 9;
        t.side = Side::Sell as u8;
        t.price = 10_000_000_000;
        t.qty = 300;
        t.trade_id = u64::MAX - 1;
        t.exchange_ts_ns = 1;
        t
    }

    #[test]
    fn layout_is_the_documented_little_endian_image() {
        let t = sample();
        let b = t.as_bytes();
        golden::at(b, 0, &[2, 0, 1, 0, 72, 0, 0, 0]);
        golden::at(b, 36, &[2, 0, 0, 0]);
        golden::at(b, 48, &300u64.to_le_bytes());
        golden::at(b, 56, &(u64::MAX - 1).to_le_bytes());
        assert_eq!(t.side(), Some(Side::Sell));
    }

    #[test]
    fn satisfies_the_message_contract() {
        contract::check_all(&sample());
    }
}
