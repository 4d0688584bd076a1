//! Taking in subscribers off the publishing thread.
//!
//! Owns: the control listener, one thread per handshake in progress (at most
//! eight, the control channel's limit; more connections are told "busy" and closed), the consumer lines handed
//! out, and the control connections of connected subscribers. Never: touches the mirror ring or
//! posts a WRITE (the publishing thread does), or lets one peer's handshake hold up another's.
//!
//! The publishing thread and this one talk through two `rtrb` queues (SPSC, no syscall, no
//! allocation): subscribers whose handshake finished go one way ([`Event`]); where each one's
//! stream starts, and which ones were dropped, come back ([`Back`]). The publishing thread never
//! touches a socket: this thread sends each subscriber its `START` line and closes the control
//! connection of a dropped one (which tells it the publisher let it go).
use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::error::RdmaError;
use crate::control::{self as hs, Control, Handshakes};
use crate::ring::layout::consumer_position_word;
use crate::ring::{Mode, RingConfig};
use crate::sys::verbs::{ffi, ConnectedRc, Context, Endpoint, MemoryRegion, PreparedRc, RcOptions};
use crate::wire::control::{self as wire, StreamConfig, WriteMode};
use crate::wire::transcript::Role;

/// Capacity of the queues between the acceptor and the publishing thread.
pub(crate) const QUEUE: usize = 64;

/// A subscriber whose handshake finished: its QP is connected (RTS on both sides).
pub(crate) struct Joined {
    pub id: u64,
    pub peer: String,
    pub qp: ConnectedRc,
    /// The subscriber's ring: address, rkey, length (checked to hold the stream's ring).
    pub ring: Endpoint,
    pub consumer: usize,
    /// Reliable mode: the registration that lets this subscriber WRITE its own credit word and
    /// nothing else. Dropped (deregistered) with the connection.
    pub credit: Option<MemoryRegion>,
    /// The next position the subscriber says it needs (a reconnect), if any.
    pub resume: Option<u64>,
}

/// Acceptor to publishing thread.
pub(crate) enum Event {
    Joined(Box<Joined>),
    Refused {
        peer: String,
        error: RdmaError,
    },
    /// A connected subscriber closed its control connection: it left (or its process died).
    Left {
        id: u64,
    },
}

/// How often the acceptor looks for subscribers that closed their control connection.
const LEFT_CHECK: Duration = Duration::from_millis(20);

/// Publishing thread to acceptor.
pub(crate) enum Back {
    Started { id: u64, start: u64 },
    Dropped { id: u64 },
}

/// What every handshake needs to know; shared with the handshake threads.
pub(crate) struct Shared {
    pub ctx: Arc<Context>,
    pub mirror: Arc<MemoryRegion>,
    pub cfg: RingConfig,
    pub token: Vec<u8>,
    pub write_mode: WriteMode,
    pub rc: RcOptions,
    pub timeout: Duration,
    /// Consumer lines in use (bit i: line i).
    pub lines: AtomicU32,
}

