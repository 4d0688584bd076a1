//! Proof that the steady-state publish and poll loops make no syscall and no allocation.
//!
//! Each measured thread installs a seccomp filter that traps every syscall but exit and
//! rt_sigreturn into a SIGSYS handler that counts it (the syscall fails with ENOSYS), and a
//! counting global allocator counts that thread's allocations. A control test proves both
//! detectors fire.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use tickbus::codecs::md::Quote;
use tickbus::codecs::Message;
use tickbus::ring::ClaimError;
use tickbus::shm::{self, HugepagePolicy, ShmOptions};
use tickbus::{Mode, Recv, RecvInto, RingConfig, StartAt};

mod common;
use common::{on_trapped_thread, Counting, Counts};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn the_detectors_see_a_syscall_and_an_allocation() {
    let ((), c) = on_trapped_thread(
        || (),
        |_| {
            // SAFETY: getppid has no preconditions.
            let r = unsafe { libc::getppid() };
            assert_eq!(r, -libc::ENOSYS as libc::pid_t); // trapped, not executed
            std::hint::black_box(Box::new(5u64));
        },
    );
    assert_eq!(c, Counts { syscalls: 1, allocs: 1 });
}

fn opts(tag: &str) -> ShmOptions {
    let tag = format!("tickbus-hot-{}-{tag}", std::process::id());
    ShmOptions::new(format!("/dev/hugepages/{tag}"), format!("/dev/shm/{tag}"), HugepagePolicy::Preferred)
}

/// Publisher and subscriber threads over a shm ring: after warm-up both measure `n` messages
/// of steady state. The subscriber polls with a bounded spin budget (no clock, no syscall), with
/// `poll` or, if `into`, with `try_recv_into` a buffer of the quote's size.
fn steady_state(mode: Mode, tag: &str, into: bool) -> (Counts, Counts, u64) {
    let o = opts(tag);
    let cfg = RingConfig::for_payload(mode, 1, Quote::LEN, 256);
    let n = 100_000u64;
    let mut p = shm::open_publisher("hot", &cfg, &o).unwrap();
    let mut s = match mode {
        Mode::Lossy => shm::open_observer("hot", StartAt::Latest, &o).unwrap(),
        Mode::Reliable => shm::open_consumer("hot", &o).unwrap(),
    };
    let go = Arc::new(Barrier::new(2));
    let go2 = go.clone();
    // Lossy: the publisher runs until the subscriber has measured `n` deliveries, so a reader
    // that starts late is lapped but still measured. Reliable: exactly `n`.
    let done = Arc::new(AtomicBool::new(false));
    let done2 = done.clone();
    let publisher = std::thread::spawn(move || {
        on_trapped_thread(
            move || {
                let mut q = Quote::new();
                for _ in 0..1000 {
                    while p.send(&mut q).is_err() {} // warm-up, unmeasured
                }
                go2.wait();
                (p, q)
            },
            move |(p, q)| {
                let max = if mode == Mode::Lossy { 1000 * n } else { n };
                for i in 0..max {
                    if done2.load(Ordering::Relaxed) {
                        break;
                    }
                    q.bid_px = i as i64;
                    loop {
                        match p.send(q) {
                            Ok(_) => break,
                            Err(ClaimError::Full { .. }) => std::hint::spin_loop(),
                            Err(e) => panic!("{e}"),
                        }
                    }
                    for _ in 0..50 {
                        std::hint::spin_loop(); // pace a little so a lossy reader mostly keeps up
                    }
                }
            },
        )
        .1
    });
    let (delivered, sc) = on_trapped_thread(
        move || {
            while s.position() < 1000 {
                let _ = s.try_recv(); // warm-up, unmeasured (a lossy reader may be lapped here)
            }
            go.wait();
            s
        },
        move |s| {
            let (mut delivered, mut budget) = (0u64, 4_000_000_000u64);
            // Received straight into a quote (a scratch one: it holds a message only on
            // `Message`), whose prices must rise: the copy really happened, in order.
            let (mut q, mut last) = (Quote::new(), -1);
            while into && delivered < n && budget > 0 {
                budget -= 1;
                match s.try_recv_into(zerocopy::IntoBytes::as_mut_bytes(&mut q)) {
                    Some(RecvInto::Message { .. }) => {
                        assert!(q.bid_px > last, "quote {} after {last}", q.bid_px);
                        last = q.bid_px;
                        delivered += 1;
                    }
                    Some(RecvInto::OtherLength { len, .. }) => panic!("a {len}-byte message on a ring of quotes"),
                    Some(RecvInto::Gap(_)) | None => {}
                }
            }
            while !into && delivered < n && budget > 0 {
                budget -= 1;
                s.poll(16, |r| {
                    if let Recv::Message(m) = r {
                        let q = m.decode::<Quote>().expect("a quote");
                        std::hint::black_box(q.bid_px);
                        delivered += 1;
                    }
                });
            }
            done.store(true, Ordering::Relaxed);
            delivered
        },
    );
    let pc = publisher.join().unwrap();
    let _ = std::fs::remove_dir_all(&o.hugepage_dir);
    let _ = std::fs::remove_dir_all(&o.fallback_dir);
    (pc, sc, delivered)
}

