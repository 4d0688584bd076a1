//! Subscribers: open by channel URI, poll (a pointer into the transport's bytes, valid until the
//! next call on the subscriber) or poll into the caller's buffer, gaps, position, release.
use core::ffi::{c_char, c_void};

use bus::stream::{self, AnySubscriber, OpenError, PeerState, Reliability, Subscribe};
use bus::{Recv, RecvInto};

use crate::error::{fail, guard, non_null, slice_len, tb_status, transport};
use crate::handle::{Handle, Kind};
use crate::options::{channel, open_options, tb_open_options};
use crate::tb_stream_info;

/// A subscriber of one stream (opaque). Owned by the caller from `tb_subscriber_open` until
/// `tb_subscriber_destroy`. It may move between threads but is used by one thread at a time.
#[allow(non_camel_case_types)]
pub struct tb_subscriber {
    _opaque: [u8; 0],
}

impl Kind for AnySubscriber {
    const MAGIC: u64 = u64::from_le_bytes(*b"tb:subs\0");
    const NAME: &'static str = "tb_subscriber";
}

/// What a poll found.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum tb_recv_kind {
    /// Nothing new.
    TB_RECV_NONE = 0,
    /// A message: `position`, `data` and `len`.
    TB_RECV_MESSAGE = 1,
    /// Messages were lost (a lossy stream lapped this reader, or datagrams were lost): from
    /// `position` up to (not including) `resumed_at`.
    TB_RECV_GAP = 2,
}

/// One poll's result.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tb_recv {
    /// What was found.
    pub kind: tb_recv_kind,
    /// The message's position, or the first position lost.
    pub position: u64,
    /// A gap: the position delivery resumes at (`resumed_at - position` messages lost).
    pub resumed_at: u64,
    /// A message (`tb_subscriber_poll`): its bytes, valid until the next call on this
    /// subscriber. NULL otherwise.
    pub data: *const u8,
    /// A message: its length in bytes. After `TB_ERROR_BUFFER_SIZE`: the length the next
    /// message has.
    pub len: usize,
}

const NONE: tb_recv =
    tb_recv { kind: tb_recv_kind::TB_RECV_NONE, position: 0, resumed_at: 0, data: core::ptr::null(), len: 0 };

/// # Safety
/// `s` is NULL or a handle from this library, not destroyed, used by one thread at a time.
unsafe fn get<'a>(s: *mut tb_subscriber) -> Result<&'a mut AnySubscriber, tb_status> {
    // SAFETY: the caller's promise.
    unsafe { Handle::<AnySubscriber>::get(s, "subscriber") }
}

/// The status for a failed open, with its message recorded.
pub(crate) fn open_failed(e: &OpenError) -> tb_status {
    let code = match e {
        OpenError::NoRdma { .. } => tb_status::TB_ERROR_UNSUPPORTED,
        _ => tb_status::TB_ERROR_OPEN,
    };
    fail!(code, "{e}")
}

/// Opens a subscriber of the stream `uri` names, waiting up to `options.wait_ms` for its
/// publisher (a shm ring not created yet, an rdma-rc publisher not listening). On shm a
/// reliable URI takes a consumer line (the publisher waits for it), a lossy one observes.
/// `options` may be NULL (the defaults). On success `*out` holds the handle.
///
/// # Safety
/// `uri` is NULL or NUL-terminated; `options` is NULL or valid; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tb_subscriber_open(
    uri: *const c_char,
    options: *const tb_open_options,
    out: *mut *mut tb_subscriber,
) -> tb_status {
    guard(|| {
        non_null(out, "out")?;
        // SAFETY: the caller's promises, passed on.
        let (c, o) = unsafe { (channel(uri)?, open_options(options)?) };
        let s = stream::open_subscriber(&c, &o).map_err(|e| open_failed(&e))?;
        // SAFETY: non-null checked; the caller promises it is writable.
        unsafe { out.write(Handle::into_raw(s)) };
        Ok(())
    })
}

/// The next message or gap in stream order into `*out` (`TB_RECV_NONE` when nothing new came).
/// Never blocks; on shm no allocation and no syscall. A message's `data` points into the
/// transport and stays valid until the next call on this subscriber.
///
/// # Safety
/// `s` as every subscriber call; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tb_subscriber_poll(s: *mut tb_subscriber, out: *mut tb_recv) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let s = unsafe { get(s) }?;
        non_null(out, "out")?;
        let r = match s.try_recv().map_err(|e| transport(&e))? {
            None => NONE,
            Some(Recv::Message(d)) => tb_recv {
                kind: tb_recv_kind::TB_RECV_MESSAGE,
                position: d.position,
                resumed_at: 0,
                data: d.payload.as_ptr(),
                len: d.payload.len(),
            },
            Some(Recv::Gap(g)) => gap(g),
        };
        // SAFETY: non-null; the caller promises writable.
        unsafe { out.write(r) };
        Ok(())
    })
}

fn gap(g: bus::Gap) -> tb_recv {
    tb_recv { kind: tb_recv_kind::TB_RECV_GAP, position: g.expected, resumed_at: g.resumed_at, ..NONE }
}

