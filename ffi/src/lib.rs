//! The C ABI of tickbus: `libtickbus_ffi.so` / `libtickbus_ffi.a` and `include/tickbus.h` (generated
//! from this source by cbindgen; a test checks the committed header matches), with a header-only
//! C++17 wrapper in `include/tickbus.hpp`.
//!
//! What it covers: streams by channel URI (`shm:` always, `rdma-rc://` and `ud-mcast://` when
//! built with the `rdma` feature) with publish, send, claim/commit, poll and poll-into; the
//! journal reader; ITCH files and MoldUDP64 captures, normalised; `stat` snapshots of the live
//! counters and rings; the fixed-layout message structs and their type numbers.
//!
//! Rules every function keeps, so a C or C++ caller can rely on them:
//! - It returns a [`tb_status`]; on an error, [`tb_last_error`] (per thread) says what was wrong
//!   and what to do. No panic crosses the boundary: one becomes `TB_ERROR_INTERNAL`.
//! - Every pointer argument is checked for NULL (`TB_ERROR_NULL_POINTER`), every handle for its
//!   kind (`TB_ERROR_BAD_HANDLE`) and for being closed (`TB_ERROR_CLOSED`).
//! - The hot path (publish, send, claim/commit, poll, poll-into on shm) makes no allocation and
//!   no syscall, on success or on a full ring (the error message goes into a fixed thread-local
//!   buffer); the C hot-path proof in `tests/c_abi.rs` checks it. On rdma-rc and ud-mcast the
//!   success path is the same, but formatting a transport error's message may allocate (an OS
//!   error's text): an error there is off the hot path by nature (a failed QP, a dead peer). (With the library linked at
//!   start-up, as the proof does. Loaded by `dlopen`, glibc may allocate a thread's block of the
//!   library's thread-locals at that thread's first use of them: make one call that fails, such
//!   as `tb_status_name`'s neighbour `tb_last_error()`, on each thread before its hot loop.)
//! - Handles are `Send`, not `Sync`: one thread at a time uses each.
#![allow(clippy::missing_safety_doc)] // every unsafe fn has a `# Safety` section; C callers read the header.

mod error;
mod handle;
mod journal;
mod market_data;
mod options;
mod publisher;
mod stat;
mod subscriber;

// Every exported function and type at the crate root, as the header has them (Rust callers of the
// C ABI, such as the RDMA test in the guest, call them by these names).
pub use error::{tb_last_error, tb_last_error_code, tb_status, tb_status_name, tb_status_retry_helps};
pub use journal::*;
pub use market_data::*;
pub use options::{tb_hugepages, tb_open_options, tb_open_options_init};
pub use publisher::*;
pub use stat::*;
pub use subscriber::*;

use bus::codecs::MsgType;

/// The version of this ABI: bumped when a function or struct changes incompatibly. Compare it
/// with `TB_ABI_VERSION` from the header you compiled against.
pub const TB_ABI_VERSION: u32 = 1;

/// Levels per side in a `tb_book_snapshot`.
pub const TB_SNAPSHOT_DEPTH: usize = 10;
/// Orders per `tb_snapshot_orders` chunk of a whole-book snapshot.
pub const TB_SNAPSHOT_CHUNK_ORDERS: usize = 16;
/// Bytes of reason text in a `tb_exec_reject`.
pub const TB_REJECT_TEXT_LEN: usize = 32;
/// Prices are fixed point: this many units per currency unit.
pub const TB_PRICE_SCALE: i64 = 100_000_000;
/// Bytes in `tb_header`, the start of every message.
pub const TB_HEADER_LEN: usize = 32;
/// `tb_header.flags`: `publish_tsc` is the feed handler's ingress TSC, not the publish time.
pub const TB_FLAG_INGRESS_TSC: u32 = 1;
/// `tb_header.flags` of a `tb_feed_gap`: it stands for positions a recording lacks (a
/// journal's gap record, replayed or served), not for a message of the stream.
pub const TB_FLAG_RECORDING_GAP: u32 = 2;
/// `tb_header.flags`, with `TB_FLAG_INGRESS_TSC`: bits 16-31 (from `TB_PUBLISH_LAG_SHIFT`) hold
/// how many ns after the ingress the publish began (65,535: at least that), so the hop can be
/// timed from the publish. A check of the whole flags word must mask those bits off.
pub const TB_FLAG_PUBLISH_LAG: u32 = 4;
/// Where the publish lag starts in `tb_header.flags` (see `TB_FLAG_PUBLISH_LAG`).
pub const TB_PUBLISH_LAG_SHIFT: u32 = 16;

