//! The whole book as a snapshot: written out as [`SnapshotOrders`] chunks
//! ([`OrderBook::snapshot_chunks`]) and loaded back into an empty book ([`SnapshotLoader`]).
//! A book loaded from a snapshot has the same [`OrderBook::digest`] as the book it was taken
//! from: the same orders, in the same queue order at every level. Its [`OrderBook::totals`]
//! start again from the orders loaded (the history before the snapshot is not in it).
//!
//! Orders go out stock by stock, bids then asks, level by level from the worst price to the best
//! (each level a loader meets is then the new best, so it is appended, not inserted), and each
//! level's orders in queue order (so adding them in turn rebuilds the queue).
use super::{BookError, OrderBook, Side};
use crate::md::{RestingOrder, SnapshotOrders, SNAPSHOT_CHUNK_ORDERS};
use crate::Message;
use crate::Side as WireSide;

/// ITCH prices have 4 decimals; normalised ones [`crate::PRICE_SCALE`] (8).
const ITCH_PRICE_STEP: i64 = crate::PRICE_SCALE / 10_000;

/// Every resting order in snapshot order (see the module docs).
pub struct Walk<'a> {
    book: &'a OrderBook,
    at: WalkAt,
}

/// Where a walk stands, apart from the book it walks (so a [`ChunkCursor`] can keep it between
/// steps without borrowing the book).
#[derive(Debug, Clone, Copy)]
struct WalkAt {
    stock: usize,
    side: usize,
    level: usize,
    /// The next order of the current level's queue (0: start the level).
    next: u64,
    /// Orders left to yield: bounds the walk even if a queue link were broken.
    left: usize,
}

impl WalkAt {
    fn next(&mut self, book: &OrderBook) -> Option<RestingOrder> {
        while self.left > 0 {
            let stock = book.stocks.get(self.stock)?;
            let side = [Side::Bid, Side::Ask][self.side];
            let Some(level) = stock.side(side).as_slice().get(self.level) else {
                (self.level, self.next) = (0, 0);
                if self.side == 0 {
                    self.side = 1;
                } else {
                    (self.side, self.stock) = (0, self.stock + 1);
                }
                continue;
            };
            let at = if self.next == 0 { level.head } else { self.next };
            let Some(o) = book.orders.get(&at).filter(|_| at != 0) else {
                (self.level, self.next) = (self.level + 1, 0);
                continue;
            };
            self.next = if o.next == 0 {
                self.level += 1;
                0
            } else {
                o.next
            };
            self.left -= 1;
            let wire = match side {
                Side::Bid => WireSide::Buy,
                Side::Ask => WireSide::Sell,
            };
            return Some(RestingOrder::new(
                at,
                u32::from(o.locate),
                wire,
                i64::from(o.price) * ITCH_PRICE_STEP,
                u64::from(o.shares),
            ));
        }
        None
    }
}

impl Iterator for Walk<'_> {
    type Item = RestingOrder;

    fn next(&mut self) -> Option<RestingOrder> {
        self.at.next(self.book)
    }
}

/// A snapshot's chunks one at a time, apart from the book: a maker that publishes a snapshot a
/// few chunks per step of another loop (the venue's, between ticks) keeps this between steps.
/// The book must not change until the last chunk is out (the maker applies nothing meanwhile),
/// or the snapshot is not one book at one position.
#[derive(Debug, Clone, Copy)]
pub struct ChunkCursor {
    walk: WalkAt,
    as_of: u64,
    lost: u64,
    source: u64,
    total: u64,
    chunks: u32,
    chunk: u32,
}

impl ChunkCursor {
    /// The next chunk of `book` (the book the cursor was made from, unchanged since), or None
    /// after the last.
    pub fn next_chunk(&mut self, book: &OrderBook) -> Option<SnapshotOrders> {
        if self.chunk == self.chunks {
            return None;
        }
        let mut m = SnapshotOrders::new();
        (m.as_of, m.total_orders, m.lost, m.source, m.chunk, m.chunks) =
            (self.as_of, self.total, self.lost, self.source, self.chunk, self.chunks);
        for slot in &mut m.orders {
            let Some(o) = self.walk.next(book) else { break };
            *slot = o;
            m.count += 1;
        }
        self.chunk += 1;
        Some(m)
    }

    /// Chunks in the snapshot.
    pub fn len(&self) -> u32 {
        self.chunks
    }

    /// Never: an empty book is one chunk of no orders.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Orders in the snapshot.
    pub fn orders(&self) -> u64 {
        self.total
    }
}

/// The chunks of one snapshot, in order.
pub struct Chunks<'a> {
    book: &'a OrderBook,
    cursor: ChunkCursor,
}

