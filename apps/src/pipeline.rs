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
/// work never reads a clock through the kernel.
pub struct IdleChecks {
    tsc: Tsc,
    every: u64,
    last: u64,
}

impl IdleChecks {
    pub fn new(every: Duration) -> IdleChecks {
        let tsc = Tsc::new();
        let every = (every.as_nanos() as f64 * tickbus::time::ticks_per_ns()) as u64;
        IdleChecks { last: tsc.now(), tsc, every }
    }

    /// Whether a check is due now (call it after a duty cycle that found no work).
    pub fn due(&mut self) -> bool {
        let now = self.tsc.now();
        if now.wrapping_sub(self.last) < self.every {
            return false;
        }
        self.last = now;
        true
    }
}
