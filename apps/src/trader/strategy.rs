//! The strategy: everything a trader decides, and nothing about the bus. Copy this file and
//! change the rule; `trader/mod.rs` is the plumbing that feeds it and sends what it decides.
//!
//! The rule (a toy that exercises every hop, not a way to make money): keep the L3 book of every
//! instrument from normalised market data; when an instrument's best bid or best offer changes,
//! send an immediate-or-cancel limit order that would take the new best price: sell `qty` at the
//! new best bid, or buy `qty` at the new best offer. Two risk checks come first: at most
//! `max_in_flight` orders may await their execution report, and after a gap in the market data
//! (the book may be wrong from there on) the strategy stops trading until the trader rebuilds
//! the book from a snapshot made by a maker that did not lose the data (`recovery.rs`, with
//! `--snapshots`; [`Strategy::resume`]), or for good without one. A snapshot made from the same
//! lossy market data carries the loss and is not traded on either.
use tickbus_codecs::book::{HotStocks, OrderBook, Side as BookSide};
use tickbus_codecs::{AnyMessage, Side, PRICE_SCALE};

/// ITCH prices have 4 decimals; orders carry [`PRICE_SCALE`] (8).
const ITCH_TO_WIRE_PRICE: i64 = PRICE_SCALE / 10_000;

/// An order the strategy wants sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Intent {
    pub instrument: u32,
    pub side: Side,
    /// Limit price, [`PRICE_SCALE`] units.
    pub price: i64,
    pub qty: u64,
}

/// What the strategy has seen and done (the summary's type, shared with its readers).
pub use tickbus_apps::summary::StrategyStats;

pub struct Strategy {
    book: OrderBook,
    qty: u64,
    max_in_flight: u64,
    in_flight: u64,
    /// Messages missed in the gap that halted trading (no allocation on the hot path).
    halted: Option<u64>,
    /// The stocks the last updates touched, which [`Strategy::warm`] keeps warm.
    hot: HotStocks,
    pub stats: StrategyStats,
}

impl Strategy {
    /// A strategy with a book reserved for a full day (a million resting orders, every stock
    /// locate), so the steady state does not allocate.
    pub fn new(qty: u64, max_in_flight: u64) -> Strategy {
        Strategy {
            book: OrderBook::with_capacity(1 << 20, 8192),
            qty,
            max_in_flight,
            in_flight: 0,
            halted: None,
            hot: HotStocks::default(),
            stats: StrategyStats::default(),
        }
    }

    /// The book's digest (`OrderBook::digest`): equal for traders holding the same book.
    pub fn book_digest(&self) -> u64 {
        self.book.digest()
    }

    /// The book, to load a snapshot into before trading.
    pub fn book_mut(&mut self) -> &mut OrderBook {
        &mut self.book
    }

    /// Maps the book's memory in before trading (see `OrderBook::pre_touch`): a cold book takes
    /// page faults for its first hundreds of thousands of orders and falls behind a busy feed.
    pub fn pre_touch(&mut self) {
        self.book.pre_touch();
    }

    /// An idle cycle's share of keeping the book warm: the hot lines of the next of the stocks
    /// the last updates touched (`HotStocks`), asked for with a prefetch, so a tick after
    /// microseconds of spinning does not wait on lines the core lost meanwhile. No allocation,
    /// no syscall.
    #[inline]
    pub fn warm(&mut self) {
        self.hot.warm(&self.book, tickbus::cache::prefetch_l2);
    }

    /// Applies one market-data message to the book; returns the order to send, if any. Split
    /// from [`Strategy::decide`] so the plumbing can stamp "book applied" between the two.
    #[inline]
    pub fn apply(&mut self, msg: &AnyMessage<'_>) -> Option<(u16, BookSide)> {
        match self.book.apply_md(msg) {
            Ok(Some(u)) => {
                self.stats.book_events += 1;
                self.hot.note(u.locate);
                if u.top_changed {
                    self.stats.top_changes += 1;
                    return Some((u.locate, u.side));
                }
                None
            }
            Ok(None) => None,
            Err(_) => {
                self.stats.book_errors += 1;
                None
            }
        }
    }

