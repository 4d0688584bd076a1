//! Serving a journal to a remote late joiner: every record from a position on, published on a
//! reliable stream as the recorder goes on writing it (`tickbus journal serve`; read on the
//! other side by [`crate::merge::StreamArchive`], whose docs say why a stream and not RDMA
//! READs of segments). Messages go out as they are (a tickbus message carries its own stream
//! position); a gap record goes out as a `FeedGap` flagged
//! [`tickbus_codecs::FLAG_RECORDING_GAP`]. Off every hot path: it follows the journal
//! ([`JournalTail`]) and sleeps briefly when there is nothing new.
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tickbus_codecs::md::FeedGap;
use tickbus_codecs::{Message, FLAG_RECORDING_GAP};
use zerocopy::IntoBytes;

use crate::journal::{JournalError, JournalTail};
use crate::merge::{Archive, Entry};
use crate::stream::{Publish, Retry};

/// What a serve sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Served {
    /// Messages published.
    pub messages: u64,
    /// Gap records published as flagged `FeedGap`s.
    pub gaps: u64,
    /// The position after the last record served.
    pub position: u64,
}

/// Why serving stopped early.
#[derive(Debug, thiserror::Error)]
pub enum ServeError<E: std::error::Error + 'static> {
    /// The journal could not be read further (it names the file and offset).
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The serving stream failed.
    #[error("the serving stream failed: {0}")]
    Publish(E),
}

/// Publishes `tail`'s records on `p` until `stop` is set, or (with `idle_end`) until the
/// journal has had nothing new for that long (the recorder finished). Waits while the stream
/// is full (the joiner takes at its own pace), with the stream's upkeep meanwhile.
pub fn serve<P: Publish>(
    tail: &mut JournalTail,
    p: &mut P,
    stop: &AtomicBool,
    idle_end: Option<Duration>,
    served: &mut Served,
) -> Result<(), ServeError<P::Error>> {
    let mut quiet_since: Option<Instant> = None;
    while !stop.load(Ordering::Acquire) {
        let Some(e) = tail.peek()? else {
            let since = *quiet_since.get_or_insert_with(Instant::now);
            if idle_end.is_some_and(|d| since.elapsed() >= d) {
                return Ok(());
            }
            p.idle();
            std::thread::sleep(Duration::from_micros(50));
            continue;
        };
        quiet_since = None;
        let sent = match e {
            Entry::Message { len, .. } => {
                let payload = tail.payload();
                if payload.len() != len {
                    // The segment changed under its map after the record was checked.
                    let reason = format!("the record at position {} changed after it was read", e.position());
                    return Err(JournalError::Unreadable { path: tail.dir().to_owned(), reason }.into());
                }
                publish_waiting(p, payload, stop).map_err(ServeError::Publish)?
            }
            Entry::Gap { position, count } => {
                let mut g = FeedGap::new();
                (g.first_sequence, g.count) = (position, count);
                g.header.flags |= FLAG_RECORDING_GAP;
                publish_waiting(p, g.as_bytes(), stop).map_err(ServeError::Publish)?
            }
        };
        if !sent {
            break; // stopped while the stream was full
        }
        match e {
            Entry::Message { .. } => served.messages += 1,
            Entry::Gap { .. } => served.gaps += 1,
        }
        served.position = e.end();
        tail.take();
    }
    Ok(())
}

