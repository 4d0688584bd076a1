//! Channel URIs: one string names a stream on any transport, as Aeron's channels do.
//!
//! ```text
//! shm:NAME[?PARAMS]                      a ring on this host (NAME: 1-128 of A-Z a-z 0-9 . _ -)
//! rdma-rc://IP:PORT/STREAM[?PARAMS]      the rdma-rc publisher's control address, and its stream
//! ud-mcast://GROUP/STREAM[?PARAMS]       an IPv4 multicast group (224.0.0.0/4), and the stream
//!
//! PARAMS: KEY or KEY=VALUE, joined by '&', each key at most once:
//!   reliable | lossy        every message, holding the publisher back | never waits (gaps)
//!   stream=ID               shm: the stream id stamped in headers (rdma-rc, ud-mcast: in the path)
//!   slots=N                 ring slots, a power of two from 2 to 2^30 (shm, rdma-rc)
//!   payload=BYTES           largest payload, 8 to 1048576 (shm, rdma-rc)
//!   consumers=N             reliable consumer lines, 1 to 16 (shm, rdma-rc)
//!   device=NAME             the RDMA device (rdma-rc, ud-mcast)
//!   token-env=VAR           the handshake secret is in environment variable VAR (rdma-rc,
//!                           ud-mcast): never the secret itself, which a URI would put in `ps`
//!   recovery=IP:PORT        ud-mcast: where the publisher serves lost datagrams by RDMA READ
//!   history=N               ud-mcast publisher: datagrams kept for recovery (power of two,
//!                           at most 2^20: each is a registered MTU-sized slot)
//! ```
//!
//! Examples: `shm:md`, `shm:orders?reliable&slots=4096`, `rdma-rc://10.0.0.1:7400/7`,
//! `ud-mcast://239.1.2.3/1?recovery=10.0.0.1:7500`. Whoever publishes a stream and whoever reads
//! it give the same URI: the publisher of an rdma-rc stream listens at IP:PORT, its readers
//! connect there; a ud-mcast publisher sends to the group and serves recovery at `recovery`.
//!
//! Pure (no I/O): [`Channel::parse`] and `Display` round-trip (the `channel_uri` fuzz target
//! checks it), and every error names what was wrong and what is allowed.
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};

use super::Reliability;

/// The longest URI taken (a topology line, not a document).
pub const MAX_URI: usize = 1024;

/// Where a stream is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Endpoint {
    /// A shm ring named `name` on this host.
    Shm {
        /// The ring's name (its file in the ring folders).
        name: String,
        /// The stream id stamped in headers.
        stream: Option<u32>,
    },
    /// An rdma-rc stream: its publisher's control address and the stream id.
    RdmaRc {
        /// Where the publisher listens.
        addr: SocketAddr,
        /// The stream id.
        stream: u32,
    },
    /// A ud-mcast stream: its group and stream id.
    UdMcast {
        /// The IPv4 multicast group.
        group: Ipv4Addr,
        /// The stream id.
        stream: u32,
        /// Where the publisher serves recovery of lost datagrams.
        recovery: Option<SocketAddr>,
        /// Datagrams the publisher keeps for recovery.
        history: Option<u32>,
    },
}

/// A parsed channel URI: where the stream is, and how it is laid out and secured.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Channel {
    /// The transport and address.
    pub endpoint: Endpoint,
    /// Reliable or lossy (None: the opener's default).
    pub reliability: Option<Reliability>,
    /// Ring slots.
    pub slots: Option<usize>,
    /// Largest payload.
    pub payload: Option<usize>,
    /// Reliable consumer lines.
    pub consumers: Option<usize>,
    /// The RDMA device.
    pub device: Option<String>,
    /// The environment variable holding the handshake secret.
    pub token_env: Option<String>,
}

