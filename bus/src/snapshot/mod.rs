//! Whole-book snapshots of a market-data stream, so a trader that starts at 15:59 loads the book
//! as of a recent position and replays only the market data after it, not the day.
//!
//! The maker ([`Snapshotter`]) keeps its own copy of the book from the stream's journal (a
//! [`JournalTail`](crate::journal::JournalTail) following what `tickbus record` writes) and,
//! every period, publishes the whole book as [`SnapshotOrders`] chunks on a stream of its own
//! (`tickbus snapshot`), which a recorder can journal like any other. Why from the journal and
//! not from the live ring: the publisher's hot path does nothing for snapshots at all (no copy of
//! the book, no work between ticks), and the maker can stop reading while it writes a snapshot
//! out, so every snapshot is one consistent book at one position however long it takes to send,
//! without freezing or copying a book that goes on changing.
//!
//! A joiner ([`load_snapshot`]) waits for the next whole snapshot on that stream, loads it into
//! its book, and merges the market data from the snapshot's `as_of` ([`crate::merge`]).
pub mod stepper;
pub mod tap;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tickbus_codecs::book::{Loaded, OrderBook, SnapshotError, SnapshotLoader, Step};
use tickbus_codecs::md::SnapshotOrders;
use tickbus_codecs::{decode, AnyMessage, Message};
use zerocopy::IntoBytes;

use crate::merge::{Archive, Entry};
use crate::replay::serve::publish_waiting;
use crate::stream::{Publish, Subscribe};
use crate::Recv;

/// What the maker has done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotStats {
    /// Market-data messages applied to its book.
    pub applied: u64,
    /// Messages it knows it lost (journal gap records, the feed's `FeedGap`s): every snapshot
    /// after a loss says so in its `lost` field.
    pub lost: u64,
    /// Messages its book refused (an order it does not hold: data lost before).
    pub book_errors: u64,
    /// Snapshots published whole.
    pub snapshots: u64,
    /// Chunks published.
    pub chunks: u64,
    /// The position after the last message applied (the last snapshot's `as_of`).
    pub position: u64,
    /// Orders in the last snapshot.
    pub last_orders: u64,
    /// How long the last snapshot took to publish, in µs.
    pub last_publish_us: u64,
}

/// Why making snapshots stopped.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotRunError<A: std::error::Error + 'static, P: std::error::Error + 'static> {
    /// The journal could not be read further.
    #[error("reading the market data's journal: {0}")]
    Journal(A),
    /// The snapshot stream failed.
    #[error("publishing a snapshot: {0}")]
    Publish(P),
}

/// Keeps a book from a market-data archive and publishes it whole on demand.
pub struct Snapshotter {
    book: OrderBook,
    stats: SnapshotStats,
    /// The archive's stream incarnation (0: not known), stamped in every chunk.
    source: u64,
    /// Messages lost since the book was last whole (every one since the start, unless a whole
    /// book was put in: [`Snapshotter::restart`]): stamped in every chunk.
    lost_in_book: u64,
}

/// Where [`Snapshotter::apply_whole`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// This many applied; nothing more yet.
    Caught(usize),
    /// This many applied; the next is `max` away.
    More(usize),
    /// This many applied; the next entry (left in the archive) is a loss at `position`: a
    /// `FeedGap` or messages the archive lacks.
    Loss {
        /// Applied before it.
        applied: usize,
        /// Its position.
        position: u64,
        /// Whether it is a `FeedGap` (else: the archive lacks the messages).
        feed_gap: bool,
    },
}

impl Snapshotter {
    /// A maker with an empty `book` (give it room for the day), reading from position 0.
    pub fn new(book: OrderBook) -> Snapshotter {
        Snapshotter { book, stats: SnapshotStats::default(), source: 0, lost_in_book: 0 }
    }

    /// Puts `book`, whole as of market-data `position` (the position of the first message
    /// not in it), in place of its own, which it returns: entries below `position` are
    /// skipped from here on ([`Snapshotter::apply_whole`]), and the snapshots after say
    /// nothing lost.
    pub fn restart(&mut self, book: OrderBook, position: u64) -> OrderBook {
        self.lost_in_book = 0;
        self.stats.position = position;
        std::mem::replace(&mut self.book, book)
    }

