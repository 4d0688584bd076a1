//! The ud-mcast publisher: one UD SEND per message to a multicast group, from registered slots,
//! inline when the frame fits, selectively signalled, completions reaped without waiting; a
//! burst ([`McastPublisher::publish_batch`]) goes as one chained post, one doorbell.
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::McastError;
use super::frame::{FrameHeader, HEADER_BYTES};
use super::recovery::{self, History, RecoveryServer};
use super::MULTICAST_QPN;
use crate::counters::{Counter, Counters, Role, Transport};
use crate::sys::verbs::{ffi, AddressHandle, Completion, Context, Gid, HugeBuf, MemoryRegion, SendWr, UdQp, MAX_CHAIN};

/// Queue key of tickbus multicast streams without a token (publisher and subscribers must
/// agree). It is public: anyone on the fabric can send datagrams a subscriber's NIC accepts.
/// Give the stream a token and the key is derived from it ([`stream_qkey`]).
pub const DEFAULT_QKEY: u32 = 0x7B11_0001;

/// The queue key of `stream` for holders of `token`: HMAC-SHA256(token, "tickbus-mcast-qkey" |
/// stream), 31 bits (keys with the top bit set are privileged). Datagrams with another key are
/// dropped by the receiving NIC. A QKEY travels in the clear in every packet, so it keeps out
/// senders that never saw the stream, not an eavesdropper on the fabric.
pub fn stream_qkey(token: &[u8], stream: u32) -> u32 {
    use hmac::{Hmac, Mac};
    let mut m = <Hmac<sha2::Sha256> as Mac>::new_from_slice(token).expect("HMAC takes any key length");
    m.update(b"tickbus-mcast-qkey");
    m.update(&stream.to_le_bytes());
    let d = m.finalize().into_bytes();
    u32::from_le_bytes([d[0], d[1], d[2], d[3]]) & 0x7FFF_FFFF
}

/// How a publisher sends.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct McastPublisherOptions {
    /// Device name; default `TICKBUS_RDMA_DEVICE`, else the first device.
    pub device: Option<String>,
    /// Send-queue depth: how many datagrams may wait for the NIC.
    pub depth: u32,
    /// Send slots, kept as the history subscribers recover lost messages from (at least
    /// `depth`): the last `history` messages can be recovered.
    pub history: u32,
    /// One send in this many asks for a completion (at most depth / 2).
    pub signal_every: u32,
    /// The queue key when no token is set.
    pub qkey: u32,
    /// The stream's shared secret: the queue key is derived from it ([`stream_qkey`]), and
    /// recovery requires it.
    pub token: Option<Vec<u8>>,
    /// Fail when the history buffer cannot be on hugepages (instead of falling back to 4 KiB
    /// pages).
    pub require_hugepages: bool,
    /// How long one recovery handshake may take.
    pub handshake_timeout: Duration,
}

