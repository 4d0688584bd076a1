//! The ud-mcast subscriber: a UD QP joined to the group, receive slots in registered hugepage
//! memory (each one MTU plus the GRH, so no datagram can overflow one), polled from the CQ,
//! checked and sequenced.
use std::net::Ipv4Addr;
use std::sync::Arc;

use super::error::McastError;
use super::frame;
use super::publisher::DEFAULT_QKEY;
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
}

/// Subscribes to one stream on one multicast group. Delivers in sequence order, reports every
/// lost message in a [`Gap`], and never delivers a frame twice.
pub struct McastSubscriber {
    // Drop order: leave the group, then destroy the QP, then deregister its receive slots.
    _membership: McastMembership,
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
    /// A completion held back while the gap before it is reported.
    held: Option<Completion>,
    stats: McastStats,
    wc: [Completion; 1],
    _ctx: Arc<Context>,
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
            qp,
            slots,
            slot_bytes,
            group,
            stream,
            session: None,
            expected: None,
            repost: None,
            held: None,
            stats: McastStats::default(),
            wc: [Completion::EMPTY; 1],
            _ctx: ctx,
        })
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
                self.expected = Some(h.seq);
                self.stats.gaps += 1;
                self.stats.missed += h.seq - expected;
                return Ok(Some(Recv::Gap(Gap { expected, resumed_at: h.seq })));
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
