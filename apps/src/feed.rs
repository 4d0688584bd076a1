//! `tickbus feed`: a MoldUDP64 feed handler. Reads two multicast lines (A and B), arbitrates
//! them (`tickbus::feed::Arbiter`: first copy wins, a gap is a gap only when both lines miss
//! it), re-requests what both missed, normalises ITCH into tickbus market data
//! (`codecs::normalize`; `--raw` publishes the ITCH bytes as they are), and publishes it on a
//! ring, each message stamped with the TSC at which its packet was taken (each line's waiting
//! datagrams in one `recvmmsg`: `tickbus::feed::ingest`). What is not recovered
//! in time is published as an explicit `FeedGap`. `--file` reads an ITCH file or a capture
//! instead of the network (tests, back-testing).
use std::io::IsTerminal;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use tickbus::agent::Agent;
use tickbus::feed::ingest::DEFAULT_BATCH;
use tickbus::feed::{Arbiter, ArbiterOptions, DatagramBatch, FeedHandler, Line, Rerequest};
use tickbus::shm::{self, ShmOptions, ShmPublisher};
use tickbus::time::Tsc;
use tickbus::{Mode, RingConfig};
use tickbus_codecs::moldudp64::rerequest;
use tickbus_codecs::normalize::Normalizer;
use zerocopy::IntoBytes;

