//! Completion queues: polled, never waited on (no completion channel, no syscall).
use std::ffi::CStr;
use std::sync::Arc;

use rdma_sys as ffi;

use super::device::Context;
use super::error::VerbsError;

/// One work completion, copied out of the CQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The work request's id, as posted.
    pub wr_id: u64,
    /// ibv_wc_status (0 = success).
    pub status: u32,
    /// ibv_wc_opcode.
    pub opcode: u32,
    /// Bytes transferred (receives).
    pub byte_len: u32,
    /// Immediate data (host byte order) when the completion carried one.
    pub imm: Option<u32>,
    /// The local QP the completion belongs to.
    pub qp_num: u32,
    /// The sender's QP number (UD receives).
    pub src_qp: u32,
}

impl Completion {
    /// An all-zero completion, to initialise the arrays `poll` fills.
    pub const EMPTY: Completion =
        Completion { wr_id: 0, status: 0, opcode: 0, byte_len: 0, imm: None, qp_num: 0, src_qp: 0 };

    /// Whether the work request succeeded.
    pub fn is_ok(&self) -> bool {
        self.status == ffi::ibv_wc_status::IBV_WC_SUCCESS
    }

    /// libibverbs' name for the status, e.g. "remote access error".
    #[cfg_attr(not(tickbus_testing), allow(dead_code))] // used by the tests that drive verbs
    pub fn status_str(&self) -> String {
        // SAFETY: ibv_wc_status_str returns a static string for any value.
        unsafe { CStr::from_ptr(ffi::ibv_wc_status_str(self.status)).to_string_lossy().into_owned() }
    }
}

/// A completion queue.
pub struct CompletionQueue {
    pub(crate) cq: *mut ffi::ibv_cq,
    _ctx: Arc<Context>,
}

// SAFETY: a CQ may be polled from any thread; we poll through &mut self only.
unsafe impl Send for CompletionQueue {}

impl CompletionQueue {
    /// A completion queue of `depth` entries on `ctx`'s device.
    pub fn new(ctx: &Arc<Context>, depth: u32) -> Result<CompletionQueue, VerbsError> {
        // SAFETY: ctx is open; no channel or context pointer is passed.
        let cq = unsafe { ffi::ibv_create_cq(ctx.ctx, depth as i32, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
        if cq.is_null() {
            return Err(VerbsError::last("ibv_create_cq"));
        }
        Ok(CompletionQueue { cq, _ctx: ctx.clone() })
    }

    /// Copies up to `out.len()` (at most 16) completions out; returns how many. No syscall.
    #[inline]
    pub fn poll(&mut self, out: &mut [Completion]) -> Result<usize, VerbsError> {
        // SAFETY: ibv_wc is plain data; zeroed is a valid initial value.
        let mut wc: [ffi::ibv_wc; 16] = unsafe { std::mem::zeroed() };
        let want = out.len().min(16) as i32;
        // SAFETY: cq is live; wc has room for `want` entries.
        let n = unsafe { ffi::ibv_poll_cq(self.cq, want, wc.as_mut_ptr()) };
        if n < 0 {
            return Err(VerbsError::code("ibv_poll_cq", n));
        }
        for (o, w) in out.iter_mut().zip(&wc[..n as usize]) {
            let with_imm = w.wc_flags & ffi::ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0;
            *o = Completion {
                wr_id: w.wr_id,
                status: w.status,
                opcode: w.opcode,
                byte_len: w.byte_len,
                // SAFETY: with IBV_WC_WITH_IMM set, the union holds imm_data (network order).
                imm: with_imm.then(|| u32::from_be(unsafe { w.imm_data_invalidated_rkey_union.imm_data })),
                qp_num: w.qp_num,
                src_qp: w.src_qp,
            };
        }
        Ok(n as usize)
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        // SAFETY: QPs using this CQ hold it by reference in their owner and are dropped first.
        unsafe { ffi::ibv_destroy_cq(self.cq) };
    }
}
