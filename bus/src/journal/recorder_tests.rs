//! The recorder against in-memory taps: a reliable source recorded whole through a queue small
//! enough to wrap and fill, across segment rollovers; a lossy source whose losses become gap
//! records; malformed records refused by the journal.
use super::*;
use crate::journal::tests::{meta, payload, read_all, small, Dir};
use crate::journal::{JournalReader, JournalWriter, Kind};

/// Messages `0..n` of varying sizes; every `gap_every`-th position (if set) is reported lost
/// instead of delivered, as a lapped lossy subscriber would.
struct FakeTap {
    next: u64,
    window: u64,
    n: u64,
    reliable: bool,
    gap_every: Option<u64>,
    released: u64,
    buf: Vec<u8>,
    /// Every message this long (`payload` cut or padded), instead of `payload`'s lengths.
    fixed_len: Option<usize>,
    max_payload: usize,
}

impl FakeTap {
    fn new(n: u64, reliable: bool, gap_every: Option<u64>) -> FakeTap {
        FakeTap {
            next: 0,
            window: 1024,
            n,
            reliable,
            gap_every,
            released: 0,
            buf: Vec::new(),
            fixed_len: None,
            max_payload: 128,
        }
    }

    fn payload(&self, seq: u64) -> Vec<u8> {
        let mut p = payload(seq);
        if let Some(len) = self.fixed_len {
            p.resize(len, seq as u8);
        }
        p
    }
}

