//! From the wire: MoldUDP64 datagrams sent over a veth pair from a network namespace the lab
//! makes (and removes), taken on the other end four ways, open loop at each rate:
//!
//! - floor: a bare AF_XDP RX loop (the program steering the port, a poll, the stamp read);
//! - the kernel's best (a peer: the floor of the UDP path), a bare `recv` loop on a UDP socket
//!   with `SO_BUSY_POLL`;
//! - tickbus feed ingest (xdp): `XdpIngest`, then what `tickbus feed` does with a datagram
//!   (MoldUDP64 parsed, arbitrated, ITCH normalised, published on a ring);
//! - tickbus feed ingest (udp): the same behind `DatagramBatch` (`recvmmsg`).
//!
//! Each datagram carries the sender's TSC in its ITCH message's timestamp field (the low 48
//! bits, taken just before `send`); latency is from there to the datagram taken (floors) or to
//! its market data published (tickbus). Nothing leaves the machine.
use std::error::Error;
use std::net::{SocketAddrV4, UdpSocket};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;
use tickbus::feed::{Arbiter, ArbiterOptions, DatagramBatch, FeedHandler, Line, NoRerequest};
use tickbus::ring::{HeapMemory, RingConfig, RingWriter};
use tickbus::time::{Tsc, TscScale};
use tickbus::xdp::{XdpIngest, XdpOptions};
use tickbus::{Mode, Publisher};
use tickbus_codecs::moldudp64::PacketBuilder;
use tickbus_codecs::normalize::Normalizer;
use tickbus_codecs::synth::{DayConfig, DayGenerator};
use tickbus_testkit::netns::VethPair;

use super::harness::{histogram, pin, spin_until};
use crate::model::{Backlog, Kind, Row, Section};

const PORT: u16 = 31700;
/// The MoldUDP64 session the lab's sender uses.
pub(super) const SESSION: [u8; 10] = *b"TICKBUSLAB";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Way {
    XdpFloor,
    UdpFloor,
    XdpFeed,
    UdpFeed,
}

impl Way {
    const ALL: [Way; 4] = [Way::XdpFloor, Way::UdpFloor, Way::XdpFeed, Way::UdpFeed];

    fn name(self) -> &'static str {
        match self {
            Way::XdpFloor => "floor: bare AF_XDP RX loop",
            Way::UdpFloor => "kernel: bare recv, SO_BUSY_POLL",
            Way::XdpFeed => "tickbus feed ingest (xdp)",
            Way::UdpFeed => "tickbus feed ingest (udp)",
        }
    }

    fn note(self) -> &'static str {
        match self {
            Way::XdpFloor => "wire send -> taken off the AF_XDP RX ring (the program steering the port, copy mode on veth)",
            Way::UdpFloor => "wire send -> recv returns (the kernel's UDP stack, a busy-polling socket): the kernel's best",
            Way::XdpFeed => "wire send -> market data published: XdpIngest, MoldUDP64 parsed, arbitrated, normalised, published on a ring",
            Way::UdpFeed => "wire send -> market data published: recvmmsg (DatagramBatch), then the same as xdp",
        }
    }

    fn kind(self) -> Kind {
        match self {
            Way::XdpFloor => Kind::Floor,
            // The UDP path's floor, and what a feed without kernel bypass can do at best: the
            // peer tickbus's xdp ingest is held against (a floor column of its own would flag
            // it as a broken floor whenever AF_XDP beats it, which is the point).
            Way::UdpFloor => Kind::Peer,
            _ => Kind::Tickbus,
        }
    }
}

