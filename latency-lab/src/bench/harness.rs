//! The benchmark bodies, run unchanged against every transport: closed-loop ping-pong (RTT),
//! open-loop at a fixed rate (one-way latency from the *intended* send time, so a stall delays
//! every later message's figure instead of hiding it: no coordinated omission), and throughput
//! (the publisher sends flat out and is never slowed by measurement; the receiver counts).
//!
//! Threads are pinned to the two cores given; warm-up messages are not recorded.
use std::error::Error;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::{Arc, Barrier};

use hdrhistogram::Histogram;
use tickbus::time::{Tsc, TscScale};

use crate::bench::transport::{CrossProcess, InProcess, Rx, Tx};

/// What one run measures.
#[derive(Debug, Clone, Copy)]
pub struct RunSpec {
    pub size: usize,
    pub iterations: u64,
    pub warmup: u64,
    pub cores: (usize, usize),
    pub ticks_per_ns: f64,
}

pub fn histogram() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
}

/// Where the two threads of a run meet after set-up. If either side failed to set up, both
/// return an error, instead of one spinning forever waiting for the other.
#[derive(Clone)]
pub struct Start(Arc<(Barrier, std::sync::Mutex<Option<String>>)>);

impl Start {
    pub fn new() -> Start {
        Start(Arc::new((Barrier::new(2), std::sync::Mutex::new(None))))
    }

    /// Waits for the other side; fails on both sides, naming the cause, if either set-up failed.
    pub fn go(&self, setup: Result<(), String>) -> std::io::Result<()> {
        let failed = |m: &std::sync::Mutex<Option<String>>| m.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Err(e) = &setup {
            self.0 .1.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(|| e.clone());
        }
        self.0 .0.wait();
        self.0 .0.wait();
        match failed(&self.0 .1) {
            Some(e) => Err(std::io::Error::other(e)),
            None => Ok(()),
        }
    }
}

/// Spins until the TSC reaches `due` (an open-loop message's intended send time); returns
/// the first reading at or past it.
#[inline(always)]
pub fn spin_until(tsc: &Tsc, due: u64) -> u64 {
    let mut now = tsc.now();
    while now < due {
        std::hint::spin_loop();
        now = tsc.now();
    }
    now
}

/// TSC reads that hold the work between them, for per-message costs: each is LFENCE, RDTSC,
/// LFENCE, so a read waits for every earlier instruction to finish (loads included) and no
/// later one begins before it. (On Intel LFENCE always does so; on AMD only once the kernel has
/// set it to, which Linux asks for since the Spectre mitigations, and which a hypervisor may
/// not let a guest do: there the figures are less fenced than the report says. RDTSCP would do
/// for the end, but some virtual CPU models lack it.) Why: a plain RDTSC waits
/// for nothing, so the end stamp of a short piece of work is taken as soon as the core has
/// issued its instructions, and the cache misses it waits on land in a later message's figure
/// or in none. Timed that way, the book's floor showed a p99 of 23-37 ns on partial cancels,
/// whose order slots were often cold (843-943 ns fenced): that was not the floor's work. The
/// book, with more instructions behind its misses, likely filled the core's window and paid for
/// them where the floor did not.
pub mod fenced {
    /// Whether [`now`] fences: elsewhere than x86_64 it is a plain read (`Tsc::now`), and the
    /// report says so.
    pub const FENCED: bool = cfg!(target_arch = "x86_64");

