//! Which machine a figure came from: enough to tell two reports from different hosts or kernels
//! apart, never anything secret.
use super::read;

/// The machine's identity as the lab records it beside every figure.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Identity {
    /// The host's name.
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// /proc/cpuinfo's model name.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: usize,
    /// MemTotal.
    pub memory_bytes: u64,
    /// `bare metal`, or `vm` with the hypervisor's vendor when DMI names it.
    pub virtualization: String,
}

impl Identity {
    /// The fields that differ from `other`, as `name: a -> b` (the hostname too: two hosts of
    /// one kind still differ in their neighbours and tuning).
    pub fn differences(&self, other: &Identity) -> Vec<String> {
        let mut d = Vec::new();
        let mut cmp = |name: &str, a: String, b: String| {
            if a != b {
                d.push(format!("{name}: {a} -> {b}"));
            }
        };
        cmp("hostname", self.hostname.clone(), other.hostname.clone());
        cmp("kernel", self.kernel.clone(), other.kernel.clone());
        cmp("cpu", self.cpu_model.clone(), other.cpu_model.clone());
        cmp("cpus", self.cpus.to_string(), other.cpus.to_string());
        // Reported memory moves by a few MiB between boots; GiB is the identity.
        cmp("memory GiB", (self.memory_bytes >> 30).to_string(), (other.memory_bytes >> 30).to_string());
        cmp("virtualization", self.virtualization.clone(), other.virtualization.clone());
        d
    }
}

pub(super) fn identity() -> Identity {
    let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
    let field = |k: &str| {
        cpuinfo.lines().find(|l| l.starts_with(k)).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim().to_string())
    };
    let hypervisor = super::cpu::cpu_flags(&cpuinfo).iter().any(|x| x == "hypervisor");
    let vendor = read("/sys/class/dmi/id/sys_vendor").filter(|s| !s.is_empty());
    let virtualization = match (hypervisor, vendor) {
        (false, _) => "bare metal".to_string(),
        (true, Some(v)) => format!("vm ({v})"),
        (true, None) => "vm".to_string(),
    };
    let memory_bytes = read("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024);
    Identity {
        hostname: read("/proc/sys/kernel/hostname").unwrap_or_default(),
        kernel: read("/proc/sys/kernel/osrelease").unwrap_or_default(),
        cpu_model: field("model name").unwrap_or_else(|| "unknown".into()),
        cpus: crate::sys::cpu::parse_cpu_list(&read("/sys/devices/system/cpu/online").unwrap_or_default()).len(),
        memory_bytes,
        virtualization,
    }
}
