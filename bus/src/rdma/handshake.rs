//! The control channel that sets up an RDMA stream: a versioned, mutually authenticated hello
//! over TCP, then the exchange of queue-pair endpoints and memory keys.
//!
//! Why TCP and not rdma_cm: the exchange needs a versioned hello and a shared-secret proof before
//! any rkey leaves the process, which is plain request/response; TCP works on every RoCE host and
//! in the guest without another library, and the data path never touches it. Setup may make
//! syscalls; nothing here runs after `READY`.
//!
//! ```text
//!  subscriber                                    publisher
//!  HELLO tickbus-rdma 1 <stream> <nonce_s>  -->
//!                                           <--  HELLO tickbus-rdma 1 <nonce_p> <mac_p>
//!  AUTH <mac_s>                             -->  (mac = HMAC-SHA256(token, role|nonce_s|nonce_p))
//!                                           <--  CONFIG <mode> <slot_size> <slot_count> <stream>
//!                                                 <max_consumers> <ticks_per_ns> <consumer> <imm>
//!                                           <--  EP <publisher endpoint: credit addr/rkey>
//!  EP <subscriber endpoint: ring addr/rkey> -->
//!                                           <--  READY      (publisher QP in RTS)
//!  READY                                    -->  (subscriber QP in RTS; publishing to it starts)
//! ```
//! Either side sends `ERR <reason>` and closes on any mismatch. The token never crosses the wire.
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::error::RdmaError;
use crate::ring::{Mode, RingConfig};

/// Protocol version; bumped on any change to the messages above.
pub const PROTOCOL_VERSION: u32 = 1;
const MAGIC: &str = "tickbus-rdma";

/// How a publisher places messages: plain WRITE (subscriber polls memory; relies on in-order
/// placement) or WRITE_WITH_IMM (subscriber polls its CQ; the spec guarantees the data landed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    Write,
    WriteWithImm,
}

/// What the publisher tells a subscriber after authentication.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamConfig {
    pub ring: RingConfig,
    /// The consumer line this subscriber owns in the publisher's mirror (reliable mode).
    pub consumer: usize,
    pub write_mode: WriteMode,
}

pub(crate) fn nonce() -> Result<[u8; 16], RdmaError> {
    crate::sys::random::bytes().map_err(|e| RdmaError::io("reading /dev/urandom", e))
}

/// Waits up to `timeout` for one connection on `listener` (set-up path: polls without blocking,
/// so a publisher that nobody connects to gets its error instead of hanging).
pub(crate) fn accept_within(listener: &TcpListener, timeout: Duration) -> Result<TcpStream, RdmaError> {
    let deadline = Instant::now() + timeout;
    listener.set_nonblocking(true).map_err(|e| RdmaError::io("accept", e))?;
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(RdmaError::Handshake {
                        peer: "-".into(),
                        reason: format!("no subscriber within {timeout:?}"),
                    });
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(RdmaError::io("accept", e)),
        }
    };
    stream.set_nonblocking(false).map_err(|e| RdmaError::io("accept", e))?;
    Ok(stream)
}

/// Publisher side of the hello: checks the subscriber's version and stream, proves the token
/// and checks the subscriber's proof. On any mismatch the peer is told why, and so are we.
pub(crate) fn authenticate_subscriber(ctl: &mut Control, token: &[u8], stream_id: u32) -> Result<(), RdmaError> {
    let (version, stream, nonce_s) = parse_hello_sub(&ctl.recv()?).map_err(|r| ctl.refuse(r))?;
    if version != PROTOCOL_VERSION {
        return Err(
            ctl.refuse(format!("protocol version {version} unsupported; this publisher speaks {PROTOCOL_VERSION}"))
        );
    }
    if stream != stream_id {
        return Err(ctl.refuse(format!("this publisher serves stream {stream_id}, not {stream}")));
    }
    let nonce_p = nonce()?;
    ctl.send(&hello_pub(&nonce_p, &mac(token, "pub", &nonce_s, &nonce_p)))?;
    let auth = ctl.recv()?;
    if !verify(token, "sub", &nonce_s, &nonce_p, auth.strip_prefix("AUTH ").unwrap_or("")) {
        return Err(ctl.refuse("authentication failed: wrong token".into()));
    }
    Ok(())
}

