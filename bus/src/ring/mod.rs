//! The ring protocol: one implementation that every transport (shm, RDMA) moves.
//!
//! Owns: the memory layout of a ring (see [`layout`]), the slot seqlock, the writer and reader
//! state machines. Never: does I/O, reads a clock, allocates after attach, or makes a syscall;
//! tests drive it deterministically and loom model-checks its synchronisation (with the payload
//! copied a word at a time: the 16-byte assembly copy of `wide` is argued from the hardware and
//! tested, not modelled).
//!
//! A ring is a header plus `slot_count` fixed-size slots. Position `n` lives in slot
//! `n % slot_count`; its validity word holds `n + 1` once published. Lossy rings never make the
//! publisher wait; reliable rings bound the publisher by the slowest declared consumer.
mod attach;
pub mod counts;
pub mod error;
pub(crate) mod hook;
pub mod layout;
pub mod memory;
mod reader;
mod slot;
pub(crate) mod sync;
mod wide;
mod writer;

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

pub use error::{AttachError, ClaimError, LayoutError, SendError};
pub use layout::{Mode, RingConfig, HEADER_BYTES, LEAD_INSIDE_MAX, MAX_CONSUMERS, SLOT_OVERHEAD};
pub use memory::{HeapMemory, RingMemory};
pub use reader::{ConsumerLine, Delivery, Gap, Recv, RecvInto, RingReader, RingStatus, StartAt};
pub use writer::{Claim, RingWriter};

/// Lays out a ring in zeroed memory without attaching to it: for memory whose publisher is
/// remote (an RDMA subscriber's ring), so no producer token or epoch is claimed.
pub fn initialize<M: RingMemory>(mem: &M, cfg: &RingConfig) -> Result<(), LayoutError> {
    attach::init(&memory::Words::new(mem), cfg, 0)
}

/// Sets where consumer line `index` stands (before any consumer attaches): an RDMA subscriber's
/// stream starts wherever the remote publisher says, not at 0. Refuses a line the ring's header
/// does not have.
pub fn set_consumer_position<M: RingMemory>(mem: &M, index: usize, position: u64) -> Result<(), AttachError> {
    let w = memory::Words::new(mem);
    attach::check_header(&w)?;
    if index >= MAX_CONSUMERS {
        return Err(AttachError::NoSuchConsumer { index, max: MAX_CONSUMERS });
    }
    w.word(layout::consumer_position_word(index)).store(position, sync::Ordering::Release);
    Ok(())
}
