//! A snapshot maker run a bounded step at a time inside another loop: the venue's, in the time
//! between its ticks, instead of on a thread of its own. On a machine whose cores are all taken
//! by busy-polling loops a maker thread takes its time slices from them (measured on two cores:
//! the venue's p99 4-5x its own); a step here costs a few messages applied or a couple of chunks
//! published, and is taken only when no tick is due and, with a [`StepGuard`], only when the
//! step is expected to end before the next one is. (A chunk's walk skips empty book sides, up
//! to two a stock: on a book of thousands of stocks one step can take tens of µs; and a venue
//! behind its schedule always has a tick due, so its maker would wait and the tap fill: the
//! venue steps it once a tick as well when it has fallen a quarter of its tap behind.)
//!
//! Each step either applies up to `apply` messages from the archive, or (a snapshot under way)
//! publishes up to `chunks` chunks of it; nothing is applied while a snapshot is under way, so
//! every snapshot is one book at one position however many steps it takes.
use super::{chunk_bytes, Snapshotter};
use crate::merge::Archive;
use crate::stream::Publish;
use tickbus_codecs::book::ChunkCursor;

/// How much one step may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepBudget {
    /// Messages applied per step.
    pub apply: usize,
    /// Chunks (16 orders each) published per step.
    pub chunks: usize,
}

impl Default for StepBudget {
    fn default() -> Self {
        StepBudget { apply: 16, chunks: 2 }
    }
}

/// When a caller that knows its next deadline (a venue knows when its next tick is due) may
/// take a step without delaying it: when the time left is more than the longest step seen
/// lately. Why: a step taken at a random moment between ticks lands on a tick's due time in a
/// share of the ticks equal to the step's share of the gap, and delays that tick by what is left
/// of the step, which lands in the venue's p99 (with steps taken whenever no tick was due, the
/// venue's p99 measured 1.08-1.63x its own without a maker; guarded, 1.01x in a run of the
/// snapshot section alone, and 1.28x in two full runs, where something else is left).
///
/// The estimate is the longest step recorded, halved every `half_life` of the caller's clock
/// since it was recorded: a step stretched once (an interrupt, a page fault) keeps the maker out
/// of the gaps for a few half-lives, not for the rest of the day. A maker kept out of every gap
/// falls behind its tap; the venue then steps it regardless (`behind`). Keep one guard per kind
/// of step ([`Stepper::publishing`]): a chunk step can take a hundred times an apply step, and
/// one estimate for both would keep the cheap steps out of gaps they fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepGuard {
    worst: u64,
    since: u64,
    half_life: u64,
}

impl StepGuard {
    /// A guard that has seen no step yet (every step fits until one is recorded), whose
    /// estimate halves every `half_life` (at least 1) of the caller's clock.
    pub fn new(half_life: u64) -> StepGuard {
        StepGuard { worst: 0, since: 0, half_life: half_life.max(1) }
    }

    /// The longest step expected now.
    #[inline]
    pub fn estimate(&self, now: u64) -> u64 {
        let halvings = now.saturating_sub(self.since) / self.half_life;
        self.worst.checked_shr(u32::try_from(halvings).unwrap_or(u32::MAX)).unwrap_or(0)
    }

    /// Whether a step taken at `now` is expected to end before `deadline`.
    #[inline]
    pub fn fits(&self, now: u64, deadline: u64) -> bool {
        deadline.saturating_sub(now) > self.estimate(now)
    }

    /// Records a step that began at `start` and ended at `end`.
    #[inline]
    pub fn record(&mut self, start: u64, end: u64) {
        let took = end.saturating_sub(start);
        if took >= self.estimate(end) {
            (self.worst, self.since) = (took, end);
        }
    }
}

/// Why a step failed.
#[derive(Debug, thiserror::Error)]
pub enum StepError<A: std::error::Error + 'static, P: std::error::Error + 'static> {
    /// The market data's archive (the tap) could not be read.
    #[error("reading the market data: {0}")]
    Archive(A),
    /// The snapshot stream refused a chunk.
    #[error("publishing a snapshot: {0}")]
    Publish(P),
}

/// A [`Snapshotter`] stepped by its caller.
pub struct Stepper {
    maker: Snapshotter,
    /// The snapshot under way, and when it started (in the caller's clock).
    under_way: Option<ChunkCursor>,
    started: Option<u64>,
    /// The period between snapshot starts, in the caller's clock units.
    every: u64,
    budget: StepBudget,
}

impl Stepper {
    /// A maker publishing a snapshot every `every` (in the units of the `now` given to
    /// [`Stepper::step`]: TSC ticks in the venue) once caught up.
    pub fn new(maker: Snapshotter, every: u64, budget: StepBudget) -> Stepper {
        Stepper { maker, under_way: None, started: None, every, budget }
    }

    /// Whether a snapshot is under way: the next step publishes chunks (a chunk's walk can take
    /// far longer than applying a few messages), not apply messages.
    pub fn publishing(&self) -> bool {
        self.under_way.is_some()
    }

    /// What the maker has done.
    pub fn maker(&self) -> &Snapshotter {
        &self.maker
    }

