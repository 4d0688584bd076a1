//! The cut-over, proved by deterministic schedules: one thread plays publisher, recorder and
//! late joiner in an order a seeded generator picks (thousands of schedules, each replayable
//! from its seed), on a real lossy ring small enough to be lapped at every turn and a model
//! archive that lags the ring by a chosen amount. The moments that matter (the archive exactly
//! at the live head, one behind, the live reader lapped during catch-up and again after the
//! cut-over, aborted claims at the seam) all happen within the first few hundred seeds; named
//! tests pin the tightest ones.
use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::ring::{HeapMemory, RingConfig, RingReader, RingWriter, StartAt};
use crate::Mode;
use crate::Subscriber;

type Live = Subscriber<Arc<HeapMemory>>;

/// A recorder's view: every position the ring published (aborted claims leave none), of which
/// the first `visible` are readable so far; `lost` are positions it recorded as a gap.
#[derive(Default)]
struct Model {
    published: Vec<(u64, bool)>, // (position, aborted)
    visible: usize,
    lost: BTreeSet<u64>,
}

struct VecArchive {
    model: std::rc::Rc<std::cell::RefCell<Model>>,
    at: usize,
    payload: Vec<u8>,
    source: Option<u64>,
}

impl Archive for VecArchive {
    type Error = Infallible;
    fn peek(&mut self) -> Result<Option<Entry>, Infallible> {
        let m = self.model.borrow();
        let mut k = self.at;
        while k < m.visible && m.published[k].1 {
            k += 1; // aborted: the recorder records nothing
        }
        if k >= m.visible {
            return Ok(None);
        }
        let p = m.published[k].0;
        if m.lost.contains(&p) {
            let mut n = 1;
            while k + (n as usize) < m.visible && m.lost.contains(&(p + n)) {
                n += 1;
            }
            return Ok(Some(Entry::Gap { position: p, count: n }));
        }
        self.payload = payload(p).to_vec();
        Ok(Some(Entry::Message { position: p, len: self.payload.len() }))
    }
    fn take(&mut self) {
        let m = self.model.borrow();
        while self.at < m.visible && m.published[self.at].1 {
            self.at += 1;
        }
        let p = m.published[self.at].0;
        if m.lost.contains(&p) {
            while self.at < m.visible && (m.lost.contains(&m.published[self.at].0) || m.published[self.at].1) {
                self.at += 1;
            }
        } else {
            self.at += 1;
        }
    }
    fn payload(&self) -> &[u8] {
        &self.payload
    }
    fn source_id(&self) -> Option<u64> {
        self.source
    }
}

fn payload(p: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&p.to_le_bytes());
    b[8..].copy_from_slice(&(!p).to_le_bytes());
    b
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: a deterministic schedule per seed.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct World {
    mem: Arc<HeapMemory>,
    w: RingWriter<Arc<HeapMemory>>,
    model: std::rc::Rc<std::cell::RefCell<Model>>,
}

impl World {
    fn new(slots: usize) -> World {
        let cfg = RingConfig::for_payload(Mode::Lossy, 7, 16, slots);
        let mem = HeapMemory::new(cfg.ring_bytes());
        let w = RingWriter::create(mem.clone(), &cfg, 100, 0).expect("create");
        World { mem, w, model: Default::default() }
    }
    fn publish(&mut self, abort: bool) {
        let p = self.w.position();
        if abort {
            let c = self.w.try_claim(16).expect("claim");
            drop(c);
        } else {
            assert_eq!(self.w.publish(&payload(p)).unwrap(), p);
        }
        self.model.borrow_mut().published.push((p, abort));
    }
    fn record(&mut self, n: usize) {
        let mut m = self.model.borrow_mut();
        m.visible = (m.visible + n).min(m.published.len());
    }
    fn live(&self) -> Live {
        Subscriber::new(RingReader::observer(self.mem.clone(), StartAt::Latest).unwrap())
    }
    fn archive(&self) -> VecArchive {
        VecArchive { model: self.model.clone(), at: 0, payload: Vec::new(), source: None }
    }
}

