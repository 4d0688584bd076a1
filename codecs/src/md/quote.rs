//! Top-of-book quote: best bid and offer of one instrument.
use core::mem::offset_of;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::header::Header;
use crate::message::{impl_message, MsgType};

/// Best bid and offer. Prices in [`crate::PRICE_SCALE`] units; a side with no orders has qty 0.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Quote {
    /// The common header: type, version, length, sequence and the publish TSC.
    pub header: Header,
    /// The instrument, by the venue's numeric id.
    pub instrument_id: u32,
    _pad: u32,
    /// The best bid price ([`PRICE_SCALE`](crate::PRICE_SCALE) fixed point).
    pub bid_px: i64,
    /// Quantity at the best bid.
    pub bid_qty: u64,
    /// The best ask price ([`PRICE_SCALE`](crate::PRICE_SCALE) fixed point).
    pub ask_px: i64,
    /// Quantity at the best ask.
    pub ask_qty: u64,
    /// Exchange timestamp, ns since midnight (exchange local time, as ITCH sends it).
    pub exchange_ts_ns: u64,
}

impl_message!(Quote, MsgType::Quote, 80);
const _: () = {
    assert!(offset_of!(Quote, instrument_id) == 32);
    assert!(offset_of!(Quote, bid_px) == 40);
    assert!(offset_of!(Quote, bid_qty) == 48);
    assert!(offset_of!(Quote, ask_px) == 56);
    assert!(offset_of!(Quote, ask_qty) == 64);
    assert!(offset_of!(Quote, exchange_ts_ns) == 72);
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{contract, golden, Message};

    fn sample() -> Quote {
        let mut q = Quote::new();
        q.instrument_id = 0x0102_0304;
        q.bid_px = -5;
        q.bid_qty = 100;
        q.ask_px = 1_234_500_000_000;
        q.ask_qty = 200;
        q.exchange_ts_ns = 34_200_000_000_000;
        q
    }

    #[test]
    fn layout_is_the_documented_little_endian_image() {
        let q = sample();
        let b = q.as_bytes();
        golden::at(b, 0, &[1, 0, 1, 0, 80, 0, 0, 0]);
        golden::at(b, 32, &[4, 3, 2, 1, 0, 0, 0, 0]);
        golden::at(b, 40, &(-5i64).to_le_bytes());
        golden::at(b, 56, &1_234_500_000_000i64.to_le_bytes());
        golden::at(b, 72, &34_200_000_000_000u64.to_le_bytes());
    }

    #[test]
    fn satisfies_the_message_contract() {
        contract::check_all(&sample());
    }
}
