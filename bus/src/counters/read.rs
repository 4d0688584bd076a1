//! Reading counters files from any process (`tickbus stat`): every file in the folder, each
//! checked (magic, version, sizes) and marked live or stale.
//!
//! A file is read with one `read` into a buffer, never mapped: its owner (or anyone who could
//! write the folder) may shrink it, make it a FIFO or a symlink, and none of that may crash,
//! hang or mislead the reader. A figure read while its owner updates it is one update old.
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::file::{CAPACITY, COUNTERS_AT, HEADER, MAGIC, NAME_AT, NAME_MAX, RECORD, VERSION};
use super::{Counter, Role, Transport, COUNTERS};

/// Whether the process that owns a counters file is still the one running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// The owner is running: the figures are current.
    Live,
    /// The process is gone (or its pid was reused): the figures are its last, not current.
    Stale {
        /// Why the process is taken for gone.
        reason: String,
    },
}

/// One stream's record.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamRecord {
    /// The record's index in its file.
    pub index: usize,
    /// Which end of the stream.
    pub role: Role,
    /// Which transport.
    pub transport: Transport,
    /// The stream.
    pub stream_id: u32,
    /// The ring (shm), the endpoint (rdma-rc) or the group (ud-mcast).
    pub name: String,
    /// Every counter's value, indexed by [`Counter`].
    pub counters: [u64; COUNTERS],
}

impl StreamRecord {
    /// A counter's value.
    pub fn get(&self, c: Counter) -> u64 {
        self.counters[c as usize]
    }
}

/// One process's counters file, read at one instant.
#[derive(Debug, Clone)]
pub struct CountersFile {
    /// The file read.
    pub path: PathBuf,
    /// The owner's pid.
    pub pid: u64,
    /// The owner's program name.
    pub program: String,
    /// Whether the owner is still running.
    pub liveness: Liveness,
    /// The owner's TSC rate (ticks per ns).
    pub ticks_per_ns: f64,
    /// The owner's TSC when it made the file: with `unix_ns_at_create`, converts its TSC
    /// counters to time.
    pub tsc_at_create: u64,
    /// The owner's Unix time (ns) when it made the file.
    pub unix_ns_at_create: u64,
    /// The stream records in use.
    pub streams: Vec<StreamRecord>,
}

/// Records a reader accepts in one file (the writer makes `CAPACITY`; later versions may make
/// more): bounds what a hostile file can make the reader allocate.
const MAX_RECORDS: usize = CAPACITY * 16;

/// Reads every `*.counters` file in `dir`; a file that cannot be read or is not a counters file
/// is reported by name with what is wrong, and the others are still read.
pub fn scan(dir: &Path) -> (Vec<CountersFile>, Vec<String>) {
    let (mut files, mut errors) = (Vec::new(), Vec::new());
    let Ok(entries) = std::fs::read_dir(dir) else { return (files, errors) };
    let mut paths: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "counters")).collect();
    paths.sort();
    for p in paths {
        match read_file(&p) {
            Ok(f) => files.push(f),
            Err(e) => errors.push(format!("{}: {e}", p.display())),
        }
    }
    (files, errors)
}

/// Removes the files in `dir` whose process is gone, and their leftover `*.counters.tmp`;
/// returns each with why. Files that are not counters files are left alone.
pub fn prune(dir: &Path) -> Vec<(PathBuf, String)> {
    let (files, _) = scan(dir);
    let mut removed = Vec::new();
    for f in files {
        if let Liveness::Stale { reason } = f.liveness {
            if std::fs::remove_file(&f.path).is_ok() {
                removed.push((f.path, reason));
            }
        }
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return removed };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_suffix(".counters.tmp").and_then(|p| p.parse::<u64>().ok()) else { continue };
        if !crate::sys::process::alive(pid) && std::fs::remove_file(e.path()).is_ok() {
            removed.push((e.path(), format!("half-made by process {pid}, which is gone")));
        }
    }
    removed
}

