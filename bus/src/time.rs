//! Raw TSC timestamps and their one shared conversion to nanoseconds.
//!
//! Every message header carries the publisher's raw TSC (RDTSC on x86_64, `quanta::Clock::raw`
//! elsewhere; no syscall). Across cores it is one clock on CPUs with an invariant TSC, which
//! trading hosts have.
//! Deltas are converted with the ticks-per-ns that the ring's creator measured and stored in the
//! ring header, so every process converts the same way: quanta's own `Instant`s are calibrated
//! per process and are not comparable across processes.
use std::time::{Duration, Instant};

use crate::ring::{Mode, RingConfig};

/// A raw TSC source.
#[derive(Clone)]
pub struct Tsc {
    /// Only where RDTSC is not read directly (quanta calibrates at creation: no work for x86_64).
    #[cfg(not(target_arch = "x86_64"))]
    clock: quanta::Clock,
}

impl Tsc {
    /// A reader of this core's TSC.
    pub fn new() -> Tsc {
        Tsc {
            #[cfg(not(target_arch = "x86_64"))]
            clock: quanta::Clock::new(),
        }
    }

    /// The raw counter now: RDTSC on x86_64 (~10 ns, never a syscall), `quanta::Clock::raw`
    /// elsewhere.
    ///
    /// Why not quanta on x86_64 too: on a CPU that does not advertise an invariant TSC, quanta
    /// falls back to the OS monotonic clock. Under QEMU TCG (the Soft-RoCE guest) that is a
    /// syscall reading an emulated HPET, measured at ~1.8 us a call, which would swamp the
    /// figures the lab compares with perftest (itself on RDTSC). Where quanta uses the TSC it
    /// reads exactly this counter.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: RDTSC exists on every x86_64 CPU; it reads a counter and touches no memory.
            unsafe { core::arch::x86_64::_rdtsc() }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self.clock.raw()
        }
    }

    /// Measures ticks per nanosecond against the OS monotonic clock over `span` (set-up only).
    pub fn measure_ticks_per_ns(&self, span: Duration) -> f64 {
        let (r0, i0) = (self.now(), Instant::now());
        std::thread::sleep(span);
        let (r1, i1) = (self.now(), Instant::now());
        (r1.wrapping_sub(r0)) as f64 / (i1 - i0).as_nanos().max(1) as f64
    }
}

impl Default for Tsc {
    fn default() -> Self {
        Tsc::new()
    }
}

/// This process's TSC ticks per nanosecond, measured once (20 ms against the OS monotonic clock,
/// on first use) and cached: what a ring creator stores in the ring header, and what bounds a
/// wait read in TSC ticks. Set-up only: the first call sleeps.
pub fn ticks_per_ns() -> f64 {
    static CAL: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *CAL.get_or_init(|| Tsc::new().measure_ticks_per_ns(Duration::from_millis(20)).max(1e-3))
}

/// The ring's convenience constructor lives with the clock, so the ring protocol itself imports
/// nothing above it (it takes the TSC rate as a value: [`RingConfig::with_clock`]).
impl RingConfig {
    /// A ring whose slots hold payloads up to `max_payload` bytes (rounded to whole 64-byte
    /// lines), stamped with this process's TSC calibration ([`ticks_per_ns`]; the first call
    /// measures it, 20 ms, set-up only).
    pub fn for_payload(mode: Mode, stream_id: u32, max_payload: usize, slot_count: usize) -> RingConfig {
        RingConfig::with_clock(mode, stream_id, max_payload, slot_count, ticks_per_ns())
    }
}

/// Converts TSC deltas to nanoseconds with one fixed calibration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TscScale {
    /// Ticks per nanosecond.
    pub ticks_per_ns: f64,
}

impl TscScale {
    /// Ticks as nanoseconds.
    #[inline(always)]
    pub fn to_ns(&self, ticks: u64) -> f64 {
        ticks as f64 / self.ticks_per_ns
    }

