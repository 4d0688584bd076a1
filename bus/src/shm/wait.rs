//! How a subscriber waits for a ring its publisher has not made (or finished making) yet.
//!
//! A ring not there yet: a watch on the folders it was looked for in (their nearest existing
//! ancestor, for a folder not made yet), so the next look comes when something is created
//! there, or after [`LOOK_AGAIN`] at the latest (100 ms while a folder is not watched); a stop
//! flag is seen within 100 ms. A ring there but not ready (its publisher still laying it out,
//! or every consumer line taken): looks again after a pause that doubles from 2 ms to 100 ms.
//! Either way a wait costs next to nothing: a look every 5 ms on tmpfs or hugetlbfs kept RCU
//! grace periods running, whose kthread then preempted a publisher busy on another core (see
//! [`crate::sys::watch`]).
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::error::ShmError;
use crate::sys::watch::{nearest_existing_parent, FolderWatch, Woke};

/// The longest a subscriber waits on its watch before it looks for the ring again anyway: for
/// what a watch could lose (a ring made between a look and a new watch is not one: a new watch
/// is always followed by a look at once).
pub const LOOK_AGAIN: Duration = Duration::from_secs(1);

/// How often a subscriber that could not watch every folder (the user's inotify instances or
/// watches used up, a folder it may not read) looks for the ring.
const UNWATCHED_LOOK: Duration = Duration::from_millis(100);

/// How soon a wait on the watch sees its stop flag.
const STOP_SEEN: Duration = Duration::from_millis(100);

/// The first and the longest pause before looking again at a ring that is there but not ready.
const FIRST_PAUSE: Duration = Duration::from_millis(2);
const LONGEST_PAUSE: Duration = Duration::from_millis(100);

/// One wait for one ring: keep it across the tries of opening it.
#[derive(Default)]
pub struct RingWait {
    watch: Option<FolderWatch>,
    /// The folders the watch was asked for (some may not have been watchable).
    asked: Vec<PathBuf>,
    pause: Duration,
}

impl RingWait {
    /// A wait not begun.
    pub fn new() -> RingWait {
        RingWait::default()
    }

