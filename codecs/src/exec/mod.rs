//! Execution reports a gateway sends back: ack, fill, reject.
mod ack;
mod fill;
mod reject;

pub use ack::ExecAck;
pub use fill::ExecFill;
pub use reject::{ExecReject, RejectReason, REJECT_TEXT_LEN};
