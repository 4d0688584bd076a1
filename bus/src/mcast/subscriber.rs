//! The ud-mcast subscriber: a UD QP joined to the group, receive slots in registered hugepage
//! memory (each one MTU plus the GRH, so no datagram can overflow one), polled from the CQ,
//! checked and sequenced by [`crate::wire::sequencer`] (which keeps forged and replayed frames
//! out), with lost messages recovered from the publisher's history without ever blocking.
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use super::error::McastError;
use super::frame;
use super::publisher::{stream_qkey, DEFAULT_QKEY};
use super::recovery::{ReadState, RecoveryClient, READ_PATIENCE};
use crate::counters::{Counter, Counters, Role, Transport};
use crate::ring::{Delivery, Gap, Recv, RecvInto};
use crate::sys::verbs::{ffi, Completion, Context, HugeBuf, MemoryRegion, UdQp, GRH_BYTES};
use crate::time::Tsc;
use crate::wire::sequencer::{Bounds, Sequencer, Verdict};

/// How a subscriber receives.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct McastSubscriberOptions {
    /// Device name; default `TICKBUS_RDMA_DEVICE`, else the first device.
    pub device: Option<String>,
    /// Receive slots kept posted: how many datagrams may arrive between two polls before the
    /// NIC drops (and the subscriber reports a gap).
    pub depth: u32,
    /// The queue key when no token is set.
    pub qkey: u32,
    /// The stream's shared secret: the queue key is derived from it (as the publisher's).
    pub token: Option<Vec<u8>>,
    /// Fail when the receive buffers cannot be on hugepages (instead of falling back to 4 KiB
    /// pages).
    pub require_hugepages: bool,
    /// Largest gap believed from one frame (with recovery, at least the history's size); a
    /// longer jump needs `confirm` consecutive frames, or as many heartbeats (see
    /// `wire::sequencer`), so one forged far-ahead frame cannot make the real stream "late".
    pub max_jump: u64,
    /// Frames (or heartbeats) in a row that must agree before a jump past `max_jump` is believed.
    pub confirm: u32,
    /// How long the current publisher run must be silent before another run (a restarted
    /// publisher, a new session) is followed.
    pub session_quiet: Duration,
}

impl Default for McastSubscriberOptions {
    fn default() -> Self {
        McastSubscriberOptions {
            device: std::env::var("TICKBUS_RDMA_DEVICE").ok(),
            depth: 1024,
            qkey: DEFAULT_QKEY,
            token: None,
            require_hugepages: false,
            max_jump: 1 << 16,
            confirm: 3,
            session_quiet: Duration::from_millis(500),
        }
    }
}

/// What a subscriber has seen besides the messages it delivered.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct McastStats {
    /// Messages delivered.
    pub delivered: u64,
    /// Messages reported lost in gaps.
    pub missed: u64,
    /// Gaps reported.
    pub gaps: u64,
    /// Heartbeats received.
    pub heartbeats: u64,
    /// Datagrams that were not tickbus frames (each also returned as an error once).
    pub malformed: u64,
    /// Frames of other streams sharing the group (skipped).
    pub other_streams: u64,
    /// Frames older than the next expected one: duplicates or reordered (dropped).
    pub late: u64,
    /// Frames not believed (a jump too far, another publisher run), dropped.
    pub unconfirmed: u64,
    /// Publisher runs followed after the first (a restarted publisher restarts its sequence).
    pub new_sessions: u64,
    /// Messages delivered from the publisher's history after the fabric lost them (included
    /// in `delivered`).
    pub recovered: u64,
    /// Recovery READs that failed; recovery is off after one (see `take_recovery_error`).
    pub recovery_failures: u64,
}

/// A gap being recovered: `[next, end)` from the publisher's history.
#[derive(Debug, Clone, Copy)]
struct Recovering {
    next: u64,
    end: u64,
    /// TSC when the READ in flight was posted (None: none in flight).
    reading_since: Option<u64>,
}

/// Subscribes to one stream on one multicast group. Delivers in sequence order, reports every
/// lost message in a [`Gap`], and never delivers a frame twice.
pub struct McastSubscriber {
    // Drop order: the QP (which leaves the group) before its receive slots.
    recovery: Option<RecoveryClient>,
    qp: UdQp,
    slots: MemoryRegion,
    slot_bytes: usize,
    group: Ipv4Addr,
    qkey: u32,
    seq_stream: u32,
    seq: Sequencer,
    /// A slot whose message was delivered last call: posted again on the next call.
    repost: Option<usize>,
    /// A completion held back while the gap before it is reported or recovered.
    held: Option<Completion>,
    /// Where the last message delivered lies (its bytes stay valid until the next call), and
    /// whether to deliver it again: `try_recv_into` with another length leaves it for
    /// `try_recv`, as a ring reader does.
    last: Option<Last>,
    again: bool,
    recovering: Option<Recovering>,
    recovery_error: Option<McastError>,
    stats: McastStats,
    /// This stream's record for `tickbus stat`.
    counters: Counters,
    wc: [Completion; 1],
    tsc: Tsc,
    patience_ticks: u64,
    ctx: Arc<Context>,
}

