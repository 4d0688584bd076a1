//! The arbiter's defence as a property, as a harness the unit tests' proptest and the
//! `feed_forgery` fuzz target both drive: whatever datagrams a forger adds ahead of the stream
//! (messages, heartbeats, ends of session, runs of packets continuing each other, other
//! sessions), on either line, the messages delivered are exactly the real stream's, in order,
//! once each, nothing given up, and the session ends where the real one does. The real lines
//! lose packets at random; the retransmission server answers re-requests with the real stream.
//!
//! Built for tests and for `cargo fuzz` (`--cfg fuzzing`) only; not part of the API.
#![allow(missing_docs)]
use tickbus_codecs::moldudp64::{Packet, PacketBuilder};

use super::arbiter::{Arbiter, ArbiterOptions, Line, Out};

/// The real session.
pub const S: [u8; 10] = *b"SESSION001";
const MS: u64 = 1_000_000;

/// The real stream's message at `seq`.
pub fn real(seq: u64) -> [u8; 9] {
    let mut m = [b'R'; 9];
    m[1..].copy_from_slice(&seq.to_be_bytes());
    m
}

/// A MoldUDP64 packet of `msgs` from `first`.
pub fn packet(session: [u8; 10], first: u64, msgs: &[&[u8]]) -> Vec<u8> {
    let mut b = PacketBuilder::new(session, first, 1400);
    for m in msgs {
        b.push(m);
    }
    b.take(|p| p.to_vec())
}

/// A heartbeat (or an end of session) at `next`.
pub fn control(session: [u8; 10], next: u64, end: bool) -> Vec<u8> {
    let mut h = tickbus_codecs::moldudp64::rerequest(&session, next, 0);
    if end {
        h.count = tickbus_codecs::moldudp64::END_OF_SESSION.into();
    }
    zerocopy::IntoBytes::as_bytes(&h).to_vec()
}

/// One forged datagram (or run), placed `ahead` sequences past the real stream's next one.
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub enum Forgery {
    Messages { ahead: u64, count: u8 },
    Heartbeat { ahead: u64 },
    End { ahead: u64 },
    Run { ahead: u64, packets: u8 },
    OtherSession { seq: u64 },
}

impl Forgery {
    /// The datagrams, for a real stream whose next sequence is `next`. An end of session at
    /// `next` itself (ahead 0) is the only forgery at the stream's edge: it must not end it.
    fn datagrams(&self, next: u64) -> Vec<Vec<u8>> {
        let fake = [b'F'; 9];
        match *self {
            Forgery::Messages { ahead, count } => {
                vec![packet(S, next + ahead, &vec![&fake[..]; usize::from(count)])]
            }
            Forgery::Heartbeat { ahead } => vec![control(S, next + ahead, false)],
            Forgery::End { ahead } => vec![control(S, next + ahead, true)],
            Forgery::Run { ahead, packets } => {
                (0..u64::from(packets)).map(|k| packet(S, next + ahead + 2 * k, &[&fake, &fake])).collect()
            }
            Forgery::OtherSession { seq } => vec![packet(*b"FORGED0001", seq, &[&fake])],
        }
    }
}

struct World {
    arb: Arbiter,
    delivered: Vec<(u64, Vec<u8>)>,
    lost: Vec<(u64, u64)>,
    asks: Vec<(u64, u16)>,
    /// The real stream sent so far (sequences 1..sent).
    sent: u64,
}

impl World {
    fn feed(&mut self, line: Line, d: &[u8], now: u64) {
        let Ok(p) = Packet::parse(d) else { return };
        let (delivered, lost, asks) = (&mut self.delivered, &mut self.lost, &mut self.asks);
        self.arb.on_packet(line, &p, now, &mut |o| record(o, delivered, lost, asks));
    }

    fn poll(&mut self, now: u64) {
        let (delivered, lost, asks) = (&mut self.delivered, &mut self.lost, &mut self.asks);
        self.arb.poll(now, &mut |o| record(o, delivered, lost, asks));
    }

    fn forge(&mut self, forgeries: &[(usize, bool, Forgery)], k: usize, now: u64) {
        for (at, on_b, f) in forgeries {
            if *at == k {
                for d in f.datagrams(self.sent) {
                    self.feed(if *on_b { Line::B } else { Line::A }, &d, now);
                }
            }
        }
    }

