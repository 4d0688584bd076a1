//! `doctor --iface IF`: what ingest the interface the feed's lines arrive on can do (AF_XDP's
//! mode and zero-copy, its receive queues, the kernel's busy-polling settings), each finding
//! with its fix.
use super::{read, Finding, Status};

/// Every finding for interface `name`; with `probe`, AF_XDP is tried on that queue (see
/// [`super::DoctorOptions::xdp_probe`]).
pub fn interface(name: &str, probe: Option<u32>) -> Vec<Finding> {
    let sys = std::path::Path::new("/sys/class/net").join(name);
    let check = format!("iface {name}");
    if name.is_empty() || name.contains('/') || !sys.exists() {
        return vec![Finding::new(&check, Status::Fail, "no such interface in this network namespace")
            .remedy("`ip link` lists the interfaces; give the one the feed's lines arrive on")];
    }
    let state = read(sys.join("operstate")).unwrap_or_else(|| "unknown".into());
    let driver = std::fs::read_link(sys.join("device/driver"))
        .ok()
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "virtual (no device)".into());
    let mtu = read(sys.join("mtu")).unwrap_or_default();
    let up = state == "up" || state == "unknown";
    let mut out = vec![{
        let f = Finding::new(
            &check,
            if up { Status::Ok } else { Status::Fail },
            format!("{state}, driver {driver}, MTU {mtu}"),
        )
        .fact("operstate", &state)
        .fact("driver", &driver)
        .fact("mtu", &mtu);
        if up {
            f
        } else {
            f.remedy(format!("bring it up: ip link set {name} up"))
        }
    }];
    let queues = crate::sys::net::rx_queues(name).unwrap_or(0);
    out.push(if queues > 1 {
        Finding::new(
            format!("{check} queues"),
            Status::Info,
            format!("{queues} receive queues: an AF_XDP socket sees only the queue it is bound to"),
        )
        .remedy(format!(
            "bind every queue (`tickbus feed --xdp-all-queues`), or steer the lines to one queue and bind it (`ethtool -N {name} flow-type udp4 dst-port PORT action Q`, then `tickbus feed --xdp-queue Q`)"
        ))
        .fact("rx_queues", queues)
    } else {
        Finding::new(format!("{check} queues"), Status::Ok, format!("{queues} receive queue")).fact("rx_queues", queues)
    });
    out.push(match probe {
        Some(queue) => xdp(name, queue, &check),
        None => Finding::new(
            format!("{check} af_xdp"),
            Status::Info,
            "not probed: trying AF_XDP attaches a program and binds a socket, which on some drivers (i40e, ice, mlx5) resets the receive ring and drops what is in flight",
        )
        .remedy(format!(
            "on an interface no live feed uses yet, or in a maintenance window: tickbus doctor --iface {name} --xdp-probe [--xdp-queue Q]"
        )),
    });
    let busy_poll = read("/proc/sys/net/core/busy_poll").unwrap_or_default();
    let defer = read(sys.join("napi_defer_hard_irqs")).unwrap_or_default();
    let gro = read(sys.join("gro_flush_timeout")).unwrap_or_default();
    out.push(
        Finding::new(
            format!("{check} busy polling"),
            Status::Info,
            format!("net.core.busy_poll {busy_poll}, napi_defer_hard_irqs {defer}, gro_flush_timeout {gro}: the feed busy-polls its rings; on a real NIC the driver's interrupts still run on some core"),
        )
        .remedy(format!(
            "on a NIC, keep its interrupts off the feed's core (doctor --cores) and, to let the kernel poll instead of interrupting: echo 2 > {p}/napi_defer_hard_irqs; echo 200000 > {p}/gro_flush_timeout",
            p = sys.display()
        ))
        .fact("busy_poll", busy_poll)
        .fact("napi_defer_hard_irqs", defer)
        .fact("gro_flush_timeout", gro),
    );
    out
}

#[cfg(feature = "xdp")]
fn xdp(name: &str, queue: u32, check: &str) -> Finding {
    use crate::xdp::{AttachMode, XdpIngest};
    let check = format!("{check} af_xdp");
    match XdpIngest::probe(name, queue) {
        Ok(i) => {
            let (status, detail) = match (i.mode, i.zero_copy) {
                (AttachMode::Native, true) => (Status::Ok, "native XDP, zero-copy: frames land in the UMEM straight from the NIC"),
                (AttachMode::Native, false) => (Status::Warn, "native XDP, copy mode (the driver has no AF_XDP zero-copy): the kernel copies each frame into the UMEM once; no syscall per packet still"),
                (_, _) => (Status::Warn, "generic XDP only (the driver has no native XDP): frames pass through a socket buffer first, slower than native"),
            };
            let f = Finding::new(&check, status, detail)
                .fact("mode", format!("{:?}", i.mode))
                .fact("zero_copy", i.zero_copy)
                .fact("umem_hugepages", i.hugepages);
            if status == Status::Ok {
                f
            } else {
                f.remedy("for the lowest ingress latency, a NIC whose driver has AF_XDP zero-copy (ice, i40e, mlx5, ...); `tickbus feed --ingest xdp` works as it is")
            }
        }
        Err(e) => Finding::new(&check, Status::Fail, format!("AF_XDP cannot open on queue {queue}: {e}")).remedy(
            "run as root; if another XDP program is attached (`ip link show IF` names it), that is another feed or another tool's: only a stale one of tickbus's (`tickbus_feed_steer`) is safe to detach, with `ip link set IF xdp off`"
                .replace("IF", name),
        ),
    }
}

#[cfg(not(feature = "xdp"))]
fn xdp(_: &str, _: u32, check: &str) -> Finding {
    Finding::new(
        format!("{check} af_xdp"),
        Status::Info,
        "not probed: this tickbus was built without the `xdp` feature",
    )
    .remedy("build with `--features xdp` (clang needed) to probe AF_XDP and run `tickbus feed --ingest xdp`")
}
