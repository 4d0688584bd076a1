//! ud-mcast fan-out across the rig's two guests: the publisher in guest 0, 1, 2 and 4
//! subscribers in guest 1, on the private link between them (`rxe_eth` in each).
//!
//! Why: in one guest the ud-mcast publisher's cost grows with N (the one-guest fan-out in the
//! same report). The suspected cause is where Soft-RoCE delivers, not tickbus: rxe's send goes
//! out through a veth whose peer is in the same kernel, so the receive softirq (which clones the
//! packet for each attached QP) runs in the sender's own system call. Here the receivers are
//! another kernel's work, as they would be behind a switch; if the publisher's cost is then flat
//! in N, the one-guest growth was the emulated fabric's.
//!
//! Only the publisher's cost per message is measured: the two guests' TSCs are not comparable, so
//! subscriber latencies would mean nothing. Each subscriber's count of messages (and of losses)
//! is checked and reported. Subscriber counts run in rounds, in turn ascending and descending,
//! and each count's histograms are merged over the rounds, so TCG's drift within a boot does not
//! land on one count only.
//!
//! Guest 1 takes orders over a TCP line on the link: `join N GROUP MESSAGES`, then `done`, and
//! answers `ready`, then `got G/L ...` (one per subscriber), or `ERR <cause>` and exits. Every
//! wait on either side is bounded.
use std::error::Error;
use std::io::{BufRead, BufReader, Lines, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tickbus::mcast::{McastSubscriber, McastSubscriberOptions};
use tickbus::time::TscScale;

use crate::bench::harness::histogram;
use crate::bench::rdma_fanout::{mcast_paced, subscriber};
use crate::model::fanout::{FanoutReport, FanoutRow};

/// The coordination port guest 0 listens on.
const PORT: u16 = 7700;
/// The device on each guest's end of the link.
pub const DEVICE: &str = "rxe_eth";
/// How long guest 0 waits for guest 1 to connect, and guest 1 for guest 0 to listen.
const CONNECT: Duration = Duration::from_secs(120);
/// How long guest 0 waits for `ready` (N subscribers joining in an emulated guest).
const READY: Duration = Duration::from_secs(30);
/// How long guest 0 waits for the counts: a subscriber gives up after its own 120 s limit.
const COUNTS: Duration = Duration::from_secs(150);
/// How long guest 1 waits for guest 0's next line: a run's publishing (bounded by its own
/// 120 s limit) plus the flush, with room.
const NEXT: Duration = Duration::from_secs(200);

type Lined = Lines<BufReader<TcpStream>>;

/// The next line from the peer within `limit`, or an error saying what was awaited. `sock` is
/// the socket under `lines` (a clone: the timeout is the socket's).
fn next_line(lines: &mut Lined, sock: &TcpStream, limit: Duration, what: &str) -> Result<String, String> {
    sock.set_read_timeout(Some(limit)).map_err(|e| format!("setting a read timeout: {e}"))?;
    match lines.next() {
        Some(Ok(l)) => Ok(l),
        Some(Err(e)) => Err(format!("waiting {limit:?} for {what}: {e}")),
        None => Err(format!("the other guest hung up while this one waited for {what}")),
    }
}

/// Guest 0: publishes to 1, 2 and 4 subscribers in guest 1, `rounds` times each, and reports
/// the publisher's cost.
pub fn publisher_side(
    rate: u64,
    messages: u64,
    counts: &[usize],
    rounds: usize,
    ticks_per_ns: f64,
) -> Result<FanoutReport, Box<dyn Error>> {
    let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, PORT))?;
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + CONNECT;
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return Err(format!("guest 1 did not connect to port {PORT} within {CONNECT:?}").into())
            }
            Err(e) => return Err(format!("accepting guest 1 on port {PORT}: {e}").into()),
        }
    };
    stream.set_nonblocking(false)?;
    let mut out = stream.try_clone()?;
    let sock = stream.try_clone()?;
    let mut lines = BufReader::new(stream).lines();
    let mut answer = |limit: Duration, want: &str| -> Result<String, Box<dyn Error>> {
        let line = next_line(&mut lines, &sock, limit, &format!("guest 1's {want:?}"))?;
        if let Some(cause) = line.strip_prefix("ERR ") {
            return Err(format!("guest 1 failed: {cause}").into());
        }
        match line.split_once(' ').map_or((line.as_str(), ""), |(a, b)| (a, b)) {
            (w, rest) if w == want => Ok(rest.to_string()),
            _ => Err(format!("guest 1 answered {line:?}, not {want:?}").into()),
        }
    };
    // Per subscriber count: merged publish costs, late sends, and per-subscriber deliveries.
    let mut merged: Vec<(Histogram<u64>, u64, Vec<u64>)> =
        counts.iter().map(|&n| (histogram(), 0, vec![0; n])).collect();
    for round in 0..rounds {
        let order: Vec<usize> =
            if round % 2 == 0 { (0..counts.len()).collect() } else { (0..counts.len()).rev().collect() };
        for k in order {
            let n = counts[k];
            eprintln!("latency-lab: ud-mcast fan-out to {n} subscribers in the other guest, round {} ...", round + 1);
            let group = Ipv4Addr::new(239, 77, 5, (round * counts.len() + k) as u8);
            writeln!(out, "join {n} {group} {messages}")?;
            answer(READY, "ready")?;
            let (cost, late) = mcast_paced(DEVICE, group, rate, messages, ticks_per_ns)?;
            writeln!(out, "done")?;
            let got = answer(COUNTS, "got")?;
            let seen: Vec<&str> = got.split_whitespace().collect();
            if seen.len() != n {
                return Err(format!("guest 1 reported {} subscribers for a fan-out to {n}: {got:?}", seen.len()).into());
            }
            for (s, c) in seen.iter().enumerate() {
                let parsed =
                    c.split_once('/').and_then(|(g, l)| Some((g.parse::<u64>().ok()?, l.parse::<u64>().ok()?)));
                let (delivered, lost) = parsed.ok_or_else(|| format!("guest 1 sent {c:?}, not delivered/lost"))?;
                if delivered != messages || lost > 0 {
                    return Err(format!(
                        "fan-out to {n} across guests: subscriber {s} received {delivered} of {messages} and lost {lost}"
                    )
                    .into());
                }
                merged[k].2[s] += delivered;
            }
            merged[k].0.add(&cost)?;
            merged[k].1 += late;
        }
    }
    writeln!(out, "bye")?;
    let rows = counts
        .iter()
        .zip(merged)
        .map(|(&n, (cost, late, delivered))| FanoutRow {
            subscribers: n,
            publish_p50_ns: cost.value_at_quantile(0.5),
            publish_p99_ns: cost.value_at_quantile(0.99),
            sub_p50_ns: Vec::new(),
            sub_p99_ns: Vec::new(),
            late_sends: late,
            delivered,
        })
        .collect();
    let setup = format!(
        "{DEVICE} in guest 0 -> {DEVICE} in guest 1 (two kernels on a QEMU socket link), one UD SEND per message, \
         {rounds} rounds (ascending, then descending N) merged; subscriber latency not measured (the guests' TSCs \
         are not comparable), every message counted"
    );
    Ok(FanoutReport {
        transport: "ud-mcast (two Soft-RoCE guests)".into(),
        setup,
        rate,
        messages: messages * rounds as u64,
        rows,
    })
}

