//! Reliable connected queue pairs as typed stages: a [`PreparedRc`] (INIT) can only be connected;
//! only a [`ConnectedRc`] (RTS) can post. A QP owns its completion queues, so they outlive it.
use std::sync::Arc;

use rdma_sys as ffi;

use super::cq::CompletionQueue;
use super::device::{gid_to_ffi, Context};
use super::error::VerbsError;

pub use crate::sys::addr::Endpoint;

/// RC QP sizing and retry behaviour.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct RcOptions {
    /// Send queue depth: work requests in flight at once.
    pub max_send_wr: u32,
    /// Receive queue depth (WRITE_WITH_IMM receivers).
    pub max_recv_wr: u32,
    /// Largest payload asked for inline sends (the provider may grant less).
    pub max_inline: u32,
    /// Local ACK timeout exponent: 4.096 us * 2^timeout per retry.
    pub timeout: u8,
    /// Transport retries before RETRY_EXC_ERR (a dead peer surfaces after about
    /// (retry_cnt + 1) * 4.096 us * 2^timeout). At most 6: Soft-RoCE treats 7 as "retry forever".
    pub retry_cnt: u8,
    /// Receiver-not-ready retries before RNR_RETRY_EXC_ERR (7: forever).
    pub rnr_retry: u8,
    /// What the remote side may do to our memory through this QP (ibv_access_flags).
    pub access: u32,
}

impl Default for RcOptions {
    fn default() -> Self {
        RcOptions {
            max_send_wr: 256,
            max_recv_wr: 64,
            max_inline: 256,
            timeout: 14,
            retry_cnt: 6,
            rnr_retry: 7,
            access: ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0,
        }
    }
}

struct Qp {
    qp: *mut ffi::ibv_qp,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    ctx: Arc<Context>,
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: the QP is destroyed before its CQs (fields dropped after this body).
        unsafe { ffi::ibv_destroy_qp(self.qp) };
    }
}

/// An RC QP in INIT: it has a QPN and PSN to hand to the peer, and cannot post yet.
pub struct PreparedRc {
    inner: Qp,
    psn: u32,
    opts: RcOptions,
    max_inline: u32,
}

// SAFETY: the QP and CQs are used through &mut self only.
unsafe impl Send for PreparedRc {}

impl PreparedRc {
    /// A QP in INIT on `ctx` with its own send and receive CQs, ready to be connected.
    pub fn new(ctx: &Arc<Context>, opts: RcOptions) -> Result<PreparedRc, VerbsError> {
        let send_cq = CompletionQueue::new(ctx, opts.max_send_wr)?;
        let recv_cq = CompletionQueue::new(ctx, opts.max_recv_wr.max(1))?;
        // SAFETY: zeroed init attrs are valid; the CQs and PD are live.
        let (qp, max_inline) = unsafe {
            let mut a: ffi::ibv_qp_init_attr = std::mem::zeroed();
            a.send_cq = send_cq.cq;
            a.recv_cq = recv_cq.cq;
            a.cap = ffi::ibv_qp_cap {
                max_send_wr: opts.max_send_wr,
                max_recv_wr: opts.max_recv_wr,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: opts.max_inline,
            };
            a.qp_type = ffi::ibv_qp_type::IBV_QPT_RC;
            let qp = ffi::ibv_create_qp(ctx.pd, &mut a);
            (qp, a.cap.max_inline_data)
        };
        if qp.is_null() {
            return Err(VerbsError::last("ibv_create_qp"));
        }
        let inner = Qp { qp, send_cq, recv_cq, ctx: ctx.clone() };
        // SAFETY: qp is live (just created); zeroed attrs plus the fields the mask names.
        unsafe {
            let mut a: ffi::ibv_qp_attr = std::mem::zeroed();
            a.qp_state = ffi::ibv_qp_state::IBV_QPS_INIT;
            a.pkey_index = 0;
            a.port_num = ctx.port().port;
            a.qp_access_flags = opts.access;
            let m = ffi::ibv_qp_attr_mask::IBV_QP_STATE.0
                | ffi::ibv_qp_attr_mask::IBV_QP_PKEY_INDEX.0
                | ffi::ibv_qp_attr_mask::IBV_QP_PORT.0
                | ffi::ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS.0;
            modify_qp(qp, &mut a, m, "ibv_modify_qp(INIT)")?;
        }
        let psn = (crate::time::Tsc::new().now() as u32 ^ inner.qp as usize as u32) & 0xFF_FFFF;
        Ok(PreparedRc { inner, psn, opts, max_inline })
    }

    /// Largest payload this QP sends inline.
    pub fn max_inline(&self) -> u32 {
        self.max_inline
    }

