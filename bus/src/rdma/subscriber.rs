//! The RDMA subscriber: owns its ring in registered hugepage memory, polls it with the ordinary
//! ring reader, and (reliable mode) writes credits back into the publisher's mirror.
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use super::error::RdmaError;
use crate::control::{self as hs, Control};
use crate::ring::layout::consumer_position_word;
use crate::ring::{self, Mode, Recv, RingConfig, RingReader, StartAt};
use crate::sys::verbs::{
    ffi, Completion, ConnectedRc, Context, Endpoint, HugeBuf, MemoryRegion, PreparedRc, RcOptions, WriteWr,
};
use crate::time::TscScale;
use crate::wire::control as wire;
use crate::wire::control::{StreamConfig, WriteMode};
use crate::wire::transcript::Role;

/// How a subscriber connects.
#[derive(Clone)]
#[non_exhaustive]
pub struct SubscriberOptions {
    /// The stream's shared secret (the publisher's `token`).
    pub token: Vec<u8>,
    /// The queue pair's depths, inline size and retry budget.
    pub rc: RcOptions,
    /// How long connecting may take, all of it (including waiting for the publisher to take it in).
    pub timeout: Duration,
    /// Device name (None: TICKBUS_RDMA_DEVICE, else the first device).
    pub device: Option<String>,
    /// Require hugepages for the ring (else fall back to 4 KiB pages).
    pub require_hugepages: bool,
    /// Receives kept posted in WRITE_WITH_IMM mode (at most `rc.max_recv_wr`).
    pub recv_depth: u32,
}

impl SubscriberOptions {
    /// Options for a subscriber that proves it knows `token`, with defaults for the rest.
    pub fn new(token: impl Into<Vec<u8>>) -> SubscriberOptions {
        SubscriberOptions {
            token: token.into(),
            rc: RcOptions { max_send_wr: 64, max_recv_wr: 512, ..RcOptions::default() },
            timeout: Duration::from_secs(10),
            device: std::env::var("TICKBUS_RDMA_DEVICE").ok(),
            require_hugepages: false,
            recv_depth: 512,
        }
    }
}

/// Credits a reliable subscriber owes the publisher: its consumer position, RDMA-written into
/// its own word of the publisher's mirror (a registration covering that word and nothing else).
struct Credits {
    remote_addr: u64,
    rkey: u32,
    /// Offset of our consumer line's position word in our own ring: the WRITE's (inline) source.
    local_offset: usize,
    sent: u64,
    window: SendWindow,
}

/// How many WRs a send queue holds as far as we know: on NICs a slot frees only when the
/// completion of its WR, or of a later signalled one, is polled. Credits are cumulative, so when
/// the queue is full the newest credit simply waits for room: posts never outrun the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SendWindow {
    /// WRs posted (a WR's wr_id is its ordinal) and known complete.
    pub posted: u64,
    pub done: u64,
    /// WRs the queue may hold, and how often one asks for a completion.
    pub depth: u64,
    pub signal_every: u64,
}

impl SendWindow {
    pub fn new(queue: u32) -> SendWindow {
        let depth = u64::from(queue.max(2)) - 1;
        SendWindow { posted: 0, done: 0, depth, signal_every: (depth / 2).clamp(1, 16) }
    }

    /// Whether one more WR fits.
    pub fn has_room(&self) -> bool {
        self.posted - self.done < self.depth
    }

    /// Takes a slot for the next WR: its wr_id and whether it asks for a completion.
    pub fn post(&mut self) -> (u64, bool) {
        let id = self.posted;
        self.posted += 1;
        (id, self.posted.is_multiple_of(self.signal_every))
    }

    /// A completion of WR `wr_id` (and of every WR before it).
    pub fn completed(&mut self, wr_id: u64) {
        self.done = self.done.max(wr_id + 1).min(self.posted);
    }

    /// Whether it is worth polling for completions now.
    pub fn half_full(&self) -> bool {
        self.posted - self.done >= self.depth / 2
    }
}

/// Subscribes to one stream over RDMA.
pub struct RdmaSubscriber {
    reader: RingReader<Arc<MemoryRegion>>,
    ring: Arc<MemoryRegion>,
    qp: ConnectedRc,
    credits: Option<Credits>,
    stream: StreamConfig,
    /// WRITE_WITH_IMM mode: every position below this has landed (its completion, which names
    /// its position in the immediate, was polled); the reader never reads at or past it.
    landed: u64,
    control: Control,
    _ctx: Arc<Context>,
}

impl std::fmt::Debug for RdmaSubscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdmaSubscriber")
            .field("stream_id", &self.reader.config().stream_id)
            .field("position", &self.reader.position())
            .finish_non_exhaustive()
    }
}