fn read_file(path: &Path) -> Result<CountersFile, String> {
    // Never through a symlink, never blocking on a FIFO; only a regular file is read.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| e.to_string())?;
    if !f.metadata().map_err(|e| e.to_string())?.is_file() {
        return Err("not a regular file".into());
    }
    let mut bytes = Vec::new();
    f.take((HEADER + MAX_RECORDS * RECORD) as u64).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    let word = |off: usize| -> Option<u64> {
        bytes.get(off..off + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    let len = bytes.len();
    let header =
        |off| word(off).ok_or_else(|| format!("{len} bytes is too short for a counters file (header {HEADER})"));
    if header(0)? != MAGIC {
        return Err("not a tickbus counters file (bad magic)".into());
    }
    let (w8, w16) = (header(8)?, header(16)?);
    let version = w8 as u32;
    let (header_bytes, record, capacity) = ((w8 >> 32) as usize, w16 as u32 as usize, (w16 >> 32) as usize);
    if version != VERSION || header_bytes != HEADER || record != RECORD {
        return Err(format!(
            "counters layout version {version} (header {header_bytes}, record {record}); this tickbus reads version \
             {VERSION}: use the tickbus that wrote it"
        ));
    }
    if capacity > MAX_RECORDS || len < HEADER + capacity * RECORD {
        return Err(format!("{capacity} records do not fit its {len} bytes"));
    }
    let pid = header(24)?;
    let start = header(32)?;
    let liveness = match crate::sys::process::proc_stat(pid) {
        Some((b'Z', _)) => Liveness::Stale { reason: format!("process {pid} exited (a zombie not yet reaped)") },
        Some((_, s)) if s == start => Liveness::Live,
        Some(_) => Liveness::Stale { reason: format!("pid {pid} now belongs to another process") },
        None => Liveness::Stale { reason: format!("process {pid} is gone (crashed or killed)") },
    };
    let text = |off: usize, n: usize| -> String {
        let b = &bytes[off..off + n];
        let s = String::from_utf8_lossy(b).trim_end_matches('\0').to_string();
        // Names come from the file: no control characters reach a terminal.
        s.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
    };
    let program = text(64, 64);
    let mut streams = Vec::new();
    for index in 0..capacity {
        let base = HEADER + index * RECORD;
        let w = |off: usize| word(base + off).expect("inside the records checked above");
        if w(0) != 1 {
            continue;
        }
        let kinds = w(8);
        let role = match kinds as u32 {
            1 => Role::Publisher,
            2 => Role::Subscriber,
            r => return Err(format!("record {index} has role {r}, not 1 or 2")),
        };
        let transport = match (kinds >> 32) as u32 {
            1 => Transport::Shm,
            2 => Transport::RdmaRc,
            3 => Transport::UdMcast,
            t => return Err(format!("record {index} has transport {t}, not 1..=3")),
        };
        let ids = w(16);
        let name = text(base + NAME_AT, ((ids >> 32) as usize).min(NAME_MAX));
        let counters = std::array::from_fn(|k| w(COUNTERS_AT + 8 * k));
        streams.push(StreamRecord { index, role, transport, stream_id: ids as u32, name, counters });
    }
    Ok(CountersFile {
        path: path.to_owned(),
        pid,
        program,
        liveness,
        ticks_per_ns: f64::from_bits(header(40)?),
        tsc_at_create: header(48)?,
        unix_ns_at_create: header(56)?,
        streams,
    })
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

    /// Other tests' streams share this process's file, so only our own records are checked here;
    /// the file going with the last stream is checked across processes (apps' stat tests).
    #[test]
    fn a_registered_stream_is_read_back_live_and_its_record_freed_when_it_closes() {
        let dir = counters_dir();
        let path = dir.join(format!("{}.counters", crate::sys::process::pid()));
        let a = register(Role::Publisher, Transport::Shm, 7, "counters-unit-ring-a");
        let b = register(Role::Subscriber, Transport::UdMcast, 9, &"n".repeat(100));
        a.add(Counter::Messages, 5);
        a.set(Counter::Position, 5);
        b.add(Counter::Gaps, 1);
        b.add(Counter::Missed, 3);
        let (files, errors) = scan(&dir);
        assert!(errors.iter().all(|e| !e.contains(&path.display().to_string())), "{errors:?}");
        let mine = files.iter().find(|f| f.path == path).expect("our file");
        assert_eq!(mine.liveness, Liveness::Live);
        assert_eq!(mine.pid, crate::sys::process::pid());
        let ra = mine.streams.iter().find(|s| s.name == "counters-unit-ring-a").unwrap();
        assert_eq!((ra.role, ra.transport, ra.stream_id), (Role::Publisher, Transport::Shm, 7));
        assert_eq!((ra.get(Counter::Messages), ra.get(Counter::Position)), (5, 5));
        let rb = mine.streams.iter().find(|s| s.name.starts_with("nnnn")).unwrap();
        assert_eq!(rb.name.len(), NAME_MAX, "long names are cut, not refused");
        assert_eq!((rb.get(Counter::Gaps), rb.get(Counter::Missed)), (1, 3));
        let mode = std::fs::metadata(&path).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()));
        assert_eq!(mode.unwrap() & 0o777, 0o600);
        let dmode = std::fs::metadata(&dir).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()));
        assert_eq!(dmode.unwrap() & 0o022, 0, "nobody else can write the folder");
        drop(a);
        let (files, _) = scan(&dir);
        let mine = files.iter().find(|f| f.path == path).unwrap();
        assert!(mine.streams.iter().all(|s| s.name != "counters-unit-ring-a"), "a closed stream's record is freed");
        assert!(mine.streams.iter().any(|s| s.name.starts_with("nnnn")), "the other one stays");
        drop(b);
    }

    #[test]
    fn hostile_files_are_named_and_skipped_and_never_block_or_crash_the_reader() {
        let dir = std::env::temp_dir().join(format!("counters-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("1.counters"), vec![7u8; 4096]).unwrap();
        std::fs::write(dir.join("2.counters"), b"short").unwrap();
        let mut v = vec![0u8; super::super::file::FILE_BYTES];
        v[..8].copy_from_slice(&MAGIC.to_le_bytes());
        v[8..12].copy_from_slice(&2u32.to_le_bytes());
        std::fs::write(dir.join("3.counters"), &v).unwrap();
        // A header that promises more records than the file holds.
        v[8..12].copy_from_slice(&VERSION.to_le_bytes());
        v[12..16].copy_from_slice(&(HEADER as u32).to_le_bytes());
        v[16..20].copy_from_slice(&(RECORD as u32).to_le_bytes());
        v[20..24].copy_from_slice(&1000u32.to_le_bytes());
        std::fs::write(dir.join("4.counters"), &v).unwrap();
        // A FIFO would block a plain open; a symlink would lead elsewhere.
        let fifo = std::ffi::CString::new(dir.join("5.counters").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::os::unix::fs::symlink("/etc/passwd", dir.join("6.counters")).unwrap();
        let (files, errors) = scan(&dir);
        assert!(files.is_empty());
        assert_eq!(errors.len(), 6, "{errors:?}");
        assert!(errors[0].contains("bad magic") && errors[1].contains("too short"), "{errors:?}");
        assert!(errors[2].contains("version 2") && errors[2].contains("use the tickbus that wrote it"), "{errors:?}");
        assert!(errors[3].contains("1000 records do not fit"), "{errors:?}");
        assert!(errors[4].contains("not a regular file"), "{errors:?}");
        assert!(errors[5].contains("symbolic links") || errors[5].contains("loop"), "{errors:?}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
