//! Handles: heap objects C holds by pointer, each starting with a magic word saying what kind
//! it is, so a handle of the wrong kind, or one whose memory was overwritten, is an error code
//! instead of undefined behaviour in the library. A handle is closed (its stream let go, calls
//! return `TB_ERROR_CLOSED`) and destroyed (its memory freed) in two steps, so a closed handle
//! answers with an error rather than being a dangling pointer.
//!
//! What the magic cannot catch: a pointer that was never a handle (it may point anywhere), and
//! a handle used after `tb_*_destroy` (its memory is gone). The header says so.
use crate::error::{fail, tb_status};

/// The magic of a destroyed handle (written just before its memory is freed, so a use after
/// destroy that happens to read the old memory is refused, not trusted).
const DEAD: u64 = 0;

// The error paths, out of line: every call checks its handle on the hot path, and the checks
// stay a compare and a branch when the message formatting is not inlined beside them.
#[cold]
#[inline(never)]
fn null(what: &str) -> tb_status {
    fail!(tb_status::TB_ERROR_NULL_POINTER, "{what} is NULL: pass a valid pointer")
}

#[cold]
#[inline(never)]
fn bad_handle(what: &str, kind: &str) -> tb_status {
    fail!(tb_status::TB_ERROR_BAD_HANDLE, "{what} is not a {kind}: pass the handle its open call returned")
}

#[cold]
#[inline(never)]
fn closed(what: &str, kind: &str) -> tb_status {
    fail!(tb_status::TB_ERROR_CLOSED, "{what} ({kind}) was closed: only its destroy call may follow")
}

/// A handle kind: its magic and name.
pub(crate) trait Kind {
    const MAGIC: u64;
    const NAME: &'static str;
}

/// A handle: the magic, then the object, `None` once closed. Aligned to 128 bytes (a pair of
/// cache lines, what the adjacent-line prefetcher moves together) so two handles never share a
/// line: a C app allocates a stream's publisher and subscriber one after the other and then
/// hands them to two threads, which would otherwise write to one line from two cores on every
/// message.
#[repr(C, align(128))]
pub(crate) struct Handle<T: Kind> {
    magic: u64,
    inner: Option<T>,
}

impl<T: Kind> Handle<T> {
    /// A new handle on the heap, as the pointer type C sees.
    pub(crate) fn into_raw<C>(inner: T) -> *mut C {
        Box::into_raw(Box::new(Handle { magic: T::MAGIC, inner: Some(inner) })).cast()
    }

    /// The object behind `p`: fails if `p` is NULL, not a handle of this kind, or closed.
    ///
    /// # Safety
    /// `p` is NULL or was returned by this library as a handle (of any kind) and not destroyed,
    /// and no other reference to it is live (one thread at a time).
    #[inline(always)]
    pub(crate) unsafe fn get<'a, C>(p: *mut C, what: &'static str) -> Result<&'a mut T, tb_status> {
        if p.is_null() {
            return Err(null(what));
        }
        let h = p.cast::<Handle<T>>();
        // SAFETY: every handle starts with its magic word (repr(C)), so the first 8 bytes of any
        // live handle can be read, whatever its kind.
        let magic = unsafe { h.cast::<u64>().read() };
        if magic != T::MAGIC {
            return Err(bad_handle(what, T::NAME));
        }
        // SAFETY: the magic says it is a live Handle<T>; the caller promises exclusive use.
        match unsafe { &mut (*h).inner } {
            Some(t) => Ok(t),
            None => Err(closed(what, T::NAME)),
        }
    }

    /// Closes the object behind `p` (drops it); the handle stays, answering `TB_ERROR_CLOSED`.
    /// Closing a closed handle is not an error.
    ///
    /// # Safety
    /// As [`Handle::get`].
    pub(crate) unsafe fn close<C>(p: *mut C, what: &'static str) -> Result<(), tb_status> {
        if p.is_null() {
            return Err(null(what));
        }
        let h = p.cast::<Handle<T>>();
        // SAFETY: as in `get`: every handle starts with its magic word.
        if unsafe { h.cast::<u64>().read() } != T::MAGIC {
            return Err(bad_handle(what, T::NAME));
        }
        // SAFETY: a live Handle<T> (its magic); the caller promises exclusive use. Closing a
        // closed handle is a success and records no error.
        unsafe { (*h).inner = None };
        Ok(())
    }

    /// Closes and frees the handle. NULL is ignored; a handle of another kind is refused
    /// (nothing freed) with its error recorded.
    ///
    /// # Safety
    /// As [`Handle::get`]; the handle is not used again.
    pub(crate) unsafe fn destroy<C>(p: *mut C, what: &'static str) {
        if p.is_null() {
            return;
        }
        // SAFETY: the caller's promise.
        if unsafe { Self::close::<C>(p, what) }.is_err() {
            return;
        }
        let h = p.cast::<Handle<T>>();
        // SAFETY: a live Handle<T> made by `into_raw`'s Box; not used again.
        unsafe {
            (*h).magic = DEAD;
            drop(Box::from_raw(h));
        }
    }
}
