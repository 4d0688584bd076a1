//! Publishers: open by channel URI, publish a copy, send a fixed-layout message (header stamped),
//! or claim a slot, write it in place and commit.
//!
//! The claim lives inside the publisher handle rather than as a handle of its own: a claim
//! borrows its publisher, and keeping both in one object makes "publisher closed while a claim
//! is pending" impossible instead of a dangling pointer. While a claim is pending, every other
//! call on the publisher returns `TB_ERROR_CLAIM_PENDING`.
use core::ffi::{c_char, c_void};
use core::ptr::NonNull;

use bus::codecs::header::{Header, HEADER_LEN};
use bus::codecs::Message;
use bus::stream::{self, AnyClaim, AnyPublisher, Publish, Reliability, StreamClaim};

use crate::error::{fail, guard, non_null, slice_len, tb_status, transport};
use crate::handle::{Handle, Kind};
use crate::options::{channel, open_options, tb_open_options};
use crate::tb_stream_info;

/// A publisher of one stream (opaque). Owned by the caller from `tb_publisher_open` until
/// `tb_publisher_destroy`. It may move between threads but is used by one thread at a time.
#[allow(non_camel_case_types)]
pub struct tb_publisher {
    _opaque: [u8; 0],
}

pub(crate) struct Pub {
    /// Dropped first (field order, and `Drop` below): a claim is aborted while its publisher
    /// still exists.
    claim: Option<AnyClaim<'static>>,
    /// Owned; a raw pointer, not a `Box`, because `claim` borrows it. On its own 128-byte
    /// aligned allocation, so it shares no cache line with another handle's state.
    publisher: NonNull<Aligned>,
}

/// A publisher on its own 128-byte-aligned allocation (see `Handle`).
#[repr(C, align(128))]
struct Aligned(AnyPublisher);

impl Kind for Pub {
    const MAGIC: u64 = u64::from_le_bytes(*b"tb:publ\0");
    const NAME: &'static str = "tb_publisher";
}

impl Drop for Pub {
    fn drop(&mut self) {
        self.claim = None;
        // SAFETY: made by Box::leak in `tb_publisher_open`; the claim borrowing it is gone.
        drop(unsafe { Box::from_raw(self.publisher.as_ptr()) });
    }
}

impl Pub {
    /// The publisher, unless a claim is pending.
    fn free(&mut self) -> Result<&mut AnyPublisher, tb_status> {
        if self.claim.is_some() {
            return Err(fail!(
                tb_status::TB_ERROR_CLAIM_PENDING,
                "a claim is pending on this publisher: tb_publisher_commit or tb_publisher_abort it first"
            ));
        }
        // SAFETY: no claim borrows the publisher, and `self` is borrowed mutably.
        Ok(unsafe { &mut self.publisher.as_mut().0 })
    }

    fn claim(&mut self) -> Result<&mut AnyClaim<'static>, tb_status> {
        self.claim.as_mut().ok_or_else(|| {
            fail!(tb_status::TB_ERROR_NO_CLAIM, "no claim is pending on this publisher: tb_publisher_claim first")
        })
    }
}

/// # Safety
/// `p` is NULL or a handle from this library, not destroyed, used by one thread at a time.
unsafe fn get<'a>(p: *mut tb_publisher) -> Result<&'a mut Pub, tb_status> {
    // SAFETY: the caller's promise.
    unsafe { Handle::<Pub>::get(p, "publisher") }
}

/// Opens a publisher of the stream `uri` names (`shm:md`, `shm:orders?reliable&slots=4096`,
/// `rdma-rc://IP:PORT/STREAM`, `ud-mcast://GROUP/STREAM?recovery=IP:PORT`). A shm publisher
/// creates the ring (replacing one left by a publisher that died). `options` may be NULL (the
/// defaults). On success `*out` holds the handle.
///
/// # Safety
/// `uri` is NULL or NUL-terminated; `options` is NULL or valid (see `tb_open_options`); `out`
/// is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tb_publisher_open(
    uri: *const c_char,
    options: *const tb_open_options,
    out: *mut *mut tb_publisher,
) -> tb_status {
    guard(|| {
        non_null(out, "out")?;
        // SAFETY: the caller's promises, passed on.
        let (c, o) = unsafe { (channel(uri)?, open_options(options)?) };
        let p = stream::open_publisher(&c, &o).map_err(|e| crate::subscriber::open_failed(&e))?;
        let publisher = NonNull::from(Box::leak(Box::new(Aligned(p))));
        // SAFETY: non-null checked; the caller promises it is writable.
        unsafe { out.write(Handle::into_raw(Pub { claim: None, publisher })) };
        Ok(())
    })
}

