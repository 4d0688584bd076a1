//! One side of one stock's book: price levels kept sorted with the best price last, so the
//! busiest end (the top) is where inserts and removals cost least.

/// A price level: total shares and the FIFO queue of orders resting at it (by reference number;
/// the queue links live in the orders themselves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    /// The price, in ITCH's Price(4) units (1/10,000 of a dollar).
    pub price: u32,
    /// Shares resting at this price.
    pub shares: u64,
    /// Orders resting at this price.
    pub orders: u32,
    /// Oldest order at this price (first to trade), 0 when empty.
    pub head: u64,
    /// Newest order at this price.
    pub tail: u64,
}

/// Which side; bids sort ascending and asks descending so that the best is always last.
/// (`Bid` is the all-zero value: an order table's empty slots are zeroed memory.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, zerocopy::FromZeros)]
#[repr(u8)]
pub enum Side {
    /// Buy orders.
    Bid,
    /// Sell orders.
    Ask,
}

impl Side {
    /// ITCH's buy/sell indicator: `B` or `S`.
    pub fn from_itch(b: u8) -> Option<Side> {
        match b {
            b'B' => Some(Side::Bid),
            b'S' => Some(Side::Ask),
            _ => None,
        }
    }

    /// ITCH's buy/sell indicator for this side: `B` or `S`.
    pub fn itch(self) -> u8 {
        match self {
            Side::Bid => b'B',
            Side::Ask => b'S',
        }
    }

    /// True when `a` is a better price than `b` on this side.
    #[inline]
    pub fn better(self, a: u32, b: u32) -> bool {
        match self {
            Side::Bid => a > b,
            Side::Ask => a < b,
        }
    }
}

/// The levels of one side.
#[derive(Debug, Clone)]
pub struct Levels {
    side: Side,
    levels: Vec<Level>,
}

impl Levels {
    /// An empty side with room for `cap` levels before it allocates.
    pub fn with_capacity(side: Side, cap: usize) -> Levels {
        Levels { side, levels: Vec::with_capacity(cap) }
    }

    /// Empties the side, keeping its memory.
    pub fn clear(&mut self) {
        self.levels.clear();
    }

    /// Writes every reserved slot past the levels held once, keeping the levels (see
    /// [`super::OrderBook::pre_touch`]).
    pub fn pre_touch(&mut self) {
        let (held, blank) = (self.levels.len(), Level { price: 0, shares: 0, orders: 0, head: 0, tail: 0 });
        self.levels.resize(self.levels.capacity(), blank);
        self.levels.truncate(held);
    }

    /// Levels from worst to best.
    pub fn as_slice(&self) -> &[Level] {
        &self.levels
    }

    /// The best level (highest bid, lowest ask), if any.
    pub fn best(&self) -> Option<&Level> {
        self.levels.last()
    }

    /// Index of `price`, or where it would be inserted. Scans from the top first: nearly all
    /// activity is within a few levels of it.
    #[inline]
    fn find(&self, price: u32) -> Result<usize, usize> {
        let side = self.side;
        let n = self.levels.len();
        for i in (n.saturating_sub(4)..n).rev() {
            let p = self.levels[i].price;
            if p == price {
                return Ok(i);
            }
            if side.better(price, p) {
                return Err(i + 1);
            }
        }
        // Worse than the top four: binary search the rest (worst first).
        self.search(0..n.saturating_sub(4), price)
    }

    /// Binary search for `price` among the levels in `range` (worst first), as [`Levels::find`]
    /// answers: its index, or where it would be inserted.
    #[inline]
    fn search(&self, range: std::ops::Range<usize>, price: u32) -> Result<usize, usize> {
        let side = self.side;
        let at = range.start + self.levels[range.clone()].partition_point(|l| side.better(price, l.price));
        if at < range.end && self.levels[at].price == price {
            Ok(at)
        } else {
            Err(at)
        }
    }

    /// [`Levels::find`], starting at index `hint`: where an order's level was when the order
    /// came. Levels are kept worst first and nearly every level created or dropped is near the
    /// top, so a level moves by a few places at most while an order rests at it: the search
    /// looks at the hinted level (the line the update touches anyway) and walks a few
    /// neighbours from there, and only then searches the rest, where a search from scratch
    /// would touch several cold lines (the cost of a cancel in a TotalView-sized book).
    #[inline]
    fn find_hinted(&self, price: u32, hint: u32) -> Result<usize, usize> {
        const WALK: usize = 8;
        let (side, levels) = (self.side, &self.levels[..]);
        let Some(last) = levels.len().checked_sub(1) else { return Err(0) };
        let h = (hint as usize).min(last);
        if levels[h].price == price {
            return Ok(h);
        }
        let before = |l: &Level| side.better(price, l.price);
        if before(&levels[h]) {
            // Better than the hinted level: above it.
            let end = (h + 1 + WALK).min(levels.len());
            for (i, l) in levels.iter().enumerate().take(end).skip(h + 1) {
                if l.price == price {
                    return Ok(i);
                }
                if !before(l) {
                    return Err(i);
                }
            }
            self.search(end..levels.len(), price)
        } else {
            // Worse: below it.
            let start = h.saturating_sub(WALK);
            for i in (start..h).rev() {
                let l = &levels[i];
                if l.price == price {
                    return Ok(i);
                }
                if before(l) {
                    return Err(i + 1);
                }
            }
            self.search(0..start, price)
        }
    }

