//! The helper's side of a feed handler's book repair ([`super::repair`]), on a thread of its
//! own: it keeps a copy of the feed's book from the market data the feed publishes (a
//! [`tap`](crate::snapshot::tap)), publishes it whole every period as snapshot chunks, and
//! after a loss fetches the venue's book ([`super::glimpse`]), hands one copy to the feed's loop
//! and, once told where the loop swapped it in, makes its own copy the same and publishes a
//! snapshot at once: the one a trader stopped by the `FeedGap` is waiting for.
//!
//! While its book is not whole it publishes nothing (a snapshot that says `lost` is of no use
//! to anyone) and leaves the market data in the tap; a tap that overflows meanwhile loses only
//! messages the repaired book holds, or starts another repair.
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tickbus_codecs::book::OrderBook;

use super::glimpse::{self, GlimpseError};
use super::repair::{HelperEnds, ToFeed, ToHelper};
use crate::merge::Archive;
use crate::snapshot::{Applied, SnapshotRunError, SnapshotStats, Snapshotter};
use crate::stream::Publish;

/// Where the venue's book comes from.
pub trait BookSource {
    /// Fetches the venue's book as [`glimpse`] bytes into `buf`.
    fn fetch(&mut self, buf: &mut Vec<u8>) -> Result<(), GlimpseError>;
}

/// The venue's book service at an address (`mold-server --glimpse`).
pub struct VenueBookService {
    /// Its address.
    pub addr: SocketAddr,
    /// How long one fetch may take.
    pub timeout: Duration,
    /// The most bytes taken (a million orders is about 33 MB).
    pub max_bytes: usize,
}

impl BookSource for VenueBookService {
    fn fetch(&mut self, buf: &mut Vec<u8>) -> Result<(), GlimpseError> {
        glimpse::fetch(self.addr, self.timeout, self.max_bytes, buf)
    }
}

/// What the helper did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct HelperStats {
    /// Venue books fetched whole.
    pub fetched: u64,
    /// Of those, older than the loss (another fetched after a pause).
    pub too_old: u64,
    /// Fetches that failed (the service gone, a damaged book): retried.
    pub failed: u64,
    /// Of those, books of another MoldUDP64 session than the feed's (the venue restarted
    /// into a new one, or the address names another venue's service): refused unloaded.
    pub other_session: u64,
    /// Why the last fetch failed.
    pub last_error: Option<String>,
    /// Repairs done (the loop swapped the book in and this copy followed).
    pub repairs: u64,
    /// Time from the last loss to its repair's snapshot, in µs.
    pub last_repair_us: u64,
    /// Times its own copy lost messages (the tap overflowed) and asked for a repair.
    pub own_losses: u64,
}

/// Pause before fetching again after a book older than the loss (the venue is behind the
/// lines for a moment) or a failed fetch.
const RETRY: Duration = Duration::from_millis(20);
const RETRY_FAILED: Duration = Duration::from_millis(250);

/// The helper (see the module docs).
pub struct RepairHelper<S: BookSource> {
    ends: HelperEnds,
    source: S,
    maker: Snapshotter,
    whole: bool,
    /// The sequence a fetched book must go on from (None: none wanted).
    want: Option<u64>,
    /// The session a fetched book must be of (None: the loss's session was not known).
    session: Option<[u8; 10]>,
    /// The copy of the book handed to the loop, and its sequence, until the loop answers.
    copy: Option<(Box<OrderBook>, u64)>,
    since: Option<Instant>,
    retry_at: Option<Instant>,
    publish_now: bool,
    buf: Vec<u8>,
    room: (usize, usize),
    max_orders: u64,
    /// Empty books with their room made and touched: a venue's book is loaded into one at
    /// once (making a TotalView-sized book's room takes most of a second). Books that come
    /// back (replaced, refused) are emptied and kept here. Boxed: each goes to the loop and
    /// back in its box as it is (a move of the pointer, not of the book).
    #[allow(clippy::vec_box)]
    spares: Vec<Box<OrderBook>>,
    /// Messages to the loop its queue had no room for, in order.
    outbox: Vec<ToFeed>,
    stats: HelperStats,
}

/// Spare books made at start: one for the loop, one for the helper's own copy.
const SPARES: usize = 2;

