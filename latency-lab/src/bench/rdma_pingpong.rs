//! tickbus rdma-rc as a lab transport: a channel is a publisher on one device and a subscriber
//! on the other, connected through the handshake. Run in the Soft-RoCE guest (tools/lab-rdma.sh)
//! or on real NICs.
use std::error::Error;
use std::time::Duration;

use tickbus::rdma::{PublisherOptions, RdmaPublisher, RdmaSubscriber, SubscriberOptions, WriteMode};
use tickbus::{Mode, Recv, RingConfig};

use crate::bench::transport::{message, put_stamp, stamp_of, InProcess, Rx, Tx};

pub struct RdmaRc {
    pub devices: (String, String),
    pub write_mode: WriteMode,
    pub note: String,
}

pub struct RdmaTx(RdmaPublisher, Vec<u8>);
pub struct RdmaRx(RdmaSubscriber, Vec<u8>);

impl Tx for RdmaTx {
    #[inline]
    fn try_send(&mut self, stamp: u64) -> bool {
        put_stamp(&mut self.1, stamp);
        let ok = self.0.publish(&self.1).is_ok();
        if let Some((peer, e)) = self.0.take_dropped().into_iter().next() {
            panic!("subscriber {peer} dropped: {e}");
        }
        ok
    }
}

impl Rx for RdmaRx {
    #[inline]
    fn try_recv(&mut self) -> Option<u64> {
        recv_polling(&mut self.0, &mut self.1, "rdma-rc")
    }
}

/// A tickbus receiver polled by the RDMA lab transports.
pub trait PollRecv {
    type Error: std::fmt::Display;
    fn poll_recv(&mut self) -> Result<Option<Recv<'_>>, Self::Error>;
    /// Whether the receiver dropped one bad input and goes on (ud-mcast: a datagram that is
    /// not a frame of the stream); such an error is counted, not fatal.
    fn skippable(_e: &Self::Error) -> bool {
        false
    }
}

impl PollRecv for RdmaSubscriber {
    type Error = tickbus::rdma::RdmaError;
    #[inline]
    fn poll_recv(&mut self) -> Result<Option<Recv<'_>>, Self::Error> {
        self.try_recv()
    }
}

/// The stamp of the next message, copied into `buf`. Polls bare a while before handing back to
/// the harness's spin hint: under emulation PAUSE exits to the hypervisor's scheduler and would
/// cost more than the transport. A gap or an error ends the run: a ping-pong cannot lap.
#[inline]
pub fn recv_polling<S: PollRecv>(s: &mut S, buf: &mut [u8], what: &str) -> Option<u64> {
    for _ in 0..256 {
        match s.poll_recv() {
            Ok(Some(Recv::Message(m))) => {
                let n = m.payload.len();
                buf[..n].copy_from_slice(m.payload);
                return Some(stamp_of(buf));
            }
            Ok(Some(Recv::Gap(g))) => panic!("{what} ping-pong lost messages: {g:?}"),
            Ok(None) => {}
            Err(e) => panic!("{what} receive failed: {e}"),
        }
    }
    None
}

impl InProcess for RdmaRc {
    type Tx = RdmaTx;
    type Rx = RdmaRx;
    fn name(&self) -> String {
        match self.write_mode {
            WriteMode::Write => "tickbus rdma-rc (WRITE)".into(),
            WriteMode::WriteWithImm => "tickbus rdma-rc (WRITE_WITH_IMM)".into(),
        }
    }
    fn note(&self) -> String {
        self.note.clone()
    }
    /// Alternate channels go A -> B and B -> A, so a ping-pong's pong runs the other way.
    fn channel(&mut self, size: usize, ticks_per_ns: f64) -> Result<(RdmaTx, RdmaRx), Box<dyn Error>> {
        let reverse = self.note.contains("->");
        let (from, to) = if reverse { (self.devices.1.clone(), self.devices.0.clone()) } else { self.devices.clone() };
        let cfg = RingConfig { ticks_per_ns, ..RingConfig::for_payload(Mode::Lossy, 1, size.max(8), 1024) };
        let mut po = PublisherOptions::new("latency-lab");
        po.device = Some(from.clone());
        po.write_mode = self.write_mode;
        let mut so = SubscriberOptions::new("latency-lab");
        so.device = Some(to.clone());
        let mut tx = RdmaPublisher::bind("127.0.0.1:0".parse()?, &cfg, po)?;
        let addr = tx.local_addr();
        let sub = std::thread::spawn(move || RdmaSubscriber::connect(addr, 1, &so).map_err(|e| e.to_string()));
        tx.accept(Duration::from_secs(30))?;
        let rx = sub.join().map_err(|_| "subscriber thread panicked")??;
        if !reverse {
            let inline = if tx.inline() { "inline" } else { "not inline" };
            self.note = format!("{from} -> {to} and back, lossy, 1024 slots of {} B, {inline}", cfg.slot_size);
        }
        Ok((RdmaTx(tx, message(size)), RdmaRx(rx, message(size))))
    }
}
