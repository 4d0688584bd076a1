//! Which fabric the trading apps meet on, and opening their streams over RDMA: market data by
//! ud-mcast (with recovery of lost datagrams from the exchange's history by RDMA READ), orders
//! and reports by rdma-rc, each publisher listening on a control address its reader connects
//! to. Every wait here is set-up, bounded by `--wait-secs`; none is on the trading loop.
use std::net::{Ipv4Addr, SocketAddr};

use clap::{Args, ValueEnum};

/// Where the apps' streams run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Fabric {
    /// Shared-memory rings on this host, by name.
    Shm,
    /// RDMA between hosts (or devices): market data by ud-mcast, orders and reports by
    /// rdma-rc (build with `--features rdma`).
    Rdma,
}

/// Where the streams meet over RDMA. The same addresses are given to both apps: the one that
/// publishes a stream listens there, the other connects.
#[derive(Args, Debug, Clone)]
pub struct RdmaArgs {
    /// rdma: the market data's multicast group.
    #[arg(long, default_value = "239.77.50.1")]
    pub md_group: Ipv4Addr,
    /// rdma: where the exchange offers recovery of lost market data (the trader connects).
    #[arg(long, default_value = "127.0.0.1:47101")]
    pub md_recovery: SocketAddr,
    /// rdma: the trader's order stream (the trader listens, the gateway connects).
    #[arg(long, default_value = "127.0.0.1:47102")]
    pub orders_at: SocketAddr,
    /// rdma: the gateway's report stream (the gateway listens, the trader connects).
    #[arg(long, default_value = "127.0.0.1:47103")]
    pub execs_at: SocketAddr,
    /// rdma: the RDMA device (default: TICKBUS_RDMA_DEVICE, else the first).
    #[arg(long)]
    pub device: Option<String>,
    /// rdma: the shared secret every handshake proves (and the multicast queue key comes from).
    #[arg(long, default_value = "tickbus-pipeline")]
    pub token: String,
}

/// The error for `--fabric rdma` in a build without RDMA.
#[cfg(not(feature = "rdma"))]
pub fn no_rdma() -> String {
    "this tickbus was built without RDMA: build it with `--features rdma` for --fabric rdma".into()
}

#[cfg(feature = "rdma")]
pub use with_rdma::*;

#[cfg(feature = "rdma")]
mod with_rdma {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use tickbus::mcast::{McastPublisher, McastPublisherOptions, McastSubscriber, McastSubscriberOptions};
    use tickbus::rdma::{PublisherOptions, RdmaPublisher, RdmaSubscriber, SubscriberOptions};
    use tickbus::RingConfig;

    use super::RdmaArgs;
    use crate::link::{In, Out};

    /// The market data's stream id on the multicast group.
    pub const MD_STREAM: u32 = 1;
    /// Datagrams the exchange keeps for recovery (at 1M msg/s, 65 ms of market data).
    const HISTORY: u32 = 1 << 16;

    /// Retries `f` (a connect the peer may not be listening for yet) until it works or `wait`
    /// passes.
    fn retry<T, E: std::fmt::Display>(
        what: &str,
        wait: Duration,
        stop: &AtomicBool,
        mut f: impl FnMut() -> Result<T, E>,
    ) -> Result<T, String> {
        let deadline = Instant::now() + wait;
        loop {
            match f() {
                Ok(t) => return Ok(t),
                Err(e) if Instant::now() >= deadline || stop.load(Ordering::Acquire) => {
                    return Err(format!(
                        "{what}: {e} (after {wait:?}: is the other app running, with the same addresses and token?)"
                    ));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// The exchange's market data: a multicast publisher, offering recovery at `md_recovery`.
    pub fn md_out(a: &RdmaArgs) -> Result<Out, String> {
        let mut o = McastPublisherOptions::default();
        o.device = a.device.clone();
        o.token = Some(a.token.clone().into_bytes());
        o.history = HISTORY;
        let mut p = McastPublisher::new(a.md_group, MD_STREAM, &o).map_err(|e| format!("market data: {e}"))?;
        p.listen_recovery(a.md_recovery, a.token.clone()).map_err(|e| format!("market data recovery: {e}"))?;
        Ok(Out::Mcast { publisher: p, stream: MD_STREAM })
    }

    /// The trader's market data: joins the group, then connects recovery (waiting for the
    /// exchange to listen).
    pub fn md_in(a: &RdmaArgs, wait: Duration, stop: &AtomicBool) -> Result<In, String> {
        let mut o = McastSubscriberOptions::default();
        o.device = a.device.clone();
        o.token = Some(a.token.clone().into_bytes());
        o.depth = 4096;
        let mut sub = McastSubscriber::join(a.md_group, MD_STREAM, &o).map_err(|e| format!("market data: {e}"))?;
        let token = a.token.as_bytes();
        retry("connecting market-data recovery", wait, stop, || {
            sub.connect_recovery(a.md_recovery, token, 64, Duration::from_secs(5))
        })?;
        Ok(In::Mcast { sub, failed: None })
    }

    /// A reliable rdma-rc stream this app publishes, listening at `at`.
    pub fn publisher(at: std::net::SocketAddr, cfg: &RingConfig, a: &RdmaArgs) -> Result<Out, String> {
        let mut o = PublisherOptions::new(a.token.clone());
        o.device = a.device.clone();
        RdmaPublisher::bind(at, cfg, o)
            .map(Out::Rdma)
            .map_err(|e| format!("publishing stream {} at {at}: {e}", cfg.stream_id))
    }

    /// A reliable rdma-rc stream this app reads, from the publisher at `at` (waiting for it).
    /// The publisher's side of a handshake finishes on its publishing thread, so two apps that
    /// each publish and read (trader and gateway) would wait on each other: `own`, this app's
    /// publisher, is kept polled meanwhile (the connect runs on a helper thread).
    pub fn subscriber(
        at: std::net::SocketAddr,
        stream: u32,
        a: &RdmaArgs,
        own: &mut Out,
        wait: Duration,
        stop: &AtomicBool,
    ) -> Result<In, String> {
        let mut o = SubscriberOptions::new(a.token.clone());
        o.device = a.device.clone();
        let sub = std::thread::scope(|s| {
            let connecting = s.spawn(|| {
                retry(&format!("reading stream {stream} from {at}"), wait, stop, || {
                    RdmaSubscriber::connect(at, stream, &o)
                })
            });
            while !connecting.is_finished() {
                own.idle();
                std::thread::sleep(Duration::from_millis(1));
            }
            connecting.join().map_err(|_| "the connecting thread panicked".to_string())?
        })?;
        Ok(In::Rdma { sub, failed: None })
    }

    /// Waits until the rdma-rc publisher `out` has taken its reader in. A reader that gave up
    /// on an earlier handshake (it timed out while this app was busy) is let go, and its next
    /// try awaited; the last such reason is in the error if none arrives.
    pub fn wait_for_reader(out: &mut Out, who: &str, wait: Duration, stop: &AtomicBool) -> Result<(), String> {
        let Out::Rdma(p) = out else { return Ok(()) };
        let deadline = Instant::now() + wait;
        let mut last = String::new();
        while p.subscribers().is_empty() {
            p.poll();
            for (peer, e) in p.take_dropped() {
                log::info!("{who} at {peer} left before starting ({e}); waiting for its next try");
                last = format!(" (the last try from {peer} ended: {e})");
            }
            if Instant::now() >= deadline || stop.load(Ordering::Acquire) {
                return Err(format!("{who} did not connect to {} within {wait:?}{last}", p.local_addr()));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    }
}
