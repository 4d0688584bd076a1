//! The feed's kernel-socket ingest: every datagram waiting on a line's UDP socket in one
//! `recvmmsg(2)` call into buffers made once ([`DatagramBatch`]), instead of a `recv` per
//! datagram. A busy line costs one syscall per batch; an idle one, one per poll (the kernel
//! bypass that needs none is issue 27's AF_XDP ingest, not built yet).
use std::io;
use std::os::fd::AsRawFd;

use crate::sys::net::RecvBatch;

/// Datagrams taken per call unless told otherwise: a burst of a busy line in one syscall.
pub const DEFAULT_BATCH: usize = 32;
/// The largest UDP payload over IPv4: no datagram is cut short.
pub const MAX_DATAGRAM: usize = 65_507;

/// Receive buffers for up to `count` datagrams, made once.
pub struct DatagramBatch {
    inner: RecvBatch,
}

impl DatagramBatch {
    /// Room for `count` datagrams of up to [`MAX_DATAGRAM`] bytes each (`count` 1..=1024).
    pub fn new(count: usize) -> DatagramBatch {
        DatagramBatch { inner: RecvBatch::new(count, MAX_DATAGRAM) }
    }

    /// Takes what is waiting on `sock` (non-blocking, whatever the socket's mode), up to the
    /// batch's room; returns how many datagrams (0: none). Makes one syscall and allocates nothing.
    pub fn recv(&mut self, sock: &impl AsRawFd) -> io::Result<usize> {
        self.inner.recv(sock)
    }

    /// Datagram `i` of the last [`DatagramBatch::recv`].
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        self.inner.get(i).map(|(d, _)| d)
    }

    /// The datagrams of the last [`DatagramBatch::recv`], in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.inner.len()).filter_map(|i| self.get(i))
    }

    /// Datagrams the last [`DatagramBatch::recv`] took.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether the last [`DatagramBatch::recv`] took none.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;

    use super::*;

    /// 100 datagrams of different sizes waiting: taken in batches of 32 (4 calls), each whole
    /// and in order; then none, without blocking; then the largest UDP payload, whole.
    #[test]
    fn waiting_datagrams_come_whole_and_in_order_a_batch_per_call() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(false).unwrap(); // the batch must not block even so
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let size = |k: usize| 1 + k * 7;
        for k in 0..100usize {
            let d: Vec<u8> = (0..size(k)).map(|j| (k + j) as u8).collect();
            assert_eq!(tx.send(&d).unwrap(), d.len());
        }
        let mut b = DatagramBatch::new(DEFAULT_BATCH);
        let (mut got, mut calls) = (Vec::new(), 0);
        while got.len() < 100 {
            let n = b.recv(&rx).unwrap();
            assert!(n > 0 && n <= DEFAULT_BATCH, "a call took {n}");
            calls += 1;
            got.extend(b.iter().map(<[u8]>::to_vec));
        }
        assert_eq!(calls, 4, "100 waiting datagrams in batches of 32");
        for (k, d) in got.iter().enumerate() {
            assert_eq!(d.len(), size(k), "datagram {k}");
            assert!(d.iter().enumerate().all(|(j, &x)| x == (k + j) as u8), "datagram {k}'s bytes");
        }
        assert_eq!(b.recv(&rx).unwrap(), 0, "none waiting: 0, not a block");
        assert!(b.is_empty() && b.get(0).is_none());
        let big: Vec<u8> = (0..MAX_DATAGRAM).map(|j| (j % 251) as u8).collect();
        assert_eq!(tx.send(&big).unwrap(), MAX_DATAGRAM);
        assert_eq!(b.recv(&rx).unwrap(), 1);
        assert_eq!(b.get(0), Some(&big[..]), "the largest datagram whole");
    }
}
