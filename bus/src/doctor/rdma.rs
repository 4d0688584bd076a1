//! RDMA devices from sysfs (no verbs library needed): per port its state, link layer, active MTU,
//! RoCE v2 GIDs, and whether it is a real NIC or Soft-RoCE (`rdma_rxe`).
use std::path::Path;

use super::{read, Finding, Status};

const CLASS: &str = "/sys/class/infiniband";

pub(super) fn devices(require: bool) -> Vec<Finding> {
    let mut devs: Vec<_> =
        std::fs::read_dir(CLASS).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    devs.sort();
    if devs.is_empty() {
        let f = Finding::new(
            "rdma",
            if require { Status::Fail } else { Status::Info },
            "no RDMA devices: shm rings only (rdma-rc and ud-mcast need one)",
        )
        .fact("devices", 0)
        .remedy(
            "load the NIC's RDMA driver (mlx5_ib, irdma, bnxt_re, ...); for tests without a NIC, Soft-RoCE: \
             modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0",
        );
        return vec![f];
    }
    let mut out = Vec::new();
    for dev in devs {
        let name = dev.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut ports: Vec<_> =
            std::fs::read_dir(dev.join("ports")).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
        ports.sort();
        for port in ports {
            out.push(port_finding(&name, &dev, &port));
        }
    }
    // A port that is down fails the host only if no port is up: a dual-port NIC with one cable
    // is fine, and says which port to use.
    let any_active = out.iter().any(|f| f.facts.get("state").is_some_and(|s| s == "ACTIVE"));
    for f in &mut out {
        let down_only = f.facts.get("state").is_some_and(|s| s != "ACTIVE") && f.detail.starts_with("port not ACTIVE:");
        if any_active && down_only && f.status == Status::Fail {
            f.status = Status::Warn;
        }
    }
    out
}

/// The largest IB MTU a RoCE port gets from its netdev: the kernel takes off the RoCE headers
/// and rounds down. NIC drivers take 96 bytes (iboe_get_mtu: GRH 40, UDP 8, BTH 12, extended
/// headers 32, ICRC 4); rdma_rxe takes 80 (RXE_MAX_HDR_LENGTH).
fn roce_mtu(netdev_mtu: u64, headers: u64) -> u64 {
    let room = netdev_mtu.saturating_sub(headers);
    [4096, 2048, 1024, 512, 256].into_iter().find(|&m| m <= room).unwrap_or(0)
}

/// The GID table's RoCE v2 entries that hold an address.
fn rocev2_gids(port: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(port.join("gids")) else { return out };
    let mut idx: Vec<u32> =
        entries.flatten().filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok())).collect();
    idx.sort_unstable();
    for i in idx {
        let ty = read(port.join(format!("gid_attrs/types/{i}")));
        let gid = read(port.join(format!("gids/{i}"))).unwrap_or_default();
        let empty = gid.chars().all(|c| c == '0' || c == ':');
        if ty.as_deref() == Some("RoCE v2") && !empty {
            out.push(gid);
        }
    }
    out
}

