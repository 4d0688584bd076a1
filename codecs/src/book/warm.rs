//! Keeping a book's hot lines in this core's cache between messages.
//!
//! A trader's loop spins for microseconds between ticks. Whatever else runs on the core
//! meanwhile (the host's own work on a VM, an interrupt, the loop's other streams) evicts the
//! book's lines, and the next message then waits on misses the in-process figure never shows:
//! the stock's best levels (the read every update starts with), and the order slots at either
//! end of its queue (an execution takes the head, the next add links behind the tail).
//! [`HotStocks`] remembers the stocks the last updates touched, and an idle loop asks for one
//! of their lines' worth a cycle ([`HotStocks::warm`], through [`OrderBook::hot_lines`]). Only
//! recent stocks: walking a whole day's book (8,000 stocks, about 3 MiB of such lines) would
//! sweep through more than the cache holds, pushing out what the next message needs, and a
//! stray locate would stretch the walk for the rest of the day.
//!
//! This crate has no `unsafe`, which a prefetch needs: the caller brings it
//! (`tickbus::cache::prefetch_l2`). Finding the lines reads the stock's entry and its best level,
//! one after the other; those reads are the warming's main cost, and they bring their lines in
//! as reads do. The order slots at the queue's ends are found by address, not read
//! ([`super::RefTable::home_of`]): only the prefetch asks for their lines.
use std::mem::size_of_val;

use super::{OrderBook, StockBook};

/// How many recent updates [`HotStocks`] remembers.
const HOT_STOCKS: usize = 64;
/// [`HOT_STOCKS`] as the count's type.
const HOT: u64 = HOT_STOCKS as u64;

impl OrderBook {
    /// Calls `line` with an address in each hot cache line of stock `locate` (nothing for a
    /// locate the book never grew to): the stock's entry; for each side that holds orders,
    /// every line from the fourth-best level to the end of the best (`Levels::find` scans the
    /// top four 32-byte levels, which may straddle three lines) and the lines of the order
    /// slots of the orders at the head and the tail of the best level (their home slots,
    /// [`super::RefTable::home_of`], found by address: a spilled order's home slot holds
    /// another order). Reads the stock's entry and levels to find them, not the order slots; no
    /// allocation, no syscall, no change.
    #[inline]
    pub fn hot_lines(&self, locate: u16, mut line: impl FnMut(*const u8)) {
        let Some(stock) = self.stocks.get(usize::from(locate)) else { return };
        line((stock as *const StockBook).cast());
        for side in [&stock.bids, &stock.asks] {
            let levels = side.as_slice();
            let Some(best) = levels.last() else { continue };
            let top = &levels[levels.len().saturating_sub(4)..];
            each_line(top.as_ptr().cast(), size_of_val(top), &mut line);
            for r in [best.head, best.tail] {
                // The order's slot by its address alone: looking the order up would read the
                // slot's key, and an idle pass would wait there on a cold slot's line before
                // asking for it. The whole slot (a 48-byte slot may straddle two lines, key and
                // order apart). An order the table spilled is not warmed; its home slot is.
                let (at, len) = self.orders.home_of(r);
                each_line(at, len, &mut line);
            }
        }
    }
}

/// Calls `line` once for each cache line the `len` bytes from `start` touch (an address in
/// it; `len` > 0).
#[inline(always)]
fn each_line(start: *const u8, len: usize, line: &mut impl FnMut(*const u8)) {
    let first = start as usize & !63;
    let last = (start as usize + len - 1) & !63;
    for at in (first..=last).step_by(64) {
        // The line's address, kept a pointer into the range (at may lie below it, within its
        // first line).
        line(start.wrapping_add(at.wrapping_sub(start as usize)));
    }
}

/// The last 64 stocks book updates touched (a stock updated again in a row counted
/// once), for an idle loop to keep warm: [`HotStocks::note`] on every update, and
/// [`HotStocks::warm`] once an idle cycle warms the next of them in turn. Fixed size: no
/// allocation.
#[derive(Debug, Clone)]
pub struct HotStocks {
    ring: [u16; HOT_STOCKS],
    /// Stocks noted (the next goes at `noted % HOT_STOCKS`; a u64 that no day wraps).
    noted: u64,
    /// The ring index warmed last.
    warmed: usize,
}

impl Default for HotStocks {
    fn default() -> HotStocks {
        HotStocks { ring: [0; HOT_STOCKS], noted: 0, warmed: 0 }
    }
}

impl HotStocks {
    /// Notes that an update touched stock `locate`.
    #[inline]
    pub fn note(&mut self, locate: u16) {
        if self.noted > 0 && self.ring[((self.noted - 1) % HOT) as usize] == locate {
            return;
        }
        self.ring[(self.noted % HOT) as usize] = locate;
        self.noted += 1;
    }

