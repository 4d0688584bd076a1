//! The ud-mcast subscriber: a UD QP joined to the group, receive slots in registered hugepage
//! memory (each one MTU plus the GRH, so no datagram can overflow one), polled from the CQ,
//! checked and sequenced.
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use super::error::McastError;
use super::frame;
use super::publisher::DEFAULT_QKEY;
use super::recovery::RecoveryClient;
use crate::ring::{Delivery, Gap, Recv};
use crate::sys::verbs::{ffi, Completion, Context, HugeBuf, McastMembership, MemoryRegion, UdQp, GRH_BYTES};

/// How a subscriber receives.
#[derive(Clone, Debug)]
pub struct McastSubscriberOptions {
    /// Device name; default `TICKBUS_RDMA_DEVICE`, else the first device.
    pub device: Option<String>,
    /// Receive slots kept posted: how many datagrams may arrive between two polls before the
    /// NIC drops (and the subscriber reports a gap).
    pub depth: u32,
    pub qkey: u32,
    pub require_hugepages: bool,
}

impl Default for McastSubscriberOptions {
    fn default() -> Self {
        McastSubscriberOptions {
            device: std::env::var("TICKBUS_RDMA_DEVICE").ok(),
            depth: 1024,
            qkey: DEFAULT_QKEY,
            require_hugepages: false,
        }
    }
}

/// What a subscriber has seen besides the messages it delivered.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct McastStats {
    pub delivered: u64,
    /// Messages reported lost in gaps.
    pub missed: u64,
    pub gaps: u64,
    pub heartbeats: u64,
    /// Datagrams that were not tickbus frames (each also returned as an error once).
    pub malformed: u64,
    /// Frames of other streams sharing the group (skipped).
    pub other_streams: u64,
    /// Frames older than the next expected one: duplicates or reordered (dropped).
    pub late: u64,
    /// Publisher runs seen after the first (a restarted publisher restarts its sequence).
    pub new_sessions: u64,
    /// Messages delivered from the publisher's history after the fabric lost them (included
    /// in `delivered`).
    pub recovered: u64,
    /// Recovery READs that failed; recovery is off after one (see `take_recovery_error`).
    pub recovery_failures: u64,
}

/// Subscribes to one stream on one multicast group. Delivers in sequence order, reports every
/// lost message in a [`Gap`], and never delivers a frame twice.
pub struct McastSubscriber {
    // Drop order: leave the group, then destroy the QP, then deregister its receive slots.
    _membership: McastMembership,
    recovery: Option<RecoveryClient>,
    qp: UdQp,
    slots: MemoryRegion,
    slot_bytes: usize,
    group: Ipv4Addr,
    stream: u32,
    session: Option<u64>,
    /// Sequence number of the next message to deliver (None until the first frame).
    expected: Option<u64>,
    /// A slot whose message was delivered last call: posted again on the next call.
    repost: Option<usize>,
    /// A completion held back while the gap before it is reported or recovered.
    held: Option<Completion>,
    /// Sequence numbers `[next, end)` being recovered from the publisher's history.
    recovering: Option<(u64, u64)>,
    recovery_error: Option<McastError>,
    stats: McastStats,
    wc: [Completion; 1],
    ctx: Arc<Context>,
}

/// What one step of a recovery produced.
enum Step {
    /// A recovered message: its sequence number, and where it is in the landing buffer.
    Message {
        seq: u64,
        off: usize,
        len: usize,
    },
    Gap(Gap),
    Done,
}

