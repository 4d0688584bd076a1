//! A/B line arbitration for MoldUDP64 (as in NASDAQ's redundant multicast feeds): the first copy
//! of each message wins, later copies are dropped, and a gap is a gap only when both lines miss
//! it. What both missed is re-requested from the retransmission server; what is not recovered in
//! time is given up, explicitly ([`Out::Lost`]), never skipped in silence.
//!
//! Pure state machine (like quinn-proto): packets and the time go in, messages, re-requests and
//! losses come out. No I/O, no clock.
use std::collections::BTreeMap;

use tickbus_codecs::moldudp64::{Packet, PacketKind};

/// Where a packet came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// The primary multicast line.
    A,
    /// The secondary (redundant) multicast line.
    B,
    /// The retransmission server's answer to a re-request.
    Retransmit,
}

/// What the arbiter says to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Out<'a> {
    /// The next message of the stream, in order, once.
    Message {
        /// Its MoldUDP64 sequence number.
        sequence: u64,
        /// The message bytes, borrowed from the packet or the hold.
        message: &'a [u8],
    },
    /// Ask the retransmission server for `count` messages from `sequence`.
    Rerequest {
        /// The first sequence to ask for.
        sequence: u64,
        /// How many.
        count: u16,
    },
    /// Messages `[from, to)` were not recovered in time: the stream goes on after them.
    Lost {
        /// The first sequence lost.
        from: u64,
        /// One past the last sequence lost.
        to: u64,
    },
    /// From here on the stream is MoldUDP64 session `session` (its sequences start again at
    /// 1); everything before belonged to the previous one, whose end was given up explicitly.
    Session {
        /// The new session's name.
        session: [u8; 10],
    },
}

/// Timing of the arbitration, in ns of the caller's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArbiterOptions {
    /// How long a gap may stay open before re-requesting it: the other line's copy usually
    /// arrives within this.
    pub wait_other_line_ns: u64,
    /// How long to wait for an answer before asking again.
    pub retry_ns: u64,
    /// How long a gap may stay open at all before its messages are given up.
    pub give_up_ns: u64,
    /// Most messages one re-request asks for.
    pub max_request: u16,
    /// Most messages held behind a gap (beyond it, or beyond `max_held_bytes`, the open gap is
    /// given up early and what did not fit is re-requested later).
    pub max_held: usize,
    /// Most bytes of messages held behind a gap.
    pub max_held_bytes: usize,
    /// A packet reaching further than this beyond what the stream is known to have reached is
    /// believed only when a second packet agrees (the other line's copy, or the packet after
    /// it): one damaged or stray datagram cannot open a gap of 2^40 messages and end the feed.
    pub max_jump: u64,
    /// Follow only this session (None: the first seen, and the next one after its end).
    pub session: Option<[u8; 10]>,
}

impl Default for ArbiterOptions {
    fn default() -> Self {
        ArbiterOptions {
            wait_other_line_ns: 2_000_000,
            retry_ns: 50_000_000,
            give_up_ns: 500_000_000,
            max_request: 1000,
            max_held: 1 << 20,
            max_held_bytes: 64 << 20,
            max_jump: 1 << 20,
            session: None,
        }
    }
}

/// What the arbiter has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ArbiterStats {
    /// Packets from line A.
    pub packets_a: u64,
    /// Packets from line B.
    pub packets_b: u64,
    /// Packets from the retransmission server.
    pub packets_retransmit: u64,
    /// Messages delivered in order.
    pub delivered: u64,
    /// Copies dropped because the other line (or a retransmission) was first.
    pub duplicates: u64,
    /// Messages recovered by re-request.
    pub recovered: u64,
    /// Re-requests asked for.
    pub rerequests: u64,
    /// Messages given up.
    pub lost: u64,
    /// Gaps given up.
    pub gaps: u64,
    /// Packets of another session (ignored).
    pub other_session: u64,
    /// Packets reaching implausibly far ahead, not (yet) confirmed by a second one (ignored).
    pub implausible: u64,
    /// Messages that arrived ahead of a gap with the hold full (re-requested later).
    pub not_held: u64,
}

/// An open gap: messages from `next` are missing since `since_ns`.
#[derive(Debug, Clone, Copy)]
struct Open {
    since_ns: u64,
    asked_ns: Option<u64>,
}

