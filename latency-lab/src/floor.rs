//! The floor: two threads bouncing a counter through two cache lines, the least any
//! shared-memory transport can cost for a round trip.
use std::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::harness::{ping_pong, Bench, Initiator, Outcome, Responder, RunSpec};

#[repr(align(128))]
struct Line(AtomicU64);

struct Lines {
    ping: Line,
    pong: Line,
}

pub struct Floor;

struct A(Arc<Lines>);
struct B(Arc<Lines>, u64);

impl Initiator for A {
    #[inline]
    fn ping(&mut self, i: u64) {
        self.0.ping.0.store(i + 1, Ordering::Release);
        while self.0.pong.0.load(Ordering::Acquire) != i + 1 {
            std::hint::spin_loop();
        }
    }
}

impl Responder for B {
    #[inline]
    fn pong(&mut self) {
        self.1 += 1;
        while self.0.ping.0.load(Ordering::Acquire) != self.1 {
            std::hint::spin_loop();
        }
        self.0.pong.0.store(self.1, Ordering::Release);
    }
}

impl Bench for Floor {
    fn name(&self) -> &str {
        "floor (cache-line ping-pong)"
    }
    fn run(&self, spec: &RunSpec) -> Result<Outcome, Box<dyn Error>> {
        let lines = Arc::new(Lines { ping: Line(AtomicU64::new(0)), pong: Line(AtomicU64::new(0)) });
        let rtt_ns = ping_pong(spec, A(lines.clone()), B(lines, 0))?;
        Ok(Outcome { name: self.name().into(), note: "u64 on two 128-byte lines".into(), rtt_ns })
    }
}
