//! ITCH decode throughput and order-book update cost on a generated trading day, beside the
//! `itchy` crate decoding the same bytes in the same run.
//!
//! Every decoder does the same work per message: take the type, locate and timestamp, and for
//! order messages the fields a book needs (reference, side, shares, price), folded into a
//! checksum the optimiser cannot drop. The checksums must agree, or the run fails.
use std::error::Error;
use std::hint::black_box;
use std::time::Instant;

use crate::model::itch::{BookResult, DecodeResult, ItchReport};
use tickbus::time::{Tsc, TscScale};
use tickbus_codecs::book::OrderBook;
use tickbus_codecs::itch::{frames, ItchFileReader, ItchMessage};
use tickbus_codecs::synth::{write_itch, DayConfig};

#[inline(always)]
fn fold(acc: u64, m: &ItchMessage<'_>) -> u64 {
    let h = m.header();
    let mut x = acc.rotate_left(5) ^ u64::from(h.msg_type) ^ (u64::from(h.stock_locate.get()) << 8) ^ h.timestamp_ns();
    x ^= match m {
        ItchMessage::AddOrder(a) => {
            a.order_reference_number.get() ^ u64::from(a.side) ^ u64::from(a.shares.get()) ^ u64::from(a.price.get())
        }
        ItchMessage::AddOrderMpid(a) => {
            a.order_reference_number.get() ^ u64::from(a.side) ^ u64::from(a.shares.get()) ^ u64::from(a.price.get())
        }
        ItchMessage::OrderExecuted(e) => e.order_reference_number.get() ^ u64::from(e.executed_shares.get()),
        ItchMessage::OrderExecutedWithPrice(e) => e.order_reference_number.get() ^ u64::from(e.executed_shares.get()),
        ItchMessage::OrderCancel(c) => c.order_reference_number.get() ^ u64::from(c.cancelled_shares.get()),
        ItchMessage::OrderDelete(d) => d.order_reference_number.get(),
        ItchMessage::OrderReplace(u) => {
            u.new_order_reference_number.get() ^ u64::from(u.shares.get()) ^ u64::from(u.price.get())
        }
        _ => 0,
    };
    x
}

fn fold_itchy(acc: u64, m: &itchy::Message) -> u64 {
    use itchy::{Body, Side};
    let mut x = acc.rotate_left(5) ^ u64::from(m.tag) ^ (u64::from(m.stock_locate) << 8) ^ m.timestamp;
    let side = |s: &Side| u64::from(if matches!(s, Side::Buy) { b'B' } else { b'S' });
    x ^= match &m.body {
        Body::AddOrder(a) => a.reference ^ side(&a.side) ^ u64::from(a.shares) ^ u64::from(a.price.raw()),
        Body::OrderExecuted { reference, executed, .. } => reference ^ u64::from(*executed),
        Body::OrderExecutedWithPrice { reference, executed, .. } => reference ^ u64::from(*executed),
        Body::OrderCancelled { reference, cancelled } => reference ^ u64::from(*cancelled),
        Body::DeleteOrder { reference } => *reference,
        Body::ReplaceOrder(r) => r.new_reference ^ u64::from(r.shares) ^ u64::from(r.price.raw()),
        _ => 0,
    };
    x
}

/// One timed pass of `f` (which returns (messages, checksum)), in seconds; `best` keeps the
/// fastest pass's (messages, checksum, seconds). Generic, so each pass is compiled into its own
/// copy of this, as `best` does.
fn timed(f: impl Fn() -> Result<(u64, u64), String>, best: &mut (u64, u64, f64)) -> Result<f64, String> {
    let t = Instant::now();
    let out = black_box(f()?);
    let secs = t.elapsed().as_secs_f64();
    *best = (out.0, out.1, best.2.min(secs));
    Ok(secs)
}