/// The acceptor thread; stopping it (drop) closes every subscriber's control connection.
pub(crate) struct Acceptor {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Acceptor {
    /// Starts accepting on `listener`; returns the queue ends the publishing thread keeps.
    pub fn start(
        listener: TcpListener,
        shared: Arc<Shared>,
    ) -> Result<(Acceptor, rtrb::Consumer<Event>, rtrb::Producer<Back>), RdmaError> {
        let (events_tx, events_rx) = rtrb::RingBuffer::new(QUEUE);
        let (back_tx, back_rx) = rtrb::RingBuffer::new(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("tickbus-rdma-accept".into())
            .spawn(move || run(listener, shared, events_tx, back_rx, &flag))
            .map_err(|e| RdmaError::io("starting the acceptor thread", e))?;
        Ok((Acceptor { stop, thread: Some(thread) }, events_rx, back_tx))
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

type Outcome = Result<(Box<Joined>, Control), (String, RdmaError)>;

/// A connected subscriber's control connection, its consumer line, and whether it was seen
/// closed (reported once).
struct Held {
    ctl: Control,
    line: usize,
    left: bool,
}

fn run(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut events: rtrb::Producer<Event>,
    mut back: rtrb::Consumer<Back>,
    stop: &AtomicBool,
) {
    let Ok(mut hellos) = Handshakes::<Outcome>::new(listener) else { return };
    let s = shared.clone();
    let run: Arc<dyn Fn(TcpStream, u64) -> Outcome + Send + Sync> = Arc::new(move |tcp, id| handshake(tcp, &s, id));
    let mut controls: HashMap<u64, Held> = HashMap::new();
    let mut outbox: Vec<Event> = Vec::new();
    let mut checked = std::time::Instant::now();
    while !stop.load(Ordering::Acquire) {
        if checked.elapsed() >= LEFT_CHECK {
            checked = std::time::Instant::now();
            for (id, held) in controls.iter_mut() {
                if !held.left && held.ctl.peer_closed() {
                    // The line stays taken until the publishing thread drops the connection.
                    held.left = true;
                    outbox.push(Event::Left { id: *id });
                }
            }
        }
        let (mut busy, finished) = hellos.poll(&run);
        match finished {
            Some((id, Ok((joined, control)))) => {
                controls.insert(id, Held { ctl: control, line: joined.consumer, left: false });
                outbox.push(Event::Joined(joined));
            }
            Some((_, Err((peer, error)))) => outbox.push(Event::Refused { peer, error }),
            None => {}
        }
        while !outbox.is_empty() && !events.is_full() {
            let _ = events.push(outbox.remove(0));
        }
        while let Ok(b) = back.pop() {
            busy = true;
            match b {
                Back::Started { id, start } => {
                    if let Some(Held { ctl, .. }) = controls.get_mut(&id) {
                        ctl.set_deadline(shared.timeout);
                        // If it fails the subscriber never hears where to start, and times out.
                        let _ = ctl.send(&format!("START {start}"));
                        ctl.finish();
                    }
                }
                Back::Dropped { id } => {
                    if let Some(held) = controls.remove(&id) {
                        if shared.cfg.mode == Mode::Reliable {
                            shared.lines.fetch_and(!(1u32 << held.line), Ordering::AcqRel);
                        }
                    }
                }
            }
        }
        if !busy {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    // Dropping `controls` closes every connection: subscribers see their publisher leave.
}

/// One subscriber's handshake, publisher side (its own thread; may take up to the timeout).
fn handshake(tcp: TcpStream, s: &Shared, id: u64) -> Result<(Box<Joined>, Control), (String, RdmaError)> {
    let peer = tcp.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
    let fail = |e: RdmaError| (peer.clone(), e);
    let _ = tcp.set_nonblocking(false);
    let mut ctl = Control::new(tcp, s.timeout, Role::Publisher).map_err(|e| fail(e.into()))?;
    hs::authenticate_subscriber(&mut ctl, &s.token, s.cfg.stream_id).map_err(|e| fail(e.into()))?;
    let consumer = match s.cfg.mode {
        Mode::Lossy => 0,
        Mode::Reliable => match claim_line(&s.lines, s.cfg.max_consumers) {
            Some(i) => i,
            None => {
                return Err(fail(
                    ctl.refuse(format!("all {} consumer lines are connected", s.cfg.max_consumers)).into(),
                ))
            }
        },
    };
    let release = |e: RdmaError| {
        if s.cfg.mode == Mode::Reliable {
            s.lines.fetch_and(!(1u32 << consumer), Ordering::AcqRel);
        }
        (peer.clone(), e)
    };
    let joined = exchange(&mut ctl, s, consumer, id).map_err(release)?;
    Ok((Box::new(joined), ctl))
}

/// CONFIG, endpoints, RESUME and READY; the QP ends connected.
fn exchange(ctl: &mut Control, s: &Shared, consumer: usize, id: u64) -> Result<Joined, RdmaError> {
    ctl.send(&wire::config_line(&StreamConfig { ring: s.cfg, consumer, write_mode: s.write_mode }))?;
    use ffi::ibv_access_flags as A;
    // Reliable: this subscriber may WRITE its own 8-byte credit word and nothing else, through a
    // registration of its own; lossy subscribers get no remote access at all.
    let (credit, access) = match s.cfg.mode {
        Mode::Lossy => (None, 0),
        Mode::Reliable => {
            let at = consumer_position_word(consumer) * 8;
            let access = A::IBV_ACCESS_LOCAL_WRITE.0 | A::IBV_ACCESS_REMOTE_WRITE.0;
            (Some(MemoryRegion::register_within(&s.ctx, &s.mirror, at, 8, access)?), access)
        }
    };
    let qp = PreparedRc::new(&s.ctx, RcOptions { access, ..s.rc })?;
    let ep = qp.endpoint(credit.as_ref().map(|m| (m.addr(), m.rkey(), 8)));
    ctl.send(&format!("EP {ep}"))?;
    let line = ctl.recv()?;
    let ring: Endpoint = line.strip_prefix("EP ").unwrap_or("").parse().map_err(|r| ctl.refuse(r))?;
    let need = s.cfg.ring_bytes() as u64;
    if !ring.covers(ring.addr, need) {
        return Err(ctl.refuse(format!("ring of {} bytes advertised, the stream needs {need}", ring.len)).into());
    }
    let resume = wire::parse_resume(&ctl.recv()?).map_err(|r| ctl.refuse(r))?;
    let qp = qp.connect(&ring)?;
    ctl.send("READY")?;
    if ctl.recv()? != "READY" {
        return Err(ctl.refuse("expected READY").into());
    }
    Ok(Joined { id, peer: ctl.peer().to_owned(), qp, ring, consumer, credit, resume })
}

/// Takes the lowest free line below `max`.
fn claim_line(lines: &AtomicU32, max: usize) -> Option<usize> {
    let mut cur = lines.load(Ordering::Acquire);
    loop {
        let i = (0..max).find(|i| cur & (1 << i) == 0)?;
        match lines.compare_exchange(cur, cur | (1 << i), Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(i),
            Err(now) => cur = now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_claimed_lowest_first_and_never_twice() {
        let lines = AtomicU32::new(0b101);
        assert_eq!(claim_line(&lines, 4), Some(1));
        assert_eq!(claim_line(&lines, 4), Some(3));
        assert_eq!(claim_line(&lines, 4), None);
        lines.fetch_and(!(1 << 2), Ordering::AcqRel);
        assert_eq!(claim_line(&lines, 4), Some(2));
    }
}