    /// This side's endpoint, advertising `mr` (if any) for the peer to write into.
    pub fn endpoint(&self, remote_writable: Option<(u64, u32, u64)>) -> Endpoint {
        let (addr, rkey, len) = remote_writable.unwrap_or((0, 0, 0));
        // SAFETY: qp is live.
        let qpn = unsafe { (*self.inner.qp).qp_num };
        Endpoint { qpn, psn: self.psn, gid: self.inner.ctx.port().gid, addr, rkey, len }
    }

    /// Moves the QP through RTR to RTS, connected to `remote`.
    pub fn connect(self, remote: &Endpoint) -> Result<ConnectedRc, VerbsError> {
        let port = *self.inner.ctx.port();
        let qp = self.inner.qp;
        // SAFETY: zeroed attrs plus the fields each mask names; qp is live.
        unsafe {
            let mut a: ffi::ibv_qp_attr = std::mem::zeroed();
            a.qp_state = ffi::ibv_qp_state::IBV_QPS_RTR;
            a.path_mtu = port.active_mtu.min(ffi::ibv_mtu::IBV_MTU_4096);
            a.dest_qp_num = remote.qpn;
            a.rq_psn = remote.psn;
            a.max_dest_rd_atomic = 1;
            a.min_rnr_timer = 12;
            a.ah_attr.is_global = 1;
            a.ah_attr.grh.dgid = gid_to_ffi(remote.gid);
            a.ah_attr.grh.sgid_index = port.gid_index;
            a.ah_attr.grh.hop_limit = 64;
            a.ah_attr.port_num = port.port;
            use ffi::ibv_qp_attr_mask as M;
            let m = M::IBV_QP_STATE.0
                | M::IBV_QP_AV.0
                | M::IBV_QP_PATH_MTU.0
                | M::IBV_QP_DEST_QPN.0
                | M::IBV_QP_RQ_PSN.0
                | M::IBV_QP_MAX_DEST_RD_ATOMIC.0
                | M::IBV_QP_MIN_RNR_TIMER.0;
            modify_qp(qp, &mut a, m, "ibv_modify_qp(RTR)")?;
            let mut a: ffi::ibv_qp_attr = std::mem::zeroed();
            a.qp_state = ffi::ibv_qp_state::IBV_QPS_RTS;
            a.timeout = self.opts.timeout;
            a.retry_cnt = self.opts.retry_cnt.min(6);
            a.rnr_retry = self.opts.rnr_retry;
            a.sq_psn = self.psn;
            a.max_rd_atomic = 1;
            let m = M::IBV_QP_STATE.0
                | M::IBV_QP_TIMEOUT.0
                | M::IBV_QP_RETRY_CNT.0
                | M::IBV_QP_RNR_RETRY.0
                | M::IBV_QP_SQ_PSN.0
                | M::IBV_QP_MAX_QP_RD_ATOMIC.0;
            modify_qp(qp, &mut a, m, "ibv_modify_qp(RTS)")?;
        }
        Ok(ConnectedRc { inner: self.inner, max_inline: self.max_inline })
    }
}

/// Most WRs `ConnectedRc::post_writes` chains behind one doorbell.
pub const MAX_CHAIN: usize = 32;

/// One RDMA WRITE work request.
#[derive(Clone, Copy)]
pub struct WriteWr {
    /// The work request's id, as its completion reports it.
    pub wr_id: u64,
    /// The local bytes to write.
    pub sge: ffi::ibv_sge,
    /// Where to write on the peer (an address in its registered region).
    pub remote_addr: u64,
    /// The peer region's remote key.
    pub rkey: u32,
    /// Immediate data: makes it a WRITE_WITH_IMM that completes on the receiver's CQ.
    pub imm: Option<u32>,
    /// Ask for a send completion (selective signalling: not every WR needs one).
    pub signaled: bool,
    /// Copy the bytes into the WQE at post time (payloads up to `max_inline`).
    pub inline: bool,
}

/// One RDMA READ work request: copies `sge.length` bytes at `remote_addr` into `sge`.
#[derive(Clone, Copy)]
pub struct ReadWr {
    /// The work request's id, as its completion reports it.
    pub wr_id: u64,
    /// The local bytes to read into.
    pub sge: ffi::ibv_sge,
    /// Where to read on the peer (an address in its registered region).
    pub remote_addr: u64,
    /// The peer region's remote key.
    pub rkey: u32,
}

/// An RC QP in RTS: it can post.
pub struct ConnectedRc {
    inner: Qp,
    #[cfg_attr(not(tickbus_testing), allow(dead_code))] // used by the tests that drive verbs
    max_inline: u32,
}

// SAFETY: the QP and CQs are used through &mut self only.
unsafe impl Send for ConnectedRc {}

