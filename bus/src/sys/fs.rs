//! Filesystem facts the shm transport needs: is a folder on hugetlbfs, how many hugepages are
//! free.
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

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
}
