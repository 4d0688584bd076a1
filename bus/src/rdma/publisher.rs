//! The RDMA publisher: a mirror ring, one RC QP per subscriber, slots shipped by RDMA WRITE.
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use super::error::RdmaError;
use super::handshake::{self as hs, Control, StreamConfig, WriteMode};
use crate::ring::{Mode, RingConfig, RingWriter, HEADER_BYTES};
use crate::sys::verbs::{
    ffi, Completion, ConnectedRc, Context, Endpoint, HugeBuf, MemoryRegion, PreparedRc, RcOptions, WriteWr, MAX_CHAIN,
};

/// How a publisher runs.
#[derive(Clone)]
pub struct PublisherOptions {
    /// Shared secret both sides prove they know; the rkey is never handed to anyone else.
    pub token: Vec<u8>,
    pub write_mode: WriteMode,
    /// One signalled WRITE every this many per subscriber (selective signalling).
    pub signal_every: u32,
    pub rc: RcOptions,
    pub handshake_timeout: Duration,
    /// Device name (None: TICKBUS_RDMA_DEVICE, else the first device).
    pub device: Option<String>,
    /// Require hugepages for the mirror (else fall back to 4 KiB pages).
    pub require_hugepages: bool,
}

impl PublisherOptions {
    pub fn new(token: impl Into<Vec<u8>>) -> PublisherOptions {
        PublisherOptions {
            token: token.into(),
            write_mode: WriteMode::Write,
            signal_every: 16,
            rc: RcOptions { max_send_wr: 512, ..RcOptions::default() },
            handshake_timeout: Duration::from_secs(10),
            device: std::env::var("TICKBUS_RDMA_DEVICE").ok(),
            require_hugepages: false,
        }
    }
}

/// One connected subscriber.
struct Conn {
    qp: ConnectedRc,
    remote_addr: u64,
    rkey: u32,
    consumer: usize,
    peer: String,
    /// WRs posted since the last signalled one.
    unsignaled: u32,
    /// Everything below this position has completed on this QP.
    completed: u64,
    /// Position of the last signalled WR + 1 (completion of it means all before it completed).
    signalled_upto: u64,
    _control: Control,
}

/// What the publisher knows about a connected subscriber.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriberInfo {
    pub peer: String,
    pub consumer: usize,
    pub completed: u64,
}

/// Publishes one stream to RDMA subscribers.
pub struct RdmaPublisher {
    ctx: Arc<Context>,
    writer: RingWriter<Arc<MemoryRegion>>,
    credits: MemoryRegion,
    listener: TcpListener,
    opts: PublisherOptions,
    shipper: Shipper,
    /// At most this many positions may be in flight (posted, not known complete) per subscriber.
    window: u64,
    /// TSC ticks a subscriber may take to complete a WRITE before it is declared dead: four
    /// times the QP's own retry budget plus a second, so a provider that never reports a
    /// failure still cannot hang the publisher.
    patience_ticks: u64,
    conns: Vec<Conn>,
    dropped: Vec<(String, RdmaError)>,
    tsc: crate::time::Tsc,
}

/// What posting a slot needs; apart from the connections so both can be borrowed at once.
struct Shipper {
    mirror: Arc<MemoryRegion>,
    slot_size: usize,
    mask: u64,
    inline: bool,
    signal_every: u32,
    imm: bool,
}

