//! A book's digest: one number that two books share only if they hold the same orders, in the
//! same queues, at the same levels. Stock names are left out: they come from ITCH's directory,
//! which normalised market data does not carry, and a book built from either must agree. How a late joiner proves its
//! book is the one a reader from the open built (`tickbus trader` prints it).
use super::{OrderBook, Side};

/// FNV-1a, 64-bit: stable across runs, builds and hosts (a std `Hasher` promises none of
/// that), and plenty for comparing two books (not a defence against a chosen collision).
struct Fnv(u64);

impl Fnv {
    fn word(&mut self, w: u64) {
        for b in w.to_le_bytes() {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

impl OrderBook {
    /// The digest of every stock's non-empty levels: each level's price, shares and order
    /// count, and each order in queue order (reference and shares). Independent of the
    /// capacity the book was made with. Walks the whole book: for tests and summaries, not the
    /// hot path.
    pub fn digest(&self) -> u64 {
        let mut h = Fnv(0xcbf2_9ce4_8422_2325);
        for (locate, book) in self.stocks.iter().enumerate() {
            if book.bids.is_empty() && book.asks.is_empty() {
                continue;
            }
            h.word(locate as u64);
            for side in [Side::Bid, Side::Ask] {
                h.word(side as u64 + 1);
                for l in book.side(side).as_slice() {
                    h.word(u64::from(l.price));
                    h.word(l.shares);
                    h.word(u64::from(l.orders));
                    let mut at = l.head;
                    // Bounded by the book's size: a broken queue link cannot loop forever.
                    for _ in 0..=self.orders.len() {
                        let Some(o) = self.orders.get(&at) else { break };
                        h.word(at);
                        h.word(u64::from(o.shares));
                        at = o.next;
                    }
                }
            }
        }
        h.word(self.orders.len() as u64);
        h.0
    }
}

#[cfg(test)]
mod tests {
    use crate::book::OrderBook;
    use crate::synth::{DayConfig, DayGenerator};

    /// A book built from the first `n` messages of one generated day.
    fn built(n: usize, orders: usize, stocks: usize) -> OrderBook {
        let mut b = OrderBook::with_capacity(orders, stocks);
        let mut g = DayGenerator::new(DayConfig::new(3, 6, 20_000));
        for _ in 0..n {
            let m = g.next_message().expect("a long enough day");
            let _ = b.apply(&crate::itch::parse(m, 0).expect("generated ITCH parses"));
        }
        b
    }

    #[test]
    fn the_same_day_gives_the_same_digest_whatever_the_capacity() {
        assert_eq!(built(5000, 1 << 10, 16).digest(), built(5000, 1 << 16, 4096).digest());
    }

    #[test]
    fn one_message_more_or_less_changes_the_digest() {
        let d = built(5000, 1 << 10, 16).digest();
        assert_ne!(d, built(4999, 1 << 10, 16).digest());
        assert_ne!(d, built(5001, 1 << 10, 16).digest());
    }
}
