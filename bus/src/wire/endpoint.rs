//! What one side tells the other to connect an RC QP and reach its memory, as one text line
//! (the types are the verbs layer's, `sys::addr`; their text form is the wire's, here).
use std::fmt;
use std::str::FromStr;

pub use crate::sys::addr::{Endpoint, Gid};

use super::control::ControlError;

impl fmt::Display for Endpoint {
    /// `qpn psn gid(hex) addr rkey len`, one line, for a text control channel.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ", self.qpn, self.psn)?;
        self.gid.0.iter().try_for_each(|b| write!(f, "{b:02x}"))?;
        write!(f, " {} {} {}", self.addr, self.rkey, self.len)
    }
}

impl FromStr for Endpoint {
    type Err = ControlError;
    fn from_str(s: &str) -> Result<Endpoint, ControlError> {
        let f: Vec<&str> = s.split_whitespace().collect();
        let bad = |field: &'static str| ControlError::Field { field, quoted: super::control::quote(s) };
        if f.len() != 6 {
            return Err(bad("field count (endpoint needs `qpn psn gid32hex addr rkey len`)"));
        }
        let qpn = f[0].parse::<u32>().map_err(|_| bad("qpn (a u32)"))?;
        let psn = f[1].parse::<u32>().ok().filter(|p| *p <= 0xFF_FFFF).ok_or_else(|| bad("psn (24 bits)"))?;
        let gid = Gid(super::control::unhex::<16>(f[2]).ok_or_else(|| bad("gid (32 hex digits)"))?);
        let addr = f[3].parse::<u64>().map_err(|_| bad("address (a u64)"))?;
        let rkey = f[4].parse::<u32>().map_err(|_| bad("rkey (a u32)"))?;
        let len = f[5].parse::<u64>().map_err(|_| bad("length (a u64)"))?;
        if addr.checked_add(len).is_none() {
            return Err(bad("address + length (wraps)"));
        }
        Ok(Endpoint { qpn, psn, gid, addr, rkey, len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_round_trip_through_text_and_bad_lines_are_named() {
        let e = Endpoint {
            qpn: 17,
            psn: 0xABCDE,
            gid: Gid::from_ipv4("169.254.77.1".parse().unwrap()),
            addr: 0x7f00_0000_1000,
            rkey: 0x1234,
            len: 4096,
        };
        let line = e.to_string();
        assert_eq!(line.parse::<Endpoint>().unwrap(), e);
        assert!("17 1 zz".parse::<Endpoint>().unwrap_err().to_string().contains("field count"));
        assert_eq!(format!("{:?}", e.gid), "::ffff:169.254.77.1");
        assert!(e.covers(e.addr, 4096) && e.covers(e.addr + 8, 8));
        assert!(!e.covers(e.addr, 4097) && !e.covers(e.addr - 1, 8) && !e.covers(u64::MAX, 2));
    }
}
