//! Runs an agent on its own thread, pinned to a core, until stopped.
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::idle::{IdleStrategy, Idler};
use super::Agent;
use crate::sys::cpu::isolated_cpus;
use crate::time::Tsc;

/// Where a thread got pinned and whether the kernel keeps other work off that core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pinning {
    /// The core the thread runs on.
    pub core: usize,
    /// Listed in /sys/devices/system/cpu/isolated. If false, the scheduler may put other
    /// threads on the core and latency tails will show it.
    pub isolated: bool,
}

/// Pins the calling thread to `core`. Errors if the core does not exist or pinning failed.
pub fn pin_current_thread(core: usize) -> io::Result<Pinning> {
    // Tried directly rather than looked up in this thread's current mask: a thread spawned by
    // a pinned thread inherits its one core but may still move to any core the process has.
    if core >= 1024 || !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("core {core} is not available to this process")));
    }
    Ok(Pinning { core, isolated: isolated_cpus().contains(&core) })
}

/// Runs `f` with the calling thread pinned to `core`, then gives the thread back the cores it
/// could run on before. For set-up that touches memory a pinned loop will use: its pages are
/// first touched on that core (and so placed on its NUMA node, on a machine with several), and
/// their page faults take no time slice from the app that owns another core, while the threads
/// the rest of the set-up starts (an acceptor, a recovery helper) do not inherit that one core.
/// `f` itself should start none: they would. A mask that cannot be given back is an error (the
/// thread would stay on one core); if `f` panics, the mask is given back as it unwinds.
pub fn on_core<R>(core: usize, f: impl FnOnce() -> R) -> io::Result<R> {
    /// Gives the mask back if `f` unwinds; on the normal path it is given back, and its error
    /// returned, below.
    struct OnUnwind(Option<crate::sys::cpu::Affinity>);
    impl Drop for OnUnwind {
        fn drop(&mut self) {
            if let Some(Err(e)) = self.0.as_ref().map(crate::sys::cpu::set_affinity) {
                log::warn!("a set-up pinned to one core panicked and its thread's cores could not be given back: {e}");
            }
        }
    }
    let before = crate::sys::cpu::affinity()
        .map_err(|e| io::Error::new(e.kind(), format!("reading this thread's cores before pinning it: {e}")))?;
    let mut guard = OnUnwind(Some(before));
    pin_current_thread(core)?;
    let r = f();
    let before = guard.0.take().expect("taken only here");
    crate::sys::cpu::set_affinity(&before).map_err(|e| {
        io::Error::new(e.kind(), format!("giving the thread its cores back after its set-up on core {core}: {e}"))
    })?;
    Ok(r)
}

/// A running agent thread. Dropping it stops the agent and waits for its thread, so a runner
/// never leaks a pinned, spinning thread.
pub struct AgentRunner {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    pinning: Option<Pinning>,
}

/// An agent's thread panicked; the runner stopped with it.
#[derive(Debug, thiserror::Error)]
#[error("agent {agent} panicked: {message}")]
#[non_exhaustive]
pub struct AgentPanicked {
    /// The agent's name.
    pub agent: String,
    /// The panic's message.
    pub message: String,
}

impl AgentRunner {
    /// Starts `agent` on a new thread named after it, pinned to `core` if given.
    pub fn start(mut agent: impl Agent + 'static, idle: IdleStrategy, core: Option<usize>) -> io::Result<AgentRunner> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new().name(agent.name().to_owned()).spawn(move || {
            let pinned = core.map(pin_current_thread).transpose();
            let ok = pinned.is_ok();
            let _ = tx.send(pinned);
            if ok {
                run_until(&mut agent, idle, &flag);
            }
        })?;
        let pinning = rx.recv().map_err(|_| io::Error::other("agent thread died before starting"))??;
        if let Some(p) = pinning.filter(|p| !p.isolated) {
            log::warn!("core {} is not isolated (isolcpus); expect scheduler noise in latency tails", p.core);
        }
        Ok(AgentRunner { stop, handle: Some(handle), pinning })
    }

    /// Where the agent's thread was pinned (None when not asked to pin).
    pub fn pinning(&self) -> Option<Pinning> {
        self.pinning
    }

    /// Stops the agent after its current duty cycle and waits for its thread. If the agent
    /// panicked, says so (with the panic's message) instead of swallowing it.
    pub fn stop(mut self) -> Result<(), AgentPanicked> {
        self.halt()
    }

    /// Whether the agent's thread is still running (false once it panicked).
    pub fn is_running(&self) -> bool {
        self.handle.as_ref().is_some_and(|h| !h.is_finished())
    }

    fn halt(&mut self) -> Result<(), AgentPanicked> {
        let Some(handle) = self.handle.take() else { return Ok(()) };
        self.stop.store(true, Ordering::Release);
        handle.thread().unpark();
        let agent = handle.thread().name().unwrap_or("agent").to_owned();
        handle.join().map_err(|p| AgentPanicked {
            agent,
            message: p
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(not a string)".into()),
        })
    }
}