    /// The level at `price`, if any order rests there.
    pub fn get(&self, price: u32) -> Option<&Level> {
        self.find(price).ok().map(|i| &self.levels[i])
    }

    /// Adds `shares` of order `order` at `price`; returns the previous tail of the level's queue
    /// (0 when the level is new) so the caller can link the order behind it, and the level's
    /// index now (a hint for [`Levels::reduce`]).
    #[inline]
    pub fn add(&mut self, price: u32, shares: u32, order: u64) -> (u64, u32) {
        match self.find(price) {
            Ok(i) => {
                let l = &mut self.levels[i];
                l.shares += u64::from(shares);
                l.orders += 1;
                let prev = l.tail;
                l.tail = order;
                if l.head == 0 {
                    l.head = order;
                }
                (prev, i as u32)
            }
            Err(i) => {
                let level = Level { price, shares: u64::from(shares), orders: 1, head: order, tail: order };
                self.levels.insert(i, level);
                (0, i as u32)
            }
        }
    }

    /// Removes `shares` from the level at `price` (looked for at index `hint` first: what
    /// [`Levels::add`] returned, or anything); when `gone` is `(order, prev, next)` the order
    /// leaves the queue, which closes around it. An emptied level is dropped. Returns false
    /// when no such level exists.
    #[inline]
    pub fn reduce(&mut self, price: u32, hint: u32, shares: u32, gone: Option<(u64, u64, u64)>) -> bool {
        let Ok(i) = self.find_hinted(price, hint) else { return false };
        let l = &mut self.levels[i];
        l.shares -= u64::from(shares).min(l.shares);
        if let Some((order, prev, next)) = gone {
            l.orders -= 1;
            if l.head == order {
                l.head = next;
            }
            if l.tail == order {
                l.tail = prev;
            }
            if l.orders == 0 {
                self.levels.remove(i);
            }
        }
        true
    }

    /// Levels on this side.
    pub fn len(&self) -> usize {
        self.levels.len()
    }

    /// Whether no order rests on this side.
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prices(l: &Levels) -> Vec<u32> {
        l.as_slice().iter().map(|l| l.price).collect()
    }

    #[test]
    fn bids_and_asks_keep_the_best_last_across_the_scan_and_the_binary_search() {
        let mut bids = Levels::with_capacity(Side::Bid, 4);
        let mut asks = Levels::with_capacity(Side::Ask, 4);
        for (i, p) in [50u32, 10, 90, 30, 70, 20, 80, 60, 40, 100, 55, 5].into_iter().enumerate() {
            bids.add(p, 1, i as u64 + 1);
            asks.add(p, 1, i as u64 + 1);
        }
        let mut want: Vec<u32> = vec![5, 10, 20, 30, 40, 50, 55, 60, 70, 80, 90, 100];
        assert_eq!(prices(&bids), want);
        want.reverse();
        assert_eq!(prices(&asks), want);
        assert_eq!(bids.best().unwrap().price, 100);
        assert_eq!(asks.best().unwrap().price, 5);
        for p in [5u32, 55, 100] {
            assert_eq!(bids.get(p).unwrap().price, p);
            assert_eq!(asks.get(p).unwrap().price, p);
        }
        assert!(bids.get(56).is_none() && asks.get(1).is_none());
    }

    /// The hinted search finds what the plain one finds, from any hint: on the level, a few
    /// places off either way, far off, past the end.
    #[test]
    fn a_hinted_search_agrees_with_the_plain_one_from_any_hint() {
        for side in [Side::Bid, Side::Ask] {
            let mut l = Levels::with_capacity(side, 64);
            for (i, p) in (0..40u32).map(|k| 100 + 3 * k).enumerate() {
                l.add(p, 1, i as u64 + 1);
            }
            for price in 95..230u32 {
                for hint in (0..45u32).chain([u32::MAX]) {
                    assert_eq!(l.find_hinted(price, hint), l.find(price), "{side:?} price {price} hint {hint}");
                }
            }
            assert_eq!(Levels::with_capacity(side, 0).find_hinted(7, 3), Err(0));
        }
    }

    #[test]
    fn the_queue_ends_follow_adds_and_removals_and_empty_levels_go() {
        let mut b = Levels::with_capacity(Side::Bid, 4);
        assert_eq!(b.add(10, 100, 1), (0, 0));
        assert_eq!(b.add(10, 50, 2), (1, 0));
        assert_eq!(b.add(10, 25, 3), (2, 0));
        let l = *b.get(10).unwrap();
        assert_eq!((l.shares, l.orders, l.head, l.tail), (175, 3, 1, 3));
        assert!(b.reduce(10, 0, 100, Some((1, 0, 2))));
        let l = *b.get(10).unwrap();
        assert_eq!((l.shares, l.orders, l.head, l.tail), (75, 2, 2, 3));
        assert!(b.reduce(10, 7, 10, None), "a wrong hint is only a hint");
        assert_eq!(b.get(10).unwrap().shares, 65);
        assert!(b.reduce(10, 0, 25, Some((3, 2, 0))));
        assert!(b.reduce(10, u32::MAX, 40, Some((2, 0, 0))));
        assert!(b.is_empty());
        assert!(!b.reduce(10, 0, 1, None));
    }
}
