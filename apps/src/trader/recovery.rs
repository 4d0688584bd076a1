//! Recovery from lost market data (`trader --snapshots URI`): on a loss the trader cannot fill
//! (lapped on a lossy ring with no journal to fill it from, a hole in the journal) it stops
//! trading, holds every market-data message from the loss on, takes the next whole-book snapshot
//! made after the loss by a maker that lost nothing (`tickbus exchange --snapshots`: the venue's
//! own book), applies the held messages from the snapshot's position on, and trades again. This
//! replaces halting for the rest of the day. A feed's `FeedGap` starts a recovery too: the
//! feed's own maker (`tickbus feed --snapshots URI --glimpse ADDR`) publishes a whole book at
//! the position where it put the venue's book in place of its own (`tickbus::feed::repair`);
//! without `--glimpse` no maker has a whole book past one and the trader holds to the end.
//!
//! The snapshot stream is read only while recovering, a bounded number of chunks a duty cycle,
//! so the market data keeps being taken (and held) while a large book loads. The hold is
//! allocated up front; it keeps the newest messages when full, so a snapshot made later than
//! its oldest is still usable, and one older than that is refused and the next awaited.
use std::time::Instant;

use tickbus::stream::{AnySubscriber, Subscribe};
use tickbus::Recv;
use tickbus_codecs::book::{OrderBook, SnapshotLoader, Step};
use tickbus_codecs::md::SnapshotOrders;
use tickbus_codecs::{decode, AnyMessage, Message, MsgType};

/// The longest market-data message held (normalised messages are at most 64 bytes); a longer
/// one breaks the hold (the recovery starts over after it).
const HELD_BYTES: usize = 96;

#[derive(Clone, Copy)]
struct Held {
    position: u64,
    len: u32,
    bytes: [u8; HELD_BYTES],
}

pub use tickbus_apps::summary::RecoveryStats;

/// The recovery state: the snapshot stream, the loader and the hold.
pub struct Recovery {
    sub: AnySubscriber,
    loader: SnapshotLoader,
    hold: Box<[Held]>,
    /// The oldest held message's index in `hold`, and how many are held.
    first: usize,
    held: usize,
    /// Recovering: the first position after the loss (the book is wrong from there back).
    after: Option<u64>,
    since: Option<Instant>,
    /// Once recovered: messages below this position are in the snapshot's book already.
    skip_below: u64,
    /// The market-data stream's incarnation (None: its transport has none): a snapshot of
    /// another (a maker following another day's journal) is refused.
    live_source: Option<u64>,
    pub stats: RecoveryStats,
    /// Why the snapshot stream failed, if it did (the trader then cannot recover).
    pub failure: Option<String>,
}

/// The most orders a snapshot may hold (as the joiner's limit).
const MAX_SNAPSHOT_ORDERS: u64 = 1 << 24;

impl Recovery {
    /// Recovery over the snapshot stream `sub` (lossy, newest first), holding up to `hold`
    /// market-data messages while a snapshot is awaited, for the market-data stream of
    /// incarnation `live_source`.
    pub fn new(sub: AnySubscriber, hold: usize, live_source: Option<u64>) -> Recovery {
        let empty = Held { position: 0, len: 0, bytes: [0; HELD_BYTES] };
        Recovery {
            sub,
            loader: SnapshotLoader::with_limit(MAX_SNAPSHOT_ORDERS),
            hold: vec![empty; hold.max(1)].into_boxed_slice(),
            first: 0,
            held: 0,
            after: None,
            since: None,
            skip_below: 0,
            live_source,
            stats: RecoveryStats::default(),
            failure: None,
        }
    }

    /// Whether the trader is recovering (not trading, holding the market data).
    #[inline]
    pub fn recovering(&self) -> bool {
        self.after.is_some()
    }

