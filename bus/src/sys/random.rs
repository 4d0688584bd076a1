//! Random bytes from the kernel, for nonces and session ids (set-up only).
use std::io::Read;

/// `N` bytes from /dev/urandom.
#[cfg_attr(not(feature = "rdma"), allow(dead_code))] // the RDMA handshakes' nonces
pub fn bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut b = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b)
}
