//! The clock and the cores: an invariant TSC (every message's timestamp), the clocksource, and
//! for each core the app pins to, isolation, frequency governor, SMT siblings and IRQs.
use super::{cpu_list, read, Finding, Status};
use crate::sys::cpu::parse_cpu_list;

/// CPUID 0x8000_0007 EDX bit 8: the TSC ticks at a constant rate in every P-, C- and T-state.
#[cfg(target_arch = "x86_64")]
fn invariant_tsc() -> Option<bool> {
    use std::arch::x86_64::__cpuid;
    let max_ext = __cpuid(0x8000_0000).eax;
    (max_ext >= 0x8000_0007).then(|| __cpuid(0x8000_0007).edx & (1 << 8) != 0)
}

#[cfg(not(target_arch = "x86_64"))]
fn invariant_tsc() -> Option<bool> {
    None
}

pub(super) fn tsc() -> Finding {
    let flags = cpu_flags(&read("/proc/cpuinfo").unwrap_or_default());
    let constant = flags.iter().any(|f| f == "constant_tsc");
    let base = |status, detail: &str| Finding::new("tsc", status, detail).fact("constant_tsc", constant);
    match invariant_tsc() {
        Some(true) => {
            base(Status::Ok, "invariant (CPUID 0x80000007 EDX[8]): timestamps tick at one rate on every core")
                .fact("invariant", true)
        }
        // The kernel still trusts a TSC of constant rate as its clocksource (many cloud VMs hide
        // the invariant bit): figures hold unless the host sleeps deeply, so a warning.
        Some(false)
            if constant
                && read("/sys/devices/system/clocksource/clocksource0/current_clocksource")
                    .is_some_and(|c| c == "tsc") =>
        {
            base(
                Status::Warn,
                "not advertised invariant (CPUID 0x80000007 EDX[8] clear), but constant-rate and the kernel's \
             clocksource: timestamps hold while no core enters a deep sleep state",
            )
            .fact("invariant", false)
            .remedy(
                "on a VM, ask for invtsc (QEMU/KVM `-cpu host,+invtsc`); on metal, check the BIOS's C-state settings",
            )
        }
        Some(false) => base(
            Status::Fail,
            "not invariant (CPUID 0x80000007 EDX[8] clear): TSC timestamps drift with frequency and sleep states, \
             so latencies computed from them are wrong",
        )
        .fact("invariant", false)
        .remedy(
            "run on a CPU with an invariant TSC (Intel Nehalem+, AMD Zen+); in a VM expose it \
             (QEMU/KVM `-cpu host,+invtsc`, or the cloud's bare-metal or dedicated-host instances)",
        ),
        None => base(Status::Fail, "no TSC on this architecture: tickbus timestamps need x86_64's TSC")
            .remedy("run on x86_64"),
    }
}