/// Publishes, retrying while a retry helps; false if stopped first. A stream that stays full
/// (a joiner that cut over reads its archive only to fill a lap) is waited on sleeping, not
/// spinning: serving is not worth a core. Also the snapshot maker's (`crate::snapshot`).
pub(crate) fn publish_waiting<P: Publish>(p: &mut P, bytes: &[u8], stop: &AtomicBool) -> Result<bool, P::Error> {
    let mut spins = 0u32;
    loop {
        match p.publish(bytes) {
            Ok(_) => return Ok(true),
            Err(e) if e.retry_helps() => {
                if stop.load(Ordering::Acquire) {
                    return Ok(false);
                }
                p.idle();
                spins = spins.saturating_add(1);
                if spins < 10_000 {
                    std::hint::spin_loop();
                } else {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tickbus_codecs::md::OrderAdd;

    use super::*;
    use crate::journal::{JournalMeta, JournalOptions, JournalWriter};
    use crate::merge::{MergeOptions, ReplayMerge, StreamArchive};
    use crate::ring::{HeapMemory, RingConfig, RingReader, RingWriter, StartAt};
    use crate::{Mode, Publisher, Recv, Subscriber};

    fn add(position: u64) -> OrderAdd {
        let mut m = OrderAdd::new();
        m.order_id = 1000 + position;
        m.header_mut().stamp(1, position, 0);
        m
    }

    /// A journal of 0..300 with a gap record at 100..105 and, at 200, the feed's own `FeedGap`
    /// (a message of the stream), served through a reliable ring of 16 slots (flow control at
    /// every turn) into a merge whose live stream has nothing: the merge delivers every message
    /// at its position, the gap record as a gap, and the feed's `FeedGap` as a message.
    #[test]
    fn a_served_journal_reaches_a_late_joiner_with_positions_and_gaps_exact() {
        let dir = std::env::temp_dir().join(format!("tickbus-serve-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let meta = JournalMeta { stream_id: 1, source: "test".into(), ticks_per_ns: crate::time::ticks_per_ns() };
        let mut w = JournalWriter::open(&dir, meta, JournalOptions::default()).unwrap();
        let mut feed_gap = FeedGap::new();
        (feed_gap.first_sequence, feed_gap.count) = (7, 2);
        feed_gap.header_mut().stamp(1, 200, 0);
        for s in 0..300u64 {
            match s {
                100 => w.append_gap(100, 5, 0).unwrap(),
                101..=104 => {}
                200 => w.append(200, 0, 0, feed_gap.as_bytes()).unwrap(),
                _ => w.append(s, 0, 0, add(s).as_bytes()).unwrap(),
            }
        }
        w.close().unwrap();

        let cfg = RingConfig::for_payload(Mode::Reliable, 9, 64, 16);
        let mem = HeapMemory::new(cfg.ring_bytes());
        let mut p = Publisher::new(RingWriter::create(mem.clone(), &cfg, 1, 0).unwrap());
        let served_sub = Subscriber::new(RingReader::consumer_by_token(mem, 1).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let server = {
            let (dir, stop) = (dir.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut tail = JournalTail::open(&dir, 0).unwrap();
                let mut served = Served::default();
                serve(&mut tail, &mut p, &stop, Some(Duration::from_millis(300)), &mut served).unwrap();
                served
            })
        };
        let live_cfg = RingConfig::for_payload(Mode::Lossy, 1, 64, 64);
        let live_mem = HeapMemory::new(live_cfg.ring_bytes());
        let _live_w = RingWriter::create(live_mem.clone(), &live_cfg, 1, 0).unwrap();
        let live = Subscriber::new(RingReader::observer(live_mem, StartAt::Latest).unwrap());
        let mut m = ReplayMerge::new(live, StreamArchive::new(served_sub), 0, MergeOptions::default()).unwrap();
        let (mut got, mut gaps) = (Vec::new(), Vec::new());
        let deadline = Instant::now() + Duration::from_secs(30);
        use crate::stream::Subscribe;
        while m.position() < 300 {
            assert!(Instant::now() < deadline, "stuck at {} ({:?})", m.position(), m.stats());
            match m.try_recv().unwrap() {
                Some(Recv::Message(d)) => got.push((d.position, d.payload.to_vec())),
                Some(Recv::Gap(g)) => gaps.push((g.expected, g.resumed_at)),
                None => {}
            }
        }
        let served = server.join().unwrap();
        assert_eq!((served.messages, served.gaps, served.position), (295, 1, 300));
        assert_eq!(gaps, [(100, 105)]);
        assert_eq!(got.len(), 295);
        for (pos, bytes) in &got {
            let want = if *pos == 200 { feed_gap.as_bytes().to_vec() } else { add(*pos).as_bytes().to_vec() };
            assert_eq!(bytes, &want, "message {pos}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
