//! `tickbus feed --snapshots URI [--glimpse ADDR]`: whole-book snapshots made in the feed
//! handler's own process, and the repair of its book after a loss for good.
//!
//! The feed hands every message it publishes to a tap (`tickbus::snapshot::tap`); a thread of
//! its own keeps the book from them and publishes it whole every period on a lossy stream. With
//! `--glimpse`, a `FeedGap` no longer spoils the book for the rest of the day: the thread
//! fetches the venue's book, the feed's loop catches it up and swaps it into its normaliser
//! (`tickbus::feed::repair`), and the thread publishes a snapshot at the swap's position at
//! once, so a trader that stopped at the gap (`trader --snapshots`) recovers and trades on.
//! Without `--glimpse`, every snapshot after a gap says `lost` and no trader takes it.
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use tickbus::feed::repair::{self, BookRepair};
use tickbus::feed::repair_helper::{HelperStats, RepairHelper, VenueBookService};
use tickbus::snapshot::tap::{self, SnapshotTap};
use tickbus::snapshot::{SnapshotStats, Snapshotter};
use tickbus::stream::OpenOptions;
use tickbus_codecs::book::OrderBook;
use tickbus_codecs::md::SnapshotOrders;
use tickbus_codecs::Message;

use crate::venue_snapshots::MakerThread;

/// Room for a day's book (a million orders, every stock locate), as the venue's maker.
const ORDERS: usize = 1 << 20;
const STOCKS: usize = 8192;
/// The most orders a venue's book may hold: four times the room made for the day (a larger one
/// is refused: a broken or hostile service must not take the feed's memory).
const MAX_VENUE_ORDERS: u64 = 4 * ORDERS as u64;
/// The most bytes a venue's book may take: the glimpse's header, and that many orders in whole
/// chunks.
const MAX_VENUE_BYTES: usize = tickbus::feed::glimpse::HEADER_LEN
    + (MAX_VENUE_ORDERS as usize).div_ceil(tickbus_codecs::md::SNAPSHOT_CHUNK_ORDERS)
        * <SnapshotOrders as Message>::LEN;

/// What the thread did: its snapshots, and its repairs (with `--glimpse`).
pub type Made = (SnapshotStats, Option<HelperStats>);

/// The thread, running.
pub struct FeedSnapshots {
    /// The market-data stream's incarnation, stamped in every snapshot (0 until set).
    pub source: Arc<AtomicU64>,
    maker: MakerThread<Made>,
}

/// What the feed's loop takes: the tap, and the repair if `--glimpse`.
pub struct LoopSide {
    pub tap: SnapshotTap,
    pub repair: Option<BookRepair>,
}

/// Opens the snapshot stream on `uri` and starts the thread; with `glimpse`, it repairs the
/// feed's book from the venue's book service there (`ring`: messages the loop keeps between a
/// loss and the venue's book caught up).
pub fn start(
    uri: &str,
    every: Duration,
    slots: usize,
    glimpse: Option<SocketAddr>,
    ring: usize,
    o: &OpenOptions,
) -> Result<(FeedSnapshots, LoopSide), String> {
    let (c, o) = crate::venue_snapshots::snapshot_channel(uri, slots, o)?;
    let source = Arc::new(AtomicU64::new(0));
    let (tap, mut archive) = tap::channel(crate::venue_snapshots::TAP_MESSAGES, source.clone());
    let (repair, ends) = match glimpse {
        Some(_) => {
            let (r, e) = repair::channel(ring);
            (Some(r), Some(e))
        }
        None => (None, None),
    };
    let uri_owned = uri.to_string();
    let maker = MakerThread::spawn("tickbus-feed-snapshots", c, o, move |p, stop| -> Result<Made, String> {
        let mut book = OrderBook::with_capacity(ORDERS, STOCKS);
        book.pre_touch();
        let said = |e: String| format!("snapshots on {uri_owned}: {e}");
        match (ends, glimpse) {
            (Some(ends), Some(addr)) => {
                let service = VenueBookService { addr, timeout: Duration::from_secs(10), max_bytes: MAX_VENUE_BYTES };
                let mut h = RepairHelper::new(ends, service, book, ORDERS, STOCKS, MAX_VENUE_ORDERS);
                let r = tickbus::feed::repair_helper::run(&mut h, &mut archive, p, every, stop);
                let _ = p.flush(Duration::from_secs(1));
                r.map_err(|e| said(e.to_string()))?;
                Ok((h.snapshots(), Some(h.stats().clone())))
            }
            _ => {
                let mut maker = Snapshotter::new(book);
                let r = tickbus::snapshot::run(&mut maker, &mut archive, p, every, stop, None);
                let _ = p.flush(Duration::from_secs(1));
                r.map_err(|e| said(e.to_string()))?;
                Ok((maker.stats(), None))
            }
        }
    })?;
    eprintln!(
        "feed: whole-book snapshots every {} s on {uri}{}",
        every.as_secs_f64(),
        glimpse
            .map_or("; a loss for good spoils them for the rest of the day (no --glimpse)".to_string(), |g| format!(
                "; the book repaired from the venue's book at {g} after a loss"
            ))
    );
    Ok((FeedSnapshots { source, maker }, LoopSide { tap, repair }))
}

impl FeedSnapshots {
    /// Stops the thread (a snapshot under way is cut short: a loader refuses it) and returns
    /// what it did.
    pub fn finish(self) -> Result<Made, String> {
        self.maker.finish()
    }
}
