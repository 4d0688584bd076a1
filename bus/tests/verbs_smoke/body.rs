//! Verbs smoke suite on real libibverbs: device, hugepage registration, RC RDMA WRITE and
//! WRITE_WITH_IMM between two processes across devices, UD SEND/RECV, UD multicast with the
//! IP-level join. Every test checks the bytes that arrived, not only status codes.
//!
//! Devices: TICKBUS_RDMA_DEVICE (default: the first) and TICKBUS_RDMA_PEER_DEVICE (default: the
//! second, else the first). Without any device the tests are reported ignored with the reason,
//! unless TICKBUS_REQUIRE_RDMA=1 (set by the Soft-RoCE rig run), which makes that a failure.
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Failed, Trial};

use super::common;
use tickbus::sys::verbs::{
    device_names, AddressHandle, Completion, Context, Endpoint, HugeBuf, MemoryRegion, PreparedRc, RcOptions, SendWr,
    UdQp, WriteWr, GRH_BYTES,
};

const QKEY: u32 = 0x1111_2222;
const GROUP: std::net::Ipv4Addr = std::net::Ipv4Addr::new(239, 77, 0, 1);
const LEN: usize = 4096;

pub fn main() {
    if let Ok(role) = std::env::var("TICKBUS_SMOKE_ROLE") {
        let code = match child(&role) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("child {role}: {e:?}");
                1
            }
        };
        std::process::exit(code);
    }
    let args = Arguments::from_args();
    let devices = device_names();
    let require = std::env::var_os("TICKBUS_REQUIRE_RDMA").is_some();
    let skip = devices.is_empty() && !require;
    if skip {
        eprintln!("verbs_smoke: no RDMA device on this host: tests ignored. They run in the Soft-RoCE guest (tools/test.sh), or on a real NIC with TICKBUS_RDMA_DEVICE=<dev>.");
    } else {
        eprintln!(
            "verbs_smoke: devices {devices:?}: local {}, peer {}",
            common::rdma_devices().0,
            common::rdma_devices().1
        );
    }
    let tests: Vec<Trial> = vec![
        Trial::test("open_device_and_register_a_hugepage_buffer", open_and_register),
        Trial::test("rc_rdma_write_between_two_processes_across_devices", || rc_write(false)),
        Trial::test("rc_write_with_imm_completes_on_the_receiver_with_data", || rc_write(true)),
        Trial::test("ud_send_recv_between_two_processes", ud_send_recv),
        Trial::test("ud_multicast_reaches_every_joined_receiver", ud_multicast),
        Trial::test("a_ud_chain_that_fails_part_way_says_how_many_the_provider_took", ud_chain_part_way),
    ]
    .into_iter()
    .map(|t| t.with_ignored_flag(skip))
    .collect();
    libtest_mimic::run(&args, tests).exit();
}

fn pattern(i: usize, seed: u8) -> u8 {
    (i as u8).wrapping_mul(31).wrapping_add(seed)
}

/// A registered buffer: hugepages when the host has them (the rig reserves some), else 4 KiB.
fn region(ctx: &Arc<Context>, bytes: usize, access: u32) -> Result<MemoryRegion, Failed> {
    let buf = HugeBuf::hugepages_or_pages(bytes, false)?;
    Ok(MemoryRegion::register(ctx, buf, access)?)
}

/// A local-write region whose first `len` bytes hold `pattern(i, seed)`.
fn source(ctx: &Arc<Context>, len: usize, seed: u8) -> Result<MemoryRegion, Failed> {
    let mr = region(ctx, LEN, tickbus::sys::verbs::ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0)?;
    for i in 0..len {
        // SAFETY: i < len <= LEN <= the region's size, and nothing else touches it yet.
        unsafe { *mr.as_ptr().add(i) = pattern(i, seed) };
    }
    Ok(mr)
}

/// Checks that `len` bytes at `offset` of `mr` hold `pattern(i, seed)`.
fn verify(mr: &MemoryRegion, offset: usize, len: usize, seed: u8) -> Result<(), Failed> {
    for i in 0..len {
        // SAFETY: offset + len <= LEN <= the region's size; volatile because the NIC wrote it.
        let b = unsafe { std::ptr::read_volatile(mr.as_ptr().add(offset + i)) };
        if b != pattern(i, seed) {
            return Err(format!("byte {i} is {b:#x}, expected {:#x}", pattern(i, seed)).into());
        }
    }
    Ok(())
}

fn wait_completion(cq: &mut tickbus::sys::verbs::CompletionQueue) -> Result<Completion, Failed> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut out = [Completion::EMPTY; 1];
    loop {
        if cq.poll(&mut out)? == 1 {
            let c = out[0];
            if !c.is_ok() {
                return Err(format!("work completion failed: {} ({c:?})", c.status_str()).into());
            }
            return Ok(c);
        }
        if Instant::now() > deadline {
            return Err("no completion within 60 s".into());
        }
        std::hint::spin_loop();
    }
}