#[test]
fn lossy_publish_and_poll_make_no_syscall_and_no_allocation() {
    let (p, s, delivered) = steady_state(Mode::Lossy, "lossy", false);
    assert_eq!(p, Counts { syscalls: 0, allocs: 0 }, "publisher");
    assert_eq!(s, Counts { syscalls: 0, allocs: 0 }, "subscriber");
    // (it polls up to 16 at a time, so it may go up to 15 past its count)
    assert!((100_000..100_016).contains(&delivered), "the subscriber measured its full count: {delivered}");
}

#[test]
fn reliable_publish_and_poll_make_no_syscall_and_no_allocation() {
    let (p, s, delivered) = steady_state(Mode::Reliable, "reliable", false);
    assert_eq!(p, Counts { syscalls: 0, allocs: 0 }, "publisher");
    assert_eq!(s, Counts { syscalls: 0, allocs: 0 }, "subscriber");
    assert_eq!(delivered, 100_000, "reliable mode delivers every message");
}

#[test]
fn receiving_into_a_buffer_makes_no_syscall_and_no_allocation() {
    for (mode, tag) in [(Mode::Reliable, "into-reliable"), (Mode::Lossy, "into-lossy")] {
        let (p, s, delivered) = steady_state(mode, tag, true);
        assert_eq!(p, Counts { syscalls: 0, allocs: 0 }, "{tag}: publisher");
        assert_eq!(s, Counts { syscalls: 0, allocs: 0 }, "{tag}: subscriber");
        assert_eq!(delivered, 100_000, "{tag}: the subscriber measured its full count");
    }
}