/// What is wrong with a channel URI. Each says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChannelError {
    /// Empty, too long, or not text a URI can hold.
    #[error("channel {uri:?}: {why}")]
    Malformed {
        /// The URI (escaped, at most 80 characters).
        uri: String,
        /// What is wrong.
        why: String,
    },
    /// A scheme tickbus does not know.
    #[error("channel {uri:?}: unknown transport {scheme:?}: use shm:NAME, rdma-rc://IP:PORT/STREAM or ud-mcast://GROUP/STREAM")]
    Scheme {
        /// The URI (escaped, at most 80 characters).
        uri: String,
        /// The scheme found.
        scheme: String,
    },
    /// The address part is wrong.
    #[error("channel {uri:?}: {why}")]
    Address {
        /// The URI (escaped, at most 80 characters).
        uri: String,
        /// What is wrong.
        why: String,
    },
    /// A parameter is unknown, repeated, has a bad value, or does not apply to the transport.
    #[error("channel {uri:?}: parameter {param:?}: {why}")]
    Param {
        /// The URI (escaped, at most 80 characters).
        uri: String,
        /// The parameter's key.
        param: String,
        /// What is wrong.
        why: String,
    },
}

/// `s` as it may be quoted in an error: at most 80 characters, control characters escaped.
fn quoted(s: &str) -> String {
    let mut out: String = s.chars().take(80).flat_map(char::escape_default).collect();
    if s.chars().count() > 80 {
        out.push_str("...");
    }
    out
}