/// Publishes a copy of `len` bytes at `data`; `*position` (may be NULL) gets its position.
/// Never blocks: a full reliable stream returns `TB_ERROR_FULL` (retry), a message larger than
/// the stream's payload `TB_ERROR_TOO_LARGE`. No allocation, no syscall on shm.
///
/// # Safety
/// `p` as every publisher call; `data` holds `len` readable bytes; `position` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn tb_publisher_publish(
    p: *mut tb_publisher,
    data: *const c_void,
    len: usize,
    position: *mut u64,
) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let p = unsafe { get(p) }?.free()?;
        non_null(data, "data")?;
        slice_len(len, "len")?;
        // SAFETY: non-null, a slice's length; the caller promises `len` readable bytes.
        let bytes = unsafe { core::slice::from_raw_parts(data.cast::<u8>(), len) };
        let at = p.publish(bytes).map_err(|e| transport(&e))?;
        write_opt(position, at);
        Ok(())
    })
}

/// Sends a fixed-layout message (`len` bytes at `msg`, starting with its 32-byte header): checks
/// that the header's type, version and length match `len`, stamps the header in `msg` (stream
/// id, sequence = position, this host's TSC) as the Rust `send` does, and publishes it. `msg`
/// needs no particular alignment.
///
/// # Safety
/// As `tb_publisher_publish`, with `msg` holding `len` readable and writable bytes.
#[no_mangle]
pub unsafe extern "C" fn tb_publisher_send(
    p: *mut tb_publisher,
    msg: *mut c_void,
    len: usize,
    position: *mut u64,
) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let p = unsafe { get(p) }?.free()?;
        non_null(msg, "msg")?;
        slice_len(len, "len")?;
        // SAFETY: non-null, a slice's length; the caller promises `len` readable and writable bytes.
        let bytes = unsafe { core::slice::from_raw_parts_mut(msg.cast::<u8>(), len) };
        let at = send_bytes(p, bytes)?;
        write_opt(position, at);
        Ok(())
    })
}

