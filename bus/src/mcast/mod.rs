//! ud-mcast transport: a publisher sends each message once, as one UD SEND to a multicast
//! group, and the fabric fans it out to every subscriber that joined (feature `rdma`).
//!
//! Owns: the frame (stream, session, sequence), sending from registered slots kept as history,
//! receive slots, sequencing, gap detection and recovery. Never: waits for a subscriber (there is no back-channel), or
//! delivers a datagram that is not a whole frame of its stream.
//!
//! Why not the ring: UD delivers datagrams into receive buffers the subscriber posts, not into
//! remote memory, so there is no slot to RDMA-WRITE into. The frame carries what the ring's
//! slot words carry elsewhere: the sequence number (gap detection) and the length.
//!
//! Lossy by nature: a datagram the fabric drops, or that arrives while a subscriber has no
//! receive posted, is gone from the fabric. Subscribers see every such loss from the sequence
//! numbers, at the next frame or at the publisher's next [`McastPublisher::heartbeat`]. With
//! recovery connected ([`McastSubscriber::connect_recovery`]) they RDMA-READ the lost messages
//! from the publisher's history (`recovery`); what is no longer there is a [`crate::Gap`]. Each
//! subscriber is independent: a slow one loses or recovers messages, never slows the publisher.
//!
//! Set-up (device, QP, registration, join) makes syscalls; `publish` and `try_recv` do not,
//! except the provider's doorbell on send (Soft-RoCE rings it with a `write`).
mod error;
/// The datagram format (lives in [`crate::wire`], where the fuzzers reach it).
pub use crate::wire::frame;
mod publisher;
mod recovery;
mod subscriber;

pub use error::McastError;
pub use publisher::{stream_qkey, McastPublisher, McastPublisherOptions, DEFAULT_QKEY};
pub use subscriber::{McastStats, McastSubscriber, McastSubscriberOptions};

/// The destination QPN of every multicast send.
pub(crate) const MULTICAST_QPN: u32 = 0xFF_FFFF;
