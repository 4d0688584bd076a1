//! `doctor::watch_cores` on this host, in a test binary of its own: its watchers spin on a
//! core, which would disturb other tests' timing (and theirs it).
use std::time::{Duration, Instant};

use tickbus::doctor::watch_cores;

/// Two watchers pinned to one core at once can only take turns, so each must see the other's
/// turns as gaps of a scheduler slice (hundreds of µs at least); watched one after the other,
/// neither would, and the two would take twice as long.
#[test]
fn the_cores_are_watched_at_once_and_a_core_shared_shows_its_gaps() {
    let core =
        core_affinity::get_core_ids().and_then(|c| c.first().map(|c| c.id)).expect("a core this test may run on");
    let window = Duration::from_millis(200);
    let start = Instant::now();
    let r = watch_cores(&[core, core], window);
    let took = start.elapsed();
    assert_eq!(r.len(), 2);
    for (c, l) in &r {
        let l = l.as_ref().unwrap_or_else(|e| panic!("core {c}: {e}"));
        assert!(l.longest >= Duration::from_micros(100), "{l:?}");
        // Taking turns, neither had the core for most of the window.
        assert!(l.total > window / 4, "{l:?}");
    }
    assert!(took < window * 2 - Duration::from_millis(20), "watched one after the other: {took:?}");
    let e = watch_cores(&[usize::MAX >> 1], Duration::from_millis(1));
    assert!(e[0].1.as_ref().is_err_and(|e| e.contains("pinning")), "{e:?}");
}