/// Sends the message in `bytes` as its type, then writes the stamped header back.
fn send_bytes(p: &mut AnyPublisher, bytes: &mut [u8]) -> Result<u64, tb_status> {
    use bus::codecs::exec::{ExecAck, ExecFill, ExecReject};
    use bus::codecs::md::{
        BookSnapshot, FeedGap, OrderAdd, OrderDelete, OrderExecute, OrderModify, Quote, SnapshotOrders, Trade,
    };
    use bus::codecs::orders::{CancelOrder, NewOrder, ReplaceOrder};
    use bus::codecs::MsgType;
    use zerocopy::IntoBytes;

    let bad = |why: core::fmt::Arguments<'_>| fail!(tb_status::TB_ERROR_INVALID_ARGUMENT, "msg: {why}");
    let Some(h) = Header::peek(bytes) else {
        return Err(bad(format_args!("{} bytes is shorter than a message header ({HEADER_LEN})", bytes.len())));
    };
    if h.length as usize != bytes.len() {
        return Err(bad(format_args!("its header says {} bytes, the call says {}", h.length, bytes.len())));
    }
    fn typed<T: Message>(p: &mut AnyPublisher, bytes: &mut [u8], version: u16) -> Result<u64, tb_status> {
        if bytes.len() != T::LEN || version != T::VERSION {
            return Err(fail!(
                tb_status::TB_ERROR_INVALID_ARGUMENT,
                "msg: a {:?} is {} bytes at version {}, this one says {} bytes at version {}: build it from tickbus.h's struct",
                T::TYPE,
                T::LEN,
                T::VERSION,
                bytes.len(),
                version
            ));
        }
        let mut m = T::read_from_bytes(bytes).expect("length checked");
        let at = p.send(&mut m).map_err(|e| transport(&e))?;
        bytes[..HEADER_LEN].copy_from_slice(m.header().as_bytes());
        Ok(at)
    }
    match MsgType::from_wire(h.msg_type) {
        Some(MsgType::Quote) => typed::<Quote>(p, bytes, h.version),
        Some(MsgType::Trade) => typed::<Trade>(p, bytes, h.version),
        Some(MsgType::OrderAdd) => typed::<OrderAdd>(p, bytes, h.version),
        Some(MsgType::OrderModify) => typed::<OrderModify>(p, bytes, h.version),
        Some(MsgType::OrderDelete) => typed::<OrderDelete>(p, bytes, h.version),
        Some(MsgType::OrderExecute) => typed::<OrderExecute>(p, bytes, h.version),
        Some(MsgType::BookSnapshot) => typed::<BookSnapshot>(p, bytes, h.version),
        Some(MsgType::FeedGap) => typed::<FeedGap>(p, bytes, h.version),
        Some(MsgType::SnapshotOrders) => typed::<SnapshotOrders>(p, bytes, h.version),
        Some(MsgType::NewOrder) => typed::<NewOrder>(p, bytes, h.version),
        Some(MsgType::CancelOrder) => typed::<CancelOrder>(p, bytes, h.version),
        Some(MsgType::ReplaceOrder) => typed::<ReplaceOrder>(p, bytes, h.version),
        Some(MsgType::ExecAck) => typed::<ExecAck>(p, bytes, h.version),
        Some(MsgType::ExecFill) => typed::<ExecFill>(p, bytes, h.version),
        Some(MsgType::ExecReject) => typed::<ExecReject>(p, bytes, h.version),
        None => Err(bad(format_args!("message type {} is not a tickbus message type (TB_MSG_*)", h.msg_type))),
    }
}

/// Claims room for a `len`-byte message; `*position` (may be NULL) gets the position it will
/// have. Write it with `tb_publisher_claim_write` / `tb_publisher_claim_store_word`, then
/// `tb_publisher_commit` (or `tb_publisher_abort`: readers skip the slot). On shm the bytes go
/// straight into the ring slot (as atomic word stores: a lapped reader may be looking at it).
///
/// # Safety
/// As `tb_publisher_publish`.
#[no_mangle]
pub unsafe extern "C" fn tb_publisher_claim(p: *mut tb_publisher, len: usize, position: *mut u64) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let h = unsafe { get(p) }?;
        h.free()?;
        // SAFETY: no claim is pending (checked), so nothing else borrows the publisher; the
        // claim is stored beside it and dropped before it (Pub's Drop).
        let publisher: &'static mut AnyPublisher = unsafe { &mut h.publisher.as_mut().0 };
        let c = publisher.try_claim(len).map_err(|e| transport(&e))?;
        write_opt(position, c.position());
        h.claim = Some(c);
        Ok(())
    })
}

/// Copies the whole message (exactly the claimed length) into the pending claim.
///
/// # Safety
/// As `tb_publisher_publish`.
#[no_mangle]
pub unsafe extern "C" fn tb_publisher_claim_write(p: *mut tb_publisher, data: *const c_void, len: usize) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let c = unsafe { get(p) }?.claim()?;
        non_null(data, "data")?;
        if len != c.len() {
            return Err(fail!(
                tb_status::TB_ERROR_INVALID_ARGUMENT,
                "len {len} is not the claimed length {}: write the whole message, or store words",
                c.len()
            ));
        }
        // SAFETY: non-null; the caller promises `len` readable bytes.
        c.write(unsafe { core::slice::from_raw_parts(data.cast::<u8>(), len) });
        Ok(())
    })
}

/// Stores `value` as word `k` of the pending claim (bytes 8k..8k+8, little-endian): one field
/// written in place.
///
/// # Safety
/// As `tb_publisher_publish`.
#[no_mangle]
pub unsafe extern "C" fn tb_publisher_claim_store_word(p: *mut tb_publisher, k: usize, value: u64) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let c = unsafe { get(p) }?.claim()?;
        if k.checked_mul(8).and_then(|b| b.checked_add(8)).is_none_or(|end| end > c.len()) {
            return Err(fail!(tb_status::TB_ERROR_INVALID_ARGUMENT, "word {k} is past the claimed {} bytes", c.len()));
        }
        c.store_word(k, value);
        Ok(())
    })
}

