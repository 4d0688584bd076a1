//! Snapshots made by the publisher's own process, from what it publishes: the publisher hands
//! each message it published to a [`SnapshotTap`] (a copy into a bounded queue: no wait, no
//! syscall, no allocation), and a maker on a thread of its own reads them as an [`Archive`]
//! ([`TapArchive`]) and publishes its book every period ([`super::run`]).
//!
//! Why a venue or feed makes them itself and not only `tickbus snapshot` from a journal: a
//! journal-made snapshot carries every loss the journal has (a recorder lapped, the feed's
//! `FeedGap`s), so after one it can never give a trader a whole book again; the publisher saw
//! every message it published, so its snapshots are whole for as long as its tap lost nothing.
//! And no recorder is needed for a trader to recover.
//!
//! The copy happens on the publisher's thread (one 128-byte slot a message); the book, the walk and the
//! chunks are the maker's, on a thread of its own or stepped between the publisher's ticks
//! ([`super::stepper`]). A maker that falls behind
//! by more than the queue holds loses messages, never the publisher's time: the maker sees a
//! gap, and every snapshot after it says `lost` (a trader will not trade on it).
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::merge::{Archive, Entry};

/// The longest message a tap takes (every normalised market-data message is far shorter): a
/// longer one is counted lost, as if the queue had been full.
pub const TAP_MESSAGE_BYTES: usize = 112;

#[derive(Clone, Copy)]
struct Slot {
    position: u64,
    len: u32,
    bytes: [u8; TAP_MESSAGE_BYTES],
}

const EMPTY: Slot = Slot { position: 0, len: 0, bytes: [0; TAP_MESSAGE_BYTES] };

/// The publisher's end: [`SnapshotTap::push`] after each message published.
pub struct SnapshotTap {
    queue: rtrb::Producer<Slot>,
    lost: u64,
}

impl SnapshotTap {
    /// Hands the message published at `position` to the maker; false (and counted) when the
    /// maker has fallen a whole queue behind or the message is longer than
    /// [`TAP_MESSAGE_BYTES`]: the maker then sees the position missing, as a gap.
    #[inline]
    pub fn push(&mut self, position: u64, payload: &[u8]) -> bool {
        if payload.len() > TAP_MESSAGE_BYTES || self.queue.is_full() {
            self.lost += 1;
            return false;
        }
        let mut slot = Slot { position, len: payload.len() as u32, bytes: [0; TAP_MESSAGE_BYTES] };
        slot.bytes[..payload.len()].copy_from_slice(payload);
        self.queue.push(slot).is_ok()
    }

    /// Messages the maker never got (its queue was full, or one was too long).
    pub fn lost(&self) -> u64 {
        self.lost
    }
}

/// The maker's end: the tapped messages as an [`Archive`], in position order, a position the
/// tap could not hand over reported as a [`Entry::Gap`].
pub struct TapArchive {
    queue: rtrb::Consumer<Slot>,
    /// The position after the last entry taken (None: nothing taken yet).
    next: Option<u64>,
    /// The entry `peek` returned (its message copied out, so it stays readable after `take`).
    peeked: Option<Entry>,
    current: Box<Slot>,
    /// The publisher's stream incarnation (0: not known yet), set once its stream is open.
    source: Arc<AtomicU64>,
}

/// A tap and its archive, holding up to `capacity` messages between them (allocated and
/// touched here, so the publisher's pushes take no page fault). `source` is the publisher's
/// stream incarnation ([`crate::ring::RingWriter::created_unix_ns`]; 0 until known), stamped in
/// every snapshot so a trader can refuse one of another stream.
pub fn channel(capacity: usize, source: Arc<AtomicU64>) -> (SnapshotTap, TapArchive) {
    let (mut queue, mut consumer) = rtrb::RingBuffer::new(capacity);
    while queue.push(EMPTY).is_ok() {}
    while consumer.pop().is_ok() {}
    let archive = TapArchive { queue: consumer, next: None, peeked: None, current: Box::new(EMPTY), source };
    (SnapshotTap { queue, lost: 0 }, archive)
}

impl TapArchive {
    /// Messages waiting in the queue (the maker's backlog).
    #[inline]
    pub fn waiting(&self) -> usize {
        self.queue.slots()
    }
}

impl Archive for TapArchive {
    type Error = Infallible;

    fn peek(&mut self) -> Result<Option<Entry>, Infallible> {
        if self.peeked.is_none() {
            let Ok(slot) = self.queue.peek() else { return Ok(None) };
            let position = slot.position;
            self.peeked = Some(match self.next {
                Some(next) if position > next => {
                    self.current.len = 0;
                    Entry::Gap { position: next, count: position - next }
                }
                _ => {
                    let len = slot.len as usize;
                    self.current.position = position;
                    self.current.len = slot.len;
                    self.current.bytes[..len].copy_from_slice(&slot.bytes[..len]);
                    Entry::Message { position, len }
                }
            });
        }
        Ok(self.peeked)
    }

    fn take(&mut self) {
        match self.peeked.take() {
            Some(Entry::Gap { position, count }) => self.next = Some(position + count),
            Some(Entry::Message { position, .. }) => {
                let _ = self.queue.pop();
                self.next = Some(position + 1);
            }
            None => {}
        }
    }

    fn payload(&self) -> &[u8] {
        &self.current.bytes[..self.current.len as usize]
    }

    fn source_id(&self) -> Option<u64> {
        Some(self.source.load(Ordering::Acquire)).filter(|&s| s != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(a: &mut TapArchive) -> Vec<(Entry, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some(e) = a.peek().unwrap() {
            let p = a.payload().to_vec();
            a.take();
            out.push((e, p));
        }
        out
    }

    #[test]
    fn what_the_tap_could_not_hand_over_is_a_gap_and_nothing_else_is_lost() {
        let (mut tap, mut a) = channel(2, Arc::new(AtomicU64::new(7)));
        assert_eq!(a.source_id(), Some(7));
        assert!(tap.push(10, b"ten"));
        assert!(tap.push(11, b"eleven"));
        assert!(!tap.push(12, b"twelve"), "the queue holds 2");
        assert!(!tap.push(13, &[0; TAP_MESSAGE_BYTES + 1]), "too long");
        assert_eq!(tap.lost(), 2);
        let got = drain(&mut a);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], (Entry::Message { position: 10, len: 3 }, b"ten".to_vec()));
        assert_eq!(got[1], (Entry::Message { position: 11, len: 6 }, b"eleven".to_vec()));
        assert!(tap.push(14, b"fourteen"));
        let got = drain(&mut a);
        assert_eq!(got[0].0, Entry::Gap { position: 12, count: 2 });
        assert_eq!(got[1], (Entry::Message { position: 14, len: 8 }, b"fourteen".to_vec()));
        assert_eq!(a.peek().unwrap(), None);
    }

    #[test]
    fn a_message_stays_readable_after_take_until_the_next_peek() {
        let (mut tap, mut a) = channel(4, Arc::default());
        tap.push(0, b"first");
        tap.push(1, b"second");
        assert_eq!(a.peek().unwrap(), Some(Entry::Message { position: 0, len: 5 }));
        a.take();
        assert_eq!(a.payload(), b"first");
        // A second peek without take is the same entry.
        assert_eq!(a.peek().unwrap(), Some(Entry::Message { position: 1, len: 6 }));
        assert_eq!(a.peek().unwrap(), Some(Entry::Message { position: 1, len: 6 }));
        assert_eq!(a.payload(), b"second");
    }
}