impl RdmaSubscriber {
    /// Connects to the publisher at `addr` for `stream_id`, authenticates both ways, allocates
    /// and registers a ring of the publisher's layout (LOCAL_WRITE | REMOTE_WRITE, nothing else)
    /// and connects the QP. The stream starts where the publisher says (live, or for a reliable
    /// stream the oldest message not yet consumed).
    pub fn connect(addr: SocketAddr, stream_id: u32, opts: &SubscriberOptions) -> Result<RdmaSubscriber, RdmaError> {
        Self::connect_at(addr, stream_id, opts, None)
    }

    /// Connects again after losing the publisher (a broken link, a dropped subscriber), asking
    /// to resume at `next`: the position of the next message this subscriber needs (the old
    /// subscriber's [`RdmaSubscriber::position`]). A reliable stream then delivers nothing twice
    /// and loses nothing; a lossy one resumes there if the publisher still holds it.
    pub fn resume(
        addr: SocketAddr,
        stream_id: u32,
        opts: &SubscriberOptions,
        next: u64,
    ) -> Result<RdmaSubscriber, RdmaError> {
        Self::connect_at(addr, stream_id, opts, Some(next))
    }

    fn connect_at(
        addr: SocketAddr,
        stream_id: u32,
        opts: &SubscriberOptions,
        resume: Option<u64>,
    ) -> Result<RdmaSubscriber, RdmaError> {
        let tcp = TcpStream::connect_timeout(&addr, opts.timeout)
            .map_err(|source| RdmaError::Connect { addr: addr.to_string(), source })?;
        let mut ctl = Control::new(tcp, opts.timeout, Role::Subscriber)?;
        hs::authenticate_to_publisher(&mut ctl, &opts.token, stream_id)?;
        let stream = wire::parse_config(&ctl.recv()?).map_err(|r| ctl.refuse(r))?;
        let cfg: RingConfig = stream.ring;
        if cfg.stream_id != stream_id {
            return Err(ctl
                .refuse(format!("asked for stream {stream_id}, the publisher configured {}", cfg.stream_id))
                .into());
        }
        let line = ctl.recv()?;
        let publisher: Endpoint = line.strip_prefix("EP ").unwrap_or("").parse().map_err(|r| ctl.refuse(r))?;
        if cfg.mode == Mode::Reliable && publisher.len != 8 {
            return Err(ctl.refuse(format!("the credit word advertised is {} bytes, not 8", publisher.len)).into());
        }

        let ctx = Context::open(opts.device.as_deref())?;
        let buf = HugeBuf::hugepages_or_pages(cfg.ring_bytes(), opts.require_hugepages)?;
        use ffi::ibv_access_flags as A;
        let access = A::IBV_ACCESS_LOCAL_WRITE.0 | A::IBV_ACCESS_REMOTE_WRITE.0;
        let ring = Arc::new(MemoryRegion::register(&ctx, buf, access)?);
        ring::initialize(&ring, &cfg).map_err(|e| ctl.refuse(e.to_string()))?;
        let qp = PreparedRc::new(&ctx, RcOptions { access, ..opts.rc })?;
        // Honest unless a test armed tickbus::fault::corrupt_rkey (--cfg tickbus_testing).
        let rkey = ring.rkey() ^ crate::fault::rkey_xor();
        let ep = qp.endpoint(Some((ring.addr(), rkey, ring.len() as u64)));
        ctl.send(&format!("EP {ep}"))?;
        ctl.send(&wire::resume_line(resume))?;
        let mut qp = qp.connect(&publisher)?;
        if stream.write_mode == WriteMode::WriteWithImm {
            for i in 0..opts.recv_depth.min(opts.rc.max_recv_wr) {
                // SAFETY: no bytes are named: WRITE_WITH_IMM places data by RDMA, not into the WR.
                unsafe { qp.post_recv(u64::from(i), None)? };
            }
        }
        let ready = ctl.recv()?;
        if ready != "READY" {
            return Err(ctl.refuse(format!("expected READY, got {}", wire::quote(&ready))).into());
        }
        ctl.send("READY")?;
        // The publisher may already be WRITEing into the ring: slots land where they belong.
        let start = wire::parse_start(&ctl.recv()?).map_err(|r| ctl.refuse(r))?;
        ctl.finish();
        let (reader, credits) = match cfg.mode {
            Mode::Lossy => (RingReader::observer(ring.clone(), StartAt::Position(start)), None),
            Mode::Reliable => {
                ring::set_consumer_position(&ring, 0, start).map_err(|e| ctl.refuse(e.to_string()))?;
                let credits = Credits {
                    remote_addr: publisher.addr,
                    rkey: publisher.rkey,
                    local_offset: consumer_position_word(0) * 8,
                    sent: start,
                    window: SendWindow::new(opts.rc.max_send_wr),
                };
                (RingReader::consumer_by_token(ring.clone(), crate::sys::process::pid().max(1)), Some(credits))
            }
        };
        let mut reader = reader.map_err(|e| ctl.refuse(e.to_string()))?;
        reader.set_counters(crate::counters::register(
            crate::counters::Role::Subscriber,
            crate::counters::Transport::RdmaRc,
            stream_id,
            &addr.to_string(),
        ));
        Ok(RdmaSubscriber { reader, ring, qp, credits, stream, landed: start, control: ctl, _ctx: ctx })
    }