    /// A TSC read once every earlier instruction has finished, before any later one begins:
    /// the start and the end of a timed piece of work alike.
    #[inline(always)]
    pub fn now(tsc: &tickbus::time::Tsc) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            let _ = tsc;
            // SAFETY: LFENCE and RDTSC exist on every x86_64 CPU (SSE2 is part of x86_64); they
            // order instructions and read a counter, touching no memory.
            unsafe {
                core::arch::x86_64::_mm_lfence();
                let t = core::arch::x86_64::_rdtsc();
                core::arch::x86_64::_mm_lfence();
                t
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            tsc.now()
        }
    }

    /// The median cost of an empty fenced pair (ns): what every figure timed between the two
    /// carries on top of the work.
    pub fn pair_ns(
        tsc: &tickbus::time::Tsc,
        scale: tickbus::time::TscScale,
    ) -> Result<u64, Box<dyn std::error::Error>> {
        let mut timer = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1_000_000_000, 3)?;
        for _ in 0..100_000 {
            let t0 = now(tsc);
            let t1 = now(tsc);
            timer.saturating_record(scale.delta_ns(t0, t1).max(1));
        }
        Ok(timer.value_at_quantile(0.5))
    }
}

pub fn pin(core: usize) -> std::io::Result<()> {
    tickbus::agent::pin_current_thread(core).map(|_| ())
}

/// Initiator half of a ping-pong: stamp, send, wait for the echo of that stamp.
/// How long one side of a ping-pong waits for the other before giving the run up: over an
/// unreliable transport (ud-mcast) a lost datagram never comes back, and a run must end.
const PATIENCE_NS: f64 = 10e9;

/// Spins on `step` until it succeeds, or until `patience` TSC ticks have passed since `t0`
/// (checked every 4096 tries, so the wait costs a counter, not a clock read per try).
#[inline(always)]
fn spin_on<R>(tsc: &Tsc, t0: u64, patience: u64, mut step: impl FnMut() -> Option<R>) -> Option<R> {
    let mut tries = 0u32;
    loop {
        if let Some(r) = step() {
            return Some(r);
        }
        tries = tries.wrapping_add(1);
        if tries.is_multiple_of(4096) && tsc.now().wrapping_sub(t0) > patience {
            return None;
        }
        std::hint::spin_loop();
    }
}

/// One round trip: (send TSC, receive TSC), or None when no reply came within `patience`.
fn initiate(tx: &mut impl Tx, rx: &mut impl Rx, tsc: &Tsc, patience: u64) -> Option<(u64, u64)> {
    let t0 = tsc.now();
    spin_on(tsc, t0, patience, || tx.try_send(t0).then_some(()))?;
    let s = spin_on(tsc, t0, patience, || rx.try_recv())?;
    debug_assert_eq!(s, t0);
    Some((t0, tsc.now()))
}

/// Responder half: echo `n` messages; false when the initiator went quiet for `patience`.
fn echo(tx: &mut impl Tx, rx: &mut impl Rx, n: u64, patience: u64) -> bool {
    let tsc = Tsc::new();
    for _ in 0..n {
        let t0 = tsc.now();
        let Some(s) = spin_on(&tsc, t0, patience, || rx.try_recv()) else { return false };
        if spin_on(&tsc, t0, patience, || tx.try_send(s).then_some(())).is_none() {
            return false;
        }
    }
    true
}

/// [`PATIENCE_NS`] in TSC ticks.
fn patience(ticks_per_ns: f64) -> u64 {
    (PATIENCE_NS * ticks_per_ns) as u64
}

/// Closed-loop RTT of an in-process transport.
pub fn ping_pong<T: InProcess>(t: &mut T, spec: &RunSpec) -> Result<Histogram<u64>, Box<dyn Error>> {
    let (mut ping_tx, mut ping_rx) = t.channel(spec.size, spec.ticks_per_ns)?;
    let (mut pong_tx, mut pong_rx) = t.channel(spec.size, spec.ticks_per_ns)?;
    let total = spec.warmup + spec.iterations;
    let ready = Start::new();
    let ready_b = ready.clone();
    let (core_b, wait) = (spec.cores.1, patience(spec.ticks_per_ns));
    let responder = std::thread::Builder::new().name("pong".into()).spawn(move || -> std::io::Result<()> {
        let setup =
            pin(core_b).map_err(|e| e.to_string()).and_then(|_| ping_rx.prepare().and_then(|_| pong_tx.prepare()));
        ready_b.go(setup)?;
        // A responder left waiting ends by itself; the initiator reports why.
        echo(&mut pong_tx, &mut ping_rx, total, wait);
        Ok(())
    })?;
    let spec = *spec;
    let initiator =
        std::thread::Builder::new().name("ping".into()).spawn(move || -> std::io::Result<Histogram<u64>> {
            let setup = pin(spec.cores.0)
                .map_err(|e| e.to_string())
                .and_then(|_| pong_rx.prepare().and_then(|_| ping_tx.prepare()));
            ready.go(setup)?;
            initiator_loop(&mut ping_tx, &mut pong_rx, &spec)
        })?;
    let h = initiator.join().map_err(|_| "initiator panicked")??;
    responder.join().map_err(|_| "responder panicked")??;
    Ok(h)
}