fn open_and_register() -> Result<(), Failed> {
    let ctx = Context::open(Some(&common::rdma_devices().0))?;
    assert!(ctx.port().gid.ipv4().is_some(), "{:?}", ctx.port());
    let access = tickbus::sys::verbs::ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0;
    let huge = HugeBuf::hugepages(1 << 20)?;
    assert!(huge.is_huge() && huge.len() == 2 << 20);
    let mr = MemoryRegion::register(&ctx, huge, access)?;
    assert!(mr.lkey() != 0 && mr.addr() % (2 << 20) == 0);
    // The registered memory is ours to use like any other.
    // SAFETY: the region is 2 MiB and nothing else uses it.
    unsafe { std::ptr::write_bytes(mr.as_ptr(), 0xAB, mr.len()) };
    // SAFETY: as above.
    assert_eq!(unsafe { *mr.as_ptr().add(mr.len() - 1) }, 0xAB);
    assert!(Context::open(Some("no-such-device")).is_err());
    Ok(())
}

/// A child process in `role`, talking one line at a time over its stdin/stdout.
struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: std::io::Lines<BufReader<ChildStdout>>,
}

impl Peer {
    fn spawn(role: &str, device: &str) -> Peer {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env("TICKBUS_SMOKE_ROLE", role)
            .env("TICKBUS_RDMA_DEVICE", device)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Peer { child, stdin, lines }
    }
    fn read(&mut self) -> Result<String, Failed> {
        Ok(self.lines.next().ok_or("child closed its output")??)
    }
    fn say(&mut self, s: &str) -> Result<(), Failed> {
        Ok(writeln!(self.stdin, "{s}")?)
    }
    fn finish(mut self) -> Result<(), Failed> {
        let st = self.child.wait()?;
        if st.success() {
            Ok(())
        } else {
            Err(format!("child failed: {st}").into())
        }
    }
}

/// Parent writes LEN bytes into the child's registered buffer with one RDMA WRITE (or
/// WRITE_WITH_IMM); the child checks every byte.
fn rc_write(with_imm: bool) -> Result<(), Failed> {
    let ctx = Context::open(Some(&common::rdma_devices().0))?;
    let src = source(&ctx, LEN, 7)?;
    let mut peer = Peer::spawn(if with_imm { "rc-target-imm" } else { "rc-target" }, &common::rdma_devices().1);
    let remote: Endpoint = peer.read()?.parse()?;
    let qp = PreparedRc::new(&ctx, RcOptions::default())?;
    peer.say(&qp.endpoint(None).to_string())?;
    let mut qp = qp.connect(&remote)?;
    assert_eq!(peer.read()?, "ready");
    let imm = with_imm.then_some(0x00C0_FFEE);
    let wr = WriteWr {
        wr_id: 1,
        sge: src.sge(0, LEN),
        remote_addr: remote.addr,
        rkey: remote.rkey,
        imm,
        signaled: true,
        inline: false,
    };
    // SAFETY: `src` outlives the completion we wait for below.
    unsafe { qp.post_write(wr)? };
    let c = wait_completion(qp.send_cq())?;
    assert_eq!(c.wr_id, 1);
    assert_eq!(peer.read()?, "verified");
    peer.finish()
}

fn ud_send_recv() -> Result<(), Failed> {
    let ctx = Context::open(Some(&common::rdma_devices().0))?;
    let src = source(&ctx, 256, 3)?;
    let mut peer = Peer::spawn("ud-target", &common::rdma_devices().1);
    let line = peer.read()?;
    let (qpn, gid) = line.split_once(' ').ok_or("bad ud line")?;
    let remote: Endpoint = format!("{qpn} 0 {gid} 0 0 0").parse()?;
    let mut qp = UdQp::new(&ctx, 16, QKEY)?;
    let ah = AddressHandle::new(&ctx, remote.gid)?;
    // SAFETY: `src` outlives the completion.
    unsafe { qp.post_send(9, src.sge(0, 256), &ah, remote.qpn, true, false)? };
    assert_eq!(wait_completion(qp.cq())?.wr_id, 9);
    assert_eq!(peer.read()?, "verified");
    peer.finish()
}

fn ud_multicast() -> Result<(), Failed> {
    let ctx = Context::open(Some(&common::rdma_devices().0))?;
    let src = source(&ctx, 512, 5)?;
    // One receiver on the other device, one on the sender's own device.
    let mut peers = vec![
        Peer::spawn("mcast-target", &common::rdma_devices().1),
        Peer::spawn("mcast-target", &common::rdma_devices().0),
    ];
    for p in &mut peers {
        assert_eq!(p.read()?, "joined");
    }
    let mut qp = UdQp::new(&ctx, 16, QKEY)?;
    let ah = AddressHandle::new(&ctx, tickbus::sys::verbs::Gid::from_ipv4(GROUP))?;
    // SAFETY: `src` outlives the completion.
    unsafe { qp.post_send(5, src.sge(0, 512), &ah, 0xFF_FFFF, true, false)? };
    assert_eq!(wait_completion(qp.cq())?.wr_id, 5);
    for mut p in peers {
        assert_eq!(p.read()?, "verified");
        p.finish()?;
    }
    Ok(())
}

