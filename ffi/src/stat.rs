//! `stat` from C: a snapshot of this host's live counters (every tickbus process's streams, as
//! `tickbus stat` shows them) and its shm rings, read into plain structs one entry at a time.
use core::ffi::c_char;

use bus::counters::Counter;
use bus::shm::ShmOptions;
use bus::stat::Snapshot;

use crate::error::{fail, guard, non_null, tb_status};
use crate::handle::{Handle, Kind};

/// Counters per stream in `tb_stat_stream.counters`, indexed by counter number (`tb_counter_name`
/// names number i).
pub const TB_COUNTERS: usize = 19;
const _: () = assert!(TB_COUNTERS == Counter::ALL.len());

/// A snapshot (opaque), from `tb_stat_snapshot` until `tb_stat_destroy`.
#[allow(non_camel_case_types)]
pub struct tb_stat {
    _opaque: [u8; 0],
}

impl Kind for Snapshot {
    const MAGIC: u64 = u64::from_le_bytes(*b"tb:stat\0");
    const NAME: &'static str = "tb_stat";
}

/// One end of one stream in one process.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tb_stat_stream {
    /// The process.
    pub pid: u64,
    /// Its user.
    pub uid: u32,
    /// The process is alive and its counters are current.
    pub live: bool,
    /// The stream id.
    pub stream_id: u32,
    /// "publisher" or "subscriber" (NUL-terminated).
    pub role: [c_char; 16],
    /// "shm", "rdma-rc" or "ud-mcast" (NUL-terminated).
    pub transport: [c_char; 16],
    /// The stream's name (a ring's name, an address), cut to fit (NUL-terminated).
    pub name: [c_char; 128],
    /// The program's name (NUL-terminated).
    pub program: [c_char; 64],
    /// Every counter, indexed by its number (`tb_counter_name` names it).
    pub counters: [u64; TB_COUNTERS],
    /// A subscriber's distance behind its publisher, or UINT64_MAX when not known.
    pub lag: u64,
    /// Messages per second since the snapshot passed to `tb_stat_rates_since`; NaN until then.
    pub msgs_per_s: f64,
}

/// One shm ring.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tb_stat_ring {
    /// Its name (NUL-terminated, cut to fit).
    pub name: [c_char; 128],
    /// "reliable" or "lossy" (NUL-terminated).
    pub mode: [c_char; 16],
    /// The stream id.
    pub stream_id: u32,
    /// Consumer lines.
    pub consumers: u32,
    /// Bytes per slot.
    pub slot_size: u64,
    /// Slots.
    pub slot_count: u64,
    /// The publisher's position.
    pub position: u64,
    /// The publisher's process (0: none recorded).
    pub publisher_pid: u64,
    /// The largest lag of a consumer line behind the publisher (0 without consumers).
    pub max_consumer_lag: u64,
}

/// Copies `s` into `out`, cut at a character boundary to leave room for the NUL.
fn text<const N: usize>(s: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    let mut n = s.len().min(N - 1);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    for (o, b) in out.iter_mut().zip(&s.as_bytes()[..n]) {
        *o = *b as c_char;
    }
    out
}

/// # Safety
/// `s` is NULL or a handle from this library, not destroyed, used by one thread at a time.
unsafe fn get<'a>(s: *mut tb_stat) -> Result<&'a mut Snapshot, tb_status> {
    // SAFETY: the caller's promise.
    unsafe { Handle::<Snapshot>::get(s, "stat") }
}

/// Takes a snapshot of this host's counters files (`$TICKBUS_COUNTERS_DIR`, else the default
/// folder) and shm rings (`$TICKBUS_HUGEPAGE_DIR` / `$TICKBUS_SHM_DIR`, else the defaults). Off
/// the hot path: it reads files. Problems reading some of them are counted in `errors`.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tb_stat_snapshot(out: *mut *mut tb_stat) -> tb_status {
    guard(|| {
        non_null(out, "out")?;
        let snap = bus::stat::snapshot(&bus::counters::counters_dirs(), &ShmOptions::default());
        // SAFETY: non-null; the caller promises writable.
        unsafe { out.write(Handle::into_raw(snap)) };
        Ok(())
    })
}

/// How many streams, rings and read errors the snapshot holds.
///
/// # Safety
/// `s` as every stat call; each count pointer is NULL (not wanted) or writable.
#[no_mangle]
pub unsafe extern "C" fn tb_stat_counts(
    s: *mut tb_stat,
    streams: *mut usize,
    rings: *mut usize,
    errors: *mut usize,
) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let s = unsafe { get(s) }?;
        for (p, v) in [(streams, s.streams.len()), (rings, s.rings.len()), (errors, s.errors.len())] {
            if !p.is_null() {
                // SAFETY: non-null; the caller promises writable.
                unsafe { p.write(v) };
            }
        }
        Ok(())
    })
}