    /// The retransmission server answers what was asked, with the real stream sent so far.
    fn serve(&mut self, now: u64) {
        for (seq, count) in std::mem::take(&mut self.asks) {
            let to = (seq + u64::from(count)).min(self.sent);
            let mut s = seq;
            while s < to {
                let e = (s + 4).min(to);
                let msgs: Vec<[u8; 9]> = (s..e).map(real).collect();
                let refs: Vec<&[u8]> = msgs.iter().map(|m| &m[..]).collect();
                let p = packet(S, s, &refs);
                self.feed(Line::Retransmit, &p, now);
                s = e;
            }
        }
    }
}

fn record(o: Out<'_>, delivered: &mut Vec<(u64, Vec<u8>)>, lost: &mut Vec<(u64, u64)>, asks: &mut Vec<(u64, u16)>) {
    match o {
        Out::Message { sequence, message } => delivered.push((sequence, message.to_vec())),
        Out::Lost { from, to } => lost.push((from, to)),
        Out::Rerequest { sequence, count } => asks.push((sequence, count)),
        Out::Session { session } => assert_eq!(session, S, "followed a forged session"),
    }
}

/// One run: the real stream as `packets` (messages in it, and two draws each compared with
/// `loss_a` and `loss_b`: below them the line loses the packet), the forgeries (before real
/// packet k, on line B or A, what), the session pinned or not.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub packets: Vec<(u64, u8, u8)>,
    pub loss_a: u8,
    pub loss_b: u8,
    pub forgeries: Vec<(usize, bool, Forgery)>,
    pub session_pinned: bool,
}

/// Runs `s`; `Err` says how the property failed.
pub fn run(s: &Scenario) -> Result<(), String> {
    let Scenario { packets, loss_a, loss_b, forgeries, session_pinned } = s;
    let (loss_a, loss_b, session_pinned) = (*loss_a, *loss_b, *session_pinned);
    let opts = ArbiterOptions { session: session_pinned.then_some(S), ..ArbiterOptions::default() };
    let mut w = World { arb: Arbiter::new(opts), delivered: Vec::new(), lost: Vec::new(), asks: Vec::new(), sent: 1 };
    let mut now = 0;
    for (k, &(count, drop_a, drop_b)) in packets.iter().enumerate() {
        now += MS;
        // Before the first real packet an arbiter not pinned to a session follows the
        // first session it sees, whoever sent it (pin it with `session`): forgeries start
        // once the real stream has been seen.
        if k > 0 {
            w.forge(forgeries, k, now);
        }
        let first = w.sent;
        let msgs: Vec<[u8; 9]> = (first..first + count).map(real).collect();
        let refs: Vec<&[u8]> = msgs.iter().map(|m| &m[..]).collect();
        let p = packet(S, first, &refs);
        w.sent += count;
        if drop_a >= loss_a || k == 0 {
            w.feed(Line::A, &p, now);
        }
        if drop_b >= loss_b {
            w.feed(Line::B, &p, now + MS / 4);
        }
        if k == 0 {
            w.forge(forgeries, k, now);
        }
        w.poll(now + MS / 2);
        w.serve(now + MS / 2 + 1);
    }
    // The real server ends the session on both lines and keeps repeating it, for 8 s: a
    // forged end can restart the wait once (confirm_ns), never stop it.
    let end = control(S, w.sent, true);
    for _ in 0..80 {
        now += 100 * MS;
        w.feed(Line::A, &end, now);
        w.feed(Line::B, &end, now);
        w.poll(now);
        w.serve(now + 1);
    }
    let want: Vec<(u64, Vec<u8>)> = (1..w.sent).map(|s| (s, real(s).to_vec())).collect();
    if !w.lost.is_empty() {
        return Err(format!("gave up real messages: {:?}", w.lost));
    }
    if w.delivered != want {
        let first = w.delivered.iter().zip(&want).position(|(a, b)| a != b);
        return Err(format!(
            "delivered other than the real stream: {} of {} messages, first difference at {first:?}",
            w.delivered.len(),
            want.len()
        ));
    }
    if !w.arb.session_ended() {
        return Err("the real end of session was not believed".into());
    }
    if w.arb.has_open_gap() {
        return Err("a gap is still open".into());
    }
    Ok(())
}
