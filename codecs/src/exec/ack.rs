//! The venue accepted an order (or a cancel / replace).
use core::mem::offset_of;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::header::Header;
use crate::message::{impl_message, MsgType};

/// Acknowledgement of `client_order_id`, with the venue's own id.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct ExecAck {
    /// The common header: type, version, length, sequence and the publish TSC.
    pub header: Header,
    /// The sender's id for the order, unique per session.
    pub client_order_id: u64,
    /// The venue's id for the order.
    pub exchange_order_id: u64,
    /// The instrument, by the venue's numeric id.
    pub instrument_id: u32,
    _pad: u32,
    /// The venue's timestamp in ns, on the venue's clock (tickbus's gateway: ns since it
    /// started).
    pub exchange_ts_ns: u64,
}

impl_message!(ExecAck, MsgType::ExecAck, 64);
const _: () = {
    assert!(offset_of!(ExecAck, client_order_id) == 32);
    assert!(offset_of!(ExecAck, exchange_order_id) == 40);
    assert!(offset_of!(ExecAck, instrument_id) == 48);
    assert!(offset_of!(ExecAck, exchange_ts_ns) == 56);
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{contract, golden, Message};

    fn sample() -> ExecAck {
        let mut m = ExecAck::new();
        m.client_order_id = 1001;
        m.exchange_order_id = 9_000_001;
        m.instrument_id = 4;
        m.exchange_ts_ns = 5;
        m
    }

    #[test]
    fn layout_is_the_documented_little_endian_image() {
        let m = sample();
        let b = m.as_bytes();
        golden::at(b, 0, &[32, 0, 1, 0, 64, 0, 0, 0]);
        golden::at(b, 40, &9_000_001u64.to_le_bytes());
        golden::at(b, 56, &5u64.to_le_bytes());
    }

    #[test]
    fn satisfies_the_message_contract() {
        contract::check_all(&sample());
    }
}
