//! Gap recovery for ud-mcast: a subscriber RDMA-READs the messages it lost straight out of the
//! publisher's send slots, which double as a history of its last `history` messages. The
//! publisher's CPU takes no part in a recovery: its NIC answers the READs.
//!
//! Set-up over the same authenticated TCP control channel as rdma-rc (syscalls allowed here):
//! ```text
//!  subscriber                                   publisher (accept_recovery)
//!  HELLO / AUTH as rdma-rc, for the stream  <-->
//!                                           <--  HISTORY <session> <slot_bytes> <slots>
//!                                           <--  EP <endpoint: history addr, rkey, length>
//!  EP <endpoint, no memory offered>         -->
//!                                           <--  READY
//! ```
//! The history is registered LOCAL_WRITE | REMOTE_READ and nothing else; the subscriber's QP
//! admits no remote access at all.
//!
//! History slot layout (`slot_bytes`, a multiple of 64):
//! ```text
//!  0               valid = seq + 1, stored LAST
//!  8               the frame as sent (header, message)
//!  slot_bytes - 8  lead = seq + 1, stored FIRST
//! ```
//! One READ copies memory in ascending address order (rxe does, NICs do; the spec does not
//! promise it, like rdma-rc's in-order WRITE placement). So the word stored last is copied
//! first and the word stored first is copied last: a copy that caught the publisher rewriting
//! the slot shows `valid != lead`, or a frame of another sequence number, and is refused.
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::McastError;
use super::frame::{self, FrameHeader};
use crate::rdma::handshake::{self as hs, Control};
use crate::sys::verbs::{
    ffi, Completion, ConnectedRc, Context, Endpoint, HugeBuf, MemoryRegion, PreparedRc, RcOptions,
};
use zerocopy::FromBytes;

/// Past the QP's own retry budget (about 0.5 s with the defaults), a READ that never completes
/// means the provider will not report: give up on it.
const READ_PATIENCE: Duration = Duration::from_secs(2);
/// Empty CQ polls before the wait starts reading the clock.
const PATIENT_SPINS: u32 = 1 << 16;

pub(crate) const SLOT_VALID: usize = 0;
pub(crate) const SLOT_FRAME: usize = 8;

/// Bytes per history slot for frames of up to `mtu` bytes.
pub(crate) fn slot_bytes(mtu: usize) -> usize {
    (SLOT_FRAME + mtu + 8).next_multiple_of(64)
}

/// Where the history lives and how it is laid out, as the publisher announced it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct History {
    pub session: u64,
    pub slot_bytes: usize,
    pub slots: u64,
}

/// Publisher side: answers one subscriber's recovery handshake on `listener` and returns the
/// connected QP (which the publisher only has to keep alive).
pub(crate) fn accept(
    ctx: &Arc<Context>,
    listener: &TcpListener,
    token: &[u8],
    stream: u32,
    history: (History, &MemoryRegion),
    timeout: Duration,
) -> Result<ConnectedRc, McastError> {
    let tcp = hs::accept_within(listener, timeout)?;
    let mut ctl = Control::new(tcp, timeout)?;
    hs::authenticate_subscriber(&mut ctl, token, stream)?;
    let (h, mr) = history;
    ctl.send(&format!("HISTORY {} {} {}", h.session, h.slot_bytes, h.slots))?;
    use ffi::ibv_access_flags as A;
    let qp = PreparedRc::new(ctx, RcOptions { access: A::IBV_ACCESS_REMOTE_READ.0, ..RcOptions::default() })?;
    ctl.send(&format!("EP {}", qp.endpoint(Some((mr.addr(), mr.rkey(), mr.len() as u64)))))?;
    let line = ctl.recv()?;
    let remote: Endpoint = line.strip_prefix("EP ").unwrap_or("").parse().map_err(|r| ctl.refuse(r))?;
    let qp = qp.connect(&remote)?;
    ctl.send("READY")?;
    Ok(qp)
}

/// Subscriber side: a QP connected to the publisher's history and a landing buffer for
/// `batch` slots.
pub(crate) struct RecoveryClient {
    qp: ConnectedRc,
    landing: MemoryRegion,
    remote: Endpoint,
    pub history: History,
    pub batch: u64,
    /// Landing holds the slots of `[first, first + len)`.
    first: u64,
    len: u64,
    wc: [Completion; 2],
}