/// Best of `passes` timed passes of `f` (which returns (messages, checksum)).
fn best(passes: u32, mut f: impl FnMut() -> Result<(u64, u64), String>) -> Result<(u64, u64, f64), String> {
    let mut best = f64::MAX;
    let mut out = (0, 0);
    for _ in 0..passes {
        let t = Instant::now();
        out = black_box(f()?);
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok((out.0, out.1, best))
}

pub fn run(cfg: DayConfig, passes: u32, ticks_per_ns: f64) -> Result<ItchReport, Box<dyn Error>> {
    let mut bytes = Vec::new();
    let n = write_itch(cfg, &mut bytes)?;
    let bytes = black_box(bytes);
    let walk = best(passes, || {
        let mut acc = 0u64;
        let mut k = 0u64;
        for rec in frames(&bytes) {
            acc = fold(acc, &rec.map_err(|e| e.to_string())?.message);
            k += 1;
        }
        Ok((k, acc))
    })?;
    let stream = best(passes, || {
        let mut acc = 0u64;
        let k =
            ItchFileReader::new(&bytes[..]).for_each(|rec| acc = fold(acc, &rec.message)).map_err(|e| e.to_string())?;
        Ok((k, acc))
    })?;
    let pull_pass = &|| {
        let mut r = ItchFileReader::new(&bytes[..]);
        let (mut acc, mut k) = (0u64, 0u64);
        while let Some(rec) = r.next_record().map_err(|e| e.to_string())? {
            acc = fold(acc, &rec.message);
            k += 1;
        }
        Ok((k, acc))
    };
    let itchy_pass = &|| {
        let (mut acc, mut k) = (0u64, 0u64);
        for m in itchy::MessageStream::from_reader(&bytes[..]) {
            acc = fold_itchy(acc, &m.map_err(|e| format!("itchy: {e:?}"))?);
            k += 1;
        }
        Ok((k, acc))
    };
    // The verdict's pair: next_record and itchy back to back in each round, the order
    // alternating, so a slow phase of the machine lands on both; each's best round is its row.
    let (mut pull, mut itchy) = ((0, 0, f64::MAX), (0, 0, f64::MAX));
    let mut paired_ns = Vec::with_capacity(passes as usize);
    for round in 0..passes {
        let (p, i) = if round % 2 == 0 {
            let p = timed(pull_pass, &mut pull)?;
            (p, timed(itchy_pass, &mut itchy)?)
        } else {
            let i = timed(itchy_pass, &mut itchy)?;
            (timed(pull_pass, &mut pull)?, i)
        };
        paired_ns.push(((p * 1e9) as u64, (i * 1e9) as u64));
    }
    for (name, r) in [("zero-copy walk", walk), ("streaming reader", stream), ("next_record", pull), ("itchy", itchy)] {
        if (r.0, r.1) != (n, walk.1) {
            return Err(format!(
                "{name} decoded {} messages with checksum {:#x}; expected {n} and {:#x}",
                r.0, r.1, walk.1
            )
            .into());
        }
    }
    let result = |name: &str, r: (u64, u64, f64)| DecodeResult {
        name: name.into(),
        messages: r.0,
        seconds: r.2,
        msgs_per_s: r.0 as f64 / r.2,
        gb_per_s: bytes.len() as f64 / r.2 / 1e9,
        x_itchy: itchy.2 / r.2,
    };
    let decode = vec![
        result("tickbus-codecs zero-copy walk (in memory)", walk),
        result("tickbus-codecs ItchFileReader::for_each (streaming)", stream),
        result("tickbus-codecs ItchFileReader::next_record (streaming)", pull),
        result("itchy 0.3 MessageStream (streaming)", itchy),
    ];
    Ok(ItchReport {
        file_bytes: bytes.len(),
        messages: n,
        seed: cfg.seed,
        stocks: cfg.stocks,
        passes,
        decode,
        book: book_cost(&bytes, ticks_per_ns)?,
        paired_ns,
    })
}

/// Replays the day into a fresh book, timing every `apply` between fenced TSC reads
/// (`harness::fenced`).
fn book_cost(bytes: &[u8], ticks_per_ns: f64) -> Result<BookResult, Box<dyn Error>> {
    let tsc = Tsc::new();
    let scale = TscScale { ticks_per_ns };
    let timer_ns = crate::bench::harness::fenced::pair_ns(&tsc, scale)?;
    let mut book = OrderBook::with_capacity(1 << 16, 256);
    let apply = |m: &ItchMessage<'_>| book.apply(m).map(|_| ()).map_err(|e| e.to_string());
    let (c, k) = crate::bench::book_scale::pass(bytes, &tsc, scale, None, apply)?;
    book.check_invariants()?;
    Ok(BookResult {
        messages: k,
        mean_ns: c.mean_ns,
        p50_ns: c.p50_ns,
        p99_ns: c.p99_ns,
        p999_ns: c.p999_ns,
        max_ns: c.max_ns,
        timer_ns,
        fenced: Some(crate::bench::harness::fenced::FENCED),
        resting_orders_at_close: book.resting_orders(),
    })
}
