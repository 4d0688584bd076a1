//! A remote archive: a journal served over the fabric (`tickbus journal serve`, which publishes
//! its records on a reliable stream, rdma-rc across hosts) and read here as an [`Archive`].
//!
//! Why a replay stream and not RDMA READs of the segments: the reliable stream already has
//! credit-based flow control, reconnection and authentication, and the journal's checks (CRC,
//! index, a segment being written) stay on the host that owns the files; a reader of remote
//! segments would have to learn the folder's layout, follow new segments and re-check every
//! record across the fabric. The cost is one copy per message on the serving host, off both
//! hot paths.
//!
//! Positions come from the messages themselves: a tickbus message carries its stream position
//! (the header's sequence, stamped by its publisher), so served records keep their positions
//! whatever the serving stream's own are. A journal's gap record travels as a `FeedGap` flagged
//! [`FLAG_RECORDING_GAP`]; a `FeedGap` without the flag is a message of the stream like any
//! other. Only tickbus messages can be served this way (raw payloads carry no position).
use tickbus_codecs::header::FLAG_RECORDING_GAP;
use tickbus_codecs::md::FeedGap;
use tickbus_codecs::{Header, Message, MsgType};

use super::{Archive, Entry};
use crate::ring::Recv;
use crate::stream::Subscribe;

/// Why a served archive cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum StreamArchiveError<E: std::error::Error + 'static> {
    /// The serving stream failed.
    #[error("the journal's serving stream failed: {0}")]
    Stream(E),
    /// The serving stream lost messages: which positions they held is unknown.
    #[error("the journal's serving stream lost {missed} messages (it must be reliable: serve on rdma-rc or a reliable shm ring)")]
    Lost {
        /// How many.
        missed: u64,
    },
    /// A served message is not a tickbus message, so its position is unknown.
    #[error("a served message of {len} bytes is not a tickbus message: its stream position is unknown (only journals of tickbus messages can be served)")]
    NotAMessage {
        /// Its length.
        len: usize,
    },
}

/// The journal a remote recorder serves, read from its serving stream `S`.
pub struct StreamArchive<S> {
    sub: S,
    /// The last message peeked (its bytes stay until the next peek, also after `take`).
    payload: Box<[u8]>,
    len: usize,
    current: Option<Entry>,
}

impl<S: Subscribe> StreamArchive<S> {
    /// Reads the archive served on `sub` (a reliable subscriber).
    pub fn new(sub: S) -> StreamArchive<S> {
        let payload = vec![0u8; sub.max_payload()].into_boxed_slice();
        StreamArchive { sub, payload, len: 0, current: None }
    }

    /// The serving stream.
    pub fn stream(&self) -> &S {
        &self.sub
    }
}

impl<S: Subscribe> Archive for StreamArchive<S> {
    type Error = StreamArchiveError<S::Error>;

    fn peek(&mut self) -> Result<Option<Entry>, Self::Error> {
        if let Some(e) = self.current {
            return Ok(Some(e));
        }
        let e = match self.sub.try_recv().map_err(StreamArchiveError::Stream)? {
            None => return Ok(None),
            Some(Recv::Gap(g)) => return Err(StreamArchiveError::Lost { missed: g.missed() }),
            Some(Recv::Message(d)) => {
                let p = d.payload;
                let h = Header::peek(p).ok_or(StreamArchiveError::NotAMessage { len: p.len() })?;
                if h.msg_type == MsgType::FeedGap as u16 && h.flags & FLAG_RECORDING_GAP != 0 {
                    let g = FeedGap::parse(p).map_err(|_| StreamArchiveError::NotAMessage { len: p.len() })?;
                    Entry::Gap { position: g.first_sequence, count: g.count }
                } else {
                    self.payload[..p.len()].copy_from_slice(p);
                    self.len = p.len();
                    Entry::Message { position: h.sequence, len: p.len() }
                }
            }
        };
        self.current = Some(e);
        Ok(Some(e))
    }

    fn take(&mut self) {
        self.current = None;
    }

    fn payload(&self) -> &[u8] {
        &self.payload[..self.len]
    }

    fn source_id(&self) -> Option<u64> {
        None // the serving stream's identity is not the recorded stream's
    }
}