/// Arbitrates one MoldUDP64 session.
pub struct Arbiter {
    opts: ArbiterOptions,
    session: Option<[u8; 10]>,
    /// The next sequence to deliver (MoldUDP64 sequences start at 1).
    next: u64,
    /// Messages that arrived ahead of a gap, waiting for it to close, and their bytes.
    held: BTreeMap<u64, (Vec<u8>, Line)>,
    held_bytes: usize,
    /// A far packet's range `[first, end]`, believed once a second packet lands in it.
    candidate: Option<(u64, u64)>,
    /// The followed session sent its end: the next session may start.
    session_ended: bool,
    /// The last sessions followed to their end: never followed again (a replayed old session
    /// would deliver its sequences a second time).
    retired: [Option<[u8; 10]>; 4],
    /// The stream is known to reach this far (a heartbeat or a later packet said so).
    known_end: u64,
    open: Option<Open>,
    stats: ArbiterStats,
}

impl Arbiter {
    /// An arbiter with `opts`, before any packet (it follows the first session it sees unless
    /// `opts.session` names one).
    pub fn new(opts: ArbiterOptions) -> Arbiter {
        Arbiter {
            opts,
            session: None,
            next: 1,
            held: BTreeMap::new(),
            held_bytes: 0,
            candidate: None,
            session_ended: false,
            retired: [None; 4],
            known_end: 1,
            open: None,
            stats: ArbiterStats::default(),
        }
    }

    /// What it has seen so far.
    pub fn stats(&self) -> ArbiterStats {
        self.stats
    }

    /// The next sequence the stream will deliver.
    pub fn next_sequence(&self) -> u64 {
        self.next
    }

    /// Whether messages are missing (held back behind a gap, or a lost tail being waited for).
    pub fn has_open_gap(&self) -> bool {
        self.missing_to() != self.next || !self.held.is_empty()
    }

    /// The session followed (the first one seen).
    pub fn session(&self) -> Option<[u8; 10]> {
        self.session
    }

