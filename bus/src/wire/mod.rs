//! What crosses a network, as pure code: the RDMA control channel's lines, the endpoint a peer
//! advertises, the transcript MAC that binds a handshake together, the ud-mcast frame and the
//! subscriber's sequencing state machine.
//!
//! Owns: parsing and formatting of bytes a peer sent. Never: does I/O, reads a clock, or panics
//! on any input. Everything here reads untrusted bytes; `bus/fuzz` drives each parser.
pub mod control;
pub mod endpoint;
pub mod frame;
pub mod sequencer;
pub mod transcript;
