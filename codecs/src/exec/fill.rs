//! An order traded, in part (`leaves_qty > 0`) or in full.
use core::mem::offset_of;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::enums::Side;
use crate::header::Header;
use crate::message::{impl_message, MsgType};

/// Fill of `client_order_id`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct ExecFill {
    /// The common header: type, version, length, sequence and the publish TSC.
    pub header: Header,
    /// The sender's id for the order, unique per session.
    pub client_order_id: u64,
    /// The venue's id for the order.
    pub exchange_order_id: u64,
    /// The instrument, by the venue's numeric id.
    pub instrument_id: u32,
    /// [`Side`](crate::Side) as its wire byte (`side()` decodes it).
    pub side: u8,
    _pad: [u8; 3],
    /// The fill's price ([`PRICE_SCALE`](crate::PRICE_SCALE) fixed point).
    pub fill_px: i64,
    /// The fill's quantity.
    pub fill_qty: u64,
    /// Quantity of the order not filled by this fill. An immediate-or-cancel venue (tickbus's
    /// gateway) cancels it at once, so it is what was cancelled; 0: filled in full.
    pub leaves_qty: u64,
    /// The venue's id for the execution.
    pub exec_id: u64,
    /// The venue's timestamp in ns, on the venue's clock (tickbus's gateway: ns since it
    /// started).
    pub exchange_ts_ns: u64,
}

impl_message!(ExecFill, MsgType::ExecFill, 96);
const _: () = {
    assert!(offset_of!(ExecFill, client_order_id) == 32);
    assert!(offset_of!(ExecFill, exchange_order_id) == 40);
    assert!(offset_of!(ExecFill, instrument_id) == 48);
    assert!(offset_of!(ExecFill, side) == 52);
    assert!(offset_of!(ExecFill, fill_px) == 56);
    assert!(offset_of!(ExecFill, fill_qty) == 64);
    assert!(offset_of!(ExecFill, leaves_qty) == 72);
    assert!(offset_of!(ExecFill, exec_id) == 80);
    assert!(offset_of!(ExecFill, exchange_ts_ns) == 88);
};

impl ExecFill {
    /// The filled order's side, if the wire value is known.
    pub fn side(&self) -> Option<Side> {
        Side::from_wire(self.side)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{contract, golden, Message};

    fn sample() -> ExecFill {
        let mut m = ExecFill::new();
        m.client_order_id = 1001;
        m.exchange_order_id = 9_000_001;
        m.instrument_id = 4;
        m.side = Side::Buy as u8;
        m.fill_px = 12_300_000_000;
        m.fill_qty = 40;
        m.leaves_qty = 60;
        m.exec_id = 31337;
        m.exchange_ts_ns = 6;
        m
    }

    #[test]
    fn layout_is_the_documented_little_endian_image() {
        let m = sample();
        let b = m.as_bytes();
        golden::at(b, 0, &[33, 0, 1, 0, 96, 0, 0, 0]);
        golden::at(b, 52, &[1]);
        golden::at(b, 72, &60u64.to_le_bytes());
        golden::at(b, 80, &31337u64.to_le_bytes());
        assert_eq!(m.side(), Some(Side::Buy));
    }

    #[test]
    fn satisfies_the_message_contract() {
        contract::check_all(&sample());
    }
}