fn initiator_loop(tx: &mut impl Tx, rx: &mut impl Rx, spec: &RunSpec) -> std::io::Result<Histogram<u64>> {
    let tsc = Tsc::new();
    let scale = TscScale { ticks_per_ns: spec.ticks_per_ns };
    let mut h = histogram();
    let wait = patience(spec.ticks_per_ns);
    let lost = |k: u64| {
        std::io::Error::other(format!(
            "round trip {k} of {}: no reply within {} s (a lost message, or the other side stopped)",
            spec.warmup + spec.iterations,
            PATIENCE_NS / 1e9
        ))
    };
    for k in 0..spec.warmup {
        initiate(tx, rx, &tsc, wait).ok_or_else(|| lost(k))?;
    }
    for k in 0..spec.iterations {
        let (t0, t1) = initiate(tx, rx, &tsc, wait).ok_or_else(|| lost(spec.warmup + k))?;
        h.saturating_record(scale.delta_ns(t0, t1).max(1));
    }
    Ok(h)
}

/// One-way latency at a fixed rate, from each message's intended send time to its receipt.
#[derive(Debug)]
pub struct OpenLoop {
    pub latency_ns: Histogram<u64>,
    /// Messages that left later than intended because the channel was full or the sender late.
    pub late_sends: u64,
    /// How far the sender fell behind its schedule (whether or not that made it backlogged).
    pub behind: crate::model::Backlog,
}

pub fn open_loop<T: InProcess>(t: &mut T, spec: &RunSpec, rate: u64) -> Result<OpenLoop, Box<dyn Error>> {
    let (mut tx, mut rx) = t.channel(spec.size, spec.ticks_per_ns)?;
    let total = spec.warmup + spec.iterations;
    let ready = Start::new();
    let ready_b = ready.clone();
    let spec = *spec;
    let receiver =
        std::thread::Builder::new().name("recv".into()).spawn(move || -> std::io::Result<Histogram<u64>> {
            let tsc = Tsc::new();
            let scale = TscScale { ticks_per_ns: spec.ticks_per_ns };
            let mut h = histogram();
            let setup = pin(spec.cores.1).map_err(|e| e.to_string()).and_then(|_| rx.prepare());
            ready_b.go(setup)?;
            let mut n = 0;
            while n < total {
                if let Some(intended) = rx.try_recv() {
                    if n >= spec.warmup {
                        h.saturating_record(scale.delta_ns(intended, tsc.now()).max(1));
                    }
                    n += 1;
                } else {
                    std::hint::spin_loop();
                }
            }
            Ok(h)
        })?;
    let sender = std::thread::Builder::new().name("send".into()).spawn(
        move || -> std::io::Result<(u64, u64, u64, u64, u64)> {
            let tsc = Tsc::new();
            let period = spec.ticks_per_ns * 1e9 / rate as f64;
            let setup = pin(spec.cores.0).map_err(|e| e.to_string()).and_then(|_| tx.prepare());
            ready.go(setup)?;
            let start = tsc.now() + (spec.ticks_per_ns * 1e6) as u64;
            let late_bound = (crate::model::BACKLOG_LATE_NS as f64 * spec.ticks_per_ns) as u64;
            let (mut late, mut max_behind, mut very_late, mut last) = (0, 0u64, 0u64, start);
            for i in 0..total {
                let intended = start + (i as f64 * period) as u64;
                spin_until(&tsc, intended);
                let mut first = true;
                while !tx.try_send(intended) {
                    if first {
                        late += 1;
                        first = false;
                    }
                    std::hint::spin_loop();
                }
                // Behind: when the send went out against when it was due (a full channel or a
                // sender that could not keep up). One clock read per message, after the send.
                last = tsc.now();
                let behind = last.saturating_sub(intended);
                max_behind = max_behind.max(behind);
                very_late += u64::from(behind > late_bound);
            }
            Ok((late, max_behind, very_late, start, last))
        },
    )?;
    let (late_sends, max_behind, very_late, start, last) = sender.join().map_err(|_| "sender panicked")??;
    let latency_ns = receiver.join().map_err(|_| "receiver panicked")??;
    let scale = TscScale { ticks_per_ns: spec.ticks_per_ns };
    let behind = crate::model::Backlog {
        max_behind_ns: scale.delta_ns(0, max_behind),
        late_sends: very_late,
        sends: total,
        asked_msgs_per_s: rate as f64,
        sustained_msgs_per_s: total as f64 * 1e9 / scale.delta_ns(start, last).max(1) as f64,
    };
    Ok(OpenLoop { latency_ns, late_sends, behind })
}