    /// The stocks noted, oldest first (at most 64).
    pub fn stocks(&self) -> impl Iterator<Item = u16> + '_ {
        let n = self.noted.min(HOT);
        (self.noted - n..self.noted).map(|i| self.ring[(i % HOT) as usize])
    }

    /// Names the hot lines of the next noted stock in turn ([`OrderBook::hot_lines`]) to
    /// `line`; nothing before the first note.
    #[inline]
    pub fn warm(&mut self, book: &OrderBook, line: impl FnMut(*const u8)) {
        let n = self.noted.min(HOT) as usize;
        if n == 0 {
            return;
        }
        // The next in turn, wrapping by a compare: `% n` was a division on every idle pass (n
        // only grows, so `warmed` is always below it).
        self.warmed += 1;
        if self.warmed >= n {
            self.warmed = 0;
        }
        book.hot_lines(self.ring[self.warmed], line);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Level, Order, Side};
    use super::*;
    use crate::itch::{AddOrder, ItchHeader, ItchMessage};
    use std::mem::size_of;
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

    fn lines(book: &OrderBook, locate: u16) -> Vec<usize> {
        let mut v = Vec::new();
        book.hot_lines(locate, |p| v.push(p as usize));
        v
    }

    /// Every 64-byte line `[from, from + len)` touches.
    fn lines_of(from: usize, len: usize) -> Vec<usize> {
        (from & !63..=(from + len - 1) & !63).step_by(64).collect()
    }

    #[test]
    fn the_hot_lines_are_the_entry_the_top_levels_lines_and_the_best_levels_queue_ends() {
        let mut book = OrderBook::with_capacity(64, 8);
        // Bids at five prices (the best, 105, holds orders 15 and 16); asks at six (the best,
        // 201, holds order 21 alone).
        for (r, price) in [(11, 101), (12, 102), (13, 103), (14, 104), (15, 105), (16, 105)] {
            add(&mut book, 2, r, b'B', price);
        }
        for (r, price) in [(21, 201), (22, 202), (23, 203), (24, 204), (25, 205), (26, 206)] {
            add(&mut book, 2, r, b'S', price);
        }
        let stock = book.stock(2).unwrap();
        // An order's home slot's lines, which hold the order itself.
        let order = |r: u64| {
            let (at, len) = book.orders.home_of(r);
            let slot = lines_of(at as usize, len);
            let own = lines_of(book.order(r).unwrap() as *const Order as usize, size_of::<Order>());
            assert!(own.iter().all(|l| slot.contains(l)), "order {r}'s lines are its slot's");
            slot
        };
        let top_four = |side: Side| {
            let levels = stock.side(side).as_slice();
            // The best is last: the top four are the last four, 128 bytes.
            lines_of(&levels[levels.len() - 4] as *const Level as usize, 4 * size_of::<Level>())
        };
        let mut want = vec![stock as *const StockBook as usize];
        want.extend(top_four(Side::Bid));
        want.extend(order(15));
        want.extend(order(16));
        want.extend(top_four(Side::Ask));
        want.extend(order(21));
        want.extend(order(21));
        // Named at the order's first byte and, when it straddles, its last: compare the lines.
        let got: Vec<usize> = lines(&book, 2).iter().map(|a| a & !63).collect();
        assert_eq!(got, want.iter().map(|a| a & !63).collect::<Vec<_>>());
        // A stock with no orders: its entry only; one beyond the book: nothing.
        assert_eq!(lines(&book, 3), [book.stock(3).unwrap() as *const StockBook as usize]);
        assert_eq!(lines(&book, 9_000), Vec::<usize>::new());
    }

    /// The queue ends are named by their home slots, unread: an order the table spilled (its
    /// slot held by an older live order) gets that slot's lines, not its own, and nothing reads
    /// the spill map to find it.
    #[test]
    fn a_spilled_order_at_the_queue_end_names_its_home_slot() {
        // 16 slots: 19 lands on 3's slot while 3 rests, and spills.
        let mut book = OrderBook::with_capacity(16, 4);
        add(&mut book, 1, 3, b'B', 100);
        add(&mut book, 1, 19, b'B', 100);
        assert_eq!(book.spilled_orders(), 1);
        let home = |r: u64| {
            let (at, len) = book.orders.home_of(r);
            lines_of(at as usize, len)
        };
        let stock = book.stock(1).unwrap();
        let levels = stock.side(Side::Bid).as_slice();
        let mut want = vec![stock as *const StockBook as usize];
        want.extend(lines_of(levels.as_ptr() as usize, size_of_val(levels)));
        want.extend(home(3)); // the head
        want.extend(home(3)); // the tail, 19: its home is 3's slot
        let spilled = lines_of(book.order(19).unwrap() as *const Order as usize, size_of::<Order>());
        assert!(spilled.iter().all(|l| !home(3).contains(l)), "the spill map's copy is elsewhere");
        let got: Vec<usize> = lines(&book, 1).iter().map(|a| a & !63).collect();
        assert_eq!(got, want.iter().map(|a| a & !63).collect::<Vec<_>>());
    }

    #[test]
    fn hot_stocks_keep_the_last_updates_stocks_and_warm_them_in_turn() {
        let mut book = OrderBook::with_capacity(64, 8);
        add(&mut book, 1, 10, b'B', 100);
        add(&mut book, 3, 12, b'S', 200);
        let mut hot = HotStocks::default();
        let warmed = |hot: &mut HotStocks, book: &OrderBook| {
            let mut v = Vec::new();
            hot.warm(book, |p| v.push(p as usize));
            v
        };
        assert!(warmed(&mut hot, &book).is_empty(), "nothing noted: nothing warmed");
        for l in [1, 1, 3, 3, 3] {
            hot.note(l);
        }
        assert_eq!(hot.stocks().collect::<Vec<_>>(), [1, 3], "a stock updated twice in a row is noted once");
        // In turn: 3, 1, 3, 1 (the first warm moves past the oldest).
        let (one, three) = (lines(&book, 1), lines(&book, 3));
        let turns: Vec<Vec<usize>> = (0..4).map(|_| warmed(&mut hot, &book)).collect();
        assert_eq!(turns, [three.clone(), one.clone(), three.clone(), one.clone()]);
        // The ring keeps the last HOT_STOCKS: after 100 stocks, 36..100 are left.
        for l in 0..100u16 {
            hot.note(l);
        }
        assert_eq!(hot.stocks().collect::<Vec<_>>(), (36..100).collect::<Vec<u16>>());
    }
}