#[derive(Args, Debug)]
pub struct FeedArgs {
    /// Publish onto shm ring NAME (created if missing).
    #[arg(long)]
    pub ring: String,
    /// Line A: multicast GROUP:PORT.
    #[arg(long, default_value = "239.77.10.1:30001")]
    pub line_a: SocketAddrV4,
    /// Line B: multicast GROUP:PORT.
    #[arg(long, default_value = "239.77.10.2:30002")]
    pub line_b: SocketAddrV4,
    /// Interface the lines arrive on, by IPv4 address or name (127.0.0.1: loopback). The groups
    /// are joined on it; `--ingest xdp` binds its AF_XDP socket to it.
    #[arg(long, default_value = "127.0.0.1")]
    pub iface: String,
    /// How datagrams come in: `udp`, kernel sockets (one `recvmmsg` per line per poll), or
    /// `xdp`, AF_XDP on `--iface` (no syscall per packet; root; built with `--features xdp`).
    /// Re-requests and their answers stay on a kernel socket either way (off the hot path).
    #[arg(long, value_enum, default_value_t = IngestKind::Udp)]
    pub ingest: IngestKind,
    /// `--ingest xdp`: the interface's receive queue to bind (one socket per queue).
    #[arg(long, default_value_t = 0, conflicts_with = "xdp_all_queues")]
    pub xdp_queue: u32,
    /// `--ingest xdp`: bind a socket on every receive queue of the interface (each with its own
    /// UMEM), so the lines are taken whatever queue the NIC hashes them to.
    #[arg(long)]
    pub xdp_all_queues: bool,
    /// `--ingest xdp`: generic XDP (in the kernel's stack) even where the driver has native XDP.
    #[arg(long)]
    pub xdp_generic: bool,
    /// `--ingest xdp`: the VLAN the lines arrive on (0: untagged); other VLANs go to the kernel.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..4095))]
    pub xdp_vlan: u16,
    /// `--ingest xdp`: check each datagram's UDP checksum (the kernel's stack, which AF_XDP
    /// bypasses, would drop a bad one; off only because senders on this host leave it partial).
    #[arg(long)]
    pub xdp_udp_checksum: bool,
    /// The retransmission server re-requests go to.
    #[arg(long, default_value = "127.0.0.1:30003")]
    pub retransmit: SocketAddr,
    /// Read this ITCH file or capture instead of the network.
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Publish the ITCH messages as they are instead of normalised market data.
    #[arg(long)]
    pub raw: bool,
    /// Create the ring reliable (the feed waits for its consumers).
    #[arg(long)]
    pub reliable: bool,
    /// Stream id of the ring.
    #[arg(long, default_value_t = 1)]
    pub stream: u32,
    /// Ring slots (a burst the consumers take late must fit).
    #[arg(long, default_value_t = 1 << 16, value_parser = crate::args::slots)]
    pub slots: usize,
    /// How long a gap waits for the other line before it is re-requested (ms).
    #[arg(long, default_value_t = 2.0)]
    pub wait_ms: f64,
    /// How long a gap may stay open before it is given up and published as a gap (ms).
    #[arg(long, default_value_t = 500.0)]
    pub give_up_ms: f64,
    /// How long a jump ahead on one line (a packet leaving a hole before it) must stand,
    /// uncontradicted by that line's later packets, before it is believed without the
    /// retransmission server's word; and how long the session must stay quiet after its
    /// end-of-session before it counts as ended (ms). Longer than the server's heartbeat
    /// interval: a real line's next heartbeat contradicts a forged jump or end.
    #[arg(long, default_value_t = 2000.0)]
    pub confirm_ms: f64,
    /// Follow only this 10-character MoldUDP64 session (default: the first seen, then the next
    /// one after its end-of-session). Set it on a network others can send to: before the first
    /// real packet, the first session seen is followed, whoever sent it.
    #[arg(long)]
    pub session: Option<String>,
    /// Stop at the end of the session (the server's end-of-session packet), once no gap is open.
    #[arg(long)]
    pub exit_at_end: bool,
    /// Pin the feed loop to this core.
    #[arg(long)]
    pub core: Option<usize>,
    /// How the loop waits when it finds no work: `spin` (its own core) or `yield` (a core it
    /// shares with another busy app).
    #[arg(long, value_enum, default_value_t = crate::pipeline::Idle::Spin)]
    pub idle: crate::pipeline::Idle,
    /// The first ITCH message of each datagram carries the sender's TSC in its timestamp (the
    /// latency lab's wire sender, on this host: `tickbus::feed::wire_stamp`). Each message's
    /// ingress stamp is then that send TSC, so the hops downstream start at the wire, and the
    /// summary adds the feed's own two: wire send -> taken, taken -> published. Never for a
    /// real venue's datagrams (their timestamp is not this host's TSC). The first message's
    /// exchange timestamp in the published market data then holds those TSC bits too.
    #[arg(long)]
    pub wire_stamps: bool,
    /// Publish whole-book snapshots of the market data on this lossy stream (`shm:NAME`, or
    /// `ud-mcast://GROUP/STREAM` across hosts), made on a thread of their own from a copy of
    /// each message published: a trader that starts late or lost market data
    /// (`trader --snapshots URI`) loads one and goes on from its position.
    #[arg(long, value_name = "URI", conflicts_with = "raw")]
    pub snapshots: Option<String>,
    /// Seconds between snapshots.
    #[arg(long, default_value_t = 1.0, value_parser = crate::args::positive_secs, requires = "snapshots")]
    pub snapshot_every_secs: f64,
    /// Ring slots of a shm snapshot stream (16 orders a slot: the default holds a book of a
    /// million resting orders).
    #[arg(long, default_value_t = 1 << 16, value_parser = crate::args::slots, requires = "snapshots")]
    pub snapshot_slots: usize,
    /// The venue's book service (`mold-server --glimpse ADDR`; TCP). After messages are lost for
    /// good (a `FeedGap`), the feed takes the venue's book, catches it up with what it received
    /// since and puts it in its normaliser's place (the market data from there on is right
    /// again: without it, executions, cancels and replaces of orders added in the gap are
    /// published without price, size or side for the rest of the day), and publishes a
    /// snapshot at that position, from which a trader stopped by the gap recovers.
    #[arg(long, value_name = "ADDR", requires = "snapshots")]
    pub glimpse: Option<SocketAddr>,
    /// `--glimpse`: ITCH messages kept between a loss and the venue's book caught up (64 bytes
    /// each, allocated at start; at 1M msg/s the default holds 130 ms). A repair whose ring
    /// fills starts over from there.
    #[arg(long, default_value_t = 1 << 17, value_parser = crate::args::slots, requires = "glimpse")]
    pub repair_ring: usize,
    /// Print the summary (messages, duplicates, re-requests, recovered, gaps) as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Where the feed's datagrams come from.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum IngestKind {
    /// Kernel UDP sockets.
    Udp,
    /// AF_XDP (kernel bypass).
    Xdp,
}

