//! Normalised market data: top of book, trades, L3 order events, book snapshots (per instrument,
//! and of the whole book in chunks) and feed gaps.
mod book_snapshot;
mod feed_gap;
mod order_add;
mod order_delete;
mod order_execute;
mod order_modify;
mod quote;
mod snapshot_orders;
mod trade;

pub use book_snapshot::{BookSnapshot, Level, SNAPSHOT_DEPTH};
pub use feed_gap::FeedGap;
pub use order_add::OrderAdd;
pub use order_delete::OrderDelete;
pub use order_execute::OrderExecute;
pub use order_modify::OrderModify;
pub use quote::Quote;
pub use snapshot_orders::{RestingOrder, SnapshotOrders, SNAPSHOT_CHUNK_ORDERS};
pub use trade::Trade;
