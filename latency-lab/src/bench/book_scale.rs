//! The order book at TotalView scale: a generated day over ~8,000 instruments whose book builds
//! up to over a million live orders, applied message by message by tickbus's `OrderBook` and by
//! a floor (the bare lookup and level update any book must do, in the simplest correct
//! structure) in alternating rounds, each message timed between fenced TSC reads (see `harness::fenced`).
//!
//! Both structures reserve room for the peak and touch it before the first round (no growth,
//! no page fault while timed); between rounds they are cleared, keeping their memory. After
//! every pass the two must agree on the orders and shares resting, or the run fails.
use std::collections::BTreeMap;
use std::error::Error;
use std::hint::black_box;
use std::time::Instant;

use hdrhistogram::Histogram;
use rustc_hash::FxHashMap;
use tickbus::time::{Tsc, TscScale};
use tickbus_codecs::book::{OrderBook, RefTable, Side};
use tickbus_codecs::itch::{frames, ItchMessage};
use tickbus_codecs::synth::{write_itch, DayConfig};

use crate::bench::harness::fenced;
use crate::model::book::{ApplyCost, BookRound, BookScale, TypeCost};

/// What the floor does per message, for the report.
const FLOOR_IS: &str =
    "one lookup of the order by reference in the book's own order table (direct-mapped by reference, \
                        spilling to a hash map) and one FxHashMap update of its price level's shares and order count \
                        (no queue order, no sorted levels, no best price)";

/// An order as the floor keeps it: its level's key and its shares.
#[derive(Clone, Copy, zerocopy::FromZeros)]
struct FloorOrder {
    level: u64,
    shares: u32,
}

#[derive(Clone, Copy, Default)]
struct FloorLevel {
    shares: u64,
    orders: u32,
}

/// The floor: what a book must do per message and nothing more. Its orders are in the book's
/// own order table: with a hash map there, the book (which does more per message) beat the
/// floor at the mean and at p99.9, which made it a broken floor.
struct Floor {
    orders: RefTable<FloorOrder>,
    levels: FxHashMap<u64, FloorLevel>,
}

/// A level's key: stock, side and price in one word.
fn level_key(locate: u16, side: u8, price: u32) -> u64 {
    (u64::from(locate) << 33) | (u64::from(side == b'S') << 32) | u64::from(price)
}

impl Floor {
    fn with_capacity(orders: usize, levels: usize) -> Floor {
        let mut f = Floor { orders: RefTable::with_capacity(orders), levels: FxHashMap::default() };
        f.levels.reserve(levels);
        f
    }

    /// Writes every page the tables reserved (as `OrderBook::pre_touch` does), then empties the
    /// level map (call it on an empty floor).
    fn pre_touch(&mut self) {
        self.orders.pre_touch();
        let l = self.levels.capacity() as u64;
        for k in 1..=l {
            self.levels.insert(k.wrapping_mul(0x9e37_79b9_7f4a_7c15), FloorLevel::default());
        }
        self.levels.clear();
    }

    fn add(&mut self, reference: u64, level: u64, shares: u32) -> Result<(), String> {
        if self.orders.insert(reference, FloorOrder { level, shares }).is_some() {
            return Err(format!("floor: order {reference} added twice"));
        }
        let l = self.levels.entry(level).or_default();
        l.shares += u64::from(shares);
        l.orders += 1;
        Ok(())
    }

    /// Takes `n` shares from an order (an execution or a cancel); a order left with none goes.
    fn take(&mut self, reference: u64, n: u32) -> Result<(), String> {
        let o = self.orders.get_mut(&reference).ok_or_else(|| format!("floor: no order {reference}"))?;
        o.shares = o.shares.checked_sub(n).ok_or_else(|| format!("floor: order {reference} overfilled"))?;
        let (level, gone) = (o.level, o.shares == 0);
        if gone {
            self.orders.remove(&reference);
        }
        self.level_less(level, n, gone)
    }

    fn delete(&mut self, reference: u64) -> Result<FloorOrder, String> {
        let o = self.orders.remove(&reference).ok_or_else(|| format!("floor: no order {reference}"))?;
        self.level_less(o.level, o.shares, true)?;
        Ok(o)
    }

    fn level_less(&mut self, key: u64, shares: u32, order_gone: bool) -> Result<(), String> {
        let l = self.levels.get_mut(&key).ok_or_else(|| format!("floor: no level {key:#x}"))?;
        l.shares -= u64::from(shares);
        l.orders -= u32::from(order_gone);
        if l.orders == 0 {
            self.levels.remove(&key);
        }
        Ok(())
    }

