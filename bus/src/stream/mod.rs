//! One stream API over every transport: [`Publish`] and [`Subscribe`], implemented by shm
//! (`ShmPublisher`, `ShmSubscriber`, and any [`Publisher`](crate::Publisher) or
//! [`Subscriber`](crate::Subscriber) over ring memory), rdma-rc and ud-mcast (feature `rdma`),
//! each in its own module; a stream named by a [`Channel`] URI (`shm:md`,
//! `rdma-rc://10.0.0.1:7400/7`, `ud-mcast://239.1.2.3/1?recovery=10.0.0.1:7500`) and opened by
//! [`open_publisher`] / [`open_subscriber`] as an [`AnyPublisher`] / [`AnySubscriber`].
//!
//! Why traits and an enum: an app that knows its transport at compile time writes its loop
//! generic over `P: Publish` / `S: Subscribe` and gets static dispatch; an app that takes the
//! transport from a URI at run time uses the enums, whose every call is one `match` on a variant
//! that never changes (predicted; no vtable, no box). Either way the hot path makes no syscall
//! and no allocation beyond what the transport itself does (Soft-RoCE's doorbell `write`).
//!
//! Errors: each transport keeps its own error type (`ClaimError`, `RdmaError`, `McastError`),
//! and every one says through [`Retry::retry_helps`] whether the same call can succeed later (a
//! full reliable ring: yes; a dead QP, a payload larger than a slot: no).
use tickbus_codecs::Message;

use crate::ring::{Recv, RecvInto};

mod any;
#[cfg(feature = "rdma")]
mod rdma;
mod shm;
pub mod uri;

pub use any::{
    open_publisher, open_subscriber, AnyClaim, AnyError, AnyPublisher, AnySubscriber, OpenError, OpenOptions, PeerState,
};
#[cfg(feature = "rdma")]
pub use rdma::Staged;
pub use shm::ShmClaim;
pub use uri::{Channel, ChannelError, Endpoint};

/// Whether a stream delivers every message (holding its publisher back) or may lose some to a
/// lap, a lost datagram or a slow reader (and says so with a gap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reliability {
    /// Every message, in order; a reader that does not keep up holds the publisher back.
    Reliable,
    /// The publisher never waits; what a reader misses is reported as a gap.
    Lossy,
}

/// Whether trying the same call again can succeed.
pub trait Retry {
    /// True when the error is a moment's condition (a full reliable ring, a full send queue, a
    /// peer not there yet) and the same call may succeed later; false when it never will (a
    /// payload larger than a slot, a failed QP, a dead device): fix the cause or reopen.
    fn retry_helps(&self) -> bool;
}

impl Retry for core::convert::Infallible {
    fn retry_helps(&self) -> bool {
        match *self {}
    }
}

/// A claimed message slot: written in place (shm) or staged (rdma-rc, ud-mcast, which copy every
/// payload to the NIC anyway), then published by [`StreamClaim::commit`]. Dropped uncommitted,
/// it publishes nothing (shm readers skip the aborted slot; it is counted).
pub trait StreamClaim {
    /// The transport's error.
    type Error: Retry + std::error::Error + Send + Sync + 'static;
    /// The position the message will have.
    fn position(&self) -> u64;
    /// The claimed length in bytes.
    fn len(&self) -> usize;
    /// Whether the claim is for 0 bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies `payload` (exactly the claimed length) in.
    fn write(&mut self, payload: &[u8]);
    /// Stores `value` as payload word `k` (bytes `8k..8k+8`): one field written in place.
    fn store_word(&mut self, k: usize, value: u64);
    /// Publishes the message; returns its position.
    fn commit(self) -> Result<u64, Self::Error>;
}

/// Publishes one stream.
pub trait Publish {
    /// The transport's error.
    type Error: Retry + std::error::Error + Send + Sync + 'static;
    /// A claimed slot.
    type Claim<'a>: StreamClaim<Error = Self::Error>
    where
        Self: 'a;

