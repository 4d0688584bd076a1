//! Status codes, the thread's last error message, and the guard every exported function runs
//! its body in (null checks and panics become status codes; nothing unwinds into C).
//!
//! Why a fixed buffer for the message: the hot path may fail (a full reliable ring is a normal
//! moment), and recording why must neither allocate nor make a syscall. The message is written
//! with `core::fmt` into a thread-local array that has no destructor (so the first use on a
//! thread registers nothing either), cut at a character boundary if it is longer.
use core::cell::RefCell;
use core::ffi::c_char;
use core::fmt::{self, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};

use bus::stream::Retry;

/// What a call did. Every function that can fail returns one; on an error the thread's
/// [`tb_last_error`] says what was wrong and what to do.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum tb_status {
    /// Done.
    TB_OK = 0,
    /// A pointer argument that may not be NULL was NULL.
    TB_ERROR_NULL_POINTER = 1,
    /// The handle is not one of this kind (a subscriber passed as a publisher, a forged or
    /// overwritten handle).
    TB_ERROR_BAD_HANDLE = 2,
    /// The handle was closed: only `tb_*_destroy` may be called on it now.
    TB_ERROR_CLOSED = 3,
    /// An argument is out of range or malformed (a string that is not UTF-8, a zero length,
    /// a message whose header does not match its length).
    TB_ERROR_INVALID_ARGUMENT = 4,
    /// The channel URI does not parse; the message names what is wrong.
    TB_ERROR_BAD_URI = 5,
    /// The stream could not be opened (no ring and no publisher in time, no hugepages where
    /// required, a device missing, a refused handshake); the message says which and what to do.
    TB_ERROR_OPEN = 6,
    /// A reliable stream is full: its reader has not caught up. Retrying helps.
    TB_ERROR_FULL = 7,
    /// The message is larger than the stream's largest payload. Retrying never helps.
    TB_ERROR_TOO_LARGE = 8,
    /// The next message is not the length of the caller's buffer. It was not consumed: the
    /// record's `len` says its length; take it with `tb_subscriber_poll`.
    TB_ERROR_BUFFER_SIZE = 9,
    /// A claim is pending on this publisher: commit or abort it first.
    TB_ERROR_CLAIM_PENDING = 10,
    /// No claim is pending on this publisher.
    TB_ERROR_NO_CLAIM = 11,
    /// The transport failed in a way retrying may fix (an RDMA send queue full, a peer not
    /// there yet).
    TB_ERROR_TRANSPORT_RETRY = 12,
    /// The transport failed for good (a dead queue pair, a closed connection): reopen.
    TB_ERROR_TRANSPORT = 13,
    /// A journal could not be read (missing, damaged, not a journal).
    TB_ERROR_JOURNAL = 14,
    /// The URI needs a transport this library was built without (rdma-rc, ud-mcast: build
    /// tickbus-ffi with `--features rdma`).
    TB_ERROR_UNSUPPORTED = 15,
    /// tickbus hit a bug (a Rust panic, caught at the boundary). The handle involved may be
    /// unusable; please report the message.
    TB_ERROR_INTERNAL = 16,
}

use tb_status::*;