/// Publishes the pending claim; `*position` (may be NULL) gets its position.
///
/// # Safety
/// As `tb_publisher_publish`.
#[no_mangle]
pub unsafe extern "C" fn tb_publisher_commit(p: *mut tb_publisher, position: *mut u64) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let h = unsafe { get(p) }?;
        h.claim()?;
        let at = h.claim.take().expect("checked").commit().map_err(|e| transport(&e))?;
        write_opt(position, at);
        Ok(())
    })
}

/// Drops the pending claim unpublished (readers skip its slot; it is counted as aborted).
///
/// # Safety
/// As `tb_publisher_publish`.
#[no_mangle]
pub unsafe extern "C" fn tb_publisher_abort(p: *mut tb_publisher) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let h = unsafe { get(p) }?;
        h.claim()?;
        h.claim = None;
        Ok(())
    })
}

/// The publisher's position (the next message's), stream id, largest payload, reliability and
/// clock. `missed` and `aborted` are 0.
///
/// # Safety
/// As `tb_publisher_publish`; `info` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tb_publisher_info(p: *mut tb_publisher, info: *mut tb_stream_info) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let p = unsafe { get(p) }?.free()?;
        non_null(info, "info")?;
        let i = tb_stream_info {
            position: p.position(),
            missed: 0,
            aborted: 0,
            stream_id: p.stream_id(),
            max_payload: p.max_payload() as u32,
            reliable: p.reliability() == Reliability::Reliable,
            ticks_per_ns: p.ticks_per_ns(),
        };
        // SAFETY: non-null; the caller promises writable.
        unsafe { info.write(i) };
        Ok(())
    })
}

/// Upkeep to call when idle, off the hot path (rdma-rc takes in subscribers and ships what
/// waited for credit; shm has nothing to do).
///
/// # Safety
/// As `tb_publisher_publish`.
#[no_mangle]
pub unsafe extern "C" fn tb_publisher_idle(p: *mut tb_publisher) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        unsafe { get(p) }?.free()?.idle();
        Ok(())
    })
}

/// Whether a reader is attached (shm: a consumer line or observer is live; rdma-rc: a
/// subscriber connected). `*attached` gets the answer.
///
/// # Safety
/// As `tb_publisher_publish`; `attached` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tb_publisher_has_reader(p: *mut tb_publisher, attached: *mut bool) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let p = unsafe { get(p) }?.free()?;
        non_null(attached, "attached")?;
        // SAFETY: non-null; the caller promises writable.
        unsafe { attached.write(p.has_reader()) };
        Ok(())
    })
}

/// Closes the stream (a pending claim is aborted); the handle stays until
/// `tb_publisher_destroy` and answers `TB_ERROR_CLOSED`. Closing twice is not an error.
/// Not a stop signal for another thread: a handle is used by one thread at a time, and closing
/// it while another thread polls or publishes through it is a data race (stop that thread by
/// your own flag, then close).
///
/// # Safety
/// As `tb_publisher_publish`.
#[no_mangle]
pub unsafe extern "C" fn tb_publisher_close(p: *mut tb_publisher) -> tb_status {
    // SAFETY: the caller's promise.
    guard(|| unsafe { Handle::<Pub>::close(p, "publisher") })
}

/// Closes the stream if open and frees the handle; NULL is ignored. The handle may not be used
/// again.
///
/// # Safety
/// `p` is NULL or a publisher handle not yet destroyed, not in use on another thread.
#[no_mangle]
pub unsafe extern "C" fn tb_publisher_destroy(p: *mut tb_publisher) {
    guard(|| {
        // SAFETY: the caller's promise.
        unsafe { Handle::<Pub>::destroy(p, "publisher") };
        Ok(())
    });
}

/// Writes `v` to `out` unless it is NULL.
pub(crate) fn write_opt(out: *mut u64, v: u64) {
    if !out.is_null() {
        // SAFETY: the caller of the exported function promises a NULL or writable pointer.
        unsafe { out.write(v) };
    }
}
