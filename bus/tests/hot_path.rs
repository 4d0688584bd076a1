//! Proof that the steady-state publish and poll loops make no syscall and no allocation.
//!
//! Each measured thread installs a seccomp filter that traps every syscall but exit and
//! rt_sigreturn into a SIGSYS handler that counts it (the syscall fails with ENOSYS), and a
//! counting global allocator counts that thread's allocations. A control test proves both
//! detectors fire.
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
use tickbus::codecs::md::Quote;
use tickbus::codecs::Message;
use tickbus::ring::ClaimError;
use tickbus::shm::{self, HugepagePolicy, ShmOptions};
use tickbus::{Mode, Recv, RingConfig, StartAt};

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static TRAPS: Cell<u64> = const { Cell::new(0) };
}

struct Counting;

// SAFETY: forwards to the system allocator unchanged; only bumps a const-initialised
// thread-local counter, which neither allocates nor recurses.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

extern "C" fn on_sigsys(_sig: libc::c_int, _info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let _ = TRAPS.try_with(|c| c.set(c.get() + 1));
    // SAFETY: the kernel passes a valid ucontext_t for SA_SIGINFO handlers; setting RAX makes the
    // trapped syscall return -ENOSYS to its caller.
    unsafe {
        let uc = ctx as *mut libc::ucontext_t;
        (*uc).uc_mcontext.gregs[libc::REG_RAX as usize] = -(libc::ENOSYS as i64);
    }
}

/// Counts of what a closure did on this thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    syscalls: u64,
    allocs: u64,
}

/// Installs the SIGSYS counter (process-wide, once) and this thread's trap-everything filter.
/// The filter cannot be removed, so call this on a thread dedicated to the measurement.
fn trap_syscalls_on_this_thread() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: zeroed sigaction is valid; we fill handler, flags and an empty mask.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigsys as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGSYS, &sa, std::ptr::null_mut()), 0);
        }
    });
    let allowed = [libc::SYS_exit, libc::SYS_exit_group, libc::SYS_rt_sigreturn];
    let filter = SeccompFilter::new(
        allowed.iter().map(|n| (*n, vec![])).collect(),
        SeccompAction::Trap,
        SeccompAction::Allow,
        TargetArch::x86_64,
    )
    .unwrap();
    let prog: BpfProgram = filter.try_into().unwrap();
    seccompiler::apply_filter(&prog).unwrap();
}

/// Runs `setup` normally, then `f` with syscalls trapped and allocations counted, on a thread
/// of its own. That thread never tears down under the filter (freeing its stack, TLS and
/// handles needs syscalls that would be trapped): it hands its result over through a
/// `OnceLock` (no syscall when uncontended) and ends with a raw `exit`. The caller waits with a
/// deadline, so a hot path that blocks fails the test instead of hanging it.
fn on_trapped_thread<S, R>(
    setup: impl FnOnce() -> S + Send + 'static,
    f: impl FnOnce(&mut S) -> R + Send + 'static,
) -> (R, Counts)
where
    R: Clone + Send + Sync + 'static,
{
    let out: Arc<OnceLock<(R, Counts)>> = Arc::new(OnceLock::new());
    let slot = out.clone();
    let _detached = std::thread::spawn(move || {
        let mut state = setup();
        trap_syscalls_on_this_thread();
        let (a0, t0) = (ALLOCS.with(Cell::get), TRAPS.with(Cell::get));
        let r = f(&mut state);
        let counts = Counts { syscalls: TRAPS.with(Cell::get) - t0, allocs: ALLOCS.with(Cell::get) - a0 };
        let _ = slot.set((r, counts));
        std::mem::forget(state); // dropping it (munmap, close) would be trapped
                                 // SAFETY: SYS_exit ends only this thread; it holds no lock and nothing waits on its
                                 // destructors (what it owns is deliberately leaked).
        unsafe { libc::syscall(libc::SYS_exit, 0) };
        unreachable!("SYS_exit returned");
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(v) = out.get() {
            return v.clone();
        }
        assert!(Instant::now() < deadline, "measured thread did not finish within 120 s");
        std::thread::sleep(Duration::from_millis(2));
    }
}

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
    ShmOptions {
        hugepage_dir: format!("/dev/hugepages/{tag}").into(),
        fallback_dir: format!("/dev/shm/{tag}").into(),
        hugepages: HugepagePolicy::Preferred,
    }
}

/// Publisher and subscriber threads over a shm ring: after warm-up both measure `n` messages
/// of steady state. The subscriber polls with a bounded spin budget (no clock, no syscall).
fn steady_state(mode: Mode, tag: &str) -> (Counts, Counts, u64) {
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
            while delivered < n && budget > 0 {
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
    let (p, s, delivered) = steady_state(Mode::Lossy, "lossy");
    assert_eq!(p, Counts { syscalls: 0, allocs: 0 }, "publisher");
    assert_eq!(s, Counts { syscalls: 0, allocs: 0 }, "subscriber");
    assert_eq!(delivered, 100_000, "the subscriber measured its full count");
}

#[test]
fn reliable_publish_and_poll_make_no_syscall_and_no_allocation() {
    let (p, s, delivered) = steady_state(Mode::Reliable, "reliable");
    assert_eq!(p, Counts { syscalls: 0, allocs: 0 }, "publisher");
    assert_eq!(s, Counts { syscalls: 0, allocs: 0 }, "subscriber");
    assert_eq!(delivered, 100_000, "reliable mode delivers every message");
}
