//! A new order from a trading app.
use core::mem::offset_of;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::enums::{OrdType, Side, TimeInForce};
use crate::header::Header;
use crate::message::{impl_message, MsgType};

/// New order. `client_order_id` is the sender's id, unique per session.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct NewOrder {
    /// The common header: type, version, length, sequence and the publish TSC.
    pub header: Header,
    /// The sender's id for the order, unique per session.
    pub client_order_id: u64,
    /// The instrument, by the venue's numeric id.
    pub instrument_id: u32,
    /// [`Side`](crate::Side) as its wire byte (`side()` decodes it).
    pub side: u8,
    /// [`TimeInForce`](crate::TimeInForce) as its wire byte (`time_in_force()` decodes it).
    pub time_in_force: u8,
    /// [`OrdType`](crate::OrdType) as its wire byte (`ord_type()` decodes it).
    pub ord_type: u8,
    _pad: u8,
    /// The limit price ([`PRICE_SCALE`](crate::PRICE_SCALE) fixed point; ignored for market
    /// orders).
    pub price: i64,
    /// The quantity.
    pub qty: u64,
    /// The trading account the order is for.
    pub account: u64,
}

impl_message!(NewOrder, MsgType::NewOrder, 72);
const _: () = {
    assert!(offset_of!(NewOrder, client_order_id) == 32);
    assert!(offset_of!(NewOrder, instrument_id) == 40);
    assert!(offset_of!(NewOrder, side) == 44);
    assert!(offset_of!(NewOrder, time_in_force) == 45);
    assert!(offset_of!(NewOrder, ord_type) == 46);
    assert!(offset_of!(NewOrder, price) == 48);
    assert!(offset_of!(NewOrder, qty) == 56);
    assert!(offset_of!(NewOrder, account) == 64);
};

impl NewOrder {
    /// The order's side, if the wire value is known.
    pub fn side(&self) -> Option<Side> {
        Side::from_wire(self.side)
    }
    /// The order's time in force, if the wire value is known.
    pub fn time_in_force(&self) -> Option<TimeInForce> {
        TimeInForce::from_wire(self.time_in_force)
    }
    /// The order's type, if the wire value is known.
    pub fn ord_type(&self) -> Option<OrdType> {
        OrdType::from_wire(self.ord_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{contract, golden, Message};

    fn sample() -> NewOrder {
        let mut m = NewOrder::new();
        m.client_order_id = 1001;
        m.instrument_id = 4;
        m.side = Side::Buy as u8;
        m.time_in_force = TimeInForce::ImmediateOrCancel as u8;
        m.ord_type = OrdType::Limit as u8;
        m.price = 12_300_000_000;
        m.qty = 100;
        m.account = 42;
        m
    }

    #[test]
    fn layout_is_the_documented_little_endian_image() {
        let m = sample();
        let b = m.as_bytes();
        golden::at(b, 0, &[16, 0, 1, 0, 72, 0, 0, 0]);
        golden::at(b, 32, &1001u64.to_le_bytes());
        golden::at(b, 44, &[1, 1, 1, 0]);
        golden::at(b, 64, &42u64.to_le_bytes());
        assert_eq!(
            (m.side(), m.time_in_force(), m.ord_type()),
            (Some(Side::Buy), Some(TimeInForce::ImmediateOrCancel), Some(OrdType::Limit))
        );
    }

    #[test]
    fn satisfies_the_message_contract() {
        contract::check_all(&sample());
    }
}