pub fn run(a: FeedArgs) -> Result<(), String> {
    // Bad durations are refused before anything is opened.
    let wait_ns = ms_to_ns("--wait-ms", a.wait_ms)?;
    let give_up_ns = ms_to_ns("--give-up-ms", a.give_up_ms)?;
    let confirm_ns = ms_to_ns("--confirm-ms", a.confirm_ms)?;
    if a.confirm_ms < MIN_CONFIRM_MS {
        // 0 would believe a forged jump or end of session at once: the defence gone.
        return Err(format!(
            "--confirm-ms {}: give at least {MIN_CONFIRM_MS} milliseconds (longer than the lines' heartbeat interval, so \
             that a real line's next packet can contradict a forged jump or end of session before it is believed)",
            a.confirm_ms
        ));
    }
    let stop = crate::pipeline::stop_flag()?;
    let mode = if a.reliable { Mode::Reliable } else { Mode::Lossy };
    let payload = if a.raw { 64 } else { 128 };
    let cfg = RingConfig::for_payload(mode, a.stream, payload, a.slots);
    let p = shm::open_publisher(&a.ring, &cfg, &ShmOptions::default()).map_err(|e| e.to_string())?;
    let mut snapshots = None;
    let mut loop_side = None;
    if let Some(uri) = &a.snapshots {
        let mut o = tickbus::stream::OpenOptions::default();
        (o.wait, o.stop) = (Duration::from_secs(30), Some(stop.clone()));
        let every = Duration::from_secs_f64(a.snapshot_every_secs);
        let (s, side) = crate::feed_snapshots::start(uri, every, a.snapshot_slots, a.glimpse, a.repair_ring, &o)?;
        // Before the first message: the snapshots name the stream they are of.
        s.source.store(p.writer().created_unix_ns(), Ordering::Release);
        (snapshots, loop_side) = (Some(s), Some(side));
    }
    let session = match &a.session {
        Some(s) if s.len() == 10 => Some(<[u8; 10]>::try_from(s.as_bytes()).expect("10 bytes")),
        Some(s) => return Err(format!("--session {s:?}: a MoldUDP64 session is exactly 10 characters")),
        None => None,
    };
    let mut opts = ArbiterOptions::default();
    opts.wait_other_line_ns = wait_ns;
    opts.give_up_ns = give_up_ns;
    opts.confirm_ns = confirm_ns;
    opts.session = session;
    let mut handler = FeedHandler::new(Arbiter::new(opts), Normalizer::new(), p).raw(a.raw).stop_on(stop.clone());
    if let Some(side) = loop_side {
        handler = handler.snapshot_tap(side.tap);
        if let Some(r) = side.repair {
            handler = handler.repair(r);
        }
    }
    if let Some(file) = &a.file {
        let r = from_file(file, handler, a.json);
        if let Some(s) = snapshots {
            let (made, helper) = s.finish()?;
            eprintln!("feed: snapshots {made:?}; repair {helper:?}");
        }
        return r;
    }
    // Bound to the group's address: datagrams sent to this port at any other address (unicast
    // from anyone) are not delivered to the line.
    let (iface_name, iface) = tickbus::feed::interface(&a.iface).map_err(|e| format!("--iface {e}"))?;
    let join = |g: SocketAddrV4| -> Result<UdpSocket, String> {
        let s = UdpSocket::bind(g).map_err(|e| format!("binding {g}: {e}"))?;
        s.join_multicast_v4(g.ip(), &iface).map_err(|e| format!("joining {g} on {iface}: {e}"))?;
        s.set_nonblocking(true).map_err(|e| e.to_string())?;
        Ok(s)
    };
    let ingest = match a.ingest {
        IngestKind::Udp => {
            let lines = Ingest::Udp(join(a.line_a)?, join(a.line_b)?);
            eprintln!(
                "feed: UDP on {iface_name} ({iface}): line A {}, line B {}, each line's waiting datagrams in one recvmmsg",
                a.line_a, a.line_b
            );
            lines
        }
        IngestKind::Xdp => Ingest::xdp(&a, &iface_name)?,
    };
    let req = UdpSocket::bind((iface, 0)).map_err(|e| format!("binding the re-request socket: {e}"))?;
    // Connected: only the retransmission server's answers are received on it.
    req.connect(a.retransmit).map_err(|e| format!("connecting the re-request socket to {}: {e}", a.retransmit))?;
    req.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut agent = FeedAgent {
        ingest,
        req: Rerequester { sock: req, io: IoCounts::default() },
        // Each socket's waiting datagrams in one recvmmsg into buffers made here, once.
        batches: std::array::from_fn(|_| DatagramBatch::new(DEFAULT_BATCH)),
        handler,
        tsc: Tsc::new(),
        t0: Instant::now(),
        exit_at_end: a.exit_at_end,
        tty: std::io::stderr().is_terminal() && !a.json,
        shown: Instant::now(),
        stop: stop.clone(),
        error: None,
        wire: a.wire_stamps.then(WireHops::new),
    };
    if let Some(core) = a.core {
        tickbus::agent::pin_current_thread(core).map_err(|e| format!("pinning to core {core}: {e}"))?;
    }
    // Busy-polls (a packet after a quiet spell is taken at once), backing off only after a
    // long idle spell (`--idle spin`), or yields the core it shares when idle (`--idle yield`).
    tickbus::agent::run_until(&mut agent, a.idle.strategy(), &stop);
    if let Some(e) = agent.error {
        return Err(e);
    }
    let (s, c, io) = (agent.handler.stats(), agent.handler.counts(), &agent.req.io);
    let xdp = agent.ingest.report();
    let snapshots = match snapshots {
        Some(made) => {
            let tap_lost = agent.handler.tap().map_or(0, |t| t.lost());
            let (made, helper) = made.finish()?;
            serde_json::json!({
                "snapshots": made.snapshots, "chunks": made.chunks, "position": made.position,
                "applied": made.applied, "lost": made.lost, "book_errors": made.book_errors,
                "last_orders": made.last_orders, "last_publish_us": made.last_publish_us, "tap_lost": tap_lost,
                "repair": helper.map(|h| serde_json::json!({
                    "loop": agent.handler.repair_counts(), "fetched": h.fetched, "too_old": h.too_old,
                    "failed": h.failed, "last_error": h.last_error, "repairs": h.repairs,
                    "last_repair_us": h.last_repair_us, "own_losses": h.own_losses,
                })),
            })
        }
        None => serde_json::Value::Null,
    };
    let summary = serde_json::json!({
        "ingest": xdp,
        "delivered": s.delivered, "recovered": s.recovered,
        "duplicates": s.duplicates, "rerequests": s.rerequests, "lost": s.lost, "gaps": s.gaps,
        "packets_a": s.packets_a, "packets_b": s.packets_b, "published": c.published, "gaps_published": c.gaps_published, "unparsed": c.unparsed,
        "other_session": s.other_session, "implausible": s.implausible,
        "contradicted": s.contradicted, "believed_by_time": s.believed_by_time, "ends_contradicted": s.ends_contradicted, "malformed": c.malformed,
        "recv_errors": io.recv_errors, "rerequest_send_errors": io.send_errors, "last_socket_error": io.last_error,
        "wire_hops_ns": agent.wire.as_ref().map(WireHops::summary),
        "snapshots": snapshots,
        // The normaliser's book at the end (raw output keeps none): the venue's, unless a loss
        // was not repaired.
        "book_digest": (!a.raw).then(|| format!("{:016x}", agent.handler.book().digest())),
    });
    if a.json {
        println!("{summary}");
    } else {
        println!("{} delivered ({} recovered by re-request), {} lost in {} gaps (published), {} duplicates dropped; {} messages published, {} not parseable as ITCH", s.delivered, s.recovered, s.lost, s.gaps, s.duplicates, c.published, c.unparsed);
    }
    Ok(())
}