    /// One bounded step at `now`; returns the work done (messages applied or chunks published;
    /// 0: nothing to do).
    pub fn step<A: Archive, P: Publish>(
        &mut self,
        src: &mut A,
        p: &mut P,
        now: u64,
    ) -> Result<usize, StepError<A::Error, P::Error>> {
        if let Some(cursor) = self.under_way.as_mut() {
            let mut sent = 0;
            while sent < self.budget.chunks {
                let before = *cursor;
                let Some(mut chunk) = cursor.next_chunk(&self.maker.book) else {
                    let s = &mut self.maker.stats;
                    s.snapshots += 1;
                    s.last_orders = cursor.orders();
                    self.under_way = None;
                    return Ok(sent.max(1));
                };
                // A shm ring takes every chunk; a full ud-mcast send queue refuses one: the
                // cursor goes back to it, so the caller may step again later (the chunk is
                // made again) or give up.
                if let Err(e) = p.publish(chunk_bytes(&mut chunk, p)) {
                    *cursor = before;
                    return Err(StepError::Publish(e));
                }
                self.maker.stats.chunks += 1;
                sent += 1;
            }
            return Ok(sent);
        }
        let n = self.maker.apply(src, self.budget.apply).map_err(StepError::Archive)?;
        // The first once caught up; then every period, caught up or not (a maker behind its
        // stream still publishes: its snapshots say their position). Left open: a snapshot
        // that takes longer than the period leaves one step's messages between snapshots, and
        // such a maker falls further behind until the tap overflows (its snapshots then say
        // `lost`); a longer period or the thread maker is the remedy.
        let caught_up = n < self.budget.apply;
        let due = match self.started {
            None => caught_up,
            Some(t) => now.saturating_sub(t) >= self.every,
        };
        if due {
            let s = self.maker.stats;
            self.under_way =
                Some(self.maker.book.snapshot_cursor(s.position, self.maker.lost_in_book, self.maker.source));
            self.started = Some(now);
            return Ok(n.max(1)); // a snapshot started is work: its chunks follow
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    use tickbus_codecs::book::OrderBook;
    use tickbus_codecs::md::SnapshotOrders;
    use tickbus_codecs::Message;

    use super::*;
    use crate::ring::{HeapMemory, RingConfig, RingReader, RingWriter, StartAt};
    use crate::snapshot::tap;
    use crate::snapshot::tests::{book_of, market_data};
    use crate::stream::Subscribe;
    use crate::{Mode, Publisher, Recv, Subscriber};

    #[test]
    fn a_guard_keeps_steps_out_of_a_gap_shorter_than_its_longest_step_and_forgets_a_stretched_one() {
        let mut g = StepGuard::new(1000);
        // Nothing seen yet: any room fits, none does not.
        assert!(g.fits(0, 1) && !g.fits(5, 5));
        g.record(100, 400); // a 300-tick step
        assert_eq!(g.estimate(400), 300);
        assert!(!g.fits(500, 800), "300 ticks of room for a 300-tick step");
        assert!(g.fits(500, 801));
        // A shorter step does not lower the estimate; a longer one raises it.
        g.record(900, 950);
        assert_eq!(g.estimate(950), 300);
        g.record(1000, 1500);
        assert_eq!(g.estimate(1500), 500);
        // Halved per half-life since it was seen, to nothing.
        assert_eq!(g.estimate(2499), 500);
        assert_eq!(g.estimate(2500), 250);
        assert_eq!(g.estimate(4500), 62);
        assert_eq!(g.estimate(u64::MAX), 0);
        // A clock read before the record (another core's) counts as no time passed.
        assert_eq!(g.estimate(0), 500);
    }

    /// Stepped a few messages or two chunks at a time, with market data arriving between the
    /// steps of a snapshot: every snapshot loads whole, as of one position, with the book of the
    /// stream up to that position; no step does more than its budget.
    #[test]
    fn a_stepped_maker_publishes_whole_snapshots_of_one_position_within_its_budget() {
        let md = market_data(3000);
        let (mut t, mut archive) = tap::channel(4096, Arc::new(AtomicU64::new(9)));
        let cfg = RingConfig::for_payload(Mode::Lossy, 5, SnapshotOrders::LEN, 1 << 14);
        let mem = HeapMemory::new(cfg.ring_bytes());
        let mut p = Publisher::new(RingWriter::create(mem.clone(), &cfg, 1, 0).unwrap());
        let mut sub = Subscriber::new(RingReader::observer(mem, StartAt::Oldest).unwrap());
        let budget = StepBudget { apply: 8, chunks: 2 };
        let mut s = Stepper::new(Snapshotter::new(OrderBook::with_capacity(1 << 14, 64)), 100, budget);
        let (mut pushed, mut published) = (0usize, 0u64);
        for now in 0..1_000_000u64 {
            // Up to five messages arrive per step, during snapshots too.
            for m in md.iter().skip(pushed).take(5) {
                assert!(t.push(pushed as u64, m));
                pushed += 1;
            }
            let before = p.position();
            let work = s.step(&mut archive, &mut p, now).unwrap();
            let chunks = p.position() - before;
            assert!(chunks <= 2 && work <= 8, "a step within its budget: {chunks} chunks, {work} work");
            published += chunks;
            if pushed == md.len() && work == 0 {
                break;
            }
        }
        let st = s.maker().stats();
        assert!(st.snapshots >= 5, "{st:?}");
        assert_eq!((st.position, st.chunks), (md.len() as u64, published));
        // Every snapshot on the stream loads whole and is the stream's book at its position.
        let mut loader = tickbus_codecs::book::SnapshotLoader::new();
        let (mut book, mut loaded) = (OrderBook::with_capacity(1 << 14, 64), 0);
        while let Some(Recv::Message(m)) = Subscribe::try_recv(&mut sub).unwrap() {
            let chunk = SnapshotOrders::parse(m.payload).unwrap();
            if let tickbus_codecs::book::Step::Complete(l) = loader.offer(&mut book, chunk).unwrap() {
                assert_eq!((l.lost, l.source), (0, 9));
                assert_eq!(book.digest(), book_of(&md[..l.as_of as usize]).digest(), "as of {}", l.as_of);
                loaded += 1;
            }
        }
        assert_eq!(loaded, st.snapshots);
    }
}
