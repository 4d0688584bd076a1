//! A fixed-depth price-level snapshot of one instrument: what a reader that was lapped (lossy
//! mode) rebuilds from.
use core::mem::{offset_of, size_of};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::header::Header;
use crate::message::{impl_message, MsgType};

/// Levels per side in a [`BookSnapshot`].
pub const SNAPSHOT_DEPTH: usize = 10;

/// One aggregated price level.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Level {
    /// The level's price ([`PRICE_SCALE`](crate::PRICE_SCALE) fixed point).
    pub price: i64,
    /// Total quantity at the level.
    pub qty: u64,
    /// Orders resting at this price.
    pub orders: u32,
    _pad: u32,
}

impl Level {
    /// A level at `price` with `qty` in `orders` orders.
    pub const fn new(price: i64, qty: u64, orders: u32) -> Level {
        Level { price, qty, orders, _pad: 0 }
    }
}

/// Book snapshot: `bid_depth` / `ask_depth` levels are valid, best first; the rest are zero.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct BookSnapshot {
    /// The common header: type, version, length, sequence and the publish TSC.
    pub header: Header,
    /// The instrument, by the venue's numeric id.
    pub instrument_id: u32,
    /// Valid levels in `bids`.
    pub bid_depth: u8,
    /// Valid levels in `asks`.
    pub ask_depth: u8,
    _pad: [u8; 2],
    /// The venue's timestamp, ns since midnight (exchange time).
    pub exchange_ts_ns: u64,
    /// Bid levels, best (highest) first.
    pub bids: [Level; SNAPSHOT_DEPTH],
    /// Ask levels, best (lowest) first.
    pub asks: [Level; SNAPSHOT_DEPTH],
}

impl_message!(BookSnapshot, MsgType::BookSnapshot, 528);
const _: () = {
    assert!(size_of::<Level>() == 24);
    assert!(offset_of!(Level, qty) == 8);
    assert!(offset_of!(Level, orders) == 16);
    assert!(offset_of!(BookSnapshot, instrument_id) == 32);
    assert!(offset_of!(BookSnapshot, bid_depth) == 36);
    assert!(offset_of!(BookSnapshot, ask_depth) == 37);
    assert!(offset_of!(BookSnapshot, exchange_ts_ns) == 40);
    assert!(offset_of!(BookSnapshot, bids) == 48);
    assert!(offset_of!(BookSnapshot, asks) == 288);
};

impl BookSnapshot {
    /// The valid bid levels, best first. Clamps a corrupt depth instead of panicking.
    pub fn bid_levels(&self) -> &[Level] {
        &self.bids[..usize::from(self.bid_depth).min(SNAPSHOT_DEPTH)]
    }

    /// The valid ask levels, best first. Clamps a corrupt depth instead of panicking.
    pub fn ask_levels(&self) -> &[Level] {
        &self.asks[..usize::from(self.ask_depth).min(SNAPSHOT_DEPTH)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{contract, golden, Message};

    fn sample() -> BookSnapshot {
        let mut m = BookSnapshot::new();
        m.instrument_id = 8;
        m.bid_depth = 2;
        m.ask_depth = 1;
        m.exchange_ts_ns = 4;
        m.bids[0] = Level::new(100, 10, 1);
        m.bids[1] = Level::new(99, 20, 2);
        m.asks[0] = Level::new(101, 5, 1);
        m
    }

    #[test]
    fn layout_is_the_documented_little_endian_image() {
        let m = sample();
        let b = m.as_bytes();
        golden::at(b, 0, &[7, 0, 1, 0, 0x10, 0x02, 0, 0]);
        golden::at(b, 36, &[2, 1]);
        golden::at(b, 48 + 24, &99i64.to_le_bytes());
        golden::at(b, 288, &101i64.to_le_bytes());
        golden::at(b, 288 + 16, &1u32.to_le_bytes());
    }

    #[test]
    fn depth_accessors_clamp_corrupt_depths() {
        let mut m = sample();
        assert_eq!(m.bid_levels().len(), 2);
        assert_eq!(m.ask_levels()[0].price, 101);
        m.bid_depth = 200;
        assert_eq!(m.bid_levels().len(), SNAPSHOT_DEPTH);
    }

    #[test]
    fn satisfies_the_message_contract() {
        contract::check_all(&sample());
    }
}
