//! The benchmark body every transport and peer runs: a closed-loop ping-pong between two threads
//! pinned to two cores. The initiator stamps the TSC, sends, waits for the echo, and records
//! the round trip; the responder echoes. Warm-up round trips are not recorded.
use std::error::Error;
use std::sync::{Arc, Barrier};

use hdrhistogram::Histogram;

/// What one run measures.
#[derive(Debug, Clone, Copy)]
pub struct RunSpec {
    pub size: usize,
    pub iterations: u64,
    pub warmup: u64,
    pub cores: (usize, usize),
    pub ticks_per_ns: f64,
}

/// RTT samples of one benchmark, in nanoseconds.
pub struct Outcome {
    pub name: String,
    pub note: String,
    pub rtt_ns: Histogram<u64>,
}

/// One transport or peer under test.
pub trait Bench {
    fn name(&self) -> &str;
    fn run(&self, spec: &RunSpec) -> Result<Outcome, Box<dyn Error>>;
}

/// The two halves of a ping-pong: `ping(i)` sends round trip `i` and returns when its echo
/// arrived; `pong()` echoes one message.
pub trait Initiator: Send {
    fn ping(&mut self, i: u64);
}
pub trait Responder: Send {
    fn pong(&mut self);
}

/// Runs `init` on core A and `resp` on core B for warm-up plus measured round trips.
pub fn ping_pong(
    spec: &RunSpec,
    mut init: impl Initiator + 'static,
    mut resp: impl Responder + 'static,
) -> Result<Histogram<u64>, Box<dyn Error>> {
    let total = spec.warmup + spec.iterations;
    let ready = Arc::new(Barrier::new(2));
    let ready_b = ready.clone();
    let core_b = spec.cores.1;
    let responder = std::thread::Builder::new().name("pong".into()).spawn(move || -> std::io::Result<()> {
        tickbus::agent::pin_current_thread(core_b)?;
        ready_b.wait();
        for _ in 0..total {
            resp.pong();
        }
        Ok(())
    })?;
    let (core_a, spec) = (spec.cores.0, *spec);
    let initiator =
        std::thread::Builder::new().name("ping".into()).spawn(move || -> std::io::Result<Histogram<u64>> {
            tickbus::agent::pin_current_thread(core_a)?;
            let tsc = tickbus::time::Tsc::new();
            let scale = tickbus::time::TscScale { ticks_per_ns: spec.ticks_per_ns };
            let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
            ready.wait();
            for i in 0..spec.warmup {
                init.ping(i);
            }
            for i in spec.warmup..total {
                let t0 = tsc.now();
                init.ping(i);
                let t1 = tsc.now();
                h.saturating_record(scale.delta_ns(t0, t1).max(1));
            }
            Ok(h)
        })?;
    let h = initiator.join().map_err(|_| "initiator panicked")??;
    responder.join().map_err(|_| "responder panicked")??;
    Ok(h)
}