    /// The ring's layout, as the publisher sent it.
    pub fn config(&self) -> &RingConfig {
        &self.stream.ring
    }

    /// How the publisher delivers (WRITE or WRITE_WITH_IMM).
    pub fn write_mode(&self) -> WriteMode {
        self.stream.write_mode
    }

    /// The publisher's TSC conversion (same host only: across hosts use round trip / 2).
    pub fn tsc_scale(&self) -> TscScale {
        TscScale { ticks_per_ns: self.stream.ring.ticks_per_ns }
    }

    /// The position of the next message this subscriber will deliver.
    pub fn position(&self) -> u64 {
        self.reader.position()
    }

    /// Slots of dropped claims the reader has moved past (see
    /// [`RingReader::aborted_skipped`]).
    pub fn aborted_skipped(&self) -> u64 {
        self.reader.aborted_skipped()
    }

    /// Positions reported lost in gaps so far (lossy mode).
    pub fn missed(&self) -> u64 {
        self.reader.missed()
    }

    /// Reliable streams: credits go back to the publisher only through
    /// [`RdmaSubscriber::release_to`] (a recorder releases what its journal holds).
    pub fn set_manual_release(&mut self, manual: bool) {
        self.reader.set_manual_release(manual);
    }

    /// Reliable streams: everything below `position` may be released to the publisher (sent
    /// with the next credit WRITE).
    pub fn release_to(&mut self, position: u64) {
        self.reader.release_to(position);
    }

    /// Whether the ring is on hugepages.
    pub fn on_hugepages(&self) -> bool {
        self.ring.is_huge()
    }