impl Drop for AgentRunner {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

/// Runs `agent`'s duty cycle on the calling thread until `stop` is set.
pub fn run_until(agent: &mut dyn Agent, idle: IdleStrategy, stop: &AtomicBool) {
    let tsc = Tsc::new();
    let mut idler = Idler::new(idle);
    agent.on_start();
    let clock = agent.uses_clock();
    while !stop.load(Ordering::Relaxed) {
        let work = agent.do_work(if clock { tsc.now() } else { 0 });
        idler.idle(work);
    }
    agent.on_close();
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Spin(Arc<AtomicBool>);
    impl Agent for Spin {
        fn name(&self) -> &str {
            "spin"
        }
        fn do_work(&mut self, _now: u64) -> usize {
            1
        }
        fn on_close(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }

    struct Boom;
    impl Agent for Boom {
        fn name(&self) -> &str {
            "boom"
        }
        fn do_work(&mut self, _now: u64) -> usize {
            panic!("order book corrupt")
        }
    }

    #[test]
    fn a_dropped_runner_stops_its_thread_and_a_panic_is_reported_not_swallowed() {
        let closed = Arc::new(AtomicBool::new(false));
        let runner = AgentRunner::start(Spin(closed.clone()), IdleStrategy::BusySpin, None).unwrap();
        assert!(runner.is_running());
        drop(runner);
        assert!(closed.load(Ordering::Acquire), "dropping the runner left its thread spinning");
        let runner = AgentRunner::start(Boom, IdleStrategy::BusySpin, None).unwrap();
        while runner.is_running() {
            std::thread::yield_now();
        }
        let err = runner.stop().unwrap_err();
        assert_eq!((err.agent.as_str(), err.message.as_str()), ("boom", "order book corrupt"));
    }

    fn allowed() -> Vec<usize> {
        crate::sys::cpu::affinity().unwrap().cores()
    }

    #[test]
    fn on_core_pins_for_the_set_up_only_and_a_thread_started_after_is_not_pinned() {
        std::thread::spawn(|| {
            let before = allowed();
            assert!(before.len() >= 2, "this test needs two cores to tell pinned from not; it may run on {before:?}");
            let core = *before.last().unwrap();
            assert_eq!(on_core(core, allowed).unwrap(), [core], "inside, the set-up runs on its core alone");
            assert_eq!(allowed(), before, "after, the thread has its cores back");
            assert_eq!(std::thread::spawn(allowed).join().unwrap(), before, "a thread started after inherits them all");
            let panicked = std::panic::catch_unwind(|| on_core(core, || panic!("set-up failed")));
            assert!(panicked.is_err());
            assert_eq!(allowed(), before, "a set-up that panicked gave the cores back too");
            let err = on_core(4096, || unreachable!("a missing core runs nothing")).unwrap_err();
            assert!(err.to_string().contains("4096"), "{err}");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn pinning_to_an_existing_core_works_and_a_missing_core_is_an_error() {
        let p = std::thread::spawn(|| pin_current_thread(0)).join().unwrap().unwrap();
        assert_eq!(p.core, 0);
        let err = std::thread::spawn(|| pin_current_thread(4096)).join().unwrap().unwrap_err();
        assert!(err.to_string().contains("4096"));
    }
}
