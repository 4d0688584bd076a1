//! Multi-process proofs of the shm transport. Each test spawns this same binary in a child role
//! (chosen by TICKBUS_TEST_ROLE), so publisher and subscriber really are separate processes
//! mapping the same ring file.
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use libtest_mimic::{Arguments, Failed, Trial};
use tickbus::ring::ClaimError;
use tickbus::shm::{self, HugepagePolicy, PublisherState, ShmOptions};
use tickbus::{Mode, Recv, RingConfig, StartAt};

mod common;
use common::{fill, intact};

const PAYLOAD: usize = 64;

fn main() {
    if let Ok(role) = std::env::var("TICKBUS_TEST_ROLE") {
        std::process::exit(child(&role));
    }
    let args = Arguments::from_args();
    let tests = vec![
        Trial::test("reliable_mode_delivers_a_million_messages_once_in_order_across_processes", reliable_million),
        Trial::test("lossy_mode_paused_reader_reports_the_gap_and_resumes", lossy_paused_reader),
        Trial::test("no_torn_message_across_processes_under_a_hammering_writer", no_torn_across_processes),
        Trial::test("dead_publisher_is_detected_and_its_ring_reclaimed", dead_publisher_reclaimed),
        Trial::test("dead_consumer_is_reported_to_the_publisher_and_its_line_taken_over", dead_consumer_taken_over),
        Trial::test("a_zombie_consumer_does_not_hold_its_line", zombie_consumer_releases_its_line),
        Trial::test("a_second_publisher_process_is_refused_and_the_first_goes_on", second_publisher_refused),
        Trial::test(
            "a_live_consumer_whose_pid_looks_dead_keeps_its_line",
            live_consumer_with_foreign_pid_keeps_its_line,
        ),
    ];
    #[cfg(tickbus_testing)]
    let tests = {
        let mut tests = tests;
        tests.push(Trial::test("publisher_killed_after_a_slot_s_trail_loses_nothing_on_restart", || {
            publisher_killed_at("writer-after-trail", 10, 10)
        }));
        tests.push(Trial::test("publisher_killed_after_a_slot_s_lead_loses_nothing_on_restart", || {
            publisher_killed_at("writer-after-lead", 10, 9)
        }));
        tests
    };
    #[cfg(not(tickbus_testing))]
    let tests = {
        let mut tests = tests;
        tests
            .push(tickbus_testkit::needs_testing_cfg("publisher_killed_after_a_slot_s_trail_loses_nothing_on_restart"));
        tests.push(tickbus_testkit::needs_testing_cfg("publisher_killed_after_a_slot_s_lead_loses_nothing_on_restart"));
        tests
    };
    libtest_mimic::run(&args, tests).exit();
}

/// Unique folders for one test (removed on drop); children get them through the environment.
struct Dirs(ShmOptions);

impl Dirs {
    fn new() -> Dirs {
        static N: AtomicUsize = AtomicUsize::new(0);
        let tag = format!("tickbus-mp-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        Dirs(ShmOptions::new(format!("/dev/hugepages/{tag}"), format!("/dev/shm/{tag}"), HugepagePolicy::Preferred))
    }
}

impl Drop for Dirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0.hugepage_dir);
        let _ = std::fs::remove_dir_all(&self.0.fallback_dir);
    }
}

fn child_opts() -> ShmOptions {
    let var = |k| std::env::var(k).expect("child role needs its dirs");
    ShmOptions::new(var("TICKBUS_HUGEPAGE_DIR"), var("TICKBUS_SHM_DIR"), HugepagePolicy::Preferred)
}

/// A child process in `role` with piped stdin/stdout.
struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: std::io::Lines<BufReader<ChildStdout>>,
}

impl Peer {
    fn spawn(role: &str, dirs: &Dirs, count: u64) -> Peer {
        Peer::spawn_with(role, dirs, count, &[])
    }

