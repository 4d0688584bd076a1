//! ud-mcast fan-out across the rig's two guests: the publisher in guest 0, 1, 2 and 4
//! subscribers in guest 1, on the private link between them (`rxe_eth` in each).
//!
//! Why: in one guest the ud-mcast publisher's cost grew with N (2.6x at 2, 3.8x at 4). The
//! suspected cause is where Soft-RoCE delivers, not tickbus: rxe's send goes out through a veth
//! whose peer is in the same kernel, so the receive softirq (which clones the packet for each
//! attached QP) runs in the sender's own system call. Here the receivers are another kernel's
//! work, as they would be behind a switch; if the publisher's cost is then flat in N, the
//! one-guest growth was the emulated fabric's.
//!
//! Only the publisher's cost per message is measured: the two guests' TSCs are not comparable, so
//! subscriber latencies would mean nothing. Each subscriber's count of messages (and of losses)
//! is checked. Guest 1 takes orders over a TCP line on the link: `join N GROUP MESSAGES`, then
//! `done`, and answers `ready` and the counts.
use std::error::Error;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickbus::mcast::{McastError, McastPublisher, McastPublisherOptions, McastSubscriber, McastSubscriberOptions};
use tickbus::time::TscScale;

use crate::fanout::{FanoutReport, FanoutRow};
use crate::rdma_fanout::{publish_paced, subscriber};

/// The coordination port guest 0 listens on.
const PORT: u16 = 7700;
/// The device on each guest's end of the link.
pub const DEVICE: &str = "rxe_eth";

/// Guest 0: publishes to 1, 2 and 4 subscribers in guest 1 and reports the publisher's cost.
pub fn publisher_side(
    rate: u64,
    messages: u64,
    counts: &[usize],
    ticks_per_ns: f64,
) -> Result<FanoutReport, Box<dyn Error>> {
    let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, PORT))?;
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => return Err(format!("guest 1 did not connect to port {PORT} within 120 s: {e}").into()),
        }
    };
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(300)))?;
    let mut out = stream.try_clone()?;
    let mut lines = BufReader::new(stream).lines();
    let mut answer = |want: &str| -> Result<String, Box<dyn Error>> {
        let line = lines.next().ok_or("guest 1 hung up")??;
        match line.strip_prefix(want) {
            Some(rest) => Ok(rest.trim().to_string()),
            None => Err(format!("guest 1 answered {line:?}, not {want:?}").into()),
        }
    };
    let mut rows = Vec::new();
    for (k, &n) in counts.iter().enumerate() {
        eprintln!("latency-lab: ud-mcast fan-out to {n} subscribers in the other guest ...");
        let group = Ipv4Addr::new(239, 77, 5, k as u8);
        writeln!(out, "join {n} {group} {messages}")?;
        answer("ready")?;
        let mut po = McastPublisherOptions::default();
        po.device = Some(DEVICE.into());
        let mut tx = McastPublisher::new(group, 1, &po)?;
        let (cost, late) = publish_paced(rate, messages, ticks_per_ns, |b| match tx.publish(b) {
            Ok(_) => Ok(true),
            Err(McastError::SendQueueFull { .. }) => Ok(false),
            Err(e) => Err(e.to_string()),
        })?;
        tx.flush(Duration::from_secs(10))?;
        writeln!(out, "done")?;
        let counts = answer("got")?;
        for (s, c) in counts.split_whitespace().enumerate() {
            let (got, lost) = c.split_once('/').ok_or_else(|| format!("guest 1 sent {c:?}, not got/lost"))?;
            let (got, lost): (u64, u64) = (got.parse()?, lost.parse()?);
            if got != messages || lost > 0 {
                return Err(format!(
                    "fan-out to {n} across guests: subscriber {s} received {got} of {messages} and lost {lost}"
                )
                .into());
            }
        }
        rows.push(FanoutRow {
            subscribers: n,
            publish_p50_ns: cost.value_at_quantile(0.5),
            publish_p99_ns: cost.value_at_quantile(0.99),
            sub_p50_ns: Vec::new(),
            sub_p99_ns: Vec::new(),
            late_sends: late,
        });
    }
    writeln!(out, "bye")?;
    let setup = format!(
        "{DEVICE} in guest 0 -> {DEVICE} in guest 1 (two kernels on a QEMU socket link), one UD SEND per message; \
         subscriber latency not measured (the guests' TSCs are not comparable), every message counted"
    );
    Ok(FanoutReport { transport: "ud-mcast (two Soft-RoCE guests)".into(), setup, rate, messages, rows })
}

/// Guest 1: joins subscribers as guest 0 asks and reports what each received.
pub fn subscriber_side(peer: Ipv4Addr) -> Result<(), Box<dyn Error>> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let stream = loop {
        match TcpStream::connect((peer, PORT)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(format!("guest 0's port {PORT}: {e}").into()),
        }
    };
    let mut out = stream.try_clone()?;
    let mut lines = BufReader::new(stream).lines();
    while let Some(line) = lines.next() {
        let line = line?;
        let f: Vec<&str> = line.split_whitespace().collect();
        match f[..] {
            ["join", n, group, messages] => {
                let (n, group, messages): (usize, Ipv4Addr, u64) = (n.parse()?, group.parse()?, messages.parse()?);
                let done = Arc::new(AtomicBool::new(false));
                // Latencies are not read (other guest's TSC): any scale will do.
                let scale = TscScale { ticks_per_ns: 1.0 };
                let subs: Vec<_> = (0..n)
                    .map(|_| {
                        let mut so = McastSubscriberOptions::default();
                        so.device = Some(DEVICE.into());
                        Ok(subscriber(McastSubscriber::join(group, 1, &so)?, messages, scale, done.clone()))
                    })
                    .collect::<Result<_, Box<dyn Error>>>()?;
                writeln!(out, "ready")?;
                let next = lines.next().ok_or("guest 0 hung up")??;
                if next != "done" {
                    return Err(format!("guest 0 sent {next:?}, not done").into());
                }
                done.store(true, Ordering::Release);
                let mut counts = Vec::new();
                for s in subs {
                    let (_, got, lost) = s.join().map_err(|_| "subscriber panicked")??;
                    counts.push(format!("{got}/{lost}"));
                }
                writeln!(out, "got {}", counts.join(" "))?;
            }
            ["bye"] => return Ok(()),
            _ => return Err(format!("guest 0 sent {line:?}").into()),
        }
    }
    Err("guest 0 hung up before bye".into())
}
