//! Any ITCH bytes applied to a book: errors are fine, a broken invariant or a panic is not.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tickbus_codecs::book::OrderBook;
use tickbus_codecs::itch::frames;

fuzz_target!(|data: &[u8]| {
    let mut book = OrderBook::with_capacity(64, 4);
    for rec in frames(data) {
        let Ok(rec) = rec else { break };
        let _ = book.apply(&rec.message);
    }
    // Fuzzed adds may cross (the exchange never sends that); everything else must hold, in
    // every stock (the full check stops at the first crossed one).
    if let Err(e) = book.check_structure() {
        panic!("{e}");
    }
});