/// The feed handler as an [`Agent`]: each duty cycle takes what waits on the lines (one
/// `recvmmsg` per kernel socket, or a poll of the AF_XDP rings), hands every datagram to the
/// library's [`FeedHandler`] (arbitrate, normalise, publish), then runs the arbiter's timers.
/// At the end of the session (`--exit-at-end`) or on an error it sets the stop flag, which
/// ends its runner.
struct FeedAgent {
    ingest: Ingest,
    req: Rerequester,
    batches: [DatagramBatch; 3],
    handler: FeedHandler<ShmPublisher>,
    tsc: Tsc,
    t0: Instant,
    exit_at_end: bool,
    tty: bool,
    shown: Instant,
    stop: Arc<AtomicBool>,
    error: Option<String>,
    /// `--wire-stamps`: the feed's own hops from the sender's stamp.
    wire: Option<WireHops>,
}

/// The feed's two hops when datagrams carry their send TSC (`--wire-stamps`), per datagram:
/// wire send -> taken (the link and the ingest: AF_XDP ring or kernel socket) and taken -> its
/// messages published (MoldUDP64, arbitration, normalising, the ring). Allocated at start.
struct WireHops {
    wire: hdrhistogram::Histogram<u64>,
    feed: hdrhistogram::Histogram<u64>,
    scale: tickbus::time::TscScale,
    /// Datagrams with no stamp (heartbeats, the end of session): not timed.
    unstamped: u64,
}

