//! A venue's whole-book service is another host's bytes: a glimpse loader must take any of them
//! without a panic, and either load one whole book or leave none. The first byte picks the
//! input: raw bytes as sent, or a real glimpse (a generated day's book after some messages)
//! damaged where the rest of the input says (bytes changed, cut short, chunks dropped or
//! repeated, bytes appended), which reaches deeper than random bytes ever would. The second byte sets the limit
//! on orders, below and above the largest glimpse's; the loading book is made small, so a
//! glimpse larger than its room makes it grow, as a feed's spare book may. The first byte
//! also picks the session the loading feed follows: none, the glimpses' own, or another.
//!
//! Properties: an undamaged glimpse loads, to the book it was made from and its session and
//! sequence, unless the feed follows another session (then it is refused as of another); on
//! `Err` the book is empty and well formed (books are reused: the same two serve every run); on
//! `Ok` the book is well formed (its queues, levels and counts agree; its prices may cross, as
//! a venue's may before the open), holds no more orders than the limit, and goes over again
//! (encode, decode) to the same book and sequence.
#![no_main]
use std::cell::RefCell;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tickbus::feed::glimpse::{decode, encode, Glimpse, GlimpseError, HEADER_LEN};
use tickbus_codecs::book::OrderBook;
use tickbus_codecs::itch::frames;
use tickbus_codecs::md::SnapshotOrders;
use tickbus_codecs::synth::{write_itch, DayConfig};
use tickbus_codecs::Message;

/// A real glimpse: its bytes, the sequence it goes on from, and its book's digest and orders.
struct Real {
    bytes: Vec<u8>,
    next: u64,
    digest: u64,
    orders: usize,
}

/// The glimpses' session, and another one character apart.
const SESSION: &[u8; 10] = b"000000001A";
const OTHER_SESSION: &[u8; 10] = b"000000001B";

/// Real glimpses of one generated day after 0, 50, 400, 1,500 and 3,000 messages.
fn glimpses() -> &'static [Real] {
    static G: OnceLock<Vec<Real>> = OnceLock::new();
    G.get_or_init(|| {
        let mut day = Vec::new();
        write_itch(DayConfig::new(3, 5, 4_000), &mut day).unwrap();
        let msgs: Vec<_> = frames(&day).map(|f| f.unwrap()).collect();
        [0usize, 50, 400, 1_500, 3_000]
            .iter()
            .map(|&n| {
                let mut book = OrderBook::with_capacity(1 << 12, 64);
                for f in msgs.iter().take(n) {
                    let _ = book.apply(&f.message);
                }
                let mut bytes = Vec::new();
                encode(&book, SESSION, n as u64 + 1, &mut bytes);
                Real { bytes, next: n as u64 + 1, digest: book.digest(), orders: book.resting_orders() }
            })
            .collect()
    })
}

/// A real glimpse damaged as `ops` says: each op is 4 bytes (kind, where: 2 bytes, value).
/// Chunks are dropped and repeated behind the header.
fn damaged(g: &Real, ops: &[u8]) -> Vec<u8> {
    let mut g = g.bytes.clone();
    let chunk = SnapshotOrders::LEN;
    for op in ops.chunks_exact(4) {
        let h = HEADER_LEN.min(g.len());
        let at = u16::from_le_bytes([op[1], op[2]]) as usize;
        match op[0] % 5 {
            0 if !g.is_empty() => {
                let i = at % g.len();
                g[i] ^= op[3] | 1;
            }
            1 => g.truncate(at.min(g.len())),
            2 if g.len() - h >= chunk => {
                let c = h + (at % ((g.len() - h) / chunk)) * chunk;
                g.drain(c..c + chunk);
            }
            3 if g.len() - h >= chunk => {
                let c = h + (at % ((g.len() - h) / chunk)) * chunk;
                let copy = g[c..c + chunk].to_vec();
                let to = h + (op[3] as usize % ((g.len() - h) / chunk + 1)) * chunk;
                g.splice(to..to, copy);
            }
            _ => g.extend_from_slice(&ops[..ops.len().min(op[3] as usize)]),
        }
    }
    g
}

thread_local! {
    /// The loading book, reused across runs as a feed reuses its spare books; small, so big
    /// glimpses make it grow.
    static BOOK: RefCell<OrderBook> = RefCell::new(OrderBook::with_capacity(64, 8));
    static OTHER: RefCell<OrderBook> = RefCell::new(OrderBook::with_capacity(64, 8));
    static EMPTY: u64 = OrderBook::with_capacity(1, 1).digest();
}

fuzz_target!(|data: &[u8]| {
    let [first, second, rest @ ..] = data else { return };
    // From 1 order to 2,041: below and above the largest glimpse's order count.
    let limit = 1 + u64::from(*second) * 8;
    let real = &glimpses()[usize::from(first >> 3) % glimpses().len()];
    let follows = match (first >> 1) & 3 {
        0 => None,
        3 => Some(OTHER_SESSION),
        _ => Some(SESSION),
    };
    let (bytes, whole) = match first & 1 {
        0 => (rest.to_vec(), false),
        _ => {
            let d = damaged(real, rest);
            let whole = d == real.bytes;
            (d, whole)
        }
    };
    BOOK.with_borrow_mut(|book| match decode(&bytes, book, limit, follows) {
        Err(e) => {
            if whole && follows == Some(OTHER_SESSION) {
                assert!(matches!(e, GlimpseError::OtherSession { .. }), "an undamaged glimpse of another session: {e}");
            } else {
                assert!(
                    !(whole && real.orders as u64 <= limit),
                    "an undamaged glimpse of {} orders within the limit {limit} was refused: {e}",
                    real.orders
                );
            }
            assert_eq!(book.resting_orders(), 0, "a refused glimpse left orders in the book");
            book.check_structure().unwrap_or_else(|e| panic!("a refused glimpse left a broken book: {e}"));
            assert_eq!(book.digest(), EMPTY.with(|e| *e), "a refused glimpse left something in the book");
        }
        Ok(g) => {
            if let Some(want) = follows {
                assert_eq!(&g.session, want, "a glimpse of another session was loaded");
            }
            if whole {
                assert_eq!(
                    (g, book.digest()),
                    (Glimpse { session: *SESSION, next: real.next }, real.digest),
                    "an undamaged glimpse loaded wrong"
                );
            }
            // Prices are the venue's word (its book may be crossed before the open): the
            // structure is the loader's.
            book.check_structure().unwrap_or_else(|e| panic!("a loaded glimpse breaks the book: {e}"));
            assert!(book.resting_orders() as u64 <= limit, "{} orders over the limit {limit}", book.resting_orders());
            let mut again = Vec::new();
            encode(book, &g.session, g.next, &mut again);
            OTHER.with_borrow_mut(|other| {
                let g2 = decode(&again, other, limit, Some(&g.session))
                    .unwrap_or_else(|e| panic!("a loaded book re-encoded does not load: {e}"));
                assert_eq!(g2, g);
                assert_eq!(other.digest(), book.digest());
                assert_eq!(other.resting_orders(), book.resting_orders());
            });
        }
    });
});
