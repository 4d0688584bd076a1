//! An L3 (order-by-order) book built from ITCH 5.0: every resting order by reference number, price
//! levels per stock and side with their FIFO queues, and the best bid and offer.
//!
//! Owns: book state and its invariants. Never: does I/O, reads a clock, or panics on a message
//! (a message that does not fit the book is an error and leaves the book untouched).
//!
//! Built for the tick-to-trade path: one slot read per order message (a table direct-mapped by
//! reference number, [`RefTable`]: ITCH's increasing references keep the live orders together),
//! levels in a vector with the best last (inserts and removals near the top move few elements),
//! queue links inside the orders. Capacity is reserved up front; the steady state allocates
//! only when a stock's level count outgrows it or more orders spill than the table reserved.
mod digest;
mod levels;
mod md;
mod refs;
mod snapshot;
#[cfg(test)]
mod snapshot_tests;
#[cfg(test)]
mod tests;
mod warm;

pub use levels::{Level, Levels, Side};
pub use refs::RefTable;
pub use snapshot::{ChunkCursor, Chunks, Loaded, SnapshotError, SnapshotLoader, Step, Walk};
pub use warm::HotStocks;

use crate::itch::ItchMessage;

/// A resting order.
#[derive(Debug, Clone, Copy, Eq, zerocopy::FromZeros)]
pub struct Order {
    /// The stock's locate code (its index in the day's directory).
    pub locate: u16,
    /// Which side it rests on.
    pub side: Side,
    /// Its price, in ITCH's Price(4) units.
    pub price: u32,
    /// Its shares still resting.
    pub shares: u32,
    /// Where its level was in its side's levels when it came: a hint that saves the search for
    /// it (see `Levels::reduce`). In padding: the order stays 32 bytes.
    level: u32,
    /// Queue neighbours at this price (0: none).
    prev: u64,
    next: u64,
}

/// Equal orders rest at the same place in the same queue with the same shares; the level hint
/// is not part of it (two books holding the same orders may have been built differently).
impl PartialEq for Order {
    fn eq(&self, o: &Order) -> bool {
        (self.locate, self.side, self.price, self.shares, self.prev, self.next)
            == (o.locate, o.side, o.price, o.shares, o.prev, o.next)
    }
}

/// Both sides of one stock.
#[derive(Debug, Clone)]
pub struct StockBook {
    /// The buy side.
    pub bids: Levels,
    /// The sell side.
    pub asks: Levels,
}

impl StockBook {
    fn new(cap: usize) -> StockBook {
        StockBook { bids: Levels::with_capacity(Side::Bid, cap), asks: Levels::with_capacity(Side::Ask, cap) }
    }

    /// One side.
    pub fn side(&self, side: Side) -> &Levels {
        match side {
            Side::Bid => &self.bids,
            Side::Ask => &self.asks,
        }
    }

    fn side_mut(&mut self, side: Side) -> &mut Levels {
        match side {
            Side::Bid => &mut self.bids,
            Side::Ask => &mut self.asks,
        }
    }
}

/// What a message did to the book.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Update {
    /// The stock's locate code.
    pub locate: u16,
    /// The side that changed.
    pub side: Side,
    /// The best price or the shares at it changed on that side: what a strategy reacts to.
    pub top_changed: bool,
}

