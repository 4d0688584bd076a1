//! `tickbus exchange --snapshots URI`: whole-book snapshots made in the venue's own process.
//! The market-data agent hands each message it published to a tap (a copy into a bounded queue,
//! `tickbus::snapshot::tap`); a maker keeps the book from them and publishes it whole every
//! period on a lossy stream, as `tickbus snapshot` does from a journal. The maker is stepped in
//! the venue's loop between ticks (`inline`, the default: [`InlineSnapshots`]), or runs on a
//! thread of its own that is not pinned and sleeps when it has nothing to do ([`start`]).
//!
//! Why the venue makes them and not only a journal's follower: its book is whole from the
//! first message (it saw every one it published), so a trader that lost market data (lapped on
//! its ring, or joined to a journal with a hole) can take a whole book from here without any
//! recorder running.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tickbus::snapshot::stepper::{StepBudget, StepError, StepGuard, Stepper};
use tickbus::snapshot::tap::{self, SnapshotTap, TapArchive};
use tickbus::snapshot::{SnapshotStats, Snapshotter};
use tickbus::stream::Retry;
use tickbus::stream::{open_publisher, AnyPublisher, Channel, Endpoint, OpenOptions, Reliability};
use tickbus_codecs::book::OrderBook;
use tickbus_codecs::md::SnapshotOrders;
use tickbus_codecs::Message;

/// Messages the tap holds between the venue and the maker: at 1M msg/s, a quarter second of
/// the maker busy publishing a snapshot (a TotalView-sized book of a million orders takes
/// about that); 32 MiB, touched at start. A maker that falls further behind has lost messages
/// for the rest of the day (its book is no longer whole), and every snapshot after says so.
pub const TAP_MESSAGES: usize = 1 << 18;

/// How fast the inline maker's guard forgets a long step: its estimate halves every this many ns.
const GUARD_HALF_LIFE_NS: f64 = 1e6;

/// The snapshot stream's id (as `tickbus snapshot`'s).
pub const SNAPSHOT_STREAM: u32 = 5;

/// The maker thread, running.
pub struct VenueSnapshots {
    /// The market-data stream's incarnation, stamped in every snapshot (0 until set).
    pub source: Arc<AtomicU64>,
    maker: MakerThread<SnapshotStats>,
}

/// The snapshot stream's channel and options (a lossy stream of snapshot chunks).
pub(crate) fn snapshot_channel(uri: &str, slots: usize, o: &OpenOptions) -> Result<(Channel, OpenOptions), String> {
    let c = Channel::parse(uri).map_err(|e| format!("--snapshots: {e}"))?;
    if matches!(c.endpoint, Endpoint::RdmaRc { .. }) {
        return Err(format!(
            "--snapshots {uri}: snapshots go to many joiners on a lossy stream: shm, or ud-mcast across hosts"
        ));
    }
    let mut o = o.clone();
    o.reliability = Reliability::Lossy;
    (o.slots, o.payload, o.stream) = (slots, SnapshotOrders::LEN, SNAPSHOT_STREAM);
    Ok((c, o))
}

/// The maker stepped inside the venue's loop between ticks (`--snapshot-maker inline`): no
/// thread; each step applies a few messages or publishes a couple of chunks
/// (`tickbus::snapshot::stepper`).
pub struct InlineSnapshots {
    stepper: Stepper,
    archive: TapArchive,
    publisher: AnyPublisher,
    /// Whether a step fits before the next tick is due: one guard for applying messages, one
    /// for publishing chunks (`Stepper::publishing`).
    guards: [StepGuard; 2],
    /// Why it stopped (the snapshot stream failed): it is not stepped again.
    pub failure: Option<String>,
}

impl InlineSnapshots {
    /// One bounded step at TSC `now`; the work done. No syscall on shm, and no allocation
    /// while the book stays within the room it was given and touched at start (a million
    /// orders, 8,192 stocks, 128 price levels a side).
    #[inline]
    pub fn step(&mut self, now: u64) -> usize {
        if self.failure.is_some() {
            return 0;
        }
        match self.stepper.step(&mut self.archive, &mut self.publisher, now) {
            Ok(n) => n,
            // A full send queue (ud-mcast): the same chunk again at a later step.
            Err(StepError::Publish(e)) if e.retry_helps() => 0,
            Err(e) => {
                self.failure = Some(e.to_string());
                0
            }
        }
    }

    /// One step if it is expected to end before `deadline` (the next tick's due time; TSC),
    /// `now` being the cycle's clock; the work done (0 when none fitted). Each step taken is
    /// timed with one more TSC read after it, for the guard.
    #[inline]
    pub fn step_before(&mut self, now: u64, deadline: u64, tsc: &tickbus::time::Tsc) -> usize {
        let kind = usize::from(self.stepper.publishing());
        if !self.guards[kind].fits(now, deadline) {
            return 0;
        }
        self.step_timed(now, kind, tsc)
    }

