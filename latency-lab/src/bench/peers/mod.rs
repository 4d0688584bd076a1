//! Every transport and peer the lab runs, each behind the [`crate::bench::transport`] traits.
//!
//! In-process: the floor, tickbus shm, rtrb, disruptor, kernel UDP and TCP loopback, and (feature
//! `peers`) Aeron IPC with an embedded media driver. Across two processes: tickbus shm and
//! (feature `peers`) iceoryx2.
pub mod disruptor_peer;
pub mod floor;
pub mod floor_rungs;
pub mod kernel;
pub mod rtrb_peer;
pub mod tickbus_cpp;
pub mod tickbus_shm;

#[cfg(feature = "peers")]
pub mod aeron;
#[cfg(feature = "peers")]
pub mod iceoryx;