/// One section per rate: the four ways, `rounds` interleaved rounds of `seconds` each (order
/// alternating), merged by name.
pub fn run(
    rates: &[u64],
    seconds: f64,
    rounds: usize,
    cores: (usize, usize),
    ticks_per_ns: f64,
) -> Result<Vec<Section>, Box<dyn Error>> {
    let v = VethPair::new("w").map_err(|e| format!("making the lab's veth pair (root needed): {e}"))?;
    let mut out = Vec::new();
    for &rate in rates {
        let n = ((rate as f64 * seconds) as u64).max(1000);
        let mut rows: Vec<Row> = Vec::new();
        for round in 0..rounds.max(1) {
            let mut order = Way::ALL.to_vec();
            if round % 2 == 1 {
                order.reverse();
            }
            for way in order {
                let t0 = SystemTime::now();
                let (h, backlog, lost) = measure(way, &v, rate, n, cores, ticks_per_ns)?;
                let mut r = Row::new(way.name().into(), way.kind(), way.note().into(), h).taken_since(t0);
                r.late_sends = Some(backlog.late_sends);
                // Latency runs from each datagram's real send, so a sender late on its schedule
                // does not inflate it; a receiver that fell behind does (its ring or socket
                // buffer overflowed: what it took had queued). Per round, apart: a sender behind
                // leaves the round out of a verdict (the row says BACKLOGGED); a receiver that
                // lost over 0.1% is held against the row under test, and a yardstick's round
                // is noisy (the row says LOST; see `verdict::steady_pairs`).
                let receiver_behind = lost * 1000 > n;
                let sender_behind = backlog.sustained_msgs_per_s < 0.95 * backlog.asked_msgs_per_s
                    || backlog.late_sends * 100 > backlog.sends;
                r.backlog = sender_behind.then_some(backlog);
                (r.round_backlogged, r.round_lost) = (vec![sender_behind], vec![receiver_behind]);
                if lost > 0 {
                    r.note = format!(
                        "{}; {lost} of {n} datagrams not taken{}",
                        r.note,
                        if receiver_behind { " (the receiver fell behind: its queue overflowed)" } else { "" }
                    );
                }
                match rows.iter_mut().find(|x| x.name == r.name) {
                    Some(x) => {
                        let keep = x.backlog.or(r.backlog);
                        let note = if r.note.len() > x.note.len() { r.note.clone() } else { x.note.clone() };
                        x.merge(r);
                        (x.backlog, x.note) = (keep, note);
                    }
                    None => rows.push(r),
                }
            }
        }
        // Floors first, as every section lists them.
        rows.sort_by_key(|r| r.kind != Kind::Floor);
        let mut sec = Section { mode: "wire".into(), size: 64, rate: Some(rate), rows };
        sec.ratios();
        out.push(sec);
    }
    Ok(out)
}

/// The section's verdicts in a sentence: xdp ingest against the bare AF_XDP floor and against
/// the udp ingest (target <= 0.5x), the udp ingest against the kernel's bare recv.
pub fn verdict(sec: &Section) -> String {
    // Per round, as the targets judge: rounds whose sender fell behind left out, a yardstick
    // that lost makes its round noisy, and the row's own losses are named.
    let row = |w: Way| sec.rows.iter().find(|r| r.name == w.name());
    let ratio = |a: Way, b: Way| match row(a).zip(row(b)).and_then(|(x, y)| crate::model::verdict::steady_pairs(x, y)) {
        Some(p) => {
            let lost = match p.ours_lost {
                0 => String::new(),
                n => format!("; it lost datagrams in {n} of those rounds"),
            };
            match p.rounds.judge(p.kept, |_| true) {
                (Some(r), how, _) => format!("{r} ({how}{lost})"),
                (None, why, _) => format!("- (no verdict: {why})"),
            }
        }
        None => "- (no paired rounds)".into(),
    };
    format!(
        "wire at {}/s: xdp ingest p50 {} the bare AF_XDP floor (it adds MoldUDP64, arbitration, normalising and a publish); {} the udp ingest (target <= 0.5x); udp ingest {} the kernel's bare recv",
        crate::model::rate_name(sec.rate.unwrap_or(0)),
        ratio(Way::XdpFeed, Way::XdpFloor),
        ratio(Way::XdpFeed, Way::UdpFeed),
        ratio(Way::UdpFeed, Way::UdpFloor)
    )
}

/// The rates (datagrams/s) the zero-loss search steps through, each for a fifth of a second.
const RAMP: [u64; 5] = [100_000, 200_000, 400_000, 800_000, 1_600_000];