/// Subscriber side of the hello: asks for `stream_id`, checks the publisher's version and
/// proof, then proves the token itself.
pub(crate) fn authenticate_to_publisher(ctl: &mut Control, token: &[u8], stream_id: u32) -> Result<(), RdmaError> {
    let nonce_s = nonce()?;
    ctl.send(&hello_sub(stream_id, &nonce_s))?;
    let (version, nonce_p, mac_p) = parse_hello_pub(&ctl.recv()?).map_err(|r| ctl.refuse(r))?;
    if version != PROTOCOL_VERSION {
        return Err(ctl.refuse(format!("publisher speaks protocol {version}, this subscriber {PROTOCOL_VERSION}")));
    }
    if !verify(token, "pub", &nonce_s, &nonce_p, &mac_p) {
        return Err(ctl.refuse("the publisher failed authentication: wrong token".into()));
    }
    ctl.send(&format!("AUTH {}", hex(&mac(token, "sub", &nonce_s, &nonce_p))))
}

/// HMAC-SHA256 over the role and both nonces, keyed by the shared token.
pub(crate) fn mac(token: &[u8], role: &str, nonce_s: &[u8; 16], nonce_p: &[u8; 16]) -> [u8; 32] {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(token).expect("HMAC takes any key length");
    m.update(role.as_bytes());
    m.update(nonce_s);
    m.update(nonce_p);
    m.finalize().into_bytes().into()
}

/// Constant-time check of a MAC received as hex.
pub(crate) fn verify(token: &[u8], role: &str, nonce_s: &[u8; 16], nonce_p: &[u8; 16], got_hex: &str) -> bool {
    let Some(got) = unhex::<32>(got_hex) else { return false };
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(token).expect("HMAC takes any key length");
    m.update(role.as_bytes());
    m.update(nonce_s);
    m.update(nonce_p);
    m.verify_slice(&got).is_ok()
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub(crate) fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

pub(crate) fn hello_sub(stream: u32, nonce_s: &[u8; 16]) -> String {
    format!("HELLO {MAGIC} {PROTOCOL_VERSION} {stream} {}", hex(nonce_s))
}

/// Parses the subscriber's hello: (version, stream, nonce).
pub(crate) fn parse_hello_sub(line: &str) -> Result<(u32, u32, [u8; 16]), String> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 5 || f[0] != "HELLO" || f[1] != MAGIC {
        return Err(format!("not a tickbus-rdma hello: {line:?}"));
    }
    let version = f[2].parse().map_err(|_| format!("bad version in {line:?}"))?;
    let stream = f[3].parse().map_err(|_| format!("bad stream id in {line:?}"))?;
    let nonce = unhex::<16>(f[4]).ok_or_else(|| format!("bad nonce in {line:?}"))?;
    Ok((version, stream, nonce))
}

pub(crate) fn hello_pub(nonce_p: &[u8; 16], mac_p: &[u8; 32]) -> String {
    format!("HELLO {MAGIC} {PROTOCOL_VERSION} {} {}", hex(nonce_p), hex(mac_p))
}

/// Parses the publisher's hello: (version, nonce, mac hex).
pub(crate) fn parse_hello_pub(line: &str) -> Result<(u32, [u8; 16], String), String> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 5 || f[0] != "HELLO" || f[1] != MAGIC {
        return Err(format!("not a tickbus-rdma hello: {line:?}"));
    }
    let version = f[2].parse().map_err(|_| format!("bad version in {line:?}"))?;
    let nonce = unhex::<16>(f[3]).ok_or_else(|| format!("bad nonce in {line:?}"))?;
    Ok((version, nonce, f[4].to_owned()))
}

pub(crate) fn config_line(c: &StreamConfig) -> String {
    let r = &c.ring;
    format!(
        "CONFIG {} {} {} {} {} {} {} {}",
        r.mode as u32,
        r.slot_size,
        r.slot_count,
        r.stream_id,
        r.max_consumers,
        r.ticks_per_ns,
        c.consumer,
        u8::from(c.write_mode == WriteMode::WriteWithImm)
    )
}

pub(crate) fn parse_config(line: &str) -> Result<StreamConfig, String> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 9 || f[0] != "CONFIG" {
        return Err(format!("expected CONFIG, got {line:?}"));
    }
    let n = |i: usize| f[i].parse::<usize>().map_err(|_| format!("field {i} of {line:?}"));
    let mode = match n(1)? {
        1 => Mode::Lossy,
        2 => Mode::Reliable,
        m => return Err(format!("unknown mode {m}")),
    };
    let ring = RingConfig {
        mode,
        slot_size: n(2)?,
        slot_count: n(3)?,
        stream_id: n(4)? as u32,
        max_consumers: n(5)?,
        ticks_per_ns: f[6].parse().map_err(|_| format!("ticks_per_ns in {line:?}"))?,
    };
    ring.validate().map_err(|e| e.to_string())?;
    let write_mode = if n(8)? == 1 { WriteMode::WriteWithImm } else { WriteMode::Write };
    Ok(StreamConfig { ring, consumer: n(7)?, write_mode })
}