    /// Pauses after a retryable `e`, for at most `most` (give or take the 1 ms a wait rounds
    /// up to), before the caller tries again; ends within 100 ms of `stop` being set. Returns
    /// at once when it has just set up a watch (a ring made meanwhile would not wake it).
    pub fn pause(&mut self, e: &ShmError, most: Duration, stop: Option<&AtomicBool>) {
        let stopped = || stop.is_some_and(|s| s.load(Ordering::Acquire));
        if let ShmError::NotFound { searched, .. } = e {
            let mut folders: Vec<PathBuf> = searched.iter().filter_map(|p| nearest_existing_parent(p)).collect();
            folders.dedup();
            // A new folder set, or no watch yet (one that could not be had is tried again).
            if folders != self.asked || self.watch.is_none() {
                self.watch = FolderWatch::new(&folders).ok();
                self.asked = folders;
                if self.watch.is_some() {
                    return;
                }
            }
            let Some(w) = &self.watch else {
                std::thread::sleep(most.min(UNWATCHED_LOOK));
                return;
            };
            let cap = if w.whole() { LOOK_AGAIN } else { UNWATCHED_LOOK };
            let until = Instant::now() + most.min(cap);
            loop {
                let left = until.saturating_duration_since(Instant::now());
                // Slices of 100 ms: only the stop flag is looked at between them, not the folders.
                match w.wait(left.min(STOP_SEEN)) {
                    Ok(Woke::Timeout) if !left.is_zero() && !stopped() => continue,
                    Ok(Woke::Timeout | Woke::Changed) => return,
                    // The folder went (or events were lost): a new watch at the next pause.
                    Ok(Woke::Stale) => {
                        (self.watch, self.asked) = (None, Vec::new());
                        return;
                    }
                    Err(_) => {
                        std::thread::sleep(left.min(UNWATCHED_LOOK));
                        return;
                    }
                }
            }
        }
        self.pause = (self.pause * 2).clamp(FIRST_PAUSE, LONGEST_PAUSE);
        std::thread::sleep(self.pause.min(most));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::{Mode, RingConfig};
    use crate::shm::tests::Dirs;
    use crate::shm::{open_observer, open_publisher, HugepagePolicy, ShmOptions};

    /// The smallest state that could fool the watch: the ring's folder not made yet when the
    /// wait begins (the publisher makes folder and ring). The subscriber opens it, and looks
    /// for it a handful of times over the wait, not every few ms. The folders sit in one of the
    /// test's own, so other tests making files in /dev/shm do not wake the watch.
    #[test]
    fn a_ring_made_after_the_wait_began_is_opened_after_few_looks() {
        let d = Dirs::new(HugepagePolicy::Never);
        std::fs::create_dir_all(&d.0.fallback_dir).unwrap();
        std::fs::set_permissions(&d.0.fallback_dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let opts = ShmOptions::new(d.0.hugepage_dir.clone(), d.0.fallback_dir.join("rings"), HugepagePolicy::Never);
        let theirs = opts.clone();
        let publisher = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(600));
            let cfg = RingConfig::for_payload(Mode::Lossy, 3, 64, 64);
            let p = open_publisher("late", &cfg, &theirs).unwrap();
            std::thread::sleep(Duration::from_millis(300));
            drop(p);
        });
        let (mut wait, mut looks, t0) = (RingWait::new(), 0, Instant::now());
        let s = loop {
            match open_observer("late", crate::ring::StartAt::Oldest, &opts) {
                Ok(s) => break s,
                Err(e) if e.is_retryable() && t0.elapsed() < Duration::from_secs(30) => {
                    // Only the looks that found no ring: a ring there but not laid out yet is
                    // looked at on its own schedule (the other test).
                    looks += usize::from(matches!(e, ShmError::NotFound { .. }));
                    wait.pause(&e, Duration::from_secs(30), None)
                }
                Err(e) => panic!("{e}"),
            }
        };
        drop(s);
        publisher.join().unwrap();
        // 600 ms before the folder exists, then the folder, then the ring: with a look every
        // 5 ms this was 120 and more; with the watch, two per change (one when the watch
        // moves), and one more at LOOK_AGAIN at most.
        assert!(looks <= 6, "found no ring {looks} times, for a ring made after 600 ms");
    }

    /// The folder removed and made again while the wait stands: the old watch is dropped, not
    /// kept on a folder that is gone (every look would then wait the full LOOK_AGAIN).
    #[test]
    fn a_folder_made_again_gets_a_new_watch() {
        let d = Dirs::new(HugepagePolicy::Never);
        std::fs::create_dir_all(&d.0.fallback_dir).unwrap();
        let e = ShmError::NotFound { name: "r".into(), searched: vec![d.0.fallback_dir.join("r")] };
        let mut w = RingWait::new();
        w.pause(&e, Duration::from_secs(5), None);
        assert!(w.watch.is_some(), "a new watch, and back at once to look");
        std::fs::remove_dir(&d.0.fallback_dir).unwrap();
        std::fs::create_dir(&d.0.fallback_dir).unwrap();
        w.pause(&e, Duration::from_secs(5), None);
        assert!(w.watch.is_none() && w.asked.is_empty(), "the stale watch was kept");
        w.pause(&e, Duration::from_secs(5), None);
        assert!(w.watch.is_some(), "no new watch on the folder made again");
        // And it is a watch on the folder made again: a ring made there wakes it.
        std::fs::write(d.0.fallback_dir.join("r"), b"x").unwrap();
        assert_eq!(w.watch.as_ref().unwrap().wait(Duration::from_secs(60)).unwrap(), Woke::Changed);
    }

    #[test]
    fn a_ring_there_but_not_ready_is_looked_at_again_sooner_then_later() {
        let e = ShmError::Layout { path: PathBuf::from("/x"), source: crate::ring::LayoutError::NotReady };
        let mut w = RingWait::new();
        w.pause(&e, Duration::ZERO, None);
        assert_eq!(w.pause, FIRST_PAUSE);
        for _ in 0..10 {
            w.pause(&e, Duration::ZERO, None);
        }
        assert_eq!(w.pause, LONGEST_PAUSE);
    }
}
