//! Many datagrams in one syscall: `recvmmsg(2)` into buffers made once, so a busy feed line
//! costs one syscall per batch instead of one per datagram, and nothing is allocated per call.
use std::io;
use std::os::fd::AsRawFd;

/// `count` receive buffers of `size` bytes and the headers `recvmmsg` fills.
pub struct RecvBatch {
    /// `count * size` bytes: datagram `i` lands at `i * size`.
    bufs: Box<[u8]>,
    /// One per buffer, pointing into `bufs`.
    iovs: Box<[libc::iovec]>,
    /// One per buffer, pointing at its `iovs` entry.
    hdrs: Box<[libc::mmsghdr]>,
    size: usize,
    got: usize,
}

// SAFETY: the raw pointers in `iovs` and `hdrs` point only into this struct's own heap boxes,
// which move with it and are never shared: sending the whole to another thread is sound.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// Room for `count` datagrams (at least 1, at most 1024) of up to `size` bytes each.
    pub fn new(count: usize, size: usize) -> RecvBatch {
        let (count, size) = (count.clamp(1, 1024), size.max(1));
        let mut bufs = vec![0u8; count * size].into_boxed_slice();
        // Touched once now: zeroed memory is mapped on first write, and that page fault would
        // otherwise land inside the feed's loop the first time a large datagram reaches a page.
        for b in bufs.iter_mut().step_by(4096) {
            // SAFETY: `b` is a valid, aligned, exclusive byte of `bufs`; volatile so the write of
            // the value it already holds is not elided.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
        let mut iovs: Box<[libc::iovec]> = bufs
            .chunks_exact_mut(size)
            .map(|b| libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: size })
            .collect();
        let hdrs = iovs
            .iter_mut()
            .map(|iov| {
                // SAFETY: an all-zero mmsghdr is its valid empty value (null pointers, zero lengths).
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = iov;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        RecvBatch { bufs, iovs, hdrs, size, got: 0 }
    }

    /// Takes every datagram waiting on `sock`, up to the batch's room, without blocking; returns
    /// how many (0: none waiting).
    pub fn recv(&mut self, sock: &impl AsRawFd) -> io::Result<usize> {
        self.got = 0;
        for (h, iov) in self.hdrs.iter_mut().zip(self.iovs.iter()) {
            h.msg_len = 0;
            h.msg_hdr.msg_flags = 0;
            debug_assert_eq!(iov.iov_len, self.size);
        }
        let vlen = self.hdrs.len() as libc::c_uint;
        // SAFETY: `hdrs` holds `vlen` headers, each with one iovec of `size` bytes inside `bufs`,
        // all owned by `self` and alive for the call; no address or control buffers are given
        // (null, length 0); MSG_DONTWAIT never blocks and the timeout is null.
        let n = unsafe {
            libc::recvmmsg(sock.as_raw_fd(), self.hdrs.as_mut_ptr(), vlen, libc::MSG_DONTWAIT, std::ptr::null_mut())
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock { Ok(0) } else { Err(e) };
        }
        self.got = n as usize;
        Ok(self.got)
    }

    /// Datagram `i` of the last `recv`, and whether it was cut short (longer than the buffer).
    pub fn get(&self, i: usize) -> Option<(&[u8], bool)> {
        let h = self.hdrs[..self.got].get(i)?;
        let len = (h.msg_len as usize).min(self.size);
        let truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        Some((&self.bufs[i * self.size..i * self.size + len], truncated))
    }

    /// Datagrams the last `recv` took.
    pub fn len(&self) -> usize {
        self.got
    }

    /// Whether the last `recv` took none.
    pub fn is_empty(&self) -> bool {
        self.got == 0
    }
}

/// Every (interface name, IPv4 address) pair of this network namespace (`getifaddrs(3)`).
pub fn ipv4_interfaces() -> io::Result<Vec<(String, std::net::Ipv4Addr)>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs made, alive until freeifaddrs.
        let a = unsafe { &*p };
        if !a.ifa_addr.is_null() && !a.ifa_name.is_null() {
            // SAFETY: a non-null ifa_addr points at a sockaddr of its family; AF_INET ones are
            // sockaddr_in. ifa_name is a NUL-terminated string.
            unsafe {
                if i32::from((*a.ifa_addr).sa_family) == libc::AF_INET {
                    let sin = &*a.ifa_addr.cast::<libc::sockaddr_in>();
                    let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                    let name = std::ffi::CStr::from_ptr(a.ifa_name).to_string_lossy().into_owned();
                    out.push((name, ip));
                }
            }
        }
        p = a.ifa_next;
    }
    // SAFETY: the head getifaddrs returned, freed once; no reference into it outlives this.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// The receive queues of interface `name` (`/sys/class/net/NAME/queues/rx-*`).
pub fn rx_queues(name: &str) -> io::Result<usize> {
    let d = std::fs::read_dir(std::path::Path::new("/sys/class/net").join(name).join("queues"))?;
    Ok(d.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().starts_with("rx-")).count())
}
