//! tickbus shm: a ping ring and a pong ring, each side opening them as a separate process would.
use std::error::Error;

use tickbus::shm::{self, ShmOptions, ShmPublisher, ShmSubscriber};
use tickbus::{Mode, Recv, RingConfig, StartAt};

use crate::harness::{ping_pong, Bench, Initiator, Outcome, Responder, RunSpec};

#[derive(Default)]
pub struct ShmPingPong {
    pub opts: ShmOptions,
}

struct Side {
    tx: ShmPublisher,
    rx: ShmSubscriber,
    buf: Vec<u8>,
}

impl Initiator for Side {
    #[inline]
    fn ping(&mut self, i: u64) {
        self.buf[..8].copy_from_slice(&i.to_le_bytes());
        self.tx.publish(&self.buf).expect("lossy publish never fails for a fitting payload");
        loop {
            match self.rx.try_recv() {
                Some(Recv::Message(m)) => {
                    debug_assert_eq!(&m.payload[..8], &i.to_le_bytes());
                    return;
                }
                Some(Recv::Gap(g)) => panic!("ping-pong cannot lap: {g:?}"),
                None => std::hint::spin_loop(),
            }
        }
    }
}

impl Responder for Side {
    #[inline]
    fn pong(&mut self) {
        loop {
            match self.rx.try_recv() {
                Some(Recv::Message(m)) => {
                    let len = m.payload.len();
                    self.buf[..len].copy_from_slice(m.payload);
                    break;
                }
                Some(Recv::Gap(g)) => panic!("ping-pong cannot lap: {g:?}"),
                None => std::hint::spin_loop(),
            }
        }
        self.tx.publish(&self.buf).expect("lossy publish never fails for a fitting payload");
    }
}

impl Bench for ShmPingPong {
    fn name(&self) -> &str {
        "tickbus shm"
    }
    fn run(&self, spec: &RunSpec) -> Result<Outcome, Box<dyn Error>> {
        let tag = format!("lab-{}", std::process::id());
        let (ping, pong) = (format!("{tag}-ping"), format!("{tag}-pong"));
        let cfg = |stream| RingConfig {
            ticks_per_ns: spec.ticks_per_ns,
            ..RingConfig::for_payload(Mode::Lossy, stream, spec.size, 4096)
        };
        let a_tx = shm::open_publisher(&ping, &cfg(1), &self.opts)?;
        let b_tx = shm::open_publisher(&pong, &cfg(2), &self.opts)?;
        let b_rx = shm::open_observer(&ping, StartAt::Latest, &self.opts)?;
        let a_rx = shm::open_observer(&pong, StartAt::Latest, &self.opts)?;
        let note = format!("{:?}, lossy, {} slots of {} B", a_tx.backing(), 4096, cfg(1).slot_size);
        let a = Side { tx: a_tx, rx: a_rx, buf: vec![0; spec.size] };
        let b = Side { tx: b_tx, rx: b_rx, buf: vec![0; spec.size] };
        let result = ping_pong(spec, a, b);
        for name in [&ping, &pong] {
            let _ = shm::remove(name, &self.opts);
        }
        Ok(Outcome { name: self.name().into(), note, rtt_ns: result? })
    }
}