fn is_name(s: &str, max: usize) -> bool {
    !s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

impl Channel {
    fn at(endpoint: Endpoint) -> Channel {
        Channel {
            endpoint,
            reliability: None,
            slots: None,
            payload: None,
            consumers: None,
            device: None,
            token_env: None,
        }
    }

    /// A shm ring named `name`, with nothing else said (a name, not a URI: `md?lossy` is
    /// refused, not read as parameters).
    pub fn shm(name: &str) -> Result<Channel, ChannelError> {
        if !is_name(name, 128) {
            return Err(ChannelError::Address {
                uri: quoted(name),
                why: format!(
                    "ring name {:?}: give 1 to 128 of A-Z a-z 0-9 . _ - (or a channel URI, e.g. shm:md?lossy)",
                    quoted(name)
                ),
            });
        }
        Channel::parse(&format!("shm:{name}"))
    }

    /// Parses a channel URI (grammar in the module doc).
    pub fn parse(uri: &str) -> Result<Channel, ChannelError> {
        let q = || quoted(uri);
        let malformed = |why: &str| ChannelError::Malformed { uri: q(), why: why.into() };
        if uri.is_empty() {
            return Err(malformed("empty: give shm:NAME, rdma-rc://IP:PORT/STREAM or ud-mcast://GROUP/STREAM"));
        }
        if uri.len() > MAX_URI {
            return Err(malformed(&format!("{} bytes: a channel URI is at most {MAX_URI}", uri.len())));
        }
        if let Some(c) = uri.chars().find(|c| c.is_whitespace() || c.is_control() || !c.is_ascii()) {
            return Err(malformed(&format!(
                "character {:?} is not allowed (ASCII without spaces or control characters)",
                c.escape_default().to_string()
            )));
        }
        let (scheme, rest) = uri
            .split_once(':')
            .ok_or_else(|| malformed("no transport: begin with shm:, rdma-rc:// or ud-mcast:// (e.g. shm:md)"))?;
        let (body, query) = match rest.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (rest, None),
        };
        let address = |why: String| ChannelError::Address { uri: q(), why };
        let endpoint = match scheme {
            "shm" => {
                let name = body.strip_prefix("//").unwrap_or(body);
                if !is_name(name, 128) {
                    return Err(address(format!(
                        "ring name {:?}: give 1 to 128 of A-Z a-z 0-9 . _ - (a file name in the ring folders)",
                        quoted(name)
                    )));
                }
                if name == "." || name == ".." {
                    return Err(address(format!("ring name {name:?} is not a file name")));
                }
                Endpoint::Shm { name: name.into(), stream: None }
            }
            "rdma-rc" | "ud-mcast" => {
                let path = body.strip_prefix("//").ok_or_else(|| {
                    address(format!(
                        "{scheme} needs //: {scheme}://{}",
                        if scheme == "rdma-rc" { "IP:PORT/STREAM" } else { "GROUP/STREAM" }
                    ))
                })?;
                let (host, stream) = path
                    .split_once('/')
                    .ok_or_else(|| address("no stream id: end the address with /STREAM (e.g. /7)".into()))?;
                let stream = parse_num::<u32>(stream).ok_or_else(|| {
                    address(format!("stream id {:?}: give a number from 0 to {}", quoted(stream), u32::MAX))
                })?;
                if scheme == "rdma-rc" {
                    let addr: SocketAddr = host.parse().map_err(|_| {
                        address(format!(
                            "{:?} is not IP:PORT (an IPv4 address and port, e.g. 10.0.0.1:7400, or [IPv6]:PORT; no host names)",
                            quoted(host)
                        ))
                    })?;
                    if addr.port() == 0 {
                        return Err(address("port 0: give the port the publisher listens on".into()));
                    }
                    let ip = addr.ip();
                    if ip.is_unspecified() || ip.is_multicast() || ip == std::net::IpAddr::V4(Ipv4Addr::BROADCAST) {
                        return Err(address(format!(
                            "{ip} is not one host's address: give the address the publisher listens on, which its readers connect to"
                        )));
                    }
                    Endpoint::RdmaRc { addr, stream }
                } else {
                    let group: Ipv4Addr = host.parse().map_err(|_| {
                        address(format!("{:?} is not an IPv4 multicast group (e.g. 239.1.2.3)", quoted(host)))
                    })?;
                    if !group.is_multicast() {
                        return Err(address(format!(
                            "{group} is not a multicast group (224.0.0.0/4); pick one in 239.0.0.0/8 for a private fabric"
                        )));
                    }
                    Endpoint::UdMcast { group, stream, recovery: None, history: None }
                }
            }
            _ => return Err(ChannelError::Scheme { uri: q(), scheme: quoted(scheme) }),
        };
        let mut c = Channel::at(endpoint);
        if let Some(query) = query {
            c.params(uri, query)?;
        }
        Ok(c)
    }

    fn params(&mut self, uri: &str, query: &str) -> Result<(), ChannelError> {
        let mut seen: Vec<&str> = Vec::new();
        for item in query.split('&') {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (item, None),
            };
            let err = |why: String| ChannelError::Param { uri: quoted(uri), param: quoted(key), why };
            if key.is_empty() {
                return Err(err("an empty parameter (two '&' in a row, or a trailing '&' or '?')".into()));
            }
            let canonical = if key == "lossy" { "reliable" } else { key };
            if seen.contains(&canonical) {
                return Err(err("given twice (or both reliable and lossy): give each parameter once".into()));
            }
            seen.push(canonical);
            let shm = matches!(self.endpoint, Endpoint::Shm { .. });
            let rc = matches!(self.endpoint, Endpoint::RdmaRc { .. });
            let mcast = matches!(self.endpoint, Endpoint::UdMcast { .. });
            let only = |ok: bool, which: &str| if ok { Ok(()) } else { Err(err(format!("applies to {which} only"))) };
            let flag = || match value {
                None => Ok(()),
                Some(_) => Err(err("takes no value".into())),
            };
            let val = || value.filter(|v| !v.is_empty()).ok_or_else(|| err("needs a value: KEY=VALUE".into()));
            let num = |lo: u64, hi: u64, pow2: bool| -> Result<u64, ChannelError> {
                let v = val()?;
                match parse_num::<u64>(v) {
                    Some(n) if (lo..=hi).contains(&n) && (!pow2 || n.is_power_of_two()) => Ok(n),
                    _ => Err(err(format!(
                        "{:?}: give {}{lo} to {hi}",
                        quoted(v),
                        if pow2 { "a power of two from " } else { "" }
                    ))),
                }
            };
            match key {
                "reliable" | "lossy" => {
                    only(!mcast, "shm and rdma-rc (ud-mcast is always lossy; recovery fills what it can)")?;
                    flag()?;
                    self.reliability = Some(if key == "reliable" { Reliability::Reliable } else { Reliability::Lossy });
                }
                "stream" => {
                    only(shm, "shm (rdma-rc and ud-mcast carry the stream id in the path)")?;
                    let n = num(0, u64::from(u32::MAX), false)? as u32;
                    if let Endpoint::Shm { stream, .. } = &mut self.endpoint {
                        *stream = Some(n);
                    }
                }
                "slots" => {
                    only(shm || rc, "shm and rdma-rc")?;
                    self.slots = Some(num(2, 1 << 30, true)? as usize);
                }
                "payload" => {
                    only(shm || rc, "shm and rdma-rc")?;
                    self.payload = Some(num(8, 1 << 20, false)? as usize);
                }
                "consumers" => {
                    only(shm || rc, "shm and rdma-rc")?;
                    self.consumers = Some(num(1, 16, false)? as usize);
                }
                "device" => {
                    only(rc || mcast, "rdma-rc and ud-mcast")?;
                    let v = val()?;
                    if !is_name(v, 64) {
                        return Err(err(format!("{:?}: an RDMA device name (e.g. mlx5_0, rxe0)", quoted(v))));
                    }
                    self.device = Some(v.into());
                }
                "token-env" => {
                    only(rc || mcast, "rdma-rc and ud-mcast")?;
                    let v = val()?;
                    let ok = is_name(v, 128) && !v.contains(['.', '-']) && !v.starts_with(|c: char| c.is_ascii_digit());
                    if !ok {
                        return Err(err(format!(
                            "{:?}: the name of an environment variable holding the secret (A-Z a-z 0-9 _), never the secret itself",
                            quoted(v)
                        )));
                    }
                    self.token_env = Some(v.into());
                }
                "recovery" => {
                    only(mcast, "ud-mcast")?;
                    let v = val()?;
                    let a: SocketAddr = v.parse().map_err(|_| err(format!("{:?} is not IP:PORT", quoted(v))))?;
                    if a.port() == 0 {
                        return Err(err("port 0: give the port recovery is served on".into()));
                    }
                    if let Endpoint::UdMcast { recovery, .. } = &mut self.endpoint {
                        *recovery = Some(a);
                    }
                }
                "history" => {
                    only(mcast, "ud-mcast")?;
                    let n = num(2, 1 << 20, true)? as u32;
                    if let Endpoint::UdMcast { history, .. } = &mut self.endpoint {
                        *history = Some(n);
                    }
                }
                _ => {
                    return Err(err(
                        "unknown: use reliable, lossy, stream, slots, payload, consumers, device, token-env, recovery, history"
                            .into(),
                    ))
                }
            }
        }
        Ok(())
    }

    /// The transport's name as the URI's scheme says it.
    pub fn transport(&self) -> &'static str {
        match self.endpoint {
            Endpoint::Shm { .. } => "shm",
            Endpoint::RdmaRc { .. } => "rdma-rc",
            Endpoint::UdMcast { .. } => "ud-mcast",
        }
    }
}

