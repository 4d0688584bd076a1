//! What a bench leaves on the machine is removed however it ends: shared-memory rings (on
//! hugetlbfs they hold reserved pages the next run needs) and temporary journal folders. A
//! guard made before the processes that use them is dropped after them, on `?` and panic alike.
use std::path::{Path, PathBuf};

use tickbus::shm::{self, ShmOptions};

/// Shared-memory rings removed when dropped.
pub struct Rings {
    names: Vec<String>,
    opts: ShmOptions,
}

impl Rings {
    /// Rings `names`, opened with the default options.
    pub fn new<S: AsRef<str>>(names: &[S]) -> Rings {
        Rings::with_options(names, ShmOptions::default())
    }

    /// Rings `names`, opened with `opts` (which say where their files live).
    pub fn with_options<S: AsRef<str>>(names: &[S], opts: ShmOptions) -> Rings {
        Rings { names: names.iter().map(|n| n.as_ref().to_owned()).collect(), opts }
    }
}

impl Drop for Rings {
    fn drop(&mut self) {
        for n in &self.names {
            // A ring still held (a publisher thread that outlived its bench) stays: say so.
            if let Err(e) = shm::remove(n, &self.opts) {
                eprintln!("latency-lab: ring {n} left behind: {e}");
            }
        }
    }
}

/// A temporary folder, emptied of anything an earlier run left, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// `std::env::temp_dir()/name`, removed first if a killed run left it.
    pub fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_and_a_folder_are_removed_when_the_bench_fails_early() {
        let name = format!("lab-cleanup-test-{}", std::process::id());
        let opts = ShmOptions::default();
        let failing = || -> Result<(), String> {
            let _rings = Rings::with_options(&[&name], opts.clone());
            let dir = TempDir::new(&format!("{name}-dir"));
            std::fs::create_dir_all(dir.path()).map_err(|e| e.to_string())?;
            let cfg = tickbus::RingConfig::for_payload(tickbus::Mode::Lossy, 1, 64, 64);
            let _p = shm::open_publisher(&name, &cfg, &opts).map_err(|e| e.to_string())?;
            assert!(dir.path().exists());
            Err("the bench failed".into())
        };
        assert!(failing().is_err());
        assert!(!std::env::temp_dir().join(format!("{name}-dir")).exists(), "the folder outlived the bench");
        // The ring is gone: there is nothing left to remove.
        assert!(!shm::remove(&name, &opts).unwrap(), "the ring outlived the bench");
    }
}
