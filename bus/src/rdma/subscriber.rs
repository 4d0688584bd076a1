//! The RDMA subscriber: owns its ring in registered hugepage memory, polls it with the ordinary
//! ring reader, and (reliable mode) writes credits back into the publisher's mirror.
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use super::error::RdmaError;
use super::handshake::{self as hs, Control, StreamConfig, WriteMode};
use crate::ring::layout::consumer_position_word;
use crate::ring::{self, Mode, Recv, RingConfig, RingReader, StartAt};
use crate::sys::verbs::{
    ffi, Completion, ConnectedRc, Context, Endpoint, HugeBuf, MemoryRegion, PreparedRc, RcOptions, WriteWr,
};
use crate::time::TscScale;

/// How a subscriber connects.
#[derive(Clone)]
pub struct SubscriberOptions {
    pub token: Vec<u8>,
    pub rc: RcOptions,
    pub timeout: Duration,
    pub device: Option<String>,
    pub require_hugepages: bool,
    /// Receives kept posted in WRITE_WITH_IMM mode.
    pub recv_depth: u32,
    /// Fault injection for tests: XORed into the rkey we advertise (0 = honest).
    #[doc(hidden)]
    pub corrupt_rkey: u32,
}

impl SubscriberOptions {
    pub fn new(token: impl Into<Vec<u8>>) -> SubscriberOptions {
        SubscriberOptions {
            token: token.into(),
            rc: RcOptions { max_send_wr: 64, max_recv_wr: 512, ..RcOptions::default() },
            timeout: Duration::from_secs(10),
            device: std::env::var("TICKBUS_RDMA_DEVICE").ok(),
            require_hugepages: false,
            recv_depth: 256,
            corrupt_rkey: 0,
        }
    }
}

/// Credits a reliable subscriber owes the publisher.
struct Credits {
    /// Address of our consumer line's position word in the publisher's mirror.
    remote_addr: u64,
    rkey: u32,
    /// Offset of the same word in our own ring: the WRITE's (inline) source.
    local_offset: usize,
    sent: u64,
    posted: u32,
}

/// Subscribes to one stream over RDMA.
pub struct RdmaSubscriber {
    reader: RingReader<Arc<MemoryRegion>>,
    ring: Arc<MemoryRegion>,
    qp: ConnectedRc,
    credits: Option<Credits>,
    stream: StreamConfig,
    /// WRITE_WITH_IMM mode: completions seen whose slots were not delivered yet.
    arrived: u64,
    control: Control,
    _ctx: Arc<Context>,
}