impl tb_status {
    /// The name of the code as written in the header.
    pub(crate) fn name(self) -> &'static core::ffi::CStr {
        match self {
            TB_OK => c"TB_OK",
            TB_ERROR_NULL_POINTER => c"TB_ERROR_NULL_POINTER",
            TB_ERROR_BAD_HANDLE => c"TB_ERROR_BAD_HANDLE",
            TB_ERROR_CLOSED => c"TB_ERROR_CLOSED",
            TB_ERROR_INVALID_ARGUMENT => c"TB_ERROR_INVALID_ARGUMENT",
            TB_ERROR_BAD_URI => c"TB_ERROR_BAD_URI",
            TB_ERROR_OPEN => c"TB_ERROR_OPEN",
            TB_ERROR_FULL => c"TB_ERROR_FULL",
            TB_ERROR_TOO_LARGE => c"TB_ERROR_TOO_LARGE",
            TB_ERROR_BUFFER_SIZE => c"TB_ERROR_BUFFER_SIZE",
            TB_ERROR_CLAIM_PENDING => c"TB_ERROR_CLAIM_PENDING",
            TB_ERROR_NO_CLAIM => c"TB_ERROR_NO_CLAIM",
            TB_ERROR_TRANSPORT_RETRY => c"TB_ERROR_TRANSPORT_RETRY",
            TB_ERROR_TRANSPORT => c"TB_ERROR_TRANSPORT",
            TB_ERROR_JOURNAL => c"TB_ERROR_JOURNAL",
            TB_ERROR_UNSUPPORTED => c"TB_ERROR_UNSUPPORTED",
            TB_ERROR_INTERNAL => c"TB_ERROR_INTERNAL",
        }
    }

    /// Every code, in value order.
    pub(crate) const ALL: [tb_status; 17] = [
        TB_OK,
        TB_ERROR_NULL_POINTER,
        TB_ERROR_BAD_HANDLE,
        TB_ERROR_CLOSED,
        TB_ERROR_INVALID_ARGUMENT,
        TB_ERROR_BAD_URI,
        TB_ERROR_OPEN,
        TB_ERROR_FULL,
        TB_ERROR_TOO_LARGE,
        TB_ERROR_BUFFER_SIZE,
        TB_ERROR_CLAIM_PENDING,
        TB_ERROR_NO_CLAIM,
        TB_ERROR_TRANSPORT_RETRY,
        TB_ERROR_TRANSPORT,
        TB_ERROR_JOURNAL,
        TB_ERROR_UNSUPPORTED,
        TB_ERROR_INTERNAL,
    ];
}

/// Bytes kept of the last error message, its terminating NUL included.
const MESSAGE_BYTES: usize = 1024;

struct LastError {
    code: tb_status,
    len: usize,
    buf: [u8; MESSAGE_BYTES],
}

impl Write for LastError {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = MESSAGE_BYTES - 1 - self.len;
        let mut n = s.len().min(room);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

thread_local! {
    // No destructor: a `[u8; N]` and two words, const-initialised, so first use on a thread
    // neither allocates nor registers a thread-exit hook.
    static LAST: RefCell<LastError> = const {
        RefCell::new(LastError { code: TB_OK, len: 0, buf: [0; MESSAGE_BYTES] })
    };
}

/// Records `code` and its message as this thread's last error and returns `code`.
pub(crate) fn record(code: tb_status, args: fmt::Arguments<'_>) -> tb_status {
    LAST.with(|l| {
        let mut l = l.borrow_mut();
        l.code = code;
        l.len = 0;
        let _ = l.write_fmt(args);
        let n = l.len;
        l.buf[n] = 0;
    });
    code
}

/// `fail` with `format_args!`.
macro_rules! fail {
    ($code:expr, $($t:tt)*) => {
        $crate::error::record($code, format_args!($($t)*))
    };
}
pub(crate) use fail;

/// The status for a transport error, with its message recorded (out of line: an error path).
#[cold]
#[inline(never)]
pub(crate) fn transport(e: &bus::stream::AnyError) -> tb_status {
    use bus::ring::ClaimError;
    let code = match e {
        bus::stream::AnyError::Shm(ClaimError::Full { .. }) => TB_ERROR_FULL,
        bus::stream::AnyError::Shm(ClaimError::TooLarge { .. }) => TB_ERROR_TOO_LARGE,
        _ if e.retry_helps() => TB_ERROR_TRANSPORT_RETRY,
        _ => TB_ERROR_TRANSPORT,
    };
    fail!(code, "{e}")
}

/// Runs an exported function's body: a panic becomes [`tb_status::TB_ERROR_INTERNAL`] with its
/// message, never an unwind into C.
pub(crate) fn guard(f: impl FnOnce() -> Result<(), tb_status>) -> tb_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => TB_OK,
        Ok(Err(code)) => code,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("a panic without a message");
            fail!(
                TB_ERROR_INTERNAL,
                "tickbus hit a bug: {what}; the handle involved may be unusable: please report this"
            )
        }
    }
}

/// Fails with [`tb_status::TB_ERROR_NULL_POINTER`] naming `what` if `p` is null.
#[inline(always)]
pub(crate) fn non_null<T>(p: *const T, what: &'static str) -> Result<(), tb_status> {
    if p.is_null() {
        Err(null_pointer(what))
    } else {
        Ok(())
    }
}

/// Fails unless `len` bytes can be one Rust slice (at most `isize::MAX`): a length computed
/// wrong (`(size_t)-1`) is an error, not undefined behaviour.
#[inline(always)]
pub(crate) fn slice_len(len: usize, what: &'static str) -> Result<(), tb_status> {
    if len > isize::MAX as usize {
        Err(too_long(len, what))
    } else {
        Ok(())
    }
}