    /// Nanoseconds from `start` to `end`, 0 if `end` is earlier (a clock that stepped back).
    #[inline(always)]
    pub fn delta_ns(&self, start: u64, end: u64) -> u64 {
        self.to_ns(end.saturating_sub(start)) as u64
    }
}

/// Nanoseconds from TSC ticks by a multiply and a shift, for a path where the conversion sits
/// between a timestamp and what it times: a publisher that writes "how long after the ingress
/// my publish began" into the header it is about to publish reads the TSC, converts, and only
/// then publishes, so the conversion is inside the hop it stamps. [`TscScale::delta_ns`]'s
/// float conversion and division take about 25 cycles there (instruction latencies, not
/// measured here); this takes about 4. Never above the float figure, and under it by at most a
/// nanosecond for spans under about 3.5 s (the multiplier's fixed-point rounding; beyond that,
/// about 3e-10 of the span).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastNs {
    /// Nanoseconds per tick, times 2^32.
    mul: u64,
}

impl FastNs {
    /// The conversion at `scale`'s calibration.
    pub fn new(scale: TscScale) -> FastNs {
        let mul = if scale.ticks_per_ns > 0.0 { ((1u64 << 32) as f64 / scale.ticks_per_ns).floor() } else { 0.0 };
        // Floored, so a lag is never longer than its float figure (a hop timed from ingress +
        // lag errs long). A float past u64 saturates in `as`: a scale so small is no clock, and
        // a scale of 0 or NaN (which a ring refuses) gives 0 ns.
        FastNs { mul: mul as u64 }
    }

    /// Nanoseconds from `start` to `end`, 0 if `end` is earlier (a clock that stepped back).
    #[inline(always)]
    pub fn delta_ns(&self, start: u64, end: u64) -> u64 {
        let ticks = end.saturating_sub(start);
        match ticks.checked_mul(self.mul) {
            Some(p) => p >> 32,
            // Over 2^64 / mul ticks (about 4 s at any clock rate): off the hot path by then.
            None => ((u128::from(ticks) * u128::from(self.mul)) >> 32).min(u128::from(u64::MAX)) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The multiply-and-shift agrees with the float conversion to within a ns, from a tick to
    /// hours, at a slow, this machine's and a fast TSC; a clock that stepped back is 0.
    #[test]
    fn the_fixed_point_conversion_agrees_with_the_float_one() {
        for ticks_per_ns in [0.9, 2.446, 3.7] {
            let (scale, fast) = (TscScale { ticks_per_ns }, FastNs::new(TscScale { ticks_per_ns }));
            let mut ticks = 1u64;
            while ticks < 40_000_000_000_000 {
                for t in [ticks, ticks + 7, ticks * 3 + 1] {
                    let (want, got) = (scale.delta_ns(1000, 1000 + t), fast.delta_ns(1000, 1000 + t));
                    assert!(
                        want.abs_diff(got) <= 1 + want / 1_000_000_000,
                        "{ticks_per_ns}: {t} ticks: {want} vs {got}"
                    );
                    // Never longer than the span it converts.
                    assert!(
                        got as f64 * ticks_per_ns <= t as f64 * (1.0 + 1e-12),
                        "{ticks_per_ns}: {t} ticks: {got} ns"
                    );
                }
                ticks *= 10;
            }
            assert_eq!(fast.delta_ns(10, 5), 0);
        }
    }

    #[test]
    fn measured_scale_converts_a_sleep_to_about_its_length() {
        let tsc = Tsc::new();
        let scale = TscScale { ticks_per_ns: tsc.measure_ticks_per_ns(Duration::from_millis(20)) };
        assert!(scale.ticks_per_ns > 0.01 && scale.ticks_per_ns < 100.0, "{scale:?}");
        let t0 = tsc.now();
        std::thread::sleep(Duration::from_millis(30));
        let ns = scale.delta_ns(t0, tsc.now());
        assert!((25_000_000..1_000_000_000).contains(&ns), "30 ms sleep measured as {ns} ns");
        assert_eq!(scale.delta_ns(10, 5), 0);
    }
}
