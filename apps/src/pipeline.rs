//! Plumbing the trading apps (`trader`, `gateway`) share: waiting for a peer's ring to appear,
//! stopping on Ctrl-C / SIGTERM, the idle strategy, and checking on a peer when idle.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickbus::agent::{IdleStrategy, Idler};
use tickbus::shm::{self, PublisherState, ShmOptions, ShmPublisher, ShmSubscriber};
use tickbus::time::Tsc;
use tickbus::RingConfig;
use tickbus::StartAt;

/// A flag set by Ctrl-C or SIGTERM.
pub fn stop_flag() -> Result<Arc<AtomicBool>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Release)).map_err(|e| e.to_string())?;
    Ok(stop)
}

/// Busy-polls (a message after a quiet spell is taken at once), backing off only after a long
/// idle spell so an idle app does not burn a core for ever.
pub fn idler() -> Idler {
    Idler::new(IdleStrategy::Backoff {
        spins: 1_000_000,
        yields: 1000,
        min_park: Duration::from_micros(20),
        max_park: Duration::from_micros(200),
    })
}

/// Which way to attach to a peer's ring.
pub enum Attach {
    /// A reliable consumer line (the publisher waits for us).
    Consumer,
    /// A lossy observer of live data: from the next message published (what a ring still
    /// holds from before, perhaps from an earlier run, is not today's news).
    Observer,
}

/// Attaches to ring `name`, waiting up to `wait` for its publisher to create it (the apps may
/// start in any order). Other errors are returned at once.
pub fn attach(name: &str, how: Attach, wait: Duration, stop: &AtomicBool) -> Result<ShmSubscriber, String> {
    let opts = ShmOptions::default();
    let deadline = Instant::now() + wait;
    loop {
        let r = match how {
            Attach::Consumer => shm::open_consumer(name, &opts),
            Attach::Observer => shm::open_observer(name, StartAt::Latest, &opts),
        };
        match r {
            Ok(s) => return Ok(s),
            Err(e) if e.is_retryable() => {
                if Instant::now() >= deadline || stop.load(Ordering::Acquire) {
                    return Err(format!(
                        "{e} (after waiting {wait:?}: start the app that publishes ring {name:?}, or free its consumer line)"
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(format!("attaching to ring {name:?}: {e}")),
        }
    }
}

/// Slots of the reliable rings between the trader and the gateway (orders one way, reports the
/// other).
pub const RING_SLOTS: usize = 4096;

/// Where one trading app sits: the market data it observes, the peer ring it consumes, how
/// long it waits for them to appear, and the core it pins its loop to.
pub struct Ends<'a> {
    pub app: &'static str,
    pub md: &'a str,
    pub peer: &'a str,
    pub wait_secs: f64,
    pub core: Option<usize>,
}

impl Ends<'_> {
    /// Opens (or creates) the app's own ring `own` as its publisher, then observes the market
    /// data and consumes the peer's ring (waiting for each to appear), pins the calling thread
    /// and says it is ready. Returns (own publisher, market data, peer ring).
    pub fn open(
        &self,
        (own, cfg): (&str, &RingConfig),
        stop: &AtomicBool,
    ) -> Result<(ShmPublisher, ShmSubscriber, ShmSubscriber), String> {
        let wait = Duration::from_secs_f64(self.wait_secs.max(0.0));
        let publisher = shm::open_publisher(own, cfg, &ShmOptions::default()).map_err(|e| e.to_string())?;
        let md = attach(self.md, Attach::Observer, wait, stop)?;
        let peer = attach(self.peer, Attach::Consumer, wait, stop)?;
        self.pin()?;
        eprintln!("{}: ready (md {:?}, publishing {own:?}, reading {:?})", self.app, self.md, self.peer);
        Ok((publisher, md, peer))
    }
}

impl Ends<'_> {
    /// Pins the calling thread to the app's core, if it has one.
    pub fn pin(&self) -> Result<(), String> {
        if let Some(core) = self.core {
            tickbus::agent::pin_current_thread(core).map_err(|e| format!("pinning to core {core}: {e}"))?;
        }
        Ok(())
    }
}

/// What became of a peer's publisher since the last look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    Live,
    /// It closed its ring cleanly (it finished).
    Closed,
    /// Its process ended without closing (killed or crashed).
    Died {
        pid: u64,
    },
}

/// Looks at a peer's publisher (a syscall: call it when idle, every few ms, not per message).
pub fn peer(s: &ShmSubscriber) -> Peer {
    match s.publisher_state() {
        PublisherState::Live { .. } => Peer::Live,
        PublisherState::Closed { .. } => Peer::Closed,
        PublisherState::Dead { pid, .. } => Peer::Died { pid },
    }
}

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