    fn spawn_with(role: &str, dirs: &Dirs, count: u64, env: &[(&str, &str)]) -> Peer {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .envs(env.iter().copied())
            .env("TICKBUS_TEST_ROLE", role)
            .env("TICKBUS_TEST_COUNT", count.to_string())
            .env("TICKBUS_HUGEPAGE_DIR", &dirs.0.hugepage_dir)
            .env("TICKBUS_SHM_DIR", &dirs.0.fallback_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn child role");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Peer { child, stdin, lines }
    }

    fn expect_line(&mut self, prefix: &str) -> Result<String, Failed> {
        match self.lines.next() {
            Some(Ok(l)) if l.starts_with(prefix) => Ok(l),
            other => Err(format!("child said {other:?}, expected a line starting {prefix:?}").into()),
        }
    }

    fn say(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
    }

    fn finish(mut self) -> Result<(), Failed> {
        let st = self.child.wait().unwrap();
        if st.success() {
            Ok(())
        } else {
            Err(format!("child exited with {st}").into())
        }
    }
}

fn reliable_million() -> Result<(), Failed> {
    let dirs = Dirs::new();
    let n = 1_000_000u64;
    let mut p = shm::open_publisher("orders", &RingConfig::for_payload(Mode::Reliable, 1, PAYLOAD, 1024), &dirs.0)?;
    let mut peer = Peer::spawn("consume", &dirs, n);
    let mut buf = [0u8; PAYLOAD];
    let mut fulls = 0u64;
    for pos in 0..n {
        fill(pos, &mut buf);
        loop {
            match p.publish(&buf) {
                Ok(got) => {
                    assert_eq!(got, pos);
                    break;
                }
                Err(ClaimError::Full { .. }) => {
                    fulls += 1;
                    if fulls.is_multiple_of(1 << 20) {
                        if let Some(st) = peer.child.try_wait()? {
                            return Err(format!("consumer died ({st}) at position {pos}").into());
                        }
                    }
                    std::hint::spin_loop();
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    let line = peer.expect_line("ok ")?;
    assert_eq!(line, format!("ok {n}"));
    assert!(fulls > 0, "a 1024-slot ring never filled in a million messages: back-pressure was not exercised");
    peer.finish()
}

fn lossy_paused_reader() -> Result<(), Failed> {
    let dirs = Dirs::new();
    let mut p = shm::open_publisher("md", &RingConfig::for_payload(Mode::Lossy, 2, PAYLOAD, 256), &dirs.0)?;
    let mut peer = Peer::spawn("pause", &dirs, 100);
    peer.expect_line("attached")?;
    let mut buf = [0u8; PAYLOAD];
    let mut publish = |range: std::ops::Range<u64>| {
        for pos in range {
            fill(pos, &mut buf);
            assert_eq!(p.publish(&buf).unwrap(), pos); // lossy: never Full
        }
    };
    publish(0..100);
    peer.expect_line("paused")?;
    publish(100..10_100);
    peer.say("go");
    assert_eq!(peer.expect_line("gap")?, "gap 100 10100");
    publish(10_100..10_200);
    assert_eq!(peer.expect_line("done")?, "done 100");
    peer.finish()
}

/// The writer hammers a 4-slot ring in bursts of 64 (which lap the reader while it copies) with
/// short pauses between them (in which it delivers), until the reader has verified 20,000
/// messages and been lapped at least once, or gives up after 50 million messages.
fn no_torn_across_processes() -> Result<(), Failed> {
    let dirs = Dirs::new();
    let max = 50_000_000u64;
    let mut p = shm::open_publisher("hammer", &RingConfig::for_payload(Mode::Lossy, 3, 1024, 4), &dirs.0)?;
    let mut peer = Peer::spawn("verify", &dirs, 20_000);
    peer.expect_line("attached")?;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    let mut lines = peer.lines;
    let reader = std::thread::spawn(move || {
        let line = lines.next();
        flag.store(true, Ordering::Release);
        line
    });
    let mut buf = [0u8; 1024];
    let mut pos = 0;
    while pos < max && !done.load(Ordering::Acquire) {
        fill(pos, &mut buf);
        p.publish(&buf)?;
        pos += 1;
        if pos.is_multiple_of(64) {
            for _ in 0..20_000 {
                std::hint::spin_loop();
            }
        }
    }
    let line = match reader.join().map_err(|_| "reader thread panicked")? {
        Some(Ok(l)) => l,
        other => return Err(format!("verifier said {other:?}").into()),
    };
    let st = peer.child.wait()?;
    assert!(st.success(), "verifier failed ({st}): {line}");
    let nums: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    assert!(nums.len() == 2 && nums[0] >= 20_000 && nums[1] > 0, "{line} after {pos} messages");
    Ok(())
}

fn dead_publisher_reclaimed() -> Result<(), Failed> {
    let dirs = Dirs::new();
    let mut peer = Peer::spawn("crash-publisher", &dirs, 10);
    peer.expect_line("published")?;
    let pid = u64::from(peer.child.id());
    let status = peer.child.wait()?;
    assert!(status.success());
    let mut s = shm::open_observer("md", StartAt::Oldest, &dirs.0)?;
    assert_eq!(s.publisher_state(), PublisherState::Dead { pid, epoch: 1 });
    let mut got = 0;
    while let Some(Recv::Message(_)) = s.try_recv() {
        got += 1;
    }
    assert_eq!(got, 10, "messages of the dead publisher are still readable");
    let mut p = shm::open_publisher("md", &RingConfig::for_payload(Mode::Lossy, 2, PAYLOAD, 256), &dirs.0)?;
    assert_eq!((p.reclaimed_from(), p.position()), (Some(pid), 10));
    assert!(matches!(s.publisher_state(), PublisherState::Live { epoch: 2, .. }));
    p.publish(&[1; 8])?;
    assert!(matches!(s.try_recv(), Some(Recv::Message(m)) if m.position == 10));
    Ok(())
}

fn dead_consumer_taken_over() -> Result<(), Failed> {
    let dirs = Dirs::new();
    let mut p = shm::open_publisher("orders", &RingConfig::for_payload(Mode::Reliable, 1, PAYLOAD, 8), &dirs.0)?;
    let mut buf = [0u8; PAYLOAD];
    for pos in 0..8 {
        fill(pos, &mut buf);
        p.publish(&buf)?;
    }
    let mut peer = Peer::spawn("crash-consumer", &dirs, 3);
    peer.expect_line("consumed")?;
    let pid = u64::from(peer.child.id());
    peer.child.wait()?;
    // The publisher may run ahead until the dead consumer's released position plus a ring.
    let mut pos = 8;
    let consumer_position = loop {
        fill(pos, &mut buf);
        match p.publish(&buf) {
            Ok(_) if pos < 64 => pos += 1,
            Err(ClaimError::Full { consumer: 0, consumer_position, position }) => {
                assert_eq!(position, consumer_position + 8);
                break consumer_position;
            }
            other => return Err(format!("publisher should be held back by the dead consumer: {other:?}").into()),
        }
    };
    let st = p.consumer_status();
    assert_eq!((st[0].pid, st[0].alive, st[0].position), (pid, false, consumer_position));
    // It consumed 3 and hands credits back in batches of 2 (ring/4): one batch was released,
    // so position 2 is redelivered to the next consumer (at-least-once across a crash).
    assert_eq!(consumer_position, 2);
    let mut c = shm::open_consumer("orders", &dirs.0)?;
    let Some(Recv::Message(m)) = c.try_recv() else { return Err("nothing to resume".into()) };
    assert_eq!(m.position, consumer_position);
    assert!(intact(m.position, m.payload));
    Ok(())
}

/// A consumer killed with SIGKILL and never reaped is a zombie: `kill(pid, 0)` still succeeds
/// for it. Its line must be free all the same (the kernel released its lock when it died).
fn zombie_consumer_releases_its_line() -> Result<(), Failed> {
    let dirs = Dirs::new();
    let mut p = shm::open_publisher("orders", &RingConfig::for_payload(Mode::Reliable, 1, PAYLOAD, 8), &dirs.0)?;
    let mut buf = [0u8; PAYLOAD];
    for pos in 0..8 {
        fill(pos, &mut buf);
        p.publish(&buf)?;
    }
    let mut peer = Peer::spawn("hold-consumer", &dirs, 3);
    peer.expect_line("holding")?;
    peer.child.kill()?; // SIGKILL; deliberately not reaped: the child stays a zombie
    std::thread::sleep(std::time::Duration::from_millis(100));
    let zombie = std::fs::read_to_string(format!("/proc/{}/stat", peer.child.id()))?;
    assert!(zombie.contains(") Z "), "the killed consumer should be a zombie: {zombie}");
    let st = p.consumer_status();
    assert!(!st[0].alive, "a zombie is not a live consumer: {st:?}");
    let mut c = shm::open_consumer("orders", &dirs.0)?;
    let Some(Recv::Message(m)) = c.try_recv() else { return Err("the new consumer got nothing".into()) };
    assert!(m.position <= 3 && intact(m.position, m.payload), "resumed at {}", m.position);
    peer.child.wait()?;
    Ok(())
}

/// While one process publishes a ring, another that tries to publish it is refused with the
/// live publisher's pid, changes nothing, and the stream goes on.
fn second_publisher_refused() -> Result<(), Failed> {
    let dirs = Dirs::new();
    let cfg = RingConfig::for_payload(Mode::Lossy, 2, PAYLOAD, 256);
    let mut p = shm::open_publisher("md", &cfg, &dirs.0)?;
    let mut s = shm::open_observer("md", StartAt::Latest, &dirs.0)?;
    let mut buf = [0u8; PAYLOAD];
    fill(0, &mut buf);
    p.publish(&buf)?;
    let mut peer = Peer::spawn("second-publisher", &dirs, 0);
    let said = peer.expect_line("refused")?;
    assert!(said.contains(&format!("pid {}", std::process::id())), "{said}");
    peer.finish()?;
    assert_eq!(s.publisher_state(), PublisherState::Live { pid: u64::from(std::process::id()), epoch: 1 });
    fill(1, &mut buf);
    assert_eq!(p.publish(&buf)?, 1);
    read_in_order(&mut s, 0, 2, 8).map_err(|c| format!("observer failed ({c})"))?;
    Ok(())
}

/// A consumer in another pid namespace writes a pid that means nothing (or another process)
/// here. Played by overwriting the live consumer's owner word with the pid of a process that is
/// gone: its line must not be handed to a second consumer while it still reads in place.
fn live_consumer_with_foreign_pid_keeps_its_line() -> Result<(), Failed> {
    let dirs = Dirs::new();
    let cfg = RingConfig::for_payload(Mode::Reliable, 1, PAYLOAD, 8);
    let p = shm::open_publisher("orders", &cfg, &dirs.0)?;
    let mut peer = Peer::spawn("hold-consumer", &dirs, 0);
    peer.expect_line("holding")?;
    let gone = {
        let mut c = Command::new("true").spawn()?;
        let id = c.id();
        c.wait()?;
        u64::from(id)
    };
    let owner_offset = 256 + 8; // consumer line 0, owner word
    let file = std::fs::OpenOptions::new().read(true).write(true).open(p.path())?;
    // SAFETY: a shared mapping of the ring file; only the owner word is written, atomically.
    let map = unsafe { memmap2::MmapOptions::new().len(4096).map_mut(&file)? };
    // SAFETY: the word is 8-aligned inside the mapped header page, and only touched atomically.
    let owner = unsafe { &*(map.as_ptr().add(owner_offset) as *const std::sync::atomic::AtomicU64) };
    owner.store(gone, std::sync::atomic::Ordering::Release);
    let second = shm::open_consumer("orders", &dirs.0);
    assert!(second.is_err(), "a second consumer took the line of a live one");
    assert!(p.consumer_status()[0].alive, "the live consumer is reported dead");
    peer.say("stop");
    peer.finish()
}

/// A publisher killed at fault point `point` (its `nth` hit) on a reliable ring; a new publisher
/// takes the ring over. Every message the dead one published (`published` of them) and every
/// message the new one publishes reaches the consumer exactly once, in order, intact.
#[cfg(tickbus_testing)]
fn publisher_killed_at(point: &str, nth: u64, published: u64) -> Result<(), Failed> {
    let dirs = Dirs::new();
    let fault = format!("{point}:{nth}");
    let mut peer = Peer::spawn_with("publish-until-fault", &dirs, 1000, &[("TICKBUS_FAULT", fault.as_str())]);
    let status = peer.child.wait()?;
    assert_eq!(status.code(), Some(tickbus::fault::EXIT_CODE), "the publisher should die at {point}");
    let cfg = RingConfig::for_payload(Mode::Reliable, 1, PAYLOAD, 64);
    let mut p = shm::open_publisher("orders", &cfg, &dirs.0)?;
    assert_eq!(p.position(), published, "the new publisher must continue after the last published message");
    let mut buf = [0u8; PAYLOAD];
    for pos in published..published + 5 {
        fill(pos, &mut buf);
        assert_eq!(p.publish(&buf)?, pos);
    }
    let mut c = shm::open_consumer("orders", &dirs.0)?;
    read_in_order(&mut c, 0, published + 5, 7).map_err(|code| format!("consumer check failed ({code})"))?;
    assert!(c.try_recv().is_none(), "more messages than were published");
    Ok(())
}

/// Receives `count` messages at positions `from..from + count`, each intact and in order
/// (spinning while empty). Returns the exit code of the first violation, naming it on stderr.
fn read_in_order(s: &mut shm::ShmSubscriber, from: u64, count: u64, code: i32) -> Result<(), i32> {
    let mut next = from;
    while next < from + count {
        match s.try_recv() {
            Some(Recv::Message(m)) if m.position == next && intact(next, m.payload) => next += 1,
            Some(other) => {
                eprintln!("expected message {next}, got {other:?}");
                return Err(code);
            }
            None => std::hint::spin_loop(),
        }
    }
    Ok(())
}

/// Child roles. Exit code 0 = pass; anything else fails the parent's test.
fn child(role: &str) -> i32 {
    let opts = child_opts();
    let n: u64 = std::env::var("TICKBUS_TEST_COUNT").unwrap().parse().unwrap();
    let mut stdin = std::io::stdin().lines();
    match role {
        "consume" => {
            let mut c = shm::open_consumer("orders", &opts).expect("consumer");
            if let Err(code) = read_in_order(&mut c, 0, n, 3) {
                return code;
            }
            println!("ok {n}");
            0
        }
        "pause" => {
            let mut s = shm::open_observer("md", StartAt::Latest, &opts).expect("observer");
            println!("attached");
            if let Err(code) = read_in_order(&mut s, 0, n, 3) {
                return code;
            }
            println!("paused");
            let _ = stdin.next(); // publisher laps us meanwhile
            let gap = loop {
                match s.try_recv() {
                    Some(Recv::Gap(g)) => break g,
                    Some(other) => {
                        eprintln!("expected a gap, got {other:?}");
                        return 4;
                    }
                    None => std::hint::spin_loop(),
                }
            };
            println!("gap {} {}", gap.expected, gap.resumed_at);
            if let Err(code) = read_in_order(&mut s, gap.resumed_at, 100, 5) {
                return code;
            }
            println!("done 100");
            0
        }
        "verify" => {
            let mut s = shm::open_observer("hammer", StartAt::Latest, &opts).expect("observer");
            println!("attached");
            let (mut delivered, mut gaps) = (0u64, 0u64);
            while delivered < n || gaps == 0 {
                let got = match s.try_recv() {
                    Some(Recv::Message(m)) => {
                        if !intact(m.position, m.payload) {
                            eprintln!("torn message at {}", m.position);
                            return 2;
                        }
                        delivered += 1;
                        true
                    }
                    Some(Recv::Gap(_)) => {
                        gaps += 1;
                        true
                    }
                    None => false,
                };
                if !got {
                    if s.position() >= 50_000_000 {
                        eprintln!("writer gave up: delivered {delivered}, gaps {gaps}");
                        return 6;
                    }
                    std::hint::spin_loop();
                }
            }
            println!("delivered {delivered} gaps {gaps}");
            0
        }
        "crash-publisher" => {
            let mut p = shm::open_publisher("md", &RingConfig::for_payload(Mode::Lossy, 2, PAYLOAD, 256), &opts)
                .expect("publisher");
            let mut buf = [0u8; PAYLOAD];
            for pos in 0..n {
                fill(pos, &mut buf);
                p.publish(&buf).unwrap();
            }
            println!("published");
            std::process::exit(0) // no destructors run: the ring is left as a crash leaves it
        }
        "second-publisher" => {
            let cfg = RingConfig::for_payload(Mode::Lossy, 2, PAYLOAD, 256);
            match shm::open_publisher("md", &cfg, &opts) {
                Ok(_) => {
                    eprintln!("a second publisher got the ring");
                    10
                }
                Err(e) => {
                    println!("refused: {e}");
                    0
                }
            }
        }
        "hold-consumer" => {
            let mut c = shm::open_consumer("orders", &opts).expect("consumer");
            for _ in 0..n {
                assert!(matches!(c.try_recv(), Some(Recv::Message(_))));
            }
            println!("holding");
            let _ = stdin.next();
            0
        }
        #[cfg(tickbus_testing)]
        "publish-until-fault" => {
            assert!(tickbus::fault::arm_from_env(), "no TICKBUS_FAULT for this role");
            let cfg = RingConfig::for_payload(Mode::Reliable, 1, PAYLOAD, 64);
            let mut p = shm::open_publisher("orders", &cfg, &opts).expect("publisher");
            let mut buf = [0u8; PAYLOAD];
            for pos in 0..n {
                fill(pos, &mut buf);
                p.publish(&buf).expect("publish");
            }
            eprintln!("the fault point was never reached");
            9
        }
        "crash-consumer" => {
            let mut c = shm::open_consumer("orders", &opts).expect("consumer");
            for _ in 0..n {
                assert!(matches!(c.try_recv(), Some(Recv::Message(_))));
            }
            println!("consumed");
            std::process::exit(0)
        }
        other => {
            eprintln!("unknown role {other}");
            1
        }
    }
}
