//! `tickbus mold-server`: the exchange side for tests and demos. Serves a journal, an ITCH file
//! or a capture as MoldUDP64 on two multicast lines (A and B) with a re-request server, and
//! drops packets on purpose (`--drop-a N`, `--drop-b N`: every Nth packet), like Aeron's loss
//! generators. After the last message it keeps answering re-requests, sending heartbeats, for
//! `--linger-ms`, then an end-of-session packet.
//!
//! The re-request server answers only the addresses `--allow` names (loopback by default), each
//! within `--answer-budget` messages a second (`policy.rs`): it is never an open reflector.
//!
//! `--glimpse ADDR` also serves the venue's whole book over TCP (`glimpse.rs`), as it stands
//! after the messages sent so far: what a feed handler that lost messages for good repairs its
//! book with (`tickbus feed --glimpse`).
mod glimpse;
mod policy;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use tickbus::replay;
use tickbus_codecs::moldudp64::{MoldHeader, PacketBuilder, HEADER_LEN};
use zerocopy::{FromBytes, IntoBytes};

#[derive(Args, Debug)]
pub struct MoldServerArgs {
    /// A journal folder, an ITCH 5.0 file, or a pcap/pcapng capture of MoldUDP64.
    pub input: PathBuf,
    /// Line A: multicast GROUP:PORT.
    #[arg(long, default_value = "239.77.10.1:30001")]
    pub line_a: SocketAddrV4,
    /// Line B: multicast GROUP:PORT.
    #[arg(long, default_value = "239.77.10.2:30002")]
    pub line_b: SocketAddrV4,
    /// Interface address to send multicast from (127.0.0.1: loopback).
    #[arg(long, default_value = "127.0.0.1")]
    pub iface: Ipv4Addr,
    /// Where re-requests are answered (UDP).
    #[arg(long, default_value = "127.0.0.1:30003")]
    pub retransmit: SocketAddr,
    /// Ignore re-requests (a retransmission server that is gone).
    #[arg(long)]
    pub no_retransmit: bool,
    /// Answer re-requests only from these addresses or networks (repeat, or separate with
    /// commas: 10.1.2.0/24,192.0.2.7; 0.0.0.0/0 for anyone). Others are counted as refused and
    /// get nothing: a re-request's sender is not checked by UDP, so an open server would send a
    /// forged victim up to 1,000 messages per 20-byte request.
    #[arg(long, value_delimiter = ',', value_parser = policy::parse_net, default_value = "127.0.0.0/8")]
    pub allow: Vec<ipnet::IpNet>,
    /// Most messages answered per second to one source (a bucket holding one second's worth):
    /// a source that asks for more gets what its budget allows and asks again.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub answer_budget: u64,
    /// Drop every Nth packet on line A (0: none).
    #[arg(long, default_value_t = 0)]
    pub drop_a: u64,
    /// Drop every Nth packet on line B (0: none).
    #[arg(long, default_value_t = 0)]
    pub drop_b: u64,
    /// Messages per second (0: as fast as the socket takes them).
    #[arg(long, default_value_t = 100_000.0, value_parser = crate::args::rate_or_0)]
    pub rate: f64,
    /// Largest UDP payload.
    #[arg(long, default_value_t = 1400, value_parser = crate::args::within_usize(64, 65_507))]
    pub packet_bytes: usize,
    /// The 10-character MoldUDP64 session.
    #[arg(long, default_value = "TICKBUS001")]
    pub session: String,
    /// How long to keep answering re-requests after the last message (ms).
    #[arg(long, default_value_t = 2000, value_parser = crate::args::millis)]
    pub linger_ms: u64,
    /// Wait this long before the first packet (ms), so feeds can join.
    #[arg(long, default_value_t = 0, value_parser = crate::args::millis)]
    pub start_delay_ms: u64,
    /// Serve the venue's whole book over TCP at this address (to `--allow`ed clients): the
    /// book after every message sent so far, as snapshot chunks, for a feed handler that lost
    /// messages for good (`tickbus feed --glimpse`). Costs a book update per message sent.
    #[arg(long, value_name = "ADDR")]
    pub glimpse: Option<SocketAddr>,
    /// Print the summary (packets sent and dropped per line, re-requests answered) as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Most messages one re-request is answered with (a client asks again for the rest).
const MAX_ANSWER: u64 = 1000;
/// Most re-requests answered per pass of the send loop.
const REQUESTS_PER_SERVE: usize = 16;

/// Every message sent, for re-requests: `[u16 BE len][message]` frames and where each begins.
struct History {
    bytes: Vec<u8>,
    at: Vec<usize>,
}

impl History {
    fn get(&self, seq: u64) -> Option<&[u8]> {
        let i = usize::try_from(seq.checked_sub(1)?).ok()?;
        let start = *self.at.get(i)?;
        let len = usize::from(u16::from_be_bytes([self.bytes[start], self.bytes[start + 1]]));
        Some(&self.bytes[start + 2..start + 2 + len])
    }
}

struct Server {
    sock: UdpSocket,
    rtx: UdpSocket,
    a: SocketAddrV4,
    b: SocketAddrV4,
    session: [u8; 10],
    packets: u64,
    history: History,
    dropped_a: u64,
    dropped_b: u64,
    dropped_both_messages: u64,
    rerequests: u64,
    retransmitted: u64,
    /// Re-requests from sources `--allow` does not name.
    refused: u64,
    /// Messages asked for that a source's budget did not cover.
    throttled: u64,
    policy: policy::Policy,
    answer: bool,
    bytes: usize,
    glimpse: Option<glimpse::BookService>,
}

pub fn run(a: MoldServerArgs) -> Result<(), String> {
    let session: [u8; 10] =
        a.session.as_bytes().try_into().map_err(|_| "--session must be exactly 10 characters".to_owned())?;
    let mut source = replay::open(&a.input, None, None).map_err(|e| e.to_string())?;
    let sock = UdpSocket::bind((a.iface, 0)).map_err(|e| format!("binding the multicast sender: {e}"))?;
    let sock: UdpSocket = {
        let s2 = socket2::Socket::from(sock);
        s2.set_multicast_if_v4(&a.iface).map_err(|e| format!("sending multicast from {}: {e}", a.iface))?;
        s2.set_multicast_loop_v4(true).map_err(|e| e.to_string())?;
        s2.into()
    };
    let rtx =
        UdpSocket::bind(a.retransmit).map_err(|e| format!("binding the re-request server at {}: {e}", a.retransmit))?;
    rtx.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut s = Server {
        sock,
        rtx,
        a: a.line_a,
        b: a.line_b,
        session,
        packets: 0,
        history: History { bytes: Vec::new(), at: Vec::new() },
        dropped_a: 0,
        dropped_b: 0,
        dropped_both_messages: 0,
        rerequests: 0,
        retransmitted: 0,
        refused: 0,
        throttled: 0,
        policy: policy::Policy::new(a.allow.clone(), a.answer_budget),
        answer: !a.no_retransmit,
        bytes: a.packet_bytes,
        glimpse: a.glimpse.map(|g| glimpse::BookService::bind(g, session)).transpose()?,
    };
    std::thread::sleep(Duration::from_millis(a.start_delay_ms));
    let mut b = PacketBuilder::new(session, 1, a.packet_bytes);
    let t0 = Instant::now();
    let mut n = 0u64;
    while let Some(item) = source.next().map_err(|e| e.to_string())? {
        if item.gap.is_some() || item.payload.is_empty() {
            continue;
        }
        if a.rate > 0.0 {
            let due = Duration::from_secs_f64(n as f64 / a.rate);
            while t0.elapsed() < due {
                s.serve();
                std::hint::spin_loop();
            }
        }
        if !b.fits(item.payload) {
            s.send_packet(&mut b, a.drop_a, a.drop_b)?;
            // Between packets too: a server behind its schedule (or at --rate 0) never waits,
            // and re-requests and book requests must not wait for the day's end.
            s.serve();
        }
        if !b.push(item.payload) {
            return Err(format!("a {}-byte message does not fit a {}-byte packet", item.payload.len(), a.packet_bytes));
        }
        if let Some(g) = &mut s.glimpse {
            g.sent(item.payload, n + 1);
        }
        s.history.at.push(s.history.bytes.len());
        s.history.bytes.extend_from_slice(&(item.payload.len() as u16).to_be_bytes());
        s.history.bytes.extend_from_slice(item.payload);
        n += 1;
    }
    if b.count() > 0 {
        s.send_packet(&mut b, a.drop_a, a.drop_b)?;
    }
    let end = Instant::now() + Duration::from_millis(a.linger_ms);
    let mut beat = Instant::now();
    while Instant::now() < end {
        s.serve();
        if beat.elapsed() >= Duration::from_millis(20) {
            s.send_both(b.control(false).as_bytes())?;
            beat = Instant::now();
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    s.send_both(b.control(true).as_bytes())?;
    let summary = serde_json::json!({
        "messages": n, "packets": s.packets, "dropped_a": s.dropped_a, "dropped_b": s.dropped_b,
        "dropped_both_messages": s.dropped_both_messages, "rerequests": s.rerequests, "retransmitted": s.retransmitted,
        "refused_rerequests": s.refused, "throttled_messages": s.throttled,
        "glimpse": s.glimpse.as_ref().map(glimpse::BookService::summary),
    });
    if a.json {
        println!("{summary}");
    } else {
        println!("served {n} messages in {} packets; dropped {} on A, {} on B ({} messages on both); answered {} re-requests with {} messages ({} refused: not --allow'ed; {} messages over a source's budget)", s.packets, s.dropped_a, s.dropped_b, s.dropped_both_messages, s.rerequests, s.retransmitted, s.refused, s.throttled);
    }
    Ok(())
}

impl Server {
    fn send_both(&self, bytes: &[u8]) -> Result<(), String> {
        for to in [self.a, self.b] {
            self.sock.send_to(bytes, to).map_err(|e| format!("sending to {to}: {e}"))?;
        }
        Ok(())
    }

    /// Sends the open packet on both lines, except where the loss generator drops it.
    fn send_packet(&mut self, b: &mut PacketBuilder, drop_a: u64, drop_b: u64) -> Result<(), String> {
        self.packets += 1;
        let k = self.packets;
        let (da, db) = (drop_a > 0 && k.is_multiple_of(drop_a), drop_b > 0 && k.is_multiple_of(drop_b));
        let count = u64::from(b.count());
        let (sock, la, lb) = (&self.sock, self.a, self.b);
        b.take(|p| -> Result<(), String> {
            if !da {
                sock.send_to(p, la).map_err(|e| format!("sending to {la}: {e}"))?;
            }
            if !db {
                sock.send_to(p, lb).map_err(|e| format!("sending to {lb}: {e}"))?;
            }
            Ok(())
        })?;
        self.dropped_a += u64::from(da);
        self.dropped_b += u64::from(db);
        if da && db {
            self.dropped_both_messages += count;
        }
        Ok(())
    }

    /// Answers waiting re-requests (never blocks). At most [`REQUESTS_PER_SERVE`] per call and
    /// [`MAX_ANSWER`] messages per request, only to `--allow`ed sources, each within its budget:
    /// a flood of re-requests (or forged ones, UDP has no sender check) cannot stall lines A and
    /// B, and the server reflects nothing to an address it was not told to serve.
    fn serve(&mut self) {
        if let Some(g) = &mut self.glimpse {
            g.serve(&self.policy);
        }
        let mut req = [0u8; 64];
        for _ in 0..REQUESTS_PER_SERVE {
            let Ok((n, from)) = self.rtx.recv_from(&mut req) else { break };
            let Ok((h, _)) = MoldHeader::read_from_prefix(&req[..n]) else { continue };
            if n != HEADER_LEN || h.session != self.session {
                continue;
            }
            if !self.answer {
                self.rerequests += 1;
                continue;
            }
            let want = u64::from(h.count.get()).min(MAX_ANSWER);
            let count = match self.policy.admit(from.ip(), want, Instant::now()) {
                policy::Admit::Refused => {
                    if self.refused == 0 {
                        // Once: a feed handler on another host is refused by the loopback-only
                        // default, and would otherwise only see its gaps never filled.
                        eprintln!(
                            "mold-server: refused a re-request from {}: not in --allow (default 127.0.0.0/8 only); add \
                             --allow {}/32 or its network to answer it (further refusals are only counted)",
                            from.ip(),
                            from.ip()
                        );
                    }
                    self.refused += 1;
                    continue;
                }
                policy::Admit::Messages(n) => n,
            };
            self.rerequests += 1;
            self.throttled += want - count;
            let first = h.sequence.get();
            let mut b = PacketBuilder::new(self.session, first, self.bytes);
            for seq in first..first.saturating_add(count) {
                let Some(m) = self.history.get(seq) else { break };
                if !b.fits(m) {
                    let _ = b.take(|p| self.rtx.send_to(p, from));
                }
                b.push(m);
                self.retransmitted += 1;
            }
            if b.count() > 0 {
                let _ = b.take(|p| self.rtx.send_to(p, from));
            }
        }
    }
}
