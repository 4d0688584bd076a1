//! Dispatch by type: decode any bus message without knowing its type in advance.
use zerocopy::FromBytes;

use crate::exec::{ExecAck, ExecFill, ExecReject};
use crate::header::Header;
use crate::md::{
    BookSnapshot, FeedGap, OrderAdd, OrderDelete, OrderExecute, OrderModify, Quote, SnapshotOrders, Trade,
};
use crate::message::{DecodeError, Message, MsgType};
use crate::orders::{CancelOrder, NewOrder, ReplaceOrder};

/// A decoded message of any type, borrowing the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnyMessage<'a> {
    /// A [`Quote`].
    Quote(&'a Quote),
    /// A [`Trade`].
    Trade(&'a Trade),
    /// An [`OrderAdd`].
    OrderAdd(&'a OrderAdd),
    /// An [`OrderModify`].
    OrderModify(&'a OrderModify),
    /// An [`OrderDelete`].
    OrderDelete(&'a OrderDelete),
    /// An [`OrderExecute`].
    OrderExecute(&'a OrderExecute),
    /// A [`BookSnapshot`].
    BookSnapshot(&'a BookSnapshot),
    /// A [`FeedGap`].
    FeedGap(&'a FeedGap),
    /// A [`SnapshotOrders`].
    SnapshotOrders(&'a SnapshotOrders),
    /// A [`NewOrder`].
    NewOrder(&'a NewOrder),
    /// A [`CancelOrder`].
    CancelOrder(&'a CancelOrder),
    /// A [`ReplaceOrder`].
    ReplaceOrder(&'a ReplaceOrder),
    /// An [`ExecAck`].
    ExecAck(&'a ExecAck),
    /// An [`ExecFill`].
    ExecFill(&'a ExecFill),
    /// An [`ExecReject`].
    ExecReject(&'a ExecReject),
}

/// Decodes `bytes` (8-byte aligned, exactly one message) by the type in its header.
pub fn decode(bytes: &[u8]) -> Result<AnyMessage<'_>, DecodeError> {
    let (header, _) = Header::ref_from_prefix(bytes).map_err(|_| {
        if bytes.len() < crate::HEADER_LEN {
            DecodeError::TooShortForHeader { got: bytes.len() }
        } else {
            DecodeError::Misaligned {
                msg_type: MsgType::from_wire(u16::from_le_bytes([bytes[0], bytes[1]])).unwrap_or(MsgType::Quote),
            }
        }
    })?;
    let t = MsgType::from_wire(header.msg_type).ok_or(DecodeError::UnknownType { found: header.msg_type })?;
    Ok(match t {
        MsgType::Quote => AnyMessage::Quote(Quote::parse(bytes)?),
        MsgType::Trade => AnyMessage::Trade(Trade::parse(bytes)?),
        MsgType::OrderAdd => AnyMessage::OrderAdd(OrderAdd::parse(bytes)?),
        MsgType::OrderModify => AnyMessage::OrderModify(OrderModify::parse(bytes)?),
        MsgType::OrderDelete => AnyMessage::OrderDelete(OrderDelete::parse(bytes)?),
        MsgType::OrderExecute => AnyMessage::OrderExecute(OrderExecute::parse(bytes)?),
        MsgType::BookSnapshot => AnyMessage::BookSnapshot(BookSnapshot::parse(bytes)?),
        MsgType::FeedGap => AnyMessage::FeedGap(FeedGap::parse(bytes)?),
        MsgType::SnapshotOrders => AnyMessage::SnapshotOrders(SnapshotOrders::parse(bytes)?),
        MsgType::NewOrder => AnyMessage::NewOrder(NewOrder::parse(bytes)?),
        MsgType::CancelOrder => AnyMessage::CancelOrder(CancelOrder::parse(bytes)?),
        MsgType::ReplaceOrder => AnyMessage::ReplaceOrder(ReplaceOrder::parse(bytes)?),
        MsgType::ExecAck => AnyMessage::ExecAck(ExecAck::parse(bytes)?),
        MsgType::ExecFill => AnyMessage::ExecFill(ExecFill::parse(bytes)?),
        MsgType::ExecReject => AnyMessage::ExecReject(ExecReject::parse(bytes)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::contract::Aligned;
    use zerocopy::IntoBytes;

    #[test]
    fn dispatches_every_type_by_its_header() {
        let mut buf = Aligned([0u8; 1024]);
        let mut q = Quote::new();
        q.bid_px = 5;
        buf.0[..Quote::LEN].copy_from_slice(q.as_bytes());
        assert_eq!(decode(&buf.0[..Quote::LEN]), Ok(AnyMessage::Quote(&q)));
        let f = ExecFill::new();
        buf.0[..ExecFill::LEN].copy_from_slice(f.as_bytes());
        assert!(matches!(decode(&buf.0[..ExecFill::LEN]), Ok(AnyMessage::ExecFill(_))));
        for t in MsgType::ALL {
            assert_eq!(MsgType::from_wire(t as u16), Some(t));
        }
    }

    #[test]
    fn unknown_short_and_misaligned_input_are_errors_not_panics() {
        let mut buf = Aligned([0u8; 1024]);
        buf.0[0] = 200;
        assert_eq!(decode(&buf.0[..64]), Err(DecodeError::UnknownType { found: 200 }));
        assert_eq!(decode(&buf.0[..3]), Err(DecodeError::TooShortForHeader { got: 3 }));
        buf.0[1..=Quote::LEN].copy_from_slice(Quote::new().as_bytes());
        assert!(matches!(decode(&buf.0[1..=Quote::LEN]), Err(DecodeError::Misaligned { .. })));
        // every byte pattern of every prefix length decodes or errs, never panics
        for len in 0..200 {
            let _ = decode(&buf.0[..len]);
        }
    }
}