    /// One step whatever the next tick's due time (a venue behind its schedule always has one
    /// due: see [`InlineSnapshots::behind`]), timed for the guard all the same.
    #[inline]
    pub fn step_anyway(&mut self, now: u64, tsc: &tickbus::time::Tsc) -> usize {
        let kind = usize::from(self.stepper.publishing());
        self.step_timed(now, kind, tsc)
    }

    #[inline]
    fn step_timed(&mut self, now: u64, kind: usize, tsc: &tickbus::time::Tsc) -> usize {
        let n = self.step(now);
        self.guards[kind].record(now, tsc.now());
        n
    }

    /// What the maker did.
    pub fn stats(&self) -> SnapshotStats {
        self.stepper.maker().stats()
    }

    /// Whether the maker has fallen a quarter of its tap behind: it is then stepped even when
    /// a tick is due (a venue behind its schedule always has one, and a maker never stepped
    /// loses the day's book when the tap fills).
    #[inline]
    pub fn behind(&self) -> bool {
        self.archive.waiting() > TAP_MESSAGES / 4
    }
}

/// Opens the snapshot stream on `uri` for a maker stepped in the venue's loop, a snapshot every
/// `every_ticks` TSC ticks; returns it, the tap, and the stream-incarnation cell to set.
pub fn start_inline(
    uri: &str,
    every_ticks: u64,
    slots: usize,
    o: &OpenOptions,
) -> Result<(Box<InlineSnapshots>, SnapshotTap, Arc<AtomicU64>), String> {
    let (c, o) = snapshot_channel(uri, slots, o)?;
    let publisher = open_publisher(&c, &o).map_err(|e| format!("--snapshots {e}"))?;
    let source = Arc::new(AtomicU64::new(0));
    let (tap, archive) = tap::channel(TAP_MESSAGES, source.clone());
    let mut book = OrderBook::with_capacity(1 << 20, 8192);
    book.pre_touch(); // every page of its room touched now, not on the venue's loop
    let stepper = Stepper::new(Snapshotter::new(book), every_ticks, StepBudget::default());
    // A stretched step (an interrupt) keeps the maker out of the gaps for a few milliseconds.
    let guard = StepGuard::new((GUARD_HALF_LIFE_NS * tickbus::time::ticks_per_ns()) as u64);
    let guards = [guard; 2];
    eprintln!("exchange: whole-book snapshots on {uri}, made between ticks");
    Ok((Box::new(InlineSnapshots { stepper, archive, publisher, guards, failure: None }), tap, source))
}

/// Opens the snapshot stream on `uri` and starts the maker; returns the tap for the market-data
/// agent. `o` carries the venue's stream options (token, device, waits).
pub fn start(
    uri: &str,
    every: Duration,
    slots: usize,
    o: &OpenOptions,
) -> Result<(VenueSnapshots, SnapshotTap), String> {
    let (c, o) = snapshot_channel(uri, slots, o)?;
    let source = Arc::new(AtomicU64::new(0));
    let (tap, mut archive) = tap::channel(TAP_MESSAGES, source.clone());
    let uri_owned = uri.to_string();
    let maker = MakerThread::spawn("tickbus-snapshots", c, o, move |p, stop| {
        // Room for a day's book up front (a million orders, every stock locate).
        let mut maker = Snapshotter::new(OrderBook::with_capacity(1 << 20, 8192));
        let r = tickbus::snapshot::run(&mut maker, &mut archive, p, every, stop, None);
        let _ = p.flush(Duration::from_secs(1));
        r.map_err(|e| format!("snapshots on {uri_owned}: {e}"))?;
        Ok(maker.stats())
    })?;
    eprintln!("exchange: whole-book snapshots every {} s on {uri}", every.as_secs_f64());
    Ok((VenueSnapshots { source, maker }, tap))
}

/// A snapshot maker's thread, told to stop and joined on [`MakerThread::finish`] or when
/// dropped (the venue's and the feed's alike).
pub struct MakerThread<R> {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<R, String>>>,
}

