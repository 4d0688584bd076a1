//! The feed's book repair on deterministic schedules: a generated day through the handler with
//! runs of messages lost for good, the venue's book served by a fake service, the loop and the
//! helper stepped at chosen moments (the venue book waiting while the loop goes on, a book one
//! message too old, a new loss while catching up, a ring that fills). Each day ends with the
//! feed's book, the helper's, and a trader's that recovered at every `FeedGap` from the helper's
//! snapshots all equal to the venue's whole book.
// A day's list of lost runs often holds one run (not a range's values).
#![allow(clippy::single_range_in_vec_init)]
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tickbus_codecs::book::{OrderBook, SnapshotLoader, Step};
use tickbus_codecs::md::SnapshotOrders;
use tickbus_codecs::normalize::Normalizer;
use tickbus_codecs::synth::{DayConfig, DayGenerator};
use tickbus_codecs::{decode, AnyMessage, Message};

use super::glimpse::{self, GlimpseError};
use super::repair::{self, BookRepair};
use super::repair_helper::{BookSource, RepairHelper};
use super::{Arbiter, ArbiterOptions, FeedHandler};
use crate::ring::{HeapMemory, RingReader, RingWriter};
use crate::snapshot::tap;
use crate::{Mode, Publisher, Recv, RingConfig, StartAt};

type Heap = Publisher<Arc<HeapMemory>>;

fn ring(stream: u32, payload: usize, slots: usize) -> (Heap, RingReader<Arc<HeapMemory>>) {
    let cfg = RingConfig { max_consumers: 1, ..RingConfig::with_clock(Mode::Lossy, stream, payload, slots, 1.0) };
    let mem = HeapMemory::new(cfg.ring_bytes());
    let w = RingWriter::create(mem.clone(), &cfg, 1, 0).unwrap();
    (Publisher::new(w), RingReader::observer(mem, StartAt::Oldest).unwrap())
}

/// The venue: its book after each message it sent, and one a message behind (a service that
/// answers with a book older than the feed's loss).
struct Venue {
    now: OrderBook,
    behind: OrderBook,
    /// The book `ahead_by` messages past what was sent (a service that answers before the lines
    /// have brought those messages), and its sequence.
    ahead: OrderBook,
    ahead_next: u64,
    ahead_by: u64,
    sent: u64,
    /// Fetches still to answer with the book a message behind.
    stale: u32,
    /// Fetches still to answer with the book as it is but of another session.
    other_session: u32,
}

/// The session the venue's lines carry.
const SESSION: &[u8; 10] = b"000000001A";

struct FakeService(Arc<Mutex<Venue>>);

impl BookSource for FakeService {
    fn fetch(&mut self, buf: &mut Vec<u8>) -> Result<(), GlimpseError> {
        let mut v = self.0.lock().unwrap();
        if v.stale > 0 {
            v.stale -= 1;
            glimpse::encode(&v.behind, SESSION, v.sent, buf);
        } else if v.other_session > 0 {
            // The smallest state that could fool the repair: the right book at the right
            // sequence, only its session one character apart.
            v.other_session -= 1;
            glimpse::encode(&v.now, b"000000001B", v.sent + 1, buf);
        } else if v.ahead_by > 0 {
            glimpse::encode(&v.ahead, SESSION, v.ahead_next, buf);
        } else {
            glimpse::encode(&v.now, SESSION, v.sent + 1, buf);
        }
        Ok(())
    }
}

/// One day's schedule.
struct Day {
    messages: usize,
    /// Runs of sequences both lines lost (published as a gap after their last).
    lost: Vec<std::ops::Range<u64>>,
    /// The loop's repair upkeep every this many messages.
    poll_every: usize,
    /// The helper's step every this many messages.
    helper_every: usize,
    ring: usize,
    stale: u32,
    other_session: u32,
    ahead: u64,
}

struct Outcome {
    venue: u64,
    feed: u64,
    helper: u64,
    trader: u64,
    counts: repair::RepairCounts,
    fetched: u64,
    too_old: u64,
    other_session: u64,
    repairs: u64,
}

