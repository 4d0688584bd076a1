//! A deterministic, seeded generator of a realistic ITCH 5.0 trading day, for tests, fuzz seeds,
//! benchmarks and the tick-to-trade demo.
//!
//! Owns: the shape of a synthetic day. Never: reads a clock or the environment (the same seed and
//! config give the same bytes on every machine).
//!
//! The day: system events (`O`, `S`, `Q`, `M`, `E`, `C`), a stock directory and trading action
//! per stock, opening and closing crosses, then order flow across many stocks with Zipf
//! popularity: adds (some with MPID attribution) near the touch with geometric depth, deletes and
//! partial cancels biased to young orders, replaces, marketable orders that sweep the queue at
//! the best price (several executions with one timestamp), and non-displayed trades. Sizes are
//! mostly round lots with odd lots and a heavy tail of blocks. The generator keeps its own
//! [`OrderBook`] so every message it writes is consistent: no order is referenced after it
//! left, nothing is over-executed, and no book is ever crossed.
mod market;

pub use market::{listing, Clock, Stock, CLOSE_NS, OPEN_NS};

use std::collections::VecDeque;
use std::io::{self, Write};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Geometric, LogNormal, Zipf};
use zerocopy::big_endian::{U32, U64};
use zerocopy::IntoBytes;

use zerocopy::FromBytes;

use crate::book::{OrderBook, Side};
use crate::itch::*;
use crate::moldudp64::PacketBuilder;
use crate::pcap::{CaptureError, Endpoints, MoldPcapWriter};

/// What day to generate. Non-exhaustive so that later knobs (a session, a start time) are not
/// breaking changes: make one with [`DayConfig::new`] or [`Default`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DayConfig {
    /// The random seed: one seed, one day, byte for byte.
    pub seed: u64,
    /// Stocks listed in the directory.
    pub stocks: u16,
    /// Order-flow messages (the directory, system events and crosses come on top).
    pub messages: u64,
    /// Build the book up to this many resting orders before the flow settles (0: no build-up,
    /// the book stays near its equilibrium of a few thousand orders). A TotalView-scale day
    /// (about 8,000 instruments, over a million live orders at the peak) sets it; while
    /// building, most events are adds.
    pub peak_orders: u64,
}

impl DayConfig {
    /// A day of `messages` order-flow messages over `stocks` stocks, generated from `seed`.
    pub const fn new(seed: u64, stocks: u16, messages: u64) -> DayConfig {
        DayConfig { seed, stocks, messages, peak_orders: 0 }
    }

    /// This day, its book built up to `orders` resting orders first (see
    /// [`DayConfig::peak_orders`]).
    pub const fn with_peak_orders(self, orders: u64) -> DayConfig {
        DayConfig { peak_orders: orders, ..self }
    }
}

impl Default for DayConfig {
    fn default() -> DayConfig {
        DayConfig { seed: 1, stocks: 100, messages: 1_000_000, peak_orders: 0 }
    }
}

const TICK: u32 = 100;
const MPIDS: [[u8; 4]; 4] = [*b"NSDQ", *b"GSCO", *b"MSCO", *b"VIRT"];

/// Yields the day's messages one at a time as wire bytes.
pub struct DayGenerator {
    rng: ChaCha8Rng,
    stocks: Vec<Stock>,
    book: OrderBook,
    clock: Clock,
    zipf: Zipf<f64>,
    depth: Geometric,
    lots: Geometric,
    blocks: LogNormal<f64>,
    /// Per stock: references of orders added (some since gone; pruned lazily).
    live: Vec<Vec<u64>>,
    resting: Vec<u32>,
    pending: VecDeque<Vec<u8>>,
    flow_left: u64,
    /// Resting orders still to build up to (0 once reached, or with no build-up).
    build_to: u64,
    closed: bool,
    next_ref: u64,
    next_match: u64,
    current: Vec<u8>,
}

impl DayGenerator {
    /// A generator of the day `cfg` describes, at its first message.
    pub fn new(cfg: DayConfig) -> DayGenerator {
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let stocks = listing(&mut rng, cfg.stocks.max(1));
        let n = stocks.len();
        let mut g = DayGenerator {
            book: OrderBook::with_capacity(64 * 1024, n),
            clock: Clock::new(cfg.messages),
            zipf: Zipf::new(n as f64, 1.1).expect("n >= 1"),
            depth: Geometric::new(0.3).expect("p in (0,1]"),
            lots: Geometric::new(0.5).expect("p in (0,1]"),
            blocks: LogNormal::new(20f64.ln(), 0.8).expect("valid log-normal parameters"),
            live: vec![Vec::new(); n + 1],
            resting: vec![0; n + 1],
            pending: VecDeque::new(),
            flow_left: cfg.messages,
            build_to: cfg.peak_orders,
            closed: false,
            next_ref: 1,
            next_match: 1,
            current: Vec::with_capacity(64),
            stocks,
            rng,
        };
        g.prologue();
        g
    }

