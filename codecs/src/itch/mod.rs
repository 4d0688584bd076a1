//! NASDAQ TotalView-ITCH 5.0: zero-copy views of all 23 message types, dispatch by type, and a
//! streaming reader of `[u16 BE length][message]` files, a writer, and a zero-copy walk of a file
//! held in memory.
//!
//! Owns: the byte layout of ITCH messages and of ITCH files. Never: allocates per message, does
//! I/O beyond the `Read` it is given, or panics on any input; after a message is returned, no
//! accessor can panic.
mod dispatch;
mod messages;
mod reader;
mod writer;

pub use dispatch::{parse, ItchError, ItchMessage};
pub use messages::*;
pub use reader::{ItchFileReader, Record};
pub use writer::{frames, Frames, ItchFileWriter};
