//! Threads as agents: a `do_work(now) -> work_count` duty cycle, an idle strategy, a core.
//!
//! Owns: the loop that drives agents, pinning, and idling. Never: decides what an agent does.
//! Several agents can share one thread ([`Composite`]): with two cores, a publisher, a
//! subscriber and a recorder cannot each own a core.
mod idle;
#[cfg(not(loom))]
pub mod lifecycle;
mod poll_period;
mod runner;

pub use idle::{IdleAction, IdleStrategy, Idler};
pub use poll_period::PollPeriod;
pub use runner::{on_core, pin_current_thread, run_until, AgentPanicked, AgentRunner, Pinning};

/// A unit of work polled by a runner.
pub trait Agent: Send {
    /// A short name for thread names and reports.
    fn name(&self) -> &str;
    /// Does whatever is ready and returns how much (0 = idle). `now` is the raw TSC at the start
    /// of this duty cycle, so agents read no clock themselves (0 for an agent whose
    /// [`Agent::uses_clock`] is false).
    fn do_work(&mut self, now: u64) -> usize;
    /// Whether `do_work` reads `now`. An agent that does not says so: its runner then passes 0
    /// and reads no clock, one TSC read less per duty cycle (a large part of an idle cycle in a
    /// profile on a VM, and so of how long a message waits to be seen). Asked once, at the start.
    fn uses_clock(&self) -> bool {
        true
    }
    /// Called once on the agent's thread before the first duty cycle.
    fn on_start(&mut self) {}
    /// Called once on the agent's thread after the last duty cycle.
    fn on_close(&mut self) {}
}

/// Several agents on one thread, polled in order each duty cycle.
pub struct Composite {
    name: String,
    agents: Vec<Box<dyn Agent>>,
}

impl Composite {
    /// One agent that runs `agents` in order each duty cycle, named after them all (`a+b`).
    pub fn new(agents: Vec<Box<dyn Agent>>) -> Composite {
        let name = agents.iter().map(|a| a.name()).collect::<Vec<_>>().join("+");
        Composite { name, agents }
    }
}

impl Agent for Composite {
    fn name(&self) -> &str {
        &self.name
    }
    fn do_work(&mut self, now: u64) -> usize {
        self.agents.iter_mut().map(|a| a.do_work(now)).sum()
    }
    fn uses_clock(&self) -> bool {
        self.agents.iter().any(|a| a.uses_clock())
    }
    fn on_start(&mut self) {
        self.agents.iter_mut().for_each(|a| a.on_start());
    }
    fn on_close(&mut self) {
        self.agents.iter_mut().for_each(|a| a.on_close());
    }
}

/// Two agents on one thread, polled in order each duty cycle and statically dispatched: the
/// hot-path form of [`Composite`] (no box, no virtual call between them), and the two come back
/// whole after the run ([`Pair::into_parts`]) so their owner can read what they counted.
#[derive(Debug)]
pub struct Pair<A, B> {
    first: A,
    second: B,
    name: String,
}

impl<A: Agent, B: Agent> Pair<A, B> {
    /// `first` then `second` each duty cycle, named `first+second`.
    pub fn new(first: A, second: B) -> Pair<A, B> {
        let name = format!("{}+{}", first.name(), second.name());
        Pair { first, second, name }
    }

    /// The agent polled first.
    pub fn first(&self) -> &A {
        &self.first
    }

    /// The agent polled first, to drive or adjust between runs.
    pub fn first_mut(&mut self) -> &mut A {
        &mut self.first
    }

    /// The agent polled second.
    pub fn second(&self) -> &B {
        &self.second
    }

    /// The agent polled second, to drive or adjust between runs.
    pub fn second_mut(&mut self) -> &mut B {
        &mut self.second
    }

    /// Both agents back.
    pub fn into_parts(self) -> (A, B) {
        (self.first, self.second)
    }
}

