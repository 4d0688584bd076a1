//! A venue's whole-book service is another host's bytes: a glimpse loader must take any of them
//! without a panic, and either load one whole book or leave none. The first byte picks the
//! input: raw bytes as sent, or a real glimpse (a generated day's book after some messages)
//! damaged where the rest of the input says (bytes changed, cut short, chunks dropped or
//! repeated), which reaches deeper than random bytes ever would.
//!
//! Properties: on `Err` the book is empty; on `Ok` the book is well formed (its queues, levels
//! and counts agree; its prices may cross, as a venue's may before the open), holds
//! no more orders than the limit, and goes over again (encode, decode) to the same book and
//! sequence.
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tickbus::feed::glimpse::{decode, encode};
use tickbus_codecs::book::OrderBook;
use tickbus_codecs::itch::frames;
use tickbus_codecs::md::SnapshotOrders;
use tickbus_codecs::synth::{write_itch, DayConfig};
use tickbus_codecs::Message;

/// Orders one glimpse may carry here: small, so the fuzzer's books stay small.
const LIMIT: u64 = 4_096;

/// Real glimpses of one generated day after 0, 50, 400, 1,500 and 3,000 messages.
fn glimpses() -> &'static [Vec<u8>] {
    static G: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
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
                let mut out = Vec::new();
                encode(&book, n as u64 + 1, &mut out);
                out
            })
            .collect()
    })
}

/// A real glimpse damaged as `ops` says: each op is 4 bytes (kind, where: 2 bytes, value).
fn damaged(pick: u8, ops: &[u8]) -> Vec<u8> {
    let mut g = glimpses()[pick as usize % glimpses().len()].clone();
    let chunk = SnapshotOrders::LEN;
    for op in ops.chunks_exact(4) {
        let at = u16::from_le_bytes([op[1], op[2]]) as usize;
        match op[0] % 5 {
            0 if !g.is_empty() => {
                let i = at % g.len();
                g[i] ^= op[3] | 1;
            }
            1 => g.truncate(at.min(g.len())),
            2 if g.len() >= chunk => {
                let c = (at % (g.len() / chunk)) * chunk;
                g.drain(c..c + chunk);
            }
            3 if g.len() >= chunk => {
                let c = (at % (g.len() / chunk)) * chunk;
                let copy = g[c..c + chunk].to_vec();
                let to = (op[3] as usize % (g.len() / chunk + 1)) * chunk;
                g.splice(to..to, copy);
            }
            _ => g.extend_from_slice(&ops[..ops.len().min(op[3] as usize)]),
        }
    }
    g
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let bytes = if first & 1 == 0 { rest.to_vec() } else { damaged(first >> 1, rest) };
    let mut book = OrderBook::with_capacity(1 << 12, 64);
    match decode(&bytes, &mut book, LIMIT) {
        Err(_) => assert_eq!(book.resting_orders(), 0, "a refused glimpse left orders in the book"),
        Ok(next) => {
            // Prices are the venue's word (its book may be crossed before the open): the
            // structure is the loader's.
            book.check_structure().unwrap_or_else(|e| panic!("a loaded glimpse breaks the book: {e}"));
            assert!(book.resting_orders() as u64 <= LIMIT);
            let mut again = Vec::new();
            encode(&book, next, &mut again);
            let mut other = OrderBook::with_capacity(1 << 12, 64);
            let next2 = decode(&again, &mut other, LIMIT)
                .unwrap_or_else(|e| panic!("a loaded book re-encoded does not load: {e}"));
            assert_eq!(next2, next);
            assert_eq!(other.digest(), book.digest());
            assert_eq!(other.resting_orders(), book.resting_orders());
        }
    }
});