/// What a merge delivered: every position, as a message or inside a gap.
#[derive(Default, Debug)]
struct Seen {
    messages: Vec<u64>,
    gaps: Vec<(u64, u64)>,
    next: Option<u64>,
}

impl Seen {
    fn poll(&mut self, m: &mut ReplayMerge<Live, VecArchive>) -> bool {
        match m.try_recv().unwrap() {
            Some(Recv::Message(d)) => {
                assert_eq!(d.payload, payload(d.position), "payload of {}", d.position);
                if let Some(n) = self.next {
                    assert!(d.position >= n, "position {} delivered after {}", d.position, n - 1);
                }
                self.next = Some(d.position + 1);
                self.messages.push(d.position);
                true
            }
            Some(Recv::Gap(g)) => {
                assert!(g.resumed_at > g.expected, "empty gap {g:?}");
                if let Some(n) = self.next {
                    assert!(g.expected >= n, "gap {g:?} overlaps what was delivered up to {}", n - 1);
                }
                self.next = Some(g.resumed_at);
                self.gaps.push((g.expected, g.resumed_at));
                true
            }
            None => false,
        }
    }
}

/// One schedule: publish, record and poll in an order the seed picks; join at a random point
/// from a random position; at the end every position from there is accounted for.
fn schedule(seed: u64, slots: usize, with_lost: bool) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut w = World::new(slots);
    let before = rng.below(3 * slots as u64) as usize;
    for _ in 0..before {
        w.publish(rng.below(10) == 0);
        let lag = rng.below(4) as usize;
        w.record(lag);
    }
    if with_lost {
        // The recorder itself lost a run of positions (it was lapped).
        let n = w.model.borrow().published.len() as u64;
        if n > 2 {
            let a = rng.below(n - 1);
            let b = (a + 1 + rng.below(3)).min(n);
            w.model.borrow_mut().lost.extend(a..b);
        }
    }
    let published = w.model.borrow().published.len() as u64;
    let from = rng.below(published + 1);
    let live = w.live();
    let mut m =
        ReplayMerge::new(live, w.archive(), from, MergeOptions::new(Duration::from_secs(60), Duration::from_secs(60)))
            .unwrap();
    let mut seen = Seen::default();
    for _ in 0..(200 + rng.below(400)) {
        match rng.below(8) {
            0..=2 => w.publish(rng.below(12) == 0),
            3..=4 => w.record(rng.below(3) as usize),
            _ => {
                for _ in 0..=rng.below(3) {
                    seen.poll(&mut m);
                }
            }
        }
    }
    // The end: one last message (so the end is not an aborted claim), the recorder catches up
    // and the joiner drains.
    w.publish(false);
    w.record(usize::MAX / 2);
    let end = w.w.position();
    for _ in 0..100_000 {
        if m.position() >= end {
            break;
        }
        seen.poll(&mut m);
    }
    assert_eq!(m.position(), end, "seed {seed}: the merge did not reach the end ({seen:?})");
    // Every position from `from` is a message, in a gap, or an aborted claim; each once.
    let model = w.model.borrow();
    let mut covered = BTreeSet::new();
    for &p in &seen.messages {
        assert!(covered.insert(p), "seed {seed}: {p} twice");
    }
    for &(a, b) in &seen.gaps {
        for p in a..b {
            assert!(covered.insert(p), "seed {seed}: {p} delivered and reported lost");
            let aborted = model.published[p as usize].1;
            assert!(
                model.lost.contains(&p) || aborted,
                "seed {seed}: {p} reported lost but the archive held it (gaps {:?})",
                seen.gaps
            );
        }
    }
    for &(p, aborted) in &model.published[from as usize..] {
        if !aborted && !model.lost.contains(&p) {
            assert!(seen.messages.contains(&p), "seed {seed}: {p} never delivered");
        }
    }
    assert!(seen.messages.iter().all(|&p| p >= from), "seed {seed}: delivered before {from}");
}

