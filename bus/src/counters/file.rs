//! The process's counters file: made with the first stream, records handed out and taken back,
//! removed with the last stream. Set-up and tear-down only; never on a hot path.
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::{enabled, Counters, Keep, Role, Transport, COUNTERS};

pub(super) const MAGIC: u64 = u64::from_le_bytes(*b"TBCNTRS\x01");
pub(super) const VERSION: u32 = 1;
pub(super) const HEADER: usize = 256;
pub(super) const RECORD: usize = 384;
pub(super) const CAPACITY: usize = 64;
pub(super) const NAME_AT: usize = 64;
pub(super) const NAME_MAX: usize = 64;
pub(super) const COUNTERS_AT: usize = 128;
pub(super) const FILE_BYTES: usize = HEADER + CAPACITY * RECORD;

/// Where counters files live: `$TICKBUS_COUNTERS_DIR`, or `/dev/shm/tickbus-counters`.
pub fn counters_dir() -> PathBuf {
    std::env::var_os("TICKBUS_COUNTERS_DIR").map_or_else(|| PathBuf::from("/dev/shm/tickbus-counters"), PathBuf::from)
}

struct File {
    map: memmap2::MmapMut,
    path: PathBuf,
    pid: u64,
    used: Mutex<[bool; CAPACITY]>,
}

impl File {
    fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.map.len(), "counters word {offset} outside the file");
        // SAFETY: in bounds and 8-aligned (the map is page-aligned); the mapping lives as long as
        // `self`, and every access to these words after creation is atomic.
        unsafe { &*self.map.as_ptr().add(offset).cast::<AtomicU64>() }
    }
}

impl Drop for File {
    /// The last stream closed: nothing is left to read.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One record, held by a stream's [`Counters`]; frees the record when dropped.
pub(super) struct Slot {
    file: Arc<File>,
    index: usize,
}

impl Drop for Slot {
    fn drop(&mut self) {
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
            let w = slot.file.word(HEADER + slot.index * RECORD + COUNTERS_AT);
            Counters { words: Some(std::ptr::NonNull::from(w)), _keep: Keep::File(slot) }
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
    let mut current = CURRENT.lock().map_err(|_| "the counters registry was poisoned".to_string())?;
    let pid = crate::sys::process::pid();
    // A forked child inherits the parent's handle but must not write the parent's file.
    let file = match current.upgrade().filter(|f| f.pid == pid) {
        Some(f) => f,
        None => {
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
    file.word(base + 8).store(u64::from(role as u32) | u64::from(transport as u32) << 32, Ordering::Relaxed);
    let bytes = name.as_bytes();
    let n = bytes.len().min(NAME_MAX);
    file.word(base + 16).store(u64::from(stream_id) | (n as u64) << 32, Ordering::Relaxed);
    let mut padded = [0u8; NAME_MAX];
    padded[..n].copy_from_slice(&bytes[..n]);
    for (k, w) in padded.chunks_exact(8).enumerate() {
        file.word(base + NAME_AT + 8 * k).store(u64::from_le_bytes(w.try_into().expect("8 bytes")), Ordering::Relaxed);
    }
    // Readers see a record only once it is whole.
    file.word(base).store(1, Ordering::Release);
    Ok(Slot { file, index })
}

/// Makes `<dir>/<pid>.counters`: written under a temporary name, then renamed into place (a
/// stale file of a dead process with the same pid is replaced).
fn create(pid: u64) -> Result<File, String> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = counters_dir();
    // Shared by every user's processes, like /tmp: anyone may add a file, only its owner may
    // remove it (the files themselves are 0600).
    if !dir.exists() {
        std::fs::DirBuilder::new().recursive(true).mode(0o755).create(&dir).map_err(|e| {
            format!("cannot make {}: {e} (set TICKBUS_COUNTERS_DIR to a writable folder)", dir.display())
        })?;
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777));
    }
    let path = dir.join(format!("{pid}.counters"));
    let tmp = dir.join(format!("{pid}.counters.tmp"));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    f.set_len(FILE_BYTES as u64).map_err(|e| format!("cannot size {}: {e}", tmp.display()))?;
    // SAFETY: a file this process just created and alone writes; it stays mapped while `File` lives.
    let mut map = unsafe { memmap2::MmapMut::map_mut(&f) }.map_err(|e| format!("cannot map {}: {e}", tmp.display()))?;
    let tsc = crate::time::Tsc::new();
    let unix_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let start = crate::sys::process::start_time(pid).unwrap_or(0);
    let program = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let h = &mut map[..HEADER];
    h[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&(HEADER as u32).to_le_bytes());
    h[16..20].copy_from_slice(&(RECORD as u32).to_le_bytes());
    h[20..24].copy_from_slice(&(CAPACITY as u32).to_le_bytes());
    h[24..32].copy_from_slice(&pid.to_le_bytes());
    h[32..40].copy_from_slice(&start.to_le_bytes());
    h[40..48].copy_from_slice(&crate::time::ticks_per_ns().to_bits().to_le_bytes());
    h[48..56].copy_from_slice(&tsc.now().to_le_bytes());
    h[56..64].copy_from_slice(&unix_ns.to_le_bytes());
    let name = program.as_bytes();
    let n = name.len().min(64);
    h[64..64 + n].copy_from_slice(&name[..n]);
    std::fs::rename(&tmp, &path).map_err(|e| format!("cannot rename {} into place: {e}", tmp.display()))?;
    Ok(File { map, path, pid, used: Mutex::new([false; CAPACITY]) })
}
