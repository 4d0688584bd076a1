//! A capture of MoldUDP64 read back as one stream: the messages of one session, each once, in
//! sequence order. A capture of a feed holds both lines (every message twice), may hold other
//! sessions (a test day, yesterday's tail), and may hold stray datagrams; replayed raw, two
//! lines replayed twice and one stray datagram past `--to-seq` ended the replay early. So:
//! - the session followed is the first one seen, or the one pinned ([`Source::pin_session`](super::Source::pin_session));
//!   datagrams of any other are skipped and counted;
//! - messages go through [`CaptureOrder`] (the feed's own rule for captures): a message at or
//!   below one delivered is a duplicate (the other line's copy), a hole is delivered as a gap
//!   item, and a jump ahead is believed only when a later datagram continues it.
use std::collections::VecDeque;
use std::convert::Infallible;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use tickbus_codecs::moldudp64::{Packet, PacketKind, HEADER_LEN};
use tickbus_codecs::pcap::CaptureReader;

use super::source::{Item, ReplayError};
use crate::feed::{CaptureOrder, CaptureOut, CaptureStats};

/// What reading a capture left out, beyond [`CaptureStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CaptureCounts {
    /// Duplicates, and jumps no later datagram continued (discarded).
    pub order: CaptureStats,
    /// Datagrams of another session than the one followed (skipped).
    pub other_session: u64,
    /// Messages delivered as holes (the capture lacks them).
    pub missing: u64,
}

/// One delivered item, its payload in the arena.
#[derive(Debug, Clone, Copy)]
struct Queued {
    sequence: u64,
    time: u64,
    gap: Option<u64>,
    start: usize,
    len: usize,
}

/// A capture being read as one ordered stream.
pub(crate) struct Capture {
    path: PathBuf,
    reader: Box<CaptureReader<BufReader<File>>>,
    packet: Vec<u8>,
    /// The current datagram: where its next message is, its first sequence, its capture time,
    /// how many messages are left in it.
    at: usize,
    seq: u64,
    time: u64,
    left: u16,
    session: Option<[u8; 10]>,
    order: CaptureOrder,
    queue: VecDeque<Queued>,
    /// Payloads of the queued items (cleared whenever the queue is empty).
    arena: Vec<u8>,
    counts: CaptureCounts,
    ended: bool,
}

impl Capture {
    pub(crate) fn new(path: PathBuf, reader: Box<CaptureReader<BufReader<File>>>) -> Capture {
        Capture {
            path,
            reader,
            packet: Vec::new(),
            at: 0,
            seq: 0,
            time: 0,
            left: 0,
            session: None,
            order: CaptureOrder::new(),
            queue: VecDeque::new(),
            arena: Vec::new(),
            counts: CaptureCounts::default(),
            ended: false,
        }
    }

    /// Follows only `session` (else the first session seen).
    pub(crate) fn pin_session(&mut self, session: [u8; 10]) {
        self.session = Some(session);
    }

    /// The session followed (None before the first datagram).
    pub(crate) fn session(&self) -> Option<[u8; 10]> {
        self.session
    }

    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }

    pub(crate) fn packets(&self) -> u64 {
        self.reader.packets()
    }

    pub(crate) fn counts(&self) -> CaptureCounts {
        CaptureCounts { order: self.order.stats(), ..self.counts }
    }

    /// The next message or hole of the followed session, in order; None at the end.
    pub(crate) fn next(&mut self) -> Result<Option<Item<'_>>, ReplayError> {
        if self.queue.is_empty() {
            self.arena.clear();
        }
        while self.queue.is_empty() && !self.ended {
            match self.raw()? {
                Some((sequence, time, range)) => {
                    let Capture { order, queue, arena, packet, counts, .. } = self;
                    let payload = &packet[range];
                    let _: Result<(), Infallible> = order.push(sequence, Some(time), payload, &mut |o| {
                        queued(queue, arena, counts, time, o);
                        Ok(())
                    });
                }
                None => {
                    self.order.finish();
                    self.ended = true;
                }
            }
        }
        let Some(q) = self.queue.pop_front() else { return Ok(None) };
        Ok(Some(Item {
            sequence: q.sequence,
            time_ns: Some(q.time),
            payload: &self.arena[q.start..q.start + q.len],
            gap: q.gap,
        }))
    }

    /// The next message of the followed session as the capture holds it (sequence, capture
    /// time, where in `packet`), None at the end of the capture.
    fn raw(&mut self) -> Result<Option<(u64, u64, std::ops::Range<usize>)>, ReplayError> {
        while self.left == 0 {
            let path = &self.path;
            let Some(d) =
                self.reader.next_datagram().map_err(|source| ReplayError::Capture { path: path.clone(), source })?
            else {
                return Ok(None);
            };
            self.time = d.ts_ns;
            self.packet.clear();
            self.packet.extend_from_slice(d.payload);
            let p = Packet::parse(&self.packet).map_err(|e| ReplayError::Mold {
                path: path.clone(),
                packet: d.packet,
                reason: e.to_string(),
            })?;
            if p.kind() != PacketKind::Messages {
                continue;
            }
            match self.session {
                None => self.session = Some(p.header.session),
                Some(s) if s != p.header.session => {
                    self.counts.other_session += 1;
                    continue;
                }
                Some(_) => {}
            }
            self.left = p.message_count();
            self.seq = p.header.sequence.get();
            self.at = HEADER_LEN;
        }
        let len = usize::from(u16::from_be_bytes([self.packet[self.at], self.packet[self.at + 1]]));
        let range = self.at + 2..self.at + 2 + len;
        self.at += 2 + len;
        self.left -= 1;
        let s = self.seq;
        self.seq += 1;
        Ok(Some((s, self.time, range)))
    }
}

fn queued(queue: &mut VecDeque<Queued>, arena: &mut Vec<u8>, counts: &mut CaptureCounts, time: u64, o: CaptureOut<'_>) {
    match o {
        CaptureOut::Message { sequence, payload } => {
            queue.push_back(Queued { sequence, time, gap: None, start: arena.len(), len: payload.len() });
            arena.extend_from_slice(payload);
        }
        CaptureOut::Gap { from, to } => {
            counts.missing += to - from;
            queue.push_back(Queued { sequence: from, time, gap: Some(to - from), start: arena.len(), len: 0 });
        }
    }
}

#[cfg(test)]
#[path = "capture_tests.rs"]
mod tests;