/// The tick-to-trade path of the latency lab's demo: poll the market-data ring, decode ITCH, apply
/// it to the L3 book and, on a top-of-book change, send an order on a second ring. After the
/// first half of a generated day warms the book (its levels and order map are reserved up
/// front), the second half runs with syscalls trapped and allocations counted.
#[test]
fn the_tick_to_trade_path_makes_no_syscall_and_no_allocation() {
    use tickbus::codecs::book::OrderBook;
    use tickbus::codecs::itch::{frames, parse};
    use tickbus::codecs::orders::NewOrder;
    use tickbus::codecs::synth::{write_itch, DayConfig};

    let o = opts("ttt");
    let mut day = Vec::new();
    write_itch(DayConfig::new(3, 20, 20_000), &mut day).unwrap();
    let msgs: Vec<Vec<u8>> = frames(&day).map(|r| r.unwrap().message.as_bytes().to_vec()).collect();
    let n = msgs.len() as u64;
    let md_cfg = RingConfig::for_payload(Mode::Reliable, 1, 64, 32_768);
    let mut md = shm::open_publisher("md", &md_cfg, &o).unwrap();
    for m in &msgs {
        md.publish(m).unwrap();
    }
    let orders_cfg = RingConfig::for_payload(Mode::Reliable, 2, NewOrder::LEN, 32_768);
    let setup_opts = o.clone();
    let ((seen, sent, errors), c) = on_trapped_thread(
        move || {
            let md_rx = shm::open_consumer("md", &setup_opts).unwrap();
            let orders = shm::open_publisher("orders", &orders_cfg, &setup_opts).unwrap();
            let mut state = (md_rx, orders, OrderBook::with_capacity(1 << 16, 64), NewOrder::new(), 0u64, 0u64, 0u64);
            step(&mut state, n / 2);
            state
        },
        move |state| {
            step(state, n - n / 2);
            (state.4, state.5, state.6)
        },
    );
    type State = (shm::ShmSubscriber, shm::ShmPublisher, OrderBook, NewOrder, u64, u64, u64);
    fn step(s: &mut State, count: u64) {
        let (md_rx, orders, book, order, seen, sent, errors) = s;
        let end = *seen + count;
        while *seen < end {
            let Some(Recv::Message(m)) = md_rx.try_recv() else { continue };
            *seen += 1;
            let Ok(msg) = parse(m.payload, m.position) else {
                *errors += 1;
                continue;
            };
            match book.apply(&msg) {
                Ok(Some(u)) if u.top_changed => {
                    let Some(top) = book.best(u.locate, u.side) else { continue };
                    order.client_order_id = *seen;
                    order.instrument_id = u32::from(u.locate);
                    order.price = i64::from(top.price);
                    order.qty = 100;
                    orders.send(order).unwrap();
                    *sent += 1;
                }
                Ok(_) => {}
                Err(_) => *errors += 1,
            }
        }
    }
    drop(md);
    assert_eq!(c, Counts { syscalls: 0, allocs: 0 }, "tick-to-trade path");
    assert_eq!((seen, errors), (n, 0), "every message decoded and applied");
    assert!(sent > n / 20, "orders were sent on the measured half too: {sent}");
    // The trapped thread's publisher was leaked (it still holds the ring's lock): remove the
    // whole test folder rather than the rings.
    let _ = std::fs::remove_dir_all(&o.hugepage_dir);
    let _ = std::fs::remove_dir_all(&o.fallback_dir);
}

/// The recorder's poll side (the loop that takes a reliable shm stream and queues it for the
/// journal writer thread) makes no syscall and no allocation while the writer thread beside it
/// writes and flushes the journal; afterwards the journal holds every message.
#[test]
fn the_recorders_poll_side_makes_no_syscall_and_no_allocation() {
    use tickbus::journal::{
        JournalMeta, JournalOptions, JournalReader, JournalWriter, Kind, Recorder, RecorderOptions, Tap,
    };
    let o = opts("record");
    let cfg = RingConfig::for_payload(Mode::Reliable, 1, 64, 1024);
    let (warm, n) = (1000u64, 100_000u64);
    let mut p = shm::open_publisher("rec", &cfg, &o).unwrap();
    let tap = shm::open_consumer("rec", &o).unwrap();
    let dir = std::env::temp_dir().join(format!("tickbus-hot-journal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let meta = JournalMeta { stream_id: 1, source: "hot path".into(), ticks_per_ns: tickbus::time::ticks_per_ns() };
    let journal = JournalWriter::open(&dir, meta, JournalOptions::default()).unwrap();
    let rec = Recorder::start(journal, RecorderOptions::default()).unwrap();
    let stats = rec.stats().clone();
    let publisher = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        for i in 0..warm + n {
            buf[..8].copy_from_slice(&i.to_le_bytes());
            loop {
                match p.publish(&buf) {
                    Ok(_) => break,
                    Err(ClaimError::Full { .. }) => std::hint::spin_loop(),
                    Err(e) => panic!("{e}"),
                }
            }
        }
        p
    });
    let (taken, c) = on_trapped_thread(
        move || {
            let (mut rec, mut tap) = (rec, tap);
            while tap.position() < warm {
                rec.poll(&mut tap, 64).unwrap(); // warm-up, unmeasured
            }
            (rec, tap)
        },
        move |(rec, tap)| {
            let mut budget = 4_000_000_000u64;
            while tap.position() < warm + n && budget > 0 {
                budget -= 1;
                if rec.poll(tap, 64).is_err() {
                    break; // the test fails on the count below
                }
            }
            tap.position()
        },
    );
    assert_eq!(c, Counts { syscalls: 0, allocs: 0 }, "the recorder's poll side");
    assert_eq!(taken, warm + n);
    let p = publisher.join().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while stats.written.load(Ordering::Acquire) < warm + n {
        assert!(std::time::Instant::now() < deadline, "the writer thread did not write everything");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let mut next = 0u64;
    JournalReader::open(&dir)
        .unwrap()
        .cursor()
        .for_each(|r| {
            let Kind::Message(m) = r.kind else { panic!("a reliable recording has no gaps") };
            assert_eq!((r.sequence, &m[..8]), (next, &next.to_le_bytes()[..]));
            next += 1;
        })
        .unwrap();
    assert_eq!(next, warm + n, "the journal holds every message");
    drop(p);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&o.hugepage_dir);
    let _ = std::fs::remove_dir_all(&o.fallback_dir);
}

