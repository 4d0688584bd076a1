//! `doctor`: checks a host before anyone trusts its latency figures, and says what to fix.
//!
//! Every check reads what the kernel already exposes (CPUID, `/proc`, `/sys`, getrlimit), so it needs no
//! privileges, no RDMA library and no running stream; it never changes the host. One check
//! measures instead: a thread spinning on each named core for half a second by default (see
//! [`DoctorOptions::jitter_window`]), for the time a hypervisor takes that nothing else can see. Each finding
//! carries its remedy. A host is *ready* when no finding is [`Status::Fail`]: warnings (a core
//! not isolated, IRQs on a trading core, Soft-RoCE instead of a NIC) make figures noisier or
//! slower but do not make them wrong, while a failure (no hugepages, a TSC that is not invariant,
//! a memlock limit RDMA registration will hit, a port that is down) does.
//!
//! The latency lab stores a [`Diagnosis`] in every report so that two reports from different
//! hosts or set-ups are recognised as such.
mod cpu;
mod identity;
mod iface;
mod jitter;
mod memory;
mod rdma;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// The kernel's CPU lists: `isolcpus`/`nohz_full` as read from sysfs, and the list format.
pub use crate::sys::cpu::{isolated_cpus, parse_cpu_list};
pub use identity::Identity;
pub use jitter::{watch_cores, Lost};

/// How a finding bears on whether the host is ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(rename_all = "lowercase"))]
pub enum Status {
    /// As it should be.
    Ok,
    /// A fact worth knowing that needs no action (no cpufreq driver in a VM, no RDMA device).
    Info,
    /// Figures will be noisier or slower than they could be; the remedy says how to fix it.
    Warn,
    /// Not ready: a stream will fail or its figures will be wrong until this is fixed.
    Fail,
}

impl Status {
    /// The fixed-width tag the text report prints.
    pub fn tag(self) -> &'static str {
        match self {
            Status::Ok => "  ok",
            Status::Info => "info",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Finding {
    /// What was checked, e.g. `tsc`, `hugepages`, `core 2 isolation`, `rdma rxe0 port 1`.
    pub check: String,
    /// Ok, info, a warning, or a problem to fix.
    pub status: Status,
    /// What was found, in a sentence.
    pub detail: String,
    /// What to do about it (present whenever the status is not [`Status::Ok`] and something can
    /// be done).
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub remedy: Option<String>,
    /// The raw facts behind the finding (`"state": "ACTIVE"`, `"free": "189"`), for scripts.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "BTreeMap::is_empty"))]
    pub facts: BTreeMap<String, String>,
}

impl Finding {
    fn new(check: impl Into<String>, status: Status, detail: impl Into<String>) -> Finding {
        Finding { check: check.into(), status, detail: detail.into(), remedy: None, facts: BTreeMap::new() }
    }

    fn remedy(mut self, r: impl Into<String>) -> Finding {
        self.remedy = Some(r.into());
        self
    }

    fn fact(mut self, k: &str, v: impl ToString) -> Finding {
        self.facts.insert(k.to_string(), v.to_string());
        self
    }
}

/// What to check the host for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DoctorOptions {
    /// The cores the app will pin its busy-polling threads to: each is checked for isolation,
    /// frequency governor, SMT siblings and IRQ affinity. Empty: those checks are skipped (and
    /// the report says so).
    pub cores: Vec<usize>,
    /// Bytes the app will register for RDMA (rings, mirrors, histories), which RLIMIT_MEMLOCK
    /// must allow. An rdma-rc ring is registered twice (the publisher's mirror and the
    /// subscriber's ring): count [`crate::ring::RingConfig::ring_bytes`] once per side.
    pub memlock_bytes: u64,
    /// No RDMA device is a failure rather than a fact (a host meant to run rdma-rc/ud-mcast).
    pub require_rdma: bool,
    /// Where shm rings are created (default: [`crate::shm::ShmOptions`]'s hugepage folder).
    pub hugepage_dir: PathBuf,
    /// Free 2 MiB pages the app needs; fewer is a failure.
    pub min_free_hugepages: u64,
    /// The interface a feed's lines arrive on: what ingest it can do (AF_XDP's mode and
    /// zero-copy, receive queues, busy polling). None: not checked.
    pub iface: Option<String>,
    /// Watch each of `cores` this long (all at once) for time taken away from a thread spinning
    /// on it: a hypervisor's descheduling, kernel threads, interrupts. Zero: not checked.
    pub jitter_window: std::time::Duration,
    /// Try AF_XDP on that interface's receive queue (Some(queue)): attaches a program that
    /// steers nothing and binds a socket for a moment. Off by default: on some drivers that
    /// resets the receive ring, dropping what a live feed has in flight.
    pub xdp_probe: Option<u32>,
}

impl Default for DoctorOptions {
    fn default() -> Self {
        DoctorOptions {
            cores: Vec::new(),
            memlock_bytes: 64 << 20,
            require_rdma: false,
            hugepage_dir: crate::shm::ShmOptions::default().hugepage_dir,
            min_free_hugepages: 1,
            iface: None,
            xdp_probe: None,
            jitter_window: std::time::Duration::from_millis(500),
        }
    }
}

/// The host's identity and every finding.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Diagnosis {
    /// The machine checked.
    pub identity: Identity,
    /// Every check's result, in the order they ran.
    pub findings: Vec<Finding>,
}

