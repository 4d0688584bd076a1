//! Every syscall tickbus makes outside std, fenced into one small module per OS concern.
//!
//! Owns: FFI to libc for filesystems, processes and CPUs. Never: runs on a hot path. Everything
//! here is set-up, status or slow-path code.
pub mod addr;
pub mod cpu;
pub mod fs;
pub mod process;
pub mod random;
#[cfg(feature = "rdma")]
pub mod verbs;