    fn apply(&mut self, m: &ItchMessage<'_>) -> Result<(), String> {
        let locate = m.header().stock_locate.get();
        match m {
            ItchMessage::AddOrder(a) => {
                self.add(a.order_reference_number.get(), level_key(locate, a.side, a.price.get()), a.shares.get())
            }
            ItchMessage::AddOrderMpid(a) => {
                self.add(a.order_reference_number.get(), level_key(locate, a.side, a.price.get()), a.shares.get())
            }
            ItchMessage::OrderExecuted(e) => self.take(e.order_reference_number.get(), e.executed_shares.get()),
            ItchMessage::OrderExecutedWithPrice(e) => {
                self.take(e.order_reference_number.get(), e.executed_shares.get())
            }
            ItchMessage::OrderCancel(c) => self.take(c.order_reference_number.get(), c.cancelled_shares.get()),
            ItchMessage::OrderDelete(d) => self.delete(d.order_reference_number.get()).map(|_| ()),
            ItchMessage::OrderReplace(u) => {
                let old = self.delete(u.original_order_reference_number.get())?;
                let level = (old.level & !0xffff_ffff) | u64::from(u.price.get());
                self.add(u.new_order_reference_number.get(), level, u.shares.get())
            }
            _ => Ok(()),
        }
    }

    fn clear(&mut self) {
        self.orders.clear();
        self.levels.clear();
    }

    fn resting_shares(&self) -> u64 {
        self.levels.values().map(|l| l.shares).sum()
    }
}

/// Resident memory of this process, in bytes (VmRSS in /proc/self/status, in kB whatever the
/// page size).
fn resident_bytes() -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| format!("/proc/self/status: {e}"))?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or("/proc/self/status: no VmRSS line")?;
    Ok(kb * 1024)
}

/// Every price level of the book against the floor's: the same shares and order count at every
/// (stock, side, price), and no level in one that the other lacks.
fn same_levels(book: &OrderBook, floor: &Floor, stocks: usize) -> Result<(), String> {
    let mut levels = 0usize;
    for locate in 0..=stocks {
        let Some(s) = book.stock(locate as u16) else { continue };
        for (side, byte) in [(Side::Bid, b'B'), (Side::Ask, b'S')] {
            for l in s.side(side).as_slice() {
                levels += 1;
                let f = floor.levels.get(&level_key(locate as u16, byte, l.price)).copied().unwrap_or_default();
                if (f.shares, f.orders) != (l.shares, l.orders) {
                    return Err(format!(
                        "locate {locate} {side:?} {}: the book has {} shares in {} orders, the floor {} in {}",
                        l.price, l.shares, l.orders, f.shares, f.orders
                    ));
                }
            }
        }
    }
    if levels != floor.levels.len() {
        return Err(format!("the book has {levels} price levels, the floor {}", floor.levels.len()));
    }
    Ok(())
}

/// Per-message samples by ITCH message type (recorded outside the timed window).
pub(crate) type ByType = BTreeMap<u8, Histogram<u64>>;

