//! Unreliable datagram QPs, address handles, and multicast membership.
use std::net::{Ipv4Addr, UdpSocket};
use std::sync::Arc;

use rdma_sys as ffi;

use super::cq::CompletionQueue;
use super::device::{gid_to_ffi, Context, Gid};
use super::error::VerbsError;
use super::qp::{modify_qp, post_chain, MAX_CHAIN};

/// One datagram of a chained post ([`UdQp::post_sends`]).
#[derive(Clone, Copy)]
pub struct SendWr {
    /// Comes back in the completion.
    pub wr_id: u64,
    /// The frame's bytes (registered memory).
    pub sge: ffi::ibv_sge,
    /// Ask for a completion (an unsignalled send completes with the next signalled one).
    pub signaled: bool,
    /// Copy the bytes into the WR at post time.
    pub inline: bool,
}

impl SendWr {
    /// A placeholder for filling arrays (never posted as is).
    pub const EMPTY: SendWr =
        SendWr { wr_id: 0, sge: ffi::ibv_sge { addr: 0, length: 0, lkey: 0 }, signaled: false, inline: false };
}

/// Bytes of Global Routing Header in front of every UD receive buffer (RoCE always has one).
pub const GRH_BYTES: usize = 40;

/// A UD QP in RTS with one CQ for sends and receives. It owns its multicast memberships, so a
/// group is always left before the QP is destroyed.
pub struct UdQp {
    qp: *mut ffi::ibv_qp,
    /// Groups joined: the IP-level membership (a socket) and the attached GID.
    memberships: Vec<(UdpSocket, ffi::ibv_gid)>,
    cq: CompletionQueue,
    qkey: u32,
    max_inline: u32,
    ctx: Arc<Context>,
}

// SAFETY: used through &mut self only.
unsafe impl Send for UdQp {}

impl UdQp {
    /// A UD QP in RTS on `ctx`, with one CQ of `2 * depth` entries and the queue key `qkey`.
    pub fn new(ctx: &Arc<Context>, depth: u32, qkey: u32) -> Result<UdQp, VerbsError> {
        let cq = CompletionQueue::new(ctx, depth * 2)?;
        // SAFETY: zeroed attrs are valid; CQ and PD are live.
        let (qp, max_inline) = unsafe {
            let mut a: ffi::ibv_qp_init_attr = std::mem::zeroed();
            a.send_cq = cq.cq;
            a.recv_cq = cq.cq;
            a.cap = ffi::ibv_qp_cap {
                max_send_wr: depth,
                max_recv_wr: depth,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 256, // as RC: frames up to 224 B of message go inline
            };
            a.qp_type = ffi::ibv_qp_type::IBV_QPT_UD;
            // The provider writes back in `a.cap` what it granted.
            (ffi::ibv_create_qp(ctx.pd, &mut a), a.cap.max_inline_data)
        };
        if qp.is_null() {
            return Err(VerbsError::last("ibv_create_qp(UD)"));
        }
        let me = UdQp { qp, memberships: Vec::new(), cq, qkey, max_inline, ctx: ctx.clone() };
        use ffi::ibv_qp_attr_mask as M;
        // SAFETY: zeroed attrs plus the fields each mask names; qp is live.
        unsafe {
            let mut a: ffi::ibv_qp_attr = std::mem::zeroed();
            a.qp_state = ffi::ibv_qp_state::IBV_QPS_INIT;
            a.port_num = ctx.port().port;
            a.qkey = qkey;
            let m = M::IBV_QP_STATE.0 | M::IBV_QP_PKEY_INDEX.0 | M::IBV_QP_PORT.0 | M::IBV_QP_QKEY.0;
            modify_qp(qp, &mut a, m, "ibv_modify_qp(UD INIT)")?;
            let mut a: ffi::ibv_qp_attr = std::mem::zeroed();
            a.qp_state = ffi::ibv_qp_state::IBV_QPS_RTR;
            modify_qp(qp, &mut a, M::IBV_QP_STATE.0, "ibv_modify_qp(UD RTR)")?;
            let mut a: ffi::ibv_qp_attr = std::mem::zeroed();
            a.qp_state = ffi::ibv_qp_state::IBV_QPS_RTS;
            a.sq_psn = 0;
            modify_qp(qp, &mut a, M::IBV_QP_STATE.0 | M::IBV_QP_SQ_PSN.0, "ibv_modify_qp(UD RTS)")?;
        }
        Ok(me)
    }