impl McastSubscriber {
    /// Opens the device, creates a UD QP, registers `depth` receive slots (LOCAL_WRITE only),
    /// posts them all, and joins `group` (the IP-level join too, which rxe needs).
    pub fn join(group: Ipv4Addr, stream: u32, opts: &McastSubscriberOptions) -> Result<McastSubscriber, McastError> {
        if !group.is_multicast() {
            return Err(McastError::NotMulticast { group });
        }
        let ctx = Context::open(opts.device.as_deref())?;
        let depth = opts.depth.max(1);
        let mut qp = UdQp::new(&ctx, depth, opts.qkey)?;
        let slot_bytes = (GRH_BYTES + ctx.port().mtu_bytes()).next_multiple_of(64);
        let buf = HugeBuf::hugepages_or_pages(slot_bytes * depth as usize, opts.require_hugepages)?;
        let slots = MemoryRegion::register(&ctx, buf, ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0)?;
        for i in 0..depth as usize {
            // SAFETY: the slot lies in `slots`, which outlives the QP (field order).
            unsafe { qp.post_recv(i as u64, slots.sge(i * slot_bytes, slot_bytes))? };
        }
        let membership = qp.join_multicast(group)?;
        Ok(McastSubscriber {
            _membership: membership,
            recovery: None,
            qp,
            slots,
            slot_bytes,
            group,
            stream,
            session: None,
            expected: None,
            repost: None,
            held: None,
            recovering: None,
            recovery_error: None,
            stats: McastStats::default(),
            wc: [Completion::EMPTY; 1],
            ctx,
        })
    }

    /// Connects to the publisher's recovery listener ([`super::McastPublisher::listen_recovery`])
    /// with the shared `token`. From then on a gap is first recovered by RDMA-READing the lost
    /// messages from the publisher's history, `batch` slots per READ; only messages the history
    /// no longer holds are reported as a gap. Set-up: syscalls, may wait up to `timeout`.
    pub fn connect_recovery(
        &mut self,
        addr: SocketAddr,
        token: &[u8],
        batch: u32,
        timeout: Duration,
    ) -> Result<(), McastError> {
        self.recovery = Some(RecoveryClient::connect(&self.ctx, addr, token, self.stream, batch, timeout)?);
        Ok(())
    }

    /// Whether gap recovery is on (connected and not failed).
    pub fn recovers(&self) -> bool {
        self.recovery.is_some()
    }

    /// The error that turned recovery off, once.
    pub fn take_recovery_error(&mut self) -> Option<McastError> {
        self.recovery_error.take()
    }

