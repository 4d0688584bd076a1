//! AF_XDP sockets on an interface's receive queues (one, or every one), each with its UMEM in
//! hugepages where they can be had, and the feed's XDP program steering only the feed's
//! destinations to the socket of the queue a frame arrived on.
//!
//! The steady state makes no syscall: frames come off the RX ring and go back on the fill ring
//! by shared-memory ring operations; the only syscall is the `poll` the kernel asks for through
//! the fill ring's need-wakeup flag (`XDP_USE_NEED_WAKEUP`), counted in [`IngestStats::wakeups`].
use std::ffi::CString;
use std::net::{SocketAddrV4, UdpSocket};
use std::num::NonZeroU32;
use std::os::fd::RawFd;
use std::ptr::NonNull;

use xdpilone::{DeviceQueue, IfInfo, RingRx, Socket, SocketConfig, Umem, UmemConfig, User};

use super::frame::{parse_udp, FrameCounts, UdpFrame};
use super::program::{AttachMode, Steering};
use super::XdpError;

/// What to open.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct XdpOptions {
    /// The interface the feed's lines arrive on.
    pub iface: String,
    /// Its receive queue to bind (one socket per queue; 0 on a single-queue interface).
    /// Ignored with [`XdpOptions::all_queues`].
    pub queue: u32,
    /// Bind a socket on every receive queue the interface has (each its own UMEM of `frames`
    /// frames: 16 MiB a queue by default, pinned, so size `frames` down on a NIC with many
    /// queues), so whatever queue the NIC's hashing (RSS) puts a line on is taken. Without it a
    /// multi-queue interface loses what arrives on the other queues: the kernel has no socket
    /// on the lines' ports either. A line is one flow, which the NIC keeps on one queue; if its
    /// hashing is changed while the feed runs, the line's datagrams around the change may come
    /// out of order across queues (the arbiter then treats the early ones as a jump).
    pub all_queues: bool,
    /// The destinations (multicast group or local address, and port) to take; every other frame
    /// goes to the kernel.
    pub dests: Vec<SocketAddrV4>,
    /// UMEM frames (each one packet buffer of 4 KiB): the fill and RX rings' size too.
    pub frames: u32,
    /// The VLAN the lines arrive on (0: untagged, or priority-tagged with VLAN 0): frames of
    /// other VLANs on a trunk (a test feed on the same group and port) go to the kernel. A NIC
    /// that strips tags on receive (rx-vlan offload) hands XDP untagged frames: leave it 0.
    pub vlan: u16,
    /// Generic XDP (the kernel's stack) even where the driver has native XDP.
    pub generic: bool,
    /// Zero-copy required (an error where the driver has none) rather than tried, then copy.
    pub require_zero_copy: bool,
    /// Check the UDP checksum of datagrams that carry one (the IPv4 header's is always checked).
    /// Off by default, because a sender on this host (a veth) leaves it to checksum offload and
    /// its frames carry a partial sum only a NIC would complete. On a real NIC turn it on
    /// (`tickbus feed --xdp-udp-checksum`): the NIC only flags a bad checksum, the kernel's
    /// stack is what drops it, and AF_XDP bypasses that stack.
    pub udp_checksum: bool,
}

impl XdpOptions {
    /// Queue 0 of `iface`, 4,096 frames (16 MiB of UMEM), native XDP tried first, zero-copy
    /// tried first, UDP checksums not checked (see [`XdpOptions::udp_checksum`]).
    pub fn new(iface: &str, dests: Vec<SocketAddrV4>) -> XdpOptions {
        XdpOptions {
            iface: iface.into(),
            queue: 0,
            all_queues: false,
            dests,
            frames: 4096,
            vlan: 0,
            generic: false,
            require_zero_copy: false,
            udp_checksum: false,
        }
    }
}

