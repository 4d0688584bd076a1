//! One control connection: the versioned, mutually authenticated hello, then lines bound
//! together by a transcript MAC, each read and written within the handshake's one deadline.
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::error::ControlError;
use crate::wire::control::{self as wire, MAX_LINE, PROTOCOL_VERSION};
use crate::wire::transcript::{check_proof, proof, Role, Transcript};

pub(crate) fn nonce() -> Result<[u8; 16], ControlError> {
    crate::sys::random::bytes().map_err(|e| ControlError::io("reading /dev/urandom", e))
}

/// Publisher side of the hello: checks the subscriber's version and stream, proves the token
/// and checks the subscriber's proof. On any mismatch the peer is told why, and so are we.
/// From then on every line is signed.
pub(crate) fn authenticate_subscriber(ctl: &mut Control, token: &[u8], stream_id: u32) -> Result<(), ControlError> {
    let hello = ctl.recv()?;
    let (version, stream, nonce_s) = wire::parse_hello_sub(&hello).map_err(|r| ctl.refuse(r))?;
    if version != PROTOCOL_VERSION {
        return Err(
            ctl.refuse(format!("protocol version {version} unsupported; this publisher speaks {PROTOCOL_VERSION}: run the same tickbus version on both sides"))
        );
    }
    if stream != stream_id {
        return Err(ctl.refuse(format!("this publisher serves stream {stream_id}, not {stream}")));
    }
    let nonce_p = nonce()?;
    ctl.send(&wire::hello_pub(&nonce_p, &proof(token, Role::Publisher, &nonce_s, &nonce_p)))?;
    let auth = ctl.recv()?;
    match wire::parse_auth(&auth) {
        Some(p) if check_proof(token, Role::Subscriber, &nonce_s, &nonce_p, &p) => {}
        _ => return Err(ctl.refuse("authentication failed: wrong token")),
    }
    ctl.transcript.start_signing(token, &nonce_s, &nonce_p);
    Ok(())
}

/// Subscriber side of the hello: asks for `stream_id`, checks the publisher's version and
/// proof, then proves the token itself. From then on every line is signed.
pub(crate) fn authenticate_to_publisher(ctl: &mut Control, token: &[u8], stream_id: u32) -> Result<(), ControlError> {
    let nonce_s = nonce()?;
    ctl.send(&wire::hello_sub(stream_id, &nonce_s))?;
    let hello = ctl.recv()?;
    let (version, nonce_p, proof_p) = wire::parse_hello_pub(&hello).map_err(|r| ctl.refuse(r))?;
    if version != PROTOCOL_VERSION {
        return Err(ctl.refuse(format!(
            "publisher speaks protocol {version}, this subscriber {PROTOCOL_VERSION}: run the same tickbus version on both sides"
        )));
    }
    if !check_proof(token, Role::Publisher, &nonce_s, &nonce_p, &proof_p) {
        return Err(ctl.refuse("the publisher failed authentication: wrong token"));
    }
    ctl.send(&wire::auth(&proof(token, Role::Subscriber, &nonce_s, &nonce_p)))?;
    ctl.transcript.start_signing(token, &nonce_s, &nonce_p);
    Ok(())
}

/// A line-based control connection: bounded lines, one deadline for the whole handshake, and
/// (once authenticated) a transcript MAC on every line.
pub(crate) struct Control {
    stream: TcpStream,
    /// Bytes read past the last line.
    pending: Vec<u8>,
    peer: String,
    role: Role,
    deadline: Option<Instant>,
    timeout: Duration,
    transcript: Transcript,
}

impl Control {
    /// A control connection for `role`, whose handshake must be over within `timeout`.
    pub fn new(stream: TcpStream, timeout: Duration, role: Role) -> Result<Control, ControlError> {
        let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
        stream.set_nodelay(true).map_err(|e| ControlError::io("setting TCP_NODELAY", e))?;
        Ok(Control {
            stream,
            pending: Vec::with_capacity(MAX_LINE),
            peer,
            role,
            deadline: Some(Instant::now() + timeout),
            timeout,
            transcript: Transcript::new(),
        })
    }

    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// The handshake is over: the connection stays open (its closing tells the peer we left)
    /// and no deadline applies any more.
    pub fn finish(&mut self) {
        self.deadline = None;
    }