#[test]
fn thousands_of_schedules_lose_nothing_and_repeat_nothing() {
    for seed in 0..3000 {
        schedule(seed, 8, false);
    }
}

#[test]
fn schedules_with_a_ring_of_two_slots_lapped_at_every_turn() {
    for seed in 0..1500 {
        schedule(seed, 2, false);
    }
}

#[test]
fn what_the_archive_recorded_lost_is_reported_exactly_and_nothing_else() {
    for seed in 0..2000 {
        schedule(seed, 4, true);
    }
}

/// Drains `m` for at most `n` polls.
fn drain(m: &mut ReplayMerge<Live, VecArchive>, seen: &mut Seen, n: usize) {
    for _ in 0..n {
        seen.poll(m);
    }
}

#[test]
fn the_archive_exactly_at_the_live_head_cuts_over_with_no_duplicate() {
    let mut w = World::new(8);
    for _ in 0..5 {
        w.publish(false);
    }
    w.record(5);
    let mut m = ReplayMerge::new(w.live(), w.archive(), 0, MergeOptions::default()).unwrap();
    let mut seen = Seen::default();
    drain(&mut m, &mut seen, 10);
    assert_eq!(seen.messages, [0, 1, 2, 3, 4]);
    assert!(!m.is_live(), "no live message yet: still at the archive's end");
    w.publish(false); // 5: on the live ring, not yet recorded
    drain(&mut m, &mut seen, 10);
    assert_eq!(seen.messages, [0, 1, 2, 3, 4, 5]);
    assert!(m.is_live());
    assert_eq!(m.stats().cut_over, Some(5));
    assert_eq!(m.stats().from_archive, 5);
    assert_eq!(m.stats().duplicates, 0);
}

#[test]
fn a_live_message_one_ahead_of_the_archive_waits_for_the_archive() {
    let mut w = World::new(8);
    for _ in 0..3 {
        w.publish(false);
    }
    w.record(2); // the recorder is one behind: 2 is not in the archive yet
    let mut m = ReplayMerge::new(w.live(), w.archive(), 0, MergeOptions::default()).unwrap();
    let mut seen = Seen::default();
    w.publish(false); // 3 reaches the live reader, which attached at 3
    drain(&mut m, &mut seen, 10);
    assert_eq!(seen.messages, [0, 1], "3 is kept until the archive brings 2");
    assert!(!m.is_live());
    w.record(1);
    drain(&mut m, &mut seen, 10);
    assert_eq!(seen.messages, [0, 1, 2, 3]);
    assert!(m.is_live());
    assert_eq!(m.stats().cut_over, Some(3));
}

#[test]
fn a_lap_after_the_cut_over_is_filled_from_the_archive() {
    let mut w = World::new(2);
    let mut m = ReplayMerge::new(w.live(), w.archive(), 0, MergeOptions::default()).unwrap();
    let mut seen = Seen::default();
    w.publish(false);
    drain(&mut m, &mut seen, 5);
    assert!(m.is_live());
    for _ in 0..6 {
        w.publish(false); // laps the 2-slot ring: 1..=4 are gone from it
    }
    w.record(7);
    drain(&mut m, &mut seen, 20);
    assert_eq!(seen.messages, [0, 1, 2, 3, 4, 5, 6]);
    assert!(seen.gaps.is_empty());
    assert!(m.stats().filled >= 4, "{:?}", m.stats());
}

#[test]
fn an_archive_that_does_not_bring_a_position_in_time_reports_it_lost_exactly() {
    let mut w = World::new(8);
    w.publish(false);
    w.record(0); // the recorder never writes anything
    let mut m = ReplayMerge::new(w.live(), w.archive(), 0, MergeOptions::new(Duration::ZERO, Duration::ZERO)).unwrap();
    let mut seen = Seen::default();
    w.publish(false); // 1: live; 0 is nowhere now
    drain(&mut m, &mut seen, 5);
    assert_eq!(seen.gaps, [(0, 1)]);
    assert_eq!(seen.messages, [1]);
    assert_eq!(m.stats().unfilled, 1);
    assert_eq!(m.missed(), 1);
}