    /// The QP number datagrams are addressed to.
    #[cfg_attr(not(tickbus_testing), allow(dead_code))] // used by the tests that drive verbs
    pub fn qpn(&self) -> u32 {
        // SAFETY: qp is live.
        unsafe { (*self.qp).qp_num }
    }

    /// Largest datagram (frame bytes) a send may carry inline, as the provider granted.
    pub fn max_inline(&self) -> u32 {
        self.max_inline
    }

    /// The completion queue (sends and receives).
    pub fn cq(&mut self) -> &mut CompletionQueue {
        &mut self.cq
    }

    /// Posts a receive; the buffer gets a 40-byte GRH, then the payload.
    ///
    /// # Safety
    /// The bytes `sge` names must stay valid until the receive's completion is polled.
    pub unsafe fn post_recv(&mut self, wr_id: u64, sge: ffi::ibv_sge) -> Result<(), VerbsError> {
        // SAFETY: forwarded contract.
        unsafe { super::qp::post_recv(self.qp, wr_id, Some(sge)) }
    }

    /// Sends one datagram to `remote_qpn` (0xFFFFFF for a multicast group) through `ah`.
    /// `signaled` asks for a completion (an unsignalled send completes silently, in order,
    /// with the next signalled one); `inline` copies the bytes into the WR at post time.
    ///
    /// # Safety
    /// Unless `inline`, the bytes `sge` names must stay valid until this send, or a later
    /// signalled one, completes.
    #[inline]
    pub unsafe fn post_send(
        &mut self,
        wr_id: u64,
        sge: ffi::ibv_sge,
        ah: &AddressHandle,
        remote_qpn: u32,
        signaled: bool,
        inline: bool,
    ) -> Result<(), VerbsError> {
        let mut sge = sge;
        // SAFETY: zeroed WR is valid; sge and ah outlive the call; the caller keeps the bytes.
        let rc = unsafe {
            let mut wr: ffi::ibv_send_wr = std::mem::zeroed();
            self.fill_send(&mut wr, &SendWr { wr_id, sge, signaled, inline }, ah, remote_qpn);
            wr.sg_list = &mut sge;
            let mut bad = std::ptr::null_mut();
            ffi::ibv_post_send(self.qp, &mut wr, &mut bad)
        };
        if rc != 0 {
            return Err(VerbsError::code("ibv_post_send(UD)", rc));
        }
        Ok(())
    }

    /// Sends up to [`MAX_CHAIN`] datagrams to `remote_qpn` through `ah` as one chain: one
    /// doorbell for the whole burst (on Soft-RoCE one `write` instead of one per datagram).
    /// A chain can fail part-way: the error comes with how many WRs before the failing one the
    /// provider took (they will be sent, and complete, like any other; all of them when the
    /// provider names none, as rxe does when only its doorbell failed).
    ///
    /// # Safety
    /// As for [`UdQp::post_send`], for every WR in `wrs`.
    #[inline]
    pub unsafe fn post_sends(
        &mut self,
        wrs: &[SendWr],
        ah: &AddressHandle,
        remote_qpn: u32,
    ) -> Result<(), (usize, VerbsError)> {
        assert!(wrs.len() <= MAX_CHAIN, "at most {MAX_CHAIN} WRs per chain, got {}", wrs.len());
        if wrs.is_empty() {
            return Ok(());
        }
        // Fault injection (tests): post only the first `cut` and report the next one refused.
        let cut = crate::fault::take_ud_chain_cut(wrs.len());
        let wrs = &wrs[..cut.unwrap_or(wrs.len())];
        if wrs.is_empty() {
            return Err((0, VerbsError::code("ibv_post_send(UD chain, fault injected)", libc::EINVAL)));
        }
        // SAFETY: the QP is live; ah outlives the call; the provider copies the WRs (and inline
        // bytes) before returning, and the caller keeps the other bytes (this function's
        // contract).
        let rc = unsafe {
            post_chain(self.qp, wrs.len(), |k, wr| {
                self.fill_send(wr, &wrs[k], ah, remote_qpn);
                wrs[k].sge
            })
        };
        if rc.0 != 0 {
            return Err((rc.1, VerbsError::code("ibv_post_send(UD chain)", rc.0)));
        }
        match cut {
            Some(c) => Err((c, VerbsError::code("ibv_post_send(UD chain, fault injected)", libc::EINVAL))),
            None => Ok(()),
        }
    }