    /// The rule: take the new best price on the side that moved.
    #[inline]
    pub fn decide(&mut self, (locate, side): (u16, BookSide)) -> Option<Intent> {
        let top = self.book.best(locate, side)?;
        if self.halted.is_some() {
            self.stats.skipped_halted += 1;
            return None;
        }
        if self.in_flight >= self.max_in_flight {
            self.stats.skipped_in_flight += 1;
            return None;
        }
        self.in_flight += 1;
        Some(Intent {
            instrument: u32::from(locate),
            side: match side {
                BookSide::Bid => Side::Sell,
                BookSide::Ask => Side::Buy,
            },
            price: i64::from(top.price) * ITCH_TO_WIRE_PRICE,
            qty: self.qty,
        })
    }

    /// The order [`Strategy::decide`] asked for did not go out: not in flight.
    pub fn unsent(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// The market data lost `missed` messages: the book cannot be trusted any more.
    pub fn on_gap(&mut self, missed: u64) {
        self.halted.get_or_insert(missed);
    }

    /// The book was rebuilt whole (a snapshot and the market data after it): trading again.
    pub fn resume(&mut self) {
        self.halted = None;
    }

    /// `n` orders will get no report (a later order's came first): no longer in flight.
    pub fn on_lost(&mut self, n: u64) {
        self.in_flight = self.in_flight.saturating_sub(n);
        self.stats.lost_reports += n;
    }

    /// An execution report came back for one of our orders.
    pub fn on_report(&mut self, report: &AnyMessage<'_>) {
        self.in_flight = self.in_flight.saturating_sub(1);
        match report {
            AnyMessage::ExecFill(f) => {
                self.stats.filled_orders += 1;
                self.stats.filled_qty += f.fill_qty;
            }
            AnyMessage::ExecAck(_) => self.stats.unfilled_orders += 1,
            _ => self.stats.rejected_orders += 1,
        }
    }

    /// Orders awaiting their execution report.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Why trading stopped, if it did (for the summary; formats, so not on the hot path).
    pub fn halted(&self) -> Option<String> {
        self.halted.map(|missed| format!("halted after a gap of {missed} market-data messages"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickbus_codecs::md::OrderAdd;
    use tickbus_codecs::Message;

    fn add(id: u64, side: Side, price: i64) -> OrderAdd {
        let mut a = OrderAdd::new();
        a.instrument_id = 2;
        a.order_id = id;
        a.side = side as u8;
        a.price = price * PRICE_SCALE;
        a.qty = 300;
        a
    }

    #[test]
    fn a_new_best_price_is_taken_within_the_risk_limits() {
        let mut s = Strategy::new(100, 1);
        let bid = add(1, Side::Buy, 10);
        let moved = s.apply(&AnyMessage::OrderAdd(&bid)).expect("a first bid moves the top");
        let i = s.decide(moved).expect("an order");
        assert_eq!(i, Intent { instrument: 2, side: Side::Sell, price: 10 * PRICE_SCALE, qty: 100 });
        // One in flight: the next decision is skipped until its report arrives.
        let ask = add(2, Side::Sell, 11);
        let moved = s.apply(&AnyMessage::OrderAdd(&ask)).unwrap();
        assert_eq!(s.decide(moved), None);
        assert_eq!(s.stats.skipped_in_flight, 1);
        let fill = tickbus_codecs::exec::ExecFill::new();
        s.on_report(&AnyMessage::ExecFill(&fill));
        assert_eq!(s.decide(moved).map(|i| (i.side, i.price)), Some((Side::Buy, 11 * PRICE_SCALE)));
        // A worse bid does not move the top; after a gap nothing is sent.
        assert_eq!(s.apply(&AnyMessage::OrderAdd(&add(3, Side::Buy, 9))), None);
        s.on_gap(5);
        s.on_report(&AnyMessage::ExecFill(&fill));
        let moved = s.apply(&AnyMessage::OrderAdd(&add(4, Side::Buy, 12))).unwrap();
        assert_eq!(s.decide(moved), None);
        assert_eq!((s.stats.skipped_halted, s.halted().is_some()), (1, true));
    }
}
