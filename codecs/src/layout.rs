//! Every message's fields as data: name, byte offset and kind, taken from the structs by the
//! compiler (`offset_of!`, the field's own type), so a reader in another language or format
//! (numpy dtypes, Arrow and Parquet columns) is built from the struct and cannot drift from it.
//!
//! Header fields come first under their own names (`msg_type`, ..., `publish_tsc`), then the
//! message's; arrays of levels are spread into one field per element (`bid_price_0`,
//! `bid_qty_0`, ...); padding is left out.
use core::mem::{offset_of, size_of};

use crate::exec::{ExecAck, ExecFill, ExecReject, REJECT_TEXT_LEN};
use crate::header::Header;
use crate::md::{
    BookSnapshot, FeedGap, Level, OrderAdd, OrderDelete, OrderExecute, OrderModify, Quote, RestingOrder,
    SnapshotOrders, Trade, SNAPSHOT_CHUNK_ORDERS, SNAPSHOT_DEPTH,
};
use crate::message::{Message, MsgType};
use crate::orders::{CancelOrder, NewOrder, ReplaceOrder};

/// What a field holds, little-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// `u8`.
    U8,
    /// `u16`.
    U16,
    /// `u32`.
    U32,
    /// `u64`.
    U64,
    /// `i64`.
    I64,
    /// Raw bytes of this length (text padded with zeros).
    Bytes(usize),
}

impl FieldKind {
    /// Its size in bytes.
    pub const fn size(self) -> usize {
        match self {
            FieldKind::U8 => 1,
            FieldKind::U16 => 2,
            FieldKind::U32 => 4,
            FieldKind::U64 | FieldKind::I64 => 8,
            FieldKind::Bytes(n) => n,
        }
    }

    /// The numpy type string (`<u8`, `|S32`).
    pub fn numpy(self) -> String {
        match self {
            FieldKind::U8 => "u1".into(),
            FieldKind::U16 => "<u2".into(),
            FieldKind::U32 => "<u4".into(),
            FieldKind::U64 => "<u8".into(),
            FieldKind::I64 => "<i8".into(),
            FieldKind::Bytes(n) => format!("S{n}"),
        }
    }
}

/// One field of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Its name (a column name).
    pub name: String,
    /// Its offset from the message's first byte.
    pub offset: usize,
    /// What it holds.
    pub kind: FieldKind,
}

impl Field {
    /// Reads the field from a message's bytes as a u64 (signed fields as their two's
    /// complement; `Bytes` fields as 0): `bytes` must hold the whole message.
    pub fn read_u64(&self, bytes: &[u8]) -> u64 {
        let b = &bytes[self.offset..self.offset + self.kind.size()];
        match self.kind {
            FieldKind::U8 => b[0] as u64,
            FieldKind::U16 => u16::from_le_bytes([b[0], b[1]]) as u64,
            FieldKind::U32 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64,
            FieldKind::U64 | FieldKind::I64 => u64::from_le_bytes(b.try_into().expect("8 bytes")),
            FieldKind::Bytes(_) => 0,
        }
    }
}

/// Scalar field types and their kinds.
trait Scalar {
    const KIND: FieldKind;
}
impl Scalar for u8 {
    const KIND: FieldKind = FieldKind::U8;
}
impl Scalar for u16 {
    const KIND: FieldKind = FieldKind::U16;
}
impl Scalar for u32 {
    const KIND: FieldKind = FieldKind::U32;
}
impl Scalar for u64 {
    const KIND: FieldKind = FieldKind::U64;
}
impl Scalar for i64 {
    const KIND: FieldKind = FieldKind::I64;
}

/// The kind of the field `f` selects, from its type.
fn kind_of<T, F: Scalar>(_: fn(&T) -> &F) -> FieldKind {
    F::KIND
}

/// Pushes `T`'s scalar fields, by name, at `base` + their offset in `T`.
macro_rules! scalars {
    ($v:ident, $base:expr, $prefix:expr, $t:ty { $($f:ident),* $(,)? }) => {{
        $( $v.push(Field {
            name: format!("{}{}", $prefix, stringify!($f)),
            offset: $base + offset_of!($t, $f),
            kind: kind_of(|m: &$t| &m.$f),
        }); )*
    }};
}

