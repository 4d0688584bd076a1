//! Decoding an ITCH 5.0 feed into the L3 book: every message of a file (or, with no argument, a
//! synthetic day generated in memory) parsed zero-copy and applied to the order-by-order book,
//! then each stock's best bid and offer. (A MoldUDP64 feed off the network carries the same
//! messages: `tickbus feed` unpacks, arbitrates and normalises them.)
//!
//! Run: `cargo run --release -p tickbus --example itch_book [FILE.itch]`
use tickbus::codecs::book::{OrderBook, Side};
use tickbus::codecs::itch::frames;
use tickbus::codecs::synth::{write_itch, DayConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bytes = match std::env::args().nth(1) {
        Some(path) => std::fs::read(&path).map_err(|e| format!("reading {path}: {e}"))?,
        None => {
            let mut day = Vec::new();
            write_itch(DayConfig::new(7, 4, 50_000), &mut day)?;
            day
        }
    };
    let mut book = OrderBook::with_capacity(1 << 16, 64);
    let (mut messages, mut misfits, mut top_changes) = (0u64, 0u64, 0u64);
    for frame in frames(&bytes) {
        let msg = frame?.message; // parsed in place; a cut or malformed frame names its offset
        messages += 1;
        match book.apply(&msg) {
            Ok(Some(update)) => top_changes += u64::from(update.top_changed),
            Ok(None) => {}          // not an order event (directory, system events, ...)
            Err(_) => misfits += 1, // e.g. an order added before the file began
        }
    }
    println!(
        "{messages} messages, {} resting orders, {top_changes} top-of-book changes, {misfits} misfits",
        book.resting_orders()
    );
    // The first ten named stocks with a quote on either side.
    let mut shown = 0;
    for locate in 1..=u16::MAX {
        let Some(name) = book.name(locate) else { break }; // past the last stock named
        let px = |side| book.best(locate, side).map(|l| format!("{} x {:.4}", l.shares, l.price as f64 / 1e4));
        let (bid, ask) = (px(Side::Bid), px(Side::Ask));
        if bid.is_none() && ask.is_none() {
            continue;
        }
        let dash = || "-".to_owned();
        println!(
            "{:<8} bid {:<20} ask {}",
            String::from_utf8_lossy(name).trim(),
            bid.unwrap_or_else(dash),
            ask.unwrap_or_else(dash)
        );
        shown += 1;
        if shown == 10 {
            break;
        }
    }
    Ok(())
}
