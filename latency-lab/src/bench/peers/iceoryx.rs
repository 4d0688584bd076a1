//! iceoryx2 0.10 publish-subscribe between two processes (its zero-copy IPC): one service per
//! direction carrying `[u8]` slices, a publisher loaning and sending a sample, a subscriber
//! polling `receive`. One message in flight at a time (ping-pong).
use std::error::Error;

use iceoryx2::port::publisher::Publisher;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::prelude::*;

use crate::bench::transport::{message, put_stamp, stamp_of, CrossProcess, Rx, Tx};

pub struct Iceoryx2;

pub struct IoxTx {
    _node: Node<ipc::Service>,
    publisher: Publisher<ipc::Service, [u8], ()>,
    buf: Vec<u8>,
}

pub struct IoxRx {
    _node: Node<ipc::Service>,
    subscriber: Subscriber<ipc::Service, [u8], ()>,
    buf: Vec<u8>,
}

impl Tx for IoxTx {
    #[inline]
    fn try_send(&mut self, stamp: u64) -> bool {
        put_stamp(&mut self.buf, stamp);
        let Ok(sample) = self.publisher.loan_slice_uninit(self.buf.len()) else { return false };
        sample.write_from_slice(&self.buf).send().is_ok()
    }
}

impl Rx for IoxRx {
    #[inline]
    fn try_recv(&mut self) -> Option<u64> {
        let sample = self.subscriber.receive().ok()??;
        let p = sample.payload();
        self.buf[..p.len()].copy_from_slice(p);
        Some(stamp_of(&self.buf))
    }
}

type Service = iceoryx2::service::port_factory::publish_subscribe::PortFactory<ipc::Service, [u8], ()>;

fn service(channel: &str) -> Result<(Node<ipc::Service>, Service), Box<dyn Error>> {
    set_log_level(LogLevel::Error);
    let node = NodeBuilder::new().create::<ipc::Service>()?;
    let name: ServiceName = channel.try_into()?;
    let service = node
        .service_builder(&name)
        .publish_subscribe::<[u8]>()
        .max_publishers(1)
        .max_subscribers(1)
        .history_size(0)
        .subscriber_max_buffer_size(16)
        .open_or_create()?;
    Ok((node, service))
}

impl CrossProcess for Iceoryx2 {
    type Tx = IoxTx;
    type Rx = IoxRx;
    const KEY: &'static str = "iceoryx2";
    fn name(&self) -> String {
        "iceoryx2 0.10 (2 processes)".into()
    }
    fn note(&self) -> String {
        "ipc service per direction, [u8] slices, loan + send, busy-polled receive".into()
    }
    fn tx(&self, channel: &str, size: usize, _: f64) -> Result<IoxTx, Box<dyn Error>> {
        let (node, service) = service(channel)?;
        let publisher = service.publisher_builder().initial_max_slice_len(size).create()?;
        Ok(IoxTx { _node: node, publisher, buf: message(size) })
    }
    fn rx(&self, channel: &str, size: usize) -> Result<IoxRx, Box<dyn Error>> {
        let (node, service) = service(channel)?;
        let subscriber = service.subscriber_builder().create()?;
        Ok(IoxRx { _node: node, subscriber, buf: message(size) })
    }
}