impl<R: Send + 'static> MakerThread<R> {
    /// Starts thread `name`, which opens the snapshot stream `c` itself (a ud-mcast publisher's
    /// queue pair belongs to the thread that made it) and then runs `body` until the stop flag
    /// it is given is set. Returns once the stream is open, or with the error that kept it shut.
    pub fn spawn<F>(name: &str, c: Channel, o: OpenOptions, body: F) -> Result<MakerThread<R>, String>
    where
        F: FnOnce(&mut AnyPublisher, &AtomicBool) -> Result<R, String> + Send + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let (opened_tx, opened) = std::sync::mpsc::sync_channel(1);
        let st = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || -> Result<R, String> {
                let mut p = match open_publisher(&c, &o) {
                    Ok(p) => {
                        let _ = opened_tx.send(Ok(()));
                        p
                    }
                    Err(e) => {
                        let _ = opened_tx.send(Err(format!("--snapshots {e}")));
                        return Err("not opened".into());
                    }
                };
                body(&mut p, &st)
            })
            .map_err(|e| format!("--snapshots: starting its thread: {e}"))?;
        match opened.recv() {
            Ok(Ok(())) => Ok(MakerThread { stop, thread: Some(thread) }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            // Only if opening the stream panicked: say so.
            Err(_) => Err(match thread.join() {
                Err(_) => "--snapshots: its thread panicked while opening the stream".into(),
                Ok(_) => "--snapshots: its thread stopped before opening the stream".into(),
            }),
        }
    }

    /// Stops the maker (a snapshot under way is cut short: a loader refuses it) and returns
    /// what it did.
    pub fn finish(mut self) -> Result<R, String> {
        self.stop.store(true, Ordering::Release);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err("the snapshot thread panicked".into()),
            None => Err("the snapshot thread was not running".into()),
        }
    }
}

impl<R> Drop for MakerThread<R> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl VenueSnapshots {
    /// Stops the maker (a snapshot under way is cut short: a loader refuses it) and returns
    /// what it did.
    pub fn finish(self) -> Result<SnapshotStats, String> {
        self.maker.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickbus::shm::{HugepagePolicy, ShmOptions};
    use tickbus::time::Tsc;
    use tickbus_codecs::md::OrderAdd;
    use tickbus_codecs::{Side, PRICE_SCALE};
    use zerocopy::IntoBytes;

    /// Once a kind of step has been timed, a step of that kind that would reach the next tick
    /// is not taken (its messages or its snapshot wait), and one with room is; the other kind
    /// has its own estimate.
    #[test]
    fn the_inline_maker_takes_no_step_that_would_reach_the_next_tick() {
        let tag = format!("tickbus-apps-inline-guard-{}", std::process::id());
        let mut o = OpenOptions::default();
        o.shm = ShmOptions::new(format!("/dev/hugepages/{tag}"), format!("/dev/shm/{tag}"), HugepagePolicy::Preferred);
        let (mut s, mut tap, _) = start_inline(&format!("shm:{tag}-snap"), u64::MAX, 1 << 10, &o).unwrap();
        // 40 orders: three apply steps of up to 16, then a snapshot of three chunks, two a step.
        for id in 1..=40u64 {
            let mut a = OrderAdd::new();
            (a.instrument_id, a.order_id, a.side, a.price, a.qty) =
                (2, id, Side::Buy as u8, id as i64 * PRICE_SCALE, 100);
            assert!(tap.push(id - 1, a.as_bytes()));
        }
        let tsc = Tsc::new();
        let tight = |s: &mut InlineSnapshots| {
            let now = tsc.now();
            s.step_before(now, now + 1, &tsc)
        };
        // Nothing timed yet: an apply step with a tick of room is taken.
        assert_eq!(tight(&mut s), 16);
        // It took more than a tick: the next apply step is not, and nothing is applied.
        assert_eq!((tight(&mut s), s.stats().applied), (0, 16));
        // No tick to come: the rest is applied and the snapshot starts.
        assert_eq!(s.step_before(tsc.now(), u64::MAX, &tsc), 16);
        assert_eq!(s.step_before(tsc.now(), u64::MAX, &tsc), 8);
        assert_eq!((s.stats().applied, s.stats().chunks), (40, 0));
        // The first chunk step is not judged by the apply steps' time: two chunks go out.
        assert_eq!(tight(&mut s), 2);
        // A chunk step took more than a tick: the next is not taken; the snapshot waits.
        assert_eq!((tight(&mut s), s.stats().chunks, s.stats().snapshots), (0, 2, 0));
        // With room, the last chunk goes out and the snapshot is whole.
        assert_eq!(s.step_before(tsc.now(), u64::MAX, &tsc), 1);
        assert_eq!((s.stats().chunks, s.stats().snapshots, s.stats().last_orders), (3, 1, 40));
        drop(s);
        for dir in ["/dev/hugepages", "/dev/shm"] {
            let _ = std::fs::remove_file(format!("{dir}/{tag}/{tag}-snap"));
            let _ = std::fs::remove_dir(format!("{dir}/{tag}"));
        }
    }
}