    /// Takes one packet from `line` at time `now_ns`; `out` gets the messages it releases in
    /// order (and re-requests or losses its timing decides, as [`Arbiter::poll`] would).
    pub fn on_packet(&mut self, line: Line, p: &Packet<'_>, now_ns: u64, out: &mut impl FnMut(Out<'_>)) {
        match line {
            Line::A => self.stats.packets_a += 1,
            Line::B => self.stats.packets_b += 1,
            Line::Retransmit => self.stats.packets_retransmit += 1,
        }
        if !self.follows(p.header.session, out) {
            self.stats.other_session += 1;
            return;
        }
        // Packet::parse refuses sequences above 2^62: no overflow below.
        let first = p.header.sequence.get();
        let end = first + u64::from(p.message_count());
        // A heartbeat or end of session carries the next sequence: it reveals a lost tail.
        let reach = if p.kind() == PacketKind::Messages { end } else { first };
        if first == 0 || reach > self.known_end.max(self.next).saturating_add(self.opts.max_jump) {
            match self.candidate {
                // Confirmed only by a later packet that continues it (within a jump of its
                // end): a copy of the same packet (twice, or once per line) proves nothing.
                Some((f, e)) if first > f && first >= e && first <= e.saturating_add(self.opts.max_jump) => {
                    self.candidate = None
                }
                _ => {
                    self.candidate = (first != 0).then_some((first, end));
                    self.stats.implausible += 1;
                    return;
                }
            }
        }
        self.session_ended |= p.kind() == PacketKind::EndOfSession;
        self.known_end = self.known_end.max(reach);
        for (seq, msg) in p.messages() {
            if seq < self.next || self.held.contains_key(&seq) {
                self.stats.duplicates += 1;
            } else if seq == self.next {
                self.deliver(seq, msg, line, out);
            } else if self.held.len() < self.opts.max_held && self.held_bytes + msg.len() <= self.opts.max_held_bytes {
                self.held_bytes += msg.len();
                self.held.insert(seq, (msg.to_vec(), line));
            } else {
                self.stats.not_held += 1;
            }
        }
        self.drain(out);
        self.poll(now_ns, out);
    }

    /// Whether packets of `session` are followed, switching to it when the followed one ended
    /// (a new session starts again at sequence 1).
    fn follows(&mut self, session: [u8; 10], out: &mut impl FnMut(Out<'_>)) -> bool {
        if self.opts.session.is_some_and(|s| s != session) {
            return false;
        }
        match self.session {
            Some(s) if s == session => true,
            Some(_) if !self.session_ended => false,
            _ if self.retired.contains(&Some(session)) => false,
            _ => {
                if let Some(old) = self.session {
                    self.close_session(out);
                    let (opts, stats, mut retired) = (self.opts, self.stats, self.retired);
                    retired.rotate_right(1);
                    retired[0] = Some(old);
                    *self = Arbiter::new(opts);
                    (self.stats, self.retired) = (stats, retired);
                }
                self.session = Some(session);
                out(Out::Session { session });
                true
            }
        }
    }

    /// Leaving a session: what it still holds is delivered, and every hole before or after
    /// it is given up explicitly, never dropped with the session's state.
    fn close_session(&mut self, out: &mut impl FnMut(Out<'_>)) {
        while let Some((seq, (msg, line))) = self.held.pop_first() {
            self.held_bytes -= msg.len();
            self.lose_to(seq, out);
            self.deliver(seq, &msg, line, out);
        }
        self.lose_to(self.known_end, out);
        self.open = None;
    }

    fn lose_to(&mut self, to: u64, out: &mut impl FnMut(Out<'_>)) {
        if to > self.next {
            self.stats.lost += to - self.next;
            self.stats.gaps += 1;
            out(Out::Lost { from: self.next, to });
            self.next = to;
        }
    }

    /// Whether the followed session has sent its end of session.
    pub fn session_ended(&self) -> bool {
        self.session_ended
    }

    fn deliver(&mut self, seq: u64, msg: &[u8], line: Line, out: &mut impl FnMut(Out<'_>)) {
        if line == Line::Retransmit {
            self.stats.recovered += 1;
        }
        self.stats.delivered += 1;
        self.next = seq + 1;
        out(Out::Message { sequence: seq, message: msg });
    }

    /// Delivers held messages that are next, and opens or closes the gap accordingly.
    fn drain(&mut self, out: &mut impl FnMut(Out<'_>)) {
        while let Some(entry) = self.held.first_entry() {
            if *entry.key() != self.next {
                break;
            }
            let (seq, (msg, line)) = entry.remove_entry();
            self.held_bytes -= msg.len();
            self.deliver(seq, &msg, line, out);
        }
        if self.missing_to() == self.next {
            self.open = None;
        }
    }

    /// The end (exclusive) of the messages missing from `next`.
    fn missing_to(&self) -> u64 {
        match self.held.keys().next() {
            Some(&k) => k,
            None => self.known_end.max(self.next),
        }
    }

    /// Applies the timing at `now_ns`: re-requests a gap the other line did not fill, asks
    /// again, or gives it up. Call it when idle too (a lost tail has no later packet).
    pub fn poll(&mut self, now_ns: u64, out: &mut impl FnMut(Out<'_>)) {
        let to = self.missing_to();
        if to == self.next {
            self.open = None;
            return;
        }
        let open = *self.open.get_or_insert(Open { since_ns: now_ns, asked_ns: None });
        let age = now_ns.saturating_sub(open.since_ns);
        let full = self.held.len() >= self.opts.max_held || self.held_bytes >= self.opts.max_held_bytes;
        if age >= self.opts.give_up_ns || full {
            self.stats.lost += to - self.next;
            self.stats.gaps += 1;
            out(Out::Lost { from: self.next, to });
            self.next = to;
            self.open = None;
            self.drain(out);
            return;
        }
        let due = match open.asked_ns {
            None => age >= self.opts.wait_other_line_ns,
            Some(t) => now_ns.saturating_sub(t) >= self.opts.retry_ns,
        };
        if due {
            let count = (to - self.next).min(u64::from(self.opts.max_request)) as u16;
            self.stats.rerequests += 1;
            out(Out::Rerequest { sequence: self.next, count });
            self.open = Some(Open { asked_ns: Some(now_ns), ..open });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickbus_codecs::moldudp64::PacketBuilder;

    const S: [u8; 10] = *b"SESSION001";

    /// Packets of `per` messages each, message `i` being `[i as u8; 4]`.
    fn packets(n: u64, per: u64) -> Vec<Vec<u8>> {
        let mut b = PacketBuilder::new(S, 1, 1400);
        let mut v = Vec::new();
        for i in 1..=n {
            b.push(&[i as u8; 4]);
            if i % per == 0 {
                v.push(b.take(|p| p.to_vec()));
            }
        }
        v
    }

    fn run(
        arb: &mut Arbiter,
        line: Line,
        p: &[u8],
        now: u64,
        got: &mut Vec<Result<u64, (u64, u64)>>,
        asks: &mut Vec<(u64, u16)>,
    ) {
        let pk = Packet::parse(p).unwrap();
        arb.on_packet(line, &pk, now, &mut |o| match o {
            Out::Message { sequence, message } => {
                assert_eq!(message, [sequence as u8; 4]);
                got.push(Ok(sequence))
            }
            Out::Lost { from, to } => got.push(Err((from, to))),
            Out::Rerequest { sequence, count } => asks.push((sequence, count)),
            Out::Session { .. } => {}
        });
    }

    #[test]
    fn the_first_copy_wins_and_a_loss_on_one_line_is_no_gap() {
        let ps = packets(40, 4);
        let mut a = Arbiter::new(ArbiterOptions::default());
        let (mut got, mut asks) = (Vec::new(), Vec::new());
        for (k, p) in ps.iter().enumerate() {
            if k % 3 != 1 {
                run(&mut a, Line::A, p, k as u64, &mut got, &mut asks); // A drops every third
            }
            run(&mut a, Line::B, p, k as u64, &mut got, &mut asks);
        }
        assert_eq!(got, (1..=40).map(Ok).collect::<Vec<_>>());
        assert!(asks.is_empty());
        let s = a.stats();
        assert_eq!((s.delivered, s.lost, s.gaps, s.rerequests), (40, 0, 0, 0));
        assert_eq!(s.duplicates, 28, "every message but the 12 A lost came twice");
    }

    #[test]
    fn what_both_lines_miss_is_rerequested_after_the_wait_and_recovered() {
        let ps = packets(20, 4);
        let mut a = Arbiter::new(ArbiterOptions::default());
        let (mut got, mut asks) = (Vec::new(), Vec::new());
        for (k, p) in ps.iter().enumerate() {
            if k == 1 {
                continue; // 5..=8 lost on both lines
            }
            run(&mut a, Line::A, p, 1000 + k as u64, &mut got, &mut asks);
        }
        assert_eq!(got, (1..=4).map(Ok).collect::<Vec<_>>(), "held behind the gap");
        assert!(asks.is_empty(), "not before the other line had its chance");
        a.poll(3_000_000, &mut |o| {
            if let Out::Rerequest { sequence, count } = o {
                asks.push((sequence, count))
            }
        });
        assert_eq!(asks, vec![(5, 4)]);
        run(&mut a, Line::Retransmit, &ps[1], 3_000_100, &mut got, &mut asks);
        assert_eq!(got, (1..=20).map(Ok).collect::<Vec<_>>());
        assert_eq!((a.stats().recovered, a.stats().lost), (4, 0));
    }

    #[test]
    fn what_is_not_recovered_in_time_is_given_up_with_its_size_and_a_lost_tail_too() {
        let ps = packets(20, 4);
        let opts = ArbiterOptions::default();
        let mut a = Arbiter::new(opts);
        let (mut got, mut asks) = (Vec::new(), Vec::new());
        for (k, p) in ps.iter().enumerate().filter(|(k, _)| *k != 2 && *k != 4) {
            run(&mut a, Line::B, p, k as u64, &mut got, &mut asks);
        }
        a.poll(opts.give_up_ns + 10, &mut |o| {
            if let Out::Lost { from, to } = o {
                got.push(Err((from, to)))
            }
        });
        // 9..=12 lost; 13..=16 delivered; 17..=20 (the tail) unknown without a heartbeat
        assert_eq!(got.iter().filter(|g| g.is_err()).copied().collect::<Vec<_>>(), vec![Err((9, 13))]);
        // A heartbeat: no messages, the next sequence 21.
        let hb = zerocopy::IntoBytes::as_bytes(&tickbus_codecs::moldudp64::rerequest(&S, 21, 0)).to_vec();
        run(&mut a, Line::A, &hb, opts.give_up_ns + 20, &mut got, &mut asks);
        a.poll(2 * opts.give_up_ns + 30, &mut |o| {
            if let Out::Lost { from, to } = o {
                got.push(Err((from, to)))
            }
        });
        assert_eq!(got.last(), Some(&Err((17, 21))), "the heartbeat revealed the lost tail");
        assert_eq!((a.stats().lost, a.stats().gaps), (8, 2));
    }

    fn packet_at(session: [u8; 10], first: u64, msgs: &[&[u8]]) -> Vec<u8> {
        let mut b = PacketBuilder::new(session, first, 1400);
        for m in msgs {
            b.push(m);
        }
        b.take(|p| p.to_vec())
    }

    fn collect(got: &mut Vec<Result<u64, (u64, u64)>>) -> impl FnMut(Out<'_>) + '_ {
        |o| match o {
            Out::Message { sequence, .. } => got.push(Ok(sequence)),
            Out::Lost { from, to } => got.push(Err((from, to))),
            Out::Rerequest { .. } | Out::Session { .. } => {}
        }
    }

    #[test]
    fn one_stray_packet_far_ahead_opens_no_gap_and_the_stream_goes_on() {
        let mut a = Arbiter::new(ArbiterOptions::default());
        let mut got = Vec::new();
        let stray = packet_at(S, 1 << 40, &[b"evil"]);
        a.on_packet(Line::A, &Packet::parse(&stray).unwrap(), 0, &mut collect(&mut got));
        for seq in 1..=5u64 {
            let p = packet_at(S, seq, &[&[seq as u8; 4]]);
            a.on_packet(Line::A, &Packet::parse(&p).unwrap(), seq, &mut collect(&mut got));
        }
        a.poll(10 * ArbiterOptions::default().give_up_ns, &mut collect(&mut got));
        assert_eq!(got, (1..=5).map(Ok).collect::<Vec<_>>(), "no gap, nothing lost");
        assert_eq!((a.stats().implausible, a.stats().lost), (1, 0));
        assert!(!a.has_open_gap());
    }

    #[test]
    fn a_far_jump_is_believed_only_when_a_later_packet_continues_it() {
        let opts = ArbiterOptions::default();
        let mut a = Arbiter::new(opts);
        let mut got = Vec::new();
        let far = 5_000_001u64;
        let p = packet_at(S, far, &[b"late"]);
        a.on_packet(Line::A, &Packet::parse(&p).unwrap(), 0, &mut collect(&mut got));
        assert!(!a.has_open_gap(), "one packet is not believed");
        a.on_packet(Line::B, &Packet::parse(&p).unwrap(), 1, &mut collect(&mut got));
        a.on_packet(Line::A, &Packet::parse(&p).unwrap(), 1, &mut collect(&mut got));
        assert!(!a.has_open_gap(), "copies of the same packet (a forger's too) confirm nothing");
        let next = packet_at(S, far + 1, &[b"next"]);
        a.on_packet(Line::A, &Packet::parse(&next).unwrap(), 2, &mut collect(&mut got));
        assert!(a.has_open_gap(), "the packet after it confirms it");
        a.on_packet(Line::B, &Packet::parse(&p).unwrap(), 3, &mut collect(&mut got));
        a.poll(opts.give_up_ns + 10, &mut collect(&mut got));
        assert_eq!(got, vec![Err((1, far)), Ok(far), Ok(far + 1)]);
    }

    /// When the followed session ends with a hole open, switching to the next session gives the
    /// hole up explicitly and delivers what was held, before anything of the new session.
    #[test]
    fn switching_sessions_gives_up_the_old_sessions_holes_explicitly() {
        let mut a = Arbiter::new(ArbiterOptions::default());
        let mut got = Vec::new();
        for seq in [1u64, 2, 5] {
            let p = packet_at(S, seq, &[b"m"]);
            a.on_packet(Line::A, &Packet::parse(&p).unwrap(), 0, &mut collect(&mut got));
        }
        let mut end = tickbus_codecs::moldudp64::rerequest(&S, 7, 0);
        end.count = tickbus_codecs::moldudp64::END_OF_SESSION.into();
        a.on_packet(Line::A, &Packet::parse(zerocopy::IntoBytes::as_bytes(&end)).unwrap(), 0, &mut collect(&mut got));
        assert!(a.session_ended());
        let other = *b"SESSION002";
        let p = packet_at(other, 1, &[b"n"]);
        a.on_packet(Line::B, &Packet::parse(&p).unwrap(), 0, &mut collect(&mut got));
        assert_eq!(got, vec![Ok(1), Ok(2), Err((3, 5)), Ok(5), Err((6, 7)), Ok(1)]);
        assert_eq!((a.stats().lost, a.stats().gaps), (3, 2));
        // The switch is announced between the old session's last output and the new one's first.
        let mut b = Arbiter::new(ArbiterOptions::default());
        let mut seen = Vec::new();
        for (s, seq) in [(S, 1u64), (S, 3)] {
            let p = packet_at(s, seq, &[b"m"]);
            b.on_packet(Line::A, &Packet::parse(&p).unwrap(), 0, &mut |o| seen.push(format!("{o:?}")));
        }
        b.on_packet(Line::A, &Packet::parse(zerocopy::IntoBytes::as_bytes(&end)).unwrap(), 0, &mut |_| {});
        b.on_packet(Line::B, &Packet::parse(&p).unwrap(), 0, &mut |o| seen.push(format!("{o:?}")));
        let kinds: Vec<&str> = seen.iter().map(|o| o.split([' ', '{']).next().unwrap()).collect();
        assert_eq!(kinds, ["Session", "Message", "Lost", "Message", "Lost", "Session", "Message"], "{seen:?}");
        // Once the new one ends too, the first (a replay of it) is never followed again.
        let mut end2 = tickbus_codecs::moldudp64::rerequest(&other, 2, 0);
        end2.count = tickbus_codecs::moldudp64::END_OF_SESSION.into();
        b.on_packet(Line::A, &Packet::parse(zerocopy::IntoBytes::as_bytes(&end2)).unwrap(), 0, &mut |_| {});
        let replay = packet_at(S, 1, &[b"m"]);
        let before = b.stats().other_session;
        b.on_packet(Line::A, &Packet::parse(&replay).unwrap(), 0, &mut |o| panic!("{o:?} from a retired session"));
        assert_eq!((b.session(), b.stats().other_session), (Some(other), before + 1));
    }

    #[test]
    fn another_session_is_ignored_until_the_followed_one_ends() {
        let mut a = Arbiter::new(ArbiterOptions::default());
        let mut got = Vec::new();
        let other = *b"SESSION002";
        for (s, seq) in [(S, 1u64), (other, 1), (S, 2)] {
            let p = packet_at(s, seq, &[b"m"]);
            a.on_packet(Line::A, &Packet::parse(&p).unwrap(), 0, &mut collect(&mut got));
        }
        assert_eq!((got.len(), a.stats().other_session), (2, 1));
        let mut end = tickbus_codecs::moldudp64::rerequest(&S, 3, 0);
        end.count = tickbus_codecs::moldudp64::END_OF_SESSION.into();
        a.on_packet(Line::A, &Packet::parse(zerocopy::IntoBytes::as_bytes(&end)).unwrap(), 0, &mut collect(&mut got));
        let p = packet_at(other, 1, &[b"n"]);
        a.on_packet(Line::A, &Packet::parse(&p).unwrap(), 0, &mut collect(&mut got));
        assert_eq!(a.session(), Some(other), "the next session starts after the end of the first");
        assert_eq!(got, vec![Ok(1), Ok(2), Ok(1)]);
    }

    #[test]
    fn what_is_held_behind_a_gap_is_bounded_in_bytes() {
        let opts = ArbiterOptions { max_held_bytes: 1000, ..ArbiterOptions::default() };
        let mut a = Arbiter::new(opts);
        let mut got = Vec::new();
        let big = [7u8; 300];
        for seq in 2..=10u64 {
            let p = packet_at(S, seq, &[&big]);
            a.on_packet(Line::A, &Packet::parse(&p).unwrap(), 0, &mut collect(&mut got));
        }
        assert!(a.held_bytes <= 1000);
        assert!(a.stats().not_held > 0);
    }
}
