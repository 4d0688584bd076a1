//! libibverbs, fenced: every verbs call tickbus makes goes through here (feature `rdma`).
//!
//! Owns: device, protection domain, memory registration, completion queues, queue pairs and
//! their state transitions, address handles, multicast attach. Never: decides protocol (the ring
//! and the RDMA transport above it do), or hides a failed verbs call: each error names the call
//! and what to check.
//!
//! Lifetimes: every object holds an `Arc` of what it was created from (context, PD), so it can
//! never outlive it. Buffers handed to the NIC must stay valid until their completion is polled;
//! the posting functions say so in their `# Safety` sections.
mod buf;
mod cq;
mod device;
mod error;
mod events;
mod qp;
mod ud;

pub use buf::{HugeBuf, MemoryRegion};
#[cfg_attr(not(tickbus_testing), allow(unused_imports))] // used by the tests that drive verbs
pub use cq::{Completion, CompletionQueue};
#[cfg_attr(not(tickbus_testing), allow(unused_imports))] // used by the tests that drive verbs
pub use device::{device_names, Context, Gid, PortInfo};
pub use error::VerbsError;
pub use events::AsyncEvents;
pub use qp::{ConnectedRc, Endpoint, PreparedRc, RcOptions, ReadWr, WriteWr, MAX_CHAIN};
pub use ud::{AddressHandle, SendWr, UdQp, GRH_BYTES};

pub use rdma_sys as ffi;
