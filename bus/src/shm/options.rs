//! Where rings live and whether hugepages are required.
use std::path::PathBuf;

use super::error::ShmError;

/// Whether a ring must be on hugepages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HugepagePolicy {
    /// Error out (with how to reserve hugepages) if the ring cannot be on hugetlbfs.
    Required,
    /// Use hugetlbfs if possible, else fall back to /dev/shm with a loud warning.
    Preferred,
    /// Always /dev/shm (tests, machines where hugepages are reserved for something else).
    Never,
}

/// Where ring files are created and looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShmOptions {
    /// A folder on hugetlbfs. Default `/dev/hugepages/tickbus`, or `$TICKBUS_HUGEPAGE_DIR`.
    pub hugepage_dir: PathBuf,
    /// The fallback folder. Default `/dev/shm/tickbus`, or `$TICKBUS_SHM_DIR`.
    pub fallback_dir: PathBuf,
    /// Whether hugepages are required, preferred (the default) or not used.
    pub hugepages: HugepagePolicy,
}

impl ShmOptions {
    /// Rings in `hugepage_dir` (on hugetlbfs), falling back to `fallback_dir` as `hugepages`
    /// allows. Options added later take their defaults.
    pub fn new(
        hugepage_dir: impl Into<PathBuf>,
        fallback_dir: impl Into<PathBuf>,
        hugepages: HugepagePolicy,
    ) -> ShmOptions {
        ShmOptions { hugepage_dir: hugepage_dir.into(), fallback_dir: fallback_dir.into(), hugepages }
    }
}

impl Default for ShmOptions {
    fn default() -> Self {
        let env = |k: &str, d: &str| std::env::var_os(k).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(d));
        ShmOptions {
            hugepage_dir: env("TICKBUS_HUGEPAGE_DIR", "/dev/hugepages/tickbus"),
            fallback_dir: env("TICKBUS_SHM_DIR", "/dev/shm/tickbus"),
            hugepages: HugepagePolicy::Preferred,
        }
    }
}

/// Ring names are file names: ASCII letters, digits, `.`, `_`, `-`, 1..=128 bytes, not `.`/`..`.
pub(crate) fn check_name(name: &str) -> Result<(), ShmError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ShmError::BadName { name: name.to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_file_names() {
        for good in ["md.nasdaq", "orders-1", "A_b.9"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "..", "a/b", "x y", &"n".repeat(129)] {
            assert!(matches!(check_name(bad), Err(ShmError::BadName { .. })), "{bad}");
        }
    }
}
