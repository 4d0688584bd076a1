//! The process's counters file: made with the first stream, records handed out and taken back,
//! removed with the last stream. Set-up and tear-down only; never on a hot path.
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::{enabled, Counters, Role, Transport, COUNTERS};

use super::layout::{
    FileHeader, CAPACITY, COUNTERS_AT, FILE_BYTES, HEADER, IDS_AT, KINDS_AT, MAGIC, NAME_AT, NAME_MAX, RECORD, VERSION,
};

/// Where this user's counters files live: `$TICKBUS_COUNTERS_DIR`, or
/// `/dev/shm/tickbus-counters-<uid>` (one folder per user, 0700: nobody else can plant or swap a
/// file in it). It must be on tmpfs (or hugetlbfs): on a disk file system, writeback would turn
/// a counter store on the hot path into a page fault.
pub fn counters_dir() -> PathBuf {
    std::env::var_os("TICKBUS_COUNTERS_DIR")
        .map_or_else(|| PathBuf::from(format!("/dev/shm/tickbus-counters-{}", crate::sys::fs::euid())), PathBuf::from)
}

/// Every folder `stat` reads by default: `$TICKBUS_COUNTERS_DIR` if set, else every
/// `tickbus-counters-*` entry in /dev/shm, links and files included, so that the reader refuses
/// a bad one aloud ([`super::scan`] checks each: a real folder, owned by the uid its name gives,
/// writable by nobody else) instead of skipping it in silence. Another user's private folder is
/// skipped quietly unless this is root, who reads every user's.
pub fn counters_dirs() -> Vec<PathBuf> {
    if std::env::var_os("TICKBUS_COUNTERS_DIR").is_some() {
        return vec![counters_dir()];
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("tickbus-counters-")))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

struct File {
    map: memmap2::MmapMut,
    /// The mapping's start, taken once from `as_mut_ptr` (its provenance covers the whole map);
    /// every access goes through it, atomically.
    base: NonNull<u8>,
    path: PathBuf,
    ino: u64,
    pid: u64,
    used: Mutex<[bool; CAPACITY]>,
}

// SAFETY: `base` points into `map`, owned by this struct; all access through it is atomic.
unsafe impl Send for File {}
// SAFETY: as above; `used` is behind a mutex.
unsafe impl Sync for File {}

impl File {
    fn word_ptr(&self, offset: usize) -> NonNull<AtomicU64> {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.map.len(), "counters word {offset} outside the file");
        // SAFETY: in bounds (checked) of the mapping `base` starts.
        unsafe { self.base.add(offset) }.cast()
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: in bounds and 8-aligned (the map is page-aligned), alive as long as `self`;
        // after creation every access to these words is atomic.
        unsafe { self.word_ptr(offset).as_ref() }
    }
}