impl Diagnosis {
    /// No finding is a failure.
    pub fn ready(&self) -> bool {
        self.findings.iter().all(|f| f.status != Status::Fail)
    }

    /// The finding for `check`, if it was made.
    pub fn finding(&self, check: &str) -> Option<&Finding> {
        self.findings.iter().find(|f| f.check == check)
    }

    /// The report as an operator reads it: one line per finding, its remedy below it.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let id = &self.identity;
        let _ = writeln!(
            s,
            "host {}: {} ({} CPUs, {} MiB), kernel {}, {}",
            id.hostname,
            id.cpu_model,
            id.cpus,
            id.memory_bytes >> 20,
            id.kernel,
            id.virtualization
        );
        for f in &self.findings {
            let _ = writeln!(s, "[{}] {}: {}", f.status.tag(), f.check, f.detail);
            if let Some(r) = &f.remedy {
                let _ = writeln!(s, "       fix: {r}");
            }
        }
        let fails = self.findings.iter().filter(|f| f.status == Status::Fail).count();
        let warns = self.findings.iter().filter(|f| f.status == Status::Warn).count();
        let verdict = if fails == 0 { "ready" } else { "NOT ready" };
        let _ = writeln!(s, "{verdict}: {fails} failures, {warns} warnings");
        s
    }
}

/// Runs every check. Never fails: a check that cannot read what it needs says so as a finding.
pub fn diagnose(opts: &DoctorOptions) -> Diagnosis {
    let mut findings = vec![cpu::tsc(), cpu::clocksource()];
    findings.extend(memory::hugepages(&opts.hugepage_dir, opts.min_free_hugepages));
    // Listed once: the ports decide whether memlock matters, and are reported last.
    let rdma = rdma::devices(opts.require_rdma);
    let rdma_here = rdma.iter().any(|f| f.facts.contains_key("state"));
    findings.push(memory::memlock(opts.memlock_bytes, opts.require_rdma || rdma_here));
    // Each core once, however often named (a publisher and a subscriber on one core): its
    // findings once, and one jitter watcher, since two on one core would see each other's turns.
    let mut cores = opts.cores.clone();
    cores.sort_unstable();
    cores.dedup();
    findings.extend(cpu::cores(&cores));
    if !opts.jitter_window.is_zero() && !cores.is_empty() {
        for (c, lost) in jitter::watch_cores(&cores, opts.jitter_window) {
            findings.push(jitter::finding(c, &lost));
        }
    }
    findings.extend(rdma);
    if let Some(name) = &opts.iface {
        findings.extend(iface::interface(name, opts.xdp_probe));
    }
    Diagnosis { identity: identity::identity(), findings }
}

/// A small file under /proc or /sys, trimmed; `None` if it cannot be read.
fn read(path: impl AsRef<std::path::Path>) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Writes a CPU list the way the kernel does (`0-2,5`).
fn cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_print_as_the_kernel_writes_them() {
        assert_eq!(cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(cpu_list(&[]), "");
        assert_eq!(crate::sys::cpu::parse_cpu_list(&cpu_list(&[3, 4, 9])), vec![3, 4, 9]);
    }

    #[test]
    fn a_failure_makes_the_host_not_ready_and_a_warning_does_not() {
        let id = identity::identity();
        let mut d = Diagnosis { identity: id, findings: vec![Finding::new("a", Status::Warn, "x").remedy("y")] };
        assert!(d.ready());
        assert!(d.text().contains("[WARN] a: x\n       fix: y\n"), "{}", d.text());
        d.findings.push(Finding::new("b", Status::Fail, "z"));
        assert!(!d.ready());
        assert!(d.text().ends_with("NOT ready: 1 failures, 1 warnings\n"), "{}", d.text());
    }

    #[test]
    fn every_check_is_made_on_this_host() {
        // A short watch: other tests run beside this one.
        let d = diagnose(&DoctorOptions {
            cores: vec![0],
            jitter_window: std::time::Duration::from_millis(20),
            ..Default::default()
        });
        for check in [
            "tsc",
            "clocksource",
            "hugepages",
            "hugetlbfs",
            "memlock",
            "core 0 isolation",
            "core 0 irqs",
            "core 0 jitter",
        ] {
            let f = d.finding(check).unwrap_or_else(|| panic!("no {check} finding in {}", d.text()));
            assert!(f.status == Status::Ok || f.remedy.is_some(), "{check} is not ok and says no remedy: {f:?}");
        }
    }
}