impl WireHops {
    fn new() -> WireHops {
        let h = || hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds");
        let scale = tickbus::time::TscScale { ticks_per_ns: tickbus::time::ticks_per_ns() };
        WireHops { wire: h(), feed: h(), scale, unstamped: 0 }
    }

    /// The ingress stamp for a datagram taken at `taken`: its send TSC, else `taken`.
    #[inline]
    fn ingress(&mut self, datagram: &[u8], taken: u64) -> (u64, Option<u64>) {
        match tickbus::feed::wire_stamp::sent_tsc(datagram, taken) {
            Some(sent) => (sent, Some(sent)),
            None => {
                self.unstamped += 1;
                (taken, None)
            }
        }
    }

    /// Times a stamped datagram's wire hop, and its feed hop if it published anything (a
    /// datagram the arbiter held or dropped, or whose messages publish nothing, has none).
    #[inline]
    fn record(&mut self, sent: Option<u64>, taken: u64, published: Option<u64>) {
        if let Some(sent) = sent {
            self.wire.saturating_record(self.scale.delta_ns(sent, taken).max(1));
            if let Some(p) = published {
                self.feed.saturating_record(self.scale.delta_ns(taken, p).max(1));
            }
        }
    }

    fn summary(&self) -> serde_json::Value {
        use tickbus_apps::summary::HopStats;
        serde_json::json!({
            "hops": [HopStats::of("wire send -> feed ingress (taken)", &self.wire),
                     HopStats::of("feed ingress -> market data published (datagrams that published)", &self.feed)],
            "unstamped": self.unstamped,
        })
    }
}

/// Hands one datagram to the handler, stamped with its send TSC under `--wire-stamps` (timing
/// the feed's two hops), else with `taken`.
#[inline]
#[allow(clippy::too_many_arguments)]
fn take(
    handler: &mut FeedHandler<ShmPublisher>,
    wire: &mut Option<WireHops>,
    tsc: &Tsc,
    line: Line,
    d: &[u8],
    taken: u64,
    now: u64,
    req: &mut Rerequester,
) -> Result<(), tickbus::feed::PublishFailed<tickbus::ring::ClaimError>> {
    let Some(w) = wire else {
        return handler.on_datagram(line, d, taken, now, req);
    };
    let (ingress, sent) = w.ingress(d, taken);
    let before = handler.counts().published;
    let r = handler.on_datagram(line, d, ingress, now, req);
    let published = (handler.counts().published > before).then(|| tsc.now());
    w.record(sent, taken, published);
    r
}

impl FeedAgent {
    fn fail(&mut self, e: impl std::fmt::Display) {
        self.error.get_or_insert(e.to_string());
        self.stop.store(true, Ordering::Release);
    }
}

impl Agent for FeedAgent {
    fn name(&self) -> &str {
        "feed"
    }

    fn uses_clock(&self) -> bool {
        false // it stamps each datagram's ingress with its own read
    }

