//! Test harness shared by the bus's integration tests: the syscall and allocation counters
//! (`tickbus-testkit`, shared with the apps' proofs), RDMA devices and subprocess roles.
#![allow(dead_code)]
use libtest_mimic::Failed;

#[allow(unused_imports)] // each test binary uses some of them
pub use tickbus_testkit::{
    on_trapped_thread, on_trapped_thread_allowing, process_write_syscalls, thread_allocs,
    trap_syscalls_except_writes_to, Counting, Counts,
};

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
    let d = tickbus::rdma::device_names();
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
    let skip = tickbus::rdma::device_names().is_empty() && std::env::var_os("TICKBUS_REQUIRE_RDMA").is_none();
    if skip {
        eprintln!(
            "{binary}: no RDMA device on this host: tests ignored. They run in the Soft-RoCE guest (tools/test.sh)."
        );
    }
    let tests = tests.into_iter().map(|t| t.with_ignored_flag(skip)).collect();
    libtest_mimic::run(&args, tests).exit();
}

/// Publishes `total` 64-byte messages ([`fill`]ed with their index) in bursts of up to `burst`
/// (at most 8) on a thread that traps every syscall except writes to the verbs device,
/// retrying a full queue (`publish` gets a burst and says how many of it went out), and
/// asserts: every message went out, no allocation, no other syscall, and exactly one doorbell
/// `write` per post that sent anything on Soft-RoCE (`rxe`; none on a NIC with a user-space
/// doorbell).
#[cfg(feature = "rdma")]
pub fn publish_with_doorbells_only<P: Send + 'static>(
    publisher: P,
    total: u64,
    burst: usize,
    rxe: bool,
    mut publish: impl FnMut(&mut P, &[&[u8]]) -> usize + Send + 'static,
) {
    assert!((1..=8).contains(&burst), "bursts of 1 to 8, not {burst}");
    let fds = uverbs_fds();
    let w0 = process_write_syscalls();
    let ((published, posts), c) = on_trapped_thread_allowing(
        &fds,
        move || (publisher, [[0u8; 64]; 8]),
        move |(p, bufs)| {
            let (mut ok, mut posts, mut budget) = (0u64, 0u64, 100_000_000u64);
            while ok < total && budget > 0 {
                budget -= 1;
                let k = burst.min((total - ok) as usize);
                for (j, b) in bufs[..k].iter_mut().enumerate() {
                    fill(ok + j as u64, b);
                }
                let refs: [&[u8]; 8] = std::array::from_fn(|j| &bufs[j][..]);
                let sent = publish(p, &refs[..k]);
                assert!(sent <= k, "{sent} of a burst of {k} sent");
                ok += sent as u64;
                posts += u64::from(sent > 0);
            }
            (ok, posts)
        },
    );
    let writes = process_write_syscalls() - w0;
    assert_eq!(published, total);
    assert_eq!(c, Counts { syscalls: 0, allocs: 0 }, "publisher made a syscall other than its doorbell, or allocated");
    assert_eq!(writes, if rxe { posts } else { 0 }, "doorbell writes for {posts} posts of {total} messages");
    if burst > 1 {
        assert!(posts < total / 2, "bursts were not batched: {posts} posts for {total} messages");
    }
}

/// Without `--cfg tickbus_testing` the verbs layer is private: a test that needs a raw sender
/// fails and says how to build it, never passes without sending.
#[cfg(all(feature = "rdma", not(tickbus_testing)))]
pub struct RawSender;

#[cfg(all(feature = "rdma", not(tickbus_testing)))]
impl RawSender {
    pub fn new(_: &str, _: std::net::Ipv4Addr, _: u32) -> Result<RawSender, Failed> {
        Err(format!(
            "this test sends raw datagrams through tickbus's private verbs layer: {}",
            tickbus_testkit::TESTING_BUILD
        )
        .into())
    }
    pub fn send(&mut self, _: &[u8]) -> Result<(), Failed> {
        Err("no raw sender in this build".into())
    }
}

/// A bare UD QP that sends arbitrary bytes to a group (what a misconfigured neighbour does).
/// Drives verbs directly, which tickbus opens only in test builds (`--cfg tickbus_testing`).
#[cfg(all(feature = "rdma", tickbus_testing))]
pub struct RawSender {
    qp: tickbus::sys::verbs::UdQp,
    ah: tickbus::sys::verbs::AddressHandle,
    buf: tickbus::sys::verbs::MemoryRegion,
}

#[cfg(all(feature = "rdma", tickbus_testing))]
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
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while self.qp.cq().poll(&mut wc)? == 0 {
            if std::time::Instant::now() > deadline {
                return Err("raw send never completed".into());
            }
        }
        if !wc[0].is_ok() {
            return Err(format!("raw send failed: {}", wc[0].status_str()).into());
        }
        Ok(())
    }
}