/// One timed pass of the day through `apply` (each sample also by message type, if asked):
/// its cost and how many messages it applied. (The ITCH part's book row times its pass with it
/// too.)
pub(crate) fn pass(
    bytes: &[u8],
    tsc: &Tsc,
    scale: TscScale,
    mut by_type: Option<&mut ByType>,
    mut apply: impl FnMut(&ItchMessage<'_>) -> Result<(), String>,
) -> Result<(ApplyCost, u64), Box<dyn Error>> {
    let mut h = Histogram::<u64>::new_with_bounds(1, 1_000_000_000, 3)?;
    let mut k = 0u64;
    let start = Instant::now();
    for rec in frames(bytes) {
        let m = rec?.message;
        let t0 = fenced::now(tsc);
        let r = black_box(apply(&m));
        let t1 = fenced::now(tsc);
        r.map_err(|e| format!("message {k}: {e}"))?;
        let ns = scale.delta_ns(t0, t1).max(1);
        h.saturating_record(ns);
        if let Some(t) = by_type.as_deref_mut() {
            match t.get_mut(&m.code()) {
                Some(h) => h.saturating_record(ns),
                None => {
                    let mut h = Histogram::<u64>::new_with_bounds(1, 1_000_000_000, 3)?;
                    h.saturating_record(ns);
                    t.insert(m.code(), h);
                }
            }
        }
        k += 1;
    }
    let whole = start.elapsed().as_secs_f64();
    let cost = ApplyCost {
        p50_ns: h.value_at_quantile(0.5),
        p99_ns: h.value_at_quantile(0.99),
        p999_ns: h.value_at_quantile(0.999),
        max_ns: h.max(),
        mean_ns: whole * 1e9 / k.max(1) as f64,
    };
    Ok((cost, k))
}

/// The day, the rounds and the verdict. `core`: where the passes run.
pub fn run(cfg: DayConfig, rounds: u32, core: usize, ticks_per_ns: f64) -> Result<BookScale, Box<dyn Error>> {
    if rounds == 0 {
        return Err("--book-rounds 0: the book benchmark needs at least one round (three or more for a spread)".into());
    }
    let mut bytes = Vec::new();
    let messages = write_itch(cfg, &mut bytes)?;
    let reserve = (cfg.peak_orders + cfg.peak_orders / 4).max(1 << 16) as usize;
    std::thread::scope(|s| {
        s.spawn(|| -> Result<BookScale, String> {
            crate::bench::harness::pin(core).map_err(|e| format!("pinning the book bench to core {core}: {e}"))?;
            rounds_on(&bytes, cfg, messages, reserve, rounds, ticks_per_ns).map_err(|e| e.to_string())
        })
        .join()
        .map_err(|_| "the book bench panicked".to_string())?
    })
    .map_err(Into::into)
}

fn rounds_on(
    bytes: &[u8],
    cfg: DayConfig,
    messages: u64,
    reserve: usize,
    rounds: u32,
    ticks_per_ns: f64,
) -> Result<BookScale, Box<dyn Error>> {
    let tsc = Tsc::new();
    let scale = TscScale { ticks_per_ns };
    let timer_ns = fenced::pair_ns(&tsc, scale)?;
    let stocks = usize::from(cfg.stocks);
    let r0 = resident_bytes()?;
    let mut book = OrderBook::with_capacity(reserve, stocks);
    book.pre_touch();
    let r1 = resident_bytes()?;
    // Levels: a few dozen prices a side per stock at most in a generated day (the book
    // reserves 128 a side per stock).
    let mut floor = Floor::with_capacity(reserve, stocks * 2 * 64);
    floor.pre_touch();
    let r2 = resident_bytes()?;

    // The peak, untimed, and a warm-up for the rounds: one pass of the book alone, counting;
    // then the floor's, and every level of the two compared.
    let (mut peak, mut close, mut spilled) = (0usize, 0usize, 0usize);
    for rec in frames(bytes) {
        book.apply(&rec?.message)?;
        peak = peak.max(book.resting_orders());
        spilled = spilled.max(book.spilled_orders());
    }
    close = close.max(book.resting_orders());
    book.check_invariants()?;
    for rec in frames(bytes) {
        floor.apply(&rec?.message)?;
    }
    same_levels(&book, &floor, stocks)?;
    if (peak as u64) < cfg.peak_orders - cfg.peak_orders / 20 {
        return Err(format!(
            "the day peaked at {peak} live orders, under the {} asked: --book-messages is too few to build the book up (about 1.9 per order)",
            cfg.peak_orders
        )
        .into());
    }

    let mut out = Vec::new();
    for round in 0..rounds {
        let book_first = round % 2 == 0;
        let (mut b, mut f) = (None, None);
        for which in [book_first, !book_first] {
            if which {
                book.clear();
                b = Some(pass(bytes, &tsc, scale, None, |m| book.apply(m).map(|_| ()).map_err(|e| e.to_string()))?.0);
            } else {
                floor.clear();
                f = Some(pass(bytes, &tsc, scale, None, |m| floor.apply(m))?.0);
            }
        }
        // The two agree on what rests.
        let t = book.totals();
        let book_shares = t.added - t.executed - t.cancelled - t.deleted - t.replaced;
        if book.resting_orders() != floor.orders.len() || book_shares != floor.resting_shares() {
            return Err(format!(
                "round {round}: the book rests {} orders ({book_shares} shares), the floor {} ({} shares)",
                book.resting_orders(),
                floor.orders.len(),
                floor.resting_shares()
            )
            .into());
        }
        out.push(BookRound { book_first, book: b.unwrap_or_default(), floor: f.unwrap_or_default(), noisy: false });
    }
    // What stands between the book and its floor, message type by message type: one more pass
    // of each, outside the rounds (sorting samples by type between messages disturbs the cache
    // the rounds are judged on).
    let (mut book_types, mut floor_types) = (ByType::new(), ByType::new());
    book.clear();
    pass(bytes, &tsc, scale, Some(&mut book_types), |m| book.apply(m).map(|_| ()).map_err(|e| e.to_string()))?;
    floor.clear();
    pass(bytes, &tsc, scale, Some(&mut floor_types), |m| floor.apply(m))?;
    let by_type = book_types
        .iter()
        .filter_map(|(code, b)| {
            let f = floor_types.get(code)?;
            Some(TypeCost {
                code: char::from(*code).to_string(),
                messages: b.len(),
                book_p50_ns: b.value_at_quantile(0.5),
                book_p99_ns: b.value_at_quantile(0.99),
                floor_p50_ns: f.value_at_quantile(0.5),
                floor_p99_ns: f.value_at_quantile(0.99),
            })
        })
        .filter(|t| t.messages * 100 >= messages) // types of at least 1% of the day
        .collect();
    let per_order = |bytes: u64| bytes as f64 / peak.max(1) as f64;
    let mut r = BookScale {
        seed: cfg.seed,
        stocks: cfg.stocks,
        messages,
        peak_orders: peak as u64,
        close_orders: close as u64,
        reserved_orders: reserve as u64,
        book_bytes_per_order: per_order(r1.saturating_sub(r0)),
        most_spilled: Some(spilled as u64),
        floor_bytes_per_order: per_order(r2.saturating_sub(r1)),
        timer_ns,
        fenced: Some(fenced::FENCED),
        floor_is: FLOOR_IS.into(),
        rounds: out,
        by_type,
        ..BookScale::default()
    };
    r.judge();
    if peak >= reserve {
        return Err(
            format!("the day peaked at {peak} live orders, over the {reserve} reserved: raise the reserve").into()
        );
    }
    Ok(r)
}
