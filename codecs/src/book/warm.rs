//! Keeping a book's hot lines in this core's cache between messages.
//!
//! A trader's loop spins for microseconds between ticks. Whatever else runs on the core
//! meanwhile (the host's own work on a VM, an interrupt, the loop's other streams) evicts the
//! book's lines, and the next message then waits on misses the in-process figure never shows:
//! the stock's best level (the read every update starts with), and the order slots at either
//! end of its queue (an execution takes the head, the next add links behind the tail). An idle
//! loop that calls [`OrderBook::hot_lines`] once a cycle walks every stock in turn and asks
//! for those lines with a prefetch (this crate has no `unsafe`, which a prefetch needs: the
//! caller brings it, `tickbus::cache::prefetch_l2`).
use super::{Level, Order, OrderBook, StockBook};

impl OrderBook {
    /// Calls `line` with an address in each hot cache line of stock locate `at` (or of the
    /// first stock, when `at` is past the highest locate an order or a name came for since the
    /// book was made or cleared: the walk covers the locates in use, not the book's whole
    /// reservation): the stock's entry, the top
    /// two lines of both sides' levels (`Levels::find` scans the top four 32-byte levels) and
    /// the order slots at the head and the tail of each side's best level. Returns the locate
    /// to name next, so `at = book.hot_lines(at, prefetch)` once per idle cycle walks the whole
    /// book in turn (the trader passes `tickbus::cache::prefetch_l2`). Reads the book only to
    /// find the lines; no allocation, no syscall, no change.
    #[inline]
    pub fn hot_lines(&self, at: usize, mut line: impl FnMut(*const u8)) -> usize {
        let at = if at < self.used { at } else { 0 };
        let Some(stock) = self.stocks.get(at).filter(|_| at < self.used) else { return 0 };
        line((stock as *const StockBook).cast());
        for side in [&stock.bids, &stock.asks] {
            let levels = side.as_slice();
            let Some(best) = levels.last() else { continue };
            line((best as *const Level).cast());
            line((&levels[levels.len().saturating_sub(4)] as *const Level).cast());
            for r in [best.head, best.tail] {
                if let Some(o) = self.orders.get(&r) {
                    line((o as *const Order).cast());
                }
            }
        }
        at + 1
    }
}

#[cfg(test)]
mod tests {
    use super::super::Side;
    use super::*;
    use crate::itch::{AddOrder, ItchHeader, ItchMessage};
    use zerocopy::big_endian::{U32, U64};

    fn add(book: &mut OrderBook, locate: u16, reference: u64, side: u8, price: u32) {
        let m = AddOrder {
            header: ItchHeader::new(b'A', locate, 0, 1),
            order_reference_number: U64::new(reference),
            side,
            shares: U32::new(100),
            stock: *b"ACME    ",
            price: U32::new(price),
        };
        book.apply(&ItchMessage::AddOrder(&m)).unwrap();
    }

    #[test]
    fn the_hot_lines_walk_every_stock_in_turn_and_change_nothing() {
        let mut book = OrderBook::with_capacity(64, 8);
        let lines = |book: &OrderBook, at: usize| {
            let mut v = Vec::new();
            let next = book.hot_lines(at, |p| v.push(p as usize));
            (next, v)
        };
        // An empty book: nothing to walk, and any locate starts again at the first.
        assert_eq!(lines(&book, 0), (0, vec![]));
        assert_eq!(lines(&book, 7), (0, vec![]));
        add(&mut book, 1, 10, b'B', 100);
        add(&mut book, 1, 11, b'B', 100);
        add(&mut book, 3, 12, b'S', 200);
        let before = (book.digest(), book.totals(), book.resting_orders());
        // The walk covers locates 0..=3 (3 is the highest an order came for; the book
        // reserved 8): 0, 1, 2, 3, then 0 again.
        let mut at = 0;
        let mut walked = Vec::new();
        for _ in 0..6 {
            let (next, v) = lines(&book, at);
            // The stock walked is the one before the next.
            walked.push((next - 1, v.len()));
            at = next;
        }
        // An empty stock: its entry. Stock 1's bids: the entry, the best level twice (one
        // level: it is its own fourth), its head (10) and tail (11). Stock 3's asks: the one
        // order is head and tail.
        assert_eq!(walked, [(0, 1), (1, 5), (2, 1), (3, 5), (0, 1), (1, 5)]);
        let (_, v) = lines(&book, 1);
        let best = book.best(1, Side::Bid).unwrap() as *const Level as usize;
        let head = book.order(10).unwrap() as *const Order as usize;
        let tail = book.order(11).unwrap() as *const Order as usize;
        assert_eq!(v[1..], [best, best, head, tail]);
        assert_eq!(lines(&book, 99).0, 1, "a locate past the last starts again at the first");
        assert_eq!((book.digest(), book.totals(), book.resting_orders()), before);
    }
}
