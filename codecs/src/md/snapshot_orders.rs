//! One chunk of a whole-book (L3) snapshot: every resting order of every instrument, as of a
//! market-data position, cut into fixed-layout messages a ring slot holds. A late joiner loads
//! the chunks of one snapshot into an empty book (`book::SnapshotLoader`) and takes the market
//! data from `as_of` on, instead of replaying the day from the open.
//!
//! Orders come instrument by instrument (ascending), bids then asks, level by level from the
//! worst price to the best, and each level's orders in their queue order (first to trade first):
//! adding them in that order rebuilds every queue as it was.
use core::mem::{offset_of, size_of};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::enums::Side;
use crate::header::Header;
use crate::message::{impl_message, MsgType};

/// Orders per [`SnapshotOrders`] chunk.
pub const SNAPSHOT_CHUNK_ORDERS: usize = 16;

/// One resting order in a snapshot.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct RestingOrder {
    /// The venue's order reference number.
    pub order_id: u64,
    /// Its price ([`PRICE_SCALE`](crate::PRICE_SCALE) fixed point).
    pub price: i64,
    /// Its quantity still resting.
    pub qty: u64,
    /// The instrument, by the venue's numeric id.
    pub instrument_id: u32,
    /// [`Side`](crate::Side) as its wire byte.
    pub side: u8,
    _pad: [u8; 3],
}

impl RestingOrder {
    /// An order `order_id` resting on `side` of `instrument_id`: `qty` at `price`.
    pub const fn new(order_id: u64, instrument_id: u32, side: Side, price: i64, qty: u64) -> RestingOrder {
        RestingOrder { order_id, price, qty, instrument_id, side: side as u8, _pad: [0; 3] }
    }
}

/// Chunk `chunk` of `chunks` of the snapshot of the whole book as of market-data position
/// `as_of`: `count` valid orders in `orders`, the rest zero.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct SnapshotOrders {
    /// The common header: type, version, length, sequence and the publish TSC.
    pub header: Header,
    /// The market-data position the snapshot reflects: every message before it applied, none
    /// from it on. A joiner goes on from here.
    pub as_of: u64,
    /// Resting orders in the whole snapshot (the chunks' counts add up to it).
    pub total_orders: u64,
    /// Market-data messages the snapshot's maker knew it had lost before `as_of` (gaps in its
    /// input): non-zero means the book may be wrong.
    pub lost: u64,
    /// The incarnation of the market-data stream it is of (the journal's source id; 0: not
    /// known): a joiner refuses a snapshot of another incarnation, as it refuses such a journal.
    pub source: u64,
    /// This chunk's index, from 0.
    pub chunk: u32,
    /// Chunks in the snapshot (at least 1: an empty book is one chunk of no orders).
    pub chunks: u32,
    /// Valid orders in `orders`.
    pub count: u32,
    _pad: u32,
    /// The orders: instrument by instrument (ascending), bids then asks, level by level from
    /// the worst price to the best, each level's orders in queue order (first to trade first).
    /// Every chunk but the last holds 16; the last holds the rest.
    pub orders: [RestingOrder; SNAPSHOT_CHUNK_ORDERS],
}

impl_message!(SnapshotOrders, MsgType::SnapshotOrders, 592);
const _: () = {
    assert!(size_of::<RestingOrder>() == 32);
    assert!(offset_of!(RestingOrder, price) == 8);
    assert!(offset_of!(RestingOrder, qty) == 16);
    assert!(offset_of!(RestingOrder, instrument_id) == 24);
    assert!(offset_of!(RestingOrder, side) == 28);
    assert!(offset_of!(SnapshotOrders, as_of) == 32);
    assert!(offset_of!(SnapshotOrders, total_orders) == 40);
    assert!(offset_of!(SnapshotOrders, lost) == 48);
    assert!(offset_of!(SnapshotOrders, source) == 56);
    assert!(offset_of!(SnapshotOrders, chunk) == 64);
    assert!(offset_of!(SnapshotOrders, chunks) == 68);
    assert!(offset_of!(SnapshotOrders, count) == 72);
    assert!(offset_of!(SnapshotOrders, orders) == 80);
};

impl SnapshotOrders {
    /// The valid orders. Clamps a corrupt count instead of panicking.
    pub fn resting(&self) -> &[RestingOrder] {
        &self.orders[..(self.count as usize).min(SNAPSHOT_CHUNK_ORDERS)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{contract, golden, Message};

    fn sample() -> SnapshotOrders {
        let mut m = SnapshotOrders::new();
        (m.as_of, m.total_orders, m.lost, m.source, m.chunk, m.chunks, m.count) = (1000, 17, 0, 0xab, 1, 2, 1);
        m.orders[0] = RestingOrder::new(77, 5, Side::Sell, 1_000_000_000, 300);
        m
    }

    #[test]
    fn layout_is_the_documented_little_endian_image() {
        let m = sample();
        let b = m.as_bytes();
        golden::at(b, 0, &[9, 0, 1, 0, 0x50, 0x02, 0, 0]);
        golden::at(b, 32, &1000u64.to_le_bytes());
        golden::at(b, 56, &0xabu64.to_le_bytes());
        golden::at(b, 64, &[1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0]);
        golden::at(b, 80, &77u64.to_le_bytes());
        golden::at(b, 80 + 24, &[5, 0, 0, 0, Side::Sell as u8]);
    }

    #[test]
    fn resting_clamps_a_corrupt_count() {
        let mut m = sample();
        assert_eq!(m.resting().len(), 1);
        m.count = 1000;
        assert_eq!(m.resting().len(), SNAPSHOT_CHUNK_ORDERS);
    }

    #[test]
    fn satisfies_the_message_contract() {
        contract::check_all(&sample());
    }
}
