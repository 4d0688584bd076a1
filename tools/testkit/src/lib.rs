//! Test support shared by the hot-path proofs of every crate in the workspace: counts the
//! syscalls a closure makes (seccomp traps every syscall on the measured thread into a counting
//! SIGSYS handler; the syscall fails with ENOSYS) and its allocations (a counting global
//! allocator). A test binary that uses it declares the allocator:
//! `#[global_allocator] static A: tickbus_testkit::Counting = tickbus_testkit::Counting;`.
//! Also [`within`]: a call that must return in bounded time (what hung forever before a fix fails
//! instead of hanging the suite). Not published: it exists for this workspace's tests.
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};

pub mod netns;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static TRAPS: Cell<u64> = const { Cell::new(0) };
}

/// A global allocator that counts each thread's allocations and reallocations.
pub struct Counting;

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
pub struct Counts {
    pub syscalls: u64,
    pub allocs: u64,
}

/// Installs the SIGSYS counter (process-wide, once) and this thread's trap-everything filter.
/// The filter cannot be removed, so call this on a thread dedicated to the measurement.
pub fn trap_syscalls_on_this_thread() {
    trap_syscalls_except_writes_to(&[]);
}

/// Like trap_syscalls_on_this_thread, but `write` to one of `fds` is allowed (and not counted):
/// Soft-RoCE rings its doorbell with a write to the uverbs device. Count those with
/// [`process_write_syscalls`].
pub fn trap_syscalls_except_writes_to(fds: &[i32]) {
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
    let mut rules: std::collections::BTreeMap<i64, Vec<seccompiler::SeccompRule>> =
        allowed.iter().map(|n| (*n, vec![])).collect();
    if !fds.is_empty() {
        use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};
        let per_fd = fds
            .iter()
            .map(|fd| {
                let c = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, *fd as u64).unwrap();
                SeccompRule::new(vec![c]).unwrap()
            })
            .collect();
        rules.insert(libc::SYS_write, per_fd);
    }
    let filter = SeccompFilter::new(rules, SeccompAction::Trap, SeccompAction::Allow, TargetArch::x86_64).unwrap();
    let prog: BpfProgram = filter.try_into().unwrap();
    seccompiler::apply_filter(&prog).unwrap();
}

/// Allocations this thread has made so far (counted by [`Counting`]): for a proof that needs
/// real syscalls (a socket's receive) and so cannot run trapped.
pub fn thread_allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

/// Runs `setup` normally, then `f` with syscalls trapped and allocations counted, on a thread
/// of its own. That thread never tears down under the filter (freeing its stack, TLS and
/// handles needs syscalls that would be trapped): it hands its result over through a
/// `OnceLock` (no syscall when uncontended) and ends with a raw `exit`. The caller waits with a
/// deadline, so a hot path that blocks fails the test instead of hanging it.
pub fn on_trapped_thread<S, R>(
    setup: impl FnOnce() -> S + Send + 'static,
    f: impl FnOnce(&mut S) -> R + Send + 'static,
) -> (R, Counts)
where
    R: Clone + Send + Sync + 'static,
{
    on_trapped_thread_allowing(&[], setup, f)
}

/// [`on_trapped_thread`] with writes to `fds` allowed (see [`trap_syscalls_except_writes_to`]).
pub fn on_trapped_thread_allowing<S, R>(
    fds: &[i32],
    setup: impl FnOnce() -> S + Send + 'static,
    f: impl FnOnce(&mut S) -> R + Send + 'static,
) -> (R, Counts)
where
    R: Clone + Send + Sync + 'static,
{
    let fds = fds.to_vec();
    let out: Arc<OnceLock<(R, Counts)>> = Arc::new(OnceLock::new());
    let slot = out.clone();
    let _detached = std::thread::spawn(move || {
        let mut state = setup();
        trap_syscalls_except_writes_to(&fds);
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

/// Write-class syscalls this process has made (`syscw` in /proc/self/io).
pub fn process_write_syscalls() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").expect("/proc/self/io");
    io.lines()
        .find_map(|l| l.strip_prefix("syscw: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("syscw in /proc/self/io")
}

/// Runs `f` on a thread and returns what it returns, failing (with `what`) if that takes longer
/// than `limit`. The thread is left behind: a call that hangs fails its test instead of hanging
/// the suite.
pub fn within<T: Send + 'static>(limit: Duration, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).unwrap_or_else(|_| panic!("did not finish within {limit:?}: {what}"))
}

/// How to make the test build (`--cfg tickbus_testing`: fault and crash points, the private
/// verbs layer) that some tests need, for the message they fail or are ignored with.
pub const TESTING_BUILD: &str = "build it with RUSTFLAGS=\"--cfg tickbus_testing\" (tools/test.sh does)";

/// A test that needs a test build (`--cfg tickbus_testing`: fault points, or the private verbs
/// layer) in a build without it. Never silently absent: reported ignored, with how to build it,
/// or failed when `TICKBUS_REQUIRE_FAULTS` is set (tools/test.sh sets it and builds with the
/// cfg, so there it always runs for real).
pub fn needs_testing_cfg(name: &str) -> libtest_mimic::Trial {
    let required = std::env::var_os("TICKBUS_REQUIRE_FAULTS").is_some();
    // Run (required, or asked for with --ignored / --include-ignored), it fails: it cannot run
    // in this build, and a test that did not run never passes.
    let t = libtest_mimic::Trial::test(name, move || {
        let why = if required { "TICKBUS_REQUIRE_FAULTS is set and this build has no fault points" } else { "not run" };
        Err(format!("{why}: it needs a test build: {TESTING_BUILD}").into())
    });
    if required {
        t
    } else {
        eprintln!("{name}: ignored, it needs a test build: {TESTING_BUILD}");
        t.with_ignored_flag(true)
    }
}