/// The one stream API (issue 24): a stream opened from its URI as `AnyPublisher` and
/// `AnySubscriber`, published by claims written in place and sent typed, read with
/// `try_recv_into`, all through the `Publish`/`Subscribe` traits: no syscall, no allocation.
#[test]
fn the_stream_api_opened_from_a_uri_makes_no_syscall_and_no_allocation() {
    use tickbus::stream::{open_publisher, open_subscriber, Channel, OpenOptions, Publish, StreamClaim, Subscribe};
    let mut o = OpenOptions::default();
    o.shm = opts("stream-api");
    let c = Channel::parse(&format!("shm:hot-any?reliable&slots=256&payload={}", Quote::LEN)).unwrap();
    let n = 100_000u64;
    let p = open_publisher(&c, &o).unwrap();
    let s = open_subscriber(&c, &o).unwrap();
    let go = Arc::new(Barrier::new(2));
    let go2 = go.clone();
    let publisher = std::thread::spawn(move || {
        on_trapped_thread(
            move || {
                go2.wait();
                (p, Quote::new())
            },
            move |(p, q)| {
                for i in 0..n {
                    if i % 2 == 0 {
                        q.bid_px = i as i64;
                        while let Err(e) = p.send(q) {
                            assert!(tickbus::stream::Retry::retry_helps(&e), "{e}");
                        }
                    } else {
                        // The same quote, written in place word by word through a claim.
                        q.bid_px = i as i64;
                        q.header.sequence = p.position();
                        let bytes = zerocopy::IntoBytes::as_bytes(q);
                        let mut claim = loop {
                            match p.try_claim(Quote::LEN) {
                                Ok(c) => break c,
                                Err(e) => assert!(tickbus::stream::Retry::retry_helps(&e), "{e}"),
                            }
                        };
                        for (k, w) in bytes.chunks_exact(8).enumerate() {
                            claim.store_word(k, u64::from_le_bytes(w.try_into().unwrap()));
                        }
                        claim.commit().unwrap();
                    }
                }
            },
        )
        .1
    });
    let (delivered, sc) = on_trapped_thread(
        move || {
            go.wait();
            s
        },
        move |s| {
            let (mut q, mut delivered, mut budget) = (Quote::new(), 0u64, 4_000_000_000u64);
            while delivered < n && budget > 0 {
                budget -= 1;
                if let Ok(Some(RecvInto::Message { position })) =
                    s.try_recv_into(zerocopy::IntoBytes::as_mut_bytes(&mut q))
                {
                    assert_eq!((q.bid_px as u64, position), (delivered, delivered), "in order, each once");
                    delivered += 1;
                }
            }
            delivered
        },
    );
    let pc = publisher.join().unwrap();
    let _ = std::fs::remove_dir_all(&o.shm.hugepage_dir);
    let _ = std::fs::remove_dir_all(&o.shm.fallback_dir);
    assert_eq!(pc, Counts { syscalls: 0, allocs: 0 }, "publisher");
    assert_eq!(sc, Counts { syscalls: 0, allocs: 0 }, "subscriber");
    assert_eq!(delivered, n);
}

