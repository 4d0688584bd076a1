//! The venue's matching rule, with no bus in it: immediate-or-cancel limit orders against the
//! best bid and offer the market data last showed, each answered by exactly one report.
//!
//! - A buy at or above the best offer fills `min(qty, offer size)` at the offer; a sell at or
//!   below the best bid fills likewise at the bid. The rest is cancelled (IOC): the fill's
//!   `leaves_qty` says how much. The shares taken leave the venue's view of that level until the
//!   next quote restates it, so two orders cannot both take the same shares.
//! - An order that crosses nothing is accepted and expires unfilled: an `ExecAck`.
//! - An order that is not a valid IOC limit order (side, type, time in force, price, size), or
//!   names an instrument the venue has no quote for, is rejected with the reason.
use tickbus_codecs::exec::{ExecAck, ExecFill, ExecReject, RejectReason};
use tickbus_codecs::md::Quote;
use tickbus_codecs::orders::NewOrder;
use tickbus_codecs::{Message, OrdType, Side, TimeInForce};

/// Instruments the venue tracks (ITCH stock locates are u16).
const INSTRUMENTS: usize = 1 << 16;

#[derive(Debug, Clone, Copy, Default)]
struct Top {
    bid_px: i64,
    bid_qty: u64,
    ask_px: i64,
    ask_qty: u64,
    quoted: bool,
}

/// The one report an order gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    Fill(ExecFill),
    Expired(ExecAck),
    Reject(ExecReject),
}

pub struct Venue {
    tops: Vec<Top>,
    next_id: u64,
}

impl Venue {
    /// A venue with every instrument's slot allocated up front (no allocation when matching).
    pub fn new() -> Venue {
        Venue { tops: vec![Top::default(); INSTRUMENTS], next_id: 1 }
    }

    /// Numbers the next execution after `last` (a gateway restarted on a report ring that
    /// already holds ids up to `last`: ids stay unique across the restart).
    pub fn number_after(&mut self, last: u64) {
        self.next_id = self.next_id.max(last.saturating_add(1));
    }

    /// The market moved: the best bid and offer of one instrument.
    pub fn on_quote(&mut self, q: &Quote) {
        if let Some(t) = self.tops.get_mut(q.instrument_id as usize) {
            *t = Top { bid_px: q.bid_px, bid_qty: q.bid_qty, ask_px: q.ask_px, ask_qty: q.ask_qty, quoted: true };
        }
    }

