//! The writer's two crash-sensitive moments, reported to a hook that a test build can install
//! (`crate::fault` does, to kill a process exactly there). The ring defines the moments and
//! imports nothing: whoever acts on them depends on the ring, not the other way round.
//! Without `--cfg tickbus_testing` a report compiles to nothing.

/// A moment in publishing one slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriterStep {
    /// The slot's lead word is stored (the slot is being written), nothing else.
    AfterLead,
    /// The slot's trail word is stored (the slot is published), not yet the producer position.
    AfterTrail,
}

#[cfg(tickbus_testing)]
static HOOK: std::sync::OnceLock<fn(WriterStep)> = std::sync::OnceLock::new();

/// Installs the function every writer in this process calls at each [`WriterStep`] (the first
/// installed stays; later calls are ignored). Crate-private: `crate::fault` is the only
/// installer, so no test can put a hook of its own first and leave kill points unarmed.
#[cfg(tickbus_testing)]
pub(crate) fn install(hook: fn(WriterStep)) {
    let _ = HOOK.set(hook);
}

/// Reports `step` to the installed hook, if any: one load and a branch in a test build.
#[inline(always)]
pub(crate) fn report(step: WriterStep) {
    #[cfg(tickbus_testing)]
    if let Some(hook) = HOOK.get() {
        hook(step);
    }
    #[cfg(not(tickbus_testing))]
    let _ = step;
}
