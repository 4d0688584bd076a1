//! What a replay reads: a journal, an ITCH 5.0 file, or a pcap/pcapng capture of MoldUDP64.
//! Each is streamed: journals and ITCH files through memory maps (the page cache, not the heap),
//! captures through buffered reads, one datagram at a time.
use std::fs::File;
#[cfg(feature = "pcap")]
use std::io::BufReader;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use tickbus_codecs::capture_format::CaptureFormat;
use tickbus_codecs::itch::{self, ItchError};
#[cfg(feature = "pcap")]
use tickbus_codecs::pcap::{CaptureError, CaptureReader};

#[cfg(feature = "pcap")]
use super::capture::{Capture, CaptureCounts};
use super::pace::{Window, DAY_NS};
use crate::journal::{Cursor, JournalError, JournalReader, Kind};

/// One thing to replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item<'a> {
    /// Its position in the recording (journal: the stream position; ITCH file: the message's
    /// index from 0; capture: the MoldUDP64 sequence number).
    pub sequence: u64,
    /// Its time in the recording, for pacing and the time window: ITCH's timestamp (ns since
    /// midnight, exchange time), a journal's receive wall time or a capture's (ns since the epoch).
    pub time_ns: Option<u64>,
    /// The message; empty for a gap.
    pub payload: &'a [u8],
    /// A journal gap record: this many messages from `sequence` were not recorded.
    pub gap: Option<u64>,
}

/// Why a replay source failed; each names the file and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The journal could not be read.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// An ITCH file is malformed.
    #[error("{path}: {source}")]
    Itch {
        /// The file.
        path: PathBuf,
        /// What is wrong, and at which offset.
        source: ItchError,
    },
    /// A capture could not be read.
    #[cfg(feature = "pcap")]
    #[error("{path}: {source}")]
    Capture {
        /// The file.
        path: PathBuf,
        /// What is wrong, and at which packet.
        source: CaptureError,
    },
    /// A captured datagram is not a MoldUDP64 packet.
    #[error("{path}: datagram {packet} is not a MoldUDP64 packet: {reason} (if the capture holds other traffic too, pick the feed's datagrams with --port)")]
    Mold {
        /// The capture.
        path: PathBuf,
        /// The packet's number in the capture (from 1).
        packet: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A filesystem call failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done (opening, reading, mapping).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The path is a pcap/pcapng capture and this build reads none (an embedder left out the
    /// `pcap` feature).
    #[cfg(not(feature = "pcap"))]
    #[error("{path} is a pcap/pcapng capture, and this build of tickbus reads no captures: build it with the `pcap` feature (on by default)")]
    NoCaptures {
        /// The path given.
        path: PathBuf,
    },
    /// The path is no kind of recording this reads.
    #[error("{path} is neither a journal folder, an ITCH file nor a pcap/pcapng capture")]
    Unknown {
        /// The path given.
        path: PathBuf,
    },
}

/// What kind of recording a path holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// A journal folder (written by the recorder).
    Journal,
    /// A NASDAQ ITCH 5.0 file (length-prefixed messages, as NASDAQ publishes them).
    Itch,
    /// A pcap or pcapng capture of MoldUDP64 datagrams.
    Capture,
}

/// A recording being replayed: made by [`open`] or [`open_window`], read with
/// [`Source::next`]. Its reading state is private, so only those can make one.
pub struct Source(State);

/// Where each kind of recording is read from, and how far.
enum State {
    Journal {
        reader: JournalReader,
        cursor: Cursor,
        from: JournalStart,
    },
    Itch {
        path: PathBuf,
        map: Mmap,
        at: usize,
        index: u64,
    },
    #[cfg(feature = "pcap")]
    Capture {
        capture: Box<Capture>,
        port: Option<u16>,
    },
}

/// Where a journal replay starts (found through the index, and again on every loop).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalStart {
    /// From the first record.
    Beginning,
    /// From this stream position.
    Sequence(u64),
    /// Wall time, ns since the Unix epoch.
    Time(u64),
}

impl JournalStart {
    fn cursor(self, reader: &JournalReader) -> Result<Cursor, ReplayError> {
        Ok(match self {
            JournalStart::Beginning => reader.cursor(),
            JournalStart::Sequence(s) => reader.seek_sequence(s)?,
            JournalStart::Time(t) => reader.seek_time(t)?,
        })
    }
}

/// Opens `path` (a journal folder, an ITCH file, or a capture, told apart by their first
/// bytes), starting at `from_sequence` if given (journals seek there through their index).
pub fn open(path: &Path, from_sequence: Option<u64>, port: Option<u16>) -> Result<Source, ReplayError> {
    let window = Window { from_sequence, ..Window::default() };
    open_window(path, &window, port)
}

