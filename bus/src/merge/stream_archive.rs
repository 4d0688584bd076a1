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
//! other. Only tickbus messages can be served this way (raw payloads carry no position). The
//! serving stream is trusted no further than a file: a record that is not a whole tickbus
//! message, or claims positions past [`MAX_POSITION`], fails the archive (and the merge reports
//! what it could not bring as a gap); a failure is kept, never read past. Left out: the served
//! journal's incarnation is not checked against the live stream's (a ring's creation time),
//! which a local journal's is.
use tickbus_codecs::header::FLAG_RECORDING_GAP;
use tickbus_codecs::md::FeedGap;
use tickbus_codecs::{Header, Message, MsgType};

use tickbus_codecs::layout::message_type;

use super::{Archive, Entry, MAX_POSITION};
use crate::ring::Recv;
use crate::stream::{Retry, Subscribe};

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
    /// A served message is not a whole tickbus message, so its position is unknown.
    #[error("a served message of {len} bytes is not a whole tickbus message: its stream position is unknown (only journals of tickbus messages can be served)")]
    NotAMessage {
        /// Its length.
        len: usize,
    },
    /// A served record claims positions no real stream reaches.
    #[error("a served record claims positions {first}..{end}: not a real stream's (a corrupt or hostile server)")]
    OutOfRange {
        /// Its first position.
        first: u64,
        /// The position after it.
        end: u64,
    },
    /// The archive failed earlier (the error was returned then): it is not read again, so no
    /// record after the failure is taken for the next one.
    #[error("the served journal failed earlier and is not read again")]
    Failed,
}

/// The journal a remote recorder serves, read from its serving stream `S`.
pub struct StreamArchive<S> {
    sub: S,
    /// The last message peeked (its bytes stay until the next peek, also after `take`).
    payload: Box<[u8]>,
    len: usize,
    current: Option<Entry>,
    failed: bool,
}

impl<S: Subscribe> StreamArchive<S> {
    /// Reads the archive served on `sub` (a reliable subscriber).
    pub fn new(sub: S) -> StreamArchive<S> {
        let payload = vec![0u8; sub.max_payload()].into_boxed_slice();
        StreamArchive { sub, payload, len: 0, current: None, failed: false }
    }

    /// The serving stream.
    pub fn stream(&self) -> &S {
        &self.sub
    }
}

impl<S: Subscribe> StreamArchive<S> {
    /// The next record off the stream, checked: a whole tickbus message (its header's length
    /// and type agree with the bytes), or a flagged `FeedGap`; positions below
    /// [`MAX_POSITION`].
    fn next_entry(&mut self) -> Result<Option<Entry>, StreamArchiveError<S::Error>> {
        let e = match self.sub.try_recv().map_err(StreamArchiveError::Stream)? {
            None => return Ok(None),
            Some(Recv::Gap(g)) => return Err(StreamArchiveError::Lost { missed: g.missed() }),
            Some(Recv::Message(d)) => {
                let p = d.payload;
                let not = StreamArchiveError::NotAMessage { len: p.len() };
                let h = Header::peek(p).ok_or(not)?;
                if message_type(p).is_none() || p.len() > self.payload.len() {
                    return Err(StreamArchiveError::NotAMessage { len: p.len() });
                }
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
        if e.end() > MAX_POSITION || matches!(e, Entry::Gap { count: 0, .. }) {
            return Err(StreamArchiveError::OutOfRange { first: e.position(), end: e.end() });
        }
        Ok(Some(e))
    }
}

impl<S: Subscribe> Archive for StreamArchive<S> {
    type Error = StreamArchiveError<S::Error>;

    fn peek(&mut self) -> Result<Option<Entry>, Self::Error> {
        if let Some(e) = self.current {
            return Ok(Some(e));
        }
        if self.failed {
            return Err(StreamArchiveError::Failed);
        }
        match self.next_entry() {
            Ok(e) => {
                self.current = e;
                Ok(e)
            }
            Err(e) => {
                self.failed = !matches!(&e, StreamArchiveError::Stream(s) if s.retry_helps());
                Err(e)
            }
        }
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

#[cfg(test)]
mod tests {
    use tickbus_codecs::md::OrderAdd;
    use zerocopy::IntoBytes;

    use super::*;
    use crate::ring::{HeapMemory, RingConfig, RingReader, RingWriter};
    use crate::{Mode, Publisher, Subscriber};

    fn served() -> (Publisher<std::sync::Arc<HeapMemory>>, StreamArchive<Subscriber<std::sync::Arc<HeapMemory>>>) {
        let cfg = RingConfig::for_payload(Mode::Reliable, 9, 128, 16);
        let mem = HeapMemory::new(cfg.ring_bytes());
        let p = Publisher::new(RingWriter::create(mem.clone(), &cfg, 1, 0).unwrap());
        (p, StreamArchive::new(Subscriber::new(RingReader::consumer_by_token(mem, 1).unwrap())))
    }

    fn add(position: u64) -> OrderAdd {
        let mut m = OrderAdd::new();
        m.header_mut().stamp(1, position, 0);
        m
    }

    #[test]
    fn what_a_hostile_server_sends_fails_the_archive_for_good() {
        let forged_gap = {
            let mut g = FeedGap::new();
            (g.first_sequence, g.count) = (5, u64::MAX - 3);
            g.header.flags |= FLAG_RECORDING_GAP;
            g
        };
        let cases: [(&str, Vec<u8>); 4] = [
            ("raw bytes", vec![7u8; 40]),
            ("a message cut short", add(1).as_bytes()[..40].to_vec()),
            ("a position past 2^62", add(1 << 62).as_bytes().to_vec()),
            ("a gap past 2^62", forged_gap.as_bytes().to_vec()),
        ];
        for (what, bad) in cases {
            let (mut p, mut a) = served();
            p.publish(add(0).as_bytes()).unwrap();
            p.publish(&bad).unwrap();
            p.publish(add(2).as_bytes()).unwrap();
            assert_eq!(a.peek().unwrap(), Some(Entry::Message { position: 0, len: OrderAdd::LEN }), "{what}");
            assert_eq!(a.payload(), add(0).as_bytes());
            a.take();
            assert!(a.peek().is_err(), "{what} was taken for a record");
            // Never read past: position 2 does not follow 0 in silence.
            assert!(matches!(a.peek(), Err(StreamArchiveError::Failed)), "{what}");
        }
    }

    #[test]
    fn a_recording_gap_and_a_feeds_own_feed_gap_are_told_apart() {
        let (mut p, mut a) = served();
        let mut recording = FeedGap::new();
        (recording.first_sequence, recording.count) = (0, 3);
        recording.header.flags |= FLAG_RECORDING_GAP;
        let mut feeds = FeedGap::new();
        (feeds.first_sequence, feeds.count) = (100, 9);
        feeds.header_mut().stamp(1, 3, 0);
        p.publish(recording.as_bytes()).unwrap();
        p.publish(feeds.as_bytes()).unwrap();
        assert_eq!(a.peek().unwrap(), Some(Entry::Gap { position: 0, count: 3 }));
        a.take();
        assert_eq!(a.peek().unwrap(), Some(Entry::Message { position: 3, len: FeedGap::LEN }));
        assert_eq!(a.payload(), feeds.as_bytes());
    }
}