impl ConnectedRc {
    /// Largest payload that can be sent inline (copied into the WQE at post time).
    #[cfg_attr(not(tickbus_testing), allow(dead_code))] // used by the tests that drive verbs
    pub fn max_inline(&self) -> u32 {
        self.max_inline
    }

    /// The QP's number (what the device's async events name it by).
    pub fn qp_num(&self) -> u32 {
        // SAFETY: the QP is live for as long as self.
        unsafe { (*self.inner.qp).qp_num }
    }

    /// The send completion queue (WRITE and READ completions).
    pub fn send_cq(&mut self) -> &mut CompletionQueue {
        &mut self.inner.send_cq
    }

    /// The receive completion queue (WRITE_WITH_IMM arrivals).
    pub fn recv_cq(&mut self) -> &mut CompletionQueue {
        &mut self.inner.recv_cq
    }

    /// Posts one RDMA WRITE (WRITE_WITH_IMM when `w.imm` is set).
    ///
    /// # Safety
    /// Unless `w.inline`, the bytes `w.sge` names must stay valid and unchanged until this WR's
    /// completion (or a later signalled one on this QP) has been polled.
    #[inline]
    pub unsafe fn post_write(&mut self, w: WriteWr) -> Result<(), VerbsError> {
        let mut sge = w.sge;
        // SAFETY: zeroed WR is valid; sge lives on this stack frame through the post call, and
        // the provider copies the WR (and inline bytes) before returning.
        let rc = unsafe {
            let mut wr: ffi::ibv_send_wr = std::mem::zeroed();
            fill_wr(&mut wr, &w);
            wr.sg_list = &mut sge;
            let mut bad = std::ptr::null_mut();
            ffi::ibv_post_send(self.inner.qp, &mut wr, &mut bad)
        };
        if rc != 0 {
            return Err(VerbsError::code("ibv_post_send", rc));
        }
        Ok(())
    }

    /// Posts one signalled RDMA READ.
    ///
    /// # Safety
    /// The bytes `r.sge` names must stay valid, and unread, until this WR's completion is polled.
    pub unsafe fn post_read(&mut self, r: ReadWr) -> Result<(), VerbsError> {
        let mut sge = r.sge;
        // SAFETY: zeroed WR is valid; sge lives on this frame through the post call, and the
        // provider copies the WR before returning.
        let rc = unsafe {
            let mut wr: ffi::ibv_send_wr = std::mem::zeroed();
            wr.wr_id = r.wr_id;
            wr.num_sge = 1;
            wr.sg_list = &mut sge;
            wr.opcode = ffi::ibv_wr_opcode::IBV_WR_RDMA_READ;
            wr.send_flags = ffi::ibv_send_flags::IBV_SEND_SIGNALED.0;
            wr.wr.rdma.remote_addr = r.remote_addr;
            wr.wr.rdma.rkey = r.rkey;
            let mut bad = std::ptr::null_mut();
            ffi::ibv_post_send(self.inner.qp, &mut wr, &mut bad)
        };
        if rc != 0 {
            return Err(VerbsError::code("ibv_post_send(READ)", rc));
        }
        Ok(())
    }

    /// Posts up to [`MAX_CHAIN`] WRITEs as one chain: one doorbell for the whole burst.
    ///
    /// # Safety
    /// As for [`ConnectedRc::post_write`], for every WR in `wrs`.
    #[inline]
    pub unsafe fn post_writes(&mut self, wrs: &[WriteWr]) -> Result<(), VerbsError> {
        assert!(wrs.len() <= MAX_CHAIN, "at most {MAX_CHAIN} WRs per chain, got {}", wrs.len());
        if wrs.is_empty() {
            return Ok(());
        }
        // SAFETY: the QP is live; the provider copies the WRs before returning, and the caller
        // keeps the bytes they name (this function's contract).
        let (rc, _) = unsafe {
            post_chain(self.inner.qp, wrs.len(), |k, wr| {
                fill_wr(wr, &wrs[k]);
                wrs[k].sge
            })
        };
        if rc != 0 {
            return Err(VerbsError::code("ibv_post_send(chain)", rc));
        }
        Ok(())
    }

    /// Posts a receive (for WRITE_WITH_IMM completions `sge` may be `None`: no bytes land).
    ///
    /// # Safety
    /// The bytes `sge` names must stay valid until the receive's completion is polled.
    pub unsafe fn post_recv(&mut self, wr_id: u64, sge: Option<ffi::ibv_sge>) -> Result<(), VerbsError> {
        // SAFETY: as for post_write.
        unsafe { post_recv(self.inner.qp, wr_id, sge) }
    }
}