    /// As [`Snapshotter::apply`], but for a maker that keeps its book whole: entries below its
    /// position (already in a book put in with [`Snapshotter::restart`]) are skipped, and it
    /// stops at a loss, leaving it in the archive, so that the book stays as of just before.
    pub fn apply_whole<A: Archive>(&mut self, src: &mut A, max: usize) -> Result<Applied, A::Error> {
        self.source = src.source_id().unwrap_or(0);
        for n in 0..max {
            let Some(e) = src.peek()? else { return Ok(Applied::Caught(n)) };
            let position = match e {
                Entry::Message { position, .. } | Entry::Gap { position, .. } => position,
            };
            if e.end() <= self.stats.position {
                src.take();
                continue;
            }
            match e {
                Entry::Message { .. } => match decode(src.payload()) {
                    Ok(AnyMessage::FeedGap(_)) => return Ok(Applied::Loss { applied: n, position, feed_gap: true }),
                    Ok(m) => {
                        self.stats.applied += 1;
                        if self.book.apply_md(&m).is_err() {
                            self.stats.book_errors += 1;
                        }
                    }
                    Err(_) => self.stats.book_errors += 1,
                },
                Entry::Gap { .. } => return Ok(Applied::Loss { applied: n, position, feed_gap: false }),
            }
            self.stats.position = e.end();
            src.take();
        }
        Ok(Applied::More(max))
    }

    /// What it has done so far.
    pub fn stats(&self) -> SnapshotStats {
        self.stats
    }

    /// Its book.
    pub fn book(&self) -> &OrderBook {
        &self.book
    }

    /// Applies up to `max` records of `src`; returns how many (0: nothing new yet).
    pub fn apply<A: Archive>(&mut self, src: &mut A, max: usize) -> Result<usize, A::Error> {
        self.source = src.source_id().unwrap_or(0);
        let s = &mut self.stats;
        for n in 0..max {
            let Some(e) = src.peek()? else { return Ok(n) };
            match e {
                Entry::Message { .. } => match decode(src.payload()) {
                    // A recording's own gap, served or replayed, is a loss; the feed's is too.
                    Ok(AnyMessage::FeedGap(g)) => {
                        s.lost = s.lost.saturating_add(g.count);
                        self.lost_in_book = self.lost_in_book.saturating_add(g.count);
                    }
                    Ok(m) => {
                        s.applied += 1;
                        if self.book.apply_md(&m).is_err() {
                            s.book_errors += 1;
                        }
                    }
                    Err(_) => s.book_errors += 1,
                },
                Entry::Gap { count, .. } => {
                    s.lost = s.lost.saturating_add(count);
                    self.lost_in_book = self.lost_in_book.saturating_add(count);
                }
            }
            s.position = e.end();
            src.take();
        }
        Ok(max)
    }

    /// Publishes the book whole, as of the position applied so far, waiting while the stream is
    /// full (the maker reads nothing meanwhile, so the snapshot is one book at one position).
    /// False if `stop` was set first (the snapshot went out in part: a loader refuses it).
    pub fn publish<P: Publish>(&mut self, p: &mut P, stop: &AtomicBool) -> Result<bool, P::Error> {
        let started = Instant::now();
        let s = &mut self.stats;
        for mut chunk in self.book.snapshot_chunks(s.position, self.lost_in_book, self.source) {
            if !publish_waiting(p, chunk_bytes(&mut chunk, p), stop)? {
                return Ok(false);
            }
            s.chunks += 1;
        }
        s.snapshots += 1;
        s.last_orders = self.book.resting_orders() as u64;
        s.last_publish_us = started.elapsed().as_micros() as u64;
        Ok(true)
    }
}

/// The chunk's bytes with its header stamped for the stream `p`.
fn chunk_bytes<'a, P: Publish>(chunk: &'a mut SnapshotOrders, p: &P) -> &'a [u8] {
    let (stream, position) = (p.stream_id(), p.position());
    chunk.header_mut().stamp(stream, position, 0);
    chunk.as_bytes()
}