impl<S: BookSource> RepairHelper<S> {
    /// A helper on `ends`, fetching from `source`, keeping its book in `book` (empty: the feed
    /// starts at the session's start); venue books get room for `orders` orders and `stocks`
    /// stock locates, and one of more than `max_orders` is refused.
    pub fn new(ends: HelperEnds, source: S, book: OrderBook, orders: usize, stocks: usize, max_orders: u64) -> Self {
        let spares = (0..SPARES).map(|_| made(orders, stocks)).collect();
        RepairHelper {
            ends,
            source,
            maker: Snapshotter::new(book),
            whole: true,
            want: None,
            session: None,
            copy: None,
            since: None,
            retry_at: None,
            publish_now: false,
            buf: Vec::new(),
            room: (orders, stocks),
            max_orders,
            spares,
            outbox: Vec::new(),
            stats: HelperStats::default(),
        }
    }

    /// An empty book with room for the day.
    fn spare(&mut self) -> Box<OrderBook> {
        self.spares.pop().unwrap_or_else(|| made(self.room.0, self.room.1))
    }

    /// A book back: emptied (its room kept) and kept for the next repair.
    fn keep(&mut self, mut book: Box<OrderBook>) {
        book.clear();
        if self.spares.len() < SPARES {
            self.spares.push(book);
        }
    }

    /// What it did.
    pub fn stats(&self) -> &HelperStats {
        &self.stats
    }

    /// What its snapshot maker did.
    pub fn snapshots(&self) -> SnapshotStats {
        self.maker.stats()
    }

    /// Its book (whole when [`RepairHelper::whole`]).
    pub fn book(&self) -> &OrderBook {
        self.maker.book()
    }

    /// Whether its book is whole (it publishes only then).
    pub fn whole(&self) -> bool {
        self.whole
    }

    /// Takes what the loop sent, fetches a venue book if one is wanted, and applies up to
    /// `max` tapped messages while its book is whole; returns the work done. After a repair a
    /// snapshot is due at once ([`RepairHelper::take_publish_now`]).
    pub fn step<A: Archive>(&mut self, md: &mut A, max: usize, now: Instant) -> Result<usize, A::Error> {
        let mut work = 0;
        self.flush();
        while let Ok(m) = self.ends.from_feed.pop() {
            work += 1;
            self.take(m, now);
        }
        if !self.whole && self.copy.is_none() {
            // No venue book is with the loop: the next swap comes after a book not yet sent,
            // so past everything tapped so far. Dropped, so a long repair does not fill the tap
            // and lose what comes after the swap.
            for _ in 0..max {
                if src_empty(md)? {
                    break;
                }
                md.take();
                work += 1;
            }
            if self.want.is_some() && self.retry_at.is_none_or(|t| now >= t) {
                work += 1;
                self.fetch(now);
            }
        }
        if !self.whole {
            return Ok(work);
        }
        match self.maker.apply_whole(md, max)? {
            Applied::Caught(n) | Applied::More(n) => work += n,
            Applied::Loss { applied, feed_gap, .. } => {
                work += applied;
                self.whole = false;
                self.since = Some(now);
                if !feed_gap {
                    // Its own loss: the loop's book is whole, but a repair makes this one so.
                    self.stats.own_losses += 1;
                    self.send(ToFeed::Repair);
                }
                // A FeedGap: the loop says which book it wants (`Lost`).
            }
        }
        Ok(work)
    }

    /// Publishes its book whole on `p` (see [`Snapshotter::publish`]); publish only while
    /// [`RepairHelper::whole`].
    pub fn publish<P: Publish>(&mut self, p: &mut P, stop: &AtomicBool) -> Result<bool, P::Error> {
        self.maker.publish(p, stop)
    }

    /// Whether a snapshot is due at once (a repair just ended); clears it.
    pub fn take_publish_now(&mut self) -> bool {
        std::mem::take(&mut self.publish_now)
    }

    fn take(&mut self, m: ToHelper, now: Instant) {
        match m {
            ToHelper::Lost { need, session } => {
                self.whole = false;
                self.since.get_or_insert(now);
                self.wants(need, session);
            }
            ToHelper::Refused { book, need, session } => {
                self.keep(book);
                if let Some((copy, _)) = self.copy.take() {
                    self.keep(copy);
                }
                if need > 0 {
                    self.wants(need, session);
                }
            }
            ToHelper::Swapped { next, position, old, ring } => {
                self.keep(old);
                let Some((mut copy, at)) = self.copy.take() else {
                    // No book handed over (cannot happen): ask for another repair.
                    self.send(ToFeed::Ring(ring));
                    self.send(ToFeed::Repair);
                    return;
                };
                if at != next {
                    // Not the book it handed over (cannot happen): ask for another repair.
                    self.keep(copy);
                    self.send(ToFeed::Ring(ring));
                    self.send(ToFeed::Repair);
                    return;
                }
                ring.apply(&mut copy, 0, at, usize::MAX);
                self.send(ToFeed::Ring(ring));
                let mine = self.maker.restart(*copy, position);
                self.keep(Box::new(mine));
                self.whole = true;
                self.want = None;
                self.stats.repairs += 1;
                self.stats.last_repair_us = self.since.take().map_or(0, |t| now.duration_since(t).as_micros() as u64);
                self.publish_now = true;
            }
        }
    }

