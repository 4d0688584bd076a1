//! disruptor 4.4 (in-process): a single-producer ring of preallocated events read through its
//! event-poller API (so the benchmark, not a managed thread, drives the consumer).
use std::error::Error;

use disruptor::{
    build_single_producer, BusySpin, EventPoller, Polling, Producer, SingleConsumerBarrier, SingleProducer,
    SingleProducerBarrier,
};

use crate::bench::peers::tickbus_shm::SLOTS;
use crate::bench::transport::{message, put_stamp, stamp_of, InProcess, Rx, Tx};

/// The largest message the lab sends.
const MAX: usize = 1344;

pub struct Event {
    len: usize,
    bytes: [u8; MAX],
}

pub struct Disruptor;

pub struct DisruptorTx(SingleProducer<Event, SingleConsumerBarrier>, Vec<u8>);
pub struct DisruptorRx(EventPoller<Event, SingleProducerBarrier>, Vec<u8>);

impl Tx for DisruptorTx {
    #[inline]
    fn try_send(&mut self, stamp: u64) -> bool {
        put_stamp(&mut self.1, stamp);
        let src = &self.1;
        self.0
            .try_publish(|e| {
                e.len = src.len();
                e.bytes[..src.len()].copy_from_slice(src);
            })
            .is_ok()
    }
}

impl Rx for DisruptorRx {
    #[inline]
    fn try_recv(&mut self) -> Option<u64> {
        let mut g = match self.0.take(1) {
            Ok(g) => g,
            Err(Polling::NoEvents) => return None,
            Err(Polling::Shutdown) => panic!("disruptor shut down under the benchmark"),
        };
        let e = (&mut g).next()?;
        self.1[..e.len].copy_from_slice(&e.bytes[..e.len]);
        Some(stamp_of(&self.1))
    }
}

impl InProcess for Disruptor {
    type Tx = DisruptorTx;
    type Rx = DisruptorRx;
    fn name(&self) -> String {
        "disruptor 4.4 (in-process)".into()
    }
    fn note(&self) -> String {
        format!("single producer, {SLOTS} events of up to {MAX} B, event poller")
    }
    fn channel(&mut self, size: usize, _: f64) -> Result<(DisruptorTx, DisruptorRx), Box<dyn Error>> {
        if size > MAX {
            return Err(format!("disruptor events hold at most {MAX} B").into());
        }
        let builder = build_single_producer(SLOTS, || Event { len: 0, bytes: [0; MAX] }, BusySpin);
        let (poller, builder) = builder.new_event_poller();
        let producer = builder.build();
        Ok((DisruptorTx(producer, message(size)), DisruptorRx(poller, message(size))))
    }
}