    /// The generator's book: the state of the market after the messages yielded so far.
    pub fn book(&self) -> &OrderBook {
        &self.book
    }

    /// The day's stocks, in locate order.
    pub fn stocks(&self) -> &[Stock] {
        &self.stocks
    }

    /// The next message's bytes, or None after the end-of-messages event.
    pub fn next_message(&mut self) -> Option<&[u8]> {
        // An event may yield no message (a sweep of an empty side); draw until one does.
        while self.pending.is_empty() && self.flow_left > 0 {
            self.flow_left -= 1;
            self.flow();
        }
        if self.pending.is_empty() && !self.closed {
            self.closed = true;
            self.epilogue();
        }
        self.current = self.pending.pop_front()?;
        Some(&self.current)
    }

    /// Queues a message after applying it to the generator's book.
    fn emit<T: IntoBytes + zerocopy::Immutable>(&mut self, m: &T) {
        let bytes = m.as_bytes().to_vec();
        let msg = parse(&bytes, 0).expect("the generator builds only valid messages");
        self.book.apply(&msg).expect("the generator keeps its book consistent");
        self.pending.push_back(bytes);
    }

    fn system(&mut self, code: u8, t: u64) {
        self.emit(&SystemEvent { header: ItchHeader::new(b'S', 0, 0, t), event_code: code });
    }

    fn prologue(&mut self) {
        let h = 3_600_000_000_000u64;
        self.system(b'O', 3 * h);
        for s in self.stocks.clone() {
            let t = 3 * h + 1_000_000 + u64::from(s.locate) * 1_000;
            self.emit(&StockDirectory {
                header: ItchHeader::new(b'R', s.locate, 0, t),
                stock: s.name,
                market_category: b'Q',
                financial_status: b'N',
                round_lot_size: U32::new(100),
                round_lots_only: b'N',
                issue_classification: b'C',
                issue_subtype: *b"Z ",
                authenticity: b'P',
                short_sale_threshold: b'N',
                ipo_flag: b' ',
                luld_reference_price_tier: b'1',
                etp_flag: b'N',
                etp_leverage_factor: U32::new(0),
                inverse_indicator: b'N',
            });
            self.emit(&StockTradingAction {
                header: ItchHeader::new(b'H', s.locate, 0, t + 1),
                stock: s.name,
                trading_state: b'T',
                reserved: b' ',
                reason: *b"    ",
            });
        }
        self.system(b'S', 4 * h);
        self.system(b'Q', OPEN_NS);
        self.crosses(OPEN_NS, b'O');
    }

    fn crosses(&mut self, t: u64, kind: u8) {
        for s in self.stocks.clone() {
            let shares = 100 * u64::from(self.lot_count()) * 50;
            let m = self.next_match();
            self.emit(&CrossTrade {
                header: ItchHeader::new(b'Q', s.locate, 0, t),
                shares: U64::new(shares),
                stock: s.name,
                cross_price: U32::new(self.mid(s.locate)),
                match_number: U64::new(m),
                cross_type: kind,
            });
        }
    }

    fn epilogue(&mut self) {
        self.crosses(CLOSE_NS, b'C');
        self.system(b'M', CLOSE_NS);
        self.system(b'E', 20 * 3_600_000_000_000);
        self.system(b'C', 20 * 3_600_000_000_000 + 300_000_000_000);
    }

    fn next_match(&mut self) -> u64 {
        self.next_match += 1;
        self.next_match - 1
    }

    fn lot_count(&mut self) -> u32 {
        1 + self.lots.sample(&mut self.rng).min(49) as u32
    }

    /// Order size: round lots mostly, odd lots often, occasionally a block.
    fn size(&mut self) -> u32 {
        let r: f64 = self.rng.random();
        if r < 0.65 {
            100 * self.lot_count()
        } else if r < 0.92 {
            self.rng.random_range(1..100)
        } else {
            (100.0 * self.blocks.sample(&mut self.rng)).clamp(100.0, 100_000.0) as u32
        }
    }

    fn top(&self, locate: u16, side: Side) -> Option<u32> {
        self.book.best(locate, side).map(|l| l.price)
    }

