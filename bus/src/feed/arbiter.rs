//! A/B line arbitration for MoldUDP64 (as in NASDAQ's redundant multicast feeds): the first copy
//! of each message wins, later copies are dropped, and a gap is a gap only when both lines miss
//! it. What both missed is re-requested from the retransmission server; what is not recovered in
//! time is given up, explicitly ([`Out::Lost`]), never skipped in silence.
//!
//! Pure state machine (like quinn-proto): packets and the time go in, messages, re-requests and
//! losses come out. No I/O, no clock.
use std::collections::{BTreeMap, VecDeque};

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
    /// How long a jump ahead on a line (a packet leaving a hole before it) must stand, continued
    /// by a later packet of that line and never contradicted by the line going back below it,
    /// before it is believed without the retransmission server's word; and how long the stream
    /// must stay quiet after an end of session before the session counts as ended. Longer than
    /// the server's heartbeat interval (a real line's next heartbeat contradicts a forged jump
    /// or end): MoldUDP64 servers send one a second.
    pub confirm_ns: u64,
    /// Most messages one re-request asks for.
    pub max_request: u16,
    /// Most messages held behind a gap (beyond it, or beyond `max_held_bytes`, the open gap is
    /// given up early and what did not fit is re-requested later).
    pub max_held: usize,
    /// Most bytes of messages held behind a gap.
    pub max_held_bytes: usize,
    /// A packet reaching further than this beyond what the stream is known to have reached is
    /// not even held until a second packet continues it: one damaged or stray datagram cannot
    /// fill the hold.
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
            confirm_ns: 2_000_000_000,
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
#[non_exhaustive]
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
    /// Jumps ahead that a line's own later packet contradicted (it went back below them), or
    /// whose bytes the retransmission server or the in-order stream contradicted: discarded,
    /// with what they held. A forged or stray datagram ahead of the stream ends here.
    pub contradicted: u64,
    /// Jumps ahead believed after standing `confirm_ns` uncontradicted (a real loss on both
    /// lines that the retransmission server did not answer).
    pub believed_by_time: u64,
    /// Ends of session contradicted by a later packet of the session reaching past them.
    pub ends_contradicted: u64,
}

/// An open gap: messages from `at` (the `next` it opened at) are missing since `since_ns`.
/// `behind`: it is a hole behind the first of a spell of gaps (the stream not whole since),
/// missing since the first confirmed message after it arrived (`since_ns`; confirmed later, by
/// the server's copy or a jump believed, it still arrived then); the first gap of a spell is
/// timed from when `next` reached it. `asked_ns`: this gap's latest re-request (for the retry).
///
/// A gap is given up once it has been missing for `give_up_ns`; a hole behind another also
/// only once the first re-request that covered it (as far as one re-request reaches: one made
/// for an earlier gap counts) is `give_up_ns` old, so the server had as long to answer as a
/// first gap gets, or at once if the server has answered nothing for `give_up_ns` since it was
/// first asked in the spell (silent: down, or not there). So the holes behind the first are not
/// timed afresh one after another as `next` reaches them: after a burst of losses, the holes a
/// re-request covered are given up together, and with a silent server every hole is given up
/// once known for `give_up_ns` (which a few hundred holes, each timed afresh, had held the live
/// stream up for minutes). With a server that answers but lacks the holes, holes further apart
/// than one re-request reaches (`max_request`) still take `give_up_ns` per stretch.
#[derive(Debug, Clone, Copy)]
struct Open {
    at: u64,
    since_ns: u64,
    behind: bool,
    asked_ns: Option<u64>,
}

/// Re-requests of a spell of gaps kept (each that reached further than the last): past this the
/// oldest go, and a hole they covered counts as covered by a later one (given up later).
const MAX_ASKS: usize = 4096;

/// A message held ahead of `next`. `confirmed`: it came in order with what the stream is known
/// to hold (or from the retransmission server, or a jump holding it was believed); an
/// unconfirmed one came in a jump ahead and is neither delivered nor taken as the edge of a gap
/// until confirmed. `lines`: the lines (bit 0 A, bit 1 B) whose jumps brought these very bytes;
/// it is dropped once every one of them is contradicted.
#[derive(Debug, Clone)]
struct Held {
    msg: Vec<u8>,
    line: Line,
    lines: u8,
    confirmed: bool,
    /// When it arrived: once it is confirmed, the hole before it counts as missing since then.
    known_ns: u64,
}

