//! tickbus over RDMA beside perftest, in alternating rounds within one guest boot.
//!
//! Why rounds: under QEMU TCG the guest's speed drifts 3-5x within a boot, so perftest measured
//! once before all of tickbus's runs made ratios of 0.5x-1.2x out of the same code. Here each
//! round runs perftest and then tickbus back to back, each round gives its own ratio, and the
//! report gives the median ratio with its spread.
//!
//! Two yardsticks: latency (tickbus's ping-pong RTT p50 beside twice perftest's typical one-way
//! figure, `ib_write_lat` for rdma-rc and `ib_send_lat` UD for ud-mcast) and message rate
//! (tickbus publishing flat out beside `ib_write_bw` and `ib_send_bw` UD, same size, same
//! message count).

#[cfg(feature = "rdma")]
pub use run::{back_to_back, mcast_rate, rc_rate, RateRun};

#[cfg(feature = "rdma")]
mod run {
    use std::error::Error;
    use std::net::Ipv4Addr;
    use std::time::{Duration, Instant};

    use tickbus::mcast::{McastError, McastPublisher, McastPublisherOptions, McastSubscriber, McastSubscriberOptions};
    use tickbus::rdma::{PublisherOptions, RdmaError, RdmaPublisher, RdmaSubscriber, SubscriberOptions};
    use tickbus::ring::ClaimError;
    use tickbus::{Mode, Recv, RingConfig};

    use crate::bench::transport::message;