    /// A venue book of `session` holding every message before `need` is wanted: the latest of
    /// the needs within one session; a new session's replaces (its sequences start again).
    fn wants(&mut self, need: u64, session: Option<[u8; 10]>) {
        let same = std::mem::replace(&mut self.session, session) == session;
        self.want = Some(match self.want {
            Some(w) if same => w.max(need),
            _ => need,
        });
    }

    /// Sends to the loop in order, keeping what its queue has no room for (never dropped: the
    /// ring lost would end repairs for the day).
    fn send(&mut self, m: ToFeed) {
        if !self.outbox.is_empty() {
            self.outbox.push(m);
            return;
        }
        if let Err(rtrb::PushError::Full(m)) = self.ends.to_feed.push(m) {
            self.outbox.push(m);
        }
    }

    fn flush(&mut self) {
        while !self.outbox.is_empty() {
            let m = self.outbox.remove(0);
            if let Err(rtrb::PushError::Full(m)) = self.ends.to_feed.push(m) {
                self.outbox.insert(0, m);
                return;
            }
        }
    }

    /// Fetches the venue's book and hands a copy to the loop (or says why not and pauses).
    fn fetch(&mut self, now: Instant) {
        let want = self.want.unwrap_or(0);
        let mut book = self.spare();
        let follows = self.session;
        let r = self
            .source
            .fetch(&mut self.buf)
            .and_then(|()| glimpse::decode(&self.buf, &mut book, self.max_orders, follows.as_ref()));
        let (next, session) = match r {
            Ok(g) => (g.next, g.session),
            Err(e) => {
                self.keep(book);
                self.stats.failed += 1;
                self.stats.other_session += u64::from(matches!(e, GlimpseError::OtherSession { .. }));
                self.stats.last_error = Some(e.to_string());
                self.retry_at = Some(now + RETRY_FAILED);
                return;
            }
        };
        self.stats.fetched += 1;
        if next < want {
            self.stats.too_old += 1;
            self.keep(book);
            self.retry_at = Some(now + RETRY);
            return;
        }
        let mut copy = self.spare();
        if let Err(e) = glimpse::decode(&self.buf, &mut copy, self.max_orders, follows.as_ref()) {
            self.stats.failed += 1;
            self.stats.last_error = Some(e.to_string());
            self.keep(book);
            self.keep(copy);
            return;
        }
        self.send(ToFeed::Book { book, next, session });
        self.copy = Some((copy, next));
        self.want = None;
        self.retry_at = None;
    }
}

/// Whether the archive has nothing to take now.
fn src_empty<A: Archive>(md: &mut A) -> Result<bool, A::Error> {
    Ok(md.peek()?.is_none())
}

/// An empty book with room for `orders` orders and `stocks` stock locates, every page touched
/// (the feed's loop takes no page fault on it).
fn made(orders: usize, stocks: usize) -> Box<OrderBook> {
    let mut b = Box::new(OrderBook::with_capacity(orders, stocks));
    b.pre_touch();
    b
}

/// Runs `h` on the market data tapped into `md`, publishing a snapshot on `p` every `every`
/// while its book is whole (and at once after a repair), until `stop`. Sleeps briefly when there
/// is nothing to do: not worth a core.
pub fn run<S: BookSource, A: Archive, P: Publish>(
    h: &mut RepairHelper<S>,
    md: &mut A,
    p: &mut P,
    every: Duration,
    stop: &AtomicBool,
) -> Result<(), SnapshotRunError<A::Error, P::Error>> {
    let mut last: Option<Instant> = None;
    while !stop.load(Ordering::Acquire) {
        let now = Instant::now();
        let n = h.step(md, 4096, now).map_err(SnapshotRunError::Journal)?;
        let due = h.take_publish_now() || (h.whole && last.is_some_and(|t| now.duration_since(t) >= every));
        if due && h.whole {
            if !h.maker.publish(p, stop).map_err(SnapshotRunError::Publish)? {
                break;
            }
            last = Some(now);
        } else if last.is_none() && h.whole && n == 0 {
            // The first once the tap is drained.
            if !h.maker.publish(p, stop).map_err(SnapshotRunError::Publish)? {
                break;
            }
            last = Some(now);
        }
        if n == 0 {
            p.idle();
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    Ok(())
}