    /// The mid (or the one side, or the listing price) rounded to a tick.
    fn mid(&self, locate: u16) -> u32 {
        let p = match (self.top(locate, Side::Bid), self.top(locate, Side::Ask)) {
            (Some(b), Some(a)) => (b + a) / 2,
            (Some(b), None) => b + TICK,
            (None, Some(a)) => a.saturating_sub(TICK).max(TICK),
            (None, None) => self.stocks[usize::from(locate) - 1].price,
        };
        (p / TICK).max(1) * TICK
    }

    /// A price for a new order on `side`: at or behind the touch, sometimes improving it, never
    /// crossing the other side.
    fn price(&mut self, locate: u16, side: Side) -> u32 {
        let (bid, ask) = (self.top(locate, Side::Bid), self.top(locate, Side::Ask));
        let k = self.depth.sample(&mut self.rng).min(40) as u32 * TICK;
        let improve = self.rng.random_bool(0.12);
        let mid = self.mid(locate);
        match side {
            Side::Bid => {
                let ceiling = ask.map_or(u32::MAX, |a| a - TICK);
                let anchor = bid.map_or(mid.saturating_sub(TICK), |b| if improve { b + TICK } else { b });
                anchor.min(ceiling).saturating_sub(k).max(TICK)
            }
            Side::Ask => {
                let floor = bid.map_or(TICK, |b| b + TICK);
                let anchor = ask.map_or(mid + TICK, |a| if improve { a - TICK } else { a });
                (anchor.max(floor) + k).max(floor)
            }
        }
    }

    fn side(&mut self) -> Side {
        if self.rng.random_bool(0.5) {
            Side::Bid
        } else {
            Side::Ask
        }
    }

    /// A live order of the stock, biased to the youngest (most cancels hit fresh orders).
    fn pick(&mut self, locate: u16) -> Option<u64> {
        let l = usize::from(locate);
        for _ in 0..16 {
            let n = self.live[l].len();
            if n == 0 {
                return None;
            }
            let back = (self.depth.sample(&mut self.rng) as usize * 3).min(n - 1);
            let i = n - 1 - back;
            let r = self.live[l][i];
            if self.book.order(r).is_some() {
                return Some(r);
            }
            self.live[l].swap_remove(i);
        }
        None
    }

    /// One order-flow event (one or more messages with one timestamp).
    fn flow(&mut self) {
        let t = self.clock.next(&mut self.rng);
        let locate = self.zipf.sample(&mut self.rng) as u16;
        let l = usize::from(locate);
        let r: f64 = self.rng.random();
        if self.build_to > 0 {
            // Building up: three in five events are adds on top of the usual mix (an extra draw
            // only on such days, so a day without build-up is the same day as before).
            if self.book.resting_orders() as u64 >= self.build_to {
                self.build_to = 0;
            } else if self.rng.random_bool(0.6) {
                return self.add(locate, t);
            }
        }
        if self.resting[l] < 8 || r < 0.40 {
            return self.add(locate, t);
        }
        let Some(order) = self.pick(locate) else { return self.add(locate, t) };
        let o = *self.book.order(order).expect("picked orders are live");
        let h = |code| ItchHeader::new(code, locate, 0, t);
        if r < 0.72 {
            self.resting[l] -= 1;
            self.emit(&OrderDelete { header: h(b'D'), order_reference_number: U64::new(order) });
        } else if r < 0.76 && o.shares > 1 {
            let n = self.rng.random_range(1..o.shares);
            self.emit(&OrderCancel {
                header: h(b'X'),
                order_reference_number: U64::new(order),
                cancelled_shares: U32::new(n),
            });
        } else if r < 0.84 {
            let new = self.next_ref;
            self.next_ref += 1;
            let price = self.price(locate, o.side);
            let shares = if self.rng.random_bool(0.5) { o.shares } else { self.size() };
            self.emit(&OrderReplace {
                header: h(b'U'),
                original_order_reference_number: U64::new(order),
                new_order_reference_number: U64::new(new),
                shares: U32::new(shares),
                price: U32::new(price),
            });
            self.live[l].push(new);
        } else if r < 0.96 {
            self.sweep(locate, t);
        } else {
            let (side, shares, price) = (self.side(), self.size(), self.mid(locate));
            let stock = self.stocks[l - 1].name;
            let m = self.next_match();
            self.emit(&Trade {
                header: h(b'P'),
                order_reference_number: U64::new(0),
                side: side.itch(),
                shares: U32::new(shares),
                stock,
                price: U32::new(price),
                match_number: U64::new(m),
            });
        }
    }