const _: () = {
    assert!(TB_SNAPSHOT_DEPTH == bus::codecs::md::SNAPSHOT_DEPTH);
    assert!(TB_SNAPSHOT_CHUNK_ORDERS == bus::codecs::md::SNAPSHOT_CHUNK_ORDERS);
    assert!(TB_REJECT_TEXT_LEN == bus::codecs::exec::REJECT_TEXT_LEN);
    assert!(TB_PRICE_SCALE == bus::codecs::PRICE_SCALE);
    assert!(TB_HEADER_LEN == bus::codecs::HEADER_LEN);
    assert!(TB_FLAG_INGRESS_TSC == bus::codecs::FLAG_INGRESS_TSC);
    assert!(TB_FLAG_RECORDING_GAP == bus::codecs::FLAG_RECORDING_GAP);
    assert!(TB_FLAG_PUBLISH_LAG == bus::codecs::FLAG_PUBLISH_LAG);
    assert!(TB_PUBLISH_LAG_SHIFT == bus::codecs::PUBLISH_LAG_SHIFT);
};

// The SONAME build.rs gives the library carries the same number.
const _: () = assert!(TB_ABI_VERSION == 1, "change ABI_VERSION in ffi/build.rs with TB_ABI_VERSION");

/// The ABI version of the library loaded (see `TB_ABI_VERSION`).
#[no_mangle]
pub extern "C" fn tb_abi_version() -> u32 {
    TB_ABI_VERSION
}

/// A stream's state.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tb_stream_info {
    /// The next message's position.
    pub position: u64,
    /// Subscriber: positions lost in gaps so far.
    pub missed: u64,
    /// Subscriber: slots of dropped claims moved past.
    pub aborted: u64,
    /// Publisher: the stream id stamped in headers (0 for a subscriber).
    pub stream_id: u32,
    /// The largest payload a message may carry.
    pub max_payload: u32,
    /// Reliable (every message) or lossy.
    pub reliable: bool,
    /// TSC ticks per ns of the publisher's clock: header TSC deltas / this = ns.
    pub ticks_per_ns: f64,
}

/// This host's TSC now (the clock every message header's `publish_tsc` is stamped with).
#[no_mangle]
pub extern "C" fn tb_tsc_now() -> u64 {
    bus::time::Tsc::new().now()
}

/// The schema version of every message type this library writes and reads (`tb_header.version`).
pub const TB_MSG_VERSION: u16 = 1;

/// Wire numbers of the message types (`tb_header.msg_type`): a quote.
pub const TB_MSG_QUOTE: u16 = 1;
/// A trade printed.
pub const TB_MSG_TRADE: u16 = 2;
/// An order added to the book.
pub const TB_MSG_ORDER_ADD: u16 = 3;
/// A resting order changed.
pub const TB_MSG_ORDER_MODIFY: u16 = 4;
/// A resting order removed.
pub const TB_MSG_ORDER_DELETE: u16 = 5;
/// A resting order executed.
pub const TB_MSG_ORDER_EXECUTE: u16 = 6;
/// A price-level snapshot.
pub const TB_MSG_BOOK_SNAPSHOT: u16 = 7;
/// Messages the feed handler lost.
pub const TB_MSG_FEED_GAP: u16 = 8;
/// A chunk of a whole-book snapshot.
pub const TB_MSG_SNAPSHOT_ORDERS: u16 = 9;
/// A new order.
pub const TB_MSG_NEW_ORDER: u16 = 16;
/// A cancel.
pub const TB_MSG_CANCEL_ORDER: u16 = 17;
/// A cancel/replace.
pub const TB_MSG_REPLACE_ORDER: u16 = 18;
/// The venue accepted an order.
pub const TB_MSG_EXEC_ACK: u16 = 32;
/// An order traded.
pub const TB_MSG_EXEC_FILL: u16 = 33;
/// The venue refused an order.
pub const TB_MSG_EXEC_REJECT: u16 = 34;

// The numbers are literals so the header shows them; these keep them equal to the codecs'.
const _: () = {
    assert!(TB_MSG_QUOTE == MsgType::Quote as u16);
    assert!(TB_MSG_TRADE == MsgType::Trade as u16);
    assert!(TB_MSG_ORDER_ADD == MsgType::OrderAdd as u16);
    assert!(TB_MSG_ORDER_MODIFY == MsgType::OrderModify as u16);
    assert!(TB_MSG_ORDER_DELETE == MsgType::OrderDelete as u16);
    assert!(TB_MSG_ORDER_EXECUTE == MsgType::OrderExecute as u16);
    assert!(TB_MSG_BOOK_SNAPSHOT == MsgType::BookSnapshot as u16);
    assert!(TB_MSG_FEED_GAP == MsgType::FeedGap as u16);
    assert!(TB_MSG_SNAPSHOT_ORDERS == MsgType::SnapshotOrders as u16);
    assert!(TB_MSG_NEW_ORDER == MsgType::NewOrder as u16);
    assert!(TB_MSG_CANCEL_ORDER == MsgType::CancelOrder as u16);
    assert!(TB_MSG_REPLACE_ORDER == MsgType::ReplaceOrder as u16);
    assert!(TB_MSG_EXEC_ACK == MsgType::ExecAck as u16);
    assert!(TB_MSG_EXEC_FILL == MsgType::ExecFill as u16);
    assert!(TB_MSG_EXEC_REJECT == MsgType::ExecReject as u16);
};