/// The first CPU's flags in `/proc/cpuinfo` text `info`.
pub(super) fn cpu_flags(info: &str) -> Vec<String> {
    info.lines()
        .find(|l| l.starts_with("flags"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, f)| f.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

pub(super) fn clocksource() -> Finding {
    let dir = "/sys/devices/system/clocksource/clocksource0";
    let Some(cur) = read(format!("{dir}/current_clocksource")) else {
        return Finding::new("clocksource", Status::Info, "unknown (no sysfs clocksource)");
    };
    let avail = read(format!("{dir}/available_clocksource")).unwrap_or_default();
    let f = Finding::new("clocksource", Status::Ok, format!("{cur} (available: {avail})"))
        .fact("current", &cur)
        .fact("available", &avail);
    if cur == "tsc" {
        return f;
    }
    Finding {
        status: Status::Warn,
        detail: format!(
            "{cur}, not tsc (available: {avail}): clock_gettime and the lab's wall-clock figures cost a \
             device read, and the kernel may not trust this TSC"
        ),
        ..f
    }
    .remedy(if avail.split_whitespace().any(|c| c == "tsc") {
        "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource (or boot with clocksource=tsc tsc=reliable)"
    } else {
        "the kernel marked the TSC unstable: check `dmesg | grep -i tsc`; an invariant TSC fixes it"
    })
}

/// One finding per concern per core; the checks are skipped (and said to be) with no cores named.
pub(super) fn cores(cores: &[usize]) -> Vec<Finding> {
    if cores.is_empty() {
        return vec![Finding::new(
            "cores",
            Status::Info,
            "no cores named: isolation, governor, SMT and IRQ checks skipped",
        )
        .remedy("pass the cores your busy-polling threads pin to (e.g. --cores 2,3)")];
    }
    let isolated = crate::sys::cpu::isolated_cpus();
    let nohz = parse_cpu_list(&read("/sys/devices/system/cpu/nohz_full").unwrap_or_default());
    let cmdline = read("/proc/cmdline").unwrap_or_default();
    // rcu_nocbs=LIST; a bare rcu_nocbs or rcu_nocbs=all offloads every CPU, and the kernel
    // offloads nohz_full CPUs by itself.
    let online = parse_cpu_list(&read("/sys/devices/system/cpu/online").unwrap_or_default());
    let mut rcu_nocbs: Vec<usize> = match cmdline.split_whitespace().find(|a| a.starts_with("rcu_nocbs")) {
        Some("rcu_nocbs") | Some("rcu_nocbs=all") => online,
        Some(a) => a.strip_prefix("rcu_nocbs=").map(parse_cpu_list).unwrap_or_default(),
        None => Vec::new(),
    };
    rcu_nocbs.extend(nohz.iter().copied());
    let irqs = irq_affinities();
    let mut out = Vec::new();
    for &c in cores {
        let dir = format!("/sys/devices/system/cpu/cpu{c}");
        let online = std::path::Path::new(&dir).join("topology").exists()
            && read(format!("{dir}/online")).is_none_or(|s| s == "1");
        if !online {
            out.push(
                Finding::new(format!("core {c}"), Status::Fail, format!("cpu{c} does not exist or is offline"))
                    .remedy("name an online core (see /sys/devices/system/cpu/online)"),
            );
            continue;
        }
        out.push(isolation(c, &isolated, &nohz, &rcu_nocbs));
        out.push(governor(c, &dir));
        out.push(siblings(c, &dir));
        out.push(irq_finding(c, &irqs));
    }
    out
}

fn isolation(c: usize, isolated: &[usize], nohz: &[usize], rcu_nocbs: &[usize]) -> Finding {
    let (i, n, r) = (isolated.contains(&c), nohz.contains(&c), rcu_nocbs.contains(&c));
    let yn = |b: bool| if b { "yes" } else { "no" };
    let detail = format!("isolcpus {}, nohz_full {}, rcu_nocbs {}", yn(i), yn(n), yn(r));
    let f = Finding::new(format!("core {c} isolation"), Status::Ok, detail)
        .fact("isolcpus", i)
        .fact("nohz_full", n)
        .fact("rcu_nocbs", r);
    if i && n && r {
        return f;
    }
    Finding { status: Status::Warn, ..f }.remedy(format!(
        "boot with isolcpus={c} nohz_full={c} rcu_nocbs={c} (added to the cores already listed) so the \
         scheduler, the timer tick and RCU callbacks leave the core to the poller"
    ))
}

fn governor(c: usize, dir: &str) -> Finding {
    let check = format!("core {c} governor");
    match read(format!("{dir}/cpufreq/scaling_governor")) {
        None => Finding::new(check, Status::Info, "no cpufreq driver (a VM or a fixed-frequency CPU)")
            .fact("governor", "none"),
        Some(g) if g == "performance" => Finding::new(check, Status::Ok, "performance").fact("governor", g),
        Some(g) => Finding::new(check, Status::Warn, format!("{g}: the core slows down between bursts"))
            .fact("governor", &g)
            .remedy(format!("cpupower -c {c} frequency-set -g performance")),
    }
}

fn siblings(c: usize, dir: &str) -> Finding {
    let check = format!("core {c} smt");
    let list = parse_cpu_list(&read(format!("{dir}/topology/thread_siblings_list")).unwrap_or_default());
    let others: Vec<usize> = list.into_iter().filter(|&s| s != c).collect();
    if others.is_empty() {
        return Finding::new(check, Status::Ok, "no SMT sibling: the physical core is the poller's alone")
            .fact("siblings", "");
    }
    let l = cpu_list(&others);
    Finding::new(check, Status::Warn, format!("shares its physical core with cpu {l}")).fact("siblings", &l).remedy(
        format!(
            "keep cpu {l} idle (isolate it too) or take it offline: echo 0 > /sys/devices/system/cpu/cpu{}/online",
            others[0]
        ),
    )
}

/// (IRQ number, CPUs it may be delivered to) for every IRQ with an affinity file.
fn irq_affinities() -> Option<Vec<(u32, Vec<usize>)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/irq").ok()?.flatten() {
        let Some(n) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        // Only IRQs with a handler can fire: the kernel lists each handler as a folder here.
        let handled = std::fs::read_dir(e.path()).is_ok_and(|d| d.flatten().any(|h| h.path().is_dir()));
        if !handled {
            continue;
        }
        // The effective affinity is where it lands; the requested one is the fallback.
        let l = read(e.path().join("effective_affinity_list"))
            .filter(|s| !s.is_empty())
            .or_else(|| read(e.path().join("smp_affinity_list")));
        if let Some(l) = l {
            out.push((n, parse_cpu_list(&l)));
        }
    }
    out.sort_unstable();
    Some(out)
}

fn irq_finding(c: usize, irqs: &Option<Vec<(u32, Vec<usize>)>>) -> Finding {
    let check = format!("core {c} irqs");
    let Some(irqs) = irqs else {
        return Finding::new(check, Status::Info, "IRQ affinities unreadable (/proc/irq)");
    };
    let on: Vec<String> = irqs.iter().filter(|(_, cpus)| cpus.contains(&c)).map(|(n, _)| n.to_string()).collect();
    if on.is_empty() {
        return Finding::new(check, Status::Ok, "no IRQ is delivered to it").fact("irqs", "");
    }
    let list = on.join(",");
    Finding::new(check, Status::Warn, format!("{} IRQs may be delivered to it: {list}", on.len()))
        .fact("irqs", &list)
        .remedy(format!(
            "steer them to other cores: for each N, echo <other cpus> > /proc/irq/N/smp_affinity_list; \
             with irqbalance set IRQBALANCE_BANNED_CPULIST={c}; managed IRQs (NVMe queues) refuse that: \
             boot with isolcpus=managed_irq,{c}"
        ))
}