/// Guest 1: joins subscribers as guest 0 asks and reports what each received. On any failure it
/// tells guest 0 why (`ERR <cause>`) before returning the error.
pub fn subscriber_side(peer: Ipv4Addr) -> Result<(), Box<dyn Error>> {
    let deadline = Instant::now() + CONNECT;
    let addr = SocketAddr::from((peer, PORT));
    let stream = loop {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(format!("guest 0's port {PORT}, tried for {CONNECT:?}: {e}").into()),
        }
    };
    let mut out = stream.try_clone()?;
    let sock = stream.try_clone()?;
    let mut lines = BufReader::new(stream).lines();
    let r = serve(&mut lines, &sock, &mut out);
    if let Err(e) = &r {
        let _ = writeln!(out, "ERR {}", e.to_string().replace('\n', " "));
    }
    r
}

fn serve(lines: &mut Lined, sock: &TcpStream, out: &mut TcpStream) -> Result<(), Box<dyn Error>> {
    loop {
        let line = next_line(lines, sock, NEXT, "guest 0's next order")?;
        let f: Vec<&str> = line.split_whitespace().collect();
        match f[..] {
            ["join", n, group, messages] => {
                let bad = |what: &str| format!("guest 0 sent {line:?}: {what} is not a number or address");
                let n: usize = n.parse().map_err(|_| bad("N"))?;
                let group: Ipv4Addr = group.parse().map_err(|_| bad("GROUP"))?;
                let messages: u64 = messages.parse().map_err(|_| bad("MESSAGES"))?;
                let done = Arc::new(AtomicBool::new(false));
                // Latencies are not read (the other guest's TSC stamps them): any scale will do.
                let scale = TscScale { ticks_per_ns: 1.0 };
                let subs: Vec<_> = (0..n)
                    .map(|_| {
                        let mut so = McastSubscriberOptions::default();
                        so.device = Some(DEVICE.into());
                        Ok(subscriber(McastSubscriber::join(group, 1, &so)?, messages, scale, done.clone()))
                    })
                    .collect::<Result<_, Box<dyn Error>>>()?;
                writeln!(out, "ready")?;
                let next = next_line(lines, sock, NEXT, "guest 0's done");
                // The subscribers stop on their own (all counted, quiet after done, or their limit).
                done.store(true, Ordering::Release);
                let mut seen = Vec::new();
                for s in subs {
                    let (_, got, lost) = s.join().map_err(|_| "a subscriber thread panicked")??;
                    seen.push(format!("{got}/{lost}"));
                }
                if next? != "done" {
                    return Err("guest 0 sent something other than done after ready".into());
                }
                writeln!(out, "got {}", seen.join(" "))?;
            }
            ["bye"] => return Ok(()),
            _ => return Err(format!("guest 0 sent {line:?}, not join or bye").into()),
        }
    }
}
