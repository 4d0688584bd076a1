//! `tickbus snapshot`: whole-book snapshots of a market-data stream, made from its journal and
//! published every period on a stream of their own (`tickbus::snapshot`), so a trader that
//! joins late loads the book as of a recent position (`trader --join ... --snapshots URI`) and
//! replays only the market data after it. Off every hot path: the feed and the exchange do
//! nothing for it; it follows the journal `tickbus record` writes.
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use tickbus::stream::{open_publisher, Channel, Endpoint, OpenOptions, Reliability};
use tickbus_codecs::book::OrderBook;
use tickbus_codecs::md::SnapshotOrders;
use tickbus_codecs::Message;

#[derive(Args, Debug)]
pub struct SnapshotArgs {
    /// The market data's journal folder (followed as the recorder goes on writing it).
    pub journal: PathBuf,
    /// Where to publish the snapshots: a lossy channel URI (`shm:snap` for traders on this
    /// host, `ud-mcast://GROUP/STREAM` across hosts).
    #[arg(long, value_name = "URI")]
    pub dest: String,
    /// Seconds between snapshots (the first once the journal is caught up). A joiner waits up
    /// to this long for one; each costs the whole book's walk and publish (`last_publish_us`
    /// in `--json`: 0.1 ms for the lab's day of ~2,000 resting orders).
    #[arg(long, default_value_t = 1.0, value_parser = crate::args::positive_secs)]
    pub every_secs: f64,
    /// Ring slots of a shm snapshot stream, where the URI does not say: a joiner that cannot
    /// keep up is lapped unless a whole snapshot fits (16 orders a slot: the default holds a
    /// book of a million resting orders).
    #[arg(long, default_value_t = 1 << 16, value_parser = crate::args::slots)]
    pub slots: usize,
    /// Stop once the journal has had nothing new for this long (the recorder finished), after
    /// a last snapshot; otherwise run until Ctrl-C / SIGTERM.
    #[arg(long, value_parser = crate::args::secs)]
    pub idle_end_secs: Option<f64>,
    /// The shared secret of a ud-mcast destination whose URI names no `token-env`.
    #[arg(long, default_value = "")]
    pub token: String,
    /// The RDMA device (default: TICKBUS_RDMA_DEVICE, else the first).
    #[arg(long)]
    pub device: Option<String>,
    /// How long to wait for the journal to appear (s).
    #[arg(long, default_value_t = 30.0, value_parser = crate::args::secs)]
    pub wait_secs: f64,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: SnapshotArgs) -> Result<(), String> {
    let stop = crate::pipeline::stop_flag()?;
    let c = Channel::parse(&a.dest).map_err(|e| format!("--dest: {e}"))?;
    let wait = Duration::from_secs_f64(a.wait_secs);
    let mut tail = open_journal(&a.journal, wait, &stop)?;
    if matches!(c.endpoint, Endpoint::RdmaRc { .. }) {
        // One reader that must connect before anything is read: a periodic broadcast to any
        // number of joiners is a lossy stream's job.
        return Err(format!(
            "--dest {}: snapshots go to many joiners on a lossy stream: shm, or ud-mcast across hosts",
            a.dest
        ));
    }
    let mut o = OpenOptions::default();
    o.reliability = Reliability::Lossy;
    (o.slots, o.payload, o.stream) = (a.slots, SnapshotOrders::LEN, 5);
    o.token = a.token.clone().into_bytes();
    o.device = a.device.clone();
    (o.wait, o.stop) = (wait, Some(stop.clone()));
    let mut p = open_publisher(&c, &o).map_err(|e| format!("--dest {e}"))?;
    eprintln!("snapshot: following {}, a snapshot every {} s on {}", a.journal.display(), a.every_secs, a.dest);
    // Room for a day's book up front (a million orders, every stock locate).
    let mut maker = tickbus::snapshot::Snapshotter::new(OrderBook::with_capacity(1 << 20, 8192));
    let idle_end = a.idle_end_secs.map(Duration::from_secs_f64);
    let every = Duration::from_secs_f64(a.every_secs);
    let r = tickbus::snapshot::run(&mut maker, &mut tail, &mut p, every, &stop, idle_end);
    let flushed = p.flush(Duration::from_secs(10));
    drop(p);
    let s = maker.stats();
    if a.json {
        let j = serde_json::json!({"journal": a.journal.display().to_string(), "dest": a.dest,
            "snapshots": s.snapshots, "chunks": s.chunks, "position": s.position, "applied": s.applied,
            "lost": s.lost, "book_errors": s.book_errors, "last_orders": s.last_orders,
            "last_publish_us": s.last_publish_us});
        println!("{j}");
    } else {
        println!(
            "{} snapshots ({} chunks) up to position {}; the last of {} orders took {} µs to publish; {} messages lost, {} refused by the book",
            s.snapshots, s.chunks, s.position, s.last_orders, s.last_publish_us, s.lost, s.book_errors
        );
    }
    r.map_err(|e| e.to_string())?;
    flushed.map_err(|e| format!("flushing at the end: {e}"))
}

/// Opens the journal, waiting (up to `wait`) for the recorder to create it.
fn open_journal(
    dir: &std::path::Path,
    wait: Duration,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<tickbus::journal::JournalTail, String> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        match tickbus::journal::JournalTail::open(dir, 0) {
            Ok(t) => return Ok(t),
            Err(e) if std::time::Instant::now() >= deadline || stop.load(std::sync::atomic::Ordering::Acquire) => {
                return Err(format!("{e}: start `tickbus record` into {} first", dir.display()))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}
