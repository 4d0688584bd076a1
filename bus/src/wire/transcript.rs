//! Authenticating a control-channel handshake: both sides prove the shared token over both
//! nonces, then every later line carries a MAC over the whole transcript so far.
//!
//! Why a transcript and not per-line MACs of the nonces only: the lines after the hello carry
//! what matters (the stream's layout, QP endpoints, memory keys, positions). A relay in the
//! middle that cannot forge the proofs could otherwise pass the hello through and swap an
//! endpoint, getting REMOTE_WRITE on a subscriber's ring. Each MAC covers the hash of every
//! line before it (both directions, each tagged with its sender) and the line itself, keyed by
//! a session key derived from the token and both nonces: a line cannot be changed, dropped,
//! replayed from another session, reordered or moved to the other direction without the next
//! check failing. The token itself never crosses the wire.
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use super::control::{hex, unhex, ControlError};

/// Who sent a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The subscriber's side of the handshake.
    Subscriber,
    /// The publisher's side of the handshake.
    Publisher,
}

impl Role {
    fn tag(self) -> &'static str {
        match self {
            Role::Subscriber => "sub",
            Role::Publisher => "pub",
        }
    }
}

fn hmac(key: &[u8]) -> Hmac<Sha256> {
    <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length")
}

/// A side's proof that it knows `token`: HMAC-SHA256(token, role | nonce_s | nonce_p).
pub fn proof(token: &[u8], role: Role, nonce_s: &[u8; 16], nonce_p: &[u8; 16]) -> [u8; 32] {
    let mut m = hmac(token);
    m.update(role.tag().as_bytes());
    m.update(nonce_s);
    m.update(nonce_p);
    m.finalize().into_bytes().into()
}

/// Checks a proof in constant time.
pub fn check_proof(token: &[u8], role: Role, nonce_s: &[u8; 16], nonce_p: &[u8; 16], got: &[u8; 32]) -> bool {
    let mut m = hmac(token);
    m.update(role.tag().as_bytes());
    m.update(nonce_s);
    m.update(nonce_p);
    m.verify_slice(got).is_ok()
}

/// Suffix of a signed line: ` mac=` and 64 hex digits.
const MAC_SUFFIX: &str = " mac=";

/// The running transcript of one handshake, from one side's point of view.
#[derive(Clone, Default)]
pub struct Transcript {
    hash: Sha256,
    key: Option<[u8; 32]>,
}

impl Transcript {
    /// An empty transcript (no lines, no key).
    pub fn new() -> Transcript {
        Transcript::default()
    }

    /// Records `line` (without any MAC) as sent by `from`.
    pub fn record(&mut self, from: Role, line: &str) {
        self.hash.update(from.tag().as_bytes());
        self.hash.update((line.len() as u64).to_le_bytes());
        self.hash.update(line.as_bytes());
    }

    /// From now on every line is signed, with a key only holders of `token` can derive.
    pub fn start_signing(&mut self, token: &[u8], nonce_s: &[u8; 16], nonce_p: &[u8; 16]) {
        let mut m = hmac(token);
        m.update(b"tickbus-rdma session key");
        m.update(nonce_s);
        m.update(nonce_p);
        self.key = Some(m.finalize().into_bytes().into());
    }

    /// Whether lines are signed yet.
    pub fn signing(&self) -> bool {
        self.key.is_some()
    }

    fn mac(&self, key: &[u8; 32], from: Role, line: &str) -> Hmac<Sha256> {
        let mut m = hmac(key);
        m.update(&self.hash.clone().finalize());
        m.update(from.tag().as_bytes());
        m.update(line.as_bytes());
        m
    }

    /// What to send for `line` from `from`: signed once signing started. Records it.
    pub fn seal(&mut self, from: Role, line: &str) -> String {
        let out = match &self.key {
            Some(key) => format!("{line}{MAC_SUFFIX}{}", hex(&self.mac(key, from, line).finalize().into_bytes())),
            None => line.to_owned(),
        };
        self.record(from, line);
        out
    }

    /// Checks and strips the MAC of a line `from` sent, and records it. Before signing starts
    /// lines pass as they are.
    pub fn open<'a>(&mut self, from: Role, line: &'a str) -> Result<&'a str, ControlError> {
        let body = match &self.key {
            None => line,
            Some(key) => {
                let (body, tag) = line
                    .rsplit_once(MAC_SUFFIX)
                    .ok_or(ControlError::Mac("a line after the hello carries no transcript MAC: the peer is not tickbus or the connection was tampered with"))?;
                let tag = unhex::<32>(tag).ok_or(ControlError::Mac("the transcript MAC is not 64 hex digits"))?;
                if self.mac(key, from, body).verify_slice(&tag).is_err() {
                    return Err(ControlError::Mac("a line failed its transcript MAC: it was changed, replayed or reordered on the way (a relay in the middle?); refusing the connection"));
                }
                body
            }
        };
        self.record(from, body);
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Transcript, Transcript) {
        let (mut s, mut p) = (Transcript::new(), Transcript::new());
        for t in [&mut s, &mut p] {
            t.record(Role::Subscriber, "HELLO a");
            t.record(Role::Publisher, "HELLO b");
            t.start_signing(b"token", &[1; 16], &[2; 16]);
        }
        (s, p)
    }

    #[test]
    fn proofs_bind_token_role_and_both_nonces() {
        let (s, p) = ([1u8; 16], [2u8; 16]);
        let m = proof(b"secret", Role::Publisher, &s, &p);
        assert!(check_proof(b"secret", Role::Publisher, &s, &p, &m));
        assert!(!check_proof(b"other", Role::Publisher, &s, &p, &m), "wrong token");
        assert!(!check_proof(b"secret", Role::Subscriber, &s, &p, &m), "a publisher proof is not a subscriber proof");
        assert!(!check_proof(b"secret", Role::Publisher, &p, &s, &m), "replay with swapped nonces");
    }

    #[test]
    fn signed_lines_open_in_order_and_any_change_replay_or_reorder_fails() {
        let (mut s, mut p) = pair();
        let a = p.seal(Role::Publisher, "EP 1 2 3");
        let b = p.seal(Role::Publisher, "READY");
        let mut s2 = s.clone();
        assert!(s2.open(Role::Publisher, &b).is_err(), "reordered");
        let mut s3 = s.clone();
        assert!(s3.open(Role::Publisher, &a.replace("EP 1", "EP 6")).is_err(), "changed");
        let mut s4 = s.clone();
        assert!(s4.open(Role::Subscriber, &a).is_err(), "reflected to the other direction");
        assert!(s.clone().open(Role::Publisher, "EP 1 2 3").is_err(), "unsigned");
        assert_eq!(s.open(Role::Publisher, &a), Ok("EP 1 2 3"));
        assert!(s.clone().open(Role::Publisher, &a).is_err(), "replayed");
        assert_eq!(s.open(Role::Publisher, &b), Ok("READY"));
        let (mut other, _) = pair();
        other.start_signing(b"token", &[3; 16], &[2; 16]);
        assert!(other.open(Role::Publisher, &a).is_err(), "from another session");
    }
}
