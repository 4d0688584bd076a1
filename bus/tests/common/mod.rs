//! Test harness shared by the hot-path proofs: counts syscalls (seccomp traps on the measured
//! thread) and allocations (a counting global allocator) while a closure runs.
//! A test binary that uses it declares the allocator: `#[global_allocator] static A: Counting = Counting;`.
#![allow(dead_code)]
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use libtest_mimic::Failed;
use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static TRAPS: Cell<u64> = const { Cell::new(0) };
}

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
fn trap_syscalls_on_this_thread() {
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

/// This process's open file descriptors on /dev/infiniband/uverbs* (the verbs command channel).
pub fn uverbs_fds() -> Vec<i32> {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| {
                let e = e.ok()?;
                let target = std::fs::read_link(e.path()).ok()?;
                target
                    .to_string_lossy()
                    .starts_with("/dev/infiniband/uverbs")
                    .then(|| e.file_name().to_string_lossy().parse().ok())
                    .flatten()
            })
            .collect()
        })
        .unwrap_or_default()
}

/// The content every test message at `pos` carries, so a torn or misplaced byte shows.
pub fn fill(pos: u64, buf: &mut [u8]) {
    for (k, c) in buf.chunks_exact_mut(8).enumerate() {
        c.copy_from_slice(&(pos.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ k as u64).to_le_bytes());
    }
}

/// Whether `buf` is exactly what [`fill`] wrote for `pos`.
pub fn intact(pos: u64, buf: &[u8]) -> bool {
    buf.chunks_exact(8)
        .enumerate()
        .all(|(k, c)| u64::from_le_bytes(c.try_into().unwrap()) == pos.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ k as u64)
}

/// The devices RDMA tests use: (local, peer). TICKBUS_RDMA_DEVICE (default: the first device)
/// and TICKBUS_RDMA_PEER_DEVICE (default: the second, else the first).
#[cfg(feature = "rdma")]
pub fn rdma_devices() -> (String, String) {
    let d = tickbus::sys::verbs::device_names();
    let local = std::env::var("TICKBUS_RDMA_DEVICE").unwrap_or_else(|_| d.first().cloned().unwrap_or_default());
    let peer = std::env::var("TICKBUS_RDMA_PEER_DEVICE")
        .unwrap_or_else(|_| d.get(1).or(d.first()).cloned().unwrap_or_default());
    (local, peer)
}

/// Another run of this test binary (a subscriber role, chosen by environment variables), driven
/// by lines on its stdin and stdout.
pub struct Subprocess {
    pub child: std::process::Child,
    pub stdin: std::process::ChildStdin,
    pub lines: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl Subprocess {
    pub fn start(env: &[(&str, String)]) -> Result<Subprocess, Failed> {
        use std::process::{Command, Stdio};
        let exe = std::env::current_exe()?;
        let mut child = Command::new(exe)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting a subscriber process: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().ok_or("no stdout")?));
        Ok(Subprocess { child, stdin, lines })
    }

    /// The next line, which must start with `prefix`.
    pub fn expect(&mut self, prefix: &str) -> Result<String, Failed> {
        match self.lines.next() {
            Some(Ok(l)) if l.starts_with(prefix) => Ok(l),
            other => Err(format!("subscriber said {other:?}, expected {prefix:?}").into()),
        }
    }

    pub fn say(&mut self, line: &str) -> Result<(), Failed> {
        use std::io::Write;
        writeln!(self.stdin, "{line}").map_err(|e| format!("telling the subscriber {line:?}: {e}").into())
    }

    /// Closes its stdin and waits: it must exit successfully.
    pub fn finish(self) -> Result<(), Failed> {
        let Subprocess { mut child, stdin, .. } = self;
        drop(stdin);
        match child.wait() {
            Ok(st) if st.success() => Ok(()),
            Ok(st) => Err(format!("subscriber failed: {st}").into()),
            Err(e) => Err(e.into()),
        }
    }
}

/// In a subscriber process: prints "warm" (the publisher may start), then polls on a thread
/// that traps every syscall until `n` messages were delivered (`delivered_one` says whether a
/// poll delivered one), and prints "counts syscalls S allocs A delivered D".
pub fn poll_trapped_and_report<S: Send + 'static>(
    subscriber: S,
    n: u64,
    mut delivered_one: impl FnMut(&mut S) -> bool + Send + 'static,
) {
    let (delivered, c) = on_trapped_thread(
        move || {
            println!("warm");
            subscriber
        },
        move |s| {
            let (mut delivered, mut budget) = (0u64, 2_000_000_000u64);
            while delivered < n && budget > 0 {
                budget -= 1;
                if delivered_one(s) {
                    delivered += 1;
                }
            }
            delivered
        },
    );
    println!("counts syscalls {} allocs {} delivered {delivered}", c.syscalls, c.allocs);
}