/// [`open`] for a window: a journal starts at the window's first sequence, or else at its start
/// time of day on the day its recording begins, through its index (nothing before is read).
pub fn open_window(path: &Path, window: &Window, port: Option<u16>) -> Result<Source, ReplayError> {
    let io = |what, e| ReplayError::Io { what, path: path.to_owned(), source: e };
    if path.is_dir() {
        let reader = JournalReader::open(path)?;
        let from = match (window.from_sequence, window.from_time) {
            (Some(s), _) => JournalStart::Sequence(s),
            (None, Some(tod)) => match reader.cursor().next_timed()? {
                Some((_, first_ns)) => JournalStart::Time(first_ns - first_ns % DAY_NS + tod),
                None => JournalStart::Beginning,
            },
            (None, None) => JournalStart::Beginning,
        };
        let cursor = from.cursor(&reader)?;
        return Ok(Source(State::Journal { reader, cursor, from }));
    }
    let file = File::open(path).map_err(|e| io("opening", e))?;
    let mut head = [0u8; 8];
    let n = std::io::Read::read(&mut &file, &mut head).map_err(|e| io("reading", e))?;
    #[cfg(not(feature = "pcap"))]
    if CaptureFormat::detect(&head[..n]).is_some() {
        let _ = port;
        return Err(ReplayError::NoCaptures { path: path.to_owned() });
    }
    #[cfg(feature = "pcap")]
    if CaptureFormat::detect(&head[..n]).is_some() {
        let file = File::open(path).map_err(|e| io("opening", e))?;
        let reader = CaptureReader::new(BufReader::with_capacity(1 << 20, file))
            .map_err(|source| ReplayError::Capture { path: path.to_owned(), source })?;
        let reader = Box::new(match port {
            Some(p) => reader.with_port(p),
            None => reader,
        });
        return Ok(Source(State::Capture { capture: Box::new(Capture::new(path.to_owned(), reader)), port }));
    }
    // SAFETY: mapped read-only, and every byte is read through ITCH framing that checks each
    // length against what is left, so changed bytes are an error, never an out-of-bounds read.
    // The invariant a caller keeps: the file is a finished recording that nothing truncates
    // while it is replayed (a truncation would fault with SIGBUS, as for any mapped file).
    let map = unsafe { Mmap::map(&file) }.map_err(|e| io("mapping", e))?;
    if n >= 3 && itch::frames(&map[..]).next().is_some_and(|r| r.is_ok()) {
        return Ok(Source(State::Itch { path: path.to_owned(), map, at: 0, index: 0 }));
    }
    Err(ReplayError::Unknown { path: path.to_owned() })
}

impl Source {
    /// What kind of recording this is.
    pub fn kind(&self) -> SourceKind {
        match &self.0 {
            State::Journal { .. } => SourceKind::Journal,
            State::Itch { .. } => SourceKind::Itch,
            #[cfg(feature = "pcap")]
            State::Capture { .. } => SourceKind::Capture,
        }
    }

    /// The stream a journal recorded (None for other recordings).
    pub fn stream_id(&self) -> Option<u32> {
        match &self.0 {
            State::Journal { reader, .. } => Some(reader.stream_id()),
            _ => None,
        }
    }

    /// Bytes to go through, for a progress bar (None when unknown).
    pub fn size(&self) -> Option<u64> {
        match &self.0 {
            State::Itch { map, .. } => Some(map.len() as u64),
            _ => None,
        }
    }

    /// Bytes gone through.
    pub fn offset(&self) -> u64 {
        match &self.0 {
            State::Itch { at, .. } => *at as u64,
            State::Journal { cursor, .. } => cursor.location().1,
            #[cfg(feature = "pcap")]
            State::Capture { capture, .. } => capture.packets(),
        }
    }

    /// Back to the start (for looping).
    pub fn rewind(&mut self) -> Result<(), ReplayError> {
        match &mut self.0 {
            State::Journal { reader, cursor, from } => *cursor = from.cursor(reader)?,
            State::Itch { at, index, .. } => {
                *at = 0;
                *index = 0;
            }
            #[cfg(feature = "pcap")]
            State::Capture { capture, port } => {
                let session = capture.session();
                let path = capture.path().to_owned();
                let port = *port;
                *self = open(&path, None, port)?;
                if let Some(s) = session {
                    self.pin_session(s); // every lap follows the session the first one did
                }
            }
        }
        Ok(())
    }

    /// The next item, `Ok(None)` at the end.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Item<'_>>, ReplayError> {
        match &mut self.0 {
            State::Journal { cursor, .. } => {
                let Some((rec, wall)) = cursor.next_timed()? else { return Ok(None) };
                let time = Some(wall);
                Ok(Some(match rec.kind {
                    Kind::Message(p) => Item { sequence: rec.sequence, time_ns: time, payload: p, gap: None },
                    Kind::Gap { count } => {
                        Item { sequence: rec.sequence, time_ns: time, payload: &[], gap: Some(count) }
                    }
                    Kind::End => unreachable!("cursors do not deliver end records"),
                }))
            }
            State::Itch { path, map, at, index } => {
                let mut frames = itch::frames(&map[*at..]);
                match frames.next() {
                    None => Ok(None),
                    Some(Err(e)) => Err(ReplayError::Itch { path: path.clone(), source: e.shifted(*at as u64) }),
                    Some(Ok(r)) => {
                        *at += frames.offset() as usize;
                        let i = *index;
                        *index += 1;
                        Ok(Some(Item {
                            sequence: i,
                            time_ns: Some(r.message.header().timestamp_ns()),
                            payload: r.message.as_bytes(),
                            gap: None,
                        }))
                    }
                }
            }
            #[cfg(feature = "pcap")]
            State::Capture { capture, .. } => capture.next(),
        }
    }

    /// A capture follows only MoldUDP64 session `session` (by default, the first one it holds);
    /// no effect on other recordings.
    #[cfg(feature = "pcap")]
    pub fn pin_session(&mut self, session: [u8; 10]) {
        if let State::Capture { capture, .. } = &mut self.0 {
            capture.pin_session(session);
        }
    }

    /// The MoldUDP64 session a capture follows (None before its first datagram, and for
    /// other recordings, which have no session).
    #[cfg(feature = "pcap")]
    pub fn session(&self) -> Option<[u8; 10]> {
        match &self.0 {
            State::Capture { capture, .. } => capture.session(),
            _ => None,
        }
    }

    /// What reading a capture left out so far (None for other recordings).
    #[cfg(feature = "pcap")]
    pub fn capture_counts(&self) -> Option<CaptureCounts> {
        match &self.0 {
            State::Capture { capture, .. } => Some(capture.counts()),
            _ => None,
        }
    }
}
