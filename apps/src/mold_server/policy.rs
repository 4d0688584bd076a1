//! Whom the re-request server answers, and how much: an allow-list of networks and a token
//! bucket of messages per source. A re-request is a 20-byte UDP datagram whose sender address
//! nobody checks, so an open server is a reflector: a forged request from a victim's address
//! makes it send the victim up to a thousand messages. Answering only the configured clients
//! stops that; the per-source budget bounds what even an allowed (or spoofed allowed) source
//! can draw.
//!
//! Pure: takes `now` as an argument, makes no I/O (unit-tested without sockets or sleeps).
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

use ipnet::IpNet;

/// Sources tracked at once; a new source past this many is refused (a flood of spoofed sources
/// cannot grow the table).
pub const MAX_SOURCES: usize = 1024;

/// What a re-request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Not an allowed source (or the table of sources is full): nothing.
    Refused,
    /// Up to this many messages (0: the source's budget is spent for now).
    Messages(u64),
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The allow-list and the budgets.
pub struct Policy {
    allow: Vec<IpNet>,
    per_second: f64,
    sources: HashMap<IpAddr, Bucket>,
}

impl Policy {
    /// Answers sources in `allow`, each up to `per_second` messages a second (a bucket holding
    /// one second's worth, full at first).
    pub fn new(allow: Vec<IpNet>, per_second: u64) -> Policy {
        Policy { allow, per_second: per_second as f64, sources: HashMap::new() }
    }

    /// Whether `from` is in the allow-list (the book service answers only those too).
    pub fn allows(&self, from: IpAddr) -> bool {
        self.allow.iter().any(|n| n.contains(&from))
    }

    /// What a re-request for `want` messages from `from` at `now` may be answered with; takes
    /// what it grants from the source's budget.
    pub fn admit(&mut self, from: IpAddr, want: u64, now: Instant) -> Admit {
        let from = match from {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(from, IpAddr::V4),
            v4 => v4,
        };
        if !self.allow.iter().any(|n| n.contains(&from)) {
            return Admit::Refused;
        }
        let rate = self.per_second;
        if !self.sources.contains_key(&from) && self.sources.len() >= MAX_SOURCES {
            // A bucket that has refilled is the same as none: forget those, so forged sources
            // cannot hold the table for good.
            self.sources.retain(|_, b| b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * rate < rate);
            if self.sources.len() >= MAX_SOURCES {
                return Admit::Refused;
            }
        }
        let b = self.sources.entry(from).or_insert(Bucket { tokens: rate, at: now });
        let dt = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + dt * rate).min(rate);
        b.at = now;
        let n = (want as f64).min(b.tokens.floor()).max(0.0);
        b.tokens -= n;
        Admit::Messages(n as u64)
    }
}

/// Parses `--allow`: an address or a network (`10.1.2.0/24`, `192.0.2.7`, `::1`).
pub fn parse_net(s: &str) -> Result<IpNet, String> {
    s.parse::<IpNet>().or_else(|_| s.parse::<IpAddr>().map(IpNet::from)).map_err(|_| {
        format!("{s:?} is not an address or a network: give e.g. 127.0.0.1, 10.1.2.0/24 or 0.0.0.0/0 (anyone)")
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn only_allowed_sources_are_answered_each_within_its_budget() {
        let mut p = Policy::new(vec![parse_net("127.0.0.1").unwrap(), parse_net("10.1.2.0/24").unwrap()], 1000);
        let t = Instant::now();
        assert_eq!(p.admit(ip("127.0.0.2"), 10, t), Admit::Refused, "loopback, but not the allowed address");
        assert_eq!(p.admit(ip("10.1.3.1"), 10, t), Admit::Refused);
        assert_eq!(p.admit(ip("::ffff:10.1.2.9"), 10, t), Admit::Messages(10), "v4-mapped v6 is the v4 source");
        // One second's worth at once, then nothing until it refills.
        assert_eq!(p.admit(ip("127.0.0.1"), 800, t), Admit::Messages(800));
        assert_eq!(p.admit(ip("127.0.0.1"), 800, t), Admit::Messages(200));
        assert_eq!(p.admit(ip("127.0.0.1"), 800, t), Admit::Messages(0));
        assert_eq!(p.admit(ip("127.0.0.1"), 800, t + Duration::from_millis(500)), Admit::Messages(500));
        // Another source's budget is its own.
        assert_eq!(p.admit(ip("10.1.2.1"), 1000, t), Admit::Messages(1000));
        // A clock that steps back takes nothing away and gives nothing.
        assert_eq!(p.admit(ip("10.1.2.1"), 5, t - Duration::from_secs(1)), Admit::Messages(0));
    }

    #[test]
    fn a_flood_of_sources_cannot_grow_the_table() {
        let mut p = Policy::new(vec![parse_net("0.0.0.0/0").unwrap()], 10);
        let t = Instant::now();
        for i in 0..MAX_SOURCES as u32 {
            assert_eq!(p.admit(IpAddr::from((0x0a00_0000u32 + i).to_be_bytes()), 1, t), Admit::Messages(1));
        }
        assert_eq!(p.admit(ip("192.0.2.1"), 1, t), Admit::Refused);
        assert_eq!(p.admit(ip("10.0.0.0"), 1, t), Admit::Messages(1), "a known source goes on");
        // Once their buckets refill, the flood's sources are forgotten and a new one is served.
        assert_eq!(p.admit(ip("192.0.2.1"), 1, t + std::time::Duration::from_secs(1)), Admit::Messages(1));
        assert!(parse_net("ten").unwrap_err().contains("0.0.0.0/0 (anyone)"));
    }
}
