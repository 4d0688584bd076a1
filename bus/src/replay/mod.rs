//! Replay: publishes a recording (a journal, an ITCH 5.0 file, or a pcap/pcapng capture of
//! MoldUDP64) onto a stream, paced as recorded, faster or slower, at a fixed rate, or flat out.
//!
//! Owns: the sources ([`source`]: each streams its input, through a memory map or buffered
//! reads, so a multi-GB day never sits in memory), the window (from/to by time of day or by
//! sequence), and the pacing ([`pace`]: each message's intended send time, from which the
//! pacing error is measured), and serving a journal to a remote late joiner ([`mod@serve`]: its
//! records as the recorder writes them). Never: opens a transport itself (the caller owns it)
//! or reads a clock it is not given.
#[cfg(feature = "pcap")]
pub mod capture;
pub mod pace;
pub mod player;
pub mod serve;
pub mod source;

#[cfg(feature = "pcap")]
pub use capture::CaptureCounts;
pub use pace::{parse_time_of_day, Pace, Pacer, TimeOfDayError, Window, DEFAULT_MAX_QUIET_NS};
pub use player::{PlayError, Played, Player, PublishError};
pub use serve::{serve, ServeError, Served};
pub use source::{open, open_window, Item, JournalStart, ReplayError, Source, SourceKind};