/// The next message, if it is exactly `len` bytes, copied into `buf` (a fixed-layout message's
/// struct); `*out` says what was found (`data` is NULL: the bytes are in `buf`). A message of
/// another length is not consumed: the call returns `TB_ERROR_BUFFER_SIZE` with `out->len` its
/// length and `out->position` its position; take it with `tb_subscriber_poll`.
///
/// # Safety
/// As `tb_subscriber_poll`, with `buf` holding `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn tb_subscriber_poll_into(
    s: *mut tb_subscriber,
    buf: *mut c_void,
    len: usize,
    out: *mut tb_recv,
) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let s = unsafe { get(s) }?;
        non_null(out, "out")?;
        non_null(buf, "buf")?;
        slice_len(len, "len")?;
        // SAFETY: non-null, a slice's length; the caller promises `len` writable bytes.
        let b = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), len) };
        let (r, status) = match s.try_recv_into(b).map_err(|e| transport(&e))? {
            None => (NONE, Ok(())),
            Some(RecvInto::Message { position }) => {
                (tb_recv { kind: tb_recv_kind::TB_RECV_MESSAGE, position, len, ..NONE }, Ok(()))
            }
            Some(RecvInto::Gap(g)) => (gap(g), Ok(())),
            Some(RecvInto::OtherLength { position, len: n }) => (
                tb_recv { position, len: n, ..NONE },
                Err(fail!(
                    tb_status::TB_ERROR_BUFFER_SIZE,
                    "the message at position {position} is {n} bytes, the buffer {len}: it is still there, take it with tb_subscriber_poll"
                )),
            ),
        };
        // SAFETY: non-null; the caller promises writable.
        unsafe { out.write(r) };
        status
    })
}

/// The subscriber's position (the next message's), positions lost in gaps so far, dropped
/// claims skipped, largest payload, reliability and the publisher's clock.
///
/// # Safety
/// As `tb_subscriber_poll`; `info` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tb_subscriber_info(s: *mut tb_subscriber, info: *mut tb_stream_info) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let s = unsafe { get(s) }?;
        non_null(info, "info")?;
        let i = tb_stream_info {
            position: s.position(),
            missed: s.missed(),
            aborted: s.aborted(),
            stream_id: 0,
            max_payload: s.max_payload() as u32,
            reliable: s.reliability() == Reliability::Reliable,
            ticks_per_ns: s.ticks_per_ns(),
        };
        // SAFETY: non-null; the caller promises writable.
        unsafe { info.write(i) };
        Ok(())
    })
}

/// What became of a stream's publisher.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum tb_peer_state {
    /// Running (ud-mcast: always, multicast cannot tell).
    TB_PEER_LIVE = 0,
    /// It closed the stream (shm), or its connection is gone (rdma-rc).
    TB_PEER_CLOSED = 1,
    /// Its process ended without closing the ring (shm): it crashed or was killed.
    TB_PEER_DIED = 2,
}

/// What became of the stream's publisher, into `*state`. A syscall on shm and rdma-rc: call it
/// when idle, not per message. Messages still unread stay readable after the publisher left.
///
/// # Safety
/// As `tb_subscriber_poll`; `state` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tb_subscriber_publisher(s: *mut tb_subscriber, state: *mut tb_peer_state) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let s = unsafe { get(s) }?;
        non_null(state, "state")?;
        let v = match s.publisher() {
            PeerState::Live => tb_peer_state::TB_PEER_LIVE,
            PeerState::Closed => tb_peer_state::TB_PEER_CLOSED,
            PeerState::Died { .. } => tb_peer_state::TB_PEER_DIED,
        };
        // SAFETY: non-null; the caller promises writable.
        unsafe { state.write(v) };
        Ok(())
    })
}

/// Reliable streams: with `manual` true, positions are released to the publisher only by
/// `tb_subscriber_release_to` (a gateway releases an order once answered). Returns
/// `TB_ERROR_INVALID_ARGUMENT` on a stream with nothing to release (lossy).
///
/// # Safety
/// As `tb_subscriber_poll`.
#[no_mangle]
pub unsafe extern "C" fn tb_subscriber_set_manual_release(s: *mut tb_subscriber, manual: bool) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let s = unsafe { get(s) }?;
        if !s.set_manual_release(manual) {
            return Err(fail!(
                tb_status::TB_ERROR_INVALID_ARGUMENT,
                "this stream is lossy: it has nothing to release (open it with a reliable URI)"
            ));
        }
        Ok(())
    })
}

/// Releases every position below `position` to the publisher (manual release).
///
/// # Safety
/// As `tb_subscriber_poll`.
#[no_mangle]
pub unsafe extern "C" fn tb_subscriber_release_to(s: *mut tb_subscriber, position: u64) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        unsafe { get(s) }?.release_to(position);
        Ok(())
    })
}

/// Closes the stream (a reliable consumer line is let go); the handle stays until
/// `tb_subscriber_destroy` and answers `TB_ERROR_CLOSED`. Closing twice is not an error.
/// Not a stop signal for another thread: a handle is used by one thread at a time, and closing
/// it while another thread polls or publishes through it is a data race (stop that thread by
/// your own flag, then close).
///
/// # Safety
/// As `tb_subscriber_poll`.
#[no_mangle]
pub unsafe extern "C" fn tb_subscriber_close(s: *mut tb_subscriber) -> tb_status {
    // SAFETY: the caller's promise.
    guard(|| unsafe { Handle::<AnySubscriber>::close(s, "subscriber") })
}

/// Closes the stream if open and frees the handle; NULL is ignored.
///
/// # Safety
/// `s` is NULL or a subscriber handle not yet destroyed, not in use on another thread.
#[no_mangle]
pub unsafe extern "C" fn tb_subscriber_destroy(s: *mut tb_subscriber) {
    guard(|| {
        // SAFETY: the caller's promise.
        unsafe { Handle::<AnySubscriber>::destroy(s, "subscriber") };
        Ok(())
    });
}