    /// One flat-out run: its rate and what the subscriber received.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct RateRun {
        pub msgs_per_s: f64,
        pub delivered: u64,
        pub missed: u64,
        /// Messages the subscriber received per second of the run (ud-mcast: below the
        /// sender's rate when its receive queue overflowed).
        pub goodput: f64,
        /// Datagrams that were not frames of the stream (skipped).
        pub foreign: u64,
    }

    /// Runs `perftest` and `ours` back to back and returns (perftest's figure, ours). Odd
    /// rounds run perftest first, even rounds tickbus first, so a drift within a round does not
    /// push every ratio the same way.
    pub fn back_to_back<P, O>(
        size: usize,
        what: &str,
        round: usize,
        rounds: usize,
        perftest: impl FnOnce() -> Result<P, Box<dyn Error>>,
        ours: impl FnOnce() -> Result<O, Box<dyn Error>>,
    ) -> Result<(P, O), Box<dyn Error>> {
        if round % 2 == 1 {
            eprintln!("latency-lab: {what}{size} B round {round}/{rounds}: perftest, then tickbus ...");
            let p = perftest()?;
            Ok((p, ours()?))
        } else {
            eprintln!("latency-lab: {what}{size} B round {round}/{rounds}: tickbus, then perftest ...");
            let o = ours()?;
            Ok((perftest()?, o))
        }
    }

    /// Longest a rate run may take, whatever the guest's speed.
    const LIMIT: Duration = Duration::from_secs(120);

    /// rdma-rc, reliable: `messages` messages of `size` bytes published with `publish_batch`
    /// (one chained post per burst, selective signalling) from `devices.0` to a subscriber on
    /// `devices.1` that reads them all. The rate runs from the first publish to the subscriber
    /// holding the last message: every message delivered, none dropped, the credit loop
    /// included (perftest's `ib_write_bw` has no receiver in its loop).
    pub fn rc_rate(
        devices: (&str, &str),
        size: usize,
        messages: u64,
        ticks_per_ns: f64,
    ) -> Result<RateRun, Box<dyn Error>> {
        let cfg = RingConfig { ticks_per_ns, ..RingConfig::for_payload(Mode::Reliable, 1, size.max(8), 1024) };
        let mut po = PublisherOptions::new("latency-lab-rate");
        po.device = Some(devices.0.into());
        let mut so = SubscriberOptions::new("latency-lab-rate");
        so.device = Some(devices.1.into());
        let mut tx = RdmaPublisher::bind("127.0.0.1:0".parse()?, &cfg, po)?;
        let addr = tx.local_addr();
        let sub = std::thread::spawn(move || RdmaSubscriber::connect(addr, 1, &so).map_err(|e| e.to_string()));
        tx.accept(Duration::from_secs(30))?;
        let mut rx = sub.join().map_err(|_| "subscriber thread panicked")??;
        let reader = std::thread::spawn(move || -> Result<(u64, u64, Instant), String> {
            let (mut delivered, mut missed) = (0u64, 0u64);
            let deadline = Instant::now() + LIMIT;
            while delivered + missed < messages {
                match rx.try_recv() {
                    Ok(Some(Recv::Message(_))) => delivered += 1,
                    Ok(Some(Recv::Gap(g))) => missed += g.missed(),
                    Ok(None) if Instant::now() > deadline => {
                        return Err(format!("rdma-rc rate: {delivered} of {messages} delivered in {LIMIT:?}"))
                    }
                    // Emulated vCPUs: let rxe's kernel threads have the core when idle.
                    Ok(None) => std::thread::yield_now(),
                    Err(e) => return Err(format!("rdma-rc rate: receive failed: {e}")),
                }
            }
            Ok((delivered, missed, Instant::now()))
        });
        let msg = message(size);
        let batch: Vec<&[u8]> = vec![&msg[..]; tx.max_batch()];
        let (t0, mut sent) = (Instant::now(), 0u64);
        while sent < messages {
            let k = batch.len().min((messages - sent) as usize);
            match tx.publish_batch(&batch[..k]) {
                Ok((_, n)) => sent += n as u64,
                Err(RdmaError::Claim(ClaimError::Full { .. })) => std::thread::yield_now(),
                Err(e) => return Err(format!("rdma-rc rate: publish failed after {sent}: {e}").into()),
            }
            if let Some((peer, e)) = tx.take_dropped().into_iter().next() {
                return Err(format!("rdma-rc rate: subscriber {peer} dropped: {e}").into());
            }
            if t0.elapsed() > LIMIT {
                return Err(format!("rdma-rc rate: {sent} of {messages} published in {LIMIT:?}").into());
            }
        }
        while !reader.is_finished() {
            tx.poll();
            std::thread::yield_now();
        }
        let (delivered, missed, done) = reader.join().map_err(|_| "reader thread panicked")??;
        if delivered != messages || missed != 0 {
            return Err(format!(
                "rdma-rc rate: a reliable stream delivered {delivered} of {messages}, {missed} missed"
            )
            .into());
        }
        let rate = messages as f64 / (done - t0).as_secs_f64();
        Ok(RateRun { msgs_per_s: rate, delivered, missed, goodput: rate, foreign: 0 })
    }

    /// ud-mcast: `messages` datagrams of `size` bytes sent flat out with `publish_batch` (one
    /// chained post per burst, selective signalling) from `devices.0` to a group
    /// a subscriber on `devices.1` has joined (reading as it goes). The rate is the sender's,
    /// from the first send to the NIC completing the last (`flush`), as `ib_send_bw`'s is; what
    /// the subscriber received and missed (UD drops what its receive queue cannot hold) is
    /// reported beside it.
    pub fn mcast_rate(devices: (&str, &str), size: usize, messages: u64, group: u8) -> Result<RateRun, Box<dyn Error>> {
        let group = Ipv4Addr::new(239, 77, 3, group);
        let mut so = McastSubscriberOptions::default();
        so.device = Some(devices.1.into());
        let mut rx = McastSubscriber::join(group, 1, &so)?;
        let mut po = McastPublisherOptions::default();
        po.device = Some(devices.0.into());
        let mut tx = McastPublisher::new(group, 1, &po)?;
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sent_all = done.clone();
        let reader = std::thread::spawn(move || -> Result<(u64, u64, u64), String> {
            let (mut delivered, mut missed, mut foreign) = (0u64, 0u64, 0u64);
            let mut quiet_since: Option<Instant> = None;
            let deadline = Instant::now() + LIMIT;
            while delivered + missed < messages && Instant::now() < deadline {
                match rx.try_recv() {
                    Ok(Some(Recv::Message(_))) => (delivered, quiet_since) = (delivered + 1, None),
                    Ok(Some(Recv::Gap(g))) => (missed, quiet_since) = (missed + g.missed(), None),
                    Ok(None) if sent_all.load(std::sync::atomic::Ordering::Acquire) => {
                        // The last datagrams may be the ones lost: stop once the group is quiet.
                        let since = *quiet_since.get_or_insert_with(Instant::now);
                        if since.elapsed() > Duration::from_millis(500) {
                            break;
                        }
                        std::thread::yield_now();
                    }
                    Ok(None) => std::thread::yield_now(),
                    Err(McastError::Frame { .. }) => foreign += 1,
                    Err(e) => return Err(format!("ud-mcast rate: receive failed: {e}")),
                }
            }
            Ok((delivered, missed, foreign))
        });
        let msg = message(size);
        let batch: Vec<&[u8]> = vec![&msg[..]; tx.max_batch()];
        let (t0, mut sent) = (Instant::now(), 0u64);
        while sent < messages {
            let k = batch.len().min((messages - sent) as usize);
            match tx.publish_batch(&batch[..k]) {
                Ok((_, n)) => sent += n as u64,
                Err(McastError::SendQueueFull { .. }) => std::hint::spin_loop(),
                Err(e) => return Err(format!("ud-mcast rate: publish failed after {sent}: {e}").into()),
            }
            if t0.elapsed() > LIMIT {
                return Err(format!("ud-mcast rate: {sent} of {messages} sent in {LIMIT:?}").into());
            }
        }
        tx.flush(Duration::from_secs(10))?;
        let secs = t0.elapsed().as_secs_f64();
        done.store(true, std::sync::atomic::Ordering::Release);
        let (delivered, missed, foreign) = reader.join().map_err(|_| "reader thread panicked")??;
        if delivered == 0 {
            return Err(format!("ud-mcast rate: the subscriber received none of {messages} messages").into());
        }
        Ok(RateRun { msgs_per_s: messages as f64 / secs, delivered, missed, goodput: delivered as f64 / secs, foreign })
    }
}
