//! The ud-mcast publisher: one UD SEND per message to a multicast group, from registered slots,
//! inline when the frame fits, selectively signalled, completions reaped without waiting.
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::McastError;
use super::frame::{self, FrameHeader, HEADER_BYTES};
use super::MULTICAST_QPN;
use crate::sys::verbs::{ffi, AddressHandle, Completion, Context, Gid, HugeBuf, MemoryRegion, UdQp};

/// Default queue key of tickbus multicast streams (publisher and subscribers must agree).
pub const DEFAULT_QKEY: u32 = 0x7B11_0001;

/// How a publisher sends.
#[derive(Clone, Debug)]
pub struct McastPublisherOptions {
    /// Device name; default `TICKBUS_RDMA_DEVICE`, else the first device.
    pub device: Option<String>,
    /// Send slots, and send-queue depth: how many datagrams may wait for the NIC.
    pub depth: u32,
    /// One send in this many asks for a completion (at most depth / 2).
    pub signal_every: u32,
    pub qkey: u32,
    pub require_hugepages: bool,
}

impl Default for McastPublisherOptions {
    fn default() -> Self {
        McastPublisherOptions {
            device: std::env::var("TICKBUS_RDMA_DEVICE").ok(),
            depth: 256,
            signal_every: 32,
            qkey: DEFAULT_QKEY,
            require_hugepages: false,
        }
    }
}

/// Publishes one stream to one multicast group. Lossy: the publisher never waits for
/// subscribers; they detect loss from the sequence numbers (and from [`Self::heartbeat`]).
pub struct McastPublisher {
    // Drop order: the QP first (no send can touch the slots or the AH after it).
    qp: UdQp,
    ah: AddressHandle,
    slots: MemoryRegion,
    slot_bytes: usize,
    depth: u64,
    signal_every: u64,
    max_payload: usize,
    mtu: usize,
    inline_max: usize,
    stream: u32,
    session: u64,
    group: Ipv4Addr,
    /// Sequence number of the next message.
    next_seq: u64,
    /// Work requests posted and known complete (ordinals; a WR's wr_id is its ordinal).
    posted: u64,
    reaped: u64,
    /// Per slot (the heartbeat slot last): ordinal + 1 of the WR that last sent from it (0: never).
    slot_wr: Box<[u64]>,
    wc: [Completion; 16],
    _ctx: Arc<Context>,
}

impl McastPublisher {
    /// Opens the device, creates a UD QP and an address handle for `group`, and registers
    /// `depth + 1` send slots (the last one for heartbeats) of one MTU each, LOCAL_WRITE only.
    pub fn new(group: Ipv4Addr, stream: u32, opts: &McastPublisherOptions) -> Result<McastPublisher, McastError> {
        if !group.is_multicast() {
            return Err(McastError::NotMulticast { group });
        }
        let ctx = Context::open(opts.device.as_deref())?;
        let mtu = ctx.port().mtu_bytes();
        let depth = opts.depth.max(2);
        let qp = UdQp::new(&ctx, depth, opts.qkey)?;
        let ah = AddressHandle::new(&ctx, Gid::from_ipv4(group))?;
        let slot_bytes = mtu.next_multiple_of(64);
        let buf = HugeBuf::hugepages_or_pages(slot_bytes * (depth as usize + 1), opts.require_hugepages)?;
        let slots = MemoryRegion::register(&ctx, buf, ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0)?;
        let session = u64::from_le_bytes(
            crate::sys::random::bytes().map_err(|source| McastError::Io { what: "reading /dev/urandom", source })?,
        );
        Ok(McastPublisher {
            inline_max: qp.max_inline() as usize,
            qp,
            ah,
            slots,
            slot_bytes,
            depth: u64::from(depth),
            signal_every: u64::from(opts.signal_every.clamp(1, depth / 2)),
            max_payload: mtu - HEADER_BYTES,
            mtu,
            stream,
            session,
            group,
            next_seq: 0,
            posted: 0,
            reaped: 0,
            slot_wr: vec![0; depth as usize + 1].into_boxed_slice(),
            wc: [Completion::EMPTY; 16],
            _ctx: ctx,
        })
    }