    /// The next message or gap, or `None`. No syscall and no allocation (credit WRITEs are
    /// posted inline; on Soft-RoCE each post is one doorbell syscall, on real NICs none).
    #[inline]
    pub fn try_recv(&mut self) -> Result<Option<Recv<'_>>, RdmaError> {
        self.send_credits()?;
        if self.stream.write_mode == WriteMode::Write {
            return Ok(self.reader.try_recv());
        }
        if self.reader.position() >= self.landed {
            self.poll_arrivals()?;
        }
        Ok(self.reader.try_recv_before(self.landed))
    }

    /// The next message if it is exactly `out.len()` bytes, copied into `out`, as
    /// [`RingReader::try_recv_into`](crate::ring::RingReader::try_recv_into): one of another
    /// length is reported and left for [`RdmaSubscriber::try_recv`]. Same credits and
    /// completions as `try_recv`; no syscall, no allocation.
    #[inline]
    pub fn try_recv_into(&mut self, out: &mut [u8]) -> Result<Option<crate::ring::RecvInto>, RdmaError> {
        self.send_credits()?;
        if self.stream.write_mode == WriteMode::Write {
            return Ok(self.reader.try_recv_into(out));
        }
        if self.reader.position() >= self.landed {
            self.poll_arrivals()?;
        }
        Ok(self.reader.try_recv_into_before(self.landed, out))
    }

    /// WRITE_WITH_IMM: each receive completion says one slot has fully landed, and its
    /// immediate names the slot's position (low 32 bits; positions only grow, by less than
    /// 2^32 between two completions).
    fn poll_arrivals(&mut self) -> Result<(), RdmaError> {
        let mut wc = [Completion::EMPTY; 16];
        let n = self.qp.recv_cq().poll(&mut wc)?;
        let counters = self.reader.counters();
        counters.add(crate::counters::Counter::Completions, n as u64);
        for w in &wc[..n] {
            if !w.is_ok() {
                counters.completion_error(w.status);
                return Err(RdmaError::completion(0, w.status));
            }
            let Some(imm) = w.imm else {
                return Err(RdmaError::Protocol {
                    subscriber: 0,
                    reason: "a receive completed without an immediate".into(),
                });
            };
            let pos = self.landed + u64::from(imm.wrapping_sub(self.landed as u32));
            self.landed = self.landed.max(pos + 1);
            // SAFETY: no bytes are named; replaces the receive this completion consumed.
            unsafe { self.qp.post_recv(w.wr_id, None)? };
        }
        Ok(())
    }

    /// Reliable mode: tell the publisher how far we consumed, when the reader has released
    /// more. Never more posts in flight than the send queue holds: the newest credit waits.
    #[inline]
    fn send_credits(&mut self) -> Result<(), RdmaError> {
        let Some(c) = self.credits.as_mut() else { return Ok(()) };
        let released = self.reader.released();
        if released == c.sent {
            return Ok(());
        }
        if !c.window.has_room() {
            reap_credits(&mut self.qp, c, self.reader.counters())?;
            if !c.window.has_room() {
                return Ok(()); // coalesced: a later call sends the newest position
            }
        }
        let (wr_id, signaled) = c.window.post();
        let wr = WriteWr {
            wr_id,
            sge: self.ring.sge(c.local_offset, 8),
            remote_addr: c.remote_addr,
            rkey: c.rkey,
            imm: None,
            signaled,
            inline: true,
        };
        // SAFETY: inline: the 8 bytes are copied at post time.
        unsafe { self.qp.post_write(wr)? };
        c.sent = released;
        if c.window.half_full() {
            reap_credits(&mut self.qp, c, self.reader.counters())?;
        }
        Ok(())
    }

    /// Whether the publisher closed its control connection (it exited or dropped us). A
    /// syscall: call it when idle, not per message.
    pub fn publisher_gone(&self) -> bool {
        self.control.peer_closed()
    }

    /// Fault injection for tests: WRITEs `value` into consumer line `line`'s credit word of the
    /// publisher's mirror, through this subscriber's credit key, as a hostile subscriber would.
    #[cfg(tickbus_testing)]
    pub fn fault_write_credit(&mut self, line: usize, value: u64) -> Result<(), RdmaError> {
        let Some(c) = self.credits.as_mut() else { return Err(RdmaError::NoSubscriber) };
        let own = consumer_position_word(self.stream.consumer) * 8;
        let target = (c.remote_addr - own as u64) + (consumer_position_word(line) * 8) as u64;
        let scratch = consumer_position_word(1) * 8; // a line our own ring never uses
        let word = self.ring.as_ptr() as usize + scratch;
        // SAFETY: an 8-aligned word inside our registered ring that nothing else uses.
        unsafe { (*(word as *const std::sync::atomic::AtomicU64)).store(value, std::sync::atomic::Ordering::Release) };
        let (wr_id, _) = c.window.post();
        let wr = WriteWr {
            wr_id,
            sge: self.ring.sge(scratch, 8),
            remote_addr: target,
            rkey: c.rkey,
            imm: None,
            signaled: true,
            inline: true,
        };
        // SAFETY: inline: copied at post time.
        unsafe { self.qp.post_write(wr)? };
        Ok(())
    }

    /// Fault injection for tests: polls this subscriber's send queue until the last posted WR
    /// completed or failed (up to `timeout`); the failure, if any.
    #[cfg(tickbus_testing)]
    pub fn fault_wait_sent(&mut self, timeout: Duration) -> Result<(), RdmaError> {
        let deadline = std::time::Instant::now() + timeout;
        let Some(c) = self.credits.as_mut() else { return Ok(()) };
        while c.window.done < c.window.posted && std::time::Instant::now() < deadline {
            reap_credits(&mut self.qp, c, self.reader.counters())?;
        }
        Ok(())
    }
}

/// Takes the credit WRITEs' completions there are (never waits).
fn reap_credits(qp: &mut ConnectedRc, c: &mut Credits, counters: &crate::counters::Counters) -> Result<(), RdmaError> {
    let mut wc = [Completion::EMPTY; 16];
    let n = qp.send_cq().poll(&mut wc)?;
    counters.add(crate::counters::Counter::Completions, n as u64);
    for w in &wc[..n] {
        if !w.is_ok() {
            counters.completion_error(w.status);
            return Err(RdmaError::completion(0, w.status));
        }
        c.window.completed(w.wr_id);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::SendWindow;

    /// A thousand credits released while no completion is ever polled (a NIC frees send-queue
    /// slots only then): posting whenever the credit changes (the old way, signalling one WR in
    /// 16 on a 64-entry queue) would have had 1000 WRs outstanding; the window never has more
    /// than the queue holds, and the newest credit goes once a completion frees room.
    #[test]
    fn credits_never_outrun_the_send_queue() {
        let mut w = SendWindow::new(64);
        let (mut posted, mut coalesced, mut signalled) = (0, 0, Vec::new());
        for _ in 0..1000 {
            if w.has_room() {
                let (id, s) = w.post();
                posted += 1;
                if s {
                    signalled.push(id);
                }
            } else {
                coalesced += 1;
            }
            assert!(w.posted - w.done <= w.depth);
        }
        assert_eq!((posted, coalesced), (63, 937));
        assert!(!signalled.is_empty(), "a full window must hold a signalled WR, or it never drains");
        w.completed(*signalled.last().unwrap());
        assert!(w.has_room());
        let w = SendWindow::new(8);
        assert_eq!((w.depth, w.signal_every), (7, 3));
    }
}