/// Messages per second when the sender sends flat out: first send to last receipt.
pub fn throughput<T: InProcess>(t: &mut T, spec: &RunSpec) -> Result<f64, Box<dyn Error>> {
    let (mut tx, mut rx) = t.channel(spec.size, spec.ticks_per_ns)?;
    let total = spec.warmup + spec.iterations;
    let ready = Start::new();
    let ready_b = ready.clone();
    let spec = *spec;
    let receiver = std::thread::Builder::new().name("recv".into()).spawn(move || -> std::io::Result<(u64, u64)> {
        let tsc = Tsc::new();
        let setup = pin(spec.cores.1).map_err(|e| e.to_string()).and_then(|_| rx.prepare());
        ready_b.go(setup)?;
        let (mut n, mut first) = (0, 0);
        while n < total {
            if let Some(s) = rx.try_recv() {
                if n == spec.warmup {
                    first = s;
                }
                n += 1;
            }
        }
        Ok((first, tsc.now()))
    })?;
    let sender = std::thread::Builder::new().name("send".into()).spawn(move || -> std::io::Result<()> {
        let tsc = Tsc::new();
        let setup = pin(spec.cores.0).map_err(|e| e.to_string()).and_then(|_| tx.prepare());
        ready.go(setup)?;
        for _ in 0..total {
            let s = tsc.now();
            while !tx.try_send(s) {}
        }
        Ok(())
    })?;
    sender.join().map_err(|_| "sender panicked")??;
    let (first, last) = receiver.join().map_err(|_| "receiver panicked")??;
    let ns = TscScale { ticks_per_ns: spec.ticks_per_ns }.delta_ns(first, last).max(1);
    Ok(spec.iterations as f64 * 1e9 / ns as f64)
}