impl Default for McastPublisherOptions {
    fn default() -> Self {
        McastPublisherOptions {
            device: std::env::var("TICKBUS_RDMA_DEVICE").ok(),
            depth: 256,
            history: 1024,
            signal_every: 32,
            qkey: DEFAULT_QKEY,
            token: None,
            require_hugepages: false,
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

impl McastPublisherOptions {
    /// The queue key this stream uses.
    pub fn qkey_for(&self, stream: u32) -> u32 {
        self.token.as_deref().map_or(self.qkey, |t| stream_qkey(t, stream))
    }
}

/// Publishes one stream to one multicast group. Lossy: the publisher never waits for
/// subscribers; they detect loss from the sequence numbers (and from [`Self::heartbeat`]).
pub struct McastPublisher {
    // Drop order: the QPs first (no send or READ can touch the slots or the AH after them).
    qp: UdQp,
    recovery: Option<RecoveryServer>,
    ah: AddressHandle,
    /// The history registered again for remote READs, once recovery is offered.
    readable: Option<Arc<MemoryRegion>>,
    slots: Arc<MemoryRegion>,
    slot_bytes: usize,
    depth: u64,
    history: u64,
    qkey: u32,
    handshake_timeout: Duration,
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
    /// A failure found after messages were already sent (a failed completion, a chain the
    /// provider took only part of): the next publish, heartbeat or flush reports it.
    failed: Option<McastError>,
    wc: [Completion; 16],
    /// This stream's record for `tickbus stat`.
    counters: Counters,
    ctx: Arc<Context>,
    /// A claim's bytes until its commit (`stream::Staged`), one datagram's payload, made here.
    pub(crate) stage: Box<[u8]>,
}

impl std::fmt::Debug for McastPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McastPublisher")
            .field("group", &self.group)
            .field("stream", &self.stream)
            .field("next_seq", &self.next_seq)
            .finish_non_exhaustive()
    }
}

impl McastPublisher {
    /// Opens the device, creates a UD QP and an address handle for `group`, and registers
    /// `history + 1` send slots (the last one for heartbeats) of one MTU each, LOCAL_WRITE only
    /// (until [`Self::listen_recovery`]).
    pub fn new(group: Ipv4Addr, stream: u32, opts: &McastPublisherOptions) -> Result<McastPublisher, McastError> {
        if !group.is_multicast() {
            return Err(McastError::NotMulticast { group });
        }
        let ctx = Context::open(opts.device.as_deref())?;
        let mtu = ctx.port().mtu_bytes();
        let depth = opts.depth.max(2);
        let qkey = opts.qkey_for(stream);
        let qp = UdQp::new(&ctx, depth, qkey)?;
        let ah = AddressHandle::new(&ctx, Gid::from_ipv4(group))?;
        let history = opts.history.max(depth);
        let slot_bytes = recovery::slot_bytes(mtu);
        let buf = HugeBuf::hugepages_or_pages(slot_bytes * (history as usize + 1), opts.require_hugepages)?;
        let slots = Arc::new(MemoryRegion::register(&ctx, buf, ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0)?);
        let session =
            u64::from_le_bytes(crate::sys::random::bytes().map_err(|e| McastError::io("reading /dev/urandom", e))?);
        Ok(McastPublisher {
            inline_max: qp.max_inline() as usize,
            qp,
            recovery: None,
            ah,
            readable: None,
            slots,
            slot_bytes,
            depth: u64::from(depth),
            history: u64::from(history),
            qkey,
            handshake_timeout: opts.handshake_timeout,
            signal_every: u64::from(opts.signal_every.clamp(1, depth / 2)),
            max_payload: mtu - HEADER_BYTES,
            mtu,
            stream,
            session,
            group,
            next_seq: 0,
            posted: 0,
            reaped: 0,
            slot_wr: vec![0; history as usize + 1].into_boxed_slice(),
            failed: None,
            wc: [Completion::EMPTY; 16],
            counters: crate::counters::register(Role::Publisher, Transport::UdMcast, stream, &group.to_string()),
            ctx,
            stage: vec![0u8; mtu - HEADER_BYTES].into_boxed_slice(),
        })
    }

    /// Sends `payload` as the stream's next message; returns its sequence number. No syscall
    /// but the provider's doorbell, no allocation, never waits: a full send queue is
    /// [`McastError::SendQueueFull`] (retryable, nothing sent). An error may also be a failure
    /// found after an earlier call's messages went out (a failed completion, a chain cut
    /// short): nothing of this call was sent then either; [`Self::next_seq`] says what was.
    #[inline]
    pub fn publish(&mut self, payload: &[u8]) -> Result<u64, McastError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if payload.len() > self.max_payload {
            return Err(McastError::TooLarge { len: payload.len(), max: self.max_payload, mtu: self.mtu });
        }
        let seq = self.next_seq;
        self.make_room((seq % self.history) as usize)?;
        let wr = self.stage(0, payload);
        // SAFETY: the slot's frame stays untouched until this WR completes (slot_wr; make_room
        // saw the slot free), or is copied at post time (inline); the AH lives as long as the QP.
        unsafe { self.qp.post_send(wr.wr_id, wr.sge, &self.ah, MULTICAST_QPN, wr.signaled, wr.inline)? };
        self.sent(1, payload.len() as u64);
        Ok(seq)
    }