    fn do_work(&mut self, _now: u64) -> usize {
        let mut work = 0;
        let mut failed = None;
        let FeedAgent { ingest, req, batches, handler, tsc, t0, wire, .. } = self;
        let lines: [Option<Line>; 3] = match ingest {
            Ingest::Udp(..) => [Some(Line::A), Some(Line::B), Some(Line::Retransmit)],
            #[cfg(feature = "xdp")]
            Ingest::Xdp(x, line_a) => {
                // Both lines off the AF_XDP sockets (one, or one per queue), each datagram
                // stamped as it is taken.
                let now = t0.elapsed().as_nanos() as u64;
                work += x.poll(64, |u| {
                    let taken = tsc.now();
                    let line = if u.dst == *line_a { Line::A } else { Line::B };
                    if let Err(e) = take(handler, wire, tsc, line, u.payload, taken, now, req) {
                        failed.get_or_insert(e);
                    }
                });
                // The re-request socket is a kernel socket, asked only while a gap is open (its
                // answers matter only then): the steady state makes no syscall.
                [None, None, handler.arbiter().has_open_gap().then_some(Line::Retransmit)]
            }
        };
        for (line, batch) in lines.into_iter().zip(batches.iter_mut()).filter_map(|(l, b)| Some((l?, b))) {
            let got = match (line, &*ingest) {
                (Line::A, Ingest::Udp(sock, _)) | (Line::B, Ingest::Udp(_, sock)) => batch.recv(sock),
                _ => batch.recv(&req.sock),
            };
            match got {
                Ok(0) => continue,
                Ok(n) => work += n,
                Err(e) => {
                    req.io.recv_errors += 1;
                    req.io.last_error = Some(e.to_string());
                    continue;
                }
            }
            // The batch's datagrams were all waiting when the call returned: one stamp.
            let taken = tsc.now();
            let now = t0.elapsed().as_nanos() as u64;
            for d in batch.iter() {
                if let Err(e) = take(handler, wire, tsc, line, d, taken, now, req) {
                    failed.get_or_insert(e);
                }
            }
        }
        let now = t0.elapsed().as_nanos() as u64;
        if let Err(e) = handler.poll(now, tsc.now(), req) {
            failed.get_or_insert(e);
        }
        if let Some(e) = failed {
            self.fail(e);
            return work;
        }
        // Only the followed session's end counts, once it stood `--confirm-ms` uncontradicted
        // (a forged or stray end of session is not believed).
        let arb = self.handler.arbiter();
        if self.exit_at_end && arb.session_ended() && !arb.has_open_gap() {
            self.stop.store(true, Ordering::Release);
        }
        if self.tty && self.shown.elapsed() >= Duration::from_secs(1) {
            let s = self.handler.stats();
            eprint!(
                "\r{} delivered, {} recovered, {} lost in {} gaps, {} duplicates    ",
                s.delivered, s.recovered, s.lost, s.gaps, s.duplicates
            );
            self.shown = Instant::now();
        }
        work
    }
}

/// The re-request socket, connected to the retransmission server, and what went wrong on it.
struct Rerequester {
    sock: UdpSocket,
    io: IoCounts,
}

impl Rerequest for Rerequester {
    fn rerequest(&mut self, session: &[u8; 10], sequence: u64, count: u16) {
        if let Err(e) = self.sock.send(rerequest(session, sequence, count).as_bytes()) {
            self.io.send_errors += 1; // the gap is given up in time if no answer comes
            self.io.last_error = Some(format!("re-request: {e}"));
        }
    }
}

/// The lines' sockets: two kernel UDP sockets, or one AF_XDP socket for both.
enum Ingest {
    Udp(UdpSocket, UdpSocket),
    #[cfg(feature = "xdp")]
    /// The socket and line A's destination (anything else it steers is line B's).
    Xdp(Box<tickbus::xdp::XdpIngest>, SocketAddrV4),
}

impl Ingest {
    #[cfg(feature = "xdp")]
    fn xdp(a: &FeedArgs, iface: &str) -> Result<Ingest, String> {
        if a.line_a == a.line_b {
            return Err(format!("--line-a and --line-b are both {}: give each line its own group:port", a.line_a));
        }
        let mut o = tickbus::xdp::XdpOptions::new(iface, vec![a.line_a, a.line_b]);
        (o.queue, o.generic, o.vlan, o.udp_checksum) = (a.xdp_queue, a.xdp_generic, a.xdp_vlan, a.xdp_udp_checksum);
        o.all_queues = a.xdp_all_queues;
        let x = tickbus::xdp::XdpIngest::open(&o).map_err(|e| e.to_string())?;
        let i = x.info();
        let queues = i.rx_queues;
        if queues > 1 && !a.xdp_all_queues {
            // The kernel has no socket on the lines' ports: what RSS puts on another queue is lost.
            eprintln!(
                "feed: WARNING: {iface} has {queues} receive queues and only queue {} is bound: datagrams the NIC hashes to another queue are lost. Bind them all (--xdp-all-queues), steer the lines to it (`ethtool -N {iface} flow-type udp4 dst-port PORT action {}`) or use one queue (`ethtool -L {iface} combined 1`); `tickbus doctor --iface {iface}` checks",
                a.xdp_queue, a.xdp_queue
            );
        }
        eprintln!(
            "feed: AF_XDP on {iface} {}: {:?} XDP, {}, UMEM in {}",
            if a.xdp_all_queues {
                format!("queues 0-{} (every one, a socket each)", i.bound_queues - 1)
            } else {
                format!("queue {}", a.xdp_queue)
            },
            i.mode,
            if i.zero_copy { "zero-copy" } else { "copy mode (the driver has no zero-copy)" },
            if i.hugepages { "hugepages" } else { "4 KiB pages (no hugepages reserved)" }
        );
        Ok(Ingest::Xdp(Box::new(x), a.line_a))
    }