/// Sizes in bytes of the messages (`tb_header.length`): a `tb_quote`.
pub const TB_LEN_QUOTE: u32 = 80;
/// Bytes in a `tb_trade`.
pub const TB_LEN_TRADE: u32 = 72;
/// Bytes in a `tb_order_add`.
pub const TB_LEN_ORDER_ADD: u32 = 72;
/// Bytes in a `tb_order_modify`.
pub const TB_LEN_ORDER_MODIFY: u32 = 72;
/// Bytes in a `tb_order_delete`.
pub const TB_LEN_ORDER_DELETE: u32 = 56;
/// Bytes in a `tb_order_execute`.
pub const TB_LEN_ORDER_EXECUTE: u32 = 80;
/// Bytes in a `tb_book_snapshot`.
pub const TB_LEN_BOOK_SNAPSHOT: u32 = 528;
/// Bytes in a `tb_feed_gap`.
pub const TB_LEN_FEED_GAP: u32 = 48;
/// Bytes in a `tb_snapshot_orders`.
pub const TB_LEN_SNAPSHOT_ORDERS: u32 = 592;
/// Bytes in a `tb_new_order`.
pub const TB_LEN_NEW_ORDER: u32 = 72;
/// Bytes in a `tb_cancel_order`.
pub const TB_LEN_CANCEL_ORDER: u32 = 56;
/// Bytes in a `tb_replace_order`.
pub const TB_LEN_REPLACE_ORDER: u32 = 72;
/// Bytes in a `tb_exec_ack`.
pub const TB_LEN_EXEC_ACK: u32 = 64;
/// Bytes in a `tb_exec_fill`.
pub const TB_LEN_EXEC_FILL: u32 = 96;
/// Bytes in a `tb_exec_reject`.
pub const TB_LEN_EXEC_REJECT: u32 = 88;

// Literals for the header; equal to the Rust types' sizes (and versions) or the build fails.
const _: () = {
    use bus::codecs::{exec, md, orders, Message};
    assert!(<md::Quote as Message>::VERSION == TB_MSG_VERSION);
    assert!(<md::Trade as Message>::VERSION == TB_MSG_VERSION);
    assert!(<md::OrderAdd as Message>::VERSION == TB_MSG_VERSION);
    assert!(<md::OrderModify as Message>::VERSION == TB_MSG_VERSION);
    assert!(<md::OrderDelete as Message>::VERSION == TB_MSG_VERSION);
    assert!(<md::OrderExecute as Message>::VERSION == TB_MSG_VERSION);
    assert!(<md::BookSnapshot as Message>::VERSION == TB_MSG_VERSION);
    assert!(<md::FeedGap as Message>::VERSION == TB_MSG_VERSION);
    assert!(<md::SnapshotOrders as Message>::VERSION == TB_MSG_VERSION);
    assert!(<orders::NewOrder as Message>::VERSION == TB_MSG_VERSION);
    assert!(<orders::CancelOrder as Message>::VERSION == TB_MSG_VERSION);
    assert!(<orders::ReplaceOrder as Message>::VERSION == TB_MSG_VERSION);
    assert!(<exec::ExecAck as Message>::VERSION == TB_MSG_VERSION);
    assert!(<exec::ExecFill as Message>::VERSION == TB_MSG_VERSION);
    assert!(<exec::ExecReject as Message>::VERSION == TB_MSG_VERSION);
    assert!(TB_LEN_QUOTE as usize == <md::Quote as Message>::LEN);
    assert!(TB_LEN_TRADE as usize == <md::Trade as Message>::LEN);
    assert!(TB_LEN_ORDER_ADD as usize == <md::OrderAdd as Message>::LEN);
    assert!(TB_LEN_ORDER_MODIFY as usize == <md::OrderModify as Message>::LEN);
    assert!(TB_LEN_ORDER_DELETE as usize == <md::OrderDelete as Message>::LEN);
    assert!(TB_LEN_ORDER_EXECUTE as usize == <md::OrderExecute as Message>::LEN);
    assert!(TB_LEN_BOOK_SNAPSHOT as usize == <md::BookSnapshot as Message>::LEN);
    assert!(TB_LEN_FEED_GAP as usize == <md::FeedGap as Message>::LEN);
    assert!(TB_LEN_SNAPSHOT_ORDERS as usize == <md::SnapshotOrders as Message>::LEN);
    assert!(TB_LEN_NEW_ORDER as usize == <orders::NewOrder as Message>::LEN);
    assert!(TB_LEN_CANCEL_ORDER as usize == <orders::CancelOrder as Message>::LEN);
    assert!(TB_LEN_REPLACE_ORDER as usize == <orders::ReplaceOrder as Message>::LEN);
    assert!(TB_LEN_EXEC_ACK as usize == <exec::ExecAck as Message>::LEN);
    assert!(TB_LEN_EXEC_FILL as usize == <exec::ExecFill as Message>::LEN);
    assert!(TB_LEN_EXEC_REJECT as usize == <exec::ExecReject as Message>::LEN);
};
