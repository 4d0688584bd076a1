//! Any ITCH bytes applied to a book: errors are fine, a broken invariant or a panic is not, and
//! whatever book they built must snapshot and load back to itself (an order the book took but a
//! snapshot's loader refuses, as an order of 0 shares once was, makes every snapshot unloadable).
#![no_main]
use libfuzzer_sys::fuzz_target;
use tickbus_codecs::book::{OrderBook, SnapshotLoader, Step};
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
    let (mut copy, mut loader, mut last) = (OrderBook::with_capacity(64, 4), SnapshotLoader::new(), Step::Waiting);
    for chunk in book.snapshot_chunks(1, 0, 0) {
        last = loader.offer(&mut copy, &chunk).unwrap_or_else(|e| panic!("the book's own snapshot is refused: {e}"));
    }
    assert!(matches!(last, Step::Complete(_)), "the book's snapshot did not complete: {last:?}");
    assert_eq!(copy.digest(), book.digest(), "the loaded book differs from the one snapshotted");
});