/// What the ingest ended up as (for `doctor --iface` and the feed's start line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct IngestInfo {
    /// Native or generic XDP.
    pub mode: AttachMode,
    /// Whether the socket is zero-copy (else the kernel copies each frame into the UMEM).
    pub zero_copy: bool,
    /// Whether the UMEM is in 2 MiB hugepages (else 4 KiB pages: more TLB misses).
    pub hugepages: bool,
    /// The interface's receive queues: more than one, and what the NIC hashes to a queue
    /// without a socket never reaches the ingest (the kernel has no socket on the port either,
    /// so it is lost): bind them all ([`XdpOptions::all_queues`]) or steer the lines to one.
    pub rx_queues: usize,
    /// Queues with a socket bound (1, or `rx_queues` with [`XdpOptions::all_queues`]).
    pub bound_queues: usize,
}

/// What the ingest has taken and refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct IngestStats {
    /// Frames taken off the RX ring.
    pub frames: u64,
    /// Well-formed datagrams to a steered destination, handed on.
    pub datagrams: u64,
    /// Malformed frames, by why (counted and dropped).
    pub refused: FrameCounts,
    /// Well-formed datagrams to another destination or VLAN (another ingest's program on the
    /// queue).
    pub other_destination: u64,
    /// Syscalls made because the kernel asked (the fill ring's need-wakeup flag).
    pub wakeups: u64,
    /// Polls after which some frames waited for room on the fill ring (handed back next poll).
    pub refill_waits: u64,
}

/// The UMEM's memory: a private anonymous mapping, in hugepages where the system has them.
struct Area {
    ptr: NonNull<u8>,
    /// Bytes the UMEM uses.
    len: usize,
    /// Bytes mapped (`len` rounded up to a whole hugepage: munmap of a hugetlb mapping takes
    /// whole pages, and a part would fail and leak the pages).
    mapped: usize,
    hugepages: bool,
}

impl Area {
    fn new(len: usize) -> Result<Area, XdpError> {
        let map = |len: usize, flags| {
            // SAFETY: a new private anonymous mapping (no fd, no fixed address): it aliases
            // nothing; the result is checked against MAP_FAILED.
            let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
            (p != libc::MAP_FAILED).then_some(p)
        };
        let base = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        let huge = len.div_ceil(HUGEPAGE) * HUGEPAGE;
        let (p, hugepages, mapped) = match map(huge, base | libc::MAP_HUGETLB | (21 << libc::MAP_HUGE_SHIFT)) {
            Some(p) => (p, true, huge),
            None => match map(len, base) {
                Some(p) => (p, false, len),
                None => {
                    return Err(XdpError::Io {
                        what: "mapping the UMEM",
                        why: std::io::Error::last_os_error().to_string(),
                    })
                }
            },
        };
        let ptr = NonNull::new(p.cast::<u8>()).expect("mmap never returns null on success");
        Ok(Area { ptr, len, mapped, hugepages })
    }

    /// The bytes of one frame the RX ring returned, if the descriptor lies inside the UMEM.
    /// Only that frame is borrowed: the kernel may be writing others meanwhile.
    #[inline]
    fn frame(&self, addr: u64, len: u32) -> Option<&[u8]> {
        let (at, len) = (usize::try_from(addr).ok()?, len as usize);
        if at.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: `at..at + len` lies inside the live mapping (checked above); the frame was
        // returned on the RX ring, so the kernel wrote it before publishing the descriptor and
        // writes it again only after it is back on the fill ring, which happens after this
        // borrow ends (`poll` hands frames back once every one of the batch is read).
        Some(unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(at), len) })
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `new`; the socket that used it (the
        // kernel's reference) is closed before: `QueueSocket` declares its rings first.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.mapped) };
    }
}

/// One receive queue's AF_XDP socket: its rings, its UMEM and the UMEM's memory. Fields drop
/// in order: the rings and the socket before the UMEM's memory.
struct QueueSocket {
    rx: RingRx,
    fill: DeviceQueue,
    _user: User,
    _socket: Socket,
    _umem: OwnedUmem,
    area: Area,
    /// Frame addresses to hand back to the fill ring (allocated once); the first `pending`
    /// are ones the fill ring had no room for yet.
    refill: Box<[u64]>,
    pending: usize,
    queue: u32,
    /// Frames taken off this queue's RX ring.
    frames: u64,
}

