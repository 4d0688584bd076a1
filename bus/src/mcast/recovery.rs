//! Gap recovery for ud-mcast: a subscriber RDMA-READs the messages it lost straight out of the
//! publisher's send slots, which double as a history of its last `history` messages. The
//! publisher's CPU takes no part in a recovery: its NIC answers the READs.
//!
//! Set-up over the same authenticated control channel as rdma-rc ([`crate::control`]) (syscalls allowed here; on the
//! publisher's side it runs on threads of its own, never on the publishing thread):
//! ```text
//!  subscriber                                   publisher (recovery server)
//!  HELLO / AUTH as rdma-rc, for the stream  <-->
//!                                           <--  HISTORY <session> <slot_bytes> <slots> <qkey>
//!                                           <--  EP <endpoint: history addr, rkey, length>
//!  EP <endpoint, no memory offered>         -->
//!                                           <--  READY
//! ```
//! The history is registered LOCAL_WRITE | REMOTE_READ and nothing else; the subscriber's QP
//! admits no remote access at all. Each slot is a [`crate::seqslot`] (valid | frame | lead), so
//! a copy that raced a rewrite is refused.
//!
//! A READ never blocks the subscriber: [`RecoveryClient::start`] posts it and
//! [`RecoveryClient::poll`] says whether it landed, so `try_recv` returns at once meanwhile.
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use super::error::McastError;
use super::frame::{self, FrameHeader};
use crate::control::{self as hs, Control, ControlError, Handshakes};
use crate::sys::verbs::{
    ffi, Completion, ConnectedRc, Context, Endpoint, HugeBuf, MemoryRegion, PreparedRc, RcOptions,
};
pub(crate) use crate::wire::control::History;
use crate::wire::control::{history_line, parse_history, quote};
use crate::wire::transcript::Role;

/// Past the QP's own retry budget (about 0.5 s with the defaults), a READ that never completes
/// means the provider will not report: give up on it.
pub(crate) const READ_PATIENCE: Duration = Duration::from_secs(2);

/// Bytes per history slot for frames of up to `mtu` bytes.
pub(crate) fn slot_bytes(mtu: usize) -> usize {
    (crate::seqslot::OVERHEAD_WORDS * 8 + mtu).next_multiple_of(64)
}

/// Publisher side: takes recovery connections on threads of its own and keeps their QPs
/// (which serve READs without any CPU) until dropped.
pub(crate) struct RecoveryServer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    results: mpsc::Receiver<Result<(), McastError>>,
}