impl RdmaPublisher {
    /// Creates the mirror ring for `cfg` and listens for subscribers on `addr`.
    pub fn bind(addr: SocketAddr, cfg: &RingConfig, opts: PublisherOptions) -> Result<RdmaPublisher, RdmaError> {
        cfg.validate().map_err(|e| RdmaError::Handshake { peer: "-".into(), reason: e.to_string() })?;
        let ctx = Context::open(opts.device.as_deref())?;
        let buf = HugeBuf::hugepages_or_pages(cfg.ring_bytes(), opts.require_hugepages)?;
        use ffi::ibv_access_flags as A;
        let mirror = Arc::new(MemoryRegion::register(&ctx, buf, A::IBV_ACCESS_LOCAL_WRITE.0)?);
        let credits = MemoryRegion::register_within(
            &ctx,
            &mirror,
            0,
            HEADER_BYTES,
            A::IBV_ACCESS_LOCAL_WRITE.0 | A::IBV_ACCESS_REMOTE_WRITE.0,
        )?;
        let writer = RingWriter::create(mirror.clone(), cfg, crate::sys::process::pid(), 0)
            .map_err(|e| RdmaError::Handshake { peer: "-".into(), reason: e.to_string() })?;
        let listener = TcpListener::bind(addr).map_err(|e| RdmaError::io("binding the control listener", e))?;
        // The QP's real inline limit.
        let max_inline = PreparedRc::new(&ctx, opts.rc)?.max_inline();
        // A signalled WRITE at least every quarter of the reuse window, so waiting for a slot's
        // WRITE to complete always has a signalled completion to wait for.
        let room = (cfg.slot_count as u64).min(u64::from(opts.rc.max_send_wr));
        let signal_every = u64::from(opts.signal_every).clamp(1, (room / 4).max(1));
        let shipper = Shipper {
            mirror: mirror.clone(),
            slot_size: cfg.slot_size,
            mask: cfg.slot_count as u64 - 1,
            inline: cfg.slot_size <= max_inline as usize,
            signal_every: signal_every as u32,
            imm: opts.write_mode == WriteMode::WriteWithImm,
        };
        let tsc = crate::time::Tsc::new();
        let budget_ns = (4096u64 << opts.rc.timeout.min(31)) * (u64::from(opts.rc.retry_cnt.min(6)) + 1);
        let patience_ticks = ((4 * budget_ns + 1_000_000_000) as f64 * cfg.ticks_per_ns.max(0.001)) as u64;
        Ok(RdmaPublisher {
            ctx,
            writer,
            credits,
            listener,
            window: room - signal_every,
            patience_ticks,
            shipper,
            opts,
            conns: Vec::new(),
            dropped: Vec::new(),
            tsc,
        })
    }

