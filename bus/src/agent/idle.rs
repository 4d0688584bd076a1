//! What a runner does when its agents found no work. Idling may make syscalls (yield, park);
//! busy-spin never does, so a busy-spinning agent's hot loop stays syscall-free.
use std::time::Duration;

/// How to wait between duty cycles that did no work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleStrategy {
    /// Poll again at once, without even a CPU pause: for an agent that waits on its own clock
    /// (a paced publisher checking a due time), where a pause (tens of ns; under a hypervisor
    /// with pause-loop exiting, a VM exit) lands on every due time it checks. Burns the core and
    /// starves a hyper-thread sibling: keep it to cores of their own.
    NoOp,
    /// Spin with a CPU pause: lowest latency, burns the core.
    BusySpin,
    /// Spin `spins` times, then yield the core each idle cycle.
    SpinThenYield {
        /// Idle cycles spent spinning before yielding.
        spins: u32,
    },
    /// Spin, then yield, then park with exponential backoff from `min_park` to `max_park`.
    Backoff {
        /// Idle cycles spent spinning.
        spins: u32,
        /// Idle cycles spent yielding after the spins.
        yields: u32,
        /// The first park's length.
        min_park: Duration,
        /// The longest park (each doubles up to it).
        max_park: Duration,
    },
}

/// What one idle step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleAction {
    /// Work was done: nothing to wait for.
    None,
    /// Spun with a CPU pause.
    Spin,
    /// Yielded the core.
    Yield,
    /// Parked the thread this long.
    Park(Duration),
}

/// The state machine behind an [`IdleStrategy`]: resets whenever work is done.
#[derive(Debug, Clone)]
pub struct Idler {
    strategy: IdleStrategy,
    idle_cycles: u64,
    park: Duration,
}

impl Idler {
    /// A fresh idler for `strategy` (no idle cycles yet).
    pub fn new(strategy: IdleStrategy) -> Idler {
        Idler { strategy, idle_cycles: 0, park: Duration::ZERO }
    }

    /// Decides the next step after a duty cycle that did `work` (no side effects).
    pub fn next(&mut self, work: usize) -> IdleAction {
        if work > 0 {
            self.idle_cycles = 0;
            self.park = Duration::ZERO;
            return IdleAction::None;
        }
        self.idle_cycles += 1;
        let n = self.idle_cycles;
        match self.strategy {
            IdleStrategy::NoOp => IdleAction::None,
            IdleStrategy::BusySpin => IdleAction::Spin,
            IdleStrategy::SpinThenYield { spins } if n <= u64::from(spins) => IdleAction::Spin,
            IdleStrategy::SpinThenYield { .. } => IdleAction::Yield,
            IdleStrategy::Backoff { spins, .. } if n <= u64::from(spins) => IdleAction::Spin,
            IdleStrategy::Backoff { spins, yields, .. } if n <= u64::from(spins) + u64::from(yields) => {
                IdleAction::Yield
            }
            IdleStrategy::Backoff { min_park, max_park, .. } => {
                self.park = if self.park.is_zero() { min_park } else { (self.park * 2).min(max_park) };
                IdleAction::Park(self.park)
            }
        }
    }

    /// Decides and performs the next step.
    #[inline]
    pub fn idle(&mut self, work: usize) {
        match self.next(work) {
            IdleAction::None => {}
            IdleAction::Spin => core::hint::spin_loop(),
            IdleAction::Yield => std::thread::yield_now(),
            IdleAction::Park(d) => std::thread::park_timeout(d),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_spins_then_yields_then_parks_exponentially_and_resets_on_work() {
        let us = Duration::from_micros;
        let mut i = Idler::new(IdleStrategy::Backoff { spins: 2, yields: 1, min_park: us(1), max_park: us(4) });
        let steps: Vec<_> = (0..7).map(|_| i.next(0)).collect();
        use IdleAction::*;
        assert_eq!(steps, [Spin, Spin, Yield, Park(us(1)), Park(us(2)), Park(us(4)), Park(us(4))]);
        assert_eq!(i.next(3), None);
        assert_eq!(i.next(0), Spin);
    }

    #[test]
    fn no_op_never_waits_at_all() {
        let mut n = Idler::new(IdleStrategy::NoOp);
        assert!((0..1000).all(|_| n.next(0) == IdleAction::None));
    }

    #[test]
    fn busy_spin_never_yields_and_spin_then_yield_does() {
        let mut b = Idler::new(IdleStrategy::BusySpin);
        assert!((0..1000).all(|_| b.next(0) == IdleAction::Spin));
        let mut s = Idler::new(IdleStrategy::SpinThenYield { spins: 3 });
        let steps: Vec<_> = (0..5).map(|_| s.next(0)).collect();
        assert_eq!(steps[2..], [IdleAction::Spin, IdleAction::Yield, IdleAction::Yield]);
    }
}