/// Why a message does not fit the book. Each variant names the order; the book is unchanged.
/// An `UnknownOrder` is expected when the feed was joined mid-day (orders added before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BookError {
    /// The message refers to an order the book does not hold.
    #[error("'{}' refers to order {reference}, which is not in the book (joined mid-day, or a lost message)", *.code as char)]
    UnknownOrder {
        /// The ITCH message type.
        code: u8,
        /// The order reference number.
        reference: u64,
    },
    /// An add for an order the book already holds.
    #[error("order {reference} is added twice (a replayed or duplicated message)")]
    DuplicateOrder {
        /// The order reference number.
        reference: u64,
    },
    /// An execution or cancel that takes more shares than the order has.
    #[error("'{}' takes {requested} shares from order {reference}, which has {resting}", *.code as char)]
    Overfill {
        /// The ITCH message type.
        code: u8,
        /// The order reference number.
        reference: u64,
        /// Shares the order has.
        resting: u32,
        /// Shares the message takes.
        requested: u32,
    },
    /// An add whose side is neither `B` nor `S`.
    #[error("order {reference} has side {:?}, not 'B' or 'S'", *.side as char)]
    BadSide {
        /// The order reference number.
        reference: u64,
        /// The side byte found.
        side: u8,
    },
    /// An add of an order with no shares: nothing would rest, and a book holding such an order
    /// could not be snapshotted (a snapshot's loader refuses an order of no shares).
    #[error("'{}' adds order {reference} with 0 shares (a real venue never sends one: a damaged or forged message)", *.code as char)]
    ZeroShares {
        /// The message type: `A` for every add (ITCH's `A` and `F`, a normalised add).
        code: u8,
        /// The order reference number.
        reference: u64,
    },
    /// A message with order reference number 0.
    #[error("'{}' gives an order reference number 0, which ITCH never assigns to a displayed order", *.code as char)]
    ZeroReference {
        /// The ITCH message type.
        code: u8,
    },
    /// A normalised event for order `reference` whose `what` does not fit the book's ITCH-sized
    /// fields.
    #[error("order {reference}: {what} {value} does not fit an ITCH book")]
    OutOfRange {
        /// The order reference number.
        reference: u64,
        /// Which value (price, shares).
        what: &'static str,
        /// The value that does not fit.
        value: i64,
    },
}

/// Share counts since the book was created; `added == executed + cancelled + deleted + replaced
/// + resting` always holds (volume is conserved).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Shares added.
    pub added: u64,
    /// Shares executed.
    pub executed: u64,
    /// Shares cancelled (partial cancels).
    pub cancelled: u64,
    /// Shares still resting when their order was deleted.
    pub deleted: u64,
    /// Shares still resting when their order was replaced (the new order counts as added).
    pub replaced: u64,
}

/// Levels reserved per side of each stock named in `with_capacity`.
const LEVELS_RESERVED: usize = 128;

/// The book of every stock on the feed.
pub struct OrderBook {
    orders: RefTable<Order>,
    stocks: Vec<StockBook>,
    names: Vec<[u8; 8]>,
    totals: Totals,
}

impl OrderBook {
    /// A book with room for `orders` resting orders and `stocks` stock locates. The order
    /// table takes `orders` rounded up to a power of two slots of 48 bytes (zeroed memory,
    /// mapped as it is first written: see [`OrderBook::pre_touch`]); an
    /// order whose slot is held by one that rested while the references went once round the
    /// table goes in a spill map (slower, still correct), so reserve about twice the peak of
    /// live orders for a day whose orders rest long.
    pub fn with_capacity(orders: usize, stocks: usize) -> OrderBook {
        OrderBook {
            orders: RefTable::with_capacity(orders),
            stocks: (0..=stocks).map(|_| StockBook::new(LEVELS_RESERVED)).collect(),
            names: vec![*b"        "; stocks + 1],
            totals: Totals::default(),
        }
    }

    /// Empties the book and forgets the stock names, keeping every allocation (and the pages
    /// they touched): a book warmed on a day and cleared starts the next one without page
    /// faults or rehashing.
    pub fn clear(&mut self) {
        self.orders.clear();
        for s in &mut self.stocks {
            s.bids.clear();
            s.asks.clear();
        }
        self.names.fill(*b"        ");
        self.totals = Totals::default();
    }

