//! Reading counters files from any process (`tickbus stat`): every file in the folder, each
//! checked (magic, version, sizes) and marked live or stale.
//!
//! A file is read with one `read` into a buffer, never mapped: its owner (or anyone who could
//! write the folder) may shrink it, make it a FIFO or a symlink, and none of that may crash,
//! hang or mislead the reader. A figure read while its owner updates it is one update old.
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use zerocopy::FromBytes;

use super::layout::{FileHeader, Record, CAPACITY, HEADER, MAGIC, NAME_MAX, RECORD, VERSION};
use super::{Counter, Role, Transport, COUNTERS};
use crate::sys::{self, fs::Dir};

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
    /// The pid and start time match a running process, but it runs as another uid than the
    /// file's owner (one that started as root and dropped privileges, or someone else's process
    /// named in a forged file): its figures are not shown as live, and `prune` leaves the file,
    /// since it may be a running process's.
    Unverified {
        /// Why the figures cannot be vouched for.
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
    /// Whose it is: the uid owning its folder and the file (and running its process, if live).
    pub uid: u32,
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

/// A counters folder opened for reading: the folder itself (never through a link), and the uid
/// whose processes' figures it holds.
struct Folder {
    dir: Dir,
    path: PathBuf,
    owner: u32,
}

/// The uid a folder named `tickbus-counters-<uid>` is for.
fn named_uid(path: &Path) -> Option<u32> {
    path.file_name()?.to_str()?.strip_prefix("tickbus-counters-")?.parse().ok()
}

/// Opens `path` as a counters folder. `Err(None)`: nothing to read and nothing wrong (no such
/// folder, or another user's private one this user may not open); `Err(Some(why))`: refused,
/// and why, for the operator to see. A folder is read only if it is a real folder (not a link),
/// owned by the uid its name gives (any other: owned by this user, or root reading), and nobody
/// else can write it: otherwise anyone could show figures as someone else's, and a folder made
/// first by another user (which makes the named user's processes count privately) would show
/// only that user's fakes.
fn open_folder(path: &Path) -> Result<Folder, Option<String>> {
    let (named, me) = (named_uid(path), sys::fs::euid());
    let dir = match Dir::open_nofollow(path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(None),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && me != 0 && named != Some(me) => return Err(None),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)) => {
            return Err(Some(format!(
                "counters folder {} is a symbolic link or not a folder: refused (a counters folder is a real \
                 folder; remove what is there and restart the processes that count into it)",
                sys::fs::shown(path)
            )))
        }
        Err(e) => return Err(Some(format!("counters folder {}: {e}", sys::fs::shown(path)))),
    };
    let md = dir.metadata().map_err(|e| Some(format!("counters folder {}: {e}", sys::fs::shown(path))))?;
    let owner = md.uid();
    let refuse = |why: String| Err(Some(format!("counters folder {} refused: {why}", sys::fs::shown(path))));
    match named {
        Some(n) if owner != n => {
            return refuse(format!(
                "it is owned by uid {owner}, but its name is for uid {n} (whoever made it first can fill it, and \
                 uid {n}'s processes then count privately); remove it as root (rm -r {}) and restart uid {n}'s \
                 tickbus processes",
                sys::fs::shown(path)
            ))
        }
        None if owner != me && me != 0 => {
            return refuse(format!("it is owned by uid {owner}, not by this user (uid {me})"))
        }
        _ => {}
    }
    if md.mode() & 0o022 != 0 {
        return refuse(format!(
            "others can write it (mode {:04o}), so anyone could plant figures in it; chmod 700 it",
            md.mode() & 0o7777
        ));
    }
    Ok(Folder { dir, path: path.to_owned(), owner })
}

