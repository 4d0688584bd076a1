//! A veth pair between this host and a network namespace the test makes and removes: a link
//! for wire tests that leaves nothing on the machine and sends nothing off it.
use std::net::Ipv4Addr;
use std::process::Command;

/// A namespace `ns` holding `inner`, linked by a veth pair to `outer` on the host side.
/// Addresses: host `10.X.Y.1/24`, namespace `10.X.Y.2/24`. Removed on drop.
#[derive(Debug)]
pub struct VethPair {
    /// The namespace's name (`ip netns exec NAME ...`).
    pub ns: String,
    /// The host-side interface.
    pub outer: String,
    /// The namespace-side interface.
    pub inner: String,
    /// The host side's address.
    pub outer_ip: Ipv4Addr,
    /// The namespace side's address.
    pub inner_ip: Ipv4Addr,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("running ip {args:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

impl VethPair {
    /// Makes the namespace and the pair, named from `tag` and this process's id (interface
    /// names stay within 15 bytes), with multicast routed out of the namespace's side.
    pub fn new(tag: &str) -> Result<VethPair, String> {
        VethPair::with_queues(tag, 1)
    }

    /// As [`VethPair::new`], each end with `queues` transmit and receive queues: a datagram
    /// arrives on the receive queue its sender's flow was hashed to (for multi-queue ingest).
    pub fn with_queues(tag: &str, queues: u32) -> Result<VethPair, String> {
        let id = std::process::id() % 100_000;
        // The subnet from the tag and the pid: pairs a process makes at once (tests run in
        // parallel threads) must not share one, or the host's routes to them would collide.
        let t = tag.bytes().fold(0u32, |a, b| a.wrapping_mul(31).wrapping_add(u32::from(b)));
        let (x, y) = ((t % 200 + 20) as u8, (id % 256) as u8);
        let v = VethPair {
            ns: format!("tb{tag}{id}"),
            outer: format!("tb{tag}o{id}"),
            inner: format!("tb{tag}i{id}"),
            outer_ip: Ipv4Addr::new(10, x, y, 1),
            inner_ip: Ipv4Addr::new(10, x, y, 2),
        };
        if v.outer.len() > 15 {
            return Err(format!("interface name {} is longer than 15 bytes: use a shorter tag", v.outer));
        }
        let _ = ip(&["netns", "del", &v.ns]);
        let _ = ip(&["link", "del", &v.outer]);
        ip(&["netns", "add", &v.ns])?;
        // From here on, drop removes what was made.
        let q = queues.max(1).to_string();
        let each = ["numtxqueues", q.as_str(), "numrxqueues", q.as_str()];
        let mut add = vec!["link", "add", v.outer.as_str()];
        add.extend(each);
        add.extend(["type", "veth", "peer", "name", v.inner.as_str()]);
        add.extend(each);
        ip(&add)?;
        ip(&["link", "set", &v.inner, "netns", &v.ns])?;
        ip(&["addr", "add", &format!("{}/24", v.outer_ip), "dev", &v.outer])?;
        ip(&["link", "set", &v.outer, "up"])?;
        let n = |args: &[&str]| {
            let mut a = vec!["-n", v.ns.as_str()];
            a.extend_from_slice(args);
            ip(&a)
        };
        n(&["addr", "add", &format!("{}/24", v.inner_ip), "dev", &v.inner])?;
        n(&["link", "set", &v.inner, "up"])?;
        n(&["link", "set", "lo", "up"])?;
        n(&["route", "add", "224.0.0.0/4", "dev", &v.inner])?;
        Ok(v)
    }

    /// Moves the calling thread into the namespace `ns` (its later sockets are made there). Use
    /// a thread of its own: it does not come back.
    pub fn enter_ns(ns: &str) -> Result<(), String> {
        let path = format!("/run/netns/{ns}");
        let f = std::fs::File::open(&path).map_err(|e| format!("opening {path}: {e}"))?;
        use std::os::fd::AsRawFd;
        // SAFETY: a valid namespace file descriptor; CLONE_NEWNET moves only this thread.
        if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(format!("setns into {ns}: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// The host side's MAC address.
    pub fn outer_mac(&self) -> Result<[u8; 6], String> {
        let p = format!("/sys/class/net/{}/address", self.outer);
        let s = std::fs::read_to_string(&p).map_err(|e| format!("reading {p}: {e}"))?;
        let b: Vec<u8> = s.trim().split(':').filter_map(|h| u8::from_str_radix(h, 16).ok()).collect();
        b.try_into().map_err(|_| format!("{p}: not a MAC address: {s:?}"))
    }

    /// Whether an XDP program is attached to the host side (`ip link show` says `xdp`).
    pub fn outer_has_xdp(&self) -> Result<bool, String> {
        let out = Command::new("ip").args(["link", "show", "dev", &self.outer]).output().map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(text.lines().any(|l| l.contains(" xdp") || l.trim_start().starts_with("prog/xdp")))
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        // Deleting one end deletes the pair; deleting the namespace removes what is left in it.
        let _ = ip(&["link", "del", &self.outer]);
        let _ = ip(&["netns", "del", &self.ns]);
    }
}

/// Sends raw Ethernet frames out of an interface (AF_PACKET), from the thread's namespace.
#[derive(Debug)]
pub struct RawFrames {
    fd: i32,
    ifindex: i32,
}

impl RawFrames {
    /// A packet socket on `iface` (in the calling thread's namespace).
    pub fn new(iface: &str) -> Result<RawFrames, String> {
        let name = std::ffi::CString::new(iface).map_err(|e| e.to_string())?;
        // SAFETY: a NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) } as i32;
        if ifindex == 0 {
            return Err(format!("no interface {iface} here"));
        }
        // SAFETY: plain socket creation; checked below.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        if fd < 0 {
            return Err(format!("AF_PACKET socket: {}", std::io::Error::last_os_error()));
        }
        Ok(RawFrames { fd, ifindex })
    }

    /// Sends one whole frame (destination MAC first).
    pub fn send(&self, frame: &[u8]) -> Result<(), String> {
        // SAFETY: all-zero sockaddr_ll is valid; the fields set below complete it.
        let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        to.sll_family = libc::AF_PACKET as u16;
        to.sll_ifindex = self.ifindex;
        to.sll_halen = 6;
        to.sll_addr[..6].copy_from_slice(&frame[..6]);
        // SAFETY: `frame` is valid for its length; `to` is a complete sockaddr_ll of that size.
        let n = unsafe {
            libc::sendto(
                self.fd,
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&to as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if n as usize == frame.len() {
            Ok(())
        } else {
            Err(format!("sending a raw frame: {}", std::io::Error::last_os_error()))
        }
    }
}

impl Drop for RawFrames {
    fn drop(&mut self) {
        // SAFETY: our own descriptor, closed once.
        unsafe { libc::close(self.fd) };
    }
}
