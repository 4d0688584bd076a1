//! tickbus: a low-latency market-data and order bus.
//!
//! Publishers write fixed-layout messages into rings of fixed-size slots; subscribers busy-poll
//! them. The same [`ring`] protocol runs over hugepage shared memory ([`shm`]) and, later, RDMA.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod ring;