/// A line-based control connection with a deadline on every read.
pub(crate) struct Control {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    peer: String,
}

impl Control {
    pub fn new(stream: TcpStream, timeout: Duration) -> Result<Control, RdmaError> {
        let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
        stream.set_read_timeout(Some(timeout)).map_err(|e| RdmaError::io("setting the control timeout", e))?;
        stream.set_nodelay(true).map_err(|e| RdmaError::io("setting TCP_NODELAY", e))?;
        let writer = stream.try_clone().map_err(|e| RdmaError::io("cloning the control socket", e))?;
        Ok(Control { reader: BufReader::new(stream), writer, peer })
    }

    pub fn peer(&self) -> &str {
        &self.peer
    }

    pub fn send(&mut self, line: &str) -> Result<(), RdmaError> {
        writeln!(self.writer, "{line}").map_err(|e| RdmaError::io("writing to the control channel", e))
    }

    /// Next line; an `ERR` line from the peer becomes `RdmaError::Refused`.
    pub fn recv(&mut self) -> Result<String, RdmaError> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => {
                Err(RdmaError::Handshake { peer: self.peer.clone(), reason: "peer closed the control channel".into() })
            }
            Ok(_) => {
                let line = line.trim_end().to_owned();
                match line.strip_prefix("ERR ") {
                    Some(reason) => Err(RdmaError::Refused { peer: self.peer.clone(), reason: reason.to_owned() }),
                    None => Ok(line),
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                Err(RdmaError::Handshake { peer: self.peer.clone(), reason: "timed out waiting for the peer".into() })
            }
            Err(e) => Err(RdmaError::io("reading the control channel", e)),
        }
    }

    /// Tells the peer why we stop, then returns that as our error.
    pub fn refuse(&mut self, reason: String) -> RdmaError {
        let _ = self.send(&format!("ERR {reason}"));
        RdmaError::Handshake { peer: self.peer.clone(), reason }
    }

    /// Whether the peer has closed the connection (non-blocking; a syscall: idle paths only).
    pub fn peer_closed(&self) -> bool {
        let mut b = [0u8; 1];
        let s = self.reader.get_ref();
        if s.set_nonblocking(true).is_err() {
            return false;
        }
        let closed = matches!(s.peek(&mut b), Ok(0));
        let _ = s.set_nonblocking(false);
        closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_bind_token_role_and_both_nonces() {
        let (s, p) = ([1u8; 16], [2u8; 16]);
        let m = mac(b"secret", "pub", &s, &p);
        assert!(verify(b"secret", "pub", &s, &p, &hex(&m)));
        assert!(!verify(b"other", "pub", &s, &p, &hex(&m)), "wrong token");
        assert!(!verify(b"secret", "sub", &s, &p, &hex(&m)), "a publisher proof is not a subscriber proof");
        assert!(!verify(b"secret", "pub", &p, &s, &hex(&m)), "replay with swapped nonces");
        assert!(!verify(b"secret", "pub", &s, &p, "zz"));
    }

    #[test]
    fn hellos_and_config_round_trip_and_reject_junk() {
        let n = [0xAB; 16];
        assert_eq!(parse_hello_sub(&hello_sub(7, &n)).unwrap(), (PROTOCOL_VERSION, 7, n));
        let m = [0xCD; 32];
        let (v, np, mh) = parse_hello_pub(&hello_pub(&n, &m)).unwrap();
        assert_eq!((v, np, mh), (PROTOCOL_VERSION, n, hex(&m)));
        assert!(parse_hello_sub("GET / HTTP/1.1").unwrap_err().contains("not a tickbus-rdma hello"));
        let c = StreamConfig {
            ring: RingConfig { ticks_per_ns: 2.596, ..RingConfig::for_payload(Mode::Reliable, 9, 64, 256) },
            consumer: 1,
            write_mode: WriteMode::WriteWithImm,
        };
        assert_eq!(parse_config(&config_line(&c)).unwrap(), c);
        assert!(parse_config("CONFIG 1 100 3 1 1 1.0 0 0").is_err(), "invalid geometry is refused");
    }
}
