//! Fault points (`--cfg tickbus_testing`, for tests only): a test arms a point, and the process
//! dies at exactly that instruction of the protocol, as a `kill -9` that happened to land there
//! would leave it. Without the cfg every point compiles to nothing and this module is private.
//! A cfg, not a Cargo feature: features unify across a build graph, so any dependency could
//! have switched kill points on in a production binary; a `--cfg` is set only by whoever runs
//! the build (`RUSTFLAGS="--cfg tickbus_testing"`, as `tools/test.sh` does).
//!
//! Owns: the armed counters. Never: allocates or makes a syscall before the armed hit (a hot-path
//! proof may run with the cfg on), and never runs in a build without the cfg.
#[cfg(tickbus_testing)]
use std::sync::atomic::{AtomicU64, Ordering};

/// Where a process can be made to die.
#[cfg(any(tickbus_testing, test))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// A ring publisher stored a slot's lead word (the slot is being written), nothing else.
    WriterAfterLead = 0,
    /// A ring publisher stored a slot's trail word (the slot is published) but not yet the
    /// producer position that says so.
    WriterAfterTrail = 1,
}

#[cfg(any(tickbus_testing, test))]
const POINTS: usize = 2;
/// Exit code of a process killed at a fault point.
#[cfg(tickbus_testing)]
pub const EXIT_CODE: i32 = 86;

#[cfg(tickbus_testing)]
static ARMED: [AtomicU64; POINTS] = [const { AtomicU64::new(0) }; POINTS];

#[cfg(any(tickbus_testing, test))]
impl Point {
    #[cfg(any(tickbus_testing, test))]
    fn parse(s: &str) -> Option<Point> {
        match s {
            "writer-after-lead" => Some(Point::WriterAfterLead),
            "writer-after-trail" => Some(Point::WriterAfterTrail),
            _ => None,
        }
    }
}

/// Arms `point`: the process exits with [`EXIT_CODE`] at its `nth` hit (1 = the next one).
/// The writer's points reach here through the ring's hook, installed on the first arming.
#[cfg(tickbus_testing)]
pub fn arm(point: Point, nth: u64) {
    crate::ring::hook::install(on_writer_step);
    ARMED[point as usize].store(nth, Ordering::Relaxed);
}

/// The ring writer's steps, as this module's points.
#[cfg(tickbus_testing)]
fn on_writer_step(step: crate::ring::hook::WriterStep) {
    use crate::ring::hook::WriterStep;
    hit(match step {
        WriterStep::AfterLead => Point::WriterAfterLead,
        WriterStep::AfterTrail => Point::WriterAfterTrail,
    });
}

/// Arms the point `TICKBUS_FAULT=<point>:<nth>` names (e.g. `writer-after-trail:1000`); returns
/// whether one was armed. Panics on a malformed value, so a test never runs unarmed by mistake.
#[cfg(tickbus_testing)]
pub fn arm_from_env() -> bool {
    let Ok(v) = std::env::var("TICKBUS_FAULT") else { return false };
    let (name, nth) = v.split_once(':').expect("TICKBUS_FAULT=<point>:<nth>");
    let point = Point::parse(name).unwrap_or_else(|| panic!("unknown fault point {name:?}"));
    arm(point, nth.parse().expect("TICKBUS_FAULT's count is a number"));
    true
}

#[cfg(tickbus_testing)]
static RKEY_XOR: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Makes every RDMA subscriber this process connects from now on advertise its ring's rkey
/// XORed with `xor` (0: honest again): a wrong rkey as a broken or hostile peer would send it.
/// Kept out of the public option structs so no production configuration can carry it.
#[cfg(tickbus_testing)]
pub fn corrupt_rkey(xor: u32) {
    RKEY_XOR.store(xor, Ordering::Relaxed);
}

/// What `corrupt_rkey` set (always 0 without the cfg).
#[cfg(feature = "rdma")]
#[inline]
pub(crate) fn rkey_xor() -> u32 {
    #[cfg(tickbus_testing)]
    return RKEY_XOR.load(Ordering::Relaxed);
    #[cfg(not(tickbus_testing))]
    0
}

/// Armed cut for the next UD chain: 0 unarmed, else 1 + how many WRs to post.
#[cfg(tickbus_testing)]
static UD_CHAIN_CUT: AtomicU64 = AtomicU64::new(0);

/// Makes the next chained UD post ([`crate::sys::verbs::UdQp::post_sends`]) of more than `taken`
/// WRs in this process post only its first `taken` and report the next refused (EINVAL), as a
/// provider that took part of a chain and refused the next WR would. One shot: shorter chains
/// pass untouched and leave it armed.
#[cfg(tickbus_testing)]
pub fn cut_next_ud_chain(taken: u64) {
    UD_CHAIN_CUT.store(taken + 1, Ordering::Relaxed);
}

/// Takes the armed cut if it applies to a chain of `len` WRs (always `None` without the
/// cfg).
#[cfg(feature = "rdma")]
#[inline]
pub(crate) fn take_ud_chain_cut(len: usize) -> Option<usize> {
    #[cfg(tickbus_testing)]
    {
        let armed = UD_CHAIN_CUT.load(Ordering::Relaxed);
        if armed != 0 && ((armed - 1) as usize) < len {
            UD_CHAIN_CUT.store(0, Ordering::Relaxed);
            return Some((armed - 1) as usize);
        }
    }
    let _ = len;
    None
}

/// Marks `point` on the calling path; dies there if armed and due.
#[cfg(tickbus_testing)]
#[inline(always)]
fn hit(point: Point) {
    if ARMED[point as usize].load(Ordering::Relaxed) != 0 {
        due(point);
    }
}

#[cfg(tickbus_testing)]
#[cold]
fn due(point: Point) {
    if ARMED[point as usize].fetch_sub(1, Ordering::Relaxed) == 1 {
        // SAFETY: _exit ends the process at once, without destructors or flushes: exactly what a
        // crash at this instruction leaves behind.
        unsafe { libc::_exit(EXIT_CODE) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn point_names_parse_and_unknown_ones_do_not() {
        assert_eq!(Point::parse("writer-after-trail"), Some(Point::WriterAfterTrail));
        assert_eq!(Point::parse("writer-after-lead"), Some(Point::WriterAfterLead));
        assert_eq!(Point::parse("nowhere"), None);
        assert_eq!(POINTS, 2);
    }
}