/// Frames of an interface's receive queues, through AF_XDP. Fields drop in order: the program
/// first (nothing more is redirected), then the sockets, each before its UMEM's memory.
pub struct XdpIngest {
    steering: Steering,
    sockets: Vec<QueueSocket>,
    /// Kernel sockets joined to the multicast groups (IGMP, so a switch forwards them); they
    /// receive nothing, the XDP program takes the datagrams first.
    _groups: Vec<UdpSocket>,
    dests: Vec<SocketAddrV4>,
    vlan: u16,
    udp_checksum: bool,
    zero_copy: bool,
    rx_queues: usize,
    /// The interface (for [`XdpIngest::verdict`]).
    ifindex: u32,
    stats: IngestStats,
}

// SAFETY: an `Area` owns its private mapping; the only other pointer into it is the `Umem`
// (below) of the same `QueueSocket`, and the kernel's side of it is not a Rust thread. Nothing
// is borrowed from it outside the `XdpIngest` holding that socket, which reads it only through
// `&mut self`, so moving it to another thread moves every user of the mapping with it. Not
// Sync: no shared access.
unsafe impl Send for Area {}

/// xdpilone's `Umem`, which is not `Send` only for its raw pointer to our `Area`.
struct OwnedUmem(#[allow(dead_code)] Umem);

// SAFETY: the pointer inside points into its `QueueSocket`'s own `Area`, which moves with it
// (see above); the rest of a `Umem` (Arc'd descriptor and device control) is Send. Kept in the
// `QueueSocket` that made it, never shared or cloned out. Only these two parts carry an
// `unsafe impl`: a field added later that is not Send still fails the crate root's check.
unsafe impl Send for OwnedUmem {}

impl std::fmt::Debug for XdpIngest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpIngest").field("info", &self.info()).field("stats", &self.stats).finish_non_exhaustive()
    }
}

/// A 2 MiB hugepage.
const HUGEPAGE: usize = 2 << 20;

/// How long a busy queue is waited for (see [`XdpIngest::open_any`]).
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The size of a UMEM frame (a page, the largest copy mode takes): frames up to 3,840 bytes
/// (the page less the kernel's headroom and tail room); the kernel drops longer ones, counted
/// in [`XdpIngest::kernel_drops`]. A feed's datagrams fit an Ethernet MTU.
const FRAME: u32 = 4096;

impl XdpIngest {
    /// Opens the socket, fills its fill ring, joins multicast groups and attaches the program.
    /// Needs root (see [`XdpError::Io`]) and an interface that is up.
    pub fn open(opts: &XdpOptions) -> Result<XdpIngest, XdpError> {
        if opts.dests.is_empty() {
            return Err(XdpError::Config("no destination to take: give the lines' group:port".into()));
        }
        XdpIngest::open_any(opts)
    }

    /// What AF_XDP on `iface`'s `queue` can be (native or generic XDP, zero-copy or copy mode):
    /// opens a socket and attaches the program with nothing to steer (every frame still goes
    /// to the kernel), then closes both. For `tickbus doctor --iface`.
    pub fn probe(iface: &str, queue: u32) -> Result<IngestInfo, XdpError> {
        let mut o = XdpOptions::new(iface, Vec::new());
        (o.queue, o.frames) = (queue, 64);
        XdpIngest::open_any(&o).map(|x| x.info())
    }

