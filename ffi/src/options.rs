//! What opening a stream needs beyond its URI, as a plain C struct with defaults.
use core::ffi::{c_char, CStr};
use std::time::Duration;

use bus::shm::{HugepagePolicy, ShmOptions};
use bus::stream::{Channel, OpenOptions, Reliability};
use bus::StartAt;

use crate::error::{fail, non_null, tb_status};

/// Where shm rings may live.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum tb_hugepages {
    /// hugetlbfs if it can, else /dev/shm with a warning on stderr (the default).
    TB_HUGEPAGES_PREFERRED = 0,
    /// hugetlbfs or fail with how to reserve hugepages.
    TB_HUGEPAGES_REQUIRED = 1,
    /// Always /dev/shm.
    TB_HUGEPAGES_NEVER = 2,
}

/// Options for `tb_publisher_open` and `tb_subscriber_open`. Fill it with
/// `tb_open_options_init` and change what you need: the URI's own parameters win over these.
/// Strings are borrowed for the duration of the open call only.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tb_open_options {
    /// Reliable (every message, the publisher waits for its reader) or lossy, where the URI
    /// says neither `reliable` nor `lossy`. Default: lossy. (Read as a byte: any non-zero value
    /// is true.)
    pub reliable: bool,
    /// The stream id a shm publisher stamps, where the URI has no `stream=`. Default 1.
    pub stream: u32,
    /// Ring slots (a power of two), where the URI has no `slots=`. Default 4096.
    pub slots: u32,
    /// Largest payload in bytes, where the URI has no `payload=`. Default 128.
    pub payload: u32,
    /// Reliable consumer lines, where the URI has no `consumers=`. Default 1.
    pub consumers: u32,
    /// A lossy shm subscriber starts at the oldest message the ring still holds (true) or at
    /// the next one published (false, the default: live data).
    pub start_oldest: bool,
    /// How long a subscriber waits for its publisher to appear, in ms. Default 30,000.
    pub wait_ms: u64,
    /// hugetlbfs folder for shm rings; NULL: `$TICKBUS_HUGEPAGE_DIR` or /dev/hugepages/tickbus.
    pub hugepage_dir: *const c_char,
    /// Fallback folder for shm rings; NULL: `$TICKBUS_SHM_DIR` or /dev/shm/tickbus.
    pub shm_dir: *const c_char,
    /// Whether rings must, may or may not be on hugepages: a `tb_hugepages` value (a plain
    /// integer here, so a wrong value is an error, not undefined behaviour).
    pub hugepages: u32,
    /// The handshake secret (rdma-rc, ud-mcast) where the URI names no `token-env`; may be NULL
    /// when `token_len` is 0.
    pub token: *const u8,
    /// Bytes at `token`.
    pub token_len: usize,
    /// The RDMA device; NULL: `$TICKBUS_RDMA_DEVICE`, else the first.
    pub device: *const c_char,
}

/// `tb_open_options` with its two flags as bytes: the same layout (checked below), every field's
/// type taking any bit pattern, so a C struct can be read as it is.
#[repr(C)]
struct Plain {
    reliable: u8,
    stream: u32,
    slots: u32,
    payload: u32,
    consumers: u32,
    start_oldest: u8,
    wait_ms: u64,
    hugepage_dir: *const c_char,
    shm_dir: *const c_char,
    hugepages: u32,
    token: *const u8,
    token_len: usize,
    device: *const c_char,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Plain>() == size_of::<tb_open_options>());
    assert!(offset_of!(Plain, stream) == offset_of!(tb_open_options, stream));
    assert!(offset_of!(Plain, consumers) == offset_of!(tb_open_options, consumers));
    assert!(offset_of!(Plain, start_oldest) == offset_of!(tb_open_options, start_oldest));
    assert!(offset_of!(Plain, wait_ms) == offset_of!(tb_open_options, wait_ms));
    assert!(offset_of!(Plain, hugepages) == offset_of!(tb_open_options, hugepages));
    assert!(offset_of!(Plain, token_len) == offset_of!(tb_open_options, token_len));
    assert!(offset_of!(Plain, device) == offset_of!(tb_open_options, device));
};

/// Fills `options` with the defaults. Returns `TB_ERROR_NULL_POINTER` if it is NULL.
///
/// # Safety
/// `options` is NULL or points to writable memory for a `tb_open_options`.
#[no_mangle]
pub unsafe extern "C" fn tb_open_options_init(options: *mut tb_open_options) -> tb_status {
    crate::error::guard(|| {
        non_null(options, "options")?;
        let d = OpenOptions::default();
        let o = tb_open_options {
            reliable: d.reliability == Reliability::Reliable,
            stream: d.stream,
            slots: d.slots as u32,
            payload: d.payload as u32,
            consumers: d.consumers as u32,
            start_oldest: false,
            wait_ms: d.wait.as_millis() as u64,
            hugepage_dir: core::ptr::null(),
            shm_dir: core::ptr::null(),
            hugepages: tb_hugepages::TB_HUGEPAGES_PREFERRED as u32,
            token: core::ptr::null(),
            token_len: 0,
            device: core::ptr::null(),
        };
        // SAFETY: non-null checked above; the caller promises it is writable.
        unsafe { options.write(o) };
        Ok(())
    })
}