/// Decimal digits only (no sign, no spaces, no leading '+'), within the type.
fn parse_num<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl std::str::FromStr for Channel {
    type Err = ChannelError;
    fn from_str(s: &str) -> Result<Channel, ChannelError> {
        Channel::parse(s)
    }
}

/// The canonical form: parameters in a fixed order; `parse(c.to_string()) == c`.
impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut params: Vec<String> = Vec::new();
        match &self.endpoint {
            Endpoint::Shm { name, stream } => {
                write!(f, "shm:{name}")?;
                if let Some(s) = stream {
                    params.push(format!("stream={s}"));
                }
            }
            Endpoint::RdmaRc { addr, stream } => write!(f, "rdma-rc://{addr}/{stream}")?,
            Endpoint::UdMcast { group, stream, .. } => write!(f, "ud-mcast://{group}/{stream}")?,
        }
        match self.reliability {
            Some(Reliability::Reliable) => params.push("reliable".into()),
            Some(Reliability::Lossy) => params.push("lossy".into()),
            None => {}
        }
        let mut opt = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                params.push(format!("{k}={v}"));
            }
        };
        opt("slots", self.slots.map(|v| v.to_string()));
        opt("payload", self.payload.map(|v| v.to_string()));
        opt("consumers", self.consumers.map(|v| v.to_string()));
        opt("device", self.device.clone());
        opt("token-env", self.token_env.clone());
        if let Endpoint::UdMcast { recovery, history, .. } = &self.endpoint {
            opt("recovery", recovery.map(|a| a.to_string()));
            opt("history", history.map(|v| v.to_string()));
        }
        if !params.is_empty() {
            write!(f, "?{}", params.join("&"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(uri: &str) -> String {
        Channel::parse(uri).unwrap_err().to_string()
    }

    #[test]
    fn the_examples_parse_and_print_back_in_canonical_form() {
        for (uri, canonical) in [
            ("shm:md", "shm:md"),
            ("shm://md", "shm:md"),
            ("shm:orders?reliable&slots=4096", "shm:orders?reliable&slots=4096"),
            ("shm:orders?slots=4096&reliable&stream=2", "shm:orders?stream=2&reliable&slots=4096"),
            ("rdma-rc://10.0.0.1:7400/7", "rdma-rc://10.0.0.1:7400/7"),
            ("rdma-rc://[::1]:7400/7?lossy&device=rxe0", "rdma-rc://[::1]:7400/7?lossy&device=rxe0"),
            ("ud-mcast://239.1.2.3/7?recovery=10.0.0.1:7500", "ud-mcast://239.1.2.3/7?recovery=10.0.0.1:7500"),
            (
                "ud-mcast://239.1.2.3/1?token-env=TICKBUS_TOKEN&history=65536",
                "ud-mcast://239.1.2.3/1?token-env=TICKBUS_TOKEN&history=65536",
            ),
        ] {
            let c = Channel::parse(uri).unwrap_or_else(|e| panic!("{uri}: {e}"));
            assert_eq!(c.to_string(), canonical, "{uri}");
            assert_eq!(Channel::parse(canonical).unwrap(), c, "{uri}: round trip");
        }
        let c = Channel::parse("ud-mcast://239.1.2.3/7?recovery=10.0.0.1:7500").unwrap();
        assert_eq!(c.transport(), "ud-mcast");
        assert!(matches!(c.endpoint, Endpoint::UdMcast { stream: 7, recovery: Some(_), .. }));
        assert_eq!(Channel::parse("shm:orders?reliable").unwrap().reliability, Some(Reliability::Reliable));
    }

    #[test]
    fn every_error_names_what_is_wrong_and_what_to_give() {
        for (uri, says) in [
            ("", "empty"),
            ("md", "no transport"),
            ("tcp://1.2.3.4:5/1", "unknown transport \"tcp\""),
            ("shm:", "ring name"),
            ("shm:a/b", "ring name"),
            ("shm:..", "not a file name"),
            ("shm:md?", "an empty parameter"),
            ("shm:md?reliable&&slots=8", "an empty parameter"),
            ("shm:md?slots=1000", "a power of two from 2"),
            ("shm:md?slots=-4", "a power of two"),
            ("shm:md?slots", "needs a value"),
            ("shm:md?reliable=yes", "takes no value"),
            ("shm:md?reliable&lossy", "given twice"),
            ("shm:md?fast", "unknown"),
            ("shm:md?recovery=1.2.3.4:5", "ud-mcast only"),
            ("shm:md?device=rxe0", "rdma-rc and ud-mcast"),
            ("rdma-rc:10.0.0.1:7400/7", "needs //"),
            ("rdma-rc://10.0.0.1:7400", "no stream id"),
            ("rdma-rc://10.0.0.1/7", "is not IP:PORT"),
            ("rdma-rc://10.0.0.1:0/7", "port 0"),
            ("rdma-rc://0.0.0.0:7400/7", "not one host's address"),
            ("rdma-rc://239.1.1.1:7400/7", "not one host's address"),
            ("rdma-rc://exchange.local:7400/7", "no host names"),
            ("ud-mcast://239.1.2.3/7?history=2097152", "a power of two from 2 to 1048576"),
            ("rdma-rc://10.0.0.1:7400/x", "stream id"),
            ("rdma-rc://10.0.0.1:7400/4294967296", "stream id"),
            ("rdma-rc://10.0.0.1:7400/7?stream=3", "carry the stream id in the path"),
            ("rdma-rc://10.0.0.1:7400/7?token-env=s3cr3t-value", "never the secret itself"),
            ("ud-mcast://10.0.0.1/7", "not a multicast group"),
            ("ud-mcast://239.1.2.3/7?reliable", "always lossy"),
            ("ud-mcast://239.1.2.3/7?history=3", "a power of two"),
            ("shm:md\u{1b}[2J", "not allowed"),
            ("shm:m d", "not allowed"),
        ] {
            let e = err(uri);
            assert!(e.contains(says), "{uri:?}: {e}");
            assert!(!e.contains('\u{1b}'), "{uri:?}: raw escape in {e:?}");
        }
        assert!(err(&format!("shm:{}", "a".repeat(2000))).contains("at most 1024"));
        assert!(Channel::parse(&format!("shm:{}", "a".repeat(128))).is_ok(), "the names shm takes");
        assert!(err(&format!("shm:{}", "a".repeat(129))).contains("ring name"));
        let bare = Channel::shm("md?lossy").unwrap_err().to_string();
        assert!(bare.contains("ring name") && bare.contains("or a channel URI"), "{bare}");
    }
}