fn line_bit(line: Line) -> u8 {
    match line {
        Line::A => 1,
        Line::B => 2,
        Line::Retransmit => 0,
    }
}

/// A line's jump ahead, not yet believed: its packet at `from` left a hole before it, and the
/// line's packets since have continued it without a hole up to `reach`. A packet of the line
/// past `reach` is a jump of its own (a forged run cannot ride on a real jump).
#[derive(Debug, Clone, Copy)]
struct Claim {
    from: u64,
    reach: u64,
    since_ns: u64,
    /// A later packet of the line came, not below `from` (a real line's next packet or
    /// heartbeat would be below a forged jump).
    continued: bool,
}

/// An end of session seen at `next` sequence `seq`, at `at_ns`.
#[derive(Debug, Clone, Copy)]
struct End {
    seq: u64,
    at_ns: u64,
}

/// Arbitrates one MoldUDP64 session.
///
/// # What a datagram can and cannot do
/// MoldUDP64 carries no authentication, so whoever can send to a line can race the real copy of
/// the *next* message (content at the stream's edge is indistinguishable from the real one: the
/// defence there is the network's, source filtering). What no datagram, and no run of datagrams
/// that the real lines do not continue, can do here:
/// - **Move the stream's end.** A packet that leaves a hole before it (a jump ahead) is held
///   unconfirmed under its line's *claim*. The claim is discarded, with what it held, as soon as
///   the same line sends a packet starting below it (a real line is in order, so a forged jump
///   is contradicted by the real line's next packet or heartbeat), or when the in-order stream or
///   the retransmission server brings other bytes for one of its sequences. Each message it holds
///   is confirmed by the retransmission server's copy of that message (re-requests reach past
///   what is held, and asking is harmless: the server answers with the real stream); the whole
///   jump is believed after it stood `confirm_ns`, continued by a later packet of its line and
///   never contradicted, and only once the other line has not been heard at the stream's edge
///   for `confirm_ns` (a live other line reaches a real jump and compares its bytes, or jumps
///   too; so a jump forged on a silent line is not believed while the other line flows).
///   Until then it opens no gap. The same bytes brought by both lines' jumps
///   stay held while either line's jump stands.
/// - **End a session.** An end of session counts only at the stream's confirmed edge and after
///   `confirm_ns` in which no line's in-order packet went past it or was a heartbeat at it (a
///   server in session sends heartbeats at its edge; after its end, only ends).
/// - **Switch sessions.** Another session is followed only once the followed one has ended by
///   that rule (or never, when `session` is set).
///
/// The retransmission server's answers are trusted: the caller receives them on a socket
/// connected to the server's address.
pub struct Arbiter {
    opts: ArbiterOptions,
    session: Option<[u8; 10]>,
    /// The next sequence to deliver (MoldUDP64 sequences start at 1).
    next: u64,
    /// Messages that arrived ahead of `next`, waiting for the gap before them, and their bytes.
    held: BTreeMap<u64, Held>,
    held_bytes: usize,
    /// This spell's re-requests that reached further than any before: the end (exclusive) of
    /// what each asked for, and when; both increasing.
    asks: VecDeque<(u64, u64)>,
    /// The spell's latest re-request (reach, when), for the retry timing of the next gap.
    last_ask: Option<(u64, u64)>,
    /// Where the current spell of gaps began (`next` then): gaps after it are behind it. None
    /// while the stream is whole.
    spell: Option<u64>,
    /// The spell's first re-request since the server last answered anything: once it is
    /// `give_up_ns` old the server counts as silent, and holes behind a gap no longer wait for
    /// answers to re-requests.
    unanswered_since: Option<u64>,
    /// A far packet's range `[first, end]`, held once a second packet lands in it.
    candidate: Option<(u64, u64)>,
    /// Lines A and B's jumps ahead, not yet believed (a few each: a line losing several
    /// packets in a row leaves several holes).
    claims: [BTreeMap<u64, Claim>; 2],
    /// The followed session's end of session, not yet contradicted.
    end: Option<End>,
    /// The last sessions followed to their end: never followed again (a replayed old session
    /// would deliver its sequences a second time).
    retired: [Option<[u8; 10]>; 4],
    /// The stream is known to reach this far (an in-order packet, a believed jump or the
    /// retransmission server said so).
    known_end: u64,
    open: Option<Open>,
    /// The latest time given to `on_packet` or `poll`.
    now_ns: u64,
    /// When lines A and B last sent a packet in order (starting at or below the stream's edge).
    /// A line heard at the edge within `confirm_ns` vouches that the stream is still there: the
    /// other line's jump is not believed by time until that line too has gone past the edge
    /// (its own jump, or its in-order packets reaching the jump and comparing bytes) or fallen
    /// silent for `confirm_ns`.
    edge_ns: [Option<u64>; 2],
    stats: ArbiterStats,
}