    /// Market data was lost: positions before `after` cannot be trusted. Starts (or starts
    /// over) a recovery.
    pub fn lost(&mut self, after: u64) {
        if self.after.is_none() {
            self.stats.losses += 1;
            self.since = Some(Instant::now());
        }
        self.after = Some(after);
        (self.first, self.held) = (0, 0);
    }

    /// Whether the message at `position` is already in the book a recovery loaded.
    #[inline]
    pub fn in_book(&self, position: u64) -> bool {
        position < self.skip_below
    }

    /// While recovering: keeps the message at `position` for after the snapshot. A `FeedGap`
    /// (the feed lost data) starts the recovery over after it.
    pub fn hold(&mut self, position: u64, payload: &[u8]) {
        let feed_gap = tickbus_codecs::Header::peek(payload).is_some_and(|h| h.msg_type == MsgType::FeedGap as u16);
        if feed_gap || payload.len() > HELD_BYTES {
            self.lost(position + 1);
            return;
        }
        let n = self.hold.len();
        if self.held == n {
            // Full: the newest are worth more (a later snapshot needs only them).
            self.first = (self.first + 1) % n;
            self.held -= 1;
        }
        let slot = &mut self.hold[(self.first + self.held) % n];
        (slot.position, slot.len) = (position, payload.len() as u32);
        slot.bytes[..payload.len()].copy_from_slice(payload);
        self.held += 1;
    }

    /// While recovering: reads up to `max_chunks` of the snapshot stream into `book` (which
    /// is not traded on meanwhile). Once a snapshot that can be taken is whole, applies the held
    /// messages from its position on and says so: trading may resume. Returns (messages read
    /// from the snapshot stream, recovered).
    pub fn poll(&mut self, book: &mut OrderBook, max_chunks: usize) -> (usize, bool) {
        let Some(after) = self.after else { return (0, false) };
        for read in 1..=max_chunks {
            let m = match self.sub.try_recv() {
                Ok(Some(Recv::Message(m))) => m,
                Ok(Some(Recv::Gap(_))) => continue, // a chunk lost shows as one missing
                Ok(None) => return (read - 1, false),
                Err(e) => {
                    // Said once, at the end (`failure`); the trader holds on, not trading.
                    self.failure.get_or_insert_with(|| e.to_string());
                    return (read - 1, false);
                }
            };
            let Ok(chunk) = SnapshotOrders::parse(m.payload) else { continue };
            // Snapshots from before the loss, from a maker that lost messages, or of another
            // incarnation of the stream are not loaded at all (the stream was not read while
            // trading: older ones wait there).
            // (A maker that does not know its stream stamps 0: taken, as at start-up.)
            let other_stream = self.live_source.is_some_and(|live| chunk.source != 0 && chunk.source != live);
            if chunk.as_of < after || chunk.lost > 0 || other_stream {
                self.stats.refused += u64::from(chunk.chunk == 0);
                continue;
            }
            let Ok(Step::Complete(l)) = self.loader.offer(book, chunk) else { continue };
            // The oldest position still held (or, holding nothing, the next to come).
            let oldest = if self.held > 0 { self.hold[self.first].position } else { after };
            if l.lost > 0 || l.as_of < after || l.as_of < oldest {
                self.stats.refused += 1;
                continue;
            }
            for i in 0..self.held {
                let h = &self.hold[(self.first + i) % self.hold.len()];
                if h.position < l.as_of {
                    continue;
                }
                if let Ok(msg) = decode(&h.bytes[..h.len as usize]) {
                    if !matches!(msg, AnyMessage::FeedGap(_)) {
                        let _ = book.apply_md(&msg);
                    }
                }
                self.stats.applied_after += 1;
            }
            // A maker ahead of this trader: the messages still to come below its position are in
            // its book already.
            self.skip_below = l.as_of;
            self.after = None;
            (self.first, self.held) = (0, 0);
            self.stats.recovered += 1;
            self.stats.last_us = self.since.take().map_or(0, |t| t.elapsed().as_micros() as u64);
            return (read, true);
        }
        (max_chunks, false)
    }
}
