//! The fabric addresses the verbs layer takes: a port's GID and a QP endpoint with the memory
//! it exposes. Plain data, without the `rdma` feature too, so the control channel's text form
//! of them (`wire::endpoint`) parses and is fuzzed in any build.
use std::fmt;

/// A 16-byte GID (for RoCE v2 over IPv4: `::ffff:a.b.c.d`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The IPv4-mapped GID of `ip`.
    pub fn from_ipv4(ip: std::net::Ipv4Addr) -> Gid {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&ip.octets());
        Gid(g)
    }

    /// The IPv4 address of an IPv4-mapped GID.
    pub fn ipv4(&self) -> Option<std::net::Ipv4Addr> {
        (self.0[..10].iter().all(|b| *b == 0) && self.0[10] == 0xff && self.0[11] == 0xff)
            .then(|| std::net::Ipv4Addr::new(self.0[12], self.0[13], self.0[14], self.0[15]))
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ipv4() {
            Some(ip) => write!(f, "::ffff:{ip}"),
            None => self.0.iter().try_for_each(|b| write!(f, "{b:02x}")),
        }
    }
}

/// A QP endpoint and, optionally, one region of memory the peer may access through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    /// The QP number.
    pub qpn: u32,
    /// 24 bits.
    pub psn: u32,
    /// The port's GID (the peer's address on the fabric).
    pub gid: Gid,
    /// The region (0, 0, 0 if none): address, rkey, length. `addr + len` never wraps.
    pub addr: u64,
    /// The region's remote key.
    pub rkey: u32,
    /// The region's length in bytes.
    pub len: u64,
}

impl Endpoint {
    /// Whether `[addr, addr + len)` lies inside the advertised region.
    pub fn covers(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr && addr.checked_add(len).is_some_and(|end| end <= self.addr + self.len)
    }
}