/// Closed-loop RTT across two processes: a thread of this process initiates on core A; a child
/// (`latency-lab __echo`) pinned to core B echoes. The child is started before the thread pins
/// itself, so it does not inherit a one-core affinity mask.
pub fn ping_pong_processes<T: CrossProcess + Sync>(t: &T, spec: &RunSpec) -> Result<Histogram<u64>, Box<dyn Error>> {
    let tag = format!("lab{}x{}", std::process::id(), T::KEY);
    let (ping, pong) = (format!("{tag}ping"), format!("{tag}pong"));
    let total = spec.warmup + spec.iterations;
    std::thread::scope(|s| {
        s.spawn(|| -> Result<Histogram<u64>, String> {
            let e = |e: Box<dyn Error>| format!("{}: {e}", t.name());
            let mut tx = t.tx(&ping, spec.size, spec.ticks_per_ns).map_err(e)?;
            let mut child = EchoChild::spawn(T::KEY, &ping, &pong, spec, total).map_err(|x| x.to_string())?;
            child.wait_ready().map_err(e)?;
            let mut rx = t.rx(&pong, spec.size).map_err(e)?;
            tx.prepare()?;
            rx.prepare()?;
            pin(spec.cores.0).map_err(|x| x.to_string())?;
            let h = initiator_loop(&mut tx, &mut rx, spec).map_err(|x| x.to_string())?;
            let status = child.child.wait().map_err(|x| x.to_string())?;
            if !status.success() {
                return Err(format!("the echo child of {} failed: {status}", t.name()));
            }
            Ok(h)
        })
        .join()
        .map_err(|_| "initiator panicked")?
        .map_err(Into::into)
    })
}

/// The child side: open the ping receiver and pong sender, say "ready", echo `total` messages.
pub fn echo_child<T: CrossProcess>(
    t: &T,
    ping: &str,
    pong: &str,
    size: usize,
    total: u64,
    core: usize,
    ticks_per_ns: f64,
) -> Result<(), Box<dyn Error>> {
    pin(core)?;
    let mut rx = t.rx(ping, size)?;
    let mut tx = t.tx(pong, size, ticks_per_ns)?;
    rx.prepare()?;
    tx.prepare()?;
    println!("ready");
    if !echo(&mut tx, &mut rx, total, patience(ticks_per_ns)) {
        return Err(
            format!("no ping within {} s: the initiator stopped or a message was lost", PATIENCE_NS / 1e9).into()
        );
    }
    Ok(())
}

struct EchoChild {
    child: Child,
    out: Option<ChildStdout>,
}

impl EchoChild {
    fn spawn(key: &str, ping: &str, pong: &str, spec: &RunSpec, total: u64) -> std::io::Result<EchoChild> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["__echo", "--peer", key, "--ping", ping, "--pong", pong])
            .args([
                "--size",
                &spec.size.to_string(),
                "--total",
                &total.to_string(),
                "--core",
                &spec.cores.1.to_string(),
            ])
            .args(["--ticks-per-ns", &spec.ticks_per_ns.to_string()])
            .stdout(Stdio::piped())
            .spawn()?;
        let out = child.stdout.take();
        Ok(EchoChild { child, out })
    }

    fn wait_ready(&mut self) -> Result<(), Box<dyn Error>> {
        use std::io::{BufRead, BufReader};
        let mut line = String::new();
        BufReader::new(self.out.take().ok_or("no child stdout")?).read_line(&mut line)?;
        if line.trim() != "ready" {
            let _ = self.child.kill();
            return Err(format!("the echo child did not start (said {line:?})").into());
        }
        Ok(())
    }
}

