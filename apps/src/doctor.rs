//! `tickbus doctor`: checks this host before its figures are trusted and says what to fix
//! (the checks live in `tickbus::doctor`, for apps that run them at start-up).
//!
//! Exit code 0: ready; 1: not ready (at least one failure); 2: bad arguments.
use clap::Args;
use tickbus::doctor::{diagnose, DoctorOptions};

#[derive(Args)]
pub struct DoctorArgs {
    /// The cores your busy-polling threads pin to (`2,3` or `2-5`): each is checked for
    /// isolation, frequency governor, SMT siblings and IRQ affinity, and watched (all at once)
    /// for time taken away from a thread spinning on it.
    #[arg(long, value_parser = cores)]
    cores: Option<CoreList>,
    /// How long to watch each core for time taken away (ms; 0: not watched). A VM's host can
    /// deschedule a vCPU for milliseconds where the guest's own accounting sees nothing.
    #[arg(long, default_value_t = 500)]
    jitter_ms: u64,
    /// This host must run RDMA transports: no RDMA device is a failure.
    #[arg(long)]
    rdma: bool,
    /// Bytes your app registers for RDMA (rings, mirrors, histories), which RLIMIT_MEMLOCK must
    /// allow; accepts K, M and G suffixes.
    #[arg(long, default_value = "64M", value_parser = bytes)]
    memlock: u64,
    /// Free 2 MiB hugepages your rings need.
    #[arg(long, default_value_t = 1)]
    min_free_hugepages: u64,
    /// The interface the feed's lines arrive on: its state, receive queues and busy polling;
    /// with --xdp-probe, what AF_XDP it can do.
    #[arg(long)]
    iface: Option<String>,
    /// With --iface: try AF_XDP there (native or generic XDP, zero-copy or copy mode) by
    /// attaching a program that steers nothing and binding a socket for a moment (root). On some
    /// drivers this resets the receive ring: not on an interface a live feed uses.
    #[arg(long, requires = "iface")]
    xdp_probe: bool,
    /// With --xdp-probe: the receive queue to try.
    #[arg(long, default_value_t = 0, requires = "xdp_probe")]
    xdp_queue: u32,
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
}

/// One argument holding a whole list (a plain `Vec` would make clap expect one core per value).
type CoreList = Vec<usize>;

/// The most CPUs a Linux kernel is built for (NR_CPUS's largest setting).
const MAX_CPUS: usize = 8192;

fn cores(s: &str) -> Result<CoreList, String> {
    let ok = !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c == ',' || c == '-');
    // Each number is checked before a range is expanded: 0-4000000000 is refused, not listed.
    let past = s.split([',', '-']).filter_map(|n| n.parse::<usize>().ok()).find(|&n| n >= MAX_CPUS);
    if let Some(n) = past {
        return Err(format!("core {n} in `{s}`: cores are numbered 0 to {}", MAX_CPUS - 1));
    }
    let list = tickbus::doctor::parse_cpu_list(s);
    if !ok || list.is_empty() {
        return Err(format!("`{s}` is not a CPU list: write it as the kernel does, e.g. 2,3 or 2-5"));
    }
    Ok(list)
}

fn bytes(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("`{s}` is not a byte count: write e.g. 65536, 512K, 64M or 2G"))
}

pub fn run(a: DoctorArgs) -> Result<(), String> {
    let mut o = DoctorOptions::default();
    o.cores = a.cores.unwrap_or_default();
    o.require_rdma = a.rdma;
    o.memlock_bytes = a.memlock;
    o.min_free_hugepages = a.min_free_hugepages;
    o.iface = a.iface;
    o.xdp_probe = a.xdp_probe.then_some(a.xdp_queue);
    o.jitter_window = std::time::Duration::from_millis(a.jitter_ms);
    let d = diagnose(&o);
    if a.json {
        println!("{}", serde_json::json!({ "ready": d.ready(), "identity": d.identity, "findings": d.findings }));
    } else {
        print!("{}", d.text());
    }
    if d.ready() {
        Ok(())
    } else {
        let n = d.findings.iter().filter(|f| f.status == tickbus::doctor::Status::Fail).count();
        Err(format!("host not ready: {n} failures, each with its fix above"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_lists_and_byte_counts_parse_or_say_how_to_write_them() {
        assert_eq!(cores("2,3").unwrap(), vec![2, 3]);
        assert_eq!(cores("0-2").unwrap(), vec![0, 1, 2]);
        assert!(cores("two").unwrap_err().contains("e.g. 2,3 or 2-5"));
        assert!(cores("").is_err());
        assert!(cores("0-4000000000").unwrap_err().contains("cores are numbered 0 to 8191"));
        assert!(cores("99999999999999999999999").is_err(), "past usize: not a CPU list");
        assert_eq!(bytes("64M").unwrap(), 64 << 20);
        assert_eq!(bytes("512k").unwrap(), 512 << 10);
        assert_eq!(bytes("4096").unwrap(), 4096);
        assert!(bytes("lots").unwrap_err().contains("64M"));
        assert!(bytes("99999999999999G").is_err());
    }
}
