//! A request to cancel a working order.
use core::mem::offset_of;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::header::Header;
use crate::message::{impl_message, MsgType};

/// Cancel request for the order the sender called `orig_client_order_id`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct CancelOrder {
    /// The common header: type, version, length, sequence and the publish TSC.
    pub header: Header,
    /// The sender's id for the cancel, unique per session.
    pub client_order_id: u64,
    /// The `client_order_id` of the order this acts on.
    pub orig_client_order_id: u64,
    /// The instrument, by the venue's numeric id.
    pub instrument_id: u32,
    _pad: u32,
}

impl_message!(CancelOrder, MsgType::CancelOrder, 56);
const _: () = {
    assert!(offset_of!(CancelOrder, client_order_id) == 32);
    assert!(offset_of!(CancelOrder, orig_client_order_id) == 40);
    assert!(offset_of!(CancelOrder, instrument_id) == 48);
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{contract, golden, Message};

    fn sample() -> CancelOrder {
        let mut m = CancelOrder::new();
        m.client_order_id = 2;
        m.orig_client_order_id = 1;
        m.instrument_id = 6;
        m
    }

    #[test]
    fn layout_is_the_documented_little_endian_image() {
        let m = sample();
        let b = m.as_bytes();
        golden::at(b, 0, &[17, 0, 1, 0, 56, 0, 0, 0]);
        golden::at(b, 40, &1u64.to_le_bytes());
        golden::at(b, 48, &6u32.to_le_bytes());
    }

    #[test]
    fn satisfies_the_message_contract() {
        contract::check_all(&sample());
    }
}