    /// Writes a SEND's fields into a zeroed WR (all but `sg_list` and `next`, which the caller
    /// links).
    #[inline(always)]
    fn fill_send(&self, wr: &mut ffi::ibv_send_wr, w: &SendWr, ah: &AddressHandle, remote_qpn: u32) {
        use ffi::ibv_send_flags as F;
        wr.wr_id = w.wr_id;
        wr.num_sge = 1;
        wr.opcode = ffi::ibv_wr_opcode::IBV_WR_SEND;
        wr.send_flags =
            if w.signaled { F::IBV_SEND_SIGNALED.0 } else { 0 } | if w.inline { F::IBV_SEND_INLINE.0 } else { 0 };
        wr.wr.ud.ah = ah.ah;
        wr.wr.ud.remote_qpn = remote_qpn;
        wr.wr.ud.remote_qkey = self.qkey;
    }

    /// Joins IPv4 multicast `group` on this port: the IP-level join (so the netdev accepts the
    /// group's frames; rxe's attach alone only sets the link-layer filter) and the verbs attach.
    /// The QP leaves every group it joined when it is dropped, before it is destroyed.
    pub fn join_multicast(&mut self, group: Ipv4Addr) -> Result<(), VerbsError> {
        let iface = self
            .ctx
            .port()
            .gid
            .ipv4()
            .ok_or(VerbsError::NoGid { device: self.ctx.name().to_owned(), port: self.ctx.port().port })?;
        let sock =
            UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(|source| VerbsError::Call { call: "bind", source })?;
        sock.join_multicast_v4(&group, &iface)
            .map_err(|source| VerbsError::Call { call: "IP_ADD_MEMBERSHIP", source })?;
        let gid = gid_to_ffi(Gid::from_ipv4(group));
        // SAFETY: qp is a live UD QP; gid is a valid multicast GID.
        let rc = unsafe { ffi::ibv_attach_mcast(self.qp, &gid, 0) };
        if rc != 0 {
            return Err(VerbsError::code("ibv_attach_mcast", rc));
        }
        self.memberships.push((sock, gid));
        Ok(())
    }
}

impl Drop for UdQp {
    fn drop(&mut self) {
        for (_sock, gid) in &self.memberships {
            // SAFETY: the QP is still live (destroyed below), and `gid` was attached to it.
            unsafe { ffi::ibv_detach_mcast(self.qp, gid, 0) };
        }
        // SAFETY: the QP is destroyed before its CQ (a field dropped after this body), after
        // every multicast detach above.
        unsafe { ffi::ibv_destroy_qp(self.qp) };
    }
}

/// Where UD sends go: a unicast GID or a multicast group's GID.
pub struct AddressHandle {
    ah: *mut ffi::ibv_ah,
    _ctx: Arc<Context>,
}

// SAFETY: an AH is immutable after creation.
unsafe impl Send for AddressHandle {}

impl AddressHandle {
    /// An address handle routing datagrams to `dgid` (a unicast GID or a multicast group's) from
    /// `ctx`'s port.
    pub fn new(ctx: &Arc<Context>, dgid: Gid) -> Result<AddressHandle, VerbsError> {
        let port = ctx.port();
        // SAFETY: zeroed ah_attr is valid; the fields for a global (RoCE) route are set.
        let ah = unsafe {
            let mut a: ffi::ibv_ah_attr = std::mem::zeroed();
            a.is_global = 1;
            a.grh.dgid = gid_to_ffi(dgid);
            a.grh.sgid_index = port.gid_index;
            a.grh.hop_limit = 64;
            a.port_num = port.port;
            ffi::ibv_create_ah(ctx.pd, &mut a)
        };
        if ah.is_null() {
            return Err(VerbsError::last("ibv_create_ah"));
        }
        Ok(AddressHandle { ah, _ctx: ctx.clone() })
    }
}

impl Drop for AddressHandle {
    fn drop(&mut self) {
        // SAFETY: no posted send references the AH after its completion was polled.
        unsafe { ffi::ibv_destroy_ah(self.ah) };
    }
}