#[test]
fn an_archive_of_another_incarnation_is_refused() {
    let w = World::new(8);
    let mut a = w.archive();
    a.source = Some(1);
    let e = ReplayMerge::new(w.live(), a, 0, MergeOptions::default()).err().expect("refused");
    assert!(e.to_string().contains("another incarnation"), "{e}");
}

#[test]
fn receive_into_leaves_a_message_of_another_length_for_try_recv() {
    let mut w = World::new(8);
    for _ in 0..2 {
        w.publish(false);
    }
    w.record(1);
    let mut m = ReplayMerge::new(w.live(), w.archive(), 0, MergeOptions::default()).unwrap();
    let mut small = [0u8; 8];
    assert_eq!(m.try_recv_into(&mut small).unwrap(), Some(RecvInto::OtherLength { position: 0, len: 16 }));
    let mut out = [0u8; 16];
    assert_eq!(m.try_recv_into(&mut out).unwrap(), Some(RecvInto::Message { position: 0 }));
    assert_eq!(out, payload(0));
    w.publish(false); // 2 live, held; 1 from the archive first
    w.record(1);
    assert_eq!(m.try_recv_into(&mut out).unwrap(), Some(RecvInto::Message { position: 1 }));
    assert_eq!(m.try_recv_into(&mut small).unwrap(), Some(RecvInto::OtherLength { position: 2, len: 16 }));
    assert_eq!(m.try_recv_into(&mut out).unwrap(), Some(RecvInto::Message { position: 2 }));
    assert_eq!(out, payload(2));
    assert!(m.is_live());
}

#[test]
fn a_slow_archive_that_keeps_bringing_records_is_waited_for_past_the_timeout() {
    let mut w = World::new(16);
    for _ in 0..6 {
        w.publish(false);
    }
    // Nothing recorded yet; the live reader attached at 6 and gets 6 (kept).
    let opts = MergeOptions::new(Duration::from_millis(40), Duration::from_millis(40));
    let mut m = ReplayMerge::new(w.live(), w.archive(), 0, opts).unwrap();
    let mut seen = Seen::default();
    w.publish(false);
    drain(&mut m, &mut seen, 3);
    // One record every 25 ms: 150 ms in all, well past 40 ms, but never 40 ms without progress.
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(25));
        w.record(1);
        drain(&mut m, &mut seen, 3);
    }
    w.record(1);
    drain(&mut m, &mut seen, 5);
    assert!(seen.gaps.is_empty(), "{:?}", seen.gaps);
    assert_eq!(seen.messages, [0, 1, 2, 3, 4, 5, 6]);
    assert!(m.is_live());
}