impl RecoveryClient {
    pub fn connect(
        ctx: &Arc<Context>,
        addr: SocketAddr,
        token: &[u8],
        stream: u32,
        batch: u32,
        timeout: Duration,
    ) -> Result<RecoveryClient, McastError> {
        let tcp = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|source| crate::rdma::RdmaError::Connect { addr: addr.to_string(), source })?;
        let mut ctl = Control::new(tcp, timeout)?;
        hs::authenticate_to_publisher(&mut ctl, token, stream)?;
        let line = ctl.recv()?;
        let history = parse_history(&line).map_err(|r| ctl.refuse(r))?;
        let line = ctl.recv()?;
        let remote: Endpoint = line.strip_prefix("EP ").unwrap_or("").parse().map_err(|r| ctl.refuse(r))?;
        let batch = u64::from(batch.max(1)).min(history.slots);
        let buf = HugeBuf::hugepages_or_pages(history.slot_bytes * batch as usize, false)?;
        let landing = MemoryRegion::register(ctx, buf, ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0)?;
        let qp = PreparedRc::new(ctx, RcOptions { access: 0, ..RcOptions::default() })?;
        ctl.send(&format!("EP {}", qp.endpoint(None)))?;
        let qp = qp.connect(&remote)?;
        let ready = ctl.recv()?;
        if ready != "READY" {
            return Err(ctl.refuse(format!("expected READY, got {ready:?}")).into());
        }
        Ok(RecoveryClient { qp, landing, remote, history, batch, first: 0, len: 0, wc: [Completion::EMPTY; 2] })
    }

    /// Whether the landing buffer holds the slot of `seq`.
    pub fn holds(&self, seq: u64) -> bool {
        seq >= self.first && seq < self.first + self.len
    }

    /// READs the history slots of `first .. first + count` (count <= batch) into the landing
    /// buffer, as one READ or two (where the range wraps), and waits for them. No syscall but
    /// the provider's doorbell, no allocation.
    pub fn read(&mut self, first: u64, count: u64) -> Result<(), McastError> {
        let count = count.min(self.batch);
        let (sb, slots) = (self.history.slot_bytes as u64, self.history.slots);
        let start = first % slots;
        let head = count.min(slots - start);
        let parts = [(start, 0u64, head), (0, head, count - head)];
        self.len = 0;
        let mut posted = 0;
        for (k, &(slot, at, n)) in parts.iter().enumerate().filter(|(_, p)| p.2 > 0) {
            let read = crate::sys::verbs::ReadWr {
                wr_id: k as u64,
                sge: self.landing.sge((at * sb) as usize, (n * sb) as usize),
                remote_addr: self.remote.addr + slot * sb,
                rkey: self.remote.rkey,
            };
            // SAFETY: the landing bytes are ours and untouched until the completion below.
            unsafe { self.qp.post_read(read)? };
            posted += 1;
        }
        // Spin on the CQ alone first; only a READ that is slow to complete (the peer gone, the
        // path broken) consults the clock, which may be a syscall on a host without an
        // invariant TSC (quanta then falls back to the OS clock).
        let (mut done, mut spins, mut since) = (0, 0u32, None);
        while done < posted {
            let n = self.qp.send_cq().poll(&mut self.wc)?;
            for c in &self.wc[..n] {
                if !c.is_ok() {
                    return Err(McastError::completion("recovery READ", c.status));
                }
            }
            done += n;
            spins = if n == 0 { spins.saturating_add(1) } else { 0 };
            if spins > PATIENT_SPINS {
                let t0 = *since.get_or_insert_with(Instant::now);
                if t0.elapsed() > READ_PATIENCE {
                    return Err(McastError::RecoveryTimeout);
                }
            }
        }
        self.first = first;
        self.len = count;
        Ok(())
    }

    /// The frame of `seq` from the landing buffer if its copy is intact and is `seq` of this
    /// publisher run: (header, offset and length of the message in the landing buffer).
    pub fn frame(&self, seq: u64, stream: u32) -> Option<(FrameHeader, usize, usize)> {
        if !self.holds(seq) {
            return None;
        }
        let sb = self.history.slot_bytes;
        let off = (seq - self.first) as usize * sb;
        let bytes = self.landing_bytes(off, sb);
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        if word(SLOT_VALID) != seq + 1 || word(sb - 8) != seq + 1 {
            return None;
        }
        // The frame's length is in its header; parse exactly that many bytes.
        let body = &bytes[SLOT_FRAME..sb - 8];
        let (h, _) = FrameHeader::read_from_prefix(body).ok()?;
        let n = frame::HEADER_BYTES + h.len as usize;
        let (h, msg) = frame::parse(body.get(..n)?).ok()?;
        let ok = h.seq == seq && h.session == self.history.session && h.stream == stream && !h.is_heartbeat();
        let start = off + SLOT_FRAME + usize::from(h.header_len);
        ok.then_some((h, start, msg.len()))
    }

    /// `len` bytes of the landing buffer at `off`.
    pub fn landing_bytes(&self, off: usize, len: usize) -> &[u8] {
        assert!(off + len <= self.landing.len());
        // SAFETY: in bounds (checked); the NIC wrote these bytes before the READ's completion was
        // polled and writes them again only on the next `read`, which needs &mut self.
        unsafe { std::slice::from_raw_parts(self.landing.as_ptr().add(off), len) }
    }
}

fn parse_history(line: &str) -> Result<History, String> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let bad = || format!("expected HISTORY <session> <slot_bytes> <slots>, got {line:?}");
    if f.len() != 4 || f[0] != "HISTORY" {
        return Err(bad());
    }
    let h = History {
        session: f[1].parse().map_err(|_| bad())?,
        slot_bytes: f[2].parse().map_err(|_| bad())?,
        slots: f[3].parse().map_err(|_| bad())?,
    };
    if h.slots == 0 || h.slot_bytes < 64 || !h.slot_bytes.is_multiple_of(64) {
        return Err(format!(
            "history geometry {} slots of {} bytes is not one this subscriber reads",
            h.slots, h.slot_bytes
        ));
    }
    Ok(h)
}