    /// Most messages one [`Self::publish_batch`] takes: a chain's limit, and at most half the
    /// send queue (so a burst never waits on a full queue's last completions).
    pub fn max_batch(&self) -> usize {
        MAX_CHAIN.min(self.depth as usize / 2)
    }

    /// Sends a burst of up to [`Self::max_batch`] messages as one chained post (one doorbell
    /// instead of one per message, as perftest's `--post_list` does). Returns the first
    /// message's sequence number and how many were sent: fewer than asked when the send queue
    /// or the history filled ([`McastError::SendQueueFull`] when none fit), or when the
    /// provider took only part of the chain (its error then comes with the next call). A
    /// message too large for a datagram refuses the whole burst before anything is sent. No
    /// allocation, no syscall but the doorbell, never waits.
    #[inline]
    pub fn publish_batch(&mut self, payloads: &[&[u8]]) -> Result<(u64, usize), McastError> {
        assert!(payloads.len() <= self.max_batch(), "at most {} messages per batch", self.max_batch());
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if let Some(p) = payloads.iter().find(|p| p.len() > self.max_payload) {
            return Err(McastError::TooLarge { len: p.len(), max: self.max_payload, mtu: self.mtu });
        }
        let first = self.next_seq;
        if payloads.is_empty() {
            return Ok((first, 0));
        }
        let mut n = self.room(payloads.len());
        if n < payloads.len() {
            self.reap()?;
            n = self.room(payloads.len());
        }
        if n == 0 {
            return Err(McastError::SendQueueFull { depth: self.depth });
        }
        let mut wrs = [SendWr::EMPTY; MAX_CHAIN];
        for (k, (p, wr)) in payloads[..n].iter().zip(&mut wrs).enumerate() {
            *wr = self.stage(k as u64, p);
        }
        // SAFETY: each slot's frame stays untouched until its WR completes (slot_wr; room()
        // saw every slot of the burst free), or is copied at post time (inline); the AH lives
        // as long as the QP.
        let posted = unsafe { self.qp.post_sends(&wrs[..n], &self.ah, MULTICAST_QPN) };
        if let Err((taken, e)) = posted {
            if taken == 0 {
                return Err(e.into());
            }
            // The first `taken` go out and complete: account for them (their sequence numbers
            // are not reused, their completions match what was posted), report them as a short
            // burst, and the error with the next call.
            self.sent(taken as u64, payloads[..taken].iter().map(|p| p.len() as u64).sum());
            // A completion failure the reap in `sent` kept came first: that one is reported.
            self.failed.get_or_insert(e.into());
            return Ok((first, taken));
        }
        self.sent(n as u64, payloads[..n].iter().map(|p| p.len() as u64).sum());
        Ok((first, n))
    }