fn run(day: Day) -> Outcome {
    let mut g = DayGenerator::new(DayConfig::new(11, 6, day.messages as u64));
    let itch: Vec<Vec<u8>> = (0..day.messages).map(|_| g.next_message().expect("long enough").to_vec()).collect();
    let venue = Arc::new(Mutex::new(Venue {
        now: OrderBook::with_capacity(1 << 14, 64),
        behind: OrderBook::with_capacity(1 << 14, 64),
        ahead: OrderBook::with_capacity(1 << 14, 64),
        ahead_next: 1,
        ahead_by: day.ahead,
        sent: 0,
        stale: day.stale,
        other_session: day.other_session,
    }));
    let (md, mut md_reader) = ring(1, 128, 1 << 16);
    let (snaps, mut snap_reader) = ring(5, SnapshotOrders::LEN, 1 << 14);
    let mut snaps = snaps;
    let (t, mut archive) = tap::channel(1 << 16, Arc::default());
    let (r, ends): (BookRepair, _) = repair::channel(day.ring);
    let norm = Normalizer::with_capacity(1 << 14, 64);
    let mut h = FeedHandler::new(Arbiter::new(ArbiterOptions::default()), norm, md).snapshot_tap(t).repair(r);
    let service = FakeService(venue.clone());
    let mut helper = RepairHelper::new(ends, service, OrderBook::with_capacity(1 << 14, 64), 1 << 14, 64, 1 << 20);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut step_helper = |helper: &mut RepairHelper<FakeService>, snaps: &mut Heap| {
        helper.step(&mut archive, 4096, Instant::now()).unwrap();
        if helper.take_publish_now() {
            assert!(helper.whole());
            helper_publish(helper, snaps, &stop);
        }
    };
    for k in 1..=day.messages as u64 {
        {
            let mut v = venue.lock().unwrap();
            let m = tickbus_codecs::itch::parse(&itch[k as usize - 1], k).unwrap();
            let _ = v.now.apply(&m);
            if k > 1 {
                let prev = tickbus_codecs::itch::parse(&itch[k as usize - 2], k - 1).unwrap();
                let _ = v.behind.apply(&prev);
            }
            v.sent = k;
            if day.ahead > 0 {
                // The book ahead holds the messages up to k + ahead (at most the day's).
                while v.ahead_next <= (k + day.ahead).min(day.messages as u64) {
                    let j = v.ahead_next;
                    let m = tickbus_codecs::itch::parse(&itch[j as usize - 1], j).unwrap();
                    let _ = v.ahead.apply(&m);
                    v.ahead_next += 1;
                }
            }
        }
        match day.lost.iter().find(|r| r.contains(&k)) {
            Some(r) if k + 1 == r.end => h.on_gap(r.start, r.end, Some(SESSION), 0).unwrap(),
            Some(_) => {}
            None => h.on_message(&itch[k as usize - 1], k, 0).unwrap(),
        }
        if (k as usize).is_multiple_of(day.poll_every) {
            h.poll_repair();
        }
        if (k as usize).is_multiple_of(day.helper_every) {
            step_helper(&mut helper, &mut snaps);
        }
    }
    // The day is over: upkeep until the repair is done (bounded in time: a book too old is
    // fetched again after a pause).
    let until = Instant::now() + std::time::Duration::from_secs(10);
    while (h.repairing() || !helper.whole()) && Instant::now() < until {
        h.poll_repair();
        step_helper(&mut helper, &mut snaps);
    }
    assert!(helper.whole() && !h.repairing(), "the repair ended");
    helper.step(&mut archive, 1 << 20, Instant::now()).unwrap();
    helper_publish(&mut helper, &mut snaps, &stop);
    let trader = trader_book(&mut md_reader, &mut snap_reader);
    let v = venue.lock().unwrap();
    let s = helper.stats().clone();
    Outcome {
        venue: v.now.digest(),
        feed: h.book().digest(),
        helper: helper.book().digest(),
        trader,
        counts: h.repair_counts().unwrap(),
        fetched: s.fetched,
        too_old: s.too_old,
        other_session: s.other_session,
        repairs: s.repairs,
    }
}

fn helper_publish(h: &mut RepairHelper<FakeService>, p: &mut Heap, stop: &std::sync::atomic::AtomicBool) {
    assert!(h.publish(p, stop).unwrap());
}