/// Follows `src` and publishes a snapshot on `p` every `every` (the first once the archive
/// has nothing more to give, so a maker started mid-day publishes as soon as it has caught up),
/// until `stop`, or (with `idle_end`) until the archive has had nothing new for that long (then
/// one last snapshot of the final book). Sleeps briefly when there is nothing new: a snapshot
/// maker is not worth a core.
pub fn run<A: Archive, P: Publish>(
    maker: &mut Snapshotter,
    src: &mut A,
    p: &mut P,
    every: Duration,
    stop: &AtomicBool,
    idle_end: Option<Duration>,
) -> Result<(), SnapshotRunError<A::Error, P::Error>> {
    let mut last: Option<Instant> = None;
    let mut quiet_since: Option<Instant> = None;
    while !stop.load(Ordering::Acquire) {
        let n = maker.apply(src, 4096).map_err(SnapshotRunError::Journal)?;
        let caught_up = n < 4096;
        if last.is_none_or(|t| t.elapsed() >= every) && (caught_up || last.is_some()) {
            // The period runs from each snapshot's start, not its end.
            let started = Instant::now();
            if !maker.publish(p, stop).map_err(SnapshotRunError::Publish)? {
                break;
            }
            last = Some(started);
        }
        if n > 0 {
            quiet_since = None;
            continue;
        }
        let since = *quiet_since.get_or_insert_with(Instant::now);
        if idle_end.is_some_and(|d| since.elapsed() >= d) {
            maker.publish(p, stop).map_err(SnapshotRunError::Publish)?;
            return Ok(());
        }
        p.idle();
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(())
}

/// Whether `payload`'s header says it is a snapshot chunk (whether or not the rest parses).
fn is_snapshot_chunk(payload: &[u8]) -> bool {
    tickbus_codecs::Header::peek(payload).is_some_and(|h| h.msg_type == SnapshotOrders::TYPE as u16)
}

/// Why no snapshot was loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError<E: std::error::Error + 'static> {
    /// None came whole in time.
    #[error("no whole snapshot within {waited:?}{}", .last.map_or(
        " (none seen: is `tickbus snapshot --dest` publishing here? It publishes its first once it has read the journal, then every --every-secs, which must be below this wait)".to_string(),
        |e| format!(" (the last one broke off: {e}; snapshots lapped every time need a ring that holds one: raise `tickbus snapshot --slots`)")))]
    TimedOut {
        /// How long it waited.
        waited: Duration,
        /// Why the last snapshot seen did not load, if one was seen.
        last: Option<SnapshotError>,
    },
    /// Stopped while waiting.
    #[error("stopped while waiting for a snapshot")]
    Stopped,
    /// The stream carries something else (the market data itself, say).
    #[error("the stream carries {found}, not snapshot chunks: give the stream `tickbus snapshot --dest` publishes on")]
    NotSnapshots {
        /// What came instead (a message type, or a byte count).
        found: String,
    },
    /// The snapshot stream failed.
    #[error("the snapshot stream failed: {0}")]
    Stream(E),
}

/// Waits (up to `wait`) for the next whole snapshot on `sub` and loads it into `book`,
/// refusing one of more than `max_orders` orders. A snapshot that breaks off (a chunk lost to
/// a lapped ring, another snapshot's chunk in its middle) is dropped and the next one waited
/// for. On `Err` the book is empty: never part of a snapshot.
pub fn load_snapshot<S: Subscribe>(
    sub: &mut S,
    book: &mut OrderBook,
    max_orders: u64,
    wait: Duration,
    stop: &AtomicBool,
) -> Result<Loaded, LoadError<S::Error>> {
    let r = load(sub, book, max_orders, wait, stop);
    if r.is_err() {
        book.clear();
    }
    r
}

fn load<S: Subscribe>(
    sub: &mut S,
    book: &mut OrderBook,
    max_orders: u64,
    wait: Duration,
    stop: &AtomicBool,
) -> Result<Loaded, LoadError<S::Error>> {
    let started = Instant::now();
    let mut loader = SnapshotLoader::with_limit(max_orders);
    let mut last = None;
    loop {
        // Checked at every chunk, while chunks keep coming too: a stream of chunks that never
        // completes a snapshot, or one whose orders are sent in the costliest order to insert,
        // does not hold the joiner past its wait by more than one chunk's work (16 orders).
        if stop.load(Ordering::Acquire) {
            return Err(LoadError::Stopped);
        }
        if started.elapsed() >= wait {
            return Err(LoadError::TimedOut { waited: wait, last });
        }
        let got = sub.try_recv().map_err(LoadError::Stream)?;
        match got {
            Some(Recv::Message(m)) => {
                let Ok(chunk) = SnapshotOrders::parse(m.payload) else {
                    if is_snapshot_chunk(m.payload) {
                        // A damaged chunk (a wrong length or version): the snapshot it was part
                        // of breaks off at the next chunk; the next whole one is waited for.
                        continue;
                    }
                    let found = match decode(m.payload) {
                        Ok(_) => tickbus_codecs::Header::peek(m.payload)
                            .and_then(|h| tickbus_codecs::MsgType::from_wire(h.msg_type))
                            .map_or("messages of another type".into(), |t| format!("{t} messages")),
                        Err(e) => format!("undecodable payloads ({e})"),
                    };
                    return Err(LoadError::NotSnapshots { found });
                };
                match loader.offer(book, chunk) {
                    Ok(Step::Complete(done)) => return Ok(done),
                    Ok(_) => {}
                    Err(e) => last = Some(e),
                }
                continue;
            }
            // Lost chunks show as a chunk missing at the next one; a gap between snapshots
            // loses nothing.
            Some(Recv::Gap(_)) => continue,
            None => {}
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}