/// An archive of fixed entries, one of which may fail once (as a served stream's lost
/// stretch does: the failing item is consumed) and then read on.
struct Scripted {
    entries: Vec<Result<Entry, ()>>,
    at: usize,
    payload: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
#[error("scripted failure")]
struct ScriptedError;

impl Archive for Scripted {
    type Error = ScriptedError;
    fn peek(&mut self) -> Result<Option<Entry>, ScriptedError> {
        match self.entries.get(self.at) {
            None => Ok(None),
            Some(Err(())) => {
                self.at += 1; // consumed, as a stream's would be
                Err(ScriptedError)
            }
            Some(Ok(e)) => {
                if let Entry::Message { position, .. } = *e {
                    self.payload = payload(position).to_vec();
                }
                Ok(Some(*e))
            }
        }
    }
    fn take(&mut self) {
        self.at += 1;
    }
    fn payload(&self) -> &[u8] {
        &self.payload
    }
    fn source_id(&self) -> Option<u64> {
        None
    }
}

fn msg(position: u64) -> Result<Entry, ()> {
    Ok(Entry::Message { position, len: 16 })
}

fn scripted(w: &World, entries: Vec<Result<Entry, ()>>) -> ReplayMerge<Live, Scripted> {
    let a = Scripted { entries, at: 0, payload: Vec::new() };
    ReplayMerge::new(w.live(), a, 0, MergeOptions::new(Duration::ZERO, Duration::ZERO)).unwrap()
}

fn drain_any<A: Archive>(m: &mut ReplayMerge<Live, A>, n: usize) -> (Vec<u64>, Vec<(u64, u64)>) {
    let (mut msgs, mut gaps) = (Vec::new(), Vec::new());
    for _ in 0..n {
        match m.try_recv().unwrap() {
            Some(Recv::Message(d)) => msgs.push(d.position),
            Some(Recv::Gap(g)) => gaps.push((g.expected, g.resumed_at)),
            None => {}
        }
    }
    (msgs, gaps)
}

#[test]
fn an_archive_that_begins_after_the_position_asked_for_is_a_gap_not_silence() {
    // A served journal started at 3 for a joiner that asked for 0.
    let w = World::new(8);
    let mut m = scripted(&w, vec![msg(3), msg(4)]);
    let (msgs, gaps) = drain_any(&mut m, 5);
    assert_eq!(gaps, [(0, 3)]);
    assert_eq!(msgs, [3, 4]);
}

#[test]
fn a_failed_archive_is_never_read_past_and_what_it_owed_is_a_gap() {
    // The archive fails at what would be 2 and would then offer 3: 3 must not follow 1.
    let mut w = World::new(8);
    for _ in 0..5 {
        w.publish(false);
    }
    let mut m = scripted(&w, vec![msg(0), msg(1), Err(()), msg(3), msg(4)]);
    w.publish(false); // 5, live
    let (msgs, gaps) = drain_any(&mut m, 10);
    assert_eq!(msgs, [0, 1, 5]);
    assert_eq!(gaps, [(2, 5)]);
    assert!(m.archive_failure().is_some());
    assert_eq!(m.stats().unfilled, 3);
}

#[test]
fn records_claiming_impossible_positions_fail_the_archive_without_a_panic() {
    for bad in [
        Entry::Message { position: u64::MAX, len: 16 },
        Entry::Gap { position: 2, count: 0 },
        Entry::Gap { position: 2, count: u64::MAX - 1 },
    ] {
        let mut w = World::new(8);
        for _ in 0..3 {
            w.publish(false);
        }
        let mut m = scripted(&w, vec![msg(0), msg(1), Ok(bad)]);
        w.publish(false); // 3, live
        let (msgs, gaps) = drain_any(&mut m, 10);
        assert_eq!(msgs, [0, 1, 3], "{bad:?}");
        assert_eq!(gaps, [(2, 3)], "{bad:?}");
        assert!(m.archive_failure().unwrap().contains("not a real stream"), "{bad:?}");
        assert!(m.is_live());
    }
}

#[test]
fn once_live_a_stalled_archive_blinds_the_reader_once_not_at_every_lap() {
    let mut w = World::new(2);
    let opts = MergeOptions::new(Duration::ZERO, Duration::from_millis(30));
    let mut m = ReplayMerge::new(w.live(), w.archive(), 0, opts).unwrap();
    w.publish(false);
    w.record(1);
    w.publish(false); // 1: live only, where the merge cuts over
    let _ = drain_any(&mut m, 4);
    assert!(m.is_live());
    // The recorder stops; the ring laps the reader twice.
    for round in 0..2 {
        for _ in 0..5 {
            w.publish(false);
        }
        let t0 = std::time::Instant::now();
        let mut gaps = Vec::new();
        while gaps.is_empty() {
            gaps = drain_any(&mut m, 1).1;
            assert!(t0.elapsed() < Duration::from_secs(5));
        }
        let waited = t0.elapsed();
        match round {
            0 => assert!(waited >= Duration::from_millis(30), "the first lap waits for the archive: {waited:?}"),
            _ => assert!(waited < Duration::from_millis(30), "the second is reported at once: {waited:?}"),
        }
    }
}