impl Chunks<'_> {
    /// Chunks in the snapshot.
    pub fn len(&self) -> u32 {
        self.cursor.len()
    }

    /// Never: an empty book is one chunk of no orders.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl Iterator for Chunks<'_> {
    type Item = SnapshotOrders;

    fn next(&mut self) -> Option<SnapshotOrders> {
        self.cursor.next_chunk(self.book)
    }
}

/// Why a snapshot did not load. The book holds part of it: load another before using it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// A chunk was missing: the next one came instead.
    #[error("snapshot as of {as_of}: chunk {got} came where chunk {want} of {chunks} was due (a chunk was lost; wait for the next snapshot)")]
    MissingChunk {
        /// The snapshot's position.
        as_of: u64,
        /// The chunk due.
        want: u32,
        /// The chunk that came.
        got: u32,
        /// Chunks in the snapshot.
        chunks: u32,
    },
    /// A chunk of another snapshot came in the middle of this one.
    #[error("snapshot as of {as_of}: a chunk of another snapshot (as of {other}) came in its middle (wait for the next whole one)")]
    Interleaved {
        /// The snapshot being loaded.
        as_of: u64,
        /// The snapshot the chunk belongs to.
        other: u64,
    },
    /// A chunk's counts are impossible: a chunk past the last, no chunks, more than 16 orders in
    /// one, fewer than 16 in one but the last, or a chunk count that does not fit the total.
    #[error("snapshot as of {as_of}: chunk {chunk} says {count} orders, {chunks} chunks (16 a chunk, the last holding the rest: a damaged snapshot)")]
    BadChunk {
        /// The snapshot's position.
        as_of: u64,
        /// The chunk.
        chunk: u32,
        /// Its order count.
        count: u32,
        /// The chunks it says the snapshot has.
        chunks: u32,
    },
    /// A snapshot of more orders than the loader was allowed.
    #[error("snapshot as of {as_of}: {total} orders, more than the {limit} this joiner allows (a damaged snapshot, or raise the limit)")]
    TooLarge {
        /// The snapshot's position.
        as_of: u64,
        /// Orders it says it has.
        total: u64,
        /// The loader's limit.
        limit: u64,
    },
    /// An order that does not fit the book (a duplicate, a price off the grid, no shares).
    #[error("snapshot as of {as_of}: {why} (a damaged snapshot)")]
    Order {
        /// The snapshot's position.
        as_of: u64,
        /// What was wrong with the order.
        why: BookError,
    },
}

/// A snapshot loaded whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loaded {
    /// The market-data position it reflects: go on from here.
    pub as_of: u64,
    /// Orders loaded.
    pub orders: u64,
    /// Messages its maker had lost before `as_of` (non-zero: the book may be wrong).
    pub lost: u64,
    /// The incarnation of the stream it is of (0: not known).
    pub source: u64,
}

/// What one chunk did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Not the start of a snapshot, and none under way: skipped (joined mid-snapshot).
    Waiting,
    /// Loaded; more chunks to come.
    Partial,
    /// The snapshot's last chunk: the book holds the whole snapshot.
    Complete(Loaded),
}

#[derive(Debug, Clone, Copy)]
struct Progress {
    as_of: u64,
    total: u64,
    lost: u64,
    source: u64,
    chunks: u32,
    next: u32,
    loaded: u64,
}

/// Loads the chunks of a snapshot, in order, into a book. Checks that they are one snapshot's
/// chunks, all of them, in order, with the orders they say; on anything else it says what was
/// wrong and waits for the next snapshot's first chunk (the book then holds a part: do not use
/// it until a later [`Step::Complete`]).
#[derive(Debug)]
pub struct SnapshotLoader {
    at: Option<Progress>,
    abandoned: u64,
    limit: u64,
}

impl Default for SnapshotLoader {
    fn default() -> Self {
        SnapshotLoader::new()
    }
}

impl SnapshotLoader {
    /// A loader waiting for a snapshot's first chunk, taking snapshots of any size.
    pub fn new() -> SnapshotLoader {
        SnapshotLoader::with_limit(u64::MAX)
    }

    /// A loader that refuses, at its first chunk, a snapshot of more than `limit` orders (a
    /// hostile or damaged first chunk would otherwise grow the book without bound).
    pub fn with_limit(limit: u64) -> SnapshotLoader {
        SnapshotLoader { at: None, abandoned: 0, limit }
    }

    /// Snapshots left part loaded because the next one's first chunk came (the rest of them
    /// lost to a lapped stream).
    pub fn abandoned(&self) -> u64 {
        self.abandoned
    }

    /// Whether a snapshot is part loaded.
    pub fn in_progress(&self) -> bool {
        self.at.is_some()
    }