/// Where a delivered message's bytes are: a receive slot (`slot`, the datagram's length, the
/// payload's start and length) or the recovery landing buffer (`off`, `len`).
#[derive(Debug, Clone, Copy)]
enum Last {
    Slot { position: u64, slot: usize, datagram: usize, start: usize, len: usize },
    Landing { position: u64, off: usize, len: usize },
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
    /// A READ is in flight: nothing to deliver yet.
    Waiting,
    Done,
}

impl std::fmt::Debug for McastSubscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McastSubscriber")
            .field("group", &self.group)
            .field("stream", &self.seq_stream)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
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
        let qkey = opts.token.as_deref().map_or(opts.qkey, |t| stream_qkey(t, stream));
        let mut qp = UdQp::new(&ctx, depth, qkey)?;
        let slot_bytes = (GRH_BYTES + ctx.port().mtu_bytes()).next_multiple_of(64);
        let buf = HugeBuf::hugepages_or_pages(slot_bytes * depth as usize, opts.require_hugepages)?;
        let slots = MemoryRegion::register(&ctx, buf, ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0)?;
        for i in 0..depth as usize {
            // SAFETY: the slot lies in `slots`, which outlives the QP (field order).
            unsafe { qp.post_recv(i as u64, slots.sge(i * slot_bytes, slot_bytes))? };
        }
        qp.join_multicast(group)?;
        let ticks = crate::time::ticks_per_ns();
        let bounds = Bounds {
            max_jump: opts.max_jump,
            confirm: opts.confirm,
            quiet_ticks: (opts.session_quiet.as_nanos() as f64 * ticks) as u64,
        };
        Ok(McastSubscriber {
            recovery: None,
            qp,
            slots,
            slot_bytes,
            group,
            qkey,
            seq_stream: stream,
            seq: Sequencer::new(stream, bounds),
            repost: None,
            held: None,
            last: None,
            again: false,
            recovering: None,
            recovery_error: None,
            stats: McastStats::default(),
            counters: crate::counters::register(Role::Subscriber, Transport::UdMcast, stream, &group.to_string()),
            wc: [Completion::EMPTY; 1],
            tsc: Tsc::new(),
            patience_ticks: (READ_PATIENCE.as_nanos() as f64 * ticks) as u64,
            ctx,
        })
    }

    /// Connects to the publisher's recovery listener ([`super::McastPublisher::listen_recovery`])
    /// with the shared `token`. From then on a gap is first recovered by RDMA-READing the lost
    /// messages from the publisher's history, `batch` slots per READ; only messages the history
    /// no longer holds are reported as a gap, and jumps up to (at least) the history's size are
    /// believed from one frame. The publisher run it recovers from is the one the (authenticated)
    /// handshake names. Set-up: syscalls, may wait up to `timeout`.
    pub fn connect_recovery(
        &mut self,
        addr: SocketAddr,
        token: &[u8],
        batch: u32,
        timeout: Duration,
    ) -> Result<(), McastError> {
        // A redelivery from the old client's landing buffer would read the new one's.
        (self.last, self.again) = (None, false);
        let stream = self.seq_stream;
        let r = RecoveryClient::connect(&self.ctx, addr, token, stream, batch, timeout)?;
        if r.history.qkey != self.qkey {
            return Err(McastError::io(
                "connecting recovery",
                std::io::Error::other(format!(
                    "the stream's queue key is {:#x}, this subscriber's {:#x}: join with the stream's token",
                    r.history.qkey, self.qkey
                )),
            ));
        }
        self.seq.set_max_jump(self.seq.max_jump().max(r.history.slots));
        self.recovery = Some(r);
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

    /// The next message, a gap, or nothing yet. No syscall, no allocation, never waits: while a
    /// recovery READ is in flight it returns `None`. A message's bytes are valid until the next
    /// call (its slot is posted again then). A datagram that is not a frame of ours is dropped
    /// and returned once as [`McastError::Frame`] (retryable: poll on); a failed completion is
    /// fatal for this subscriber.
    #[inline]
    pub fn try_recv(&mut self) -> Result<Option<Recv<'_>>, McastError> {
        if std::mem::take(&mut self.again) {
            if let Some(last) = self.last {
                return Ok(Some(Recv::Message(self.delivery(last))));
            }
        }
        if let Some(slot) = self.repost.take() {
            self.post(slot)?;
        }
        loop {
            if let Some(r) = self.recovering {
                match self.recover_step(r) {
                    Step::Message { seq, off, len } => {
                        let last = Last::Landing { position: seq, off, len };
                        self.last = Some(last);
                        return Ok(Some(Recv::Message(self.delivery(last))));
                    }
                    Step::Gap(g) => return Ok(Some(Recv::Gap(g))),
                    Step::Waiting => return Ok(None),
                    Step::Done => self.recovering = None,
                }
            }
            let c = match self.held.take() {
                Some(c) => c, // counted when it was polled
                None => match self.qp.cq().poll(&mut self.wc)? {
                    0 => return Ok(None),
                    _ => {
                        self.counters.add(Counter::Datagrams, 1);
                        self.wc[0]
                    }
                },
            };
            if !c.is_ok() {
                self.counters.completion_error(c.status);
                return Err(McastError::completion("subscriber receive", c.status));
            }
            let slot = c.wr_id as usize;
            let len = (c.byte_len as usize).saturating_sub(GRH_BYTES).min(self.slot_bytes - GRH_BYTES);
            let h = match frame::parse(self.bytes(slot, len)) {
                Ok((h, _)) => h,
                Err(error) => {
                    self.stats.malformed += 1;
                    self.post(slot)?;
                    return Err(McastError::Frame { group: self.group, error });
                }
            };
            let before = self.seq.session_changes();
            let tsc = &self.tsc;
            let verdict = self.seq.classify(&h, || tsc.now());
            if self.seq.session_changes() != before {
                self.new_session();
            }
            match verdict {
                Verdict::Deliver => {
                    self.stats.delivered += 1;
                    self.counters.add(Counter::Messages, 1);
                    self.counters.add(Counter::Bytes, u64::from(h.len));
                    self.counters.set(Counter::Position, h.seq + 1);
                    self.repost = Some(slot);
                    let last = Last::Slot {
                        position: h.seq,
                        slot,
                        datagram: len,
                        start: usize::from(h.header_len),
                        len: h.len as usize,
                    };
                    self.last = Some(last);
                    return Ok(Some(Recv::Message(self.delivery(last))));
                }
                Verdict::Gap { from, to } => {
                    self.held = Some(c);
                    if self.recovery.is_some() {
                        self.recovering = Some(Recovering { next: from, end: to, reading_since: None });
                        continue;
                    }
                    return Ok(Some(Recv::Gap(self.gap(from, to))));
                }
                Verdict::Heartbeat => {
                    self.stats.heartbeats += 1;
                    self.counters.add(Counter::Heartbeats, 1);
                }
                Verdict::Late => self.stats.late += 1,
                Verdict::OtherStream => self.stats.other_streams += 1,
                Verdict::Unconfirmed => self.stats.unconfirmed += 1,
            }
            self.post(slot)?;
        }
    }

    /// A new publisher run is followed: its history is not the one recovery was set up for.
    #[cold]
    fn new_session(&mut self) {
        // A message held for redelivery belongs to the session that ended.
        (self.last, self.again) = (None, false);
        self.stats.new_sessions += 1;
        self.recovering = None;
        if self.recovery.take().is_some() {
            self.recovery_error = Some(McastError::io(
                "recovery",
                std::io::Error::other("the publisher restarted (a new session): connect recovery again"),
            ));
        }
    }

    /// Reports `[from, to)` lost and moves on past it.
    fn gap(&mut self, from: u64, to: u64) -> Gap {
        self.seq.advance_to(to);
        self.stats.gaps += 1;
        self.stats.missed += to - from;
        // A gap delivered is lost for good: recovery, when it works, delivers instead.
        self.counters.add(Counter::Gaps, 1);
        self.counters.add(Counter::Missed, to - from);
        self.counters.add(Counter::Lost, to - from);
        self.counters.set(Counter::Position, to);
        Gap { expected: from, resumed_at: to }
    }

    /// One step of recovering: the next message from the history, a gap for what the history
    /// no longer holds (or for everything left, if a READ fails), or `Waiting` while a READ is
    /// in flight.
    #[cold]
    fn recover_step(&mut self, r: Recovering) -> Step {
        let Some(client) = self.recovery.as_mut() else { return Step::Done };
        let Recovering { next, end, reading_since } = r;
        if next >= end {
            return Step::Done;
        }
        // The publisher has sent `end`, so it has rewritten every slot of `end - slots` and before.
        let oldest = end.saturating_add(1).saturating_sub(client.history.slots);
        if next < oldest {
            self.recovering = Some(Recovering { next: oldest, end, reading_since: None });
            return Step::Gap(self.gap(next, oldest));
        }
        if reading_since.is_some() || !client.holds(next) {
            let outcome = match reading_since {
                None => client.start(next, end - next).map(|()| ReadState::Pending),
                Some(_) => client.poll(),
            };
            match outcome {
                Ok(ReadState::Landed) => self.recovering = Some(Recovering { next, end, reading_since: None }),
                Ok(ReadState::Pending) => {
                    let now = self.tsc.now();
                    let since = reading_since.unwrap_or(now);
                    if now.wrapping_sub(since) <= self.patience_ticks {
                        self.recovering = Some(Recovering { next, end, reading_since: Some(since) });
                        return Step::Waiting;
                    }
                    return self.recovery_failed(McastError::RecoveryTimeout, next, end);
                }
                Err(e) => return self.recovery_failed(e, next, end),
            }
        }
        let client = self.recovery.as_ref().expect("checked above");
        match client.frame(next, self.seq_stream) {
            Some((_, off, len)) => {
                self.recovering = Some(Recovering { next: next + 1, end, reading_since: None });
                self.seq.advance_to(next + 1);
                self.stats.recovered += 1;
                self.stats.delivered += 1;
                self.counters.add(Counter::Recovered, 1);
                self.counters.add(Counter::Messages, 1);
                self.counters.add(Counter::Bytes, len as u64);
                self.counters.set(Counter::Position, next + 1);
                Step::Message { seq: next, off, len }
            }
            None => {
                // Overwritten meanwhile: lost for good, up to the next copy that is intact.
                let mut k = next + 1;
                while k < end && client.holds(k) && client.frame(k, self.seq_stream).is_none() {
                    k += 1;
                }
                self.recovering = Some(Recovering { next: k, end, reading_since: None });
                Step::Gap(self.gap(next, k))
            }
        }
    }

    /// A READ failed: recovery is off, everything left of the gap is reported lost.
    #[cold]
    fn recovery_failed(&mut self, e: McastError, next: u64, end: u64) -> Step {
        self.recovery = None;
        self.recovery_error = Some(e);
        self.stats.recovery_failures += 1;
        self.recovering = Some(Recovering { next: end, end, reading_since: None });
        Step::Gap(self.gap(next, end))
    }

    /// The sequence number of the next message this subscriber will deliver (0 before the
    /// first frame).
    pub fn next_position(&self) -> u64 {
        self.seq.expected().unwrap_or(0)
    }

    /// The largest message a datagram carries on this port.
    pub fn max_payload(&self) -> usize {
        self.slot_bytes - GRH_BYTES - super::frame::HEADER_BYTES
    }

    /// What it has seen so far.
    pub fn stats(&self) -> McastStats {
        self.stats
    }

    /// The multicast group joined.
    pub fn group(&self) -> Ipv4Addr {
        self.group
    }

    /// The queue key this subscriber's QP accepts.
    pub fn qkey(&self) -> u32 {
        self.qkey
    }

    /// The next message if it is exactly `out.len()` bytes, copied into `out`; one of another
    /// length is reported ([`RecvInto::OtherLength`]) and delivered again by the next
    /// [`McastSubscriber::try_recv`] (or this call, with a buffer of its length). Gaps as
    /// `try_recv`. No syscall, no allocation.
    #[inline]
    pub fn try_recv_into(&mut self, out: &mut [u8]) -> Result<Option<RecvInto>, McastError> {
        let (position, len) = match self.try_recv()? {
            None => return Ok(None),
            Some(Recv::Gap(g)) => return Ok(Some(RecvInto::Gap(g))),
            Some(Recv::Message(d)) if d.payload.len() == out.len() => {
                out.copy_from_slice(d.payload);
                return Ok(Some(RecvInto::Message { position: d.position }));
            }
            Some(Recv::Message(d)) => (d.position, d.payload.len()),
        };
        self.again = true;
        Ok(Some(RecvInto::OtherLength { position, len }))
    }

    /// The bytes of a message delivered by the current call.
    fn delivery(&self, last: Last) -> Delivery<'_> {
        match last {
            Last::Slot { position, slot, datagram, start, len } => {
                Delivery { position, payload: &self.bytes(slot, datagram)[start..start + len] }
            }
            Last::Landing { position, off, len } => {
                let r = self.recovery.as_ref().expect("recovering without a client");
                Delivery { position, payload: r.landing_bytes(off, len) }
            }
        }
    }

    /// The datagram in `slot` (after its GRH), `len` bytes.
    #[inline]
    fn bytes(&self, slot: usize, len: usize) -> &[u8] {
        assert!(slot < self.slots.len() / self.slot_bytes && GRH_BYTES + len <= self.slot_bytes);
        // SAFETY: the slot lies inside the registration (checked); its receive completed and it
        // is not posted again while this borrow of self lives (posting needs &mut self).
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