/// The `main` of an RDMA test binary whose subscribers are other runs of itself: with
/// `role_var` set, runs `child` for that role and exits; otherwise runs `tests` one at a time
/// (each drives both cores, and /proc/self/io counts per process). Without RDMA devices the
/// tests report ignored, unless TICKBUS_REQUIRE_RDMA is set (the rig sets it): then they fail.
#[cfg(feature = "rdma")]
pub fn rdma_test_main(
    binary: &str,
    role_var: &str,
    child: fn(&str) -> Result<(), Failed>,
    tests: Vec<libtest_mimic::Trial>,
) {
    if let Ok(role) = std::env::var(role_var) {
        std::process::exit(match child(&role) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("subscriber {role}: {e:?}");
                1
            }
        });
    }
    let mut args = libtest_mimic::Arguments::from_args();
    args.test_threads = Some(1);
    let skip = tickbus::sys::verbs::device_names().is_empty() && std::env::var_os("TICKBUS_REQUIRE_RDMA").is_none();
    if skip {
        eprintln!(
            "{binary}: no RDMA device on this host: tests ignored. They run in the Soft-RoCE guest (tools/test.sh)."
        );
    }
    let tests = tests.into_iter().map(|t| t.with_ignored_flag(skip)).collect();
    libtest_mimic::run(&args, tests).exit();
}

/// Publishes `total` 64-byte messages ([`fill`]ed with their index) on a thread that traps every
/// syscall except writes to the verbs device, retrying a full queue (`publish` says whether one
/// went out), and asserts: every message went out, no allocation, no other syscall, and exactly
/// one doorbell `write` per message on Soft-RoCE (`rxe`; none on a NIC with a user-space doorbell).
#[cfg(feature = "rdma")]
pub fn publish_with_doorbells_only<P: Send + 'static>(
    publisher: P,
    total: u64,
    rxe: bool,
    mut publish: impl FnMut(&mut P, &[u8]) -> bool + Send + 'static,
) {
    let fds = uverbs_fds();
    let w0 = process_write_syscalls();
    let (published, c) = on_trapped_thread_allowing(
        &fds,
        move || (publisher, [0u8; 64]),
        move |(p, buf)| {
            let (mut ok, mut budget) = (0u64, 100_000_000u64);
            while ok < total && budget > 0 {
                budget -= 1;
                fill(ok, buf);
                if publish(p, buf) {
                    ok += 1;
                }
            }
            ok
        },
    );
    let writes = process_write_syscalls() - w0;
    assert_eq!(published, total);
    assert_eq!(c, Counts { syscalls: 0, allocs: 0 }, "publisher made a syscall other than its doorbell, or allocated");
    assert_eq!(writes, if rxe { total } else { 0 }, "doorbell writes");
}

#[cfg(feature = "rdma")]
/// A bare UD QP that sends arbitrary bytes to a group (what a misconfigured neighbour does).
pub struct RawSender {
    qp: tickbus::sys::verbs::UdQp,
    ah: tickbus::sys::verbs::AddressHandle,
    buf: tickbus::sys::verbs::MemoryRegion,
}

#[cfg(feature = "rdma")]
impl RawSender {
    pub fn new(device: &str, group: std::net::Ipv4Addr, qkey: u32) -> Result<RawSender, Failed> {
        let ctx = tickbus::sys::verbs::Context::open(Some(device))?;
        let qp = tickbus::sys::verbs::UdQp::new(&ctx, 8, qkey)?;
        let ah = tickbus::sys::verbs::AddressHandle::new(&ctx, tickbus::sys::verbs::Gid::from_ipv4(group))?;
        let access = tickbus::sys::verbs::ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0;
        let buf =
            tickbus::sys::verbs::MemoryRegion::register(&ctx, tickbus::sys::verbs::HugeBuf::pages(4096)?, access)?;
        Ok(RawSender { qp, ah, buf })
    }
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), Failed> {
        // SAFETY: the region is ours and 4096 bytes long; nothing else writes it.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.buf.as_ptr(), bytes.len()) };
        // SAFETY: the bytes stay in place until the completion below is polled.
        unsafe { self.qp.post_send(1, self.buf.sge(0, bytes.len()), &self.ah, 0xFF_FFFF, true, false)? };
        let mut wc = [tickbus::sys::verbs::Completion::EMPTY; 1];
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.qp.cq().poll(&mut wc)? == 0 {
            if Instant::now() > deadline {
                return Err("raw send never completed".into());
            }
        }
        if !wc[0].is_ok() {
            return Err(format!("raw send failed: {}", wc[0].status_str()).into());
        }
        Ok(())
    }
}