/// A trader on the market data from the start: at each `FeedGap` it drops its book and waits
/// for the first whole snapshot at or past the gap, then applies the market data from its
/// position on.
fn trader_book(md: &mut RingReader<Arc<HeapMemory>>, snaps: &mut RingReader<Arc<HeapMemory>>) -> u64 {
    // Every snapshot the helper made, whole, with its position.
    let mut loader = SnapshotLoader::new();
    let mut scratch = OrderBook::with_capacity(1 << 14, 64);
    let (mut made, mut chunks) = (Vec::new(), Vec::new());
    while let Some(Recv::Message(m)) = snaps.try_recv() {
        let chunk = *SnapshotOrders::parse(m.payload).unwrap();
        if let Ok(Step::Complete(l)) = loader.offer(&mut scratch, &chunk) {
            assert_eq!(l.lost, 0, "the helper publishes only a whole book");
            made.push(l.as_of);
        }
        chunks.push(chunk);
    }
    let mut msgs = Vec::new();
    while let Some(Recv::Message(m)) = md.try_recv() {
        msgs.push((m.position, m.payload.to_vec()));
    }
    let mut book = OrderBook::with_capacity(1 << 14, 64);
    let mut skip_below = 0;
    for (position, payload) in &msgs {
        if *position < skip_below {
            continue;
        }
        match decode(payload).unwrap() {
            AnyMessage::FeedGap(_) => {
                // The first snapshot at or past the gap: load it again from the stream.
                let as_of = *made.iter().find(|as_of| **as_of > *position).expect("a snapshot after the gap");
                load_snapshot_at(&chunks, as_of, &mut book);
                skip_below = as_of;
            }
            m => {
                let _ = book.apply_md(&m);
            }
        }
    }
    book.digest()
}

/// Loads the snapshot at `as_of` from the chunks the stream carried.
fn load_snapshot_at(chunks: &[SnapshotOrders], as_of: u64, book: &mut OrderBook) {
    let mut loader = SnapshotLoader::new();
    for c in chunks.iter().filter(|c| c.as_of == as_of) {
        if let Ok(Step::Complete(_)) = loader.offer(book, c) {
            return;
        }
    }
    panic!("no whole snapshot at {as_of}");
}

fn day(lost: Vec<std::ops::Range<u64>>) -> Day {
    Day { messages: 6_000, lost, poll_every: 1, helper_every: 1, ring: 1 << 12, stale: 0, other_session: 0, ahead: 0 }
}

fn assert_whole(o: &Outcome) {
    assert_eq!(o.feed, o.venue, "the feed's book is the venue's");
    assert_eq!(o.helper, o.venue, "the helper's book is the venue's");
    assert_eq!(o.trader, o.venue, "the trader's book is the venue's");
}

#[test]
fn a_loss_is_repaired_with_the_venues_book_and_the_trader_recovers_from_the_snapshot_after_it() {
    let o = run(day(vec![1_000..1_040]));
    assert_whole(&o);
    assert_eq!((o.counts.losses, o.counts.repaired, o.repairs), (1, 1, 1));
    // Without a repair the feed's book would not be the venue's: the test can fail.
    let mut d = day(vec![1_000..1_040]);
    d.poll_every = usize::MAX;
    d.helper_every = usize::MAX;
    let o = run_without_upkeep(d);
    assert_ne!(o, 0, "lost messages leave the feed's book wrong until repaired");
}

/// The feed's book after a day whose repair is never stepped, compared with the venue's: 0
/// when equal.
fn run_without_upkeep(day: Day) -> u64 {
    let mut g = DayGenerator::new(DayConfig::new(11, 6, day.messages as u64));
    let (md, _r) = ring(1, 128, 1 << 16);
    let mut h = FeedHandler::new(Arbiter::new(ArbiterOptions::default()), Normalizer::with_capacity(1 << 14, 64), md);
    let mut venue = OrderBook::with_capacity(1 << 14, 64);
    for k in 1..=day.messages as u64 {
        let m = g.next_message().unwrap().to_vec();
        let _ = venue.apply(&tickbus_codecs::itch::parse(&m, k).unwrap());
        match day.lost.iter().find(|r| r.contains(&k)) {
            Some(r) if k + 1 == r.end => h.on_gap(r.start, r.end, Some(SESSION), 0).unwrap(),
            Some(_) => {}
            None => h.on_message(&m, k, 0).unwrap(),
        }
    }
    u64::from(h.book().digest() != venue.digest())
}