    /// A fresh deadline of `timeout` from now, for one more exchange after the handshake.
    pub fn set_deadline(&mut self, timeout: Duration) {
        self.deadline = Some(Instant::now() + timeout);
    }

    /// Time left before the deadline, as a socket timeout; an error once it passed.
    fn remaining(&self) -> Result<Option<Duration>, ControlError> {
        let Some(deadline) = self.deadline else { return Ok(None) };
        match deadline.checked_duration_since(Instant::now()) {
            Some(left) if !left.is_zero() => Ok(Some(left.max(Duration::from_millis(1)))),
            _ => Err(self.overdue()),
        }
    }

    fn overdue(&self) -> ControlError {
        ControlError::Handshake {
            peer: self.peer.clone(),
            reason: format!("the handshake's deadline of {:?} passed (timed out waiting for the peer)", self.timeout),
        }
    }

    pub fn send(&mut self, line: &str) -> Result<(), ControlError> {
        let sealed = self.transcript.seal(self.role, line);
        self.write_line(&sealed)
    }

    fn write_line(&mut self, line: &str) -> Result<(), ControlError> {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        let mut sent = 0;
        while sent < bytes.len() {
            let left = self.remaining()?;
            self.stream.set_write_timeout(left).map_err(|e| ControlError::io("setting the control timeout", e))?;
            match self.stream.write(&bytes[sent..]) {
                Ok(0) => {
                    return Err(ControlError::io(
                        "writing to the control channel",
                        std::io::ErrorKind::WriteZero.into(),
                    ))
                }
                Ok(n) => sent += n,
                Err(e) if is_timeout(&e) => return Err(self.overdue()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ControlError::io("writing to the control channel", e)),
            }
        }
        Ok(())
    }

    /// The next line (at most [`MAX_LINE`] bytes), checked against the transcript; an `ERR`
    /// line from the peer becomes `ControlError::Refused`.
    pub fn recv(&mut self) -> Result<String, ControlError> {
        let raw = self.read_line()?;
        if let Some(reason) = raw.strip_prefix("ERR ") {
            return Err(ControlError::Refused { peer: self.peer.clone(), reason: wire::quote(reason) });
        }
        let peer_role = match self.role {
            Role::Publisher => Role::Subscriber,
            Role::Subscriber => Role::Publisher,
        };
        match self.transcript.open(peer_role, &raw) {
            Ok(line) => Ok(line.to_owned()),
            Err(reason) => Err(self.refuse(reason)),
        }
    }

    fn read_line(&mut self) -> Result<String, ControlError> {
        let mut chunk = [0u8; 1024];
        loop {
            if let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                let text = String::from_utf8_lossy(&line[..end]);
                return Ok(text.trim_end_matches('\r').to_owned());
            }
            if self.pending.len() >= MAX_LINE {
                return Err(self.refuse(format!("a line longer than {MAX_LINE} bytes: not a tickbus control line")));
            }
            let left = self.remaining()?;
            self.stream.set_read_timeout(left).map_err(|e| ControlError::io("setting the control timeout", e))?;
            let room = (MAX_LINE - self.pending.len()).min(chunk.len());
            match self.stream.read(&mut chunk[..room]) {
                Ok(0) => {
                    return Err(ControlError::Handshake {
                        peer: self.peer.clone(),
                        reason: "peer closed the control channel".into(),
                    })
                }
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if is_timeout(&e) => return Err(self.overdue()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ControlError::io("reading the control channel", e)),
            }
        }
    }

    /// Tells the peer why we stop (best effort, unsigned), then returns that as our error.
    pub fn refuse(&mut self, reason: impl std::fmt::Display) -> ControlError {
        let reason = reason.to_string();
        let _ = self.stream.set_nonblocking(true);
        let _ = self.stream.write_all(format!("ERR {reason}\n").as_bytes());
        let _ = self.stream.set_nonblocking(false);
        ControlError::Handshake { peer: self.peer.clone(), reason }
    }

    /// Whether the peer has closed the connection (non-blocking; a syscall: idle paths only).
    pub fn peer_closed(&self) -> bool {
        let mut b = [0u8; 1];
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let closed = matches!(self.stream.peek(&mut b), Ok(0));
        let _ = self.stream.set_nonblocking(false);
        closed
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
}
