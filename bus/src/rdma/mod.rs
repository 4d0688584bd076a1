//! RDMA transport: publishers RDMA-WRITE each message into every subscriber's own hugepage ring
//! over a reliable connected QP (feature `rdma`).
//!
//! Owns: connection set-up (control channel, authentication, endpoint exchange), shipping slots,
//! reaping completions, credits, and mapping failures to errors with remedies. Never: touches
//! slot bytes itself (the ring protocol does) or waits on a completion channel.
//!
//! Design: the publisher keeps a *mirror* of the ring in its own registered memory and publishes
//! into it with the ordinary [`crate::ring::RingWriter`]; each published slot is then copied to
//! every subscriber's ring at the same offset with one RDMA WRITE of the slot's window (its lead
//! word, the 8 bytes before the slot, through its trail; inline when it fits). One WRITE is placed
//! in address order by rxe and real NICs, so the lead word lands first and the trail (validity)
//! word last: the subscriber runs the unchanged ring reader
//! over its own memory. The spec does not promise that order; [`WriteMode::WriteWithImm`] makes
//! each WRITE also complete on the subscriber's CQ, which the subscriber polls before reading.
//!
//! Credits (reliable mode): the subscriber RDMA-WRITEs its consumer position into its consumer
//! line in the publisher's mirror header, lazily (every ring/4 messages and when it runs dry).
//! The writer's limit check reads that local word: the publisher never waits on the network.
//! The rkey a subscriber gets covers only its consumer line's 8-byte position word in the mirror.
//!
//! Syscalls: none on the poll path. Posting is a user-space doorbell on real NICs; Soft-RoCE's
//! provider rings it with one `write` per post, which the hot-path test counts.
mod acceptor;
mod error;
mod memory;
mod publisher;
mod subscriber;

/// The RDMA devices on this host (`ibv_get_device_list`), by name: what `device` options and
/// URI `device=` parameters name.
pub use crate::sys::verbs::device_names;
/// The RC QP's timeouts and retry budget (`PublisherOptions::rc`, `SubscriberOptions::rc`).
pub use crate::sys::verbs::RcOptions;
/// A verbs call that failed (inside [`RdmaError::Verbs`] and `McastError::Verbs`).
pub use crate::sys::verbs::VerbsError;
/// The most messages one `publish_batch` posts behind one doorbell (longer bursts are split).
pub use crate::sys::verbs::MAX_CHAIN;
pub use crate::wire::control::{StreamConfig, WriteMode, PROTOCOL_VERSION};
pub use error::{explain, RdmaError};
pub use publisher::{PublisherOptions, RdmaPublisher, SubscriberInfo};
pub use subscriber::{RdmaSubscriber, SubscriberOptions};
