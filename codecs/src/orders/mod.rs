//! Orders a trading app sends to a gateway: new, cancel, replace.
mod cancel;
mod new_order;
mod replace;

pub use cancel::CancelOrder;
pub use new_order::NewOrder;
pub use replace::ReplaceOrder;
mod trace;
pub use trace::{OrderTrace, TracedOrder, TRACED_ORDER_LEN, TRACE_LEN};