impl RecoveryServer {
    pub fn start(
        ctx: Arc<Context>,
        listener: TcpListener,
        token: Vec<u8>,
        stream: u32,
        history: History,
        mr: Arc<MemoryRegion>,
        timeout: Duration,
    ) -> Result<RecoveryServer, McastError> {
        let mut hellos = Handshakes::<Result<ConnectedRc, McastError>>::new(listener)?;
        let (tx, results) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let run: Arc<dyn Fn(TcpStream, u64) -> Result<ConnectedRc, McastError> + Send + Sync> =
            Arc::new(move |tcp, _| accept(&ctx, tcp, &token, stream, history, &mr, timeout));
        let thread = std::thread::Builder::new()
            .name("tickbus-recovery".into())
            .spawn(move || {
                let mut qps = Vec::new();
                while !flag.load(Ordering::Acquire) {
                    let (busy, done) = hellos.poll(&run);
                    if let Some((_, r)) = done {
                        let _ = tx.send(r.map(|qp| qps.push(qp)));
                    }
                    if !busy {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
            })
            .map_err(|e| McastError::io("starting the recovery server", e))?;
        Ok(RecoveryServer { stop, thread: Some(thread), results })
    }

    /// The next finished recovery handshake (its error if it failed), waiting up to `timeout`.
    pub fn next(&self, timeout: Duration) -> Result<(), McastError> {
        match self.results.recv_timeout(timeout) {
            Ok(r) => r,
            Err(_) => Err(McastError::Setup(ControlError::Handshake {
                peer: "-".into(),
                reason: format!("no recovery connection within {timeout:?}"),
            })),
        }
    }
}

impl Drop for RecoveryServer {
    /// Stops taking connections and destroys the recovery QPs (before the history they READ).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One subscriber's recovery handshake, publisher side.
fn accept(
    ctx: &Arc<Context>,
    tcp: TcpStream,
    token: &[u8],
    stream: u32,
    h: History,
    mr: &MemoryRegion,
    timeout: Duration,
) -> Result<ConnectedRc, McastError> {
    let _ = tcp.set_nonblocking(false);
    let mut ctl = Control::new(tcp, timeout, Role::Publisher)?;
    hs::authenticate_subscriber(&mut ctl, token, stream)?;
    ctl.send(&history_line(&h))?;
    use ffi::ibv_access_flags as A;
    let qp = PreparedRc::new(ctx, RcOptions { access: A::IBV_ACCESS_REMOTE_READ.0, ..RcOptions::default() })?;
    ctl.send(&format!("EP {}", qp.endpoint(Some((mr.addr(), mr.rkey(), mr.len() as u64)))))?;
    let line = ctl.recv()?;
    let remote: Endpoint = line.strip_prefix("EP ").unwrap_or("").parse().map_err(|r| ctl.refuse(r))?;
    let qp = qp.connect(&remote)?;
    ctl.send("READY")?;
    Ok(qp)
}

/// What a READ in flight is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadState {
    /// Posted, not complete yet.
    Pending,
    /// Landed: the slots of `[first, first + len)` are in the landing buffer.
    Landed,
}

/// Subscriber side: a QP connected to the publisher's history and a landing buffer for
/// `batch` slots.
pub(crate) struct RecoveryClient {
    qp: ConnectedRc,
    landing: MemoryRegion,
    remote: Endpoint,
    pub history: History,
    pub batch: u64,
    /// Landing holds (or, while a READ is in flight, will hold) the slots of `[first, first + len)`.
    first: u64,
    len: u64,
    /// READs posted and not yet completed.
    inflight: usize,
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
            .map_err(|source| ControlError::Connect { addr: addr.to_string(), source })?;
        let mut ctl = Control::new(tcp, timeout, Role::Subscriber)?;
        hs::authenticate_to_publisher(&mut ctl, token, stream)?;
        let line = ctl.recv()?;
        let history = parse_history(&line).map_err(|r| ctl.refuse(r))?;
        let line = ctl.recv()?;
        let remote: Endpoint = line.strip_prefix("EP ").unwrap_or("").parse().map_err(|r| ctl.refuse(r))?;
        let span = history.slot_bytes as u64 * history.slots;
        if !remote.covers(remote.addr, span) {
            return Err(ctl.refuse(format!("the history region of {} bytes does not hold {span}", remote.len)).into());
        }
        let batch = u64::from(batch.max(1)).min(history.slots);
        let buf = HugeBuf::hugepages_or_pages(history.slot_bytes * batch as usize, false)?;
        let landing = MemoryRegion::register(ctx, buf, ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0)?;
        // A READ in flight must outlive a short path outage (a link flap, a switch reboot): its
        // retry budget (2^16 x 4.096 us x 7 tries, ~1.9 s) is about READ_PATIENCE, which bounds
        // the wait anyway. The default (~0.47 s) let a 0.4 s cut turn recovery off.
        let qp = PreparedRc::new(ctx, RcOptions { access: 0, timeout: 16, ..RcOptions::default() })?;
        ctl.send(&format!("EP {}", qp.endpoint(None)))?;
        let qp = qp.connect(&remote)?;
        let ready = ctl.recv()?;
        if ready != "READY" {
            return Err(ctl.refuse(format!("expected READY, got {}", quote(&ready))).into());
        }
        Ok(RecoveryClient {
            qp,
            landing,
            remote,
            history,
            batch,
            first: 0,
            len: 0,
            inflight: 0,
            wc: [Completion::EMPTY; 2],
        })
    }

    /// Whether the landing buffer holds the slot of `seq` (a READ of it has landed).
    pub fn holds(&self, seq: u64) -> bool {
        self.inflight == 0 && seq >= self.first && seq - self.first < self.len
    }

    /// Posts READs of the history slots of `first .. first + count` (count <= batch) into the
    /// landing buffer, as one READ or two (where the range wraps). Returns at once; see
    /// [`RecoveryClient::poll`]. No syscall but the provider's doorbell, no allocation.
    pub fn start(&mut self, first: u64, count: u64) -> Result<(), McastError> {
        let count = count.clamp(1, self.batch);
        let (sb, slots) = (self.history.slot_bytes as u64, self.history.slots);
        let start = first % slots;
        let head = count.min(slots - start);
        let parts = [(start, 0u64, head), (0, head, count - head)];
        self.first = first;
        self.len = count;
        for (k, &(slot, at, n)) in parts.iter().enumerate().filter(|(_, p)| p.2 > 0) {
            let read = crate::sys::verbs::ReadWr {
                wr_id: k as u64,
                sge: self.landing.sge((at * sb) as usize, (n * sb) as usize),
                remote_addr: self.remote.addr + slot * sb,
                rkey: self.remote.rkey,
            };
            // SAFETY: the landing bytes are ours and nobody reads them until the completion
            // (holds() is false while a READ is in flight).
            unsafe { self.qp.post_read(read)? };
            self.inflight += 1;
        }
        Ok(())
    }

    /// Polls the READs in flight once: `Landed` when all completed, an error if one failed.
    pub fn poll(&mut self) -> Result<ReadState, McastError> {
        if self.inflight > 0 {
            let n = self.qp.send_cq().poll(&mut self.wc)?;
            for c in &self.wc[..n] {
                if !c.is_ok() {
                    self.inflight = 0;
                    self.len = 0;
                    return Err(McastError::completion("recovery READ", c.status));
                }
            }
            self.inflight -= n.min(self.inflight);
        }
        Ok(if self.inflight == 0 { ReadState::Landed } else { ReadState::Pending })
    }

    /// The frame of `seq` from the landing buffer if its copy is intact and is `seq` of this
    /// publisher run: (header, offset and length of the message in the landing buffer).
    pub fn frame(&self, seq: u64, stream: u32) -> Option<(FrameHeader, usize, usize)> {
        if !self.holds(seq) {
            return None;
        }
        let sb = self.history.slot_bytes;
        let off = (seq - self.first) as usize * sb;
        let body = crate::seqslot::check(self.landing_bytes(off, sb), seq)?;
        // The frame's length is in its header; parse exactly that many bytes.
        let (h, _) = <FrameHeader as zerocopy::FromBytes>::read_from_prefix(body).ok()?;
        let n = frame::HEADER_BYTES.checked_add(h.len as usize)?;
        let (h, msg) = frame::parse(body.get(..n)?).ok()?;
        let ok = h.seq == seq && h.session == self.history.session && h.stream == stream && !h.is_heartbeat();
        let start = off + 8 + usize::from(h.header_len);
        ok.then_some((h, start, msg.len()))
    }

    /// `len` bytes of the landing buffer at `off`.
    pub fn landing_bytes(&self, off: usize, len: usize) -> &[u8] {
        assert!(off.checked_add(len).is_some_and(|end| end <= self.landing.len()));
        // SAFETY: in bounds (checked); the NIC wrote these bytes before the READ's completion was
        // polled and writes them again only after the next `start`, which needs &mut self.
        unsafe { std::slice::from_raw_parts(self.landing.as_ptr().add(off), len) }
    }
}