impl Tap for FakeTap {
    fn take(&mut self, f: &mut dyn FnMut(Taken<'_>)) -> Result<bool, SourceError> {
        if self.next == self.n {
            return Ok(false);
        }
        if self.gap_every.is_some_and(|g| self.next % g == g - 1) {
            let to = (self.next + 3).min(self.n);
            f(Taken::Gap { from: self.next, to });
            self.next = to;
            return Ok(true);
        }
        self.buf = self.payload(self.next);
        f(Taken::Message { position: self.next, payload: &self.buf });
        self.next += 1;
        Ok(true)
    }
    fn reliable(&self) -> bool {
        self.reliable
    }
    fn release_to(&mut self, position: u64) {
        assert!(position >= self.released, "released positions never go back");
        // As a ring reader does: never past what was delivered (a restarted recorder releases
        // what its journal holds before the source has redelivered it).
        self.released = position.min(self.next).max(self.released);
    }
    fn position(&self) -> u64 {
        self.next
    }
    fn max_payload(&self) -> usize {
        self.max_payload
    }
    fn window(&self) -> u64 {
        self.window
    }
}

fn record(tap: &mut FakeTap, dir: &Dir, opts: RecorderOptions) -> Arc<RecorderStats> {
    let journal = JournalWriter::open(&dir.0, meta(), small()).unwrap();
    let mut rec = Recorder::start(journal, opts).unwrap();
    let stats = rec.stats().clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while tap.next < tap.n {
        rec.poll(tap, 64).unwrap();
        assert!(std::time::Instant::now() < deadline, "the recorder stalled at {}", tap.next);
    }
    rec.finish(tap).unwrap();
    stats
}

#[test]
fn a_reliable_tap_is_recorded_whole_through_a_wrapping_queue_across_segments() {
    let dir = Dir::new("rec-reliable");
    let mut tap = FakeTap::new(20_000, true, None);
    // A queue of a few records: it wraps mid-record and fills, so the poll side stops taking.
    let opts = RecorderOptions { queue_bytes: 1000, flush_bytes: 300, ..RecorderOptions::default() };
    let stats = record(&mut tap, &dir, opts);
    let r = JournalReader::open(&dir.0).unwrap();
    assert!(r.segments().len() > 10, "rolled over: {} segments", r.segments().len());
    let got = read_all(&r).unwrap();
    assert_eq!(got.len(), 20_000);
    for (i, (seq, p)) in got.iter().enumerate() {
        assert_eq!((*seq, p.as_deref()), (i as u64, Some(payload(i as u64).as_slice())));
    }
    assert_eq!(tap.released, 20_000, "everything written was released, and only then");
    assert_eq!(stats.written.load(Ordering::Relaxed), 20_000);
    assert!(stats.queue_full.load(Ordering::Relaxed) > 0, "the small queue pushed back");
    assert_eq!(stats.gaps.load(Ordering::Relaxed), 0, "a reliable tap is never recorded with gaps");
}

/// Records are laid out in the queue in place, so the one the queue's wrap cuts in two is
/// laid out and sealed apart: with queues from one largest record (168 bytes) to four 64-byte
/// messages' records, of every size modulo 8, the wrap falls at every offset in a record over
/// the laps. Same-size records (in the larger queues, batches of up to four: sealed side by
/// side when four are staged) and records of every size both come back whole and in order.
#[test]
fn records_cut_by_the_queue_wrap_at_every_offset_come_back_whole() {
    let queues = [168].into_iter().chain(300..308).chain(500..508);
    for (queue_bytes, fixed_len) in queues.flat_map(|q| [(q, Some(64)), (q, None)]) {
        let dir = Dir::new("rec-wrap");
        let mut tap = FakeTap::new(1_000, true, None);
        tap.fixed_len = fixed_len;
        let opts = RecorderOptions { queue_bytes, flush_bytes: 100, ..RecorderOptions::default() };
        record(&mut tap, &dir, opts);
        check_whole(&dir, &tap, &format!("queue of {queue_bytes} bytes, fixed length {fixed_len:?}"));
    }
}

/// A poll that takes more than a batch (64 KiB) hands the first over mid-poll before laying
/// out the rest, in a queue whose wrap falls inside batches. The batch bound is a performance
/// one (nothing a reader sees depends on it): this checks every record comes back whole
/// through that path.
#[test]
fn polls_larger_than_a_batch_come_back_whole() {
    let dir = Dir::new("rec-batches");
    let mut tap = FakeTap::new(20_000, true, None);
    tap.fixed_len = Some(120);
    let opts = RecorderOptions { queue_bytes: 200_000 + 3, ..RecorderOptions::default() };
    let journal = JournalWriter::open(&dir.0, meta(), small()).unwrap();
    let mut rec = Recorder::start(journal, opts).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while tap.next < tap.n {
        rec.poll(&mut tap, 1_000).unwrap(); // 1,000 records of 160 bytes: 2.4 batches
        assert!(std::time::Instant::now() < deadline, "the recorder stalled at {}", tap.next);
    }
    rec.finish(&mut tap).unwrap();
    check_whole(&dir, &tap, "polls of 1,000");
}

/// Polls of one empty message each from a lossy source: a batch per smallest record (40
/// bytes), as many batches in flight as the queue holds records (the writer thread idles
/// 200 us at a time, so they pile up; a lossy poll side fills the queue to its last 40 bytes).
/// Every batch must find its descriptor's room (`batches_for`), and every position must come
/// back once, in order: a message as it was, or a gap where the queue was full.
#[test]
fn batches_of_one_smallest_record_fill_the_queue_and_come_back_whole() {
    for queue_bytes in [168, 400, 4096] {
        let dir = Dir::new("rec-tiny-batches");
        let mut tap = FakeTap::new(20_000, false, None);
        (tap.fixed_len, tap.max_payload) = (Some(0), 0);
        let opts = RecorderOptions { queue_bytes, ..RecorderOptions::default() };
        let journal = JournalWriter::open(&dir.0, meta(), small()).unwrap();
        let mut rec = Recorder::start(journal, opts).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while tap.next < tap.n {
            rec.poll(&mut tap, 1).unwrap();
            assert!(std::time::Instant::now() < deadline, "the recorder stalled at {}", tap.next);
        }
        let stats = rec.stats().clone();
        rec.finish(&mut tap).unwrap();
        let what = format!("batches of one in a queue of {queue_bytes}");
        let full = stats.queue_full.load(Ordering::Relaxed);
        assert!(full > 0, "{what}: the queue never filled, so neither could the descriptors");
        let (mut next, mut messages) = (0u64, 0u64);
        JournalReader::open(&dir.0)
            .unwrap()
            .cursor()
            .for_each(|r| {
                assert_eq!(r.sequence, next, "{what}: every position once, in order");
                match r.kind {
                    Kind::Message(p) => {
                        assert!(p.is_empty(), "{what}");
                        (next, messages) = (next + 1, messages + 1);
                    }
                    Kind::Gap { count } => next += count,
                    Kind::End => unreachable!(),
                }
            })
            .unwrap();
        assert_eq!(next, tap.n, "{what}");
        assert_eq!(messages, stats.messages.load(Ordering::Relaxed), "{what}");
    }
}

/// The journal in `dir` holds every message `tap` delivered, in order, each as it was.
fn check_whole(dir: &Dir, tap: &FakeTap, what: &str) {
    let got = read_all(&JournalReader::open(&dir.0).unwrap()).unwrap();
    assert_eq!(got.len() as u64, tap.n, "{what}");
    for (i, (seq, p)) in got.iter().enumerate() {
        let want = tap.payload(i as u64);
        assert_eq!((*seq, p.as_deref()), (i as u64, Some(want.as_slice())), "{what}");
    }
}

#[test]
fn a_lossy_tap_records_every_loss_as_a_gap_and_every_position_once() {
    let dir = Dir::new("rec-lossy");
    let mut tap = FakeTap::new(30_000, false, Some(50));
    // Small enough that the queue also fills now and then: those are gaps too.
    let opts = RecorderOptions { queue_bytes: 2000, flush_bytes: 500, ..RecorderOptions::default() };
    let stats = record(&mut tap, &dir, opts);
    let r = JournalReader::open(&dir.0).unwrap();
    let mut next = 0u64;
    let (mut messages, mut missed) = (0u64, 0u64);
    r.cursor()
        .for_each(|rec| {
            assert_eq!(rec.sequence, next, "every position once, in order");
            match rec.kind {
                Kind::Message(p) => {
                    assert_eq!(p, payload(next).as_slice());
                    messages += 1;
                    next += 1;
                }
                Kind::Gap { count } => {
                    missed += count;
                    next += count;
                }
                Kind::End => unreachable!(),
            }
        })
        .unwrap();
    assert_eq!(next, 30_000);
    assert_eq!(messages, stats.messages.load(Ordering::Relaxed));
    assert_eq!(missed, stats.missed.load(Ordering::Relaxed));
    assert!(missed >= 600 * 3 - 3, "the tap's own losses are there: {missed}");
}

#[test]
fn malformed_or_out_of_order_records_are_refused_and_the_good_ones_before_them_kept() {
    let dir = Dir::new("rec-bad");
    let mut w = JournalWriter::open(&dir.0, meta(), small()).unwrap();
    let err = w.append_records(&[0xAB; 100]).unwrap_err();
    assert!(matches!(err, JournalError::Queued { .. }), "{err}");
    let mut rec = vec![0u8; format::record_bytes(4)];
    format::emit(&mut rec, &format::message_header(10, 0, 0, 4), b"abcd");
    w.append_records(&rec).unwrap();
    let err = w.append_records(&rec).unwrap_err();
    assert!(matches!(err, JournalError::Order { sequence: 10, last: 10 }), "{err}");
    let err = w.append_records(&rec[..rec.len() - 1]).unwrap_err();
    assert!(matches!(err, JournalError::Queued { .. }), "{err}");
    // A run whose third record goes back: the two before it are kept, the error says why.
    let mut run = Vec::new();
    for seq in [11, 12, 12] {
        let mut r = vec![0u8; format::record_bytes(4)];
        format::emit(&mut r, &format::message_header(seq, 0, 0, 4), b"wxyz");
        run.extend_from_slice(&r);
    }
    let err = w.append_records(&run).unwrap_err();
    assert!(matches!(err, JournalError::Order { sequence: 12, last: 12 }), "{err}");
    assert_eq!(w.next_sequence(), Some(13));
    w.close().unwrap();
    let got = read_all(&JournalReader::open(&dir.0).unwrap()).unwrap();
    let w4 = Some(b"wxyz".to_vec());
    assert_eq!(got, vec![(10, Some(b"abcd".to_vec())), (11, w4.clone()), (12, w4)]);
}

#[test]
fn a_source_larger_than_a_record_holds_is_refused_before_taking() {
    struct Huge;
    impl Tap for Huge {
        fn take(&mut self, _: &mut dyn FnMut(Taken<'_>)) -> Result<bool, SourceError> {
            panic!("nothing is taken from a source whose messages cannot be recorded")
        }
        fn reliable(&self) -> bool {
            true
        }
        fn release_to(&mut self, _: u64) {}
        fn position(&self) -> u64 {
            0
        }
        fn max_payload(&self) -> usize {
            MAX_PAYLOAD + 1
        }
        fn window(&self) -> u64 {
            0
        }
    }
    let dir = Dir::new("rec-huge");
    let journal = JournalWriter::open(&dir.0, meta(), small()).unwrap();
    let mut rec = Recorder::start(journal, RecorderOptions::default()).unwrap();
    let err = rec.poll(&mut Huge, 1).unwrap_err();
    assert!(matches!(err, RecordError::TooLarge { .. }), "{err}");
}

/// A queue that holds a source's largest message but not a gap record (48 bytes) is refused:
/// a lossy source's first loss would otherwise wait for queue room for ever.
#[test]
fn a_queue_too_small_for_a_gap_record_is_refused_before_taking() {
    let dir = Dir::new("rec-tiny");
    let mut tap = FakeTap::new(10, false, None);
    tap.max_payload = 0; // its records are 40 bytes
    let journal = JournalWriter::open(&dir.0, meta(), small()).unwrap();
    let mut rec = Recorder::start(journal, RecorderOptions { queue_bytes: 44, ..RecorderOptions::default() }).unwrap();
    let err = rec.poll(&mut tap, 1).unwrap_err();
    assert!(matches!(err, RecordError::TooLarge { queue: 44, .. }), "{err}");
    assert_eq!(tap.next, 0, "nothing taken");
}

#[test]
fn a_restarted_lossy_recorder_records_the_positions_it_never_saw_as_a_gap() {
    let dir = Dir::new("rec-restart");
    let opts = RecorderOptions { queue_bytes: 1 << 16, ..RecorderOptions::default() };
    record(&mut FakeTap::new(100, false, None), &dir, opts);
    // Restarted as an observer at the newest message, 400 positions later; it also gets a
    // message it already holds (a redelivery), which is skipped.
    let mut tap = FakeTap::new(600, false, None);
    tap.next = 99;
    let stats = record(&mut tap, &dir, opts);
    assert_eq!(stats.skipped.load(Ordering::Relaxed), 1);
    let mut tap = FakeTap::new(900, false, None);
    tap.next = 800;
    record(&mut tap, &dir, opts);
    let got = read_all(&JournalReader::open(&dir.0).unwrap()).unwrap();
    let gaps: Vec<u64> = got.iter().filter(|(_, p)| p.is_none()).map(|(s, _)| *s).collect();
    assert_eq!(gaps, vec![600], "the unseen positions 600..800 are one gap record");
    assert_eq!(got.len(), 100 + 500 + 1 + 100);
    let mut c = JournalReader::open(&dir.0).unwrap().cursor();
    let mut next = 0;
    while let Some(r) = c.next().unwrap() {
        assert_eq!(r.sequence, next);
        next = match r.kind {
            Kind::Gap { count } => r.sequence + count,
            _ => r.sequence + 1,
        };
    }
    assert_eq!(next, 900);
}

#[test]
fn a_reliable_source_ahead_of_the_journal_is_refused_not_recorded_as_a_gap() {
    let dir = Dir::new("rec-ahead");
    let opts = RecorderOptions { queue_bytes: 1 << 16, ..RecorderOptions::default() };
    record(&mut FakeTap::new(100, true, None), &dir, opts);
    let journal = JournalWriter::open(&dir.0, meta(), small()).unwrap();
    let mut rec = Recorder::start(journal, opts).unwrap();
    let mut tap = FakeTap::new(300, true, None);
    tap.next = 150; // e.g. another consumer's line, taken over
    let err = rec.poll(&mut tap, 10).unwrap_err();
    assert!(matches!(err, RecordError::Skipped { expected: 100, position: 150 }), "{err}");
    assert!(err.to_string().contains("consumed elsewhere"), "{err}");
}

/// A source whose positions start again (a new ring after a reboot, a restarted ud-mcast
/// publisher) is refused, never skipped as "already recorded": before catching up (it starts
/// further back than its window allows) and after (it goes back).
#[test]
fn a_source_that_restarted_is_refused_not_skipped_as_recorded() {
    let dir = Dir::new("rec-restarted");
    let opts = RecorderOptions { queue_bytes: 1 << 16, ..RecorderOptions::default() };
    record(&mut FakeTap::new(5_000, true, None), &dir, opts);
    for reliable in [true, false] {
        let journal = JournalWriter::open(&dir.0, meta(), small()).unwrap();
        let mut rec = Recorder::start(journal, opts).unwrap();
        let mut tap = FakeTap::new(5_000, reliable, None); // a new ring: from 0, window 1024
        let err = rec.poll(&mut tap, 10).unwrap_err();
        assert!(matches!(err, RecordError::Restarted { expected: 5_000, position: 0 }), "{err}");
        assert!(err.to_string().contains("new journal folder"), "{err}");
        assert_eq!(rec.stats().skipped.load(Ordering::Relaxed), 0);
    }
    // Within the window, a redelivery is skipped; once caught up, going back is a restart.
    let journal = JournalWriter::open(&dir.0, meta(), small()).unwrap();
    let mut rec = Recorder::start(journal, opts).unwrap();
    let mut tap = FakeTap::new(5_010, false, None);
    tap.next = 4_990;
    assert_eq!(rec.poll(&mut tap, 100).unwrap(), 20);
    assert_eq!(rec.stats().skipped.load(Ordering::Relaxed), 10);
    let mut restarted = FakeTap::new(100, false, None);
    restarted.next = 4_000;
    let err = rec.poll(&mut restarted, 10).unwrap_err();
    assert!(matches!(err, RecordError::Restarted { expected: 5_010, position: 4_000 }), "{err}");
}

/// A publisher that drops a claim leaves a slot with no message. Before the fix a reliable
/// recorder saw the next message one position late, stopped with `Skipped` ("consumed
/// elsewhere") and held the publisher at `Full` from then on; a lossy one recorded a gap for a
/// message that never existed. Both now record nothing for the slot, count it, and go on.
#[test]
fn a_dropped_claim_is_recorded_as_nothing_and_recording_goes_on() {
    use crate::ring::{HeapMemory, RingReader, RingWriter};
    use crate::{Mode, RingConfig, StartAt, Subscriber};
    for mode in [Mode::Reliable, Mode::Lossy] {
        let dir = Dir::new(if mode == Mode::Reliable { "rec-abort-rel" } else { "rec-abort-lossy" });
        // The smallest ring that shows it: the reliable publisher is held at Full if the dead
        // recorder's line does not move.
        let cfg = RingConfig::for_payload(mode, 7, 64, 4);
        let mem = HeapMemory::new(cfg.ring_bytes());
        let mut w = RingWriter::create(mem.clone(), &cfg, 100, 0).unwrap();
        let reader = match mode {
            Mode::Reliable => RingReader::consumer_by_token(mem, 1).unwrap(),
            _ => RingReader::observer(mem, StartAt::Oldest).unwrap(),
        };
        let mut tap = Subscriber::new(reader);
        let journal = JournalWriter::open(&dir.0, meta(), small()).unwrap();
        let mut rec = Recorder::start(journal, RecorderOptions::default()).unwrap();
        let mut published = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        for pos in 0..40u64 {
            loop {
                let r = if pos % 5 == 2 {
                    w.try_claim(24).map(drop) // dropped: position `pos` holds nothing
                } else {
                    w.publish(&payload(pos)[..24.min(payload(pos).len())]).map(|_| published.push(pos))
                };
                match r {
                    Ok(()) => break,
                    Err(crate::ring::ClaimError::Full { .. }) => {
                        rec.poll(&mut tap, 64).unwrap();
                        assert!(std::time::Instant::now() < deadline, "{mode:?}: the publisher was held at {pos}");
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            rec.poll(&mut tap, 64).unwrap_or_else(|e| panic!("{mode:?}: the recorder stopped at {pos}: {e}"));
        }
        while tap.position() < 40 {
            rec.poll(&mut tap, 64).unwrap();
            assert!(std::time::Instant::now() < deadline);
        }
        let stats = rec.stats().clone();
        rec.finish(&mut tap).unwrap();
        let got = read_all(&JournalReader::open(&dir.0).unwrap()).unwrap();
        let want: Vec<(u64, Option<Vec<u8>>)> =
            published.iter().map(|&p| (p, Some(payload(p)[..24.min(payload(p).len())].to_vec()))).collect();
        assert_eq!(got, want, "{mode:?}: every message, no gap record");
        assert_eq!(stats.aborted.load(Ordering::Relaxed), 8, "{mode:?}");
        assert_eq!(stats.gaps.load(Ordering::Relaxed), 0, "{mode:?}");
    }
}

/// The review's splice: a journal of one ring, then the ring recreated (a reboot, `ring rm`)
/// and a new run recorded into the same folder. Before the fix the new ring's first messages
/// were skipped as "already in the journal" (their positions lay within the ring's slot count of
/// its end) and the rest appended with no gap record: recorded below, 10 of the new run were
/// lost and 10 spliced in. Now the recorder tells the new ring by its identity and refuses, and
/// the journal holds exactly the first ring's messages.
#[test]
fn a_recreated_ring_is_not_spliced_into_the_old_journal() {
    use crate::ring::{HeapMemory, RingReader, RingWriter};
    use crate::{Mode, RingConfig, Subscriber};
    let dir = Dir::new("rec-recreated");
    let cfg = RingConfig::for_payload(Mode::Reliable, 7, 64, 64);
    let run = |created: u64, n: u64, tag: u8| -> Result<(), RecordError> {
        let mem = HeapMemory::new(cfg.ring_bytes());
        let mut w = RingWriter::create(mem.clone(), &cfg, 100, created).unwrap();
        let mut tap = Subscriber::new(RingReader::consumer_by_token(mem, 1).unwrap());
        for _ in 0..n {
            w.publish(&[tag; 16]).unwrap();
        }
        let journal = JournalWriter::open(&dir.0, meta(), small()).unwrap();
        let mut rec = Recorder::start(journal, RecorderOptions::default())?;
        while tap.position() < n {
            rec.poll(&mut tap, 64)?;
        }
        rec.finish(&mut tap)
    };
    run(1_000, 10, b'a').unwrap();
    let err = run(2_000, 20, b'b').unwrap_err();
    assert!(matches!(err, RecordError::SourceChanged { journal_id: 1_000, source_id: 2_000 }), "{err}");
    let got = read_all(&JournalReader::open(&dir.0).unwrap()).unwrap();
    assert_eq!(got, (0..10).map(|p| (p, Some(vec![b'a'; 16]))).collect::<Vec<_>>());
    // The same ring again (a restarted recorder) is recorded on.
    run(1_000, 12, b'a').unwrap();
    assert_eq!(read_all(&JournalReader::open(&dir.0).unwrap()).unwrap().len(), 12);
}

/// The recorder as an agent: duty cycles take batches until the tap is dry, `finish` writes
/// the rest; a recording error stops its runner (the stop flag) and comes back from `finish`.
#[test]
fn the_recorder_agent_records_whole_and_a_failure_stops_its_runner() {
    use crate::agent::Agent;
    use std::sync::atomic::AtomicBool;
    let dir = Dir::new("rec-agent");
    let journal = JournalWriter::open(&dir.0, meta(), small()).unwrap();
    let rec = Recorder::start(journal, RecorderOptions { queue_bytes: 1 << 16, ..RecorderOptions::default() }).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut agent = crate::journal::RecorderAgent::new(rec, FakeTap::new(5_000, true, None), stop.clone());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while agent.tap().next < 5_000 {
        assert!(agent.do_work(0) <= crate::journal::RECORD_BATCH);
        assert!(std::time::Instant::now() < deadline, "the recorder agent stalled at {}", agent.tap().next);
    }
    assert!(!stop.load(Ordering::Relaxed));
    let tap = agent.finish().unwrap();
    assert_eq!(tap.released, 5_000, "everything recorded is released from the reliable tap");
    assert_eq!(read_all(&JournalReader::open(&dir.0).unwrap()).unwrap().len(), 5_000);

    struct Broken;
    impl Tap for Broken {
        fn take(&mut self, _: &mut dyn FnMut(Taken<'_>)) -> Result<bool, SourceError> {
            Err("the source's transport failed".into())
        }
        fn reliable(&self) -> bool {
            true
        }
        fn release_to(&mut self, _: u64) {}
        fn position(&self) -> u64 {
            0
        }
        fn max_payload(&self) -> usize {
            64
        }
        fn window(&self) -> u64 {
            0
        }
    }
    let dir = Dir::new("rec-agent-broken");
    let rec =
        Recorder::start(JournalWriter::open(&dir.0, meta(), small()).unwrap(), RecorderOptions::default()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut agent = crate::journal::RecorderAgent::new(rec, Broken, stop.clone());
    assert_eq!(agent.do_work(0), 0);
    assert!(stop.load(Ordering::Relaxed), "a failed recording ends its runner");
    assert_eq!(agent.do_work(0), 0, "and takes nothing more");
    let err = agent.finish().err().expect("the failure is reported");
    assert!(err.to_string().contains("the source's transport failed"), "{err}");
}

/// Receive stamps are read once per [`STAMP_EVERY`] messages within a poll, but a new poll
/// reads the clock again: a message taken after the source was idle is not stamped with the
/// time before the pause. The smallest case: one message, a pause, one more (a stamp kept
/// across polls would give both the same time).
#[test]
fn a_poll_after_an_idle_source_stamps_afresh_and_stamps_never_go_back() {
    let dir = Dir::new("rec-stamps");
    let journal = JournalWriter::open(&dir.0, meta(), small()).unwrap();
    let mut rec = Recorder::start(journal, RecorderOptions::default()).unwrap();
    let mut tap = FakeTap::new(2 + 3 * u64::from(STAMP_EVERY), true, None);
    rec.poll(&mut tap, 1).unwrap();
    let pause = Duration::from_millis(20);
    std::thread::sleep(pause);
    while tap.next < tap.n {
        rec.poll(&mut tap, 64).unwrap();
    }
    rec.finish(&mut tap).unwrap();
    let r = JournalReader::open(&dir.0).unwrap();
    let mut c = r.cursor();
    let mut stamps = Vec::new();
    while let Some(rec) = c.next().unwrap() {
        stamps.push(rec.receive_tsc);
    }
    assert_eq!(stamps.len() as u64, tap.n);
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "stamps went back: {stamps:?}");
    let ticks = stamps[1] - stamps[0];
    let at_least = (pause.as_nanos() as f64 * crate::time::ticks_per_ns() * 0.9) as u64;
    assert!(ticks >= at_least, "the message after a 20 ms pause is stamped {ticks} ticks after the one before");
}

/// Within one poll a stamp is reused, but never for a message published after it: a source
/// whose messages become readable one by one, 2 ms apart, during a single poll (as after a
/// preemption) gets each stamped at or after its own publish stamp. The smallest case that
/// fools a stamp kept for 16 messages: three messages in one poll.
#[test]
fn a_message_published_during_a_poll_is_not_stamped_before_it_was_published() {
    struct Slow {
        next: u64,
        tsc: crate::time::Tsc,
        buf: Vec<u8>,
    }
    impl Tap for Slow {
        fn take(&mut self, f: &mut dyn FnMut(Taken<'_>)) -> Result<bool, SourceError> {
            if self.next == 3 {
                return Ok(false);
            }
            if self.next > 0 {
                std::thread::sleep(Duration::from_millis(2));
            }
            let mut q = <tickbus_codecs::md::Quote as tickbus_codecs::Message>::new();
            q.header.stamp(1, self.next, self.tsc.now());
            self.buf = zerocopy::IntoBytes::as_bytes(&q).to_vec();
            f(Taken::Message { position: self.next, payload: &self.buf });
            self.next += 1;
            Ok(true)
        }
        fn reliable(&self) -> bool {
            true
        }
        fn release_to(&mut self, _: u64) {}
        fn position(&self) -> u64 {
            self.next
        }
        fn max_payload(&self) -> usize {
            128
        }
        fn window(&self) -> u64 {
            0
        }
    }
    let dir = Dir::new("rec-stamp-publish");
    let journal = JournalWriter::open(&dir.0, meta(), small()).unwrap();
    let mut rec = Recorder::start(journal, RecorderOptions::default()).unwrap();
    let mut tap = Slow { next: 0, tsc: crate::time::Tsc::new(), buf: Vec::new() };
    assert_eq!(rec.poll(&mut tap, 64).unwrap(), 3, "all three in one poll");
    rec.finish(&mut tap).unwrap();
    let r = JournalReader::open(&dir.0).unwrap();
    let mut c = r.cursor();
    let mut n = 0;
    while let Some(rec) = c.next().unwrap() {
        assert!(rec.publish_tsc > 0 && rec.receive_tsc >= rec.publish_tsc, "message {}: {rec:?}", rec.sequence);
        n += 1;
    }
    assert_eq!(n, 3);
}