    /// Publishes a copy of `payload`; returns its position. Never blocks: a full reliable
    /// stream is an error whose [`Retry::retry_helps`] is true.
    fn publish(&mut self, payload: &[u8]) -> Result<u64, Self::Error>;

    /// Stamps `msg`'s header (stream id, sequence = position, this host's raw TSC) and
    /// publishes a copy of it.
    fn send<T: Message>(&mut self, msg: &mut T) -> Result<u64, Self::Error>;

    /// Claims room for a `len`-byte message, to write in place and then commit.
    fn try_claim(&mut self, len: usize) -> Result<Self::Claim<'_>, Self::Error>;

    /// The position (sequence number) the next message gets.
    fn position(&self) -> u64;

    /// The stream id stamped in every message header.
    fn stream_id(&self) -> u32;

    /// The largest payload one message may carry.
    fn max_payload(&self) -> usize;

    /// Reliable or lossy.
    fn reliability(&self) -> Reliability;

    /// TSC ticks per ns of this publisher's clock (for turning header stamps into time).
    fn ticks_per_ns(&self) -> f64;

    /// Upkeep to call when idle (off the hot path): rdma-rc takes in subscribers and ships what
    /// waited for credit; ud-mcast sends nothing here (see `AnyPublisher::heartbeat`); shm has
    /// nothing to do.
    fn idle(&mut self) {}
}

/// Reads one stream.
pub trait Subscribe {
    /// The transport's error.
    type Error: Retry + std::error::Error + Send + Sync + 'static;

    /// The next message or gap in stream order, or `None` when nothing new arrived. Never
    /// blocks, allocates or makes a syscall. A message borrows the transport's bytes until the
    /// next call.
    #[must_use = "a message taken and not looked at is lost to this reader"]
    fn try_recv(&mut self) -> Result<Option<Recv<'_>>, Self::Error>;

    /// The next message if it is exactly `out.len()` bytes, copied into `out` (a fixed-layout
    /// message's bytes); one of another length is reported and left for [`Subscribe::try_recv`].
    /// `out` holds a message only when [`RecvInto::Message`] is returned.
    #[must_use = "a message taken and not looked at is lost to this reader"]
    fn try_recv_into(&mut self, out: &mut [u8]) -> Result<Option<RecvInto>, Self::Error>;

    /// The position of the next message this subscriber will read.
    fn position(&self) -> u64;

    /// Positions reported lost in gaps so far.
    fn missed(&self) -> u64;

    /// The largest payload a message may carry.
    fn max_payload(&self) -> usize;

    /// Reliable or lossy.
    fn reliability(&self) -> Reliability;

    /// TSC ticks per ns of the publisher's clock (shm, rdma-rc: from the ring's header), or of
    /// this host's (ud-mcast, which carries none).
    fn ticks_per_ns(&self) -> f64;

    /// Reliable streams: with `manual` on, positions are released only by
    /// [`Subscribe::release_to`] (a gateway releases an order once it is answered). Returns
    /// false where the stream has nothing to release (lossy).
    fn set_manual_release(&mut self, manual: bool) -> bool;

    /// Releases every position below `position` to the publisher (manual release).
    fn release_to(&mut self, position: u64);

    /// How far below the stream's newest position a fresh attachment may start delivering (a
    /// ring's slot count; 0 for a live feed that starts at what it sees): a recorder restarted
    /// on the stream skips what its journal holds only within this window.
    fn window(&self) -> u64 {
        0
    }

    /// Slots of dropped claims (no message) this reader moved past since it attached.
    fn aborted(&self) -> u64 {
        0
    }

    /// This incarnation of the stream's identity, one a recreated stream does not share (a shm
    /// ring: when it was created). None: the transport has none.
    fn source_id(&self) -> Option<u64> {
        None
    }
}