/// A chain of three SENDs whose second asks to go inline with more bytes than the QP allows:
/// the provider takes the first, refuses the second, and `post_sends` says it took one (the
/// ud-mcast publisher accounts for exactly those, so no sequence number is sent twice). The
/// first completes; nothing after it was posted.
fn ud_chain_part_way() -> Result<(), Failed> {
    let ctx = Context::open(Some(&common::rdma_devices().0))?;
    let src = source(&ctx, LEN, 7)?;
    let mut qp = UdQp::new(&ctx, 16, QKEY)?;
    let too_long = 3000;
    assert!(too_long > qp.max_inline() as usize, "the QP grants {} inline bytes", qp.max_inline());
    let ah = AddressHandle::new(&ctx, tickbus::sys::verbs::Gid::from_ipv4(std::net::Ipv4Addr::new(239, 77, 0, 9)))?;
    let wr = |wr_id, len, inline| SendWr { wr_id, sge: src.sge(0, len), signaled: true, inline };
    let chain = [wr(1, 64, false), wr(2, too_long, true), wr(3, 64, false)];
    // SAFETY: `src` outlives every completion polled below, and the QP (dropped first).
    let got = unsafe { qp.post_sends(&chain, &ah, 0xFF_FFFF) };
    match got {
        Err((1, e)) => eprintln!("refused as expected after one: {e}"),
        Err((k, e)) => return Err(format!("took {k} before refusing ({e}), expected 1").into()),
        Ok(()) => return Err("an over-long inline SEND was taken".into()),
    }
    assert_eq!(wait_completion(qp.cq())?.wr_id, 1);
    std::thread::sleep(Duration::from_millis(200));
    let mut more = [Completion::EMPTY; 4];
    assert_eq!(qp.cq().poll(&mut more)?, 0, "a completion for a WR the provider refused or never saw");
    Ok(())
}

/// Child roles: each prints what the parent needs, checks what arrives, prints "verified".
fn child(role: &str) -> Result<(), Failed> {
    let ctx = Context::open(Some(&common::rdma_devices().0))?;
    let mut stdin = std::io::stdin().lines();
    let access = {
        use tickbus::sys::verbs::ffi::ibv_access_flags as A;
        A::IBV_ACCESS_LOCAL_WRITE.0 | A::IBV_ACCESS_REMOTE_WRITE.0
    };
    match role {
        "rc-target" | "rc-target-imm" => {
            let dst = region(&ctx, LEN, access)?;
            let qp = PreparedRc::new(&ctx, RcOptions::default())?;
            println!("{}", qp.endpoint(Some((dst.addr(), dst.rkey(), LEN as u64))));
            let remote: Endpoint = stdin.next().ok_or("no endpoint from parent")??.parse()?;
            let mut qp = qp.connect(&remote)?;
            if role == "rc-target-imm" {
                // SAFETY: no bytes are named; the WR needs nothing to stay valid.
                unsafe { qp.post_recv(77, None)? };
            }
            println!("ready");
            let deadline = Instant::now() + Duration::from_secs(60);
            if role == "rc-target-imm" {
                let c = wait_completion(qp.recv_cq())?;
                assert_eq!((c.wr_id, c.imm, c.byte_len as usize), (77, Some(0x00C0_FFEE), LEN), "{c:?}");
            } else {
                // In-order placement: the last byte lands last. Poll it, then check everything.
                // SAFETY: in bounds; volatile because the NIC writes it.
                while unsafe { std::ptr::read_volatile(dst.as_ptr().add(LEN - 1)) } != pattern(LEN - 1, 7) {
                    if Instant::now() > deadline {
                        return Err("RDMA WRITE never arrived".into());
                    }
                    std::hint::spin_loop();
                }
                fence(Ordering::Acquire);
            }
            verify(&dst, 0, LEN, 7)?;
            println!("verified");
            Ok(())
        }
        "ud-target" | "mcast-target" => {
            let dst = region(&ctx, LEN, access)?;
            let mut qp = UdQp::new(&ctx, 16, QKEY)?;
            // SAFETY: dst outlives the completion we wait for.
            unsafe { qp.post_recv(3, dst.sge(0, LEN))? };
            let (len, seed) = if role == "ud-target" {
                let gid = Endpoint { qpn: qp.qpn(), psn: 0, gid: ctx.port().gid, addr: 0, rkey: 0, len: 0 }.to_string();
                let gid_hex = gid.split_whitespace().nth(2).unwrap().to_owned();
                println!("{} {gid_hex}", qp.qpn());
                (256, 3)
            } else {
                qp.join_multicast(GROUP)?;
                println!("joined");
                (512, 5)
            };
            let c = wait_completion(qp.cq())?;
            assert_eq!((c.wr_id, c.byte_len as usize), (3, GRH_BYTES + len), "{c:?}");
            verify(&dst, GRH_BYTES, len, seed)?;
            println!("verified");
            Ok(())
        }
        other => Err(format!("unknown role {other}").into()),
    }
}
