//! The atomics the ring uses: `core`'s in builds, loom's under `--cfg loom` so the model checker
//! sees every synchronising access.
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{fence, AtomicU64, Ordering};

/// A scheduling point for loom's spin loops (tests only: builds spin with `core::hint`).
#[cfg(all(loom, test))]
pub(crate) fn spin_hint() {
    loom::thread::yield_now();
}
