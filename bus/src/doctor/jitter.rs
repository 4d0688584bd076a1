//! Whether the cores a bus will busy-poll on are really its own: a thread pinned to each core
//! (all at once, as a publisher and a subscriber run) reads the clock in a tight loop, and every
//! gap between two reads is time something else ran there.
//!
//! A virtual machine's vCPU can be descheduled by its host for milliseconds while the guest's
//! own accounting shows the thread running, so isolation settings read from /sys cannot see
//! it. An open loop at 100k msg/s sends every 10 µs: one 5 ms gap puts 500 messages behind
//! their schedule, and the lab then reports its run as backlogged. This check says so before
//! the figures do.
use std::time::{Duration, Instant};

use super::{Finding, Status};

/// A gap between two clock reads longer than this is time the core was taken away (a read and
/// a loop turn take tens of ns; a page fault or an interrupt handled a few µs).
const GAP: Duration = Duration::from_micros(20);

/// A longest gap from this up is a warning: at 100k msg/s it delays ten messages.
const WARN_GAP: Duration = Duration::from_micros(100);

/// What one core lost while it was watched ([`watch_cores`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lost {
    /// Gaps between two clock reads over 20 µs (a read and a loop turn take tens of ns).
    pub gaps: u64,
    /// The longest gap.
    pub longest: Duration,
    /// All those gaps together.
    pub total: Duration,
    /// How long the core was watched.
    pub watched: Duration,
}

/// Spins on the clock for `window` and adds up the gaps between reads.
fn watch(window: Duration) -> Lost {
    let start = Instant::now();
    let mut prev = start;
    let mut lost = Lost::default();
    loop {
        let now = Instant::now();
        let gap = now - prev;
        prev = now;
        if gap > GAP {
            lost.gaps += 1;
            lost.total += gap;
            lost.longest = lost.longest.max(gap);
        }
        if now - start >= window {
            lost.watched = now - start;
            return lost;
        }
    }
}

/// Watches every core in `cores` at once for `window` (a thread pinned to each, spinning on the
/// clock; name a core once: two watchers on one core see each other's turns); per core, what it
/// lost, or why it could not be watched. Costs `window` of each core: before a hot loop starts.
pub fn watch_cores(cores: &[usize], window: Duration) -> Vec<(usize, Result<Lost, String>)> {
    std::thread::scope(|s| {
        let handles: Vec<_> = cores
            .iter()
            .map(|&c| {
                let h = s.spawn(move || {
                    crate::agent::pin_current_thread(c).map_err(|e| format!("pinning to core {c}: {e}"))?;
                    Ok(watch(window))
                });
                (c, h)
            })
            .collect();
        handles
            .into_iter()
            .map(|(c, h)| (c, h.join().unwrap_or_else(|_| Err("the watching thread panicked".into()))))
            .collect()
    })
}

/// The finding for one core.
pub(super) fn finding(core: usize, lost: &Result<Lost, String>) -> Finding {
    let check = format!("core {core} jitter");
    let l = match lost {
        Ok(l) => l,
        Err(e) => {
            return Finding::new(check, Status::Warn, format!("not measured: {e}"))
                .remedy("name cores this process may run on (see `taskset -p $$` and /sys/devices/system/cpu/online)")
        }
    };
    let share = l.total.as_secs_f64() / l.watched.as_secs_f64().max(1e-9);
    let detail = format!(
        "a thread spinning on it for {:.1} s was taken away {} times for over {} µs, the longest {:.0} µs, {:.2}% of the time in all",
        l.watched.as_secs_f64(),
        l.gaps,
        GAP.as_micros(),
        l.longest.as_secs_f64() * 1e6,
        share * 100.0
    );
    let f = Finding::new(check, if l.longest >= WARN_GAP { Status::Warn } else { Status::Ok }, detail)
        .fact("gaps", l.gaps)
        .fact("longest_ns", l.longest.as_nanos())
        .fact("lost_ns", l.total.as_nanos())
        .fact("watched_ns", l.watched.as_nanos());
    if f.status == Status::Ok {
        return f;
    }
    f.remedy(
        "whatever ran instead (a hypervisor descheduling the vCPU, when the guest's accounting shows nothing; else kernel \
         threads, timers or IRQs) delays every message due meanwhile, and open loops here fall behind their schedule: on a \
         VM ask for dedicated, pinned vCPUs; on bare metal isolate the core (isolcpus, nohz_full, rcu_nocbs) and move IRQs off it",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lost(gaps: u64, longest_us: u64, total_us: u64) -> Lost {
        Lost {
            gaps,
            longest: Duration::from_micros(longest_us),
            total: Duration::from_micros(total_us),
            watched: Duration::from_secs(1),
        }
    }

    #[test]
    fn a_core_taken_away_for_100_us_or_more_is_a_warning_that_says_how_much() {
        let f = finding(0, &Ok(lost(3, 2_000, 3_000)));
        assert_eq!((f.status, f.check.as_str()), (Status::Warn, "core 0 jitter"));
        assert!(
            f.detail.contains("taken away 3 times")
                && f.detail.contains("the longest 2000 µs")
                && f.detail.contains("0.30%"),
            "{}",
            f.detail
        );
        assert!(f.remedy.is_some() && f.facts["longest_ns"] == "2000000");
        assert_eq!(finding(1, &Ok(lost(1, 99, 99))).status, Status::Ok);
        assert_eq!(finding(1, &Ok(lost(1, 100, 100))).status, Status::Warn);
        let e = finding(2, &Err("pinning to core 2: no such core".into()));
        assert!(e.status == Status::Warn && e.detail.contains("no such core") && e.remedy.is_some(), "{e:?}");
    }
}