    /// Takes one chunk into `book` (emptied at a snapshot's first chunk).
    pub fn offer(&mut self, book: &mut OrderBook, m: &SnapshotOrders) -> Result<Step, SnapshotError> {
        let bad = SnapshotError::BadChunk { as_of: m.as_of, chunk: m.chunk, count: m.count, chunks: m.chunks };
        // The chunk count the total needs, and what this chunk must then hold.
        let chunks_needed = m.total_orders.div_ceil(SNAPSHOT_CHUNK_ORDERS as u64).max(1);
        let per = SNAPSHOT_CHUNK_ORDERS as u64;
        // In u64: a hostile `chunk` of u32::MAX must not overflow `chunk + 1`.
        let (chunk, chunks) = (u64::from(m.chunk), u64::from(m.chunks));
        let due = if chunk + 1 < chunks { per } else { m.total_orders.saturating_sub(per * chunk) };
        if chunk >= chunks || chunks != chunks_needed || u64::from(m.count) != due {
            self.at = None;
            return Err(bad);
        }
        if m.total_orders > self.limit {
            self.at = None;
            return Err(SnapshotError::TooLarge { as_of: m.as_of, total: m.total_orders, limit: self.limit });
        }
        if m.chunk == 0 && self.at.take().is_some() {
            // A new snapshot starts: the one under way lost its end (a loader that refused the
            // new first chunk would lose that snapshot too).
            self.abandoned += 1;
        }
        let p = match self.at {
            None if m.chunk != 0 => return Ok(Step::Waiting),
            None => {
                book.clear();
                let (as_of, total, lost, source, chunks) = (m.as_of, m.total_orders, m.lost, m.source, m.chunks);
                Progress { as_of, total, lost, source, chunks, next: 0, loaded: 0 }
            }
            Some(p) => p,
        };
        self.at = None; // set again below unless this chunk ends or breaks the snapshot
        if (m.as_of, m.total_orders, m.chunks, m.source) != (p.as_of, p.total, p.chunks, p.source) {
            return Err(SnapshotError::Interleaved { as_of: p.as_of, other: m.as_of });
        }
        if m.chunk != p.next {
            return Err(SnapshotError::MissingChunk { as_of: p.as_of, want: p.next, got: m.chunk, chunks: p.chunks });
        }
        for o in m.resting() {
            book.restore(o).map_err(|why| SnapshotError::Order { as_of: p.as_of, why })?;
        }
        let loaded = p.loaded + u64::from(m.count);
        if m.chunk + 1 < p.chunks {
            self.at = Some(Progress { next: p.next + 1, loaded, ..p });
            return Ok(Step::Partial);
        }
        // Every chunk's count was checked against the total: the last one completes it.
        debug_assert_eq!(loaded, p.total);
        Ok(Step::Complete(Loaded { as_of: p.as_of, orders: loaded, lost: p.lost, source: p.source }))
    }
}

impl OrderBook {
    /// Every resting order, in snapshot order (see the module docs).
    pub fn walk(&self) -> Walk<'_> {
        Walk { book: self, at: WalkAt { stock: 0, side: 0, level: 0, next: 0, left: self.orders.len() } }
    }

    /// The book as snapshot chunks, stamped as of market-data position `as_of`, with `lost`
    /// messages its maker knows it lost before then, of the stream incarnation `source`.
    pub fn snapshot_chunks(&self, as_of: u64, lost: u64, source: u64) -> Chunks<'_> {
        Chunks { book: self, cursor: self.snapshot_cursor(as_of, lost, source) }
    }

    /// [`OrderBook::snapshot_chunks`] as a cursor that does not borrow the book (see
    /// [`ChunkCursor`]).
    pub fn snapshot_cursor(&self, as_of: u64, lost: u64, source: u64) -> ChunkCursor {
        let total = self.orders.len();
        let chunks = total.div_ceil(SNAPSHOT_CHUNK_ORDERS).max(1);
        ChunkCursor {
            walk: self.walk().at,
            as_of,
            lost,
            source,
            total: total as u64,
            chunks: u32::try_from(chunks).unwrap_or(u32::MAX),
            chunk: 0,
        }
    }

    /// Adds one order of a snapshot at the back of its level's queue.
    pub fn restore(&mut self, o: &RestingOrder) -> Result<(), BookError> {
        let side = match WireSide::from_wire(o.side) {
            Some(WireSide::Buy) => b'B',
            Some(WireSide::Sell) => b'S',
            None => return Err(BookError::BadSide { reference: o.order_id, side: o.side }),
        };
        if o.qty == 0 {
            return Err(BookError::OutOfRange {
                reference: o.order_id,
                what: "size (no shares: not a resting order)",
                value: 0,
            });
        }
        let locate = super::md::locate(o.instrument_id, o.order_id)?;
        let (price, shares) = (super::md::itch_price(o.price, o.order_id)?, super::md::shares(o.qty, o.order_id)?);
        self.add(locate, o.order_id, side, shares, price).map(|_| ())
    }
}
