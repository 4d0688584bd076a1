//! tickbus: a low-latency market-data and order bus.
//!
//! Trading apps embed its publisher and subscriber. A publisher writes fixed-layout messages
//! (`tickbus-codecs`, re-exported as [`codecs`]) into a ring of fixed-size slots and subscribers
//! busy-poll it; every message header carries the publisher's raw TSC. The steady-state publish
//! and poll loops never allocate, block or make a syscall (the crate's hot-path tests prove it
//! with an allocation counter and a seccomp filter).
//!
//! # Transports
//!
//! One [`ring`] protocol, three ways to move it, all behind one API ([`stream`]: the
//! `Publish`/`Subscribe` traits, and channel URIs such as `shm:md` or
//! `rdma-rc://10.0.0.1:7400/7` opened at run time):
//! - [`shm`]: a ring in a file on hugetlbfs, mapped by a publisher and its subscribers in
//!   other processes on the host (`open_publisher`, `open_consumer` for a reliable reader that
//!   holds the publisher back, `open_observer` for one that never does).
//! - `rdma` (feature `rdma`): reliable connected QPs; the publisher RDMA-WRITEs each slot into
//!   every subscriber's own hugepage ring, which the subscriber busy-polls.
//! - `mcast` (feature `rdma`): UD multicast, one send for every subscriber, with lost datagrams
//!   recovered from the publisher's history by RDMA READ.
//!
//! # Around the streams
//!
//! - [`journal`] and [`replay`]: record any stream to disk off the hot path, replay it paced.
//! - [`feed`]: a MoldUDP64 feed handler (two lines arbitrated, gaps re-requested).
//! - [`agent`]: pinned duty-cycle threads and idle strategies; [`time`]: the TSC and its scale.
//! - [`counters`]: every stream's live counters in a per-process shared-memory file, read by
//!   [`stat`] (`tickbus stat`); [`doctor`] checks a host (`tickbus doctor`).
//!
//! The workspace README has the quick start, the latency lab and the figures; ARCHITECTURE.md
//! the layouts and protocols; RELIABILITY.md every hostile input and fault tried.
//!
//! # Logging
//!
//! Diagnostics off the hot path (a ring falling back to 4 KiB pages, a ring reclaimed from a
//! dead publisher, an agent pinned to a core that is not isolated) go through the [`log`]
//! facade: an embedding app routes or silences them with its own logger; with none installed
//! the library prints nothing. The `tickbus` and `latency-lab` commands show warnings by default
//! (`-v` for more, `-q` for less, or `RUST_LOG`).
//!
//! Under `--cfg loom` only the ring protocol (on loom's atomics) is built, for model checking.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod agent;
pub mod cache;
#[cfg(all(feature = "rdma", not(loom)))]
pub mod control;
pub mod counters;
#[cfg(not(loom))]
pub mod doctor;
// Public only in builds made with `--cfg tickbus_testing` (tools/test.sh): no dependent can switch
// a kill point on through a Cargo feature.
#[cfg(tickbus_testing)]
pub mod fault;
#[cfg(not(tickbus_testing))]
mod fault;
#[cfg(not(loom))]
pub mod feed;
#[cfg(not(loom))]
pub mod journal;
#[cfg(all(test, not(loom)))]
mod layering_tests;
#[cfg(all(feature = "rdma", not(loom)))]
pub mod mcast;
#[cfg(not(loom))]
pub mod merge;
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
pub mod snapshot;
#[cfg(not(loom))]
pub mod stat;
#[cfg(not(loom))]
pub mod stream;
// The OS and verbs FFI: private, so no libc or rdma-sys type is part of tickbus's API (an
// rdma-sys upgrade is not a tickbus semver break). Test builds (`--cfg tickbus_testing`, as
// tools/test.sh makes them) open it to the tests that drive verbs directly (verbs_smoke, the
// raw UD sender of the hostile ud-mcast tests).
#[cfg(tickbus_testing)]
pub mod sys;
#[cfg(not(tickbus_testing))]
pub(crate) mod sys;
pub mod time;
#[cfg(not(loom))]
pub mod wire;
#[cfg(all(feature = "xdp", not(loom)))]
pub mod xdp;

#[cfg(not(loom))]
pub use pubsub::{MsgClaim, Publisher, Subscriber};
pub use ring::{Delivery, Gap, Mode, Recv, RecvInto, RingConfig, StartAt};
pub use tickbus_codecs as codecs;

#[cfg(not(loom))]
/// Compile-time checks that every handle an app keeps can move to the thread that polls it
/// (`Send`), and that the plain descriptions (a channel, a ring's config) can also be shared.
/// A field that broke this (an `Rc`, a raw pointer without its `unsafe impl`) fails the build
/// here, not in a user's crate. Handles are deliberately not required to be `Sync`: each has
/// one owner on one thread. At the crate root: it names every layer.
const _: () = {
    use crate::stream;
    const fn send<T: Send>() {}
    const fn send_sync<T: Send + Sync>() {}
    send::<crate::shm::ShmPublisher>();
    send::<crate::shm::ShmSubscriber>();
    send::<stream::AnyPublisher>();
    send::<stream::AnySubscriber>();
    send::<crate::journal::JournalWriter>();
    send::<crate::journal::JournalReader>();
    send::<crate::replay::Player>();
    send::<crate::feed::FeedHandler<stream::AnyPublisher>>();
    #[cfg(feature = "rdma")]
    {
        send::<crate::rdma::RdmaPublisher>();
        send::<crate::rdma::RdmaSubscriber>();
        send::<crate::mcast::McastPublisher>();
        send::<crate::mcast::McastSubscriber>();
    }
    #[cfg(feature = "xdp")]
    send::<crate::xdp::XdpIngest>();
    send_sync::<stream::Channel>();
    send_sync::<crate::RingConfig>();
    send_sync::<stream::AnyError>();
    send_sync::<stream::OpenError>();
};

/// The README's code blocks, compiled and run as doctests so the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// This crate's README (what crates.io shows), compiled and run as doctests too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctests;
