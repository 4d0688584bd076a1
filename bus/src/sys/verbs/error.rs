//! Verbs errors: which call failed, the errno, and what a user can check.

/// A verbs call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerbsError {
    /// No RDMA device (or none of that name).
    #[error("no RDMA device{}: load a provider (e.g. `rdma link add rxe0 type rxe netdev eth0`), or run the suite in the Soft-RoCE guest (tools/rig/rig)", .name.as_ref().map(|n| format!(" named {n:?}")).unwrap_or_default())]
    NoDevice {
        /// The device asked for, if one was named.
        name: Option<String>,
    },
    /// The port is not active.
    #[error("port {port} of {device} is not active (state {state}): check the link under it (`rdma link`, `ip link`)")]
    PortDown {
        /// The device.
        device: String,
        /// The port number.
        port: u8,
        /// Its state (the verbs enum).
        state: u32,
    },
    /// The port has no RoCE v2 IPv4 GID.
    #[error(
        "{device} port {port} has no RoCE v2 IPv4 GID: give its netdev an IPv4 address, or set TICKBUS_RDMA_GID_INDEX"
    )]
    NoGid {
        /// The device.
        device: String,
        /// The port number.
        port: u8,
    },
    /// A verbs or system call failed.
    #[error("{call} failed: {source}{}", hint(.call))]
    Call {
        /// Which call.
        call: &'static str,
        /// The errno it left.
        source: std::io::Error,
    },
    /// A buffer required on hugepages could not be mapped there.
    #[error("hugepage buffer of {bytes} bytes unavailable ({source}): reserve hugepages (echo 64 > /proc/sys/vm/nr_hugepages) or allow 4 KiB pages")]
    NoHugepages {
        /// The buffer's size.
        bytes: usize,
        /// The mapping's error.
        source: std::io::Error,
    },
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