    #[cfg(not(feature = "xdp"))]
    fn xdp(_: &FeedArgs, _: &str) -> Result<Ingest, String> {
        Err("--ingest xdp: this tickbus was built without AF_XDP: build it with `cargo build --release -p tickbus-apps --features xdp` (needs clang)".into())
    }

    /// The AF_XDP socket's counts for the summary (null for UDP).
    fn report(&self) -> serde_json::Value {
        match self {
            Ingest::Udp(..) => serde_json::Value::Null,
            #[cfg(feature = "xdp")]
            Ingest::Xdp(x, _) => serde_json::json!({
                "info": x.info(), "stats": x.stats(), "kernel_drops": x.kernel_drops().ok(),
                "frames_per_queue": x.frames_per_queue().collect::<Vec<_>>(),
            }),
        }
    }
}

/// A duration option in ms as ns: finite, not negative, at most a day (NaN, inf or 1e300 would
/// turn into a wait that never ends or none at all).
/// The shortest `--confirm-ms` taken.
const MIN_CONFIRM_MS: f64 = 100.0;

fn ms_to_ns(name: &str, ms: f64) -> Result<u64, String> {
    if !(ms.is_finite() && (0.0..=86_400_000.0).contains(&ms)) {
        return Err(format!("{name} {ms}: give a number of milliseconds from 0 to 86400000 (a day)"));
    }
    Ok((ms * 1e6) as u64)
}

/// Socket trouble, counted and reported rather than ignored.
#[derive(Default)]
struct IoCounts {
    recv_errors: u64,
    send_errors: u64,
    last_error: Option<String>,
}

/// Reads an ITCH file (every message in order) or a capture (its MoldUDP64 messages of one
/// session put in order by the replay source, with `tickbus::feed::CaptureOrder`: a hole is
/// published as a gap; a message at or below one already published is counted as a duplicate
/// and not published again (the other line's copy); a jump ahead that no later datagram
/// continues is discarded and counted, so one stray datagram cannot end the stream; datagrams
/// of another session than the first are skipped and counted).
fn from_file(file: &std::path::Path, mut h: FeedHandler<ShmPublisher>, json: bool) -> Result<(), String> {
    let tsc = Tsc::new();
    let mut source = tickbus::replay::open(file, None, None).map_err(|e| e.to_string())?;
    let mut n = 0u64;
    while let Some(item) = source.next().map_err(|e| e.to_string())? {
        h.poll_repair();
        let ingress = tsc.now();
        match item.gap {
            // A capture's gap is of the session it follows: a venue book of another is refused.
            Some(count) => {
                let (from, to) = (item.sequence, item.sequence + count);
                h.on_gap(from, to, source.session().as_ref(), ingress).map_err(|e| e.to_string())?
            }
            None => {
                h.on_message(item.payload, item.sequence, ingress).map_err(|e| e.to_string())?;
                n += 1;
            }
        }
    }
    let c = source.capture_counts().unwrap_or_default();
    let (duplicates, discarded, other) = (c.order.duplicates, c.order.discarded, c.other_session);
    let k = h.counts();
    let summary = serde_json::json!({"messages": n, "published": k.published, "gaps_published": k.gaps_published, "unparsed": k.unparsed, "duplicates": duplicates, "discarded_jumps": discarded, "other_session_datagrams": other});
    if json {
        println!("{summary}");
    } else {
        println!("{n} messages read, {} published, {} gaps published, {} not parseable as ITCH, {duplicates} duplicates, {discarded} messages of jumps no later datagram continued not published, {other} datagrams of other sessions skipped", k.published, k.gaps_published, k.unparsed);
    }
    Ok(())
}