fn header() -> Vec<Field> {
    let mut v = Vec::new();
    scalars!(v, 0, "", Header { msg_type, version, length, stream_id, flags, sequence, publish_tsc });
    v
}

fn levels(v: &mut Vec<Field>, base: usize, side: &str) {
    for k in 0..SNAPSHOT_DEPTH {
        let at = base + k * size_of::<Level>();
        v.push(Field {
            name: format!("{side}_price_{k}"),
            offset: at + offset_of!(Level, price),
            kind: FieldKind::I64,
        });
        v.push(Field { name: format!("{side}_qty_{k}"), offset: at + offset_of!(Level, qty), kind: FieldKind::U64 });
        v.push(Field {
            name: format!("{side}_orders_{k}"),
            offset: at + offset_of!(Level, orders),
            kind: FieldKind::U32,
        });
    }
}

/// The fields of a message of type `t`, header first, in offset order.
pub fn fields(t: MsgType) -> Vec<Field> {
    let mut v = header();
    match t {
        MsgType::Quote => {
            scalars!(v, 0, "", Quote { instrument_id, bid_px, bid_qty, ask_px, ask_qty, exchange_ts_ns })
        }
        MsgType::Trade => scalars!(v, 0, "", Trade { instrument_id, side, price, qty, trade_id, exchange_ts_ns }),
        MsgType::OrderAdd => {
            scalars!(v, 0, "", OrderAdd { instrument_id, side, order_id, price, qty, exchange_ts_ns })
        }
        MsgType::OrderModify => {
            scalars!(v, 0, "", OrderModify { instrument_id, order_id, new_price, new_qty, exchange_ts_ns })
        }
        MsgType::OrderDelete => scalars!(v, 0, "", OrderDelete { instrument_id, order_id, exchange_ts_ns }),
        MsgType::OrderExecute => {
            scalars!(v, 0, "", OrderExecute { instrument_id, order_id, exec_qty, price, match_id, exchange_ts_ns })
        }
        MsgType::BookSnapshot => {
            scalars!(v, 0, "", BookSnapshot { instrument_id, bid_depth, ask_depth, exchange_ts_ns });
            levels(&mut v, offset_of!(BookSnapshot, bids), "bid");
            levels(&mut v, offset_of!(BookSnapshot, asks), "ask");
        }
        MsgType::FeedGap => scalars!(v, 0, "", FeedGap { first_sequence, count }),
        MsgType::SnapshotOrders => {
            scalars!(v, 0, "", SnapshotOrders { as_of, total_orders, lost, source, chunk, chunks, count });
            for k in 0..SNAPSHOT_CHUNK_ORDERS {
                let at = offset_of!(SnapshotOrders, orders) + k * size_of::<RestingOrder>();
                scalars!(v, at, format!("order_{k}_"), RestingOrder { order_id, price, qty, instrument_id, side });
            }
        }
        MsgType::NewOrder => scalars!(
            v,
            0,
            "",
            NewOrder { client_order_id, instrument_id, side, time_in_force, ord_type, price, qty, account }
        ),
        MsgType::CancelOrder => {
            scalars!(v, 0, "", CancelOrder { client_order_id, orig_client_order_id, instrument_id })
        }
        MsgType::ReplaceOrder => scalars!(
            v,
            0,
            "",
            ReplaceOrder { client_order_id, orig_client_order_id, instrument_id, new_price, new_qty }
        ),
        MsgType::ExecAck => {
            scalars!(v, 0, "", ExecAck { client_order_id, exchange_order_id, instrument_id, exchange_ts_ns })
        }
        MsgType::ExecFill => scalars!(
            v,
            0,
            "",
            ExecFill {
                client_order_id,
                exchange_order_id,
                instrument_id,
                side,
                fill_px,
                fill_qty,
                leaves_qty,
                exec_id,
                exchange_ts_ns
            }
        ),
        MsgType::ExecReject => {
            scalars!(v, 0, "", ExecReject { client_order_id, instrument_id, reason, exchange_ts_ns });
            v.push(Field {
                name: "text".into(),
                offset: offset_of!(ExecReject, text),
                kind: FieldKind::Bytes(REJECT_TEXT_LEN),
            });
        }
    }
    v.sort_by_key(|f| f.offset);
    v
}