fn port_finding(name: &str, dev: &Path, port: &Path) -> Finding {
    let p = port.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let check = format!("rdma {name} port {p}");
    // "4: ACTIVE" -> "ACTIVE"
    let word = |f: &str| read(port.join(f)).map(|s| s.split_once(": ").map_or(s.clone(), |(_, w)| w.to_string()));
    let state = word("state").unwrap_or_else(|| "unknown".into());
    let phys = word("phys_state").unwrap_or_else(|| "unknown".into());
    let link = read(port.join("link_layer")).unwrap_or_else(|| "unknown".into());
    let rate = read(port.join("rate")).unwrap_or_default();
    // Soft-RoCE devices name their netdev in `parent`; real NICs have a PCI device and driver.
    let parent = read(dev.join("parent"));
    let driver = std::fs::read_link(dev.join("device/driver"))
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
    let netdev = read(port.join("gid_attrs/ndevs/0")).or_else(|| parent.clone());
    // A software device (rdma_rxe's RoCE, siw's iWARP) has a parent netdev and no driver of its own.
    let soft = parent.is_some() && driver.is_none();
    let soft_name = if read(dev.join("node_type")).is_some_and(|t| t.contains("RNIC")) {
        "Soft-iWARP (siw)"
    } else {
        "Soft-RoCE (rdma_rxe)"
    };
    let kind = if soft { "software" } else { "nic" };
    let mut f = Finding::new(check, Status::Ok, String::new())
        .fact("state", &state)
        .fact("phys_state", &phys)
        .fact("link_layer", &link)
        .fact("rate", &rate)
        .fact("kind", kind)
        .fact("driver", driver.as_deref().unwrap_or(if soft { soft_name } else { "unknown" }));
    let mut parts = vec![format!("{state} ({phys}), {link}, {rate}")];
    let mut fails: Vec<&str> = Vec::new();
    let mut small_mtu = false;
    let mut remedies: Vec<String> = Vec::new();
    if state != "ACTIVE" {
        fails.push("port not ACTIVE");
        remedies.push(format!(
            "bring the link up: check the cable/switch, `ip link set {} up`, and `rdma link show`",
            netdev.as_deref().unwrap_or("<netdev>")
        ));
    }
    let iwarp = read(dev.join("node_type")).is_some_and(|t| t.contains("RNIC"));
    if link == "Ethernet" && !iwarp {
        let nd = netdev.clone().unwrap_or_default();
        let nd_mtu = read(format!("/sys/class/net/{nd}/mtu")).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        let mtu = roce_mtu(nd_mtu, if soft { 80 } else { 96 });
        let gids = rocev2_gids(port);
        f = f.fact("netdev", &nd).fact("netdev_mtu", nd_mtu).fact("active_mtu", mtu).fact("rocev2_gids", gids.len());
        parts.push(format!("active MTU {mtu} ({nd} MTU {nd_mtu}), {} RoCE v2 GIDs", gids.len()));
        if gids.is_empty() {
            fails.push("no RoCE v2 GID");
            remedies.push(format!("give {nd} an IP address (RoCE v2 GIDs are made from its addresses)"));
        }
        if mtu < 1024 {
            small_mtu = true;
            remedies.push(format!("raise {nd}'s MTU (ip link set {nd} mtu 9000) for a RoCE MTU of 4096"));
        }
    }
    parts.push(if soft {
        format!("{soft_name} on {}", parent.as_deref().unwrap_or("?"))
    } else {
        format!("NIC (driver {})", driver.as_deref().unwrap_or("unknown"))
    });
    f.detail = parts.join(", ");
    if !fails.is_empty() {
        f.status = Status::Fail;
        f.detail = format!("{}: {}", fails.join(", "), f.detail);
    } else if soft {
        f.status = Status::Warn;
        f.detail.push_str(": software RDMA in the kernel, right for tests, microseconds slower than a NIC");
        remedies.push("use a RoCE or InfiniBand NIC for figures that matter".into());
    } else if small_mtu {
        f.status = Status::Warn;
        f.detail.push_str(": an active MTU below 1024 splits every message over 1 KiB into packets");
    }
    if !remedies.is_empty() {
        f.remedy = Some(remedies.join("; "));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roce_mtu_is_the_largest_ib_mtu_that_fits_the_netdev_after_roce_headers() {
        assert_eq!(roce_mtu(1500, 96), 1024);
        assert_eq!(roce_mtu(9000, 96), 4096);
        assert_eq!(roce_mtu(4200, 96), 4096);
        assert_eq!(roce_mtu(4191, 96), 2048);
        assert_eq!(roce_mtu(4191, 80), 4096, "rxe's headers are smaller");
        assert_eq!(roce_mtu(65536, 96), 4096);
        assert_eq!(roce_mtu(100, 96), 0);
    }
}
