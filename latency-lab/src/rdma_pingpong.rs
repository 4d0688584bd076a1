//! tickbus rdma-rc: a ping stream (core A's publisher on one device) and a pong stream (core B's
//! publisher on the other device), each side subscribing to the other's. Run in the Soft-RoCE
//! guest (tools/lab-rdma.sh) or on real NICs.
use std::error::Error;
use std::time::Duration;

use tickbus::rdma::{PublisherOptions, RdmaPublisher, RdmaSubscriber, SubscriberOptions, WriteMode};
use tickbus::{Mode, Recv, RingConfig};

use crate::harness::{ping_pong, Bench, Initiator, Outcome, Responder, RunSpec};

pub struct RdmaPingPong {
    pub devices: (String, String),
    pub write_mode: WriteMode,
}

struct Side {
    tx: RdmaPublisher,
    rx: RdmaSubscriber,
    buf: Vec<u8>,
}

impl Side {
    #[inline]
    fn wait(&mut self) -> usize {
        loop {
            match self.rx.try_recv() {
                Ok(Some(Recv::Message(m))) => {
                    let len = m.payload.len();
                    self.buf[..len].copy_from_slice(m.payload);
                    return len;
                }
                Ok(Some(Recv::Gap(g))) => panic!("ping-pong cannot lap: {g:?}"),
                // A bare poll, as perftest's: under emulation PAUSE exits to the hypervisor's
                // scheduler and would add more than the transport costs.
                Ok(None) => {}
                Err(e) => panic!("rdma receive failed: {e}"),
            }
        }
    }

    #[inline]
    fn send(&mut self) {
        self.tx.publish(&self.buf).expect("lossy RDMA publish of a fitting payload");
        if let Some((peer, e)) = self.tx.take_dropped().into_iter().next() {
            panic!("subscriber {peer} dropped: {e}");
        }
    }
}

impl Initiator for Side {
    #[inline]
    fn ping(&mut self, i: u64) {
        self.buf[..8].copy_from_slice(&i.to_le_bytes());
        self.send();
        self.wait();
    }
}

impl Responder for Side {
    #[inline]
    fn pong(&mut self) {
        self.wait();
        self.send();
    }
}

impl Bench for RdmaPingPong {
    fn name(&self) -> &str {
        match self.write_mode {
            WriteMode::Write => "tickbus rdma-rc (WRITE)",
            WriteMode::WriteWithImm => "tickbus rdma-rc (WRITE_WITH_IMM)",
        }
    }

    fn run(&self, spec: &RunSpec) -> Result<Outcome, Box<dyn Error>> {
        let cfg = |stream| RingConfig {
            ticks_per_ns: spec.ticks_per_ns,
            ..RingConfig::for_payload(Mode::Lossy, stream, spec.size, 1024)
        };
        let popts = |dev: &str| {
            let mut o = PublisherOptions::new("latency-lab");
            o.device = Some(dev.to_owned());
            o.write_mode = self.write_mode;
            o
        };
        let sopts = |dev: &str| {
            let mut o = SubscriberOptions::new("latency-lab");
            o.device = Some(dev.to_owned());
            o
        };
        let (da, db) = self.devices.clone();
        let mut ping_tx = RdmaPublisher::bind("127.0.0.1:0".parse()?, &cfg(1), popts(&da))?;
        let mut pong_tx = RdmaPublisher::bind("127.0.0.1:0".parse()?, &cfg(2), popts(&db))?;
        let (ping_addr, pong_addr) = (ping_tx.local_addr(), pong_tx.local_addr());
        let inline = ping_tx.inline();
        // B connects to ping while A accepts; then A connects to pong while B accepts.
        let (so_a, so_b) = (sopts(&da), sopts(&db));
        let b = std::thread::spawn(move || -> Result<(RdmaPublisher, RdmaSubscriber), String> {
            let rx = RdmaSubscriber::connect(ping_addr, 1, &so_b).map_err(|e| e.to_string())?;
            pong_tx.accept(Duration::from_secs(30)).map_err(|e| e.to_string())?;
            Ok((pong_tx, rx))
        });
        ping_tx.accept(Duration::from_secs(30))?;
        let a_rx = RdmaSubscriber::connect(pong_addr, 2, &so_a)?;
        let (b_tx, b_rx) = b.join().map_err(|_| "pong side panicked")??;
        let a = Side { tx: ping_tx, rx: a_rx, buf: vec![0; spec.size] };
        let b = Side { tx: b_tx, rx: b_rx, buf: vec![0; spec.size] };
        let rtt_ns = ping_pong(spec, a, b)?;
        let note = format!(
            "{} -> {}, lossy, 1024 slots of {} B, {}",
            da,
            db,
            cfg(1).slot_size,
            if inline { "inline" } else { "not inline" }
        );
        Ok(Outcome { name: self.name().into(), note, rtt_ns })
    }
}
