//! Every syscall tickbus makes outside std, fenced into one small module per OS concern.
//!
//! Owns: FFI to libc for filesystems, processes, CPUs and batched datagram receives. Never: runs
//! on a hot path, but for `net::RecvBatch`, the feed's kernel-socket ingest (one syscall per
//! batch, no allocation). Everything else here is set-up, status or slow-path code.
pub mod addr;
pub mod cpu;
pub mod fs;
pub mod net;
pub mod process;
pub mod random;
#[cfg(feature = "rdma")]
pub mod verbs;
pub mod watch;