/// A borrowed C string as UTF-8, or an error naming `what`.
///
/// # Safety
/// `s` is non-null and NUL-terminated.
pub(crate) unsafe fn utf8<'a>(s: *const c_char, what: &str) -> Result<&'a str, tb_status> {
    // SAFETY: the caller promises a NUL-terminated string.
    let c = unsafe { CStr::from_ptr(s) };
    c.to_str().map_err(|e| fail!(tb_status::TB_ERROR_INVALID_ARGUMENT, "{what} is not UTF-8 ({e}): pass UTF-8 text"))
}

/// Parses `uri` as a channel.
///
/// # Safety
/// `uri` is NULL or NUL-terminated.
pub(crate) unsafe fn channel(uri: *const c_char) -> Result<Channel, tb_status> {
    non_null(uri, "uri")?;
    // SAFETY: non-null; the caller promises NUL-terminated.
    let s = unsafe { utf8(uri, "uri") }?;
    Channel::parse(s).map_err(|e| fail!(tb_status::TB_ERROR_BAD_URI, "{e}"))
}

/// The library's options from the C struct (NULL: the defaults).
///
/// # Safety
/// `o` is NULL or points to a `tb_open_options` whose strings are NULL or NUL-terminated and
/// whose `token` holds `token_len` bytes.
pub(crate) unsafe fn open_options(o: *const tb_open_options) -> Result<OpenOptions, tb_status> {
    let mut out = OpenOptions::default();
    if o.is_null() {
        return Ok(out);
    }
    // Read as `Plain`, never as a `&tb_open_options`: a C `bool` holding anything but 0 or 1 (a
    // struct never passed to tb_open_options_init) would be undefined behaviour as a Rust bool,
    // so the two flags are read as bytes (non-zero: true).
    // SAFETY: non-null; the caller promises a readable struct; `Plain` has its layout (checked
    // at compile time) and every field of it takes any bit pattern.
    let o = unsafe { &*o.cast::<Plain>() };
    let (reliable, start_oldest) = (o.reliable != 0, o.start_oldest != 0);
    let invalid = |what: &str, v: u32| {
        fail!(
            tb_status::TB_ERROR_INVALID_ARGUMENT,
            "options.{what} = {v} is out of range: {}",
            match what {
                "slots" => "a power of two from 2 to 2^30",
                "payload" => "8 to 1048576 bytes",
                _ => "1 to 16",
            }
        )
    };
    if !(2..=1 << 30).contains(&o.slots) || !o.slots.is_power_of_two() {
        return Err(invalid("slots", o.slots));
    }
    if !(8..=1 << 20).contains(&o.payload) {
        return Err(invalid("payload", o.payload));
    }
    if !(1..=16).contains(&o.consumers) {
        return Err(invalid("consumers", o.consumers));
    }
    out.reliability = if reliable { Reliability::Reliable } else { Reliability::Lossy };
    out.stream = o.stream;
    out.slots = o.slots as usize;
    out.payload = o.payload as usize;
    out.consumers = o.consumers as usize;
    out.start_at = if start_oldest { StartAt::Oldest } else { StartAt::Latest };
    out.wait = Duration::from_millis(o.wait_ms);
    let d = ShmOptions::default();
    let dir = |p: *const c_char, what: &str, default| -> Result<std::path::PathBuf, tb_status> {
        if p.is_null() {
            Ok(default)
        } else {
            // SAFETY: non-null; the caller promises NUL-terminated.
            Ok(unsafe { utf8(p, what) }?.into())
        }
    };
    let policy = match o.hugepages {
        0 => HugepagePolicy::Preferred,
        1 => HugepagePolicy::Required,
        2 => HugepagePolicy::Never,
        v => {
            return Err(fail!(
                tb_status::TB_ERROR_INVALID_ARGUMENT,
                "options.hugepages = {v} is none of TB_HUGEPAGES_PREFERRED (0), _REQUIRED (1), _NEVER (2)"
            ))
        }
    };
    out.shm = ShmOptions::new(
        dir(o.hugepage_dir, "options.hugepage_dir", d.hugepage_dir)?,
        dir(o.shm_dir, "options.shm_dir", d.fallback_dir)?,
        policy,
    );
    if o.token_len > 0 {
        non_null(o.token, "options.token (with token_len > 0)")?;
        // SAFETY: non-null; the caller promises token_len readable bytes.
        out.token = unsafe { core::slice::from_raw_parts(o.token, o.token_len) }.to_vec();
    }
    if !o.device.is_null() {
        // SAFETY: non-null; the caller promises NUL-terminated.
        out.device = Some(unsafe { utf8(o.device, "options.device") }?.to_owned());
    }
    Ok(out)
}