    /// Writes all the memory the book reserved once, keeping what it holds: the kernel maps a page on
    /// its first write, so a book used straight from [`OrderBook::with_capacity`] takes a page
    /// fault every few inserts until it has filled (tens of MiB for a day's reservation: a
    /// trading loop that starts cold falls behind a busy feed). Call it before the loop starts;
    /// it takes milliseconds per hundred thousand orders reserved.
    pub fn pre_touch(&mut self) {
        self.orders.pre_touch();
        for s in &mut self.stocks {
            s.bids.pre_touch();
            s.asks.pre_touch();
        }
    }

    /// Applies one message. Order messages change the book and say what changed; the stock
    /// directory names stocks; every other type is `Ok(None)`.
    #[inline]
    pub fn apply(&mut self, msg: &ItchMessage<'_>) -> Result<Option<Update>, BookError> {
        let locate = msg.header().stock_locate.get();
        match msg {
            ItchMessage::AddOrder(m) => {
                self.add(locate, m.order_reference_number.get(), m.side, m.shares.get(), m.price.get()).map(Some)
            }
            ItchMessage::AddOrderMpid(m) => {
                self.add(locate, m.order_reference_number.get(), m.side, m.shares.get(), m.price.get()).map(Some)
            }
            ItchMessage::OrderExecuted(m) => {
                self.touch(locate);
                self.take(b'E', m.order_reference_number.get(), m.executed_shares.get()).map(Some)
            }
            ItchMessage::OrderExecutedWithPrice(m) => {
                self.touch(locate);
                self.take(b'C', m.order_reference_number.get(), m.executed_shares.get()).map(Some)
            }
            ItchMessage::OrderCancel(m) => {
                self.touch(locate);
                self.take(b'X', m.order_reference_number.get(), m.cancelled_shares.get()).map(Some)
            }
            ItchMessage::OrderDelete(m) => {
                self.touch(locate);
                self.delete(m.order_reference_number.get()).map(Some)
            }
            ItchMessage::OrderReplace(m) => {
                self.touch(locate);
                self.replace(
                    m.original_order_reference_number.get(),
                    m.new_order_reference_number.get(),
                    m.shares.get(),
                    m.price.get(),
                )
                .map(Some)
            }
            ItchMessage::StockDirectory(m) => {
                self.grow(locate);
                self.names[usize::from(locate)] = m.stock;
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// Reads the best level of both sides of the stock a message names, before the order it
    /// refers to is looked up. Why: an update reaches the stock's levels through the order
    /// (its stock and side are in the order's slot), so a cold slot and the cold levels behind
    /// it were two misses one after the other; the message's header names the stock too, and
    /// these reads, whose values no later instruction needs, start the levels' lines while the
    /// slot is still coming. At TotalView scale (8,000 stocks, a million live orders) it took
    /// the lab's per-message p99 from 1,112-1,138 ns to 1,002-1,050 (partial cancels' from
    /// 1,178-1,182 to 818-840, their floor's 843-943; fenced timing). Best effort: the levels'
    /// address hangs on the stock's entry, a cold line too, and `best()` branches on the side's
    /// level count read from it; a mispredicted branch there throws away the work after it
    /// (the order's lookup among it), though the lines already asked for still come. Only a
    /// read: a header that names another stock than the order's costs a wasted read and
    /// changes nothing.
    #[inline(always)]
    fn touch(&self, locate: u16) {
        if let Some(s) = self.stocks.get(usize::from(locate)) {
            // black_box: the values are unused, and the compiler would drop unused reads.
            std::hint::black_box((s.bids.best().map(|l| l.price), s.asks.best().map(|l| l.price)));
        }
    }

    fn grow(&mut self, locate: u16) {
        let need = usize::from(locate) + 1;
        if self.stocks.len() < need {
            // Stocks beyond the reserved ones start without capacity: a locate near 65535 must
            // not allocate levels for every locate below it.
            self.stocks.resize_with(need, || StockBook::new(0));
            self.names.resize(need, *b"        ");
        }
    }

    /// (best price, shares) on the side; `book.top(locate, side)`.
    fn top(&self, locate: u16, side: Side) -> Option<(u32, u64)> {
        self.stocks.get(usize::from(locate))?.side(side).best().map(|l| (l.price, l.shares))
    }

    fn add(&mut self, locate: u16, reference: u64, side: u8, shares: u32, price: u32) -> Result<Update, BookError> {
        let side = Side::from_itch(side).ok_or(BookError::BadSide { reference, side })?;
        if reference == 0 {
            return Err(BookError::ZeroReference { code: b'A' });
        }
        if self.orders.contains_key(&reference) {
            return Err(BookError::DuplicateOrder { reference });
        }
        if shares == 0 {
            return Err(BookError::ZeroShares { code: b'A', reference });
        }
        self.grow(locate);
        let before = self.top(locate, side);
        let (prev, level) = self.stocks[usize::from(locate)].side_mut(side).add(price, shares, reference);
        if prev != 0 {
            if let Some(p) = self.orders.get_mut(&prev) {
                p.next = reference;
            }
        }
        self.orders.insert(reference, Order { locate, side, price, shares, level, prev, next: 0 });
        self.totals.added += u64::from(shares);
        Ok(Update { locate, side, top_changed: before != self.top(locate, side) })
    }

    /// Execute (`E`, `C`) or partially cancel (`X`) `shares` of an order; an order that reaches
    /// zero leaves the book (ITCH sends no delete after a full execution).
    fn take(&mut self, code: u8, reference: u64, shares: u32) -> Result<Update, BookError> {
        let o = self.orders.get_mut(&reference).ok_or(BookError::UnknownOrder { code, reference })?;
        if shares > o.shares {
            return Err(BookError::Overfill { code, reference, resting: o.shares, requested: shares });
        }
        if code == b'X' {
            self.totals.cancelled += u64::from(shares);
        } else {
            self.totals.executed += u64::from(shares);
        }
        let full = shares == o.shares;
        o.shares -= shares;
        let o = *o;
        let levels = self.stocks[usize::from(o.locate)].side_mut(o.side);
        let before = levels.best().map(|l| (l.price, l.shares));
        if full {
            self.unlink(reference, &o, shares);
        } else {
            levels.reduce(o.price, o.level, shares, None);
        }
        Ok(Update { locate: o.locate, side: o.side, top_changed: before != self.top(o.locate, o.side) })
    }

    fn delete(&mut self, reference: u64) -> Result<Update, BookError> {
        let o = *self.orders.get(&reference).ok_or(BookError::UnknownOrder { code: b'D', reference })?;
        let before = self.top(o.locate, o.side);
        self.totals.deleted += u64::from(o.shares);
        self.unlink(reference, &o, o.shares);
        Ok(Update { locate: o.locate, side: o.side, top_changed: before != self.top(o.locate, o.side) })
    }

    /// `U`: the old order leaves, a new one (same stock and side, back of the queue) arrives. A
    /// replace by an order of no shares is only the old order leaving: nothing is left to rest,
    /// and it is what the normalised form (a delete, then an add the book refuses) does too, so
    /// a book built from ITCH and one built from normalised data stay equal after it. (A replace
    /// this book refuses, to a reference in use or 0, still parts them: its normalised delete
    /// is applied.)
    fn replace(&mut self, old: u64, new: u64, shares: u32, price: u32) -> Result<Update, BookError> {
        let o = *self.orders.get(&old).ok_or(BookError::UnknownOrder { code: b'U', reference: old })?;
        if old != new && self.orders.contains_key(&new) {
            return Err(BookError::DuplicateOrder { reference: new });
        }
        if new == 0 {
            return Err(BookError::ZeroReference { code: b'U' });
        }
        let before = self.top(o.locate, o.side);
        self.totals.replaced += u64::from(o.shares);
        self.unlink(old, &o, o.shares);
        if shares == 0 {
            return Ok(Update { locate: o.locate, side: o.side, top_changed: before != self.top(o.locate, o.side) });
        }
        // Cannot fail: the side is the old order's, the reference is new and not 0, shares > 0.
        let u = self.add(o.locate, new, o.side.itch(), shares, price)?;
        Ok(Update { top_changed: before != self.top(o.locate, o.side), ..u })
    }

    /// Removes a whole order (whose remaining `shares` leave its level) and closes its queue gap.
    #[inline]
    fn unlink(&mut self, reference: u64, o: &Order, shares: u32) {
        if o.prev != 0 {
            if let Some(p) = self.orders.get_mut(&o.prev) {
                p.next = o.next;
            }
        }
        if o.next != 0 {
            if let Some(n) = self.orders.get_mut(&o.next) {
                n.prev = o.prev;
            }
        }
        self.stocks[usize::from(o.locate)].side_mut(o.side).reduce(
            o.price,
            o.level,
            shares,
            Some((reference, o.prev, o.next)),
        );
        self.orders.remove(&reference);
    }

    /// The resting order with this reference number, if any.
    pub fn order(&self, reference: u64) -> Option<&Order> {
        self.orders.get(&reference)
    }

    /// The best level on one side of a stock.
    pub fn best(&self, locate: u16, side: Side) -> Option<&Level> {
        self.stocks.get(usize::from(locate))?.side(side).best()
    }

    /// A stock's book, if the locate was ever seen.
    pub fn stock(&self, locate: u16) -> Option<&StockBook> {
        self.stocks.get(usize::from(locate))
    }

    /// The stock's symbol from the directory (space-padded), if it was sent.
    pub fn name(&self, locate: u16) -> Option<&[u8; 8]> {
        self.names.get(usize::from(locate)).filter(|n| n != &b"        ")
    }

    /// Shares queued ahead of an order at its price (its queue position).
    pub fn shares_ahead(&self, reference: u64) -> Option<u64> {
        let mut at = self.orders.get(&reference)?.prev;
        let mut ahead = 0u64;
        while let Some(o) = self.orders.get(&at) {
            ahead += u64::from(o.shares);
            at = o.prev;
        }
        Some(ahead)
    }

    /// Orders resting in the book.
    pub fn resting_orders(&self) -> usize {
        self.orders.len()
    }

    /// Resting orders the order table holds in its spill map (each lookup of one reads a slot
    /// and a hash map): many means the book was reserved for too few orders.
    pub fn spilled_orders(&self) -> usize {
        self.orders.spilled()
    }

    /// Shares resting in the book.
    pub fn resting_shares(&self) -> u64 {
        self.orders.values().map(|o| u64::from(o.shares)).sum()
    }

    /// Share counts since the book was created.
    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// Every invariant, checked the slow way (for tests and `--check` runs): levels strictly
    /// sorted with the best last and none empty; each level's queue walks head to tail through
    /// orders of that stock, side and price, none of them without shares, and sums to the
    /// level's shares and count; every order is in exactly one queue; no stock is crossed or
    /// locked; volume is conserved. The first broken one is returned, naming where.
    pub fn check_invariants(&self) -> Result<(), InvariantError> {
        self.check(true)
    }

    /// Every invariant of [`OrderBook::check_invariants`] but the one about prices: a book
    /// loaded from another party's snapshot may be crossed (a venue's book before its opening
    /// cross is), and loading it must still give a well-formed book.
    pub fn check_structure(&self) -> Result<(), InvariantError> {
        self.check(false)
    }

    fn check(&self, uncrossed: bool) -> Result<(), InvariantError> {
        let mut seen = 0usize;
        for (locate, book) in self.stocks.iter().enumerate() {
            for side in [Side::Bid, Side::Ask] {
                let levels = book.side(side).as_slice();
                for w in levels.windows(2) {
                    if !side.better(w[1].price, w[0].price) {
                        return Err(InvariantError::OutOfOrder { locate, side, prices: (w[0].price, w[1].price) });
                    }
                }
                for l in levels {
                    let (mut shares, mut count, mut at, mut prev) = (0u64, 0u32, l.head, 0u64);
                    while at != 0 {
                        let o =
                            self.orders.get(&at).ok_or(InvariantError::MissingOrder { price: l.price, order: at })?;
                        if o.shares == 0 {
                            return Err(InvariantError::NoShares { order: at });
                        }
                        if (usize::from(o.locate), o.side, o.price, o.prev) != (locate, side, l.price, prev) {
                            return Err(InvariantError::Misqueued { order: at, found: *o });
                        }
                        shares += u64::from(o.shares);
                        count += 1;
                        prev = at;
                        at = o.next;
                    }
                    if prev != l.tail || shares != l.shares || count != l.orders || count == 0 {
                        return Err(InvariantError::Level { locate, side, level: *l, count, shares, ends_at: prev });
                    }
                    seen += count as usize;
                }
            }
            if let (true, Some(b), Some(a)) = (uncrossed, book.bids.best(), book.asks.best()) {
                if b.price >= a.price {
                    return Err(InvariantError::Crossed { locate, bid: b.price, ask: a.price });
                }
            }
        }
        if seen != self.orders.len() {
            return Err(InvariantError::Unqueued { resting: self.orders.len(), queued: seen });
        }
        let t = self.totals;
        let out = t.executed + t.cancelled + t.deleted + t.replaced + self.resting_shares();
        if t.added != out {
            return Err(InvariantError::Volume { removed_and_resting: out, totals: t });
        }
        Ok(())
    }
}

/// A broken book invariant ([`OrderBook::check_invariants`]): which, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvariantError {
    /// A side's levels are not strictly sorted best last.
    #[error("locate {locate} {side:?}: levels {} and {} out of order", prices.0, prices.1)]
    OutOfOrder {
        /// The stock.
        locate: usize,
        /// The side.
        side: Side,
        /// The two neighbouring prices.
        prices: (u32, u32),
    },
    /// A level's queue names an order the book does not hold.
    #[error("level {price} queue names missing order {order}")]
    MissingOrder {
        /// The level's price.
        price: u32,
        /// The order reference.
        order: u64,
    },
    /// An order sits in a queue not of its stock, side or price, or its back link is wrong.
    #[error("order {order} is queued at the wrong place: {found:?}")]
    Misqueued {
        /// The order reference.
        order: u64,
        /// The order as the book holds it.
        found: Order,
    },
    /// An order rests with no shares (an order with none has left the book, and a snapshot's
    /// loader refuses one).
    #[error("order {order} rests with 0 shares")]
    NoShares {
        /// The order reference.
        order: u64,
    },
    /// A level's queue does not add up to the level (or the level is empty).
    #[error(
        "locate {locate} {side:?} level {level:?}: queue holds {count} orders, {shares} shares, ends at {ends_at}"
    )]
    Level {
        /// The stock.
        locate: usize,
        /// The side.
        side: Side,
        /// The level.
        level: Level,
        /// Orders walked.
        count: u32,
        /// Shares walked.
        shares: u64,
        /// The last order walked.
        ends_at: u64,
    },
    /// A stock's best bid is at or above its best ask.
    #[error("locate {locate} is crossed: bid {bid} >= ask {ask}")]
    Crossed {
        /// The stock.
        locate: usize,
        /// The best bid.
        bid: u32,
        /// The best ask.
        ask: u32,
    },
    /// Orders rest in the book but in no queue.
    #[error("{resting} orders resting but {queued} in queues")]
    Unqueued {
        /// Orders the book holds.
        resting: usize,
        /// Orders found in queues.
        queued: usize,
    },
    /// Shares added differ from shares removed plus resting.
    #[error("volume not conserved: added {} != removed + resting {removed_and_resting} ({totals:?})", totals.added)]
    Volume {
        /// Shares removed (executed, cancelled, deleted, replaced) plus those resting.
        removed_and_resting: u64,
        /// The book's totals.
        totals: Totals,
    },
}

const _: () = assert!(std::mem::size_of::<Order>() == 32, "the level hint lives in padding");