impl<A: Agent, B: Agent> Agent for Pair<A, B> {
    fn name(&self) -> &str {
        &self.name
    }
    #[inline]
    fn do_work(&mut self, now: u64) -> usize {
        self.first.do_work(now) + self.second.do_work(now)
    }
    fn uses_clock(&self) -> bool {
        self.first.uses_clock() || self.second.uses_clock()
    }
    fn on_start(&mut self) {
        self.first.on_start();
        self.second.on_start();
    }
    fn on_close(&mut self) {
        self.first.on_close();
        self.second.on_close();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    /// Counts duty cycles; does `work_every`-th cycle's work.
    struct Counter {
        name: &'static str,
        cycles: Arc<AtomicUsize>,
        closed: Arc<AtomicUsize>,
    }

    impl Agent for Counter {
        fn name(&self) -> &str {
            self.name
        }
        fn do_work(&mut self, _now: u64) -> usize {
            self.cycles.fetch_add(1, Ordering::Relaxed);
            1
        }
        fn on_close(&mut self) {
            self.closed.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn composite_runs_every_agent_on_one_runner_thread_and_closes_them() {
        let (a, b, closed) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let agents: Vec<Box<dyn Agent>> = vec![
            Box::new(Counter { name: "a", cycles: a.clone(), closed: closed.clone() }),
            Box::new(Counter { name: "b", cycles: b.clone(), closed: closed.clone() }),
        ];
        let composite = Composite::new(agents);
        assert_eq!(composite.name(), "a+b");
        let runner = AgentRunner::start(composite, IdleStrategy::BusySpin, None).unwrap();
        while b.load(Ordering::Relaxed) < 1000 {
            std::thread::yield_now();
        }
        runner.stop().unwrap();
        assert!(a.load(Ordering::Relaxed) >= 1000);
        assert_eq!(closed.load(Ordering::Relaxed), 2);
    }

    /// Records the `now` of its first three cycles, then stops its runner.
    struct Clocked {
        uses: bool,
        seen: Vec<u64>,
        stop: Arc<std::sync::atomic::AtomicBool>,
    }

    impl Agent for Clocked {
        fn name(&self) -> &str {
            "clocked"
        }
        fn do_work(&mut self, now: u64) -> usize {
            self.seen.push(now);
            if self.seen.len() == 3 {
                self.stop.store(true, Ordering::Relaxed);
            }
            1
        }
        fn uses_clock(&self) -> bool {
            self.uses
        }
    }

    #[test]
    fn an_agent_that_reads_no_clock_is_given_none_and_a_pair_with_one_that_does_gets_it() {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let clocked = |uses| Clocked { uses, seen: Vec::new(), stop: stop.clone() };
        let mut without = clocked(false);
        run_until(&mut without, IdleStrategy::BusySpin, &stop);
        assert_eq!(without.seen, [0, 0, 0], "no clock read for an agent that reads none");
        stop.store(false, Ordering::Relaxed);
        let mut with = clocked(true);
        run_until(&mut with, IdleStrategy::BusySpin, &stop);
        assert!(with.seen[0] > 0 && with.seen.windows(2).all(|w| w[0] <= w[1]), "{:?}", with.seen);
        let pair = Pair::new(clocked(false), clocked(true));
        assert!(pair.uses_clock(), "a pair reads the clock if either of its agents does");
        assert!(!Pair::new(clocked(false), clocked(false)).uses_clock());
        let agents: Vec<Box<dyn Agent>> = vec![Box::new(clocked(false)), Box::new(clocked(true))];
        assert!(Composite::new(agents).uses_clock());
        let agents: Vec<Box<dyn Agent>> = vec![Box::new(clocked(false)), Box::new(clocked(false))];
        assert!(!Composite::new(agents).uses_clock(), "none of its agents reads it");
    }

    #[test]
    fn a_pair_polls_first_then_second_each_cycle_and_gives_both_back() {
        let (a, b, closed) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let mut pair = Pair::new(
            Counter { name: "a", cycles: a.clone(), closed: closed.clone() },
            Counter { name: "b", cycles: b.clone(), closed: closed.clone() },
        );
        assert_eq!(pair.name(), "a+b");
        let stop = std::sync::atomic::AtomicBool::new(false);
        pair.on_start();
        for _ in 0..3 {
            assert_eq!(pair.do_work(0), 2, "one unit of work from each");
        }
        assert_eq!((a.load(Ordering::Relaxed), b.load(Ordering::Relaxed)), (3, 3));
        stop.store(true, Ordering::Relaxed);
        run_until(&mut pair, IdleStrategy::BusySpin, &stop);
        assert_eq!(closed.load(Ordering::Relaxed), 2, "run_until closed both");
        let (first, second) = pair.into_parts();
        assert_eq!((first.name, second.name), ("a", "b"));
    }
}
