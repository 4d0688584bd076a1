//! rdma-rc: a publisher RDMA-WRITEs each message into the subscriber's ring (its registered
//! hugepages) over a reliable connected QP; the subscriber busy-polls its own memory. Reliable
//! mode: the subscriber's credits flow back, so nothing is overwritten before it is read. This
//! program is the publisher and starts itself again as the subscriber (`rdma_pubsub sub ADDR`)
//! on the peer device, as two hosts would.
//!
//! Needs two RDMA devices (or Soft-RoCE, as in the rig's guest): `TICKBUS_RDMA_DEVICE` and
//! `TICKBUS_RDMA_PEER_DEVICE` pick them (default: the first two).
//! Run: `cargo run --release -p tickbus --features rdma --example rdma_pubsub`
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tickbus::rdma::{PublisherOptions, RdmaError, RdmaPublisher, RdmaSubscriber, SubscriberOptions};
use tickbus::ring::ClaimError;
use tickbus::{Mode, Recv, RingConfig};

const STREAM: u32 = 7;
const MESSAGES: u64 = 20_000;
const TOKEN: &str = "example-token"; // the shared secret both sides prove they hold

fn devices() -> (Option<String>, Option<String>) {
    let names = tickbus::rdma::device_names();
    let local = std::env::var("TICKBUS_RDMA_DEVICE").ok().or_else(|| names.first().cloned());
    let peer = std::env::var("TICKBUS_RDMA_PEER_DEVICE").ok().or_else(|| names.get(1).or(names.first()).cloned());
    (local, peer)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, role, addr] = &args[..] {
        if role == "sub" {
            return subscribe(addr.parse()?);
        }
    }
    let (local, _) = devices();
    let mut opts = PublisherOptions::new(TOKEN);
    opts.device = local;
    let cfg = RingConfig::for_payload(Mode::Reliable, STREAM, 64, 1024);
    let mut publisher = RdmaPublisher::bind("127.0.0.1:0".parse()?, &cfg, opts)?;
    let mut sub = Command::new(std::env::current_exe()?)
        .args(["sub", &publisher.local_addr().to_string()])
        .stdout(Stdio::piped())
        .spawn()?;
    publisher.accept(Duration::from_secs(30))?; // the subscriber's QP is connected and its ring registered
    let mut buf = [0u8; 64];
    let deadline = Instant::now() + Duration::from_secs(120);
    for seq in 0..MESSAGES {
        buf[..8].copy_from_slice(&seq.to_le_bytes());
        loop {
            match publisher.publish(&buf) {
                Ok(_) => break,
                // Full: the subscriber has not handed its credits back yet. Nothing is lost.
                Err(RdmaError::Claim(ClaimError::Full { .. })) if Instant::now() < deadline => std::hint::spin_loop(),
                Err(e) => return Err(e.into()),
            }
        }
        if let Some((peer, e)) = publisher.take_dropped().into_iter().next() {
            return Err(format!("subscriber {peer} dropped: {e}").into());
        }
    }
    println!("publisher: sent {MESSAGES} messages by RDMA WRITE");
    let mut said = String::new();
    BufReader::new(sub.stdout.take().ok_or("no stdout")?).read_line(&mut said)?;
    print!("{said}");
    if !sub.wait()?.success() {
        return Err("the subscriber failed".into());
    }
    Ok(())
}

fn subscribe(addr: std::net::SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
    let mut opts = SubscriberOptions::new(TOKEN);
    opts.device = devices().1;
    let mut sub = RdmaSubscriber::connect(addr, STREAM, &opts)?;
    let (mut next, deadline) = (0u64, Instant::now() + Duration::from_secs(120));
    while next < MESSAGES {
        match sub.try_recv()? {
            Some(Recv::Message(m)) => {
                let seq = u64::from_le_bytes(m.payload[..8].try_into()?);
                if (m.position, seq) != (next, next) {
                    return Err(format!("message {seq} at position {}, expected {next}", m.position).into());
                }
                next += 1;
            }
            Some(Recv::Gap(g)) => return Err(format!("a reliable stream has no gaps: {g:?}").into()),
            None if Instant::now() > deadline => return Err(format!("only {next} messages in 120 s").into()),
            None => std::hint::spin_loop(),
        }
    }
    println!("subscriber: received {next} messages in order, none missing");
    Ok(())
}