    fn add(&mut self, locate: u16, t: u64) {
        let side = self.side();
        let price = self.price(locate, side);
        let shares = self.size();
        let r = self.next_ref;
        self.next_ref += 1;
        let stock = self.stocks[usize::from(locate) - 1].name;
        if self.rng.random_bool(0.1) {
            let attribution = MPIDS[self.rng.random_range(0..MPIDS.len())];
            self.emit(&AddOrderMpid {
                header: ItchHeader::new(b'F', locate, 0, t),
                order_reference_number: U64::new(r),
                side: side.itch(),
                shares: U32::new(shares),
                stock,
                price: U32::new(price),
                attribution,
            });
        } else {
            self.emit(&AddOrder {
                header: ItchHeader::new(b'A', locate, 0, t),
                order_reference_number: U64::new(r),
                side: side.itch(),
                shares: U32::new(shares),
                stock,
                price: U32::new(price),
            });
        }
        self.live[usize::from(locate)].push(r);
        self.resting[usize::from(locate)] += 1;
    }

    /// A marketable order: executes the queue at the best price of one side, oldest first,
    /// possibly through several orders (and levels), all with one timestamp.
    fn sweep(&mut self, locate: u16, t: u64) {
        let side = self.side();
        let mut want = self.size();
        for _ in 0..12 {
            let Some(level) = self.book.best(locate, side).copied() else { break };
            let o = *self.book.order(level.head).expect("a level's head is live");
            let n = want.min(o.shares);
            let m = self.next_match();
            let header = |code| ItchHeader::new(code, locate, 0, t);
            if self.rng.random_bool(0.03) {
                self.emit(&OrderExecutedWithPrice {
                    header: header(b'C'),
                    order_reference_number: U64::new(level.head),
                    executed_shares: U32::new(n),
                    match_number: U64::new(m),
                    printable: b'Y',
                    execution_price: U32::new(o.price),
                });
            } else {
                self.emit(&OrderExecuted {
                    header: header(b'E'),
                    order_reference_number: U64::new(level.head),
                    executed_shares: U32::new(n),
                    match_number: U64::new(m),
                });
            }
            if n == o.shares {
                self.resting[usize::from(locate)] -= 1;
            }
            want -= n;
            if want == 0 || self.resting[usize::from(locate)] < 4 {
                break;
            }
        }
    }
}

/// Writes the whole day as an ITCH file; returns the number of messages.
pub fn write_itch<W: Write>(cfg: DayConfig, out: W) -> io::Result<u64> {
    let mut g = DayGenerator::new(cfg);
    let mut w = ItchFileWriter::new(out);
    while let Some(m) = g.next_message() {
        w.write_bytes(m)?;
    }
    let n = w.messages();
    w.finish()?;
    Ok(n)
}

/// Midnight (UTC) of the synthetic day, 2025-01-02, for capture timestamps.
pub const DAY_EPOCH_NS: u64 = 1_735_776_000 * 1_000_000_000;
/// The MoldUDP64 session of generated captures.
pub const SESSION: [u8; 10] = *b"SYNTHDAY01";

/// What a capture holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PcapSummary {
    /// ITCH messages written.
    pub messages: u64,
    /// MoldUDP64 packets (datagrams) they were sent in.
    pub packets: u64,
}

/// Writes the whole day as a pcap of MoldUDP64 datagrams as the exchange would send them: one
/// packet per event (messages with one timestamp share a packet while they fit in 1,400 bytes),
/// sequence numbers from 1, captured 20 us after the matching engine's timestamp, and an
/// end-of-session packet last.
pub fn write_pcap<W: Write>(cfg: DayConfig, out: W, at: Endpoints) -> Result<PcapSummary, CaptureError> {
    let mut g = DayGenerator::new(cfg);
    let mut w = MoldPcapWriter::new(out, at)?;
    let mut b = PacketBuilder::new(SESSION, 1, 1_400);
    let mut sum = PcapSummary::default();
    let mut open_ts = None;
    let wire = |ts: u64| DAY_EPOCH_NS + ts + 20_000;
    while let Some(m) = g.next_message() {
        let ts = ItchHeader::read_from_prefix(m).map(|(h, _)| h.timestamp_ns()).unwrap_or(0);
        if open_ts.is_some_and(|t| t != ts) || !b.fits(m) {
            let t = open_ts.unwrap_or(ts);
            b.take(|p| w.write(wire(t), p))?;
            sum.packets += 1;
        }
        b.push(m);
        open_ts = Some(ts);
        sum.messages += 1;
    }
    let last = open_ts.unwrap_or(0);
    if b.count() > 0 {
        b.take(|p| w.write(wire(last), p))?;
        sum.packets += 1;
    }
    w.write(wire(last) + 1_000, b.control(true).as_bytes())?;
    sum.packets += 1;
    w.finish()?;
    Ok(sum)
}

#[cfg(test)]
mod tests;
