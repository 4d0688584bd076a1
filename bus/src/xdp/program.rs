//! The feed's XDP program (`bus/xdp/feed_steer.c`, compiled by `build.rs`), loaded and attached
//! with aya. Attached through a BPF link where the kernel has them (5.9 on), so the program is
//! detached when the last descriptor of its link closes: a feed killed with `kill -9` leaves
//! nothing attached that would go on stealing its traffic from the kernel.
use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, RawFd};

use aya::maps::{Array, XskMap};
use aya::programs::{TestRun, TestRunOptions, Xdp, XdpMode};
use aya::{Ebpf, Pod};

use super::XdpError;

/// The compiled program, 8-byte aligned as the ELF reader expects.
#[repr(C, align(8))]
struct Aligned<T: ?Sized>(T);
static OBJECT: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/feed_steer.o")));

/// Destinations the program steers (the C side's `MAX_STEER`).
pub(crate) const MAX_STEER: usize = 8;
/// Receive queues the socket map holds (the C side's XSKS `max_entries`).
pub(crate) const MAX_QUEUES: u32 = 64;

/// One steered destination, network byte order (the C side's `struct steer`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Steer {
    addr: u32,
    port: u16,
    vlan: u16,
}
// SAFETY: plain old data: integers only, no padding (4 + 2 + 2 bytes), any bit pattern valid.
unsafe impl Pod for Steer {}

/// How the program ended up attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum AttachMode {
    /// In the driver (native XDP): before any socket buffer is made.
    Native,
    /// In the kernel's stack (generic XDP, `SKB` mode): works on any interface, copies once more.
    Generic,
}

/// The loaded program; dropping it detaches it and unloads it.
pub(crate) struct Steering {
    /// Held for its maps, program and link: dropping it detaches.
    ebpf: Ebpf,
    mode: AttachMode,
}

impl std::fmt::Debug for Steering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Steering").field("mode", &self.mode).finish_non_exhaustive()
    }
}

struct Fd(RawFd);
impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

impl Steering {
    /// Loads the program with `dests` steered (arriving on VLAN `vlan`; 0: untagged), registers
    /// each AF_XDP socket of `xsks` for its queue, then attaches to `iface` (native first unless
    /// `generic`, else generic): nothing is redirected before the sockets are there to take it.
    pub(crate) fn attach(
        iface: &str,
        dests: &[SocketAddrV4],
        vlan: u16,
        xsks: &[(u32, RawFd)],
        generic: bool,
    ) -> Result<Steering, XdpError> {
        // None (a probe): the program steers nothing and passes every frame.
        if dests.len() > MAX_STEER {
            return Err(XdpError::Config(format!("{} destinations: give at most {MAX_STEER}", dests.len())));
        }
        let prog_err = |what: &'static str| move |e: aya::EbpfError| XdpError::Program { what, why: e.to_string() };
        let mut ebpf = Ebpf::load(&OBJECT.0).map_err(prog_err("loading the XDP object"))?;
        {
            let mut steer: Array<_, Steer> = ebpf
                .map_mut("STEER")
                .ok_or_else(|| XdpError::Program { what: "finding the STEER map", why: "not in the object".into() })?
                .try_into()
                .map_err(|e: aya::maps::MapError| XdpError::Program { what: "the STEER map", why: e.to_string() })?;
            for (k, d) in dests.iter().enumerate() {
                let s = Steer { addr: u32::from_ne_bytes(d.ip().octets()), port: d.port().to_be(), vlan };
                steer
                    .set(k as u32, s, 0)
                    .map_err(|e| XdpError::Program { what: "setting a destination", why: e.to_string() })?;
            }
        }
        {
            let mut map: XskMap<_> = ebpf
                .map_mut("XSKS")
                .ok_or_else(|| XdpError::Program { what: "finding the XSKS map", why: "not in the object".into() })?
                .try_into()
                .map_err(|e: aya::maps::MapError| XdpError::Program { what: "the XSKS map", why: e.to_string() })?;
            for &(queue, xsk) in xsks {
                map.set(queue, Fd(xsk), 0)
                    .map_err(|e| XdpError::Program { what: "registering an AF_XDP socket", why: e.to_string() })?;
            }
        }
        let prog: &mut Xdp = ebpf
            .program_mut("tickbus_feed_steer")
            .ok_or_else(|| XdpError::Program { what: "finding the program", why: "not in the object".into() })?
            .try_into()
            .map_err(|e: aya::programs::ProgramError| XdpError::Program { what: "the program", why: e.to_string() })?;
        prog.load()
            .map_err(|e| XdpError::Program { what: "loading the program (the verifier)", why: e.to_string() })?;
        let mode = if generic {
            prog.attach(iface, XdpMode::Skb).map(|_| AttachMode::Generic).map_err(|e| e.to_string())
        } else {
            match prog.attach(iface, XdpMode::Driver) {
                Ok(_) => Ok(AttachMode::Native),
                // Both reasons kept: a native refusal (an MTU too large for native XDP, say)
                // is what the operator needs when generic fails too.
                Err(native) => prog
                    .attach(iface, XdpMode::Skb)
                    .map(|_| AttachMode::Generic)
                    .map_err(|generic| format!("native: {native}; generic: {generic}")),
            }
        }
        .map_err(|why| XdpError::Attach { iface: iface.into(), why })?;
        Ok(Steering { ebpf, mode })
    }

    pub(crate) fn mode(&self) -> AttachMode {
        self.mode
    }

    /// What the program does with `frame` arriving on queue `queue` of interface `ifindex`:
    /// the kernel runs it on a copy (`BPF_PROG_TEST_RUN`), with the maps as they are.
    pub(crate) fn verdict(&self, frame: &[u8], ifindex: u32, queue: u32) -> Result<Verdict, XdpError> {
        let err =
            |what: &'static str| move |e: aya::programs::ProgramError| XdpError::Program { what, why: e.to_string() };
        let prog: &Xdp = self
            .ebpf
            .program("tickbus_feed_steer")
            .ok_or_else(|| XdpError::Program { what: "finding the program", why: "not in the object".into() })?
            .try_into()
            .map_err(err("the program"))?;
        // struct xdp_md as a test run takes it: data at 0, data_end the frame's length, no
        // metadata, arriving on `ifindex`'s receive queue `queue` (which the kernel checks).
        let ctx: Vec<u8> =
            [0, frame.len() as u32, 0, ifindex, queue, 0].iter().flat_map(|w: &u32| w.to_ne_bytes()).collect();
        let opts = TestRunOptions { data_in: Some(frame), ctx_in: Some(&ctx), ..TestRunOptions::new() };
        let r = prog.test_run(opts).map_err(err("running the program on a frame (BPF_PROG_TEST_RUN)"))?;
        Ok(match r.return_value {
            XDP_PASS => Verdict::Passed,
            XDP_REDIRECT => Verdict::Steered,
            other => Verdict::Other(other),
        })
    }
}

const XDP_PASS: u32 = 2;
const XDP_REDIRECT: u32 = 4;

/// What the steering program decided for one frame ([`super::XdpIngest::verdict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Redirected to the queue's AF_XDP socket: a feed datagram.
    Steered,
    /// Passed to the kernel's stack, untouched.
    Passed,
    /// Another XDP action (the program returns none other: a bug if ever seen).
    Other(u32),
}