/// Stream `index` (0 to the count less one) into `*out`.
///
/// # Safety
/// `s` as every stat call; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tb_stat_get_stream(s: *mut tb_stat, index: usize, out: *mut tb_stat_stream) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let s = unsafe { get(s) }?;
        non_null(out, "out")?;
        let Some(v) = s.streams.get(index) else {
            return Err(fail!(
                tb_status::TB_ERROR_INVALID_ARGUMENT,
                "stream {index} is past the snapshot's {} streams (tb_stat_counts)",
                s.streams.len()
            ));
        };
        let mut counters = [0u64; TB_COUNTERS];
        for c in Counter::ALL {
            counters[c as usize] = v.get(c);
        }
        let r = tb_stat_stream {
            pid: v.pid,
            uid: v.uid,
            live: v.live,
            stream_id: v.stream_id,
            role: text(&v.role),
            transport: text(&v.transport),
            name: text(&v.name),
            program: text(&v.program),
            counters,
            lag: v.lag.unwrap_or(u64::MAX),
            msgs_per_s: v.msgs_per_s.unwrap_or(f64::NAN),
        };
        // SAFETY: non-null; the caller promises writable.
        unsafe { out.write(r) };
        Ok(())
    })
}

/// Ring `index` into `*out`.
///
/// # Safety
/// As `tb_stat_get_stream`.
#[no_mangle]
pub unsafe extern "C" fn tb_stat_get_ring(s: *mut tb_stat, index: usize, out: *mut tb_stat_ring) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let s = unsafe { get(s) }?;
        non_null(out, "out")?;
        let Some(v) = s.rings.get(index) else {
            return Err(fail!(
                tb_status::TB_ERROR_INVALID_ARGUMENT,
                "ring {index} is past the snapshot's {} rings (tb_stat_counts)",
                s.rings.len()
            ));
        };
        let r = tb_stat_ring {
            name: text(&v.name),
            mode: text(&v.mode),
            stream_id: v.stream_id,
            consumers: v.consumers.len() as u32,
            slot_size: v.slot_size as u64,
            slot_count: v.slot_count as u64,
            position: v.position,
            publisher_pid: v.publisher_pid,
            max_consumer_lag: v.consumers.iter().map(|c| c.lag).max().unwrap_or(0),
        };
        // SAFETY: non-null; the caller promises writable.
        unsafe { out.write(r) };
        Ok(())
    })
}

/// Fills each stream's `msgs_per_s` from the messages counted since `prev` (an earlier
/// snapshot), as `tickbus stat --watch` does.
///
/// # Safety
/// Both are stat handles, not destroyed, used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn tb_stat_rates_since(now: *mut tb_stat, prev: *mut tb_stat) -> tb_status {
    guard(|| {
        if core::ptr::eq(now, prev) {
            return Err(fail!(tb_status::TB_ERROR_INVALID_ARGUMENT, "now and prev are the same snapshot"));
        }
        // SAFETY: the caller's promise; two distinct handles (checked above).
        let (n, p) = unsafe { (get(now)?, get(prev)?) };
        n.rates_since(p);
        Ok(())
    })
}

/// The name of counter `index` ("messages", "full", ...), or NULL past the last.
#[no_mangle]
pub extern "C" fn tb_counter_name(index: u32) -> *const c_char {
    match Counter::ALL.get(index as usize) {
        Some(c) => counter_name(*c).as_ptr(),
        None => core::ptr::null(),
    }
}

/// The names, NUL-terminated (Counter::name's, checked equal in a test).
fn counter_name(c: Counter) -> &'static core::ffi::CStr {
    NAMES[c as usize]
}

const NAMES: [&core::ffi::CStr; TB_COUNTERS] = [
    c"position",
    c"messages",
    c"bytes",
    c"gaps",
    c"missed",
    c"full",
    c"laps",
    c"completions",
    c"errors",
    c"errors_retry_exceeded",
    c"errors_remote_access",
    c"errors_flushed",
    c"errors_other",
    c"datagrams",
    c"recovered",
    c"lost",
    c"heartbeats",
    c"last_activity_tsc",
    c"peers",
];

/// Frees the snapshot; NULL is ignored.
///
/// # Safety
/// `s` is NULL or a stat handle not yet destroyed, not in use on another thread.
#[no_mangle]
pub unsafe extern "C" fn tb_stat_destroy(s: *mut tb_stat) {
    guard(|| {
        // SAFETY: the caller's promise.
        unsafe { Handle::<Snapshot>::destroy(s, "stat") };
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_names_are_the_library_s() {
        for c in Counter::ALL {
            assert_eq!(counter_name(c).to_str().unwrap(), c.name(), "{c:?}");
        }
        assert!(tb_counter_name(TB_COUNTERS as u32).is_null());
    }

    #[test]
    fn text_is_cut_at_a_character_boundary_and_terminated() {
        let t: [c_char; 4] = text("aé€");
        assert_eq!(t.map(|c| c as u8), [b'a', 0xc3, 0xa9, 0]);
    }
}