    /// The control address subscribers connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    pub fn config(&self) -> &RingConfig {
        self.writer.config()
    }

    pub fn position(&self) -> u64 {
        self.writer.position()
    }

    /// Whether slots go inline (copied into the WQE at post time).
    pub fn inline(&self) -> bool {
        self.shipper.inline
    }

    /// The device the publisher uses.
    pub fn device(&self) -> &str {
        self.ctx.name()
    }

    pub fn subscribers(&self) -> Vec<SubscriberInfo> {
        self.conns
            .iter()
            .map(|c| SubscriberInfo { peer: c.peer.clone(), consumer: c.consumer, completed: c.completed })
            .collect()
    }

    /// Subscribers dropped since the last call, with why (dead peer, broken path, ...).
    pub fn take_dropped(&mut self) -> Vec<(String, RdmaError)> {
        std::mem::take(&mut self.dropped)
    }

    /// Waits up to `timeout` for one subscriber and runs the handshake with it (set-up path:
    /// syscalls allowed). A refused or failed handshake is returned as an error; the publisher
    /// keeps running.
    pub fn accept(&mut self, timeout: Duration) -> Result<SubscriberInfo, RdmaError> {
        let stream = hs::accept_within(&self.listener, timeout)?;
        let ctl = Control::new(stream, self.opts.handshake_timeout)?;
        let conn = self.handshake(ctl)?;
        let info = SubscriberInfo { peer: conn.peer.clone(), consumer: conn.consumer, completed: conn.completed };
        self.conns.push(conn);
        Ok(info)
    }

    fn handshake(&mut self, mut ctl: Control) -> Result<Conn, RdmaError> {
        let cfg = *self.writer.config();
        hs::authenticate_subscriber(&mut ctl, &self.opts.token, cfg.stream_id)?;
        let consumer = match cfg.mode {
            Mode::Lossy => 0,
            Mode::Reliable => (0..cfg.max_consumers)
                .find(|i| !self.conns.iter().any(|c| c.consumer == *i))
                .ok_or_else(|| ctl.refuse(format!("all {} consumer lines are connected", cfg.max_consumers)))?,
        };
        ctl.send(&hs::config_line(&StreamConfig { ring: cfg, consumer, write_mode: self.opts.write_mode }))?;
        // The QP admits remote writes (credits); the credits MR limits them to the header page.
        use ffi::ibv_access_flags as A;
        let access = A::IBV_ACCESS_LOCAL_WRITE.0 | A::IBV_ACCESS_REMOTE_WRITE.0;
        let qp = PreparedRc::new(&self.ctx, RcOptions { access, ..self.opts.rc })?;
        let ep = qp.endpoint(Some((self.credits.addr(), self.credits.rkey(), HEADER_BYTES as u64)));
        ctl.send(&format!("EP {ep}"))?;
        let line = ctl.recv()?;
        let remote: Endpoint = line.strip_prefix("EP ").unwrap_or("").parse().map_err(|r| ctl.refuse(r))?;
        if (remote.len as usize) < cfg.ring_bytes() {
            return Err(ctl.refuse(format!(
                "ring of {} bytes advertised, the stream needs {}",
                remote.len,
                cfg.ring_bytes()
            )));
        }
        let qp = qp.connect(&remote)?;
        // Lossy: start live. Reliable: start where the consumer line stands (retained messages).
        let start = match cfg.mode {
            Mode::Lossy => self.writer.position(),
            Mode::Reliable => self.writer.consumer_lines().nth(consumer).map_or(0, |(_, p, _)| p),
        };
        ctl.send(&format!("READY {start}"))?;
        if ctl.recv()? != "READY" {
            return Err(ctl.refuse("expected READY".into()));
        }
        let mut conn = Conn {
            qp,
            remote_addr: remote.addr,
            rkey: remote.rkey,
            consumer,
            peer: ctl.peer().to_owned(),
            unsignaled: 0,
            completed: start,
            signalled_upto: start,
            _control: ctl,
        };
        for pos in start..self.writer.position() {
            // Catch up on retained messages, within the same in-flight window as publish.
            if pos - conn.completed >= self.window {
                reap(&mut conn, pos - self.window + 1, &self.tsc, self.patience_ticks)?;
            }
            self.shipper.ship(&mut conn, pos)?;
        }
        Ok(conn)
    }

    /// Publishes `payload` to every subscriber; returns its position. `Full` (reliable mode)
    /// hands control back without waiting. A subscriber whose QP fails is dropped and reported
    /// by [`RdmaPublisher::take_dropped`]; the others are unaffected.
    #[inline]
    pub fn publish(&mut self, payload: &[u8]) -> Result<u64, RdmaError> {
        self.make_room();
        let pos = self.writer.publish(payload)?;
        self.ship(pos);
        Ok(pos)
    }

    /// Most messages one [`RdmaPublisher::publish_batch`] takes: the chain limit, and no more than
    /// may be in flight (a larger burst would overwrite its own mirror slots before shipping).
    pub fn max_batch(&self) -> usize {
        MAX_CHAIN.min(self.window as usize)
    }

    /// Publishes a burst of up to [`RdmaPublisher::max_batch`] messages with one doorbell per
    /// subscriber (one chained post instead of one per message). Returns the first position and
    /// how many were published: fewer than asked only when a reliable ring filled.
    #[inline]
    pub fn publish_batch(&mut self, payloads: &[&[u8]]) -> Result<(u64, usize), RdmaError> {
        assert!(payloads.len() <= self.max_batch(), "at most {} messages per batch", self.max_batch());
        if payloads.is_empty() {
            return Ok((self.writer.position(), 0));
        }
        self.make_room_for(payloads.len() as u64);
        let first = self.writer.position();
        let mut n = 0;
        for p in payloads {
            match self.writer.publish(p) {
                Ok(_) => n += 1,
                Err(e) if n == 0 => return Err(e.into()),
                Err(_) => break, // Full mid-burst: ship what was published
            }
        }
        let shipper = &self.shipper;
        retain_live(&mut self.conns, &mut self.dropped, |c| shipper.ship_batch(c, first, n as u64));
        Ok((first, n))
    }

    /// Stamps a message's header (stream, sequence, raw TSC) and publishes it.
    #[inline]
    pub fn send<T: tickbus_codecs::Message>(&mut self, msg: &mut T) -> Result<u64, RdmaError> {
        msg.header_mut().stamp(self.writer.config().stream_id, self.writer.position(), self.tsc.now());
        self.publish(zerocopy::IntoBytes::as_bytes(msg))
    }

    /// Before the writer may reuse a mirror slot, the WRITE that last shipped it must have
    /// completed (non-inline WRITEs read the slot at send time), and the send queue needs room.
    /// Also polls each CQ once while a signalled WRITE is outstanding, so failures surface early.
    #[inline]
    fn make_room(&mut self) {
        self.make_room_for(1);
    }

    /// Room for `count` more positions (see [`RdmaPublisher::make_room`]).
    #[inline]
    fn make_room_for(&mut self, count: u64) {
        let pos = self.writer.position() + count - 1;
        let (window, tsc, patience) = (self.window, &self.tsc, self.patience_ticks);
        retain_live(&mut self.conns, &mut self.dropped, |c| {
            let need = if pos - c.completed >= window { pos - window + 1 } else { 0 };
            if need > 0 || c.signalled_upto > c.completed {
                reap(c, need, tsc, patience)?;
            }
            Ok(())
        });
    }

    #[inline]
    fn ship(&mut self, pos: u64) {
        let shipper = &self.shipper;
        retain_live(&mut self.conns, &mut self.dropped, |c| shipper.ship(c, pos));
    }
}