impl Drop for EchoChild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::peers::floor::Floor;
    use crate::bench::peers::rtrb_peer::Rtrb;

    fn spec(iterations: u64) -> RunSpec {
        RunSpec {
            size: 64,
            iterations,
            warmup: 100,
            cores: (0, 1),
            ticks_per_ns: Tsc::new().measure_ticks_per_ns(std::time::Duration::from_millis(20)),
        }
    }

    /// A sender that cannot keep up (a channel that takes 3 ms for its first message) makes the
    /// open loop backlogged. (The on-time side of the bounds is proved on the model's pure
    /// `Backlog` test: here other tests spin on the same pinned cores, and a scheduler slice
    /// would make an on-time run look late.)
    #[test]
    fn an_open_loop_whose_sender_fell_behind_is_backlogged() {
        struct Slow {
            inner: <Rtrb as InProcess>::Tx,
            stall: bool,
        }
        impl Tx for Slow {
            fn try_send(&mut self, stamp: u64) -> bool {
                if std::mem::take(&mut self.stall) {
                    std::thread::sleep(std::time::Duration::from_millis(3));
                }
                self.inner.try_send(stamp)
            }
        }
        struct Stalling(Rtrb, bool);
        // The flag stays: a channel that stalls or not.
        impl InProcess for Stalling {
            type Tx = Slow;
            type Rx = <Rtrb as InProcess>::Rx;
            fn name(&self) -> String {
                "stalling".into()
            }
            fn note(&self) -> String {
                String::new()
            }
            fn channel(&mut self, size: usize, t: f64) -> Result<(Slow, Self::Rx), Box<dyn Error>> {
                let (tx, rx) = self.0.channel(size, t)?;
                Ok((Slow { inner: tx, stall: self.1 }, rx))
            }
        }
        let o = open_loop(&mut Stalling(Rtrb, true), &spec(2000), 100_000).unwrap();
        assert!(o.behind.is_backlogged() && o.behind.max_behind_ns > 2_000_000, "{:?}", o.behind);
    }

    #[test]
    fn every_mode_records_exactly_the_measured_messages() {
        let _cores = crate::CORES.lock().unwrap_or_else(|e| e.into_inner());
        assert_eq!(ping_pong(&mut Floor, &spec(1_000)).unwrap().len(), 1_000);
        let o = open_loop(&mut Rtrb, &spec(2_000), 200_000).unwrap();
        assert_eq!(o.latency_ns.len(), 2_000);
        assert!(throughput(&mut Rtrb, &spec(20_000)).unwrap() > 0.0);
    }

    /// A transport whose receiving end cannot be set up (as a client that fails to connect).
    struct Broken;
    struct NoRx;
    impl Rx for NoRx {
        fn try_recv(&mut self) -> Option<u64> {
            None
        }
        fn prepare(&mut self) -> Result<(), String> {
            Err("cannot subscribe".into())
        }
    }
    impl InProcess for Broken {
        type Tx = <Rtrb as InProcess>::Tx;
        type Rx = NoRx;
        fn name(&self) -> String {
            "broken".into()
        }
        fn note(&self) -> String {
            String::new()
        }
        fn channel(&mut self, size: usize, t: f64) -> Result<(Self::Tx, NoRx), Box<dyn Error>> {
            Ok((Rtrb.channel(size, t)?.0, NoRx))
        }
    }

    #[test]
    fn a_side_that_fails_to_set_up_fails_the_run_instead_of_hanging() {
        let _cores = crate::CORES.lock().unwrap_or_else(|e| e.into_inner());
        let e = ping_pong(&mut Broken, &spec(10)).unwrap_err().to_string();
        assert!(e.contains("cannot subscribe"), "{e}");
        assert!(open_loop(&mut Broken, &spec(10), 1_000).unwrap_err().to_string().contains("cannot subscribe"));
        assert!(throughput(&mut Broken, &spec(10)).unwrap_err().to_string().contains("cannot subscribe"));
    }

    /// A channel whose message is lost: sends succeed, nothing ever arrives.
    struct Lost;
    impl Tx for Lost {
        fn try_send(&mut self, _: u64) -> bool {
            true
        }
    }
    impl Rx for Lost {
        fn try_recv(&mut self) -> Option<u64> {
            None
        }
    }

    #[test]
    fn a_lost_message_ends_the_round_trip_and_the_echo_instead_of_spinning_forever() {
        let tsc = Tsc::new();
        let wait = patience(tickbus::time::ticks_per_ns()) / 100; // 100 ms
        let t = std::time::Instant::now();
        assert_eq!(initiate(&mut Lost, &mut Lost, &tsc, wait), None, "no reply: given up");
        assert!(!echo(&mut Lost, &mut Lost, 5, wait), "no ping: the responder gives up too");
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "both within their patience: {:?}", t.elapsed());
    }
}
