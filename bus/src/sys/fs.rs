//! Filesystem calls the shm transport needs: folders opened without following links, files
//! opened and removed relative to such a folder (so nobody can swap a path component between a
//! check and its use), byte-range locks the kernel drops when their holder dies, and whether a
//! folder is on hugetlbfs.
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// A folder opened by path without following a link at its last component (`O_NOFOLLOW`).
pub struct Dir {
    file: File,
}

fn cstr(s: &[u8]) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path has a NUL byte"))
}

impl Dir {
    /// Opens folder `path`. A symbolic link there fails with `ELOOP` (or `ENOTDIR`).
    pub fn open_nofollow(path: &Path) -> io::Result<Dir> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        Ok(Dir { file })
    }

    /// The folder's own metadata (fstat of the opened folder, not of whatever the path names now).
    pub fn metadata(&self) -> io::Result<std::fs::Metadata> {
        self.file.metadata()
    }

    /// Opens `name` in this folder for reading and writing, never following a link
    /// (`openat(.., O_NOFOLLOW)`); with `create`, creates it exclusively (`O_CREAT | O_EXCL`,
    /// mode 0600), failing with `AlreadyExists` if anything is there.
    pub fn open_file(&self, name: &str, create: bool) -> io::Result<File> {
        let c = cstr(name.as_bytes())?;
        let mut flags = libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        if create {
            flags |= libc::O_CREAT | libc::O_EXCL;
        }
        // SAFETY: the folder fd is open for as long as `self`; `c` is NUL-terminated.
        let fd = unsafe { libc::openat(self.file.as_raw_fd(), c.as_ptr(), flags, 0o600 as libc::c_uint) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: openat returned a fresh descriptor that nothing else owns.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// Opens `name` in this folder read-only if it is a regular file, never following a link
    /// and never blocking on a FIFO (`openat(.., O_NOFOLLOW | O_NONBLOCK)`, then fstat).
    pub fn open_regular(&self, name: &str) -> io::Result<File> {
        let c = cstr(name.as_bytes())?;
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
        // SAFETY: the folder fd is open for as long as `self`; `c` is NUL-terminated.
        let fd = unsafe { libc::openat(self.file.as_raw_fd(), c.as_ptr(), flags) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: openat returned a fresh descriptor that nothing else owns.
        let f = unsafe { File::from_raw_fd(fd) };
        if !f.metadata()?.is_file() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file (a FIFO, device or folder)"));
        }
        Ok(f)
    }

    /// The names in this folder (the folder this handle opened, whatever its path names now),
    /// sorted; `.` and `..` left out, names that are not UTF-8 too.
    pub fn names(&self) -> io::Result<Vec<String>> {
        // /proc/self/fd/N leads to the opened folder itself, not to a path looked up again.
        let mut v: Vec<String> = std::fs::read_dir(format!("/proc/self/fd/{}", self.file.as_raw_fd()))?
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .collect();
        v.sort();
        Ok(v)
    }

    /// `(device, inode)` of `name` in this folder, not following a link there.
    pub fn id_of(&self, name: &str) -> io::Result<(u64, u64)> {
        let c = cstr(name.as_bytes())?;
        let mut st = core::mem::MaybeUninit::<libc::stat>::zeroed();
        // SAFETY: the folder fd is open, `c` is NUL-terminated, `st` is writable stat-sized memory.
        let rc =
            unsafe { libc::fstatat(self.file.as_raw_fd(), c.as_ptr(), st.as_mut_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fstatat returned 0, so it filled the struct.
        let st = unsafe { st.assume_init() };
        Ok((st.st_dev, st.st_ino))
    }

    /// Removes `name` from this folder (`unlinkat`).
    pub fn unlink(&self, name: &str) -> io::Result<()> {
        let c = cstr(name.as_bytes())?;
        // SAFETY: the folder fd is open; `c` is NUL-terminated.
        if unsafe { libc::unlinkat(self.file.as_raw_fd(), c.as_ptr(), 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// `path` as it may be printed: a name read from a shared folder is anyone's to choose, and
/// control characters in it (escape sequences that clear a terminal or rewrite an earlier line)
/// become `\u{..}` escapes instead of reaching the operator's terminal raw.
pub fn shown(path: &Path) -> String {
    let s = path.to_string_lossy();
    if !s.chars().any(char::is_control) {
        return s.into_owned();
    }
    s.chars().map(|c| if c.is_control() { c.escape_unicode().to_string() } else { c.to_string() }).collect()
}

/// This process's effective uid: who must own a ring folder and file.
pub fn euid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// Why a folder or file with metadata `md` is not this user's alone, if it is not: owned by
/// another uid, or (for the bits in `shared`) open to group or others. `shared` is 0o022 for a
/// folder nobody else may write, 0o077 for a file nobody else may read or write.
pub fn not_private(md: &std::fs::Metadata, shared: u32) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let me = euid();
    if md.uid() != me {
        return Some(format!("it is owned by uid {}, not by this process's uid {me}", md.uid()));
    }
    if md.mode() & shared != 0 {
        let what = if shared & 0o044 != 0 { "readable or writable" } else { "writable" };
        return Some(format!("it is {what} by others (mode {:04o})", md.mode() & 0o7777));
    }
    None
}

/// Why `path`'s parent lets another user rename or replace `path`, if it does: it is writable by
/// group or others without the sticky bit (/tmp and /dev/shm are sticky: only an entry's owner
/// may rename it there), or it belongs to another user (who may rename what is in it), root
/// excepted. Follows links to the parent, as a path lookup does.
pub fn parent_not_safe(path: &Path) -> io::Result<Option<(std::path::PathBuf, String)>> {
    use std::os::unix::fs::MetadataExt;
    let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) else { return Ok(None) };
    let md = std::fs::metadata(parent)?;
    let sticky = md.mode() & 0o1000 != 0;
    let reason = if md.mode() & 0o022 != 0 && !sticky {
        Some(format!("it is writable by others without the sticky bit (mode {:04o})", md.mode() & 0o7777))
    } else if !sticky && md.uid() != 0 && md.uid() != euid() {
        Some(format!("it is owned by uid {}, who may rename what is in it", md.uid()))
    } else {
        None
    };
    Ok(reason.map(|r| (parent.to_owned(), r)))
}

/// Opens `path` read-only if it is a regular file: a symbolic link there is not followed
/// (`O_NOFOLLOW`: fails with `ELOOP`), and a FIFO or device is refused after an open that cannot
/// block (`O_NONBLOCK`), so a planted FIFO cannot hang the caller and a link to `/dev/zero`
/// cannot be read forever.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let f =
        OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC).open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file (a FIFO, device or folder)"));
    }
    Ok(f)
}

/// The first `max` bytes of `file` at most (all of it if shorter), read from its start.
pub fn read_at_most(file: &File, max: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let len = file.metadata()?.len().min(max);
    let mut v = Vec::with_capacity(len as usize);
    file.take(len).read_to_end(&mut v)?;
    Ok(v)
}

/// Puts a folder's entries (names created, renamed or removed in it) on disk: without it a
/// power failure can lose a file whose data was synced, because its name was not.
pub fn sync_folder(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

fn ofd_lock(file: &File, cmd: libc::c_int, ty: libc::c_int, offset: u64, len: u64) -> io::Result<libc::flock> {
    // SAFETY: a zeroed flock is valid; we fill the range fields fcntl reads.
    let mut fl: libc::flock = unsafe { core::mem::zeroed() };
    fl.l_type = ty as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = offset as libc::off_t;
    fl.l_len = len as libc::off_t;
    // SAFETY: the fd is open (borrowed from `file`), and `fl` is a valid flock for F_OFD_*.
    if unsafe { libc::fcntl(file.as_raw_fd(), cmd, &mut fl) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fl)
}

/// Takes an exclusive open-file-description lock on bytes `[offset, offset + len)` of `file`
/// without waiting. Ok(false) if another open file description holds it. The kernel drops the
/// lock when the last descriptor of this open file description closes, so also when its process
/// dies (a zombie holds no files), whatever its pid or pid namespace.
pub fn try_lock_range(file: &File, offset: u64, len: u64) -> io::Result<bool> {
    match ofd_lock(file, libc::F_OFD_SETLK, libc::F_WRLCK, offset, len) {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether another open file description holds a lock on any byte of `[offset, offset + len)`.
pub fn range_locked(file: &File, offset: u64, len: u64) -> io::Result<bool> {
    let fl = ofd_lock(file, libc::F_OFD_GETLK, libc::F_WRLCK, offset, len)?;
    Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
}

/// `f_type` of a hugetlbfs mount (linux/magic.h).
const HUGETLBFS_MAGIC: i64 = 0x9584_58f6;
/// Bytes in the hugepages tickbus maps (x86-64 default).
pub const HUGEPAGE_BYTES: usize = 2 << 20;

/// Whether `path` lives on a hugetlbfs mount.
pub fn is_hugetlbfs(path: &Path) -> io::Result<bool> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path has a NUL byte"))?;
    let mut st = core::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated path and `st` points to writable memory of statfs's size.
    let rc = unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statfs returned 0, so it filled the struct.
    let st = unsafe { st.assume_init() };
    #[allow(clippy::unnecessary_cast)] // f_type is i64 on x86-64 but narrower on other targets
    Ok(st.f_type as i64 == HUGETLBFS_MAGIC)
}

/// Free 2 MiB hugepages in the system pool, from /proc/meminfo (None if unreadable).
pub fn free_hugepages() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    info.lines().find_map(|l| l.strip_prefix("HugePages_Free:")).and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tmp_is_not_hugetlbfs_and_missing_paths_are_errors() {
        assert!(!is_hugetlbfs(Path::new("/proc")).unwrap());
        assert!(is_hugetlbfs(Path::new("/no/such/dir/for/tickbus")).is_err());
    }

    #[test]
    fn shown_escapes_control_characters_and_leaves_plain_names_alone() {
        assert_eq!(shown(Path::new("/dev/shm/md")), "/dev/shm/md");
        let hostile = shown(Path::new("/dev/shm/tickbus-counters-\x1b[2J\r"));
        assert!(!hostile.chars().any(char::is_control), "{hostile:?}");
        assert!(hostile.contains("\\u{1b}[2J\\u{d}"), "{hostile}");
    }
}