/// Runs `f` on every connection; one that fails is removed and recorded in `dropped` with its
/// error. The others are unaffected: one dead subscriber never stops the stream.
#[inline]
fn retain_live(
    conns: &mut Vec<Conn>,
    dropped: &mut Vec<(String, RdmaError)>,
    mut f: impl FnMut(&mut Conn) -> Result<(), RdmaError>,
) {
    let mut i = 0;
    while i < conns.len() {
        match f(&mut conns[i]) {
            Ok(()) => i += 1,
            Err(e) => {
                let c = conns.swap_remove(i);
                dropped.push((c.peer, e));
            }
        }
    }
}

/// Polls `c`'s send CQ; spins until everything below `need` has completed. A dead or
/// unreachable peer turns into RETRY_EXC_ERR within the QP's retry budget; `patience` (TSC
/// ticks, read without a syscall) bounds the wait even if the provider never reports.
fn reap(c: &mut Conn, need: u64, tsc: &crate::time::Tsc, patience: u64) -> Result<(), RdmaError> {
    let mut wc = [Completion::EMPTY; 16];
    // The clock is read only once we have to wait: the usual single poll reads none (quanta
    // falls back to clock_gettime where the TSC is unusable, e.g. under emulation).
    let mut start = None;
    loop {
        let n = c.qp.send_cq().poll(&mut wc)?;
        for w in &wc[..n] {
            if !w.is_ok() {
                return Err(RdmaError::completion(c.consumer, w.status));
            }
            c.completed = c.completed.max(w.wr_id + 1);
        }
        if c.completed >= need {
            return Ok(());
        }
        let now = tsc.now();
        if now.wrapping_sub(*start.get_or_insert(now)) > patience {
            return Err(RdmaError::Unresponsive { subscriber: c.consumer, completed: c.completed, need });
        }
        std::hint::spin_loop();
    }
}

impl Shipper {
    /// Positions `first..first + n` as one chained post (one doorbell).
    #[inline]
    fn ship_batch(&self, c: &mut Conn, first: u64, n: u64) -> Result<(), RdmaError> {
        let mut wrs = [WriteWr {
            wr_id: 0,
            sge: self.mirror.sge(0, 0),
            remote_addr: 0,
            rkey: 0,
            imm: None,
            signaled: false,
            inline: false,
        }; MAX_CHAIN];
        for (k, pos) in (first..first + n).enumerate() {
            wrs[k] = self.wr(c, pos);
        }
        // SAFETY: as in `ship`: make_room_for() keeps each mirror slot until its WRITE completed.
        unsafe { c.qp.post_writes(&wrs[..n as usize])? };
        Ok(())
    }

    /// The WR that ships `pos` to `c`, with selective signalling.
    #[inline]
    fn wr(&self, c: &mut Conn, pos: u64) -> WriteWr {
        let off = HEADER_BYTES + (pos & self.mask) as usize * self.slot_size;
        c.unsignaled += 1;
        let signaled = c.unsignaled >= self.signal_every;
        if signaled {
            c.unsignaled = 0;
            c.signalled_upto = pos + 1;
        }
        WriteWr {
            wr_id: pos,
            sge: self.mirror.sge(off, self.slot_size),
            remote_addr: c.remote_addr + off as u64,
            rkey: c.rkey,
            imm: self.imm.then_some(pos as u32),
            signaled,
            inline: self.inline,
        }
    }

    /// One RDMA WRITE of the whole mirror slot of `pos` to the same offset of `c`'s ring.
    #[inline]
    fn ship(&self, c: &mut Conn, pos: u64) -> Result<(), RdmaError> {
        let wr = self.wr(c, pos);
        // SAFETY: non-inline WRITEs read the mirror slot until they complete; make_room() waits
        // for that completion before the writer reuses the slot, and the mirror outlives the QP.
        unsafe { c.qp.post_write(wr)? };
        Ok(())
    }
}