/// Datagrams per second each way takes with zero loss: the ramp's rates in turn, until a way
/// loses a datagram or the sender cannot keep the rate (its own ceiling, one `send` per
/// datagram). One sentence per way, the floor's first.
pub fn zero_loss(cores: (usize, usize), ticks_per_ns: f64) -> Result<Vec<String>, Box<dyn Error>> {
    let v = VethPair::new("z").map_err(|e| format!("making the lab's veth pair (root needed): {e}"))?;
    let mut out = Vec::new();
    for way in [Way::XdpFloor, Way::XdpFeed, Way::UdpFloor, Way::UdpFeed] {
        let mut best: Option<u64> = None;
        let mut stop = String::from("no step of the ramp lost any");
        for rate in RAMP {
            let n = rate / 5;
            let (_, backlog, lost) = measure(way, &v, rate, n, cores, ticks_per_ns)?;
            if lost > 0 {
                stop = format!("at {} it lost {lost} of {n}", crate::model::rate_name(rate));
                break;
            }
            if backlog.sustained_msgs_per_s < 0.95 * rate as f64 {
                stop = format!(
                    "at {} the sender could not keep the rate ({:.0}/s, one send per datagram; on a veth each send also runs the receiving side's kernel path, so this ceiling depends on the way): the way's own limit is above it",
                    crate::model::rate_name(rate),
                    backlog.sustained_msgs_per_s
                );
                best = Some(best.unwrap_or(0).max(backlog.sustained_msgs_per_s as u64));
                break;
            }
            best = Some(rate);
        }
        let took = match best {
            Some(b) => format!("every datagram taken up to {} datagrams/s", crate::model::rate_name(b)),
            None => "lost datagrams at the ramp's first rate".into(),
        };
        out.push(format!("wire, zero loss: {}: {took} ({stop})", way.name()));
    }
    Ok(out)
}

/// The receiving side of one way.
enum Rx {
    Xdp(Box<XdpIngest>),
    Udp(UdpSocket, DatagramBatch),
}

/// What `tickbus feed` does with a datagram (the library's [`FeedHandler`], the same code the
/// app runs), publishing on a ring of its own.
struct Feed {
    h: FeedHandler<Publisher<std::sync::Arc<HeapMemory>>>,
    t0: Instant,
}

impl Feed {
    fn new() -> Result<Feed, Box<dyn Error>> {
        let cfg = RingConfig::for_payload(Mode::Lossy, 1, 128, 1 << 14);
        let p = Publisher::new(RingWriter::create(HeapMemory::new(cfg.ring_bytes()), &cfg, 1, 0)?);
        let h = FeedHandler::new(Arbiter::new(ArbiterOptions::default()), Normalizer::with_capacity(1 << 16, 64), p);
        Ok(Feed { h, t0: Instant::now() })
    }

    #[inline]
    fn take(&mut self, datagram: &[u8], ingress: u64) {
        let now = self.t0.elapsed().as_nanos() as u64;
        // A lossy ring never refuses a message that fits.
        let _ = self.h.on_datagram(Line::A, datagram, ingress, now, &mut NoRerequest);
    }
}

fn measure(
    way: Way,
    v: &VethPair,
    rate: u64,
    n: u64,
    cores: (usize, usize),
    ticks_per_ns: f64,
) -> Result<(Histogram<u64>, Backlog, u64), Box<dyn Error>> {
    let dst = SocketAddrV4::new(v.outer_ip, PORT);
    pin(cores.1)?;
    let mut rx = match way {
        Way::XdpFloor | Way::XdpFeed => Rx::Xdp(Box::new(XdpIngest::open(&XdpOptions::new(&v.outer, vec![dst]))?)),
        Way::UdpFloor | Way::UdpFeed => {
            let s = UdpSocket::bind(dst)?;
            s.set_nonblocking(true)?;
            busy_poll(&s, 50)?;
            Rx::Udp(s, DatagramBatch::new(32))
        }
    };
    let mut feed = Feed::new()?;
    let packets = packets(n);
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let (ns, scale) = (v.ns.clone(), TscScale { ticks_per_ns });
    let sender = std::thread::spawn(move || -> Result<Backlog, String> {
        VethPair::enter_ns(&ns)?;
        pin(cores.0).map_err(|e| e.to_string())?;
        let s = UdpSocket::bind("0.0.0.0:0").map_err(|e| e.to_string())?;
        s.connect(dst).map_err(|e| e.to_string())?;
        ready_rx.recv().map_err(|e| e.to_string())?;
        send_open_loop(&s, packets, rate, scale, false)
    });
    let tsc = Tsc::new();
    let mut h = histogram();
    let mut got = 0u64;
    let _ = ready_tx.send(());
    let patience = Duration::from_secs_f64(n as f64 / rate as f64) + Duration::from_secs(5);
    let deadline = Instant::now() + patience;
    let mut quiet_since: Option<Instant> = None;
    let record = |d: &[u8], at: u64, h: &mut Histogram<u64>| {
        if let Some(sent) = tickbus::feed::wire_stamp::sent_tsc(d, at) {
            h.saturating_record(scale.delta_ns(sent, at).max(1));
        }
    };
    while got < n && Instant::now() < deadline {
        let took = match (&mut rx, way) {
            (Rx::Xdp(x), Way::XdpFloor) => x.poll(64, |u| {
                let at = tsc.now();
                record(u.payload, at, &mut h);
            }),
            (Rx::Xdp(x), _) => x.poll(64, |u| {
                feed.take(u.payload, tsc.now());
                let at = tsc.now();
                record(u.payload, at, &mut h);
            }),
            (Rx::Udp(s, _), Way::UdpFloor) => {
                let mut buf = [0u8; 2048];
                match s.recv(&mut buf) {
                    Ok(len) => {
                        let at = tsc.now();
                        record(&buf[..len], at, &mut h);
                        1
                    }
                    Err(_) => 0,
                }
            }
            (Rx::Udp(s, b), _) => {
                let k = b.recv(s).unwrap_or(0);
                for d in b.iter() {
                    feed.take(d, tsc.now());
                    let at = tsc.now();
                    record(d, at, &mut h);
                }
                k
            }
        };
        got += took as u64;
        if took > 0 {
            quiet_since = None;
        } else if sender.is_finished()
            && quiet_since.get_or_insert_with(Instant::now).elapsed() > Duration::from_millis(200)
        {
            break;
        }
    }
    let backlog = sender.join().map_err(|_| "the wire sender panicked")??;
    drop(rx); // the program off before the next way binds the port
    Ok((h, backlog, n.saturating_sub(got)))
}