/// Most jumps ahead tracked per line (a line that loses a packet in every few, with no server to
/// answer, has a hole every few packets for `confirm_ns`).
const MAX_CLAIMS: usize = 1 << 14;

fn line_index(line: Line) -> Option<usize> {
    match line {
        Line::A => Some(0),
        Line::B => Some(1),
        Line::Retransmit => None,
    }
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
            asks: VecDeque::new(),
            last_ask: None,
            spell: None,
            unanswered_since: None,
            candidate: None,
            claims: [BTreeMap::new(), BTreeMap::new()],
            end: None,
            retired: [None; 4],
            known_end: 1,
            open: None,
            now_ns: 0,
            edge_ns: [None; 2],
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

    /// The stream's confirmed edge: everything below it is delivered, held or known missing.
    fn frontier(&self) -> u64 {
        self.known_end.max(self.next)
    }

    /// Takes one packet from `line` at time `now_ns`; `out` gets the messages it releases in
    /// order (and re-requests or losses its timing decides, as [`Arbiter::poll`] would).
    pub fn on_packet(&mut self, line: Line, p: &Packet<'_>, now_ns: u64, out: &mut impl FnMut(Out<'_>)) {
        self.now_ns = self.now_ns.max(now_ns);
        match line {
            Line::A => self.stats.packets_a += 1,
            Line::B => self.stats.packets_b += 1,
            Line::Retransmit => self.stats.packets_retransmit += 1,
        }
        if !self.follows(p.header.session, out) {
            self.stats.other_session += 1;
            return;
        }
        if line == Line::Retransmit {
            self.unanswered_since = None; // the server answers
        }
        // Packet::parse refuses sequences above 2^62: no overflow below.
        let first = p.header.sequence.get();
        let end = first + u64::from(p.message_count());
        // A heartbeat or end of session carries the next sequence: it reveals a lost tail.
        let reach = if p.kind() == PacketKind::Messages { end } else { first };
        // A jump ahead already held under a claim widens what is plausible, not what is believed.
        let base = self.claims.iter().filter_map(|m| m.values().map(|c| c.reach).max()).fold(self.frontier(), u64::max);
        if first == 0 || reach > base.saturating_add(self.opts.max_jump) {
            match self.candidate {
                // Held only once a later packet continues it (within a jump of its end): a
                // copy of the same packet (twice, or once per line) proves nothing.
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
        // An end of session is contradicted by a line's in-order packet that goes on past it, or
        // by a heartbeat at it (a real server in session sends heartbeats at its edge; after its
        // end, only ends). A packet ahead of the stream contradicts nothing.
        if let Some(e) = self.end {
            let in_order_line = line != Line::Retransmit && first <= self.frontier();
            if in_order_line && (reach > e.seq || (reach == e.seq && p.kind() == PacketKind::Heartbeat)) {
                self.end = None;
                self.stats.ends_contradicted += 1;
            }
        }
        if p.kind() == PacketKind::EndOfSession {
            // A repeated end keeps its time; one at or below the stream's edge replaces another,
            // one ahead of it replaces none (a forger's, sent while the real server repeats its
            // end, would restart the wait).
            let frontier = self.frontier();
            let replace = match self.end {
                None => true,
                Some(e) => e.seq != first && first <= frontier,
            };
            if replace {
                self.end = Some(End { seq: first, at_ns: self.now_ns });
            }
        }
        let trusted = line == Line::Retransmit;
        let in_order = trusted || first <= self.frontier();
        if let Some(i) = line_index(line).filter(|_| in_order) {
            self.edge_ns[i] = Some(self.now_ns);
        }
        if let Some(i) = line_index(line) {
            // A packet below a jump's start: the line went back, the jump was not its own. A
            // heartbeat or end of session says which sequence the line sends next: a jump
            // reaching past it was not the line's own either (a real line's heartbeat after its
            // messages is at or past their end). The feed_forgery fuzz target found a forged
            // message right after the real stream's last one believed when only the line's end
            // of session, at that very sequence, followed it.
            let control = p.kind() != PacketKind::Messages;
            let below: Vec<u64> = self.claims[i]
                .iter()
                .filter(|(&f, c)| f > first || (control && c.reach > first))
                .map(|(&f, _)| f)
                .collect();
            for from in below {
                self.drop_claim(i, from);
            }
            for c in self.claims[i].values_mut() {
                c.continued = true;
            }
            if !in_order {
                let now = self.now_ns;
                let claims = &mut self.claims[i];
                let joins = claims.range(..=first).next_back().filter(|(_, c)| first <= c.reach).map(|(&f, _)| f);
                match joins {
                    Some(f) => {
                        if let Some(c) = claims.get_mut(&f) {
                            c.reach = c.reach.max(reach);
                        }
                    }
                    None if claims.len() < MAX_CLAIMS => {
                        claims.insert(first, Claim { from: first, reach, since_ns: now, continued: false });
                    }
                    None => {
                        // No room to track another jump on this line: its messages are not
                        // held (re-requested once the stream reaches them).
                        self.stats.not_held += u64::from(p.message_count());
                        self.drain(out);
                        self.poll(now_ns, out);
                        return;
                    }
                }
            }
        }
        if in_order {
            self.known_end = self.known_end.max(reach);
        }
        for (seq, msg) in p.messages() {
            self.take(seq, msg, line, in_order, out);
        }
        self.drain(out);
        self.poll(now_ns, out);
    }

    /// One message of a packet: delivered, held, or dropped as a copy.
    fn take(&mut self, seq: u64, msg: &[u8], line: Line, in_order: bool, out: &mut impl FnMut(Out<'_>)) {
        if seq < self.next {
            self.stats.duplicates += 1;
            return;
        }
        if let Some(h) = self.held.get_mut(&seq) {
            let same = h.msg == msg;
            if h.confirmed || !in_order {
                // Another jump's copy: the same bytes are held for its line too (so contradicting
                // one line's jump does not drop what the other line also brought); other bytes
                // cannot be told apart from the first, which stays.
                if same && !h.confirmed {
                    h.lines |= line_bit(line);
                }
                self.stats.duplicates += 1;
                return;
            }
            // An in-order (or the server's) copy of a message a jump holds: equal bytes
            // confirm it, other bytes contradict every jump that brought it.
            if same {
                h.confirmed = true;
                self.stats.duplicates += 1;
                return;
            }
            let lines = h.lines;
            for l in [Line::A, Line::B].into_iter().filter(|&l| lines & line_bit(l) != 0) {
                if let Some((i, from)) = self.claim_at(l, seq) {
                    self.drop_claim(i, from);
                }
            }
            if let Some(h) = self.held.remove(&seq) {
                self.held_bytes -= h.msg.len();
            }
        }
        if seq == self.next && in_order {
            self.deliver(seq, msg, line, out);
        } else if self.held.len() < self.opts.max_held && self.held_bytes + msg.len() <= self.opts.max_held_bytes {
            self.held_bytes += msg.len();
            let lines = if in_order { 0 } else { line_bit(line) };
            let h = Held { msg: msg.to_vec(), line, lines, confirmed: in_order, known_ns: self.now_ns };
            self.held.insert(seq, h);
        } else {
            self.stats.not_held += 1;
        }
    }

    /// The claim of `line` that holds `seq`: the line's index and the claim's first sequence.
    fn claim_at(&self, line: Line, seq: u64) -> Option<(usize, u64)> {
        let i = line_index(line)?;
        let (&from, c) = self.claims[i].range(..=seq).next_back()?;
        (seq < c.reach.max(from + 1)).then_some((i, from))
    }

    /// Believes claim `from` of line `i`: what it holds is confirmed, the stream reaches its end.
    fn believe(&mut self, i: usize, from: u64) {
        let Some(c) = self.claims[i].remove(&from) else { return };
        let bit = 1u8 << i;
        for (_, h) in self.held.range_mut(c.from..c.reach.max(c.from + 1)) {
            h.confirmed |= h.lines & bit != 0;
        }
        self.known_end = self.known_end.max(c.reach);
    }

    /// Discards claim `from` of line `i` and what it holds unconfirmed.
    fn drop_claim(&mut self, i: usize, from: u64) {
        let Some(c) = self.claims[i].remove(&from) else { return };
        let bit = 1u8 << i;
        self.stats.contradicted += 1;
        let mut gone = Vec::new();
        for (&seq, h) in self.held.range_mut(c.from..c.reach.max(c.from + 1)) {
            if !h.confirmed && h.lines & bit != 0 {
                h.lines &= !bit;
                if h.lines == 0 {
                    gone.push(seq);
                }
            }
        }
        for seq in gone {
            if let Some(h) = self.held.remove(&seq) {
                self.held_bytes -= h.msg.len();
            }
        }
    }

    /// Whether packets of `session` are followed, switching to it when the followed one ended
    /// (a new session starts again at sequence 1).
    fn follows(&mut self, session: [u8; 10], out: &mut impl FnMut(Out<'_>)) -> bool {
        if self.opts.session.is_some_and(|s| s != session) {
            return false;
        }
        match self.session {
            Some(s) if s == session => true,
            Some(_) if !self.session_ended() => false,
            _ if self.retired.contains(&Some(session)) => false,
            _ => {
                if let Some(old) = self.session {
                    self.close_session(out);
                    let (opts, stats, mut retired, now) = (self.opts, self.stats, self.retired, self.now_ns);
                    retired.rotate_right(1);
                    retired[0] = Some(old);
                    *self = Arbiter::new(opts);
                    (self.stats, self.retired, self.now_ns) = (stats, retired, now);
                }
                self.session = Some(session);
                out(Out::Session { session });
                true
            }
        }
    }

    /// Leaving a session: what it still holds confirmed is delivered, and every hole before or
    /// after it is given up explicitly, never dropped with the session's state. Unconfirmed
    /// jumps are dropped: the session ended before they were believed.
    fn close_session(&mut self, out: &mut impl FnMut(Out<'_>)) {
        while let Some((seq, h)) = self.held.pop_first() {
            self.held_bytes -= h.msg.len();
            if h.confirmed && seq >= self.next {
                self.lose_to(seq, out);
                self.deliver(seq, &h.msg, h.line, out);
            }
        }
        self.lose_to(self.known_end, out);
        self.open = None;
        self.end_spell();
    }

    /// The stream is whole again (or the session closed): the next gap starts a new spell.
    fn end_spell(&mut self) {
        self.spell = None;
        self.asks.clear();
        (self.last_ask, self.unanswered_since) = (None, None);
    }

    /// Whether the server has answered nothing for `give_up_ns` since this spell first asked it.
    fn silent(&self, now_ns: u64) -> bool {
        self.unanswered_since.is_some_and(|t| now_ns.saturating_sub(t) >= self.opts.give_up_ns)
    }

    /// How long ago the first re-request that covered the gap `[next, to)` went out, as far as
    /// one re-request reaches (0: none yet).
    fn covered_for(&self, to: u64, now_ns: u64) -> u64 {
        let need = to.min(self.next.saturating_add(u64::from(self.opts.max_request)));
        let k = self.asks.partition_point(|&(reach, _)| reach < need);
        self.asks.get(k).map_or(0, |&(_, at)| now_ns.saturating_sub(at))
    }

    fn lose_to(&mut self, to: u64, out: &mut impl FnMut(Out<'_>)) {
        if to > self.next {
            self.stats.lost += to - self.next;
            self.stats.gaps += 1;
            out(Out::Lost { from: self.next, to });
            self.next = to;
        }
    }

    /// Whether the followed session has ended: its end of session lies at the stream's
    /// confirmed edge, and for `confirm_ns` (as of the latest time given) no packet of the
    /// session reached past it.
    pub fn session_ended(&self) -> bool {
        self.end
            .is_some_and(|e| e.seq <= self.frontier() && self.now_ns.saturating_sub(e.at_ns) >= self.opts.confirm_ns)
    }

    fn deliver(&mut self, seq: u64, msg: &[u8], line: Line, out: &mut impl FnMut(Out<'_>)) {
        if line == Line::Retransmit {
            self.stats.recovered += 1;
        }
        self.stats.delivered += 1;
        self.next = seq + 1;
        out(Out::Message { sequence: seq, message: msg });
    }

    /// Delivers confirmed held messages that are next (dropping any left below `next` by a
    /// give-up), and opens or closes the gap accordingly.
    fn drain(&mut self, out: &mut impl FnMut(Out<'_>)) {
        while let Some(entry) = self.held.first_entry() {
            let seq = *entry.key();
            if seq > self.next || (seq == self.next && !entry.get().confirmed) {
                break;
            }
            let (seq, h) = entry.remove_entry();
            self.held_bytes -= h.msg.len();
            if seq == self.next {
                self.deliver(seq, &h.msg, h.line, out);
            }
        }
        if !self.has_open_gap() {
            self.open = None;
            self.end_spell();
        }
    }

    /// The end (exclusive) of the messages known missing from `next`: up to the first confirmed
    /// held message, or the confirmed end.
    fn missing_to(&self) -> u64 {
        match self.held.iter().find(|(_, h)| h.confirmed) {
            Some((&k, _)) => k,
            None => self.frontier(),
        }
    }

    /// How far a re-request may usefully reach: past everything held, so that the server's
    /// answer can confirm (or contradict) a jump.
    fn ask_to(&self) -> u64 {
        let held = self.held.last_key_value().map_or(0, |(&k, _)| k + 1);
        let claimed = self.claims.iter().filter_map(|m| m.values().map(|c| c.reach).max()).max().unwrap_or(0);
        self.missing_to().max(held).max(claimed)
    }

    /// Applies the timing at `now_ns`: believes a jump that stood long enough, re-requests a gap
    /// the other line did not fill (or a jump's hole, so the server can confirm it), asks again,
    /// or gives a known gap up. Call it when idle too (a lost tail has no later packet).
    pub fn poll(&mut self, now_ns: u64, out: &mut impl FnMut(Out<'_>)) {
        self.now_ns = self.now_ns.max(now_ns);
        for i in 0..2 {
            // Jumps the stream has passed hold nothing that matters any more.
            let next = self.next;
            self.claims[i].retain(|_, c| c.reach > next);
            let (now, confirm) = (self.now_ns, self.opts.confirm_ns);
            // The other line still sends at the stream's edge: it will reach a real jump (and
            // compare bytes) or jump itself; a jump it never goes near is not believed by time.
            if self.edge_ns[1 - i].is_some_and(|t| now.saturating_sub(t) < confirm) {
                continue;
            }
            let stood: Vec<u64> = self.claims[i]
                .values()
                .filter(|c| c.continued && now.saturating_sub(c.since_ns) >= confirm)
                .map(|c| c.from)
                .collect();
            for from in stood {
                self.stats.believed_by_time += 1;
                self.believe(i, from);
            }
        }
        self.drain(out);
        if !self.has_open_gap() {
            self.open = None;
            self.end_spell();
            return;
        }
        let now_ns = self.now_ns;
        let to = self.missing_to();
        let next = self.next;
        let mut open = match self.open {
            Some(o) if o.at == next => o,
            _ => Open {
                at: next,
                since_ns: now_ns,
                // Behind the first gap of this spell of gaps (the stream not whole since).
                behind: next > *self.spell.get_or_insert(next),
                // A re-request just made that reaches it is this gap's too (no second at once).
                asked_ns: self
                    .last_ask
                    .filter(|&(reach, _)| reach >= to.min(next.saturating_add(u64::from(self.opts.max_request))))
                    .map(|(_, at)| at),
            },
        };
        if open.behind {
            // Missing since the first confirmed message after it arrived (the first gap of a
            // spell is timed from when `next` reached it, as it always was).
            if let Some(h) = self.held.get(&to).filter(|h| h.confirmed) {
                open.since_ns = open.since_ns.min(h.known_ns);
            }
        }
        self.open = Some(open);
        let age = now_ns.saturating_sub(open.since_ns);
        let full = self.held.len() >= self.opts.max_held || self.held_bytes >= self.opts.max_held_bytes;
        let give_up = self.opts.give_up_ns;
        let waited = age >= give_up && (!open.behind || self.silent(now_ns) || self.covered_for(to, now_ns) >= give_up);
        if to > self.next && (waited || full) {
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
        let ask_to = self.ask_to();
        if due && ask_to > self.next {
            let count = (ask_to - self.next).min(u64::from(self.opts.max_request)) as u16;
            self.stats.rerequests += 1;
            out(Out::Rerequest { sequence: self.next, count });
            // (A forged jump can raise what this asks for past the real stream; the holes a
            // real packet later reveals there count as covered from now. It dies at the line's
            // next real packet, which usually ends the spell and forgets this.)
            let reach = self.next + u64::from(count);
            self.last_ask = Some((reach, now_ns));
            while self.asks.front().is_some_and(|&(r, _)| r <= self.next) {
                self.asks.pop_front(); // covers nothing left
            }
            if self.asks.back().is_none_or(|&(r, _)| reach > r) {
                if self.asks.len() == MAX_ASKS {
                    self.asks.pop_front();
                }
                self.asks.push_back((reach, now_ns));
            }
            self.unanswered_since.get_or_insert(now_ns);
            self.open = Some(Open { asked_ns: Some(now_ns), ..open });
        }
    }
}

#[cfg(test)]
#[path = "arbiter_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "arbiter_props.rs"]
mod props;
