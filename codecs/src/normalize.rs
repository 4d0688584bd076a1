//! ITCH 5.0 into tickbus market data ([`crate::md`]): what a feed handler publishes.
//!
//! Owns: the mapping, and the L3 book it needs for it (ITCH executions, cancels and deletes
//! name only an order reference; the normalised messages carry the instrument, side, price and
//! what remains). Never: does I/O or reads a clock (the caller stamps headers).
//!
//! | ITCH | tickbus |
//! |---|---|
//! | `A`, `F` add | [`OrderAdd`] |
//! | `E` executed | [`OrderExecute`] at the order's resting price |
//! | `C` executed with price | [`OrderExecute`] at the execution price |
//! | `X` cancel | [`OrderModify`] with the shares that remain |
//! | `D` delete | [`OrderDelete`] |
//! | `U` replace | [`OrderDelete`] of the old order, then [`OrderAdd`] of the new one |
//! | `P` trade, `Q` cross | [`Trade`] |
//! | any of the above that moved a book's top | then a [`Quote`] with the new best bid and offer |
//!
//! Other ITCH types (system events, directory, halts, imbalances, ...) produce nothing here.
//! Prices are ITCH's 4 decimals widened to 8 ([`crate::PRICE_SCALE`]); `exchange_ts_ns` is the
//! ITCH timestamp; the instrument id is the ITCH stock locate.
use zerocopy::IntoBytes;

use crate::book::{OrderBook, Side as BookSide};
use crate::enums::Side;
use crate::header::Header;
use crate::itch::ItchMessage;
use crate::md::{OrderAdd, OrderDelete, OrderExecute, OrderModify, Quote, Trade};
use crate::message::Message;

/// A normalised message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Md {
    /// An order added.
    Add(OrderAdd),
    /// An order executed.
    Execute(OrderExecute),
    /// An order's price or size changed.
    Modify(OrderModify),
    /// An order removed.
    Delete(OrderDelete),
    /// A trade printed.
    Trade(Trade),
    /// A top-of-book quote.
    Quote(Quote),
}

impl Md {
    /// The message's bytes, as published.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Md::Add(m) => m.as_bytes(),
            Md::Execute(m) => m.as_bytes(),
            Md::Modify(m) => m.as_bytes(),
            Md::Delete(m) => m.as_bytes(),
            Md::Trade(m) => m.as_bytes(),
            Md::Quote(m) => m.as_bytes(),
        }
    }

    /// The message's header, to stamp sequence and TSC before publishing.
    pub fn header_mut(&mut self) -> &mut Header {
        match self {
            Md::Add(m) => m.header_mut(),
            Md::Execute(m) => m.header_mut(),
            Md::Modify(m) => m.header_mut(),
            Md::Delete(m) => m.header_mut(),
            Md::Trade(m) => m.header_mut(),
            Md::Quote(m) => m.header_mut(),
        }
    }
}

/// ITCH's 4-decimal price in tickbus's 8 decimals.
fn price(p: u32) -> i64 {
    i64::from(p) * (crate::PRICE_SCALE / 10_000)
}

fn side(b: u8) -> u8 {
    match b {
        b'B' => Side::Buy as u8,
        b'S' => Side::Sell as u8,
        _ => 0,
    }
}

/// Turns ITCH into market data, keeping the book that needs.
pub struct Normalizer {
    book: OrderBook,
}

impl Default for Normalizer {
    fn default() -> Self {
        Normalizer::new()
    }
}

impl Normalizer {
    /// Room for a full NASDAQ TotalView day's resting orders (about 1M at the peak), so the
    /// order map does not grow mid-session.
    pub fn new() -> Normalizer {
        Normalizer::with_capacity(1 << 20, 8192)
    }

    /// Room reserved up front for `orders` resting orders and `stocks` stocks.
    pub fn with_capacity(orders: usize, stocks: usize) -> Normalizer {
        Normalizer { book: OrderBook::with_capacity(orders, stocks) }
    }

    /// Writes the book's reserved memory once (see [`OrderBook::pre_touch`]).
    pub fn pre_touch(&mut self) {
        self.book.pre_touch();
    }

    /// Forgets the book, keeping its memory (see [`OrderBook::clear`]).
    pub fn clear(&mut self) {
        self.book.clear();
    }

    /// The book as the messages so far built it.
    pub fn book(&self) -> &OrderBook {
        &self.book
    }

    /// The book, to put a whole one in its place: after messages were lost for good, the book
    /// no longer knows the orders they added, and later executions, cancels and replaces of
    /// those orders normalise without their price, size or side until it is replaced by one
    /// that is whole (a feed handler's repair: `tickbus::feed::repair`).
    pub fn book_mut(&mut self) -> &mut OrderBook {
        &mut self.book
    }