/// `n` one-message MoldUDP64 packets of a generated day (sequence 1 on), each to be stamped.
pub(super) fn packets(n: u64) -> Vec<Vec<u8>> {
    let mut g = DayGenerator::new(DayConfig::new(17, 8, n.max(1000)));
    let mut out = Vec::with_capacity(n as usize);
    let mut b = PacketBuilder::new(SESSION, 1, 1400);
    while (out.len() as u64) < n {
        let Some(m) = g.next_message() else { break };
        b.push(m);
        out.push(b.take(|bytes| bytes.to_vec()));
    }
    out
}

/// Sends each packet at its intended time (rate apart), its TSC stamped just before `send`;
/// says how far behind the schedule the sends fell. `share_core`: the sender's core also runs
/// another busy app (the gateway, on two cores), so a wait longer than a few µs yields the
/// core instead of spinning through it.
pub(super) fn send_open_loop(
    s: &UdpSocket,
    mut packets: Vec<Vec<u8>>,
    rate: u64,
    scale: TscScale,
    share_core: bool,
) -> Result<Backlog, String> {
    let tsc = Tsc::new();
    let interval = scale.ticks_per_ns * 1e9 / rate as f64;
    let start = tsc.now() + (scale.ticks_per_ns * 1e7) as u64; // 10 ms to settle
    let (mut max_behind, mut late) = (0u64, 0u64);
    let late_ticks = (crate::model::BACKLOG_LATE_NS as f64 * scale.ticks_per_ns) as u64;
    let yield_margin = (3_000.0 * scale.ticks_per_ns) as u64;
    let n = packets.len() as u64;
    let mut last = start;
    for (k, p) in packets.iter_mut().enumerate() {
        let due = start + (k as f64 * interval) as u64;
        while share_core && tsc.now() + yield_margin < due {
            std::thread::yield_now();
        }
        let now = spin_until(&tsc, due);
        let behind = now - due;
        max_behind = max_behind.max(behind);
        late += u64::from(behind > late_ticks);
        tickbus::feed::wire_stamp::stamp(p, now);
        s.send(p).map_err(|e| format!("sending datagram {k}: {e}"))?;
        last = tsc.now();
    }
    Ok(Backlog {
        max_behind_ns: scale.delta_ns(0, max_behind),
        late_sends: late,
        sends: n,
        asked_msgs_per_s: rate as f64,
        sustained_msgs_per_s: n as f64 * 1e9 / scale.delta_ns(start, last).max(1) as f64,
    })
}

/// `SO_BUSY_POLL`: the socket's receive busy-polls the device for up to `us` (the kernel's own
/// low-latency receive, which the floor deserves).
fn busy_poll(s: &UdpSocket, us: i32) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid socket, an int option of its exact size.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BUSY_POLL,
            (&us as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
