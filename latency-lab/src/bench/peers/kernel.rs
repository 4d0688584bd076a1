//! What you would use otherwise: kernel UDP and TCP over loopback, non-blocking sockets polled in
//! a busy loop (the fastest way to use them; blocking reads add a wake-up per message).
use std::error::Error;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};

use crate::bench::transport::{message, put_stamp, stamp_of, InProcess, Rx, Tx};

pub struct Udp;
pub struct Tcp;

pub struct UdpTx(UdpSocket, Vec<u8>);
pub struct UdpRx(UdpSocket, Vec<u8>);

impl Tx for UdpTx {
    fn try_send(&mut self, stamp: u64) -> bool {
        put_stamp(&mut self.1, stamp);
        self.0.send(&self.1).is_ok()
    }
}

impl Rx for UdpRx {
    fn try_recv(&mut self) -> Option<u64> {
        match self.0.recv(&mut self.1) {
            Ok(n) if n >= 8 => Some(stamp_of(&self.1)),
            Ok(_) => None,
            Err(e) if e.kind() == ErrorKind::WouldBlock => None,
            Err(e) => panic!("udp recv: {e}"),
        }
    }
}

impl InProcess for Udp {
    type Tx = UdpTx;
    type Rx = UdpRx;
    fn name(&self) -> String {
        "kernel UDP loopback".into()
    }
    fn note(&self) -> String {
        "non-blocking sockets, busy-polled".into()
    }
    fn channel(&mut self, size: usize, _: f64) -> Result<(UdpTx, UdpRx), Box<dyn Error>> {
        let rx = UdpSocket::bind("127.0.0.1:0")?;
        rx.set_nonblocking(true)?;
        let tx = UdpSocket::bind("127.0.0.1:0")?;
        tx.connect(rx.local_addr()?)?;
        Ok((UdpTx(tx, message(size)), UdpRx(rx, message(size))))
    }
}

pub struct TcpTx(TcpStream, Vec<u8>);
pub struct TcpRx(TcpStream, Vec<u8>, usize);

impl Tx for TcpTx {
    fn try_send(&mut self, stamp: u64) -> bool {
        put_stamp(&mut self.1, stamp);
        self.0.write_all(&self.1).is_ok()
    }
}

impl Rx for TcpRx {
    fn try_recv(&mut self) -> Option<u64> {
        let TcpRx(s, buf, have) = self;
        match s.read(&mut buf[*have..]) {
            Ok(0) => panic!("tcp peer closed"),
            Ok(n) => *have += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => panic!("tcp read: {e}"),
        }
        (*have == buf.len()).then(|| {
            *have = 0;
            stamp_of(buf)
        })
    }
}

impl InProcess for Tcp {
    type Tx = TcpTx;
    type Rx = TcpRx;
    fn name(&self) -> String {
        "kernel TCP loopback".into()
    }
    fn note(&self) -> String {
        "TCP_NODELAY, non-blocking reads busy-polled".into()
    }
    fn channel(&mut self, size: usize, _: f64) -> Result<(TcpTx, TcpRx), Box<dyn Error>> {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let tx = TcpStream::connect(l.local_addr()?)?;
        let (rx, _) = l.accept()?;
        tx.set_nodelay(true)?;
        rx.set_nonblocking(true)?;
        Ok((TcpTx(tx, message(size)), TcpRx(rx, message(size), 0)))
    }
}