#[test]
fn the_loop_catches_the_venues_book_up_while_the_market_data_goes_on() {
    // The book waits in the queue for 97 messages, and is caught up a bounded number a poll.
    let mut d = day(vec![2_000..2_010, 4_000..4_001]);
    (d.poll_every, d.helper_every) = (97, 5);
    let o = run(d);
    assert_whole(&o);
    assert_eq!(o.counts.repaired, 2);
    assert!(o.counts.last_caught_up > 0, "messages came while the venue's book waited");
}

#[test]
fn a_venue_book_one_message_older_than_the_loss_is_refused_and_another_fetched() {
    let mut d = day(vec![3_000..3_001]);
    d.stale = 1;
    let o = run(d);
    assert_whole(&o);
    assert_eq!((o.too_old, o.fetched), (1, 2));
}

#[test]
fn a_venue_book_of_another_session_is_refused_and_the_feeds_session_fetched() {
    let mut d = day(vec![3_000..3_001]);
    d.other_session = 1;
    let o = run(d);
    assert_whole(&o);
    assert_eq!((o.other_session, o.fetched, o.repairs), (1, 1, 1));
}

#[test]
fn a_new_loss_while_catching_up_starts_over_and_a_ring_that_fills_starts_over_from_there() {
    // The second loss comes while the first's book waits (the loop polls every 300).
    let mut d = day(vec![1_000..1_005, 1_100..1_103]);
    (d.poll_every, d.helper_every) = (300, 1);
    let o = run(d);
    assert_whole(&o);
    assert!(o.counts.refused >= 1, "the first book was refused: {:?}", o.counts);
    // A ring of 8 fills while the book waits 300 messages.
    let mut d = day(vec![1_000..1_005]);
    (d.poll_every, d.helper_every, d.ring) = (300, 1, 8);
    let o = run(d);
    assert_whole(&o);
    assert!(o.counts.ring_full >= 1, "{:?}", o.counts);
}

#[test]
fn a_loss_that_runs_to_the_days_end_is_repaired_too() {
    // Nothing is delivered after it: the venue's book (as of the day's end) waits for nothing.
    let o = run(day(vec![5_990..6_001]));
    assert_whole(&o);
    assert_eq!(o.counts.repaired, 1, "{:?}", o.counts);
}

#[test]
fn a_venue_book_ahead_of_the_lines_waits_for_the_messages_it_holds_and_takes_none_twice() {
    // The service answers with the book 40 messages past what the lines brought (a packet not
    // yet on the wire): swapped in only once those have come, and then they are skipped.
    let mut d = day(vec![2_000..2_010, 4_500..4_501]);
    d.ahead = 40;
    let o = run(d);
    assert_whole(&o);
    assert_eq!(o.counts.repaired, 2, "{:?}", o.counts);
}

/// The loop's side alone, stepped by hand: the helper's queue read and answered here.
mod by_hand {
    use super::*;
    use crate::feed::repair::{ToFeed, ToHelper};

    fn itch_day(n: usize) -> Vec<Vec<u8>> {
        let mut g = DayGenerator::new(DayConfig::new(11, 6, n as u64));
        (0..n).map(|_| g.next_message().expect("long enough").to_vec()).collect()
    }

    fn venue(itch: &[Vec<u8>], upto: u64) -> Box<OrderBook> {
        let mut b = Box::new(OrderBook::with_capacity(1 << 14, 64));
        for (i, m) in itch.iter().take(upto as usize).enumerate() {
            let _ = b.apply(&tickbus_codecs::itch::parse(m, i as u64 + 1).unwrap());
        }
        b
    }

