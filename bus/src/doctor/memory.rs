//! Memory the bus pins: 2 MiB hugepages for shm rings (reserved, free, and a hugetlbfs mount
//! where rings are created), and RLIMIT_MEMLOCK for RDMA registration.
use std::path::Path;

use super::{read, Finding, Status};

const POOL: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB";
const RESERVE: &str = "echo 64 > /proc/sys/vm/nr_hugepages (or vm.nr_hugepages=64 in /etc/sysctl.d, or \
     hugepages=64 on the kernel command line, which also works when memory is fragmented)";

pub(super) fn hugepages(ring_dir: &Path, min_free: u64) -> Vec<Finding> {
    let nr = read(format!("{POOL}/nr_hugepages")).and_then(|s| s.parse::<u64>().ok());
    let free = read(format!("{POOL}/free_hugepages")).and_then(|s| s.parse::<u64>().ok());
    let pool = match (nr, free) {
        (Some(nr), Some(free)) => {
            let f = Finding::new(
                "hugepages",
                Status::Ok,
                format!("{nr} x 2 MiB reserved, {free} free (rings need {min_free} free)"),
            )
            .fact("reserved", nr)
            .fact("free", free);
            if nr == 0 {
                Finding {
                    status: Status::Fail,
                    detail: "no 2 MiB pages reserved: shm rings fall back to \
                    4 KiB pages in /dev/shm (TLB misses on every ring)"
                        .into(),
                    ..f
                }
                .remedy(RESERVE)
            } else if free < min_free {
                Finding {
                    status: Status::Fail,
                    detail: format!(
                        "{nr} x 2 MiB reserved but only {free} free, \
                    {min_free} needed"
                    ),
                    ..f
                }
                .remedy(format!("reserve more ({RESERVE}) or remove stale rings (tickbus ring rm NAME)"))
            } else {
                f
            }
        }
        _ => Finding::new("hugepages", Status::Fail, "this kernel has no 2 MiB hugepage pool")
            .remedy("use a kernel built with CONFIG_HUGETLBFS and 2 MiB pages"),
    };
    vec![pool, mount(ring_dir)]
}

/// hugetlbfs mounts as (mount point, page size option).
fn hugetlbfs_mounts() -> Vec<(String, String)> {
    let mounts = read("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[2] == "hugetlbfs").then(|| {
                let size = f[3].split(',').find_map(|o| o.strip_prefix("pagesize=")).unwrap_or("default");
                (f[1].to_string(), size.to_string())
            })
        })
        .collect()
}

fn mount(ring_dir: &Path) -> Finding {
    let mounts = hugetlbfs_mounts();
    let listed = mounts.iter().map(|(m, s)| format!("{m} (pagesize {s})")).collect::<Vec<_>>().join(", ");
    // Whether rings land on hugetlbfs is the shm publisher's own check (statfs of the folder);
    // the longest hugetlbfs mount point holding the folder names the mount and its page size.
    let on_hugetlbfs = crate::shm::hugetlbfs_problem(ring_dir).is_none();
    let covering = mounts.iter().filter(|(m, _)| on_hugetlbfs && ring_dir.starts_with(m)).max_by_key(|(m, _)| m.len());
    let d = ring_dir.display();
    match covering {
        Some((m, size)) if size == "2M" || size == "default" => {
            Finding::new("hugetlbfs", Status::Ok, format!("rings in {d} land on hugetlbfs at {m} (pagesize {size})"))
                .fact("mount", m)
                .fact("ring_dir", d)
        }
        Some((m, size)) => Finding::new(
            "hugetlbfs",
            Status::Warn,
            format!("{d} is on hugetlbfs at {m} with {size} pages: every ring rounds up to one"),
        )
        .fact("mount", m)
        .fact("ring_dir", d)
        .remedy("mount a 2 MiB hugetlbfs for rings: mount -t hugetlbfs -o pagesize=2M none /dev/hugepages"),
        None => Finding::new(
            "hugetlbfs",
            Status::Fail,
            if mounts.is_empty() {
                format!("no hugetlbfs is mounted, so rings in {d} fall back to /dev/shm on 4 KiB pages")
            } else {
                format!("{d} is not on hugetlbfs (mounted: {listed}): rings fall back to /dev/shm")
            },
        )
        .fact("mount", "")
        .fact("ring_dir", d)
        .remedy(
            "mkdir -p /dev/hugepages && mount -t hugetlbfs -o pagesize=2M none /dev/hugepages \
             (or point TICKBUS_HUGEPAGE_DIR at a folder on a mounted hugetlbfs)",
        ),
    }
}

/// Whether this process holds CAP_IPC_LOCK (bit 14 of CapEff) in the initial user namespace,
/// which exempts it from the limit (RDMA registration checks the capability there: inside a
/// rootless container it does not count).
fn cap_ipc_lock() -> bool {
    let map = read("/proc/self/uid_map").unwrap_or_default();
    let initial_ns = map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"];
    if !initial_ns {
        return false;
    }
    let status = read("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 14) != 0)
}

/// `relevant`: RDMA is required or there are RDMA devices; otherwise a low limit is a fact (it
/// matters only to rdma-rc and ud-mcast, which register memory), not a failure.
pub(super) fn memlock(need: u64, relevant: bool) -> Finding {
    let Ok((soft, hard)) = crate::sys::process::memlock_limit() else {
        return Finding::new("memlock", Status::Warn, "RLIMIT_MEMLOCK unreadable")
            .remedy("check `ulimit -l` in the shell that starts the app");
    };
    let show = |v: Option<u64>| v.map_or("unlimited".to_string(), |v| format!("{} KiB", v / 1024));
    let (cur, max) = (show(soft), show(hard));
    let cap = cap_ipc_lock();
    let f = Finding::new("memlock", Status::Ok, "")
        .fact("soft", &cur)
        .fact("hard", &max)
        .fact("need_bytes", need)
        .fact("cap_ipc_lock", cap);
    if soft.is_none_or(|s| s >= need) {
        return Finding {
            detail: format!("RLIMIT_MEMLOCK {cur} (hard {max}) covers the {} KiB RDMA registers", need / 1024),
            ..f
        };
    }
    let remedy = format!(
        "raise it where the app starts: `ulimit -l unlimited`, LimitMEMLOCK=infinity in its systemd unit, \
         or `* - memlock unlimited` in /etc/security/limits.conf (needs {} KiB)",
        need / 1024
    );
    if !relevant {
        return Finding {
            status: Status::Info,
            detail: format!(
                "RLIMIT_MEMLOCK {cur} is below {} KiB, which matters only to RDMA registration (no RDMA device \
                 here and --rdma not asked)",
                need / 1024
            ),
            ..f
        }
        .remedy(remedy);
    }
    if cap {
        return Finding {
            status: Status::Warn,
            detail: format!(
                "RLIMIT_MEMLOCK {cur} is below the {} KiB RDMA registers; this process is exempt (CAP_IPC_LOCK), \
                 an app started without it is not",
                need / 1024
            ),
            ..f
        }
        .remedy(remedy);
    }
    Finding {
        status: Status::Fail,
        detail: format!(
            "RLIMIT_MEMLOCK {cur} (hard {max}) is below the {} KiB RDMA registers: ibv_reg_mr fails with ENOMEM",
            need / 1024
        ),
        ..f
    }
    .remedy(remedy)
}
