//! A request to change a working order's price and/or size (cancel-replace).
use core::mem::offset_of;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::header::Header;
use crate::message::{impl_message, MsgType};

/// Replace request; the replacement is known as `client_order_id` from then on.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct ReplaceOrder {
    /// The common header: type, version, length, sequence and the publish TSC.
    pub header: Header,
    /// The sender's id for the replacement, unique per session.
    pub client_order_id: u64,
    /// The `client_order_id` of the order this acts on.
    pub orig_client_order_id: u64,
    /// The instrument, by the venue's numeric id.
    pub instrument_id: u32,
    _pad: u32,
    /// The new price ([`PRICE_SCALE`](crate::PRICE_SCALE) fixed point).
    pub new_price: i64,
    /// The new quantity.
    pub new_qty: u64,
}

impl_message!(ReplaceOrder, MsgType::ReplaceOrder, 72);
const _: () = {
    assert!(offset_of!(ReplaceOrder, client_order_id) == 32);
    assert!(offset_of!(ReplaceOrder, orig_client_order_id) == 40);
    assert!(offset_of!(ReplaceOrder, instrument_id) == 48);
    assert!(offset_of!(ReplaceOrder, new_price) == 56);
    assert!(offset_of!(ReplaceOrder, new_qty) == 64);
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{contract, golden, Message};

    fn sample() -> ReplaceOrder {
        let mut m = ReplaceOrder::new();
        m.client_order_id = 3;
        m.orig_client_order_id = 2;
        m.instrument_id = 6;
        m.new_price = 7;
        m.new_qty = 8;
        m
    }

    #[test]
    fn layout_is_the_documented_little_endian_image() {
        let m = sample();
        let b = m.as_bytes();
        golden::at(b, 0, &[18, 0, 1, 0, 72, 0, 0, 0]);
        golden::at(b, 56, &7i64.to_le_bytes());
        golden::at(b, 64, &8u64.to_le_bytes());
    }

    #[test]
    fn satisfies_the_message_contract() {
        contract::check_all(&sample());
    }
}
