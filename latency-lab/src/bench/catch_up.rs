//! A late joiner's catch-up rate (issue 26): messages a second from a journal through the
//! replay-merge (`tickbus::merge::ReplayMerge` over a `JournalTail`, a live lossy ring beside it)
//! against the floor, the journal's own cursor reading the same records, in the same run:
//! paired rounds in alternating order, a ratio per round, the median and its spread.
use std::error::Error;
use std::time::Instant;

use tickbus::journal::{JournalReader, JournalTail};
use tickbus::merge::{MergeOptions, ReplayMerge};
use tickbus::ring::{HeapMemory, RingReader, RingWriter};
use tickbus::stream::Subscribe;
use tickbus::{Mode, Recv, RingConfig, StartAt, Subscriber};

use crate::bench::cleanup::TempDir;
use crate::model::journal::CatchUp;

/// Rounds: 21 (from 7). A round is about 0.12 s; with 7, a run whose arms swung with the
/// machine (one round's ratio from 0.53x to 1.03x) left the median at 0.64x where the runs
/// before and after it measured 0.87-0.88x.
const ROUNDS: usize = 21;

/// The floor: the journal's cursor over every record, touching each payload (timed from the
/// open, as the merge is).
fn read_floor(dir: &std::path::Path, n: u64) -> Result<f64, Box<dyn Error>> {
    let t0 = Instant::now();
    let r = JournalReader::open(dir)?;
    let open = t0.elapsed().as_secs_f64();
    let rate = crate::bench::journal_bench::read_back(&r, n).map_err(|e| e.to_string())?;
    Ok(n as f64 / (n as f64 / rate + open))
}

/// The merge from position 0 until it has delivered all `n`, touching each payload; the live
/// stream is a lossy ring nobody publishes on (the catch-up alone is timed).
fn merge(dir: &std::path::Path, n: u64) -> Result<f64, Box<dyn Error>> {
    let cfg = RingConfig::for_payload(Mode::Lossy, 1, 128, 1024);
    let mem = HeapMemory::new(cfg.ring_bytes());
    let _w = RingWriter::create(mem.clone(), &cfg, 1, 0)?;
    let live = Subscriber::new(RingReader::observer(mem, StartAt::Latest)?);
    let t0 = Instant::now();
    let mut m = ReplayMerge::new(live, JournalTail::open(dir, 0)?, 0, MergeOptions::default())?;
    let (mut count, mut sum) = (0u64, 0u64);
    while m.position() < n {
        match m.try_recv()? {
            Some(Recv::Message(d)) => {
                count += 1;
                sum = sum.wrapping_add(u64::from(d.payload[0]));
            }
            Some(Recv::Gap(g)) => return Err(format!("the merge reported a gap {g:?} in a whole journal").into()),
            None => {}
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    std::hint::black_box(sum);
    if count != n {
        return Err(format!("the merge delivered {count} of {n} messages").into());
    }
    Ok(n as f64 / secs)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Paired rounds over one journal of `n` messages.
pub fn run(n: u64, ticks_per_ns: f64) -> Result<CatchUp, Box<dyn Error>> {
    let tmp = TempDir::new(&format!("lab-catch-up-{}", std::process::id()));
    let dir = tmp.path();
    crate::bench::python_read::write_journal(dir, n, ticks_per_ns)?;
    let (mut floors, mut merges, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (f, m) = if round % 2 == 0 {
            let f = read_floor(dir, n)?;
            (f, merge(dir, n)?)
        } else {
            let m = merge(dir, n)?;
            (read_floor(dir, n)?, m)
        };
        floors.push(f);
        merges.push(m);
        ratios.push(m / f);
    }
    drop(tmp);
    let (lo, hi) = ratios.iter().fold((f64::MAX, 0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
    Ok(CatchUp {
        messages: n,
        rounds: ROUNDS,
        journal_read_msgs_per_s: median(floors),
        merge_msgs_per_s: median(merges),
        x_floor: median(ratios),
        x_min: lo,
        x_max: hi,
    })
}