/// A late joiner's merge once live (`tickbus::merge`): it caught up from a journal of the first
/// 1,000 messages and cut over to the reliable live stream during warm-up; from then on each
/// poll is the live poll plus a branch: no syscall, no allocation, every message once in order.
#[test]
fn a_late_joiner_once_live_makes_no_syscall_and_no_allocation() {
    use tickbus::journal::{JournalMeta, JournalOptions, JournalTail, JournalWriter};
    use tickbus::merge::{MergeOptions, ReplayMerge};
    use tickbus::stream::Subscribe;
    let o = opts("merge");
    let cfg = RingConfig::for_payload(Mode::Reliable, 1, Quote::LEN, 256);
    let (warm, n) = (1000u64, 100_000u64);
    let quote = |i: u64| {
        let mut q = Quote::new();
        q.bid_px = i as i64;
        q.header.stamp(1, i, 0);
        q
    };
    // The journal a recorder would have written: the first `warm` messages.
    let dir = std::env::temp_dir().join(format!("tickbus-hot-merge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let meta = JournalMeta { stream_id: 1, source: "hot path".into(), ticks_per_ns: tickbus::time::ticks_per_ns() };
    let mut w = JournalWriter::open(&dir, meta, JournalOptions::default()).unwrap();
    for i in 0..warm {
        w.append(i, 0, 0, zerocopy::IntoBytes::as_bytes(&quote(i))).unwrap();
    }
    w.close().unwrap();
    let mut p = shm::open_publisher("merge", &cfg, &o).unwrap();
    let live = shm::open_consumer("merge", &o).unwrap();
    let tail = JournalTail::open(&dir, 0).unwrap();
    let m = ReplayMerge::new(live, tail, 0, MergeOptions::default()).unwrap();
    let publisher = std::thread::spawn(move || {
        for i in 0..=warm + n {
            let mut q = quote(i);
            loop {
                match p.publish(zerocopy::IntoBytes::as_bytes(&q)) {
                    Ok(_) => break,
                    Err(ClaimError::Full { .. }) => std::hint::spin_loop(),
                    Err(e) => panic!("{e}"),
                }
            }
            std::hint::black_box(&mut q);
        }
        p
    });
    let ((delivered, stats), c) = on_trapped_thread(
        move || {
            let mut m = m;
            // Warm-up, unmeasured: the journal, then the cut-over at `warm`.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while !(m.is_live() && m.position() > warm) {
                assert!(std::time::Instant::now() < deadline, "no cut-over: {:?}", m.stats());
                let _ = m.try_recv().unwrap();
            }
            m
        },
        move |m| {
            let (mut delivered, mut budget) = (0u64, 4_000_000_000u64);
            while delivered < n && budget > 0 {
                budget -= 1;
                if let Ok(Some(Recv::Message(d))) = m.try_recv() {
                    let q = d.decode::<Quote>().expect("a quote");
                    assert_eq!((d.position, q.bid_px as u64), (warm + 1 + delivered, warm + 1 + delivered));
                    delivered += 1;
                }
            }
            (delivered, m.stats())
        },
    );
    assert_eq!(c, Counts { syscalls: 0, allocs: 0 }, "the merge once live");
    assert_eq!(delivered, n);
    assert_eq!(stats.from_archive, warm, "{stats:?}");
    assert_eq!(stats.cut_over, Some(warm), "{stats:?}");
    drop(publisher.join().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&o.hugepage_dir);
    let _ = std::fs::remove_dir_all(&o.fallback_dir);
}

/// The feed's kernel-socket ingest (the UDP fallback beside issue 27's AF_XDP): a call is one
/// syscall (`recvmmsg`) however many datagrams wait, and neither taking 2,000 real datagrams
/// nor reading them allocates. Taking them needs the real syscall, so allocations are counted
/// untrapped; the syscall count is taken trapped (where the call fails with ENOSYS).
#[test]
fn the_feeds_udp_ingest_makes_one_syscall_per_batch_and_no_allocation() {
    use std::net::UdpSocket;
    use std::time::{Duration, Instant};
    use tickbus::feed::DatagramBatch;

    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = rx.local_addr().unwrap();
    // Blocks of 80 (more than a batch), each sent once the receiver took the last: UDP drops
    // what a full socket buffer cannot hold, and this proof is not about that.
    let taken = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sender = {
        let taken = taken.clone();
        std::thread::spawn(move || {
            let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            for k in 0..2000u64 {
                while k % 80 == 0 && taken.load(Ordering::Acquire) < k && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_micros(50));
                }
                tx.send_to(&k.to_le_bytes().repeat(8), to).unwrap();
            }
        })
    };
    let mut b = DatagramBatch::new(32);
    let (mut got, mut calls, mut sum) = (0u64, 0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(30);
    let before = common::thread_allocs();
    while got < 2000 && Instant::now() < deadline {
        let n = b.recv(&rx).unwrap();
        calls += 1;
        got += n as u64;
        taken.store(got, Ordering::Release);
        for d in b.iter() {
            sum += u64::from(d[0]);
        }
    }
    let allocs = common::thread_allocs() - before;
    sender.join().unwrap();
    assert_eq!(got, 2000, "every datagram taken ({calls} calls)");
    assert_eq!(allocs, 0, "taking and reading 2,000 datagrams allocated");
    std::hint::black_box(sum);

    let (n, c) = on_trapped_thread(
        || (UdpSocket::bind("127.0.0.1:0").unwrap(), DatagramBatch::new(32)),
        |(sock, batch)| (0..100).filter(|_| batch.recv(sock).is_err()).count(),
    );
    assert_eq!(n, 100, "each trapped call failed (ENOSYS)");
    assert_eq!(c, Counts { syscalls: 100, allocs: 0 }, "one syscall per call");
}

