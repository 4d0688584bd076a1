//! Waiting for a name to appear in a folder (inotify) instead of looking for it again and again.
//!
//! Why not a polling loop: on tmpfs and hugetlbfs every lookup of a name that is not there, and
//! every open of the folder, makes a dentry the kernel frees through RCU. A subscriber that
//! looked every 5 ms for a ring its publisher had not made yet kept RCU grace periods running
//! on a two-core host, and RCU's kthread preempted the busy publisher on the other core about
//! 80 times a second (a gateway waiting beside two spinning cores: 241 preemptions in 3 s,
//! against 7 without it). Waiting on a watch costs nothing until the folder changes.
//!
//! A few calls, so no crate: the wait needs a timeout, which a crate's blocking read leaves to
//! `poll(2)` anyway.
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// An inotify watch on some folders for names created or moved into them (or the folder itself
/// going away).
pub struct FolderWatch {
    fd: OwnedFd,
    /// Whether every folder asked for is watched (one that could not be is seen only by looking).
    whole: bool,
}

/// What ended a [`FolderWatch::wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// The time ran out with no change (or a signal ended the wait early).
    Timeout,
    /// A name was made or moved into a watched folder: look again.
    Changed,
    /// A watched folder was removed or moved away, or events were lost: the watch no longer
    /// covers the path; make a new one.
    Stale,
}

impl FolderWatch {
    /// Watches each of `folders` that exists. An error if none could be watched (none exists, or
    /// the user's inotify instances or watches are used up); [`FolderWatch::whole`] says whether
    /// all were.
    pub fn new(folders: &[PathBuf]) -> io::Result<FolderWatch> {
        // SAFETY: no pointer arguments; the result is checked below.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: inotify_init1 returned a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mask = libc::IN_CREATE | libc::IN_MOVED_TO | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_ONLYDIR;
        let (mut watched, mut last) = (0, None);
        for f in folders {
            let c = std::ffi::CString::new(f.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path has a NUL byte"))?;
            // SAFETY: the descriptor is open; `c` is NUL-terminated and outlives the call.
            if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), c.as_ptr(), mask) } < 0 {
                last = Some(io::Error::last_os_error());
            } else {
                watched += 1;
            }
        }
        if watched == 0 {
            return Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no folder to watch")));
        }
        Ok(FolderWatch { fd, whole: watched == folders.len() })
    }

    /// Whether every folder asked for is watched.
    pub fn whole(&self) -> bool {
        self.whole
    }

    /// Waits until a watched folder changed or `timeout` passed (rounded up to whole ms: a
    /// sub-ms remainder waits 1 ms rather than returning at once). The events are read and
    /// dropped: the caller looks again at what it was waiting for.
    pub fn wait(&self, timeout: Duration) -> io::Result<Woke> {
        let mut p = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
        // SAFETY: `p` is one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            // A signal woke us: a slice that ended early, no change (the caller checks its stop
            // flag; a profiler's signals must not turn the wait back into looking).
            return if e.kind() == io::ErrorKind::Interrupted { Ok(Woke::Timeout) } else { Err(e) };
        }
        if n == 0 {
            return Ok(Woke::Timeout);
        }
        let gone = libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_IGNORED | libc::IN_Q_OVERFLOW;
        let (mut buf, mut woke) = ([0u8; 4096], Woke::Changed);
        loop {
            // SAFETY: `buf` is writable for its whole length; the descriptor is non-blocking.
            let r = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if r <= 0 {
                return Ok(woke); // drained (EAGAIN) or nothing more to say
            }
            if event_masks(&buf[..r as usize]).any(|m| m & gone != 0) {
                woke = Woke::Stale;
            }
        }
    }
}

/// The masks of the inotify events in `bytes` (each a 16-byte `inotify_event` and its name).
fn event_masks(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let head = bytes.get(at..at + 16)?;
        let mask = u32::from_ne_bytes(head[4..8].try_into().expect("4 bytes"));
        let name_len = u32::from_ne_bytes(head[12..16].try_into().expect("4 bytes")) as usize;
        at = at.checked_add(16)?.checked_add(name_len)?;
        Some(mask)
    })
}

/// The folder to watch for `path` to appear in: its parent if that exists, else the nearest
/// ancestor that does (the parent may itself be made later).
/// (A relative path's last ancestor, the empty path, is the current folder.)
pub fn nearest_existing_parent(path: &Path) -> Option<PathBuf> {
    let here = |a: &Path| if a.as_os_str().is_empty() { Path::new(".").to_path_buf() } else { a.to_path_buf() };
    path.ancestors().skip(1).map(here).find(|a| a.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tickbus-watch-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_file_made_in_the_folder_ends_the_wait() {
        let d = folder("made");
        let w = FolderWatch::new(std::slice::from_ref(&d)).unwrap();
        let made = d.join("ring");
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            std::fs::write(made, b"x").unwrap();
        });
        // A timeout returns Timeout: Changed is the creation, seen.
        assert_eq!(w.wait(Duration::from_secs(60)).unwrap(), Woke::Changed, "the creation was not seen");
        t.join().unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn nothing_made_is_a_timeout_and_a_missing_folder_is_not_watched() {
        let d = folder("quiet");
        let gone = d.join("not-there");
        let w = FolderWatch::new(&[gone.clone(), d.clone()]).unwrap();
        assert!(!w.whole());
        assert_eq!(w.wait(Duration::from_millis(20)).unwrap(), Woke::Timeout);
        assert!(FolderWatch::new(std::slice::from_ref(&gone)).is_err());
        assert_eq!(nearest_existing_parent(&gone.join("ring")), Some(d.clone()));
        assert_eq!(nearest_existing_parent(Path::new("not-made-here/ring")), Some(PathBuf::from(".")));
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Events as the kernel lays them out (16-byte head, then the name padded), and a buffer
    /// cut short: the mask of every event whose head is there, then the end, never a panic.
    #[test]
    fn event_masks_reads_whole_events_and_stops_at_a_cut() {
        let event = |mask: u32, name_len: u32| {
            let mut b = Vec::new();
            for w in [7u32, mask, 0, name_len] {
                b.extend_from_slice(&w.to_ne_bytes());
            }
            b.resize(16 + name_len as usize, 0);
            b
        };
        let mut bytes = event(libc::IN_CREATE, 16);
        bytes.extend(event(libc::IN_IGNORED, 0));
        bytes.extend(&event(libc::IN_MOVED_TO, 32)[..20]);
        assert_eq!(event_masks(&bytes).collect::<Vec<_>>(), vec![libc::IN_CREATE, libc::IN_IGNORED, libc::IN_MOVED_TO]);
        assert_eq!(event_masks(&bytes[..10]).count(), 0);
    }

    /// A folder removed under its watch: the wait says the watch is stale (a folder made again
    /// at the same path is another folder, which this watch would never see).
    #[test]
    fn a_watched_folder_removed_makes_the_watch_stale() {
        let d = folder("removed");
        let w = FolderWatch::new(std::slice::from_ref(&d)).unwrap();
        assert!(w.whole());
        std::fs::remove_dir(&d).unwrap();
        assert_eq!(w.wait(Duration::from_secs(60)).unwrap(), Woke::Stale);
    }
}