    /// Sends `payload` as the stream's next message; returns its sequence number. No syscall
    /// but the provider's doorbell, no allocation, never waits: a full send queue is
    /// [`McastError::SendQueueFull`] (retryable, nothing sent).
    #[inline]
    pub fn publish(&mut self, payload: &[u8]) -> Result<u64, McastError> {
        if payload.len() > self.max_payload {
            return Err(McastError::TooLarge { len: payload.len(), max: self.max_payload, mtu: self.mtu });
        }
        let seq = self.next_seq;
        let slot = (seq % self.depth) as usize;
        self.make_room(slot)?;
        let header = FrameHeader::new(self.stream, self.session, seq, payload.len());
        let n = frame::write(self.slot_mut(slot), &header, payload);
        self.slot_wr[slot] = self.posted + 1;
        let signaled = (self.posted + 1).is_multiple_of(self.signal_every);
        self.post(slot, n, signaled)?;
        self.next_seq += 1;
        if self.posted - self.reaped >= self.depth / 2 {
            self.reap()?;
        }
        Ok(seq)
    }

    /// Sends a heartbeat: a frame with no message that carries the next sequence number, so
    /// subscribers that lost the latest messages learn of the gap now. Call it when the stream
    /// goes quiet (e.g. every millisecond without traffic) and before shutting down.
    pub fn heartbeat(&mut self) -> Result<(), McastError> {
        let slot = self.depth as usize;
        self.make_room(slot)?;
        let header = FrameHeader::heartbeat(self.stream, self.session, self.next_seq);
        let n = frame::write(self.slot_mut(slot), &header, &[]);
        self.slot_wr[slot] = self.posted + 1;
        self.post(slot, n, true)
    }

    /// Waits until the NIC has sent everything posted (a heartbeat is sent to mark the end), or
    /// `timeout` passes. Call before dropping the publisher: destroying the QP discards sends
    /// the NIC has not made yet.
    pub fn flush(&mut self, timeout: Duration) -> Result<(), McastError> {
        self.heartbeat()?;
        let deadline = Instant::now() + timeout;
        while self.reaped < self.posted {
            self.reap()?;
            if Instant::now() > deadline {
                return Err(McastError::Io {
                    what: "flushing the send queue",
                    source: std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("{} sends still pending after {timeout:?}", self.posted - self.reaped),
                    ),
                });
            }
            std::hint::spin_loop();
        }
        Ok(())
    }

    /// Sequence number the next message will carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// This publisher run's random session id (every frame carries it).
    pub fn session(&self) -> u64 {
        self.session
    }

    /// Largest message one datagram carries here.
    pub fn max_payload(&self) -> usize {
        self.max_payload
    }

    /// Whether a message of `len` bytes goes inline (the NIC copies it at post time).
    pub fn inline(&self, len: usize) -> bool {
        HEADER_BYTES + len <= self.inline_max
    }

    pub fn group(&self) -> Ipv4Addr {
        self.group
    }

    /// Ok when the send queue has room and `slot` is no longer read by the NIC, reaping
    /// completions once if needed.
    #[inline]
    fn make_room(&mut self, slot: usize) -> Result<(), McastError> {
        let busy = |me: &Self| me.posted - me.reaped >= me.depth || me.slot_wr[slot] > me.reaped;
        if busy(self) {
            self.reap()?;
            if busy(self) {
                return Err(McastError::SendQueueFull { depth: self.depth });
            }
        }
        Ok(())
    }

    #[inline]
    fn slot_mut(&mut self, slot: usize) -> &mut [u8] {
        // SAFETY: slot <= depth lies inside the registration (depth + 1 slots); the NIC no longer
        // reads it (make_room saw its last WR complete), and &mut self makes this the only
        // Rust reference.
        unsafe { std::slice::from_raw_parts_mut(self.slots.as_ptr().add(slot * self.slot_bytes), self.slot_bytes) }
    }

    #[inline]
    fn post(&mut self, slot: usize, n: usize, signaled: bool) -> Result<(), McastError> {
        let sge = self.slots.sge(slot * self.slot_bytes, n);
        // SAFETY: the slot's bytes stay untouched until this WR completes (slot_wr), or are
        // copied at post time (inline); the AH lives as long as the QP.
        unsafe { self.qp.post_send(self.posted, sge, &self.ah, MULTICAST_QPN, signaled, n <= self.inline_max)? };
        self.posted += 1;
        Ok(())
    }

    /// Takes the send completions there are; a signalled completion also completes every
    /// earlier unsignalled send (a send queue completes in order).
    #[inline]
    fn reap(&mut self) -> Result<(), McastError> {
        let n = self.qp.cq().poll(&mut self.wc)?;
        for c in &self.wc[..n] {
            if !c.is_ok() {
                return Err(McastError::completion("publisher send", c.status));
            }
            self.reaped = self.reaped.max(c.wr_id + 1);
        }
        Ok(())
    }
}