/// Posts `n` (1 to [`MAX_CHAIN`]) send-queue WRs as one chain, one doorbell: `fill(k, wr)`
/// writes WR `k`'s fields into a zeroed WR (all but `sg_list` and `next`, linked here) and
/// returns its SGE. Returns the provider's code and, when it failed, how many WRs before the
/// failing one it took: the provider names the first WR it did not take, and null means none
/// failed (rxe queues every WR and then reports a failed doorbell; the queued WRs go with the
/// next one); a pointer outside the chain is a provider bug and counts all as taken, so a
/// caller never sends a sequence number twice.
///
/// # Safety
/// `qp` is a live QP, and the bytes each SGE names stay valid as the WR's kind requires.
#[inline(always)]
pub(super) unsafe fn post_chain(
    qp: *mut ffi::ibv_qp,
    n: usize,
    mut fill: impl FnMut(usize, &mut ffi::ibv_send_wr) -> ffi::ibv_sge,
) -> (i32, usize) {
    assert!((1..=MAX_CHAIN).contains(&n), "1 to {MAX_CHAIN} WRs per chain, got {n}");
    // SAFETY: zeroed WRs and SGEs are valid; both arrays live on this frame through the post
    // call; `next` links point inside `chain`; the caller vouches for `qp` and the bytes.
    unsafe {
        let mut sges: [ffi::ibv_sge; MAX_CHAIN] = std::mem::zeroed();
        let mut chain: [ffi::ibv_send_wr; MAX_CHAIN] = std::mem::zeroed();
        for (k, wr) in chain[..n].iter_mut().enumerate() {
            sges[k] = fill(k, wr);
        }
        let base = chain.as_mut_ptr();
        let sge_base = sges.as_mut_ptr();
        for k in 0..n {
            (*base.add(k)).sg_list = sge_base.add(k);
            (*base.add(k)).next = if k + 1 < n { base.add(k + 1) } else { std::ptr::null_mut() };
        }
        let mut bad = std::ptr::null_mut();
        let rc = ffi::ibv_post_send(qp, base, &mut bad);
        if rc == 0 {
            return (0, n);
        }
        let offset = (bad as usize).checked_sub(base as usize).map(|b| b / size_of::<ffi::ibv_send_wr>());
        (rc, if bad.is_null() { n } else { offset.unwrap_or(n).min(n) })
    }
}

/// Writes `w`'s fields into a zeroed WR (all but `sg_list` and `next`, which the caller links).
#[inline(always)]
fn fill_wr(wr: &mut ffi::ibv_send_wr, w: &WriteWr) {
    wr.wr_id = w.wr_id;
    wr.num_sge = 1;
    wr.opcode = match w.imm {
        Some(_) => ffi::ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM,
        None => ffi::ibv_wr_opcode::IBV_WR_RDMA_WRITE,
    };
    if let Some(v) = w.imm {
        wr.imm_data_invalidated_rkey_union.imm_data = v.to_be();
    }
    wr.send_flags = (if w.signaled { ffi::ibv_send_flags::IBV_SEND_SIGNALED.0 } else { 0 })
        | (if w.inline { ffi::ibv_send_flags::IBV_SEND_INLINE.0 } else { 0 });
    wr.wr.rdma.remote_addr = w.remote_addr;
    wr.wr.rdma.rkey = w.rkey;
}

/// Applies `attr` under `mask` to `qp`; `call` names the transition in the error.
///
/// # Safety
/// `qp` must be a live QP.
pub(crate) unsafe fn modify_qp(
    qp: *mut ffi::ibv_qp,
    attr: &mut ffi::ibv_qp_attr,
    mask: u32,
    call: &'static str,
) -> Result<(), VerbsError> {
    // SAFETY: qp is live (caller); attr is a valid attribute struct for the whole call.
    let rc = unsafe { ffi::ibv_modify_qp(qp, attr as *mut _ as *mut _, mask as i32) };
    if rc != 0 {
        return Err(VerbsError::code(call, rc));
    }
    Ok(())
}

/// Shared by RC and UD: one receive WR.
pub(crate) unsafe fn post_recv(qp: *mut ffi::ibv_qp, wr_id: u64, sge: Option<ffi::ibv_sge>) -> Result<(), VerbsError> {
    let mut sge_v = sge.unwrap_or(ffi::ibv_sge { addr: 0, length: 0, lkey: 0 });
    let mut wr = ffi::ibv_recv_wr {
        wr_id,
        next: std::ptr::null_mut(),
        sg_list: if sge.is_some() { &mut sge_v } else { std::ptr::null_mut() },
        num_sge: i32::from(sge.is_some()),
    };
    let mut bad = std::ptr::null_mut();
    // SAFETY: qp is live (caller); the WR and sge live through the call; the caller keeps the
    // target bytes valid until completion.
    let rc = unsafe { ffi::ibv_post_recv(qp, &mut wr, &mut bad) };
    if rc != 0 {
        return Err(VerbsError::code("ibv_post_recv", rc));
    }
    Ok(())
}
