//! Crash points for the apps' tests (`--cfg tickbus_testing`): with
//! `TICKBUS_CRASH=<point>:<nth>` in its environment, the process exits at once (code 86, no
//! destructors run, nothing released: what a `kill -9` landing there leaves) the nth time it
//! passes that point. Without `--cfg tickbus_testing` every point compiles to nothing.
//!
//! Owns: the one armed point. Never: makes a syscall or allocates before the armed pass (the
//! trading loops' hot-path proofs may run with the cfg on).
#[cfg(tickbus_testing)]
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(tickbus_testing)]
use std::sync::OnceLock;

/// Exit code of a process stopped at a crash point.
#[cfg(tickbus_testing)]
pub const EXIT_CODE: i32 = 86;

#[cfg(tickbus_testing)]
static ARMED: OnceLock<(String, AtomicU64)> = OnceLock::new();

/// Arms the point `TICKBUS_CRASH` names, if any. Panics on a malformed value, so a test never
/// runs unarmed by mistake. Call once at start-up.
pub fn arm_from_env() {
    #[cfg(tickbus_testing)]
    if let Ok(v) = std::env::var("TICKBUS_CRASH") {
        let (name, nth) = v.split_once(':').expect("TICKBUS_CRASH=<point>:<nth>");
        let nth: u64 = nth.parse().expect("TICKBUS_CRASH's count is a number");
        let _ = ARMED.set((name.to_owned(), AtomicU64::new(nth)));
    }
}

/// Marks crash point `name` on the calling path; exits there if armed and due.
#[inline(always)]
pub fn point(name: &str) {
    #[cfg(tickbus_testing)]
    if let Some((armed, left)) = ARMED.get() {
        if armed == name && left.fetch_sub(1, Ordering::Relaxed) == 1 {
            std::process::exit(EXIT_CODE);
        }
    }
    #[cfg(not(tickbus_testing))]
    let _ = name;
}
