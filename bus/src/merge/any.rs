//! The archive a late joiner names at run time: a journal folder on this host, or a journal
//! served from another (`tickbus journal serve`) by the channel URI it is served on.
use std::path::Path;

use super::{Archive, Entry, StreamArchive, StreamArchiveError};
use crate::journal::{JournalError, JournalTail};
use crate::stream::{open_subscriber, AnyError, AnySubscriber, Channel, OpenOptions, PeerState, Reliability};

/// A local or served journal. Made once per join and read in place (a merge holding it is
/// itself made once): the variants are not boxed.
#[allow(clippy::large_enum_variant)]
pub enum AnyArchive {
    /// A journal folder on this host, followed as it is written.
    Journal(JournalTail),
    /// A journal served on a reliable stream.
    Served(StreamArchive<AnySubscriber>),
}

/// Why an archive could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AnyArchiveError {
    /// The local journal.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The served one.
    #[error(transparent)]
    Served(#[from] StreamArchiveError<AnyError>),
}

impl AnyArchive {
    /// Opens `spec` from position `from`: a folder that exists is a local journal; anything
    /// else must be the channel URI a journal is served on (opened as a reliable subscriber
    /// with `o`, waiting as `o` says). A served journal starts where its server was told to.
    pub fn open(spec: &str, from: u64, o: &OpenOptions) -> Result<AnyArchive, String> {
        if Path::new(spec).is_dir() {
            return JournalTail::open(Path::new(spec), from).map(AnyArchive::Journal).map_err(|e| e.to_string());
        }
        let c = Channel::parse(spec).map_err(|e| {
            format!("{spec:?} is neither a journal folder nor the channel URI a journal is served on: {e}")
        })?;
        let mut o = o.clone();
        o.reliability = Reliability::Reliable;
        let sub = open_subscriber(&c, &o).map_err(|e| format!("reading the served journal {e}"))?;
        Ok(AnyArchive::Served(StreamArchive::new(sub)))
    }

    /// Whether the archive holds, or may still send, a record not yet taken (a local journal
    /// is looked at again; a served one has more while its server is there). Idle path.
    pub fn has_more(&mut self) -> bool {
        match self {
            AnyArchive::Journal(t) => t.has_more(),
            AnyArchive::Served(s) => matches!(s.peek(), Ok(Some(_))) || s.stream().publisher() == PeerState::Live,
        }
    }
}

impl Archive for AnyArchive {
    type Error = AnyArchiveError;

    #[inline]
    fn peek(&mut self) -> Result<Option<Entry>, AnyArchiveError> {
        match self {
            AnyArchive::Journal(t) => Ok(t.peek()?),
            AnyArchive::Served(s) => Ok(s.peek()?),
        }
    }
    #[inline]
    fn take(&mut self) {
        match self {
            AnyArchive::Journal(t) => t.take(),
            AnyArchive::Served(s) => s.take(),
        }
    }
    #[inline]
    fn payload(&self) -> &[u8] {
        match self {
            AnyArchive::Journal(t) => t.payload(),
            AnyArchive::Served(s) => s.payload(),
        }
    }
    fn source_id(&self) -> Option<u64> {
        match self {
            AnyArchive::Journal(t) => t.source_id(),
            AnyArchive::Served(s) => s.source_id(),
        }
    }
}
