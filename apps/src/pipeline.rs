//! Plumbing the trading apps (`trader`, `gateway`, `exchange`) share: stopping on Ctrl-C /
//! SIGTERM, the idle strategy, and checking on a peer when idle (their streams: `streams.rs`).
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tickbus::agent::IdleStrategy;
use tickbus::time::Tsc;

/// The one stop flag of every command, set by Ctrl-C or SIGTERM (one handler per process).
pub fn stop_flag() -> Result<Arc<AtomicBool>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Release)).map_err(|e| e.to_string())?;
    Ok(stop)
}

/// Busy-polls (a message after a quiet spell is taken at once), backing off only after a long
/// idle spell so an idle app does not burn a core for ever.
pub const IDLE: IdleStrategy = IdleStrategy::Backoff {
    spins: 1_000_000,
    yields: 1000,
    min_park: Duration::from_micros(20),
    max_park: Duration::from_micros(200),
};

/// How an app waits in a duty cycle that found no work (`--idle`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// Busy-poll, backing off only after a long idle spell ([`IDLE`]): for an app with a core
    /// of its own.
    Spin,
    /// Yield the core after every cycle that found no work: for two busy apps sharing a core (a
    /// machine with fewer cores than busy loops). Each idle cycle is then a syscall, and a
    /// message may wait for the other app's cycle: latency pays for the sharing.
    Yield,
}

impl Idle {
    pub fn strategy(self) -> IdleStrategy {
        match self {
            Idle::Spin => IDLE,
            Idle::Yield => IdleStrategy::SpinThenYield { spins: 0 },
        }
    }
}

/// Slots of the reliable rings between the trader and the gateway (orders one way, reports the
/// other).
pub const RING_SLOTS: usize = 4096;

/// What became of a peer's publisher since the last look: the library's own answer.
pub use tickbus::stream::PeerState as Peer;

/// Paces what an app does only while idle (looking at its peers: syscalls): at most once per
/// `every`, asked only after a duty cycle without work, and timed by the TSC, so a loop with
/// work never reads a clock through the kernel. The TSC itself is read only every
/// [`IDLE_CLOCK_EVERY`]th idle cycle: a read is a large part of an idle cycle on a VM, and the
/// shorter the idle cycle, the sooner the next message is seen.
pub struct IdleChecks {
    tsc: Tsc,
    every: u64,
    last: u64,
    /// Idle cycles since the clock was last read.
    idle: u32,
}

/// Idle cycles per clock read in [`IdleChecks::due`]: a check comes at most this many idle
/// cycles less one late (with [`IDLE`], 15 parks of at most 200 us once an app backs off).
pub const IDLE_CLOCK_EVERY: u32 = 16;

impl IdleChecks {
    pub fn new(every: Duration) -> IdleChecks {
        let tsc = Tsc::new();
        let every = (every.as_nanos() as f64 * tickbus::time::ticks_per_ns()) as u64;
        IdleChecks { last: tsc.now(), tsc, every, idle: 0 }
    }

    /// Whether a check is due now (call it after a duty cycle that found no work).
    #[inline]
    pub fn due(&mut self) -> bool {
        self.idle += 1;
        if self.idle < IDLE_CLOCK_EVERY {
            return false;
        }
        self.idle = 0;
        let now = self.tsc.now();
        if now.wrapping_sub(self.last) < self.every {
            return false;
        }
        self.last = now;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clock is read only every IDLE_CLOCK_EVERY idle cycles, and a check is due only once
    /// `every` has passed at such a read.
    #[test]
    fn idle_checks_read_the_clock_every_nth_idle_cycle_and_pace_by_time() {
        let mut now = IdleChecks::new(Duration::ZERO);
        let due: Vec<bool> = (0..2 * IDLE_CLOCK_EVERY).map(|_| now.due()).collect();
        let at = |k: u32| (k + 1).is_multiple_of(IDLE_CLOCK_EVERY);
        assert_eq!(due, (0..2 * IDLE_CLOCK_EVERY).map(at).collect::<Vec<_>>());
        let mut hourly = IdleChecks::new(Duration::from_secs(3600));
        assert!((0..10 * IDLE_CLOCK_EVERY).all(|_| !hourly.due()), "not before an hour");
    }
}
