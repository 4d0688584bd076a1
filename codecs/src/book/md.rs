//! The L3 book kept from normalised market data ([`crate::md`]), as a trading app downstream of
//! `tickbus feed` sees it, instead of from raw ITCH.
//!
//! The normalised events carry what the book needs (instrument, side, price, remaining size), so
//! one book type serves both inputs; prices come back to ITCH's 4 decimals and sizes to u32, and
//! an event that does not fit (a price off that grid, a size beyond u32, an instrument beyond a
//! stock locate) is an error that leaves the book untouched, like any other misfit.
use super::{BookError, OrderBook, Side, Update};
use crate::any::AnyMessage;
use crate::enums::Side as WireSide;
use crate::PRICE_SCALE;

/// ITCH prices have 4 decimals; normalised ones [`PRICE_SCALE`] (8).
const ITCH_PRICE_STEP: i64 = PRICE_SCALE / 10_000;

impl OrderBook {
    /// Applies one normalised market-data message. Order events change the book and say what
    /// changed; quotes, trades, snapshots and gaps leave it as it is (`Ok(None)`; a gap means the
    /// book may be wrong from here on, which is the caller's call).
    #[inline]
    pub fn apply_md(&mut self, msg: &AnyMessage<'_>) -> Result<Option<Update>, BookError> {
        match msg {
            AnyMessage::OrderAdd(m) => {
                let side = match WireSide::from_wire(m.side) {
                    Some(WireSide::Buy) => b'B',
                    Some(WireSide::Sell) => b'S',
                    None => return Err(BookError::BadSide { reference: m.order_id, side: m.side }),
                };
                let locate = locate(m.instrument_id, m.order_id)?;
                let (price, shares) = (itch_price(m.price, m.order_id)?, shares(m.qty, m.order_id)?);
                self.add(locate, m.order_id, side, shares, price).map(Some)
            }
            AnyMessage::OrderExecute(m) => {
                self.touch_instrument(m.instrument_id);
                self.take(b'E', m.order_id, shares(m.exec_qty, m.order_id)?).map(Some)
            }
            AnyMessage::OrderDelete(m) => {
                self.touch_instrument(m.instrument_id);
                self.delete(m.order_id).map(Some)
            }
            AnyMessage::OrderModify(m) => {
                self.touch_instrument(m.instrument_id);
                let o = *self
                    .orders
                    .get(&m.order_id)
                    .ok_or(BookError::UnknownOrder { code: b'M', reference: m.order_id })?;
                let left = shares(m.new_qty, m.order_id)?;
                if left == 0 {
                    // Nothing left, at whatever price: the order leaves, as a full cancel.
                    return self.take(b'X', m.order_id, o.shares).map(Some);
                }
                let price = itch_price(m.new_price, m.order_id)?;
                if price == o.price && left <= o.shares {
                    // A partial cancel: the order keeps its place in the queue.
                    return self.take(b'X', m.order_id, o.shares - left).map(Some);
                }
                // A new price or more shares: the order goes to the back of its new level.
                let before = self.top(o.locate, o.side);
                self.totals.replaced += u64::from(o.shares);
                self.unlink(m.order_id, &o, o.shares);
                let u = self.add(o.locate, m.order_id, o.side.itch(), left, price)?;
                Ok(Some(Update { top_changed: before != self.top(o.locate, o.side), ..u }))
            }
            _ => Ok(None),
        }
    }
}

impl OrderBook {
    /// [`OrderBook::touch`] for a normalised message's instrument (nothing for one that is not
    /// a locate: the order's own stock decides what changes).
    #[inline(always)]
    fn touch_instrument(&self, instrument: u32) {
        if let Ok(locate) = u16::try_from(instrument) {
            self.touch(locate);
        }
    }
}

pub(super) fn locate(instrument: u32, reference: u64) -> Result<u16, BookError> {
    u16::try_from(instrument).map_err(|_| BookError::OutOfRange {
        reference,
        what: "instrument id",
        value: instrument.into(),
    })
}

