//! The control channel that sets up an rdma-rc stream or a ud-mcast recovery connection: a
//! versioned, mutually authenticated hello over TCP, then lines bound together by a transcript
//! MAC. The lines themselves are in [`crate::wire::control`]; both transports use this module
//! and neither borrows it from the other.
//!
//! Why TCP and not rdma_cm: the exchange needs a versioned hello and a shared-secret proof before
//! any rkey leaves the process, which is plain request/response; TCP works on every RoCE host and
//! in the guest without another library, and the data path never touches it. Set-up may make
//! syscalls; nothing here runs on a publishing or polling thread.
//!
//! Against hostile peers (anyone who can reach the port): a line longer than
//! [`crate::wire::control::MAX_LINE`] is refused as soon as it is, not buffered; one deadline
//! bounds the whole handshake, reads and writes alike, so a peer that trickles bytes or never
//! reads cannot hold it; errors quote at most a few dozen characters of what the peer sent; at
//! most eight run at once, each on a thread of its own.
mod channel;
mod error;
mod handshakes;
#[cfg(test)]
mod tests;

pub(crate) use channel::{authenticate_subscriber, authenticate_to_publisher, Control};
pub use error::ControlError;
pub(crate) use handshakes::Handshakes;