    #[test]
    fn a_loss_while_the_venues_book_is_caught_up_sends_it_back_and_starts_over() {
        let itch = itch_day(3_000);
        let (mut r, mut ends) = repair::channel(1 << 12);
        let mut norm = Normalizer::with_capacity(1 << 14, 64);
        r.on_lost(100, Some(*SESSION));
        for k in 100..=1_000u64 {
            r.on_message(k, &itch[k as usize - 1]);
        }
        assert!(matches!(ends.from_feed.pop(), Ok(ToHelper::Lost { need: 100, session: Some(s) }) if &s == SESSION));
        r.poll(&mut norm, 0); // a poll before the book comes: no message kept since this one
                              // The venue's book as of 100: 901 kept messages to apply, 64 a poll (none came since).
        ends.to_feed.push(ToFeed::Book { book: venue(&itch, 99), next: 100, session: *SESSION }).ok().unwrap();
        r.poll(&mut norm, 0);
        assert!(r.repairing());
        assert!(ends.from_feed.pop().is_err(), "still catching up: nothing sent");
        // A second loss now: the book goes back with what is wanted instead.
        r.on_lost(1_010, Some(*SESSION));
        match ends.from_feed.pop() {
            Ok(ToHelper::Refused { need: 1_010, .. }) => {}
            _ => panic!("the book was not sent back"),
        }
        assert_eq!(r.counts().refused, 1);
        // Nothing was swapped in: the normaliser's book is still its own (empty).
        assert_eq!(norm.book().resting_orders(), 0);
    }

    /// The feed moves to a new session while a repair of the old one waits for the venue's
    /// book: the repair starts over from the new session's first message, the helper is told
    /// the new session, and a book of the old one that arrives after is refused, though its
    /// sequence is past what is needed.
    #[test]
    fn a_new_session_during_a_repair_starts_it_over_and_refuses_a_book_of_the_old_one() {
        let itch = itch_day(3_000);
        let (mut r, mut ends) = repair::channel(1 << 12);
        let mut norm = Normalizer::with_capacity(1 << 14, 64);
        const NEW: [u8; 10] = *b"000000002A";
        r.on_session(*SESSION);
        r.on_lost(100, Some(*SESSION));
        assert!(matches!(ends.from_feed.pop(), Ok(ToHelper::Lost { need: 100, .. })));
        r.on_session(NEW);
        match ends.from_feed.pop() {
            Ok(ToHelper::Lost { need: 1, session: Some(s) }) if s == NEW => {}
            _ => panic!("the repair did not start over in the new session"),
        }
        for k in 1..=300u64 {
            r.on_message(k, &itch[k as usize - 1]);
        }
        // The old session's book, fetched before the change, at a sequence past the need.
        ends.to_feed.push(ToFeed::Book { book: venue(&itch, 200), next: 201, session: *SESSION }).ok().unwrap();
        r.poll(&mut norm, 0);
        match ends.from_feed.pop() {
            Ok(ToHelper::Refused { need: 1, session: Some(s), .. }) if s == NEW => {}
            _ => panic!("a book of the session left was not refused"),
        }
        assert!(r.repairing() && norm.book().resting_orders() == 0, "nothing swapped in");
        // The new session's book is taken.
        ends.to_feed.push(ToFeed::Book { book: venue(&itch, 200), next: 201, session: NEW }).ok().unwrap();
        for _ in 0..10 {
            r.poll(&mut norm, 5);
        }
        assert!(!r.repairing());
        assert_eq!(norm.book().digest(), venue(&itch, 300).digest());
    }

    #[test]
    fn a_book_ahead_is_swapped_in_only_once_the_messages_it_holds_have_come() {
        let itch = itch_day(3_000);
        let (mut r, mut ends) = repair::channel(1 << 12);
        let mut norm = Normalizer::with_capacity(1 << 14, 64);
        r.on_lost(100, Some(*SESSION));
        for k in 100..=200u64 {
            r.on_message(k, &itch[k as usize - 1]);
        }
        let _ = ends.from_feed.pop();
        // The venue's book holds up to 250; the lines have brought up to 200.
        ends.to_feed.push(ToFeed::Book { book: venue(&itch, 250), next: 251, session: *SESSION }).ok().unwrap();
        for _ in 0..10 {
            r.poll(&mut norm, 7);
        }
        assert!(r.repairing(), "swapped in before 201..=250 came");
        for k in 201..=249u64 {
            r.on_message(k, &itch[k as usize - 1]);
            r.poll(&mut norm, 7);
        }
        assert!(r.repairing(), "one message it holds has still not come");
        r.on_message(250, &itch[249]);
        r.poll(&mut norm, 9);
        assert!(!r.repairing());
        match ends.from_feed.pop() {
            Ok(ToHelper::Swapped { next: 251, position: 9, .. }) => {}
            _ => panic!("not swapped at the right place"),
        }
        assert_eq!(r.counts().last_caught_up, 0, "every message kept was in the venue's book");
        assert_eq!(norm.book().digest(), venue(&itch, 250).digest());
    }
}