/// The feed handler's path with a snapshot tap and a book repair (issue 26): every message is
/// also copied to the tap; after a loss for good each one is kept in the repair's ring; the
/// venue's book (from a helper thread beside it, untrapped) is caught up a bounded number of
/// messages a poll and swapped into the normaliser, the old book handed to the helper. All of
/// that, from the loss to the swap and on, makes no syscall and no allocation; at the end the
/// feed's book is the venue's.
#[test]
fn the_feed_handlers_tap_and_book_repair_make_no_syscall_and_no_allocation() {
    use std::sync::atomic::AtomicU64;
    use tickbus::codecs::book::OrderBook;
    use tickbus::codecs::itch::{frames, parse};
    use tickbus::codecs::normalize::Normalizer;
    use tickbus::codecs::synth::{write_itch, DayConfig};
    use tickbus::feed::glimpse::{self, GlimpseError};
    use tickbus::feed::repair::{self, RepairCounts};
    use tickbus::feed::repair_helper::{BookSource, RepairHelper};
    use tickbus::feed::{Arbiter, ArbiterOptions, FeedHandler};
    use tickbus::snapshot::tap;

    let o = opts("repair");
    let mut day = Vec::new();
    write_itch(DayConfig::new(5, 20, 20_000), &mut day).unwrap();
    let msgs: Vec<Vec<u8>> = frames(&day).map(|r| r.unwrap().message.as_bytes().to_vec()).collect();
    let n = msgs.len() as u64;
    // Messages (warm-up | measured): the loss is 20 messages a little into the measured half;
    // the venue's book is served as of 300 messages after it, once the feed has delivered them.
    let (half, lost) = (n / 2, n / 2 + 100..n / 2 + 120);
    let served_at = lost.end + 300;
    let venue_at = |k: u64| {
        let mut b = OrderBook::with_capacity(1 << 16, 64);
        for (i, m) in msgs.iter().take(k as usize).enumerate() {
            let _ = b.apply(&parse(m, i as u64 + 1).unwrap());
        }
        b
    };
    let mut served = Vec::new();
    glimpse::encode(&venue_at(served_at), b"000000001A", served_at + 1, &mut served);
    let whole = venue_at(n).digest();
    let delivered = Arc::new(AtomicU64::new(0));

    /// Waits (on its own thread) until the feed has delivered 300 messages past `at`, then
    /// serves the book as of `at`: the loop has those 300 to catch it up with.
    struct Venue(Vec<u8>, Arc<AtomicU64>, u64);
    impl BookSource for Venue {
        fn fetch(&mut self, buf: &mut Vec<u8>) -> Result<(), GlimpseError> {
            while self.1.load(Ordering::Acquire) < self.2 + 300 {
                std::thread::yield_now();
            }
            buf.clone_from(&self.0);
            Ok(())
        }
    }
    let cfg = RingConfig::for_payload(Mode::Lossy, 1, 128, 1 << 16);
    let stop = Arc::new(AtomicBool::new(false));
    let (t, mut archive) = tap::channel(1 << 17, Arc::default());
    // A ring that holds the whole measured half: however late the helper (a thread on a busy
    // machine) answers, nothing kept is dropped and the book served stays new enough.
    let (r, ends) = repair::channel(1 << 15);
    let venue = Venue(served, delivered.clone(), served_at);
    let stop2 = stop.clone();
    let helper = std::thread::spawn(move || {
        let mut helper = RepairHelper::new(ends, venue, OrderBook::with_capacity(1 << 16, 64), 1 << 16, 64, 1 << 20);
        while !stop2.load(Ordering::Acquire) {
            helper.step(&mut archive, 4096, std::time::Instant::now()).unwrap();
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        // What the tap still holds.
        helper.step(&mut archive, usize::MAX, std::time::Instant::now()).unwrap();
        (helper.book().digest(), helper.whole())
    });
    let setup_opts = o.clone();
    let ((counts, feed_book, tap_lost), c) = on_trapped_thread(
        move || {
            let p = shm::open_publisher("feed", &cfg, &setup_opts).unwrap();
            let mut norm = Normalizer::with_capacity(1 << 16, 64);
            norm.pre_touch();
            let mut h = FeedHandler::new(Arbiter::new(ArbiterOptions::default()), norm, p).snapshot_tap(t).repair(r);
            for (k, m) in msgs.iter().enumerate().take(half as usize) {
                h.on_message(m, k as u64 + 1, 0).unwrap();
            }
            (h, msgs)
        },
        move |(h, msgs)| {
            for k in half + 1..=n {
                if lost.contains(&k) {
                    if k + 1 == lost.end {
                        h.on_gap(lost.start, lost.end, Some(b"000000001A"), 0).unwrap();
                    }
                } else {
                    h.on_message(&msgs[k as usize - 1], k, 0).unwrap();
                }
                delivered.store(k, Ordering::Release);
                h.poll_repair();
            }
            // The repair ends within a bounded number of polls once the book has come.
            let mut polls = 0u64;
            while h.repairing() && polls < 4_000_000_000 {
                h.poll_repair();
                polls += 1;
            }
            (h.repair_counts().unwrap(), h.book().digest(), h.tap().unwrap().lost())
        },
    );
    let RepairCounts { repaired, losses, last_caught_up, .. } = counts;
    assert_eq!(c, Counts { syscalls: 0, allocs: 0 }, "the feed's path with its tap and repair");
    assert_eq!((losses, repaired), (1, 1), "{counts:?}");
    assert!(last_caught_up >= 300, "the venue's book was caught up with what came after it: {counts:?}");
    assert_eq!(feed_book, whole, "the feed's book is the venue's");
    assert_eq!(tap_lost, 0);
    stop.store(true, Ordering::Release);
    let (helper_book, helper_whole) = helper.join().unwrap();
    assert!(helper_whole);
    assert_eq!(helper_book, whole, "the helper's copy followed");
    let _ = std::fs::remove_dir_all(&o.hugepage_dir);
    let _ = std::fs::remove_dir_all(&o.fallback_dir);
}
