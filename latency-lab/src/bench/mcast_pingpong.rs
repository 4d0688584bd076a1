//! tickbus ud-mcast as a lab transport: a channel is a multicast group of its own, with the
//! publisher on one device and one joined subscriber on the other. Alternate channels run the
//! other way, so a ping-pong's pong comes back across the same pair. Run in the Soft-RoCE guest
//! (tools/lab-rdma.sh) or on real NICs.
use std::error::Error;
use std::net::Ipv4Addr;

use tickbus::mcast::{McastError, McastPublisher, McastPublisherOptions, McastSubscriber, McastSubscriberOptions};
use tickbus::Recv;

use crate::bench::rdma_pingpong::{recv_polling, PollRecv};
use crate::bench::transport::{message, put_stamp, InProcess, Rx, Tx};

pub struct UdMcast {
    pub devices: (String, String),
    channels: u8,
    note: String,
}

impl UdMcast {
    pub fn new(devices: (String, String)) -> UdMcast {
        UdMcast { devices, channels: 0, note: String::new() }
    }
}

pub struct McastTx(McastPublisher, Vec<u8>);
pub struct McastRx(McastSubscriber, Vec<u8>);

impl Tx for McastTx {
    #[inline]
    fn try_send(&mut self, stamp: u64) -> bool {
        put_stamp(&mut self.1, stamp);
        match self.0.publish(&self.1) {
            Ok(_) => true,
            Err(McastError::SendQueueFull { .. }) => false,
            Err(e) => panic!("ud-mcast publish failed: {e}"),
        }
    }
}

impl Rx for McastRx {
    #[inline]
    fn try_recv(&mut self) -> Option<u64> {
        recv_polling(&mut self.0, &mut self.1, "ud-mcast")
    }
}

impl PollRecv for McastSubscriber {
    type Error = McastError;
    #[inline]
    fn poll_recv(&mut self) -> Result<Option<Recv<'_>>, Self::Error> {
        self.try_recv()
    }
    fn skippable(e: &McastError) -> bool {
        matches!(e, McastError::Frame { .. })
    }
}

impl InProcess for UdMcast {
    type Tx = McastTx;
    type Rx = McastRx;
    fn name(&self) -> String {
        "tickbus ud-mcast".into()
    }
    fn note(&self) -> String {
        self.note.clone()
    }
    fn channel(&mut self, size: usize, _ticks_per_ns: f64) -> Result<(McastTx, McastRx), Box<dyn Error>> {
        let reverse = self.channels % 2 == 1;
        let group = Ipv4Addr::new(239, 77, 2, self.channels);
        self.channels = self.channels.wrapping_add(1);
        let (from, to) = if reverse { (&self.devices.1, &self.devices.0) } else { (&self.devices.0, &self.devices.1) };
        let mut so = McastSubscriberOptions::default();
        so.device = Some(to.clone());
        let rx = McastSubscriber::join(group, 1, &so)?;
        let mut po = McastPublisherOptions::default();
        po.device = Some(from.clone());
        let tx = McastPublisher::new(group, 1, &po)?;
        if !reverse {
            let inline = if tx.inline(size) { "inline" } else { "not inline" };
            self.note = format!(
                "{from} -> {to} and back, one group each way, {} receive slots, {inline}, 1 UD SEND per message",
                so.depth
            );
        }
        Ok((McastTx(tx, message(size)), McastRx(rx, message(size))))
    }
}