impl RdmaSubscriber {
    /// Connects to the publisher at `addr` for `stream_id`, authenticates both ways, allocates
    /// and registers a ring of the publisher's layout (LOCAL_WRITE | REMOTE_WRITE, nothing else)
    /// and connects the QP.
    pub fn connect(addr: SocketAddr, stream_id: u32, opts: &SubscriberOptions) -> Result<RdmaSubscriber, RdmaError> {
        let tcp = TcpStream::connect_timeout(&addr, opts.timeout)
            .map_err(|source| RdmaError::Connect { addr: addr.to_string(), source })?;
        let mut ctl = Control::new(tcp, opts.timeout)?;
        hs::authenticate_to_publisher(&mut ctl, &opts.token, stream_id)?;
        let stream = hs::parse_config(&ctl.recv()?).map_err(|r| ctl.refuse(r))?;
        let cfg: RingConfig = stream.ring;
        let line = ctl.recv()?;
        let publisher: Endpoint = line.strip_prefix("EP ").unwrap_or("").parse().map_err(|r| ctl.refuse(r))?;

        let ctx = Context::open(opts.device.as_deref())?;
        let buf = HugeBuf::hugepages_or_pages(cfg.ring_bytes(), opts.require_hugepages)?;
        use ffi::ibv_access_flags as A;
        let access = A::IBV_ACCESS_LOCAL_WRITE.0 | A::IBV_ACCESS_REMOTE_WRITE.0;
        let ring = Arc::new(MemoryRegion::register(&ctx, buf, access)?);
        ring::initialize(&ring, &cfg).map_err(|e| ctl.refuse(e.to_string()))?;
        let qp = PreparedRc::new(&ctx, RcOptions { access, ..opts.rc })?;
        let ep = qp.endpoint(Some((ring.addr(), ring.rkey() ^ opts.corrupt_rkey, ring.len() as u64)));
        ctl.send(&format!("EP {ep}"))?;
        let mut qp = qp.connect(&publisher)?;
        if stream.write_mode == WriteMode::WriteWithImm {
            for i in 0..opts.recv_depth.min(opts.rc.max_recv_wr) {
                // SAFETY: no bytes are named: WRITE_WITH_IMM places data by RDMA, not into the WR.
                unsafe { qp.post_recv(u64::from(i), None)? };
            }
        }
        let ready = ctl.recv()?;
        let start: u64 = ready
            .strip_prefix("READY ")
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ctl.refuse(format!("expected READY <position>, got {ready:?}")))?;
        let (reader, credits) = match cfg.mode {
            Mode::Lossy => (RingReader::observer(ring.clone(), StartAt::Position(start)), None),
            Mode::Reliable => {
                ring::set_consumer_position(&ring, 0, start).map_err(|e| ctl.refuse(e.to_string()))?;
                let credits = Credits {
                    remote_addr: publisher.addr + (consumer_position_word(stream.consumer) * 8) as u64,
                    rkey: publisher.rkey,
                    local_offset: consumer_position_word(0) * 8,
                    sent: start,
                    posted: 0,
                };
                (RingReader::consumer_by_token(ring.clone(), crate::sys::process::pid()), Some(credits))
            }
        };
        let reader = reader.map_err(|e| ctl.refuse(e.to_string()))?;
        ctl.send("READY")?;
        Ok(RdmaSubscriber { reader, ring, qp, credits, stream, arrived: 0, control: ctl, _ctx: ctx })
    }

    pub fn config(&self) -> &RingConfig {
        &self.stream.ring
    }

    pub fn write_mode(&self) -> WriteMode {
        self.stream.write_mode
    }

    /// The publisher's TSC conversion (same host only: across hosts use round trip / 2).
    pub fn tsc_scale(&self) -> TscScale {
        TscScale { ticks_per_ns: self.stream.ring.ticks_per_ns }
    }

    pub fn position(&self) -> u64 {
        self.reader.position()
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
        if self.stream.write_mode == WriteMode::WriteWithImm && self.arrived == 0 {
            self.poll_arrivals()?;
            if self.arrived == 0 {
                return Ok(None);
            }
        }
        let r = self.reader.try_recv();
        if r.is_some() && self.stream.write_mode == WriteMode::WriteWithImm {
            self.arrived -= 1;
        }
        Ok(r)
    }

    /// WRITE_WITH_IMM: each receive completion means one slot has fully landed.
    fn poll_arrivals(&mut self) -> Result<(), RdmaError> {
        let mut wc = [Completion::EMPTY; 16];
        let n = self.qp.recv_cq().poll(&mut wc)?;
        for w in &wc[..n] {
            if !w.is_ok() {
                return Err(RdmaError::completion(0, w.status));
            }
            // SAFETY: no bytes are named; replaces the receive this completion consumed.
            unsafe { self.qp.post_recv(w.wr_id, None)? };
        }
        self.arrived += n as u64;
        Ok(())
    }

    /// Reliable mode: tell the publisher how far we consumed, when the reader has released more.
    #[inline]
    fn send_credits(&mut self) -> Result<(), RdmaError> {
        let Some(c) = self.credits.as_mut() else { return Ok(()) };
        let released = self.reader.released();
        if released == c.sent {
            return Ok(());
        }
        c.posted += 1;
        let signaled = c.posted.is_multiple_of(16);
        let wr = WriteWr {
            wr_id: released,
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
        if signaled {
            let mut wc = [Completion::EMPTY; 16];
            let n = self.qp.send_cq().poll(&mut wc)?;
            if let Some(w) = wc[..n].iter().find(|w| !w.is_ok()) {
                return Err(RdmaError::completion(0, w.status));
            }
        }
        Ok(())
    }

    /// Whether the publisher closed its control connection (it exited or dropped us). A
    /// syscall: call it when idle, not per message.
    pub fn publisher_gone(&self) -> bool {
        self.control.peer_closed()
    }
}
