//! Verbs errors: which call failed, the errno, and what a user can check.

/// A verbs call failed.
#[derive(Debug, thiserror::Error)]
pub enum VerbsError {
    #[error("no RDMA device{}: load a provider (e.g. `rdma link add rxe0 type rxe netdev eth0`), or run the suite in the Soft-RoCE guest (tools/rig/rig)", .name.as_ref().map(|n| format!(" named {n:?}")).unwrap_or_default())]
    NoDevice { name: Option<String> },
    #[error("port {port} of {device} is not active (state {state}): check the link under it (`rdma link`, `ip link`)")]
    PortDown { device: String, port: u8, state: u32 },
    #[error(
        "{device} port {port} has no RoCE v2 IPv4 GID: give its netdev an IPv4 address, or set TICKBUS_RDMA_GID_INDEX"
    )]
    NoGid { device: String, port: u8 },
    #[error("{call} failed: {source}{}", hint(.call))]
    Call { call: &'static str, source: std::io::Error },
    #[error("hugepage buffer of {bytes} bytes unavailable ({source}): reserve hugepages (echo 64 > /proc/sys/vm/nr_hugepages) or allow 4 KiB pages")]
    NoHugepages { bytes: usize, source: std::io::Error },
}

fn hint(call: &str) -> &'static str {
    match call {
        "ibv_reg_mr" => " (is RLIMIT_MEMLOCK large enough? `ulimit -l unlimited`)",
        "ibv_modify_qp(RTR)" => " (wrong remote QPN/GID, or MTU above the port's?)",
        "ibv_create_ah" => " (is the destination GID reachable from this port?)",
        "ibv_attach_mcast" => " (is it a UD QP on a port that supports multicast?)",
        _ => "",
    }
}

impl VerbsError {
    /// The error for a call that returned NULL or -1 with errno set.
    pub(crate) fn last(call: &'static str) -> VerbsError {
        VerbsError::Call { call, source: std::io::Error::last_os_error() }
    }

    /// The error for a call that returns the errno (ibv_modify_qp, ibv_post_*).
    pub(crate) fn code(call: &'static str, rc: i32) -> VerbsError {
        VerbsError::Call { call, source: std::io::Error::from_raw_os_error(rc.abs()) }
    }
}