    fn open_any(opts: &XdpOptions) -> Result<XdpIngest, XdpError> {
        let counted = crate::sys::net::rx_queues(&opts.iface);
        let rx_queues = counted.as_ref().map_or(1, |&n| n.max(1));
        let queues: Vec<u32> = match (opts.all_queues, counted) {
            (false, _) => vec![opts.queue],
            (true, Ok(n)) if n > 0 => (0..n as u32).collect(),
            // Every queue asked for and none counted: binding queue 0 alone would lose the rest.
            (true, r) => {
                return Err(XdpError::Iface {
                    iface: opts.iface.clone(),
                    why: format!(
                        "its receive queues could not be counted in /sys/class/net ({}): bind one (`--xdp-queue`)",
                        r.map_or_else(|e| e.to_string(), |_| "none listed".into())
                    ),
                })
            }
        };
        if let Some(q) = queues.iter().find(|&&q| q >= super::program::MAX_QUEUES) {
            return Err(XdpError::Config(format!(
                "queue {q}: the program's socket map holds queues 0 to {} (an interface with more: steer the lines to queues below that, and bind each one)",
                super::program::MAX_QUEUES - 1
            )));
        }
        let frames = opts.frames.clamp(64, 1 << 20).next_power_of_two();
        let mut attempts: Vec<bool> = if opts.require_zero_copy { vec![true] } else { vec![true, false] };
        // A queue whose last socket just closed (a feed restarted, a doctor's probe) stays busy
        // until the kernel has torn that socket down, which it does after the close returns.
        let busy_until = std::time::Instant::now() + BUSY_WAIT;
        loop {
            let mut last = None;
            for zero_copy in attempts.clone() {
                match XdpIngest::open_with(opts, &queues, rx_queues, frames, zero_copy) {
                    Ok(x) => return Ok(x),
                    // A driver without zero-copy will not grow it: copy mode only from now on
                    // (retrying zero-copy would bind and close some queues each time, and keep
                    // them busy for the copy-mode attempt).
                    Err(e @ XdpError::Bind { zero_copy: true, busy: false, .. }) if attempts.len() > 1 => {
                        attempts.retain(|&z| !z);
                        last = Some(e);
                    }
                    Err(e) => last = Some(e),
                }
            }
            let last = last.expect("at least one attempt");
            if !matches!(last, XdpError::Bind { busy: true, .. }) || std::time::Instant::now() >= busy_until {
                return Err(last);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn open_with(
        opts: &XdpOptions,
        queues: &[u32],
        rx_queues: usize,
        frames: u32,
        zero_copy: bool,
    ) -> Result<XdpIngest, XdpError> {
        let name = CString::new(opts.iface.as_str())
            .map_err(|_| XdpError::Config(format!("interface name {:?} holds a NUL", opts.iface)))?;
        let mut info = IfInfo::invalid();
        info.from_name(&name).map_err(|e| XdpError::Iface { iface: opts.iface.clone(), why: format!("{e:?}") })?;
        let sockets = queues
            .iter()
            .map(|&q| QueueSocket::open(opts, info, q, frames, zero_copy))
            .collect::<Result<Vec<_>, _>>()?;
        let groups = join_groups(&opts.dests, info.ifindex())?;
        let xsks: Vec<(u32, RawFd)> = sockets.iter().map(|s| (s.queue, s.rx.as_raw_fd())).collect();
        let steering = Steering::attach(&opts.iface, &opts.dests, opts.vlan, &xsks, opts.generic)?;
        Ok(XdpIngest {
            steering,
            sockets,
            _groups: groups,
            dests: opts.dests.clone(),
            vlan: opts.vlan,
            udp_checksum: opts.udp_checksum,
            zero_copy,
            rx_queues,
            ifindex: info.ifindex(),
            stats: IngestStats::default(),
        })
    }

    /// How it is attached.
    pub fn info(&self) -> IngestInfo {
        IngestInfo {
            mode: self.steering.mode(),
            zero_copy: self.zero_copy,
            hugepages: self.sockets.iter().all(|s| s.area.hugepages),
            rx_queues: self.rx_queues,
            bound_queues: self.sockets.len(),
        }
    }

    /// The queues bound and the frames each has taken (how the NIC spread the lines).
    pub fn frames_per_queue(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.sockets.iter().map(|s| (s.queue, s.frames))
    }

    /// What this ingest's XDP program does with `frame` (a whole Ethernet frame, at least its
    /// 14-byte header) arriving on the bound interface and its first bound queue: the kernel runs the program on
    /// a copy (`BPF_PROG_TEST_RUN`), so nothing is sent, taken or counted. For tests and for
    /// checking a steering set-up frame by frame (a syscall: never on the hot path). The kernel
    /// takes a frame of 14 bytes up to about a page, and a test run with a context (the
    /// interface and queue) needs Linux 5.14 or later; otherwise it answers EINVAL, returned
    /// as [`XdpError::Program`].
    pub fn verdict(&self, frame: &[u8]) -> Result<super::Verdict, XdpError> {
        self.steering.verdict(frame, self.ifindex, self.sockets[0].queue)
    }

    /// What it has taken and refused.
    pub fn stats(&self) -> IngestStats {
        self.stats
    }

    /// Frames the kernel dropped for the sockets: RX ring full, fill ring empty, invalid
    /// descriptors (a syscall per queue: off the hot path).
    pub fn kernel_drops(&self) -> Result<u64, XdpError> {
        let mut drops = 0;
        for q in &self.sockets {
            let s = q
                .fill
                .statistics_v2()
                .map_err(|e| XdpError::Io { what: "reading the socket's statistics", why: format!("{e:?}") })?;
            drops += s.rx_dropped + s.rx_ring_full + s.rx_invalid_descs;
        }
        Ok(drops)
    }

    /// Takes up to `max` frames off each bound queue's RX ring, hands each well-formed datagram
    /// to a steered destination to `f` (in arrival order within a queue; a line's datagrams are
    /// one flow, which a NIC keeps on one queue), counts the rest, and gives every frame back to
    /// the kernel. Returns the frames taken (0: none waiting). No syscall unless the kernel set
    /// a need-wakeup flag; no allocation.
    #[inline]
    pub fn poll(&mut self, max: u32, mut f: impl FnMut(&UdpFrame<'_>)) -> usize {
        let XdpIngest { sockets, dests, vlan, udp_checksum, stats, .. } = self;
        let mut n = 0;
        for q in sockets.iter_mut() {
            n += q.poll(max, dests, *vlan, *udp_checksum, stats, &mut f);
        }
        n
    }
}

impl QueueSocket {
    /// Opens the socket on `queue`, its UMEM of `frames` frames, and fills its fill ring.
    fn open(
        opts: &XdpOptions,
        mut info: IfInfo,
        queue: u32,
        frames: u32,
        zero_copy: bool,
    ) -> Result<QueueSocket, XdpError> {
        info.set_queue(queue);
        let area = Area::new(frames as usize * FRAME as usize)?;
        let cfg = UmemConfig { fill_size: frames, complete_size: 64, frame_size: FRAME, headroom: 0, flags: 0 };
        let slice = NonNull::slice_from_raw_parts(area.ptr, area.len);
        let io = |what: &'static str| move |e: xdpilone::Errno| XdpError::Io { what, why: format!("{e:?}") };
        // SAFETY: `slice` is page aligned (mmap), `frames * FRAME` bytes, and outlives the UMEM:
        // `area` is the last field of `QueueSocket` to drop.
        let umem = unsafe { Umem::new(cfg, slice) }.map_err(io("registering the UMEM"))?;
        let socket = Socket::with_shared(&info, &umem).map_err(io("opening the AF_XDP socket"))?;
        let mut fill = umem.fq_cq(&socket).map_err(io("mapping the fill and completion rings"))?;
        let flags = SocketConfig::XDP_BIND_NEED_WAKEUP
            | if zero_copy { SocketConfig::XDP_BIND_ZEROCOPY } else { SocketConfig::XDP_BIND_COPY };
        let rx_size = NonZeroU32::new(frames);
        let user = umem
            .rx_tx(&socket, &SocketConfig { rx_size, tx_size: None, bind_flags: flags })
            .map_err(io("configuring the RX ring"))?;
        let rx = user.map_rx().map_err(io("mapping the RX ring"))?;
        umem.bind(&user).map_err(|e| XdpError::Bind {
            iface: opts.iface.clone(),
            queue,
            zero_copy,
            busy: e.get_raw() == libc::EBUSY,
            why: format!("{e:?}"),
        })?;
        {
            let mut w = fill.fill(frames);
            let put = w.insert((0..u64::from(frames)).map(|i| i * u64::from(FRAME)));
            w.commit();
            if put != frames {
                return Err(XdpError::Io { what: "filling the fill ring", why: format!("took {put} of {frames}") });
            }
        }
        Ok(QueueSocket {
            rx,
            fill,
            _user: user,
            _socket: socket,
            _umem: OwnedUmem(umem),
            area,
            refill: vec![0; frames as usize].into_boxed_slice(),
            pending: 0,
            queue,
            frames: 0,
        })
    }

    /// [`XdpIngest::poll`] on this queue.
    #[inline]
    fn poll(
        &mut self,
        max: u32,
        dests: &[SocketAddrV4],
        vlan: u16,
        udp_checksum: bool,
        stats: &mut IngestStats,
        f: &mut impl FnMut(&UdpFrame<'_>),
    ) -> usize {
        let QueueSocket { rx, fill, area, refill, pending, frames, .. } = self;
        // Frames not yet back on the fill ring (it had no room last time) come first.
        let max = max.min((refill.len() - *pending) as u32);
        let mut n = 0usize;
        {
            let mut r = rx.receive(max);
            while let Some(d) = r.read() {
                refill[*pending + n] = d.addr;
                n += 1;
                stats.frames += 1;
                *frames += 1;
                let Some(frame) = area.frame(d.addr, d.len) else {
                    stats.refused.truncated += 1; // a descriptor outside the UMEM: never from a sane kernel
                    continue;
                };
                match parse_udp(frame, udp_checksum) {
                    Ok(u) if dests.contains(&u.dst) && u.vlan.unwrap_or(0) == vlan => {
                        stats.datagrams += 1;
                        f(&u);
                    }
                    Ok(_) => stats.other_destination += 1,
                    Err(e) => stats.refused.count(e),
                }
            }
            r.release();
        }
        let back = *pending + n;
        if back > 0 {
            // The kernel publishes a batch's RX descriptors before it moves the fill ring's
            // consumer: room for all of them may not show yet. What does not fit waits for the
            // next poll, never dropped (a frame dropped here would be gone for the day).
            let mut w = fill.fill(back as u32);
            let put = w.insert(refill[..back].iter().copied()) as usize;
            w.commit();
            refill.copy_within(put..back, 0);
            *pending = back - put;
            stats.refill_waits += u64::from(*pending > 0);
        }
        if fill.needs_wakeup() {
            stats.wakeups += 1;
            fill.wake();
        }
        n
    }
}

/// A kernel UDP socket joined to each multicast group of `dests` on interface `ifindex`.
fn join_groups(dests: &[SocketAddrV4], ifindex: u32) -> Result<Vec<UdpSocket>, XdpError> {
    let mut out = Vec::new();
    for d in dests.iter().filter(|d| d.ip().is_multicast()) {
        let s = UdpSocket::bind(("0.0.0.0", 0))
            .map_err(|e| XdpError::Io { what: "opening a socket to join a group", why: e.to_string() })?;
        let mreq = libc::ip_mreqn {
            imr_multiaddr: libc::in_addr { s_addr: u32::from_ne_bytes(d.ip().octets()) },
            imr_address: libc::in_addr { s_addr: 0 },
            imr_ifindex: ifindex as libc::c_int,
        };
        use std::os::fd::AsRawFd;
        // SAFETY: a valid socket, a fully initialised ip_mreqn and its exact size.
        let rc = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_ADD_MEMBERSHIP,
                (&mreq as *const libc::ip_mreqn).cast(),
                std::mem::size_of::<libc::ip_mreqn>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(XdpError::Io {
                what: "joining a multicast group (IGMP)",
                why: format!("{}: {}", d.ip(), std::io::Error::last_os_error()),
            });
        }
        out.push(s);
    }
    Ok(out)
}