    /// The next message, a gap, or nothing yet. No syscall, no allocation. A message's bytes
    /// are valid until the next call (its slot is posted again then). A datagram that is not
    /// a frame of ours is dropped and returned once as [`McastError::Frame`] (retryable: poll
    /// on); a failed completion is fatal for this subscriber.
    #[inline]
    pub fn try_recv(&mut self) -> Result<Option<Recv<'_>>, McastError> {
        if let Some(slot) = self.repost.take() {
            self.post(slot)?;
        }
        loop {
            if let Some((next, end)) = self.recovering {
                match self.recover_step(next, end) {
                    Step::Message { seq, off, len } => {
                        let r = self.recovery.as_ref().expect("recovering without a client");
                        return Ok(Some(Recv::Message(Delivery { position: seq, payload: r.landing_bytes(off, len) })));
                    }
                    Step::Gap(g) => return Ok(Some(Recv::Gap(g))),
                    Step::Done => self.recovering = None,
                }
            }
            let c = match self.held.take() {
                Some(c) => c,
                None => match self.qp.cq().poll(&mut self.wc)? {
                    0 => return Ok(None),
                    _ => self.wc[0],
                },
            };
            if !c.is_ok() {
                return Err(McastError::completion("subscriber receive", c.status));
            }
            let slot = c.wr_id as usize;
            let len = (c.byte_len as usize).saturating_sub(GRH_BYTES).min(self.slot_bytes - GRH_BYTES);
            let (h, _) = match frame::parse(self.bytes(slot, len)) {
                Ok(f) => f,
                Err(error) => {
                    self.stats.malformed += 1;
                    self.post(slot)?;
                    return Err(McastError::Frame { group: self.group, error });
                }
            };
            if h.stream != self.stream {
                self.stats.other_streams += 1;
                self.post(slot)?;
                continue;
            }
            if self.session != Some(h.session) {
                if self.session.is_some() {
                    self.stats.new_sessions += 1;
                    self.expected = None;
                }
                self.session = Some(h.session);
            }
            let expected = *self.expected.get_or_insert(h.seq);
            if h.seq < expected {
                self.stats.late += 1;
                self.post(slot)?;
                continue;
            }
            if h.seq > expected {
                self.held = Some(c);
                if self.recovery.is_some() {
                    self.recovering = Some((expected, h.seq));
                    continue;
                }
                return Ok(Some(Recv::Gap(self.gap(expected, h.seq))));
            }
            if h.is_heartbeat() {
                self.stats.heartbeats += 1;
                self.post(slot)?;
                continue;
            }
            self.expected = Some(h.seq + 1);
            self.stats.delivered += 1;
            self.repost = Some(slot);
            let start = usize::from(h.header_len);
            let payload = &self.bytes(slot, len)[start..start + h.len as usize];
            return Ok(Some(Recv::Message(Delivery { position: h.seq, payload })));
        }
    }

    /// Reports `[from, to)` lost and moves on past it.
    fn gap(&mut self, from: u64, to: u64) -> Gap {
        self.expected = Some(to);
        self.stats.gaps += 1;
        self.stats.missed += to - from;
        Gap { expected: from, resumed_at: to }
    }

    /// One step of recovering `[next, end)`: the next message from the history, or a gap for
    /// what the history no longer holds (or for everything left, if a READ fails).
    #[cold]
    fn recover_step(&mut self, next: u64, end: u64) -> Step {
        let Some(r) = self.recovery.as_mut() else { return Step::Done };
        if next >= end {
            return Step::Done;
        }
        // The publisher has sent `end`, so it has rewritten every slot of `end - slots` and before.
        let oldest = (end + 1).saturating_sub(r.history.slots);
        if next < oldest {
            self.recovering = Some((oldest, end));
            return Step::Gap(self.gap(next, oldest));
        }
        if !r.holds(next) {
            if let Err(e) = r.read(next, end - next) {
                self.recovery = None;
                self.recovery_error = Some(e);
                self.stats.recovery_failures += 1;
                self.recovering = Some((end, end));
                return Step::Gap(self.gap(next, end));
            }
        }
        match r.frame(next, self.stream) {
            Some((_, off, len)) => {
                self.recovering = Some((next + 1, end));
                self.expected = Some(next + 1);
                self.stats.recovered += 1;
                self.stats.delivered += 1;
                Step::Message { seq: next, off, len }
            }
            None => {
                // Overwritten meanwhile: lost for good, up to the next copy that is intact.
                let mut k = next + 1;
                while k < end && r.holds(k) && r.frame(k, self.stream).is_none() {
                    k += 1;
                }
                self.recovering = Some((k, end));
                Step::Gap(self.gap(next, k))
            }
        }
    }

    pub fn stats(&self) -> McastStats {
        self.stats
    }

    pub fn group(&self) -> Ipv4Addr {
        self.group
    }

    /// The datagram in `slot` (after its GRH), `len` bytes.
    #[inline]
    fn bytes(&self, slot: usize, len: usize) -> &[u8] {
        debug_assert!(GRH_BYTES + len <= self.slot_bytes);
        // SAFETY: the slot lies inside the registration; its receive completed and it is not
        // posted again while this borrow of self lives (posting needs &mut self).
        unsafe { std::slice::from_raw_parts(self.slots.as_ptr().add(slot * self.slot_bytes + GRH_BYTES), len) }
    }

    #[inline]
    fn post(&mut self, slot: usize) -> Result<(), McastError> {
        let sge = self.slots.sge(slot * self.slot_bytes, self.slot_bytes);
        // SAFETY: the slot lies in `slots`, which outlives the QP, and nothing reads it until
        // its next completion.
        unsafe { self.qp.post_recv(slot as u64, sge)? };
        Ok(())
    }
}