impl Drop for File {
    /// The last stream closed: nothing is left to read. Under the registry's lock, and only if
    /// the name still holds this file (a new one may have been made in the meantime), and only
    /// in the process that made it (a forked child's copy must not touch its parent's file).
    fn drop(&mut self) {
        if crate::sys::process::pid() != self.pid {
            return;
        }
        let _guard = CURRENT.lock();
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// One record, held by a stream's [`Counters`]; frees the record when dropped.
pub(super) struct Slot {
    file: Arc<File>,
    index: usize,
}

impl Drop for Slot {
    fn drop(&mut self) {
        // A forked child's inherited stream must not free its parent's record.
        if crate::sys::process::pid() != self.file.pid {
            return;
        }
        let base = HEADER + self.index * RECORD;
        self.file.word(base).store(0, Ordering::Release);
        if let Ok(mut used) = self.file.used.lock() {
            used[self.index] = false;
        }
    }
}

static CURRENT: Mutex<Weak<File>> = Mutex::new(Weak::new());

/// Counters for a new stream: a record in this process's counters file (made on first use),
/// or, if the file cannot be made or is full, private counters and one warning saying why.
/// With counting off ([`super::set_enabled`]) the stream counts nothing.
pub fn register(role: Role, transport: Transport, stream_id: u32, name: &str) -> Counters {
    if !enabled() {
        return Counters::none();
    }
    match take(role, transport, stream_id, name) {
        Ok(slot) => {
            let w = slot.file.word_ptr(HEADER + slot.index * RECORD + COUNTERS_AT);
            // SAFETY: the record's counter block is COUNTERS aligned words of the mapped file,
            // which `slot` keeps mapped and reserved for this stream alone until it drops.
            unsafe { Counters::in_words(w, Box::new(slot)) }
        }
        Err(e) => {
            log::warn!(
                "{} {} `{name}`: counting privately, `tickbus stat` will not show it: {e}",
                transport.name(),
                role.name()
            );
            Counters::private()
        }
    }
}

fn take(role: Role, transport: Transport, stream_id: u32, name: &str) -> Result<Slot, String> {
    // A file given up below is dropped only after the lock is released (declared first, dropped
    // last): if it is the last handle, its Drop takes the lock itself.
    let mut _given_up: Option<Arc<File>> = None;
    let mut current = CURRENT.lock().map_err(|_| "the counters registry was poisoned".to_string())?;
    let pid = crate::sys::process::pid();
    // A forked child inherits the parent's handle but must not write the parent's file; a
    // file someone removed is made again so `stat` sees this process.
    let live = |f: &Arc<File>| f.pid == pid && std::fs::symlink_metadata(&f.path).is_ok_and(|m| m.ino() == f.ino);
    let file = match current.upgrade() {
        Some(f) if live(&f) => f,
        other => {
            _given_up = other;
            let f = Arc::new(create(pid)?);
            *current = Arc::downgrade(&f);
            f
        }
    };
    let index = {
        let mut used = file.used.lock().map_err(|_| "the counters file's records were poisoned".to_string())?;
        let i = used.iter().position(|u| !u).ok_or(format!("all {CAPACITY} records of this process are in use"))?;
        used[i] = true;
        i
    };
    let base = HEADER + index * RECORD;
    for k in 0..COUNTERS {
        file.word(base + COUNTERS_AT + 8 * k).store(0, Ordering::Relaxed);
    }
    file.word(base + KINDS_AT).store(u64::from(role as u32) | u64::from(transport as u32) << 32, Ordering::Relaxed);
    let bytes = name.as_bytes();
    let n = bytes.len().min(NAME_MAX);
    file.word(base + IDS_AT).store(u64::from(stream_id) | (n as u64) << 32, Ordering::Relaxed);
    let mut padded = [0u8; NAME_MAX];
    padded[..n].copy_from_slice(&bytes[..n]);
    for (k, w) in padded.chunks_exact(8).enumerate() {
        file.word(base + NAME_AT + 8 * k).store(u64::from_le_bytes(w.try_into().expect("8 bytes")), Ordering::Relaxed);
    }
    // Readers see a record only once it is whole.
    file.word(base).store(1, Ordering::Release);
    Ok(Slot { file, index })
}

/// The folder, made 0700 if missing; refused unless it is a real folder of ours that nobody
/// else can write (a symlink or a shared folder would let another user plant or swap files).
fn checked_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
    let m = std::fs::symlink_metadata(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let euid = crate::sys::fs::euid();
    if !m.is_dir() || m.uid() != euid || m.permissions().mode() & 0o022 != 0 {
        return Err(format!(
            "{} must be a folder of uid {euid} that no one else can write (it is {}, uid {}, mode {:o}): \
             remove it, or set TICKBUS_COUNTERS_DIR to a private folder on tmpfs",
            dir.display(),
            if m.is_symlink() {
                "a symlink"
            } else if m.is_dir() {
                "a folder"
            } else {
                "not a folder"
            },
            m.uid(),
            m.permissions().mode() & 0o7777
        ));
    }
    Ok(())
}

/// Makes `<dir>/<pid>.counters`: written under a temporary name (created exclusively, never
/// through a symlink), then renamed into place (a stale file of a dead process with the same
/// pid is replaced).
fn create(pid: u64) -> Result<File, String> {
    let dir = counters_dir();
    checked_dir(&dir)?;
    let path = dir.join(format!("{pid}.counters"));
    let tmp = dir.join(format!("{pid}.counters.tmp"));
    let _ = std::fs::remove_file(&tmp); // a crash's leftover: our pid, our folder
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    f.set_len(FILE_BYTES as u64).map_err(|e| format!("cannot size {}: {e}", tmp.display()))?;
    let ino = f.metadata().map_err(|e| e.to_string())?.ino();
    // SAFETY: a file this process just created exclusively in a folder only its user can write;
    // it stays mapped while `File` lives.
    let mut map = unsafe { memmap2::MmapMut::map_mut(&f) }.map_err(|e| format!("cannot map {}: {e}", tmp.display()))?;
    let tsc = crate::time::Tsc::new();
    let unix_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let start = crate::sys::process::start_time(pid).unwrap_or(0);
    let program = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let mut name = [0u8; 64];
    let n = program.len().min(64);
    name[..n].copy_from_slice(&program.as_bytes()[..n]);
    let header = FileHeader {
        magic: MAGIC,
        version: VERSION,
        header_bytes: HEADER as u32,
        record_bytes: RECORD as u32,
        records: CAPACITY as u32,
        pid,
        start_time: start,
        ticks_per_ns: crate::time::ticks_per_ns().to_bits(),
        tsc_at_create: tsc.now(),
        unix_ns_at_create: unix_ns,
        program: name,
        reserved: [0; 128],
    };
    map[..HEADER].copy_from_slice(zerocopy::IntoBytes::as_bytes(&header));
    std::fs::rename(&tmp, &path).map_err(|e| format!("cannot rename {} into place: {e}", tmp.display()))?;
    let base = NonNull::new(map.as_mut_ptr()).ok_or("an empty mapping")?;
    Ok(File { map, base, path, ino, pid, used: Mutex::new([false; CAPACITY]) })
}
