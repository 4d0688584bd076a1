//! tickbus: a low-latency market-data and order bus.
//!
//! Publishers write fixed-layout messages into rings of fixed-size slots; subscribers busy-poll
//! them. The same [`ring`] protocol runs over hugepage shared memory ([`shm`]) and RDMA (`rdma`, reliable connected); `mcast` fans
//! a stream out by UD multicast.
//! The hot path (publish, poll) never allocates, blocks or makes a syscall.
//!
//! Diagnostics off the hot path (a ring falling back to 4 KiB pages, a ring reclaimed from a
//! dead publisher, an agent pinned to a core that is not isolated) go through the [`log`]
//! facade: an embedding app routes or silences them with its own logger; with none installed
//! the library prints nothing. The `tickbus` and `latency-lab` commands show warnings by default
//! (`-v` for more, `-q` for less, or `RUST_LOG`).
//!
//! Under `--cfg loom` only the ring protocol (on loom's atomics) is built, for model checking.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod agent;
pub mod counters;
#[cfg(not(loom))]
pub mod doctor;
pub mod fault;
#[cfg(not(loom))]
pub mod feed;
#[cfg(not(loom))]
pub mod journal;
#[cfg(all(feature = "rdma", not(loom)))]
pub mod mcast;
#[cfg(not(loom))]
pub mod pubsub;
#[cfg(all(feature = "rdma", not(loom)))]
pub mod rdma;
#[cfg(not(loom))]
pub mod replay;
pub mod ring;
#[cfg(any(feature = "rdma", loom, test))]
pub(crate) mod seqslot;
#[cfg(not(loom))]
pub mod shm;
#[cfg(not(loom))]
pub mod stat;
pub mod sys;
pub mod time;
#[cfg(not(loom))]
pub mod wire;

#[cfg(not(loom))]
pub use pubsub::{MsgClaim, Publisher, Subscriber};
pub use ring::{Delivery, Gap, Mode, Recv, RingConfig, StartAt};
pub use tickbus_codecs as codecs;

/// The README's code blocks, compiled and run as doctests so the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