/// Reads every `*.counters` file in `dir`; a file that cannot be read or is not a counters file
/// is reported by name with what is wrong, and the others are still read. A folder that is
/// refused (see the checks above) is reported, with none of its files read.
pub fn scan(dir: &Path) -> (Vec<CountersFile>, Vec<String>) {
    let folder = match open_folder(dir) {
        Ok(f) => f,
        Err(why) => return (Vec::new(), why.into_iter().collect()),
    };
    let (mut files, mut errors) = (Vec::new(), Vec::new());
    let names = match folder.dir.names() {
        Ok(n) => n,
        Err(e) => return (files, vec![format!("counters folder {}: {e}", sys::fs::shown(dir))]),
    };
    for name in names.iter().filter(|n| n.ends_with(".counters")) {
        match read_in(&folder, name) {
            Ok((f, _)) => files.push(f),
            Err(e) => errors.push(format!("{}: {e}", sys::fs::shown(&dir.join(name)))),
        }
    }
    (files, errors)
}

/// Removes the files in `dir` whose process is gone, and their leftover `*.counters.tmp`;
/// returns each with why. Files that are not counters files are left alone.
pub fn prune(dir: &Path) -> Vec<(PathBuf, String)> {
    open_folder(dir).map(|f| prune_in(&f)).unwrap_or_default()
}

/// Prunes through the opened folder: every name is looked up, read and removed relative to it
/// (`openat`, `unlinkat`), and a file is removed only if the name still holds the file that was
/// read. So a folder swapped for a link between the scan and the removal (root pruning a user's
/// folder) never gets a file removed anywhere else.
fn prune_in(f: &Folder) -> Vec<(PathBuf, String)> {
    let mut removed = Vec::new();
    let Ok(names) = f.dir.names() else { return removed };
    for name in &names {
        if name.ends_with(".counters") {
            let Ok((file, id)) = read_in(f, name) else { continue };
            if let Liveness::Stale { reason } = file.liveness {
                if f.dir.id_of(name).is_ok_and(|now| now == id) && f.dir.unlink(name).is_ok() {
                    removed.push((file.path, reason));
                }
            }
        } else if let Some(pid) = name.strip_suffix(".counters.tmp").and_then(|p| p.parse::<u64>().ok()) {
            if !sys::process::alive(pid) && f.dir.unlink(name).is_ok() {
                removed.push((f.path.join(name), format!("half-made by process {pid}, which is gone")));
            }
        }
    }
    removed
}

/// Reads counters file `name` of folder `f` (a regular file owned by the folder's owner), and
/// returns it with its (device, inode).
fn read_in(f: &Folder, name: &str) -> Result<(CountersFile, (u64, u64)), String> {
    // Never through a symlink, never blocking on a FIFO; only a regular file is read.
    let file = f.dir.open_regular(name).map_err(|e| e.to_string())?;
    let md = file.metadata().map_err(|e| e.to_string())?;
    if md.uid() != f.owner {
        return Err(format!("owned by uid {}, not by the folder's owner (uid {}): refused", md.uid(), f.owner));
    }
    let mut bytes = Vec::new();
    file.take((HEADER + MAX_RECORDS * RECORD) as u64).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    Ok((parse(&bytes, &f.path.join(name), f.owner)?, (md.dev(), md.ino())))
}

