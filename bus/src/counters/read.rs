//! Reading counters files from any process (`tickbus stat`): every file in the folder, each
//! checked (magic, version, sizes) and marked live or stale.
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::file::{CAPACITY, COUNTERS_AT, HEADER, MAGIC, NAME_AT, NAME_MAX, RECORD, VERSION};
use super::{Counter, Role, Transport, COUNTERS};

/// Whether the process that owns a counters file is still the one running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    Live,
    /// The process is gone (or its pid was reused): the figures are its last, not current.
    Stale {
        reason: String,
    },
}

/// One stream's record.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamRecord {
    pub index: usize,
    pub role: Role,
    pub transport: Transport,
    pub stream_id: u32,
    pub name: String,
    pub counters: [u64; COUNTERS],
}

impl StreamRecord {
    pub fn get(&self, c: Counter) -> u64 {
        self.counters[c as usize]
    }
}

/// One process's counters file, read at one instant.
#[derive(Debug, Clone)]
pub struct CountersFile {
    pub path: PathBuf,
    pub pid: u64,
    pub program: String,
    pub liveness: Liveness,
    pub ticks_per_ns: f64,
    /// The owner's TSC and Unix time when it made the file: converts its TSC counters to time.
    pub tsc_at_create: u64,
    pub unix_ns_at_create: u64,
    pub streams: Vec<StreamRecord>,
}

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

/// Removes the files in `dir` whose process is gone; returns each with why. Files that are not
/// counters files are left alone.
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
    removed
}

fn read_file(path: &Path) -> Result<CountersFile, String> {
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let len = f.metadata().map_err(|e| e.to_string())?.len() as usize;
    if len < HEADER {
        return Err(format!("{len} bytes is too short for a counters file (header {HEADER})"));
    }
    // SAFETY: read-only mapping, read only through atomic loads (the owner writes it live); a
    // file shrunk under us would fault, which only a hostile owner could do to its own file.
    let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| e.to_string())?;
    let word = |off: usize| -> u64 {
        // SAFETY: callers stay below `len` (checked above and per record), 8-aligned offsets
        // in a page-aligned mapping that lives for this function.
        unsafe { &*map.as_ptr().add(off).cast::<AtomicU64>() }.load(Ordering::Relaxed)
    };
    if word(0) != MAGIC {
        return Err("not a tickbus counters file (bad magic)".into());
    }
    let version = word(8) as u32;
    let (header, record, capacity) = ((word(8) >> 32) as usize, word(16) as u32 as usize, (word(16) >> 32) as usize);
    if version != VERSION || header != HEADER || record != RECORD {
        return Err(format!(
            "counters layout version {version} (header {header}, record {record}); this tickbus reads version \
             {VERSION}: use the tickbus that wrote it"
        ));
    }
    if capacity > CAPACITY * 16 || len < HEADER + capacity * RECORD {
        return Err(format!("{capacity} records do not fit its {len} bytes"));
    }
    let pid = word(24);
    let start = word(32);
    let liveness = match crate::sys::process::start_time(pid) {
        Some(s) if s == start && crate::sys::process::alive(pid) => Liveness::Live,
        Some(_) => Liveness::Stale { reason: format!("pid {pid} now belongs to another process") },
        None => Liveness::Stale { reason: format!("process {pid} is gone (crashed or killed)") },
    };
    let bytes_at = |off: usize, n: usize| -> Vec<u8> {
        (0..n.div_ceil(8)).flat_map(|k| word(off + 8 * k).to_le_bytes()).take(n).collect()
    };
    let program = String::from_utf8_lossy(&bytes_at(64, 64)).trim_end_matches('\0').to_string();
    let mut streams = Vec::new();
    for index in 0..capacity {
        let base = HEADER + index * RECORD;
        // Acquire pairs with the owner's Release when it took the record: the rest is whole.
        // SAFETY: as for `word`.
        let state = unsafe { &*map.as_ptr().add(base).cast::<AtomicU64>() }.load(Ordering::Acquire);
        if state != 1 {
            continue;
        }
        let kinds = word(base + 8);
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
        let ids = word(base + 16);
        let name_len = ((ids >> 32) as usize).min(NAME_MAX);
        let name = String::from_utf8_lossy(&bytes_at(base + NAME_AT, name_len)).into_owned();
        let counters = std::array::from_fn(|k| word(base + COUNTERS_AT + 8 * k));
        streams.push(StreamRecord { index, role, transport, stream_id: ids as u32, name, counters });
    }
    Ok(CountersFile {
        path: path.to_owned(),
        pid,
        program,
        liveness,
        ticks_per_ns: f64::from_bits(word(40)),
        tsc_at_create: word(48),
        unix_ns_at_create: word(56),
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
        drop(a);
        let (files, _) = scan(&dir);
        let mine = files.iter().find(|f| f.path == path).unwrap();
        assert!(mine.streams.iter().all(|s| s.name != "counters-unit-ring-a"), "a closed stream's record is freed");
        assert!(mine.streams.iter().any(|s| s.name.starts_with("nnnn")), "the other one stays");
        drop(b);
    }

    #[test]
    fn a_file_that_is_not_a_counters_file_is_named_and_skipped() {
        let dir = std::env::temp_dir().join(format!("counters-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("1.counters"), vec![7u8; 4096]).unwrap();
        std::fs::write(dir.join("2.counters"), b"short").unwrap();
        let mut v1 = vec![0u8; FILE_BYTES_FOR_TEST];
        v1[..8].copy_from_slice(&MAGIC.to_le_bytes());
        v1[8..12].copy_from_slice(&2u32.to_le_bytes());
        std::fs::write(dir.join("3.counters"), v1).unwrap();
        let (files, errors) = scan(&dir);
        assert!(files.is_empty());
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].contains("bad magic") && errors[1].contains("too short"), "{errors:?}");
        assert!(errors[2].contains("version 2") && errors[2].contains("use the tickbus that wrote it"), "{errors:?}");
        let _ = std::fs::remove_dir_all(dir);
    }

    const FILE_BYTES_FOR_TEST: usize = super::super::file::FILE_BYTES;
}
