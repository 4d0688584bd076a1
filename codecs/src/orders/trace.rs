//! The per-hop trace an order carries behind it on an order stream, so the gateway can say where
//! each order's tick-to-trade went.
//!
//! ```text
//!  order stream payload:  | NewOrder (72 B) | OrderTrace (48 B) |
//!
//!  0              8             16             24           32             40              48
//!  +--------------+-------------+--------------+------------+--------------+---------------+
//!  | tick_sequence| ingress_tsc | receive_tsc  | book_tsc   | decision_tsc | md_publish_tsc|
//!  +--------------+-------------+--------------+------------+--------------+---------------+
//! ```
//! All TSCs are raw ticks of the host's invariant TSC, comparable across processes on one host
//! only; convert with the ring header's ticks per ns. The order's own header carries the order's
//! publish TSC, and the gateway stamps its arrival, which makes six points and five hops:
//! ingress (feed) -> receive (strategy) -> book applied -> decision -> order publish -> gateway.
//! `md_publish_tsc`, when known, is when the tick's own publish began: tick-to-trade from there
//! leaves out the feed's work before it (its normalising), which is where the latency lab's
//! chained floor starts too.
use core::mem::{offset_of, size_of};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::NewOrder;
use crate::message::{DecodeError, Message};

/// Where the tick that caused an order was, and when, on the way to the order.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct OrderTrace {
    /// The market-data message's sequence (its position on the market-data stream).
    pub tick_sequence: u64,
    /// When the tick's packet entered the host (the feed handler's ingress TSC).
    pub ingress_tsc: u64,
    /// When the strategy received the market-data message.
    pub receive_tsc: u64,
    /// When the strategy's book had applied it.
    pub book_tsc: u64,
    /// When the strategy had decided to send this order.
    pub decision_tsc: u64,
    /// When the tick's publish began, if its publisher said ([`crate::Header::publish_lag_ns`]
    /// after the ingress, or the publish itself when the header carries no ingress stamp);
    /// 0 when not known.
    pub md_publish_tsc: u64,
}

/// Bytes of an [`OrderTrace`].
pub const TRACE_LEN: usize = 48;
/// Bytes of a traced order: the [`NewOrder`] and its [`OrderTrace`].
pub const TRACED_ORDER_LEN: usize = NewOrder::LEN + TRACE_LEN;

const _: () = {
    assert!(size_of::<OrderTrace>() == TRACE_LEN);
    assert!(offset_of!(OrderTrace, tick_sequence) == 0);
    assert!(offset_of!(OrderTrace, ingress_tsc) == 8);
    assert!(offset_of!(OrderTrace, receive_tsc) == 16);
    assert!(offset_of!(OrderTrace, book_tsc) == 24);
    assert!(offset_of!(OrderTrace, decision_tsc) == 32);
    assert!(offset_of!(OrderTrace, md_publish_tsc) == 40);
};

/// A [`NewOrder`] followed by its [`OrderTrace`], as one order-stream payload.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct TracedOrder {
    /// The order.
    pub order: NewOrder,
    /// Where and when the tick that caused it was.
    pub trace: OrderTrace,
}

const _: () = assert!(size_of::<TracedOrder>() == TRACED_ORDER_LEN && offset_of!(TracedOrder, trace) == NewOrder::LEN);

impl TracedOrder {
    /// Reads a traced order from an order-stream payload: exactly [`TRACED_ORDER_LEN`] bytes,
    /// whose first part is a valid [`NewOrder`] (type, version and length checked).
    pub fn parse(bytes: &[u8]) -> Result<&TracedOrder, DecodeError> {
        if bytes.len() != TRACED_ORDER_LEN {
            return Err(DecodeError::WrongLength {
                msg_type: NewOrder::TYPE,
                expected: TRACED_ORDER_LEN,
                got: bytes.len(),
            });
        }
        NewOrder::parse(&bytes[..NewOrder::LEN])?;
        TracedOrder::ref_from_bytes(bytes).map_err(|_| DecodeError::Misaligned { msg_type: NewOrder::TYPE })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traced_order_round_trips_and_a_bare_or_foreign_one_is_refused() {
        let mut t = TracedOrder { order: NewOrder::new(), trace: OrderTrace::default() };
        t.order.client_order_id = 5;
        t.trace = OrderTrace {
            tick_sequence: 1,
            ingress_tsc: 2,
            receive_tsc: 3,
            book_tsc: 4,
            decision_tsc: 5,
            md_publish_tsc: 6,
        };
        let mut buf = [0u64; TRACED_ORDER_LEN / 8];
        buf.as_mut_bytes().copy_from_slice(t.as_bytes());
        let got = TracedOrder::parse(buf.as_bytes()).unwrap();
        assert_eq!(*got, t);
        assert_eq!(&buf.as_bytes()[72..80], &1u64.to_le_bytes());
        assert_eq!(&buf.as_bytes()[112..120], &6u64.to_le_bytes());
        assert!(TracedOrder::parse(&buf.as_bytes()[..NewOrder::LEN]).is_err(), "an order without its trace");
        let mut foreign = buf;
        foreign[0] = 0; // the header's type is no longer NewOrder
        assert!(TracedOrder::parse(foreign.as_bytes()).is_err());
    }
}