fn parse(bytes: &[u8], path: &Path, owner: u32) -> Result<CountersFile, String> {
    let len = bytes.len();
    let short = || format!("{len} bytes is too short for a counters file (header {HEADER})");
    if bytes.get(..8).is_some_and(|m| m != MAGIC.to_le_bytes()) {
        return Err("not a tickbus counters file (bad magic)".into());
    }
    let (h, _) = FileHeader::read_from_prefix(bytes).map_err(|_| short())?;
    let (version, header_bytes, record, capacity) =
        (h.version, h.header_bytes as usize, h.record_bytes as usize, h.records as usize);
    if version != VERSION || header_bytes != HEADER || record != RECORD {
        return Err(format!(
            "counters layout version {version} (header {header_bytes}, record {record}); this tickbus reads version \
             {VERSION}: use the tickbus that wrote it"
        ));
    }
    if capacity > MAX_RECORDS || len < HEADER + capacity * RECORD {
        return Err(format!("{capacity} records do not fit its {len} bytes"));
    }
    let (pid, start) = (h.pid, h.start_time);
    let liveness = match sys::process::proc_stat(pid) {
        Some((b'Z', _)) => Liveness::Stale { reason: format!("process {pid} exited (a zombie not yet reaped)") },
        // The pid and start time are anyone's to read: the process must also be the owner's.
        Some((_, s)) if s == start => match sys::process::uids(pid) {
            Some((real, effective)) if real == owner || effective == owner => Liveness::Live,
            Some((real, _)) => Liveness::Unverified {
                reason: format!(
                    "pid {pid} is running as uid {real}, not as uid {owner} who owns this file: its figures are \
                     not vouched for (kept by --prune, in case it changed uid after making the file)"
                ),
            },
            None => Liveness::Stale { reason: format!("process {pid} is gone (crashed or killed)") },
        },
        Some(_) => Liveness::Stale { reason: format!("pid {pid} now belongs to another process") },
        None => Liveness::Stale { reason: format!("process {pid} is gone (crashed or killed)") },
    };
    let text = |b: &[u8]| -> String {
        let s = String::from_utf8_lossy(b).trim_end_matches('\0').to_string();
        // Names come from the file: no control characters reach a terminal.
        s.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
    };
    let program = text(&h.program);
    let mut streams = Vec::new();
    for index in 0..capacity {
        let base = HEADER + index * RECORD;
        let r = Record::read_from_bytes(&bytes[base..base + RECORD]).expect("inside the records checked above");
        if r.state != 1 {
            continue;
        }
        let role = match r.role {
            1 => Role::Publisher,
            2 => Role::Subscriber,
            x => return Err(format!("record {index} has role {x}, not 1 or 2")),
        };
        let transport = match r.transport {
            1 => Transport::Shm,
            2 => Transport::RdmaRc,
            3 => Transport::UdMcast,
            t => return Err(format!("record {index} has transport {t}, not 1..=3")),
        };
        let name = text(&r.name[..(r.name_len as usize).min(NAME_MAX)]);
        streams.push(StreamRecord { index, role, transport, stream_id: r.stream_id, name, counters: r.counters });
    }
    Ok(CountersFile {
        path: path.to_owned(),
        uid: owner,
        pid,
        program,
        liveness,
        ticks_per_ns: f64::from_bits(h.ticks_per_ns),
        tsc_at_create: h.tsc_at_create,
        unix_ns_at_create: h.unix_ns_at_create,
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
        let mut v = vec![0u8; super::super::layout::FILE_BYTES];
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
    /// A copy of this process's own counters file, with `pid` written in (0: ours).
    fn counters_bytes(pid: u64) -> Vec<u8> {
        let keep = register(Role::Publisher, Transport::Shm, 5, "counters-owner-test");
        let mut v = std::fs::read(counters_dir().join(format!("{}.counters", crate::sys::process::pid()))).unwrap();
        drop(keep);
        if pid != 0 {
            v[24..32].copy_from_slice(&pid.to_le_bytes());
        }
        v
    }

    fn folder(path: &Path, uid: u32, mode: u32, file: Option<(&str, &[u8], u32)>) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(path).unwrap();
        if let Some((name, bytes, owner)) = file {
            std::fs::write(path.join(name), bytes).unwrap();
            std::os::unix::fs::lchown(path.join(name), Some(owner), None).unwrap();
        }
        std::os::unix::fs::lchown(path, Some(uid), None).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// Issue 25 item 12. Tests run as root, so "another user" is played by chown. On the code
    /// before, every folder here was read and our live process's figures shown as uid 4242's.
    #[test]
    fn a_folder_another_uid_made_or_others_can_write_is_refused_aloud_and_liveness_needs_the_owners_process() {
        let base = std::env::temp_dir().join(format!("counters-owner-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let bytes = counters_bytes(0);
        let me = format!("{}.counters", crate::sys::process::pid());
        // The control: root's own folder, root's file, root's live process.
        let ok = base.join("tickbus-counters-0");
        folder(&ok, 0, 0o700, Some((&me, &bytes, 0)));
        let (files, errors) = scan(&ok);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!((files.len(), &files[0].liveness, files[0].uid), (1, &Liveness::Live, 0));
        // Made by uid 4343 under uid 4242's name (4242's processes then count privately).
        let squatted = base.join("tickbus-counters-4242");
        folder(&squatted, 4343, 0o700, Some((&me, &bytes, 4343)));
        let (files, errors) = scan(&squatted);
        assert!(files.is_empty(), "{files:?}");
        assert!(
            errors.len() == 1 && errors[0].contains("owned by uid 4343, but its name is for uid 4242"),
            "{errors:?}"
        );
        // uid 4242's own folder and file, but the pid in it is a process of uid 0 (ours): the
        // figures are not shown as live.
        folder(&squatted, 4242, 0o700, None);
        std::os::unix::fs::lchown(squatted.join(&me), Some(4242), None).unwrap();
        let (files, errors) = scan(&squatted);
        assert!(errors.is_empty(), "{errors:?}");
        match &files[0].liveness {
            Liveness::Unverified { reason } => assert!(reason.contains("not as uid 4242"), "{reason}"),
            l => panic!("another uid's process taken for the writer: {l:?}"),
        }
        // ... and prune leaves it: a process that made its file as uid 4242 and then changed uid
        // is still running (the code before removed it as stale).
        assert!(prune(&squatted).is_empty());
        assert!(squatted.join(&me).exists(), "a running process's file was pruned");
        // A file in it that another uid owns.
        std::os::unix::fs::lchown(squatted.join(&me), Some(4343), None).unwrap();
        let (files, errors) = scan(&squatted);
        assert!(files.is_empty() && errors[0].contains("not by the folder's owner (uid 4242)"), "{errors:?}");
        // Writable by others.
        folder(&squatted, 4242, 0o777, None);
        let (_, errors) = scan(&squatted);
        assert!(errors.len() == 1 && errors[0].contains("others can write it (mode 0777)"), "{errors:?}");
        // A link in a counters folder's place.
        let link = base.join("tickbus-counters-4343");
        std::os::unix::fs::symlink(&ok, &link).unwrap();
        let (files, errors) = scan(&link);
        assert!(files.is_empty() && errors[0].contains("is a symbolic link"), "{errors:?}");
        // Issue 25 review: an entry anyone can name in /dev/shm, with a terminal escape in its
        // name, reaches the error line escaped (the code before printed it raw).
        let hostile = base.join("tickbus-counters-\x1b[2J\x1b[1;1Hall clear");
        std::os::unix::fs::symlink(&ok, &hostile).unwrap();
        let (_, errors) = scan(&hostile);
        assert!(errors.len() == 1 && !errors[0].contains('\x1b') && errors[0].contains("\\u{1b}[2J"), "{errors:?}");
        let _ = std::fs::remove_dir_all(&base);
    }

    /// Issue 25 item 14. Prune works through the folder it opened: a folder swapped for a link
    /// after it was opened loses only its own stale files, and a prune of the link removes
    /// nothing (the code before followed the link and removed the victim's file).
    #[test]
    fn prune_never_removes_a_file_outside_the_folder_it_checked() {
        let base = std::env::temp_dir().join(format!("counters-prune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let stale = counters_bytes(u64::from(u32::MAX)); // no such process
        let name = "4294967295.counters";
        let real = base.join("tickbus-counters-0");
        folder(&real, 0, 0o700, Some((name, &stale, 0)));
        let victim = base.join("victim");
        folder(&victim, 0, 0o700, Some((name, &stale, 0)));
        let opened = open_folder(&real).unwrap();
        let moved = base.join("moved");
        std::fs::rename(&real, &moved).unwrap();
        std::os::unix::fs::symlink(&victim, &real).unwrap();
        let removed = prune_in(&opened);
        assert_eq!(removed.len(), 1, "{removed:?}");
        assert!(!moved.join(name).exists(), "the opened folder's stale file went");
        assert!(victim.join(name).exists(), "the file the link leads to stays");
        assert!(prune(&real).is_empty(), "a link is refused, not followed");
        assert!(victim.join(name).exists());
        let _ = std::fs::remove_dir_all(&base);
    }
}