    /// Sends a heartbeat: a frame with no message that carries the next sequence number, so
    /// subscribers that lost the latest messages learn of the gap now. Call it when the stream
    /// goes quiet (e.g. every millisecond without traffic) and before shutting down.
    pub fn heartbeat(&mut self) -> Result<(), McastError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let slot = self.history as usize;
        self.make_room(slot)?;
        let header = FrameHeader::heartbeat(self.stream, self.session, self.next_seq);
        let n = self.write_slot(slot, u64::MAX - 1, &header, &[]);
        self.post(slot, n, true)?;
        self.slot_wr[slot] = self.posted; // the heartbeat's ordinal + 1
        self.counters.add(Counter::Heartbeats, 1);
        Ok(())
    }

    /// Waits until the NIC has sent everything posted (a heartbeat is sent to mark the end), or
    /// `timeout` passes. Call before dropping the publisher: destroying the QP discards sends
    /// the NIC has not made yet.
    pub fn flush(&mut self, timeout: Duration) -> Result<(), McastError> {
        // A failure kept from an earlier publish is reported, but only after draining: the
        // messages that did go out (or wait in the queue for a doorbell) must not be discarded.
        let kept = self.failed.take();
        let drained = self.heartbeat().and_then(|()| self.drain(timeout));
        match kept {
            Some(e) => Err(e),
            None => drained,
        }
    }

    /// Reaps until every posted send completed, or `timeout` passes.
    fn drain(&mut self, timeout: Duration) -> Result<(), McastError> {
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

    /// Offers gap recovery: subscribers may connect at `addr` (port 0: any) and, after proving
    /// `token`, RDMA-READ lost messages from the history. Registers the history slots again with
    /// REMOTE_READ (nothing else) and takes recovery connections on threads of its own from now
    /// on (never on the publishing thread). Returns the address to give subscribers.
    pub fn listen_recovery(&mut self, addr: SocketAddr, token: impl Into<Vec<u8>>) -> Result<SocketAddr, McastError> {
        let listener = TcpListener::bind(addr).map_err(|e| McastError::io("binding the recovery listener", e))?;
        let at = listener.local_addr().map_err(|e| McastError::io("binding the recovery listener", e))?;
        let readable = match &self.readable {
            Some(r) => r.clone(),
            None => {
                use ffi::ibv_access_flags as A;
                let len = self.slot_bytes * self.history as usize;
                let access = A::IBV_ACCESS_LOCAL_WRITE.0 | A::IBV_ACCESS_REMOTE_READ.0;
                let r = Arc::new(MemoryRegion::register_within(&self.ctx, &self.slots, 0, len, access)?);
                self.readable = Some(r.clone());
                r
            }
        };
        let h = History { session: self.session, slot_bytes: self.slot_bytes, slots: self.history, qkey: self.qkey };
        let server = RecoveryServer::start(
            self.ctx.clone(),
            listener,
            token.into(),
            self.stream,
            h,
            readable,
            self.handshake_timeout,
        )?;
        self.recovery = Some(server);
        Ok(at)
    }

    /// Waits up to `timeout` for the next subscriber's recovery connection (taken in on the
    /// recovery server's threads) and returns how its handshake went. Optional: connections
    /// are taken in whether or not anyone waits for them.
    pub fn accept_recovery(&mut self, timeout: Duration) -> Result<(), McastError> {
        match &self.recovery {
            Some(r) => r.next(timeout),
            None => Err(McastError::io(
                "accepting a recovery connection",
                std::io::Error::other("call listen_recovery first"),
            )),
        }
    }

    /// The queue key this stream's datagrams carry.
    pub fn qkey(&self) -> u32 {
        self.qkey
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

    /// The stream id stamped in every frame.
    pub fn stream(&self) -> u32 {
        self.stream
    }

    /// The port's UD MTU (a datagram's largest size).
    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// Whether a message of `len` bytes goes inline (the NIC copies it at post time).
    pub fn inline(&self, len: usize) -> bool {
        HEADER_BYTES + len <= self.inline_max
    }

    /// The multicast group published to.
    pub fn group(&self) -> Ipv4Addr {
        self.group
    }

    /// Ok when the send queue has room and `slot` is no longer read by the NIC, reaping
    /// completions once if needed.
    #[inline]
    fn make_room(&mut self, slot: usize) -> Result<(), McastError> {
        if !self.fits(0, slot) {
            self.reap()?;
            if !self.fits(0, slot) {
                return Err(McastError::SendQueueFull { depth: self.depth });
            }
        }
        Ok(())
    }

    /// Writes the message `k` places after the next one into its slot and describes its SEND
    /// (not posted yet: its WR is the `k`th after those posted). The caller has made room; the
    /// slot is marked in use ([`Self::sent`]) only once the SEND was posted.
    #[inline]
    fn stage(&mut self, k: u64, payload: &[u8]) -> SendWr {
        let (seq, ordinal) = (self.next_seq + k, self.posted + k);
        let slot = (seq % self.history) as usize;
        let header = FrameHeader::new(self.stream, self.session, seq, payload.len());
        let len = self.write_slot(slot, seq, &header, payload);
        SendWr {
            wr_id: ordinal,
            sge: self.slots.sge(slot * self.slot_bytes + 8, len),
            signaled: (ordinal + 1).is_multiple_of(self.signal_every),
            inline: len <= self.inline_max,
        }
    }

    /// Accounts for `n` staged messages (`bytes` of payload) now posted, and reaps completions
    /// once half the send queue is outstanding. The messages went out whatever the reap finds:
    /// a failed completion is kept for the next call (`failed`) rather than reported as if
    /// they had not.
    #[inline]
    fn sent(&mut self, n: u64, bytes: u64) {
        for k in 0..n {
            let slot = ((self.next_seq + k) % self.history) as usize;
            self.slot_wr[slot] = self.posted + k + 1;
        }
        self.posted += n;
        self.next_seq += n;
        self.counters.add(Counter::Messages, n);
        self.counters.add(Counter::Bytes, bytes);
        self.counters.set(Counter::Position, self.next_seq);
        if self.posted - self.reaped >= self.depth / 2 {
            if let Err(e) = self.reap() {
                self.failed = Some(e);
            }
        }
    }

    /// How many of the next `want` messages fit now: the send queue has room for each, and the
    /// history slot each reuses is no longer read by the NIC (slots free up in sequence order,
    /// so the first that does not fit ends the count).
    #[inline]
    fn room(&self, want: usize) -> usize {
        (0..want as u64).take_while(|&k| self.fits(k, ((self.next_seq + k) % self.history) as usize)).count()
    }

    /// Whether the `k`th send after those posted fits the send queue and may use `slot` (the
    /// NIC no longer reads it: its last WR was reaped).
    #[inline(always)]
    fn fits(&self, k: u64, slot: usize) -> bool {
        self.posted + k - self.reaped < self.depth && self.slot_wr[slot] <= self.reaped
    }

    /// Writes the frame into `slot` as a [`crate::seqslot`], in the order remote READs rely
    /// on. Returns the frame's length.
    #[inline]
    fn write_slot(&mut self, slot: usize, seq: u64, header: &FrameHeader, payload: &[u8]) -> usize {
        let words = self.slot_bytes / 8;
        // SAFETY: slot <= history lies inside the registration (history + 1 slots of slot_bytes,
        // a multiple of 64); the memory is page-aligned, so the words are aligned AtomicU64s.
        // The NIC's sends no longer read it (make_room or room saw its last WR complete); &mut self makes
        // this the only writer; remote READs only read, and all our stores are atomic.
        let s = unsafe {
            std::slice::from_raw_parts(self.slots.as_ptr().add(slot * self.slot_bytes) as *const AtomicU64, words)
        };
        crate::seqslot::write(s, seq, zerocopy::IntoBytes::as_bytes(header), payload);
        HEADER_BYTES + payload.len()
    }

    #[inline]
    fn post(&mut self, slot: usize, n: usize, signaled: bool) -> Result<(), McastError> {
        let sge = self.slots.sge(slot * self.slot_bytes + 8, n);
        // SAFETY: the slot's frame stays untouched until this WR completes (slot_wr), or is
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
        self.counters.add(Counter::Completions, n as u64);
        for c in &self.wc[..n] {
            if !c.is_ok() {
                self.counters.completion_error(c.status);
                return Err(McastError::completion("publisher send", c.status));
            }
            self.reaped = self.reaped.max(c.wr_id + 1);
        }
        Ok(())
    }
}
