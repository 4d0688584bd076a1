//! ud-mcast with recovery: one UD SEND per message reaches every subscriber of the group (the
//! fabric copies it); a subscriber that falls behind loses datagrams, sees the gap, and reads
//! the lost messages back from the publisher's history with RDMA READs (the publisher's CPU
//! does nothing for it). This program is the publisher and starts itself again as a subscriber
//! (`mcast_pubsub sub RECOVERY_ADDR`) on the peer device; the subscriber deliberately stops
//! polling while the burst goes out, so most of it must be recovered.
//!
//! Needs RDMA devices that join multicast groups (Soft-RoCE in the rig's guest does);
//! `TICKBUS_RDMA_DEVICE` / `TICKBUS_RDMA_PEER_DEVICE` pick them.
//! Run: `cargo run --release -p tickbus --features rdma --example mcast_pubsub`
use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tickbus::mcast::{McastError, McastPublisher, McastPublisherOptions, McastSubscriber, McastSubscriberOptions};
use tickbus::Recv;

const GROUP: Ipv4Addr = Ipv4Addr::new(239, 77, 9, 1);
const STREAM: u32 = 7;
const MESSAGES: u64 = 300;
const TOKEN: &[u8] = b"example-token"; // derives the queue key; recovery requires it

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
    let mut opts = McastPublisherOptions::default();
    opts.device = devices().0;
    opts.token = Some(TOKEN.to_vec());
    opts.history = 1024; // the last 1024 messages can be read back
    let mut publisher = McastPublisher::new(GROUP, STREAM, &opts)?;
    let at = publisher.listen_recovery("127.0.0.1:0".parse()?, TOKEN)?;
    let mut sub = Command::new(std::env::current_exe()?)
        .args(["sub", &at.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut lines = BufReader::new(sub.stdout.take().ok_or("no stdout")?).lines();
    publisher.accept_recovery(Duration::from_secs(30))?;
    let ready = lines.next().ok_or("the subscriber ended")??;
    if ready != "ready" {
        return Err(format!("the subscriber said {ready:?}").into());
    }
    // A burst while the subscriber is not polling: its 64 receive slots overflow.
    let mut buf = [0u8; 64];
    for seq in 0..MESSAGES {
        buf[..8].copy_from_slice(&seq.to_le_bytes());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match publisher.publish(&buf) {
                Ok(_) => break,
                Err(McastError::SendQueueFull { .. }) if Instant::now() < deadline => std::hint::spin_loop(),
                Err(e) => return Err(e.into()),
            }
        }
    }
    publisher.flush(Duration::from_secs(10))?;
    std::thread::sleep(Duration::from_millis(300)); // the fabric delivers or drops
    writeln!(sub.stdin.as_mut().ok_or("no stdin")?, "go")?;
    let drained = lines.next().ok_or("the subscriber ended")??; // it took what its slots held
    if drained != "drained" {
        return Err(format!("the subscriber said {drained:?}").into());
    }
    publisher.heartbeat()?; // when quiet: tells subscribers where the stream is (a lost tail)
    println!("publisher: sent {MESSAGES} messages by UD multicast, one SEND each");
    let said = lines.next().ok_or("the subscriber ended")??;
    println!("{said}");
    if !sub.wait()?.success() {
        return Err("the subscriber failed".into());
    }
    Ok(())
}

fn subscribe(recovery: std::net::SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
    let mut opts = McastSubscriberOptions::default();
    opts.device = devices().1;
    opts.token = Some(TOKEN.to_vec());
    opts.depth = 64; // receive slots: what may arrive between two polls
    let mut sub = McastSubscriber::join(GROUP, STREAM, &opts)?;
    sub.connect_recovery(recovery, TOKEN, 64, Duration::from_secs(30))?;
    println!("ready");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go)?; // not polling meanwhile: the burst overflows the slots
    let (mut next, mut missed) = (0u64, 0u64);
    // What the receive slots held arrives at once; the rest was dropped by the NIC and only a
    // later datagram (the publisher's heartbeat) reveals that it was ever sent.
    while let Some(r) = sub.try_recv()? {
        match r {
            Recv::Message(m) if m.position == next => next += 1,
            Recv::Message(m) => return Err(format!("position {} arrived, expected {next}", m.position).into()),
            Recv::Gap(g) => return Err(format!("a gap before the heartbeat: {g:?}").into()),
        }
    }
    println!("drained");
    let deadline = Instant::now() + Duration::from_secs(30);
    while next + missed < MESSAGES {
        match sub.try_recv()? {
            Some(Recv::Message(m)) => {
                let seq = u64::from_le_bytes(m.payload[..8].try_into()?);
                if (m.position, seq) != (next + missed, next + missed) {
                    return Err(format!("message {seq} at {}, expected {}", m.position, next + missed).into());
                }
                next += 1;
            }
            Some(Recv::Gap(g)) => missed += g.missed(), // what the history no longer held
            None if Instant::now() > deadline => return Err(format!("{next} delivered, {missed} lost in 30 s").into()),
            None => std::hint::spin_loop(),
        }
    }
    let recovered = sub.stats().recovered;
    println!("subscriber: received {next} messages in order ({recovered} recovered from the publisher's history), {missed} lost");
    Ok(())
}