pub(super) fn itch_price(price: i64, reference: u64) -> Result<u32, BookError> {
    if price % ITCH_PRICE_STEP != 0 {
        return Err(BookError::OutOfRange { reference, what: "price (not on ITCH's 0.0001 grid)", value: price });
    }
    u32::try_from(price / ITCH_PRICE_STEP).map_err(|_| BookError::OutOfRange { reference, what: "price", value: price })
}

pub(super) fn shares(qty: u64, reference: u64) -> Result<u32, BookError> {
    u32::try_from(qty).map_err(|_| BookError::OutOfRange { reference, what: "size", value: qty as i64 })
}

impl Side {
    /// The book side an order on wire side `side` rests on.
    pub fn of_wire(side: WireSide) -> Side {
        match side {
            WireSide::Buy => Side::Bid,
            WireSide::Sell => Side::Ask,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::itch::frames;
    use crate::normalize::Normalizer;
    use crate::Message;

    /// A book kept from the normaliser's output matches the book kept from the ITCH it came
    /// from, message by message, on the third-party file (adds, executions, cancels, deletes and
    /// replaces all occur in it).
    #[test]
    fn a_book_from_normalised_data_matches_the_book_from_itch() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data/itch/ex20101224.TEST_ITCH_50");
        let itch = std::fs::read(path).unwrap();
        let (mut from_itch, mut from_md) =
            (OrderBook::with_capacity(1 << 14, 64), OrderBook::with_capacity(1 << 14, 64));
        let mut norm = Normalizer::new();
        let (mut events, mut tops) = (0u64, 0u64);
        for (i, r) in frames(&itch).enumerate() {
            let msg = crate::itch::parse(r.unwrap().message.as_bytes(), i as u64).unwrap();
            let want = from_itch.apply(&msg).ok().flatten();
            let mut got_top = false;
            norm.apply(&msg, &mut |m| {
                let bytes = m.as_bytes().to_vec();
                let any = crate::decode(&bytes).unwrap();
                if let Ok(Some(u)) = from_md.apply_md(&any) {
                    events += 1;
                    got_top |= u.top_changed;
                }
            });
            if let Some(w) = want {
                tops += u64::from(w.top_changed);
                // A replace arrives as a delete and an add, so the md book may see a transient
                // change the ITCH book does not; it never misses one.
                assert!(got_top || !w.top_changed, "message {i}: a top change was missed");
                let (b, a) = (Side::Bid, Side::Ask);
                assert_eq!(from_md.best(w.locate, b), from_itch.best(w.locate, b), "message {i}: best bid");
                assert_eq!(from_md.best(w.locate, a), from_itch.best(w.locate, a), "message {i}: best ask");
            }
        }
        assert_eq!(from_md.resting_orders(), from_itch.resting_orders());
        assert_eq!(from_md.resting_shares(), from_itch.resting_shares());
        // (The test file's books cross at times; both books must agree on that too.)
        assert_eq!(from_md.check_invariants(), from_itch.check_invariants());
        assert!(events > 5_000 && tops > 100, "{events} events, {tops} top changes");
    }

    /// Messages a real venue never sends but a damaged or forged one may: an add of no shares
    /// and a replace to no shares. The book from ITCH and the book from their normalised form
    /// agree after each, and both still snapshot and load.
    #[test]
    fn adds_and_replaces_of_no_shares_leave_both_books_equal_and_loadable() {
        use crate::itch::{AddOrder, ItchHeader, ItchMessage, OrderReplace};
        use zerocopy::big_endian::{U32, U64};
        let h = |code| ItchHeader::new(code, 3, 0, 1);
        let a = |r: u64, shares: u32, price: u32| AddOrder {
            header: h(b'A'),
            order_reference_number: U64::new(r),
            side: b'B',
            shares: U32::new(shares),
            stock: *b"ACME    ",
            price: U32::new(price),
        };
        let u = |old: u64, new: u64, shares: u32, price: u32| OrderReplace {
            header: h(b'U'),
            original_order_reference_number: U64::new(old),
            new_order_reference_number: U64::new(new),
            shares: U32::new(shares),
            price: U32::new(price),
        };
        let (a1, a2, a0) = (a(1, 100, 10_000), a(2, 50, 9_900), a(3, 0, 10_100));
        let (u0, u1) = (u(1, 4, 0, 10_200), u(2, 5, 70, 9_800));
        let msgs = [
            ItchMessage::AddOrder(&a1),
            ItchMessage::AddOrder(&a2),
            ItchMessage::AddOrder(&a0),
            ItchMessage::OrderReplace(&u0),
            ItchMessage::OrderReplace(&u1),
        ];
        let (mut from_itch, mut from_md) = (OrderBook::with_capacity(16, 4), OrderBook::with_capacity(16, 4));
        let mut norm = Normalizer::new();
        for (i, msg) in msgs.iter().enumerate() {
            let _ = from_itch.apply(msg);
            norm.apply(msg, &mut |m| {
                let bytes = m.as_bytes().to_vec();
                let _ = from_md.apply_md(&crate::decode(&bytes).unwrap());
            });
            assert_eq!(from_md.digest(), from_itch.digest(), "after message {i}");
            from_itch.check_invariants().unwrap();
        }
        assert_eq!(from_itch.resting_orders(), 1, "only order 5 rests");
        let mut m = crate::md::OrderModify::new();
        (m.instrument_id, m.order_id, m.new_price, m.new_qty) = (3, 5, 99 * PRICE_SCALE, 0);
        from_md.apply_md(&AnyMessage::OrderModify(&m)).expect("a modify to nothing at a new price is a cancel");
        assert_eq!(from_md.resting_orders(), 0);
        from_md.check_invariants().unwrap();
        for book in [&from_itch, &from_md] {
            let mut copy = OrderBook::with_capacity(16, 4);
            let mut l = super::super::SnapshotLoader::new();
            for c in book.snapshot_chunks(1, 0, 0) {
                l.offer(&mut copy, &c).expect("the book's snapshot loads");
            }
            assert_eq!(copy.digest(), book.digest());
        }
    }

    #[test]
    fn events_that_do_not_fit_are_refused_and_leave_the_book_alone() {
        let mut book = OrderBook::with_capacity(16, 4);
        let mut add = crate::md::OrderAdd::new();
        add.instrument_id = 3;
        add.side = WireSide::Buy as u8;
        add.order_id = 7;
        add.price = 12 * PRICE_SCALE;
        add.qty = 100;
        let mut off_grid = add;
        off_grid.price += 1;
        assert!(matches!(book.apply_md(&AnyMessage::OrderAdd(&off_grid)), Err(BookError::OutOfRange { .. })));
        let mut far = add;
        far.instrument_id = 70_000;
        assert!(matches!(book.apply_md(&AnyMessage::OrderAdd(&far)), Err(BookError::OutOfRange { .. })));
        let mut huge = add;
        huge.qty = u64::from(u32::MAX) + 1;
        assert!(matches!(book.apply_md(&AnyMessage::OrderAdd(&huge)), Err(BookError::OutOfRange { .. })));
        let mut sideless = add;
        sideless.side = 9;
        assert!(matches!(book.apply_md(&AnyMessage::OrderAdd(&sideless)), Err(BookError::BadSide { .. })));
        assert_eq!(book.resting_orders(), 0);
        assert!(book.apply_md(&AnyMessage::OrderAdd(&add)).unwrap().unwrap().top_changed);
        // A modify to more shares moves the order to the back; to fewer keeps it.
        let mut m = crate::md::OrderModify::new();
        m.instrument_id = 3;
        m.order_id = 7;
        m.new_price = add.price;
        m.new_qty = 60;
        book.apply_md(&AnyMessage::OrderModify(&m)).unwrap();
        assert_eq!(book.best(3, Side::Bid).map(|l| l.shares), Some(60));
        m.new_price = 13 * PRICE_SCALE;
        book.apply_md(&AnyMessage::OrderModify(&m)).unwrap();
        assert_eq!(book.best(3, Side::Bid).map(|l| (l.price, l.shares)), Some((130_000, 60)));
        book.check_invariants().unwrap();
    }
}