#[cold]
#[inline(never)]
fn too_long(len: usize, what: &str) -> tb_status {
    fail!(TB_ERROR_TOO_LARGE, "{what}: {len} bytes is no length a buffer can have: check the length computed")
}

#[cold]
#[inline(never)]
fn null_pointer(what: &str) -> tb_status {
    fail!(TB_ERROR_NULL_POINTER, "{what} is NULL: pass a valid pointer")
}

/// The message of this thread's last failed call (NUL-terminated, UTF-8), or "" if no call on
/// this thread has failed. Valid until the next failing call on this thread; copy it to keep it.
/// Successful calls leave it alone: read it only after a call returned an error.
#[no_mangle]
pub extern "C" fn tb_last_error() -> *const c_char {
    // The buffer lives as long as the thread; no reference to it is made here (a caller may be
    // reading an earlier message through this pointer).
    LAST.with(|l| l.as_ptr().cast::<u8>().wrapping_add(core::mem::offset_of!(LastError, buf))).cast::<c_char>()
}

/// The code of this thread's last failed call (`TB_OK` if none has failed).
#[no_mangle]
pub extern "C" fn tb_last_error_code() -> tb_status {
    LAST.with(|l| l.borrow().code)
}

/// The name of a status code ("TB_ERROR_FULL"), or "unknown status" for a value that is none.
#[no_mangle]
pub extern "C" fn tb_status_name(code: i32) -> *const c_char {
    tb_status::ALL.iter().find(|s| **s as i32 == code).map_or(c"unknown status", |s| s.name()).as_ptr()
}

/// Whether the same call may succeed if tried again later (a full ring, a send queue full).
#[no_mangle]
pub extern "C" fn tb_status_retry_helps(code: i32) -> bool {
    code == TB_ERROR_FULL as i32 || code == TB_ERROR_TRANSPORT_RETRY as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::ffi::CStr;

    fn last() -> String {
        // SAFETY: tb_last_error returns a NUL-terminated buffer owned by this thread.
        unsafe { CStr::from_ptr(tb_last_error()) }.to_str().unwrap().to_owned()
    }

    #[test]
    fn a_failure_is_recorded_with_its_message_and_code() {
        assert_eq!(fail!(TB_ERROR_FULL, "ring {} full", 3), TB_ERROR_FULL);
        assert_eq!(last(), "ring 3 full");
        assert_eq!(tb_last_error_code(), TB_ERROR_FULL);
        assert_eq!(fail!(TB_ERROR_CLOSED, "x"), TB_ERROR_CLOSED);
        assert_eq!(last(), "x", "a shorter message replaces a longer one whole");
    }

    #[test]
    fn a_long_message_is_cut_at_a_character_boundary() {
        let long = "é".repeat(MESSAGE_BYTES);
        fail!(TB_ERROR_OPEN, "{long}");
        let got = last();
        assert!(got.len() < MESSAGE_BYTES && got.len() >= MESSAGE_BYTES - 3, "{}", got.len());
        assert!(got.chars().all(|c| c == 'é'));
    }

    #[test]
    fn a_panic_becomes_internal_with_its_message() {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let code = guard(|| panic!("boom {}", 7));
        std::panic::set_hook(prev);
        assert_eq!(code, TB_ERROR_INTERNAL);
        assert!(last().contains("boom 7"), "{}", last());
    }

    #[test]
    fn every_code_has_its_header_name_and_unknown_values_are_named_so() {
        for s in tb_status::ALL {
            // SAFETY: tb_status_name returns a static NUL-terminated string.
            let n = unsafe { CStr::from_ptr(tb_status_name(s as i32)) }.to_str().unwrap();
            assert_eq!(n, format!("{s:?}"));
        }
        assert_eq!(tb_status::ALL.len(), TB_ERROR_INTERNAL as usize + 1);
        // SAFETY: as above.
        let n = unsafe { CStr::from_ptr(tb_status_name(999)) };
        assert_eq!(n.to_str().unwrap(), "unknown status");
        assert!(tb_status_retry_helps(TB_ERROR_FULL as i32) && !tb_status_retry_helps(TB_ERROR_TOO_LARGE as i32));
    }
}