/// The size in bytes of a message of type `t`.
pub fn size_of_type(t: MsgType) -> usize {
    match t {
        MsgType::Quote => Quote::LEN,
        MsgType::Trade => Trade::LEN,
        MsgType::OrderAdd => OrderAdd::LEN,
        MsgType::OrderModify => OrderModify::LEN,
        MsgType::OrderDelete => OrderDelete::LEN,
        MsgType::OrderExecute => OrderExecute::LEN,
        MsgType::BookSnapshot => BookSnapshot::LEN,
        MsgType::FeedGap => FeedGap::LEN,
        MsgType::SnapshotOrders => SnapshotOrders::LEN,
        MsgType::NewOrder => NewOrder::LEN,
        MsgType::CancelOrder => CancelOrder::LEN,
        MsgType::ReplaceOrder => ReplaceOrder::LEN,
        MsgType::ExecAck => ExecAck::LEN,
        MsgType::ExecFill => ExecFill::LEN,
        MsgType::ExecReject => ExecReject::LEN,
    }
}

/// The type of `payload` if it is one whole message of a type and version this build knows
/// (its header's length is the payload's and the type's size): what a reader of recorded bytes
/// (a journal, a ring of mixed types) asks before viewing them as that type.
pub fn message_type(payload: &[u8]) -> Option<MsgType> {
    let h = crate::header::Header::peek(payload)?;
    let t = MsgType::from_wire(h.msg_type)?;
    (h.length as usize == payload.len() && size_of_type(t) == payload.len() && h.version == 1).then_some(t)
}

/// The type's name in snake case (`order_add`): file and table names.
pub fn snake_name(t: MsgType) -> &'static str {
    match t {
        MsgType::Quote => "quote",
        MsgType::Trade => "trade",
        MsgType::OrderAdd => "order_add",
        MsgType::OrderModify => "order_modify",
        MsgType::OrderDelete => "order_delete",
        MsgType::OrderExecute => "order_execute",
        MsgType::BookSnapshot => "book_snapshot",
        MsgType::FeedGap => "feed_gap",
        MsgType::SnapshotOrders => "snapshot_orders",
        MsgType::NewOrder => "new_order",
        MsgType::CancelOrder => "cancel_order",
        MsgType::ReplaceOrder => "replace_order",
        MsgType::ExecAck => "exec_ack",
        MsgType::ExecFill => "exec_fill",
        MsgType::ExecReject => "exec_reject",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    /// The fields lie inside the message, do not overlap, and leave out only padding: no run of
    /// uncovered bytes is as long as the smallest 8-byte-aligned field would need.
    #[test]
    fn the_fields_tile_every_message_but_its_padding() {
        for t in MsgType::ALL {
            let f = fields(t);
            let len = size_of_type(t);
            let mut covered = vec![false; len];
            for x in &f {
                for b in &mut covered[x.offset..x.offset + x.kind.size()] {
                    assert!(!*b, "{t:?}.{} overlaps another field", x.name);
                    *b = true;
                }
            }
            let names: std::collections::BTreeSet<_> = f.iter().map(|x| x.name.as_str()).collect();
            assert_eq!(names.len(), f.len(), "{t:?}: names are unique");
            let longest_gap = covered.split(|c| *c).map(<[bool]>::len).max().unwrap_or(0);
            assert!(longest_gap < 8, "{t:?}: {longest_gap} bytes in a row in no field: a field is missing");
        }
    }

    #[test]
    fn a_field_reads_the_value_the_struct_holds() {
        let mut q = Quote::new();
        q.instrument_id = 0x0102_0304;
        q.bid_px = -5;
        q.ask_qty = u64::MAX - 1;
        let f = fields(MsgType::Quote);
        let get = |n: &str| f.iter().find(|x| x.name == n).unwrap().read_u64(q.as_bytes());
        assert_eq!(get("instrument_id"), 0x0102_0304);
        assert_eq!(get("bid_px") as i64, -5);
        assert_eq!(get("ask_qty"), u64::MAX - 1);
        assert_eq!(get("msg_type"), MsgType::Quote as u64);
        assert_eq!(get("length"), Quote::LEN as u64);
        let s = fields(MsgType::BookSnapshot);
        assert!(s.iter().any(|x| x.name == "ask_orders_9"));
        assert_eq!(s.last().unwrap().offset + 4 + 4, BookSnapshot::LEN, "the last level's orders, then padding");
    }
}