    /// Matches one order; `exchange_ts_ns` stamps the report.
    pub fn match_order(&mut self, o: &NewOrder, exchange_ts_ns: u64) -> Report {
        let reject = |reason: RejectReason, text: &str| {
            let mut r = ExecReject::new();
            (r.client_order_id, r.instrument_id, r.reason, r.exchange_ts_ns) =
                (o.client_order_id, o.instrument_id, reason as u16, exchange_ts_ns);
            r.set_text(text);
            Report::Reject(r)
        };
        let Some(side) = o.side() else { return reject(RejectReason::Other, "unknown side") };
        if o.ord_type() != Some(OrdType::Limit) || o.time_in_force() != Some(TimeInForce::ImmediateOrCancel) {
            return reject(RejectReason::Other, "only IOC limit orders");
        }
        if o.price <= 0 {
            return reject(RejectReason::InvalidPrice, "price must be positive");
        }
        if o.qty == 0 {
            return reject(RejectReason::InvalidQty, "qty must be positive");
        }
        let Some(top) = self.tops.get_mut(o.instrument_id as usize).filter(|t| t.quoted) else {
            return reject(RejectReason::UnknownInstrument, "no quote for the instrument");
        };
        let id = self.next_id;
        self.next_id = self.next_id.saturating_add(1); // a damaged ring's last id cannot wrap ids to 0
        let (px, avail) = match side {
            Side::Buy if top.ask_qty > 0 && o.price >= top.ask_px => (top.ask_px, &mut top.ask_qty),
            Side::Sell if top.bid_qty > 0 && o.price <= top.bid_px => (top.bid_px, &mut top.bid_qty),
            _ => {
                let mut a = ExecAck::new();
                (a.client_order_id, a.exchange_order_id, a.instrument_id, a.exchange_ts_ns) =
                    (o.client_order_id, id, o.instrument_id, exchange_ts_ns);
                return Report::Expired(a);
            }
        };
        let qty = o.qty.min(*avail);
        *avail -= qty;
        let mut f = ExecFill::new();
        (f.client_order_id, f.exchange_order_id, f.instrument_id, f.side) =
            (o.client_order_id, id, o.instrument_id, side as u8);
        (f.fill_px, f.fill_qty, f.leaves_qty, f.exec_id, f.exchange_ts_ns) = (px, qty, o.qty - qty, id, exchange_ts_ns);
        Report::Fill(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickbus_codecs::Message;

    fn quote(bid: (i64, u64), ask: (i64, u64)) -> Quote {
        let mut q = Quote::new();
        q.instrument_id = 4;
        (q.bid_px, q.bid_qty, q.ask_px, q.ask_qty) = (bid.0, bid.1, ask.0, ask.1);
        q
    }

    fn order(side: Side, price: i64, qty: u64) -> NewOrder {
        let mut o = NewOrder::new();
        (o.client_order_id, o.instrument_id, o.side) = (9, 4, side as u8);
        (o.time_in_force, o.ord_type) = (TimeInForce::ImmediateOrCancel as u8, OrdType::Limit as u8);
        (o.price, o.qty) = (price, qty);
        o
    }

    /// Issue 25 review: a report ring read back at restart whose last execution id is u64::MAX
    /// (damaged) overflowed the numbering (a panic in a debug build, ids from 0 again in a
    /// release one).
    #[test]
    fn numbering_after_the_largest_id_does_not_overflow() {
        let mut v = Venue::new();
        v.number_after(u64::MAX);
        v.on_quote(&quote((99, 300), (101, 150)));
        let Report::Fill(f) = v.match_order(&order(Side::Buy, 101, 1), 0) else { panic!("fills") };
        let Report::Fill(g) = v.match_order(&order(Side::Buy, 101, 1), 0) else { panic!("fills") };
        assert!(f.exec_id == u64::MAX && g.exec_id == u64::MAX, "{} {}", f.exec_id, g.exec_id);
    }

    #[test]
    fn iocs_fill_against_the_touch_expire_or_are_rejected_with_one_report_each() {
        let mut v = Venue::new();
        assert!(
            matches!(v.match_order(&order(Side::Buy, 10, 100), 0), Report::Reject(r) if r.reason == RejectReason::UnknownInstrument as u16)
        );
        v.on_quote(&quote((99, 300), (101, 150)));
        let Report::Fill(f) = v.match_order(&order(Side::Buy, 101, 100), 7) else { panic!("a buy at the offer fills") };
        assert_eq!((f.fill_px, f.fill_qty, f.leaves_qty, f.client_order_id, f.exchange_ts_ns), (101, 100, 0, 9, 7));
        let Report::Fill(f) = v.match_order(&order(Side::Buy, 105, 100), 8) else { panic!("the rest of the offer") };
        assert_eq!((f.fill_qty, f.leaves_qty), (50, 50), "50 left at the offer; the rest cancelled");
        assert!(matches!(v.match_order(&order(Side::Buy, 105, 100), 9), Report::Expired(_)), "the offer is taken");
        assert!(matches!(v.match_order(&order(Side::Sell, 100, 100), 9), Report::Expired(_)), "below no bid");
        assert!(
            matches!(v.match_order(&order(Side::Sell, 99, 500), 9), Report::Fill(f) if f.fill_qty == 300 && f.fill_px == 99)
        );
        assert!(
            matches!(v.match_order(&order(Side::Sell, 0, 5), 9), Report::Reject(r) if r.reason == RejectReason::InvalidPrice as u16)
        );
        assert!(
            matches!(v.match_order(&order(Side::Sell, 5, 0), 9), Report::Reject(r) if r.reason == RejectReason::InvalidQty as u16)
        );
        let mut day = order(Side::Buy, 101, 1);
        day.time_in_force = TimeInForce::Day as u8;
        assert!(matches!(v.match_order(&day, 9), Report::Reject(r) if r.text() == Some("only IOC limit orders")));
        v.on_quote(&quote((99, 300), (101, 150)));
        assert!(
            matches!(v.match_order(&order(Side::Buy, 101, 1), 9), Report::Fill(_)),
            "a new quote restates the offer"
        );
    }
}