    /// Normalises one ITCH message: `out` gets what it becomes, in order (nothing for types
    /// without a market-data meaning). A message that does not fit the book (an order unknown
    /// because the feed was joined mid-day) is still normalised with what it says itself.
    pub fn apply(&mut self, msg: &ItchMessage<'_>, out: &mut impl FnMut(Md)) {
        let h = msg.header();
        let (locate, ts) = (h.stock_locate.get(), h.timestamp_ns());
        let order = |book: &OrderBook, r: u64| book.order(r).copied();
        match msg {
            ItchMessage::AddOrder(m) => {
                out(Md::Add(add(locate, ts, m.order_reference_number.get(), m.side, m.price.get(), m.shares.get())))
            }
            ItchMessage::AddOrderMpid(m) => {
                out(Md::Add(add(locate, ts, m.order_reference_number.get(), m.side, m.price.get(), m.shares.get())))
            }
            ItchMessage::OrderExecuted(m) => {
                let r = m.order_reference_number.get();
                let mut e = execute(locate, ts, r, m.executed_shares.get(), m.match_number.get());
                e.price = order(&self.book, r).map_or(0, |o| price(o.price));
                out(Md::Execute(e));
            }
            ItchMessage::OrderExecutedWithPrice(m) => {
                let mut e =
                    execute(locate, ts, m.order_reference_number.get(), m.executed_shares.get(), m.match_number.get());
                e.price = price(m.execution_price.get());
                out(Md::Execute(e));
            }
            ItchMessage::OrderCancel(m) => {
                let r = m.order_reference_number.get();
                let mut x = OrderModify::new();
                x.instrument_id = u32::from(locate);
                x.order_id = r;
                x.exchange_ts_ns = ts;
                if let Some(o) = order(&self.book, r) {
                    x.new_price = price(o.price);
                    x.new_qty = u64::from(o.shares.saturating_sub(m.cancelled_shares.get()));
                }
                out(Md::Modify(x));
            }
            ItchMessage::OrderDelete(m) => out(Md::Delete(delete(locate, ts, m.order_reference_number.get()))),
            ItchMessage::OrderReplace(m) => {
                let old = m.original_order_reference_number.get();
                let s = order(&self.book, old).map_or(0, |o| match o.side {
                    BookSide::Bid => b'B',
                    BookSide::Ask => b'S',
                });
                out(Md::Delete(delete(locate, ts, old)));
                out(Md::Add(add(locate, ts, m.new_order_reference_number.get(), s, m.price.get(), m.shares.get())));
            }
            ItchMessage::Trade(m) => out(Md::Trade(trade(
                locate,
                ts,
                m.side,
                m.price.get(),
                u64::from(m.shares.get()),
                m.match_number.get(),
            ))),
            ItchMessage::CrossTrade(m) => {
                out(Md::Trade(trade(locate, ts, 0, m.cross_price.get(), m.shares.get(), m.match_number.get())))
            }
            _ => {}
        }
        if let Ok(Some(u)) = self.book.apply(msg) {
            if u.top_changed {
                let mut q = Quote::new();
                q.instrument_id = u32::from(u.locate);
                q.exchange_ts_ns = ts;
                if let Some(b) = self.book.best(u.locate, BookSide::Bid) {
                    (q.bid_px, q.bid_qty) = (price(b.price), b.shares);
                }
                if let Some(a) = self.book.best(u.locate, BookSide::Ask) {
                    (q.ask_px, q.ask_qty) = (price(a.price), a.shares);
                }
                out(Md::Quote(q));
            }
        }
    }
}

fn add(locate: u16, ts: u64, order: u64, s: u8, p: u32, shares: u32) -> OrderAdd {
    let mut a = OrderAdd::new();
    a.instrument_id = u32::from(locate);
    a.side = side(s);
    a.order_id = order;
    a.price = price(p);
    a.qty = u64::from(shares);
    a.exchange_ts_ns = ts;
    a
}

fn execute(locate: u16, ts: u64, order: u64, shares: u32, match_id: u64) -> OrderExecute {
    let mut e = OrderExecute::new();
    e.instrument_id = u32::from(locate);
    e.order_id = order;
    e.exec_qty = u64::from(shares);
    e.match_id = match_id;
    e.exchange_ts_ns = ts;
    e
}

fn delete(locate: u16, ts: u64, order: u64) -> OrderDelete {
    let mut d = OrderDelete::new();
    d.instrument_id = u32::from(locate);
    d.order_id = order;
    d.exchange_ts_ns = ts;
    d
}

fn trade(locate: u16, ts: u64, s: u8, p: u32, qty: u64, match_id: u64) -> Trade {
    let mut t = Trade::new();
    t.instrument_id = u32::from(locate);
    t.side = side(s);
    t.price = price(p);
    t.qty = qty;
    t.trade_id = match_id;
    t.exchange_ts_ns = ts;
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::itch::{frames, ItchHeader};
    use crate::synth::{write_itch, DayConfig};

    #[test]
    fn a_generated_day_normalises_to_events_that_rebuild_the_same_tops() {
        let mut day = Vec::new();
        write_itch(DayConfig::new(3, 5, 20_000), &mut day).unwrap();
        let mut n = Normalizer::new();
        let (mut adds, mut execs, mut quotes, mut other) = (0, 0, 0, 0);
        let mut last_quote = std::collections::HashMap::new();
        for r in frames(&day) {
            let r = r.unwrap();
            n.apply(&r.message, &mut |m| match m {
                Md::Add(a) => {
                    assert!(a.qty > 0 && a.price > 0 && a.side != 0, "{a:?}");
                    adds += 1
                }
                Md::Execute(e) => {
                    assert!(e.price > 0, "an execution of a known order carries its price: {e:?}");
                    execs += 1
                }
                Md::Quote(q) => {
                    last_quote.insert(q.instrument_id, q);
                    quotes += 1
                }
                _ => other += 1,
            });
        }
        assert!(adds > 1000 && execs > 100 && quotes > 1000 && other > 100, "{adds} {execs} {quotes} {other}");
        for (locate, q) in last_quote {
            let bid = n.book().best(locate as u16, BookSide::Bid).map_or(0, |l| price(l.price));
            assert_eq!(q.bid_px, bid, "the last quote is the book's top");
        }
    }

    #[test]
    fn messages_without_a_market_data_meaning_produce_nothing() {
        let mut n = Normalizer::new();
        let mut bytes = vec![0u8; 12];
        bytes[..11].copy_from_slice(ItchHeader::new(b'S', 0, 0, 5).as_bytes());
        bytes[11] = b'O';
        let msg = crate::itch::parse(&bytes, 0).unwrap();
        n.apply(&msg, &mut |m| panic!("{m:?}"));
    }
}
