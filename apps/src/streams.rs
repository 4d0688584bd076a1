//! The trading apps' three streams as channel URIs (`tickbus::stream::Channel`): `--md`,
//! `--orders`, `--execs`, each a URI (`shm:md`, `ud-mcast://239.77.50.1/1?recovery=...`,
//! `rdma-rc://10.0.0.2:47102/2`) or, as before URIs, a shm ring's bare name; or a TOML file
//! (`--streams desk.toml`) that names them once for every app of a desk:
//!
//! ```toml
//! [streams]
//! md = "ud-mcast://239.77.50.1/1?recovery=10.0.0.1:47101"
//! orders = "rdma-rc://10.0.0.2:47102/2"
//! execs = "rdma-rc://10.0.0.1:47103/3"
//! ```
//!
//! Flags override the file. Every app gives the same URIs: whoever publishes a stream opens it
//! as publisher (an rdma-rc publisher listens at the URI's address, its reader connects there).
//! Every wait here is set-up, bounded by `--wait-secs`; none is on the trading loop.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use tickbus::stream::{open_publisher, open_subscriber, Channel, Endpoint, OpenOptions, Reliability};
use tickbus::{Mode, RingConfig, StartAt};

use crate::link::{In, Out};

/// Where an app's streams are.
#[derive(Args, Debug, Clone, Default)]
pub struct StreamArgs {
    /// The market data: a channel URI or a shm ring's name [default: shm:md]
    #[arg(long, value_name = "URI")]
    pub md: Option<String>,
    /// The orders, trader to gateway: a channel URI or a shm ring's name [default: shm:orders]
    #[arg(long, value_name = "URI")]
    pub orders: Option<String>,
    /// The execution reports, gateway to trader: a channel URI or a shm ring's name
    /// [default: shm:execs]
    #[arg(long, value_name = "URI")]
    pub execs: Option<String>,
    /// A TOML file naming the streams (`[streams]` md, orders, execs = URIs): a desk writes its
    /// topology once; --md, --orders and --execs override it.
    #[arg(long, value_name = "FILE")]
    pub streams: Option<PathBuf>,
    /// The RDMA device for URIs that name none (default: TICKBUS_RDMA_DEVICE, else the first).
    #[arg(long)]
    pub device: Option<String>,
    /// The shared secret of rdma-rc and ud-mcast streams whose URI names no `token-env`.
    #[arg(long, default_value = "tickbus-pipeline")]
    pub token: String,
}

/// The three streams, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pub md: Channel,
    pub orders: Channel,
    pub execs: Channel,
}

/// `s` as a channel: a URI, or a bare shm ring name (no ':').
pub fn channel(flag: &str, s: &str) -> Result<Channel, String> {
    let c = if s.contains(':') { Channel::parse(s) } else { Channel::shm(s) };
    c.map_err(|e| format!("{flag}: {e}"))
}

/// The streams a TOML file names, by role.
fn from_file(path: &Path) -> Result<BTreeMap<String, String>, String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        streams: BTreeMap<String, String>,
    }
    let shown = path.display();
    let md = std::fs::symlink_metadata(path).map_err(|e| format!("--streams {shown}: {e}"))?;
    if !md.is_file() || md.len() > 1 << 20 {
        return Err(format!("--streams {shown}: not a regular file of at most 1 MiB"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("--streams {shown}: {e}"))?;
    let f: File = toml::from_str(&text).map_err(|e| format!("--streams {shown}: {e}"))?;
    if let Some(k) = f.streams.keys().find(|k| !["md", "orders", "execs"].contains(&k.as_str())) {
        return Err(format!("--streams {shown}: unknown stream {k:?} in [streams]: name md, orders and execs"));
    }
    Ok(f.streams)
}

impl StreamArgs {
    /// The three streams: each from its flag, else the file, else the shm default.
    pub fn resolve(&self) -> Result<Topology, String> {
        let file = match &self.streams {
            Some(p) => from_file(p)?,
            None => BTreeMap::new(),
        };
        let pick = |role: &str, flag: &Option<String>| -> Result<Channel, String> {
            match (flag, file.get(role)) {
                (Some(v), _) => channel(&format!("--{role}"), v),
                (None, Some(v)) => channel(&format!("[streams] {role} in the --streams file"), v),
                (None, None) => channel(&format!("--{role}"), &format!("shm:{role}")),
            }
        };
        let t = Topology {
            md: pick("md", &self.md)?,
            orders: pick("orders", &self.orders)?,
            execs: pick("execs", &self.execs)?,
        };
        for (role, c) in [("md", &t.md), ("orders", &t.orders), ("execs", &t.execs)] {
            check(role, c)?;
        }
        Ok(t)
    }

    /// Opening options: the secret, the device, how long to wait, the stop flag.
    pub fn options(&self, wait_secs: f64, stop: &Arc<AtomicBool>) -> OpenOptions {
        let mut o = OpenOptions::default();
        o.token = self.token.clone().into_bytes();
        o.device = self.device.clone();
        o.wait = Duration::from_secs_f64(wait_secs.max(0.0));
        o.stop = Some(stop.clone());
        o
    }
}

/// What the trading apps need of each stream, checked before anything is opened: market data is
/// lossy and goes by shm or ud-mcast (an rdma-rc publisher takes its readers in only while it
/// publishes, and the exchange publishes only once the trader is in: they would wait on each
/// other); orders and reports keep the apps' own layout (reliable, one reader, and the trader's
/// in-flight limit is a quarter of the ring: a smaller ring would deadlock the two apps).
fn check(role: &str, c: &Channel) -> Result<(), String> {
    let refuse = |why: &str| Err(format!("the {role} stream {c}: {why}"));
    if role == "md" {
        if matches!(c.endpoint, Endpoint::RdmaRc { .. }) {
            return refuse("market data goes by shm or ud-mcast, not rdma-rc");
        }
        if c.reliability == Some(Reliability::Reliable) || c.consumers.is_some() {
            return refuse("market data is lossy (the trader and the gateway observe it, never holding the feed back): drop reliable and consumers");
        }
        if c.payload.is_some_and(|p| p < 64) {
            return refuse("market data needs a payload of at least 64 bytes");
        }
        return Ok(());
    }
    if c.reliability == Some(Reliability::Lossy) || c.slots.is_some() || c.payload.is_some() || c.consumers.is_some() {
        return refuse(&format!(
            "its layout is the apps' own (reliable, {} slots, one reader): give no lossy, slots, payload or consumers",
            crate::pipeline::RING_SLOTS
        ));
    }
    Ok(())
}

/// The layout `cfg` as the defaults of `o` (what the URI does not say).
fn with_layout(o: &OpenOptions, cfg: &RingConfig) -> OpenOptions {
    let mut o = o.clone();
    o.reliability = match cfg.mode {
        Mode::Reliable => Reliability::Reliable,
        Mode::Lossy => Reliability::Lossy,
    };
    (o.stream, o.slots, o.payload, o.consumers) = (cfg.stream_id, cfg.slot_count, cfg.max_payload(), cfg.max_consumers);
    o
}

/// Opens `c` as its publisher, with `cfg`'s layout where the URI says none (a ud-mcast stream
/// keeps `history` datagrams for recovery unless the URI says otherwise).
pub fn publisher(c: &Channel, cfg: &RingConfig, o: &OpenOptions) -> Result<Out, String> {
    open_publisher(c, &with_layout(o, cfg)).map(Out::new).map_err(|e| format!("publishing {e}"))
}

/// Opens `c` as a subscriber (a reliable consumer, or a lossy observer of live data), waiting
/// for its publisher.
pub fn subscriber(c: &Channel, reliable: bool, o: &OpenOptions) -> Result<In, String> {
    let mut o = o.clone();
    o.reliability = if reliable { Reliability::Reliable } else { Reliability::Lossy };
    o.start_at = StartAt::Latest;
    open_subscriber(c, &o).map(In::new).map_err(|e| format!("reading {e}"))
}

/// As [`subscriber`], keeping this app's own publisher `own` polled meanwhile: an rdma-rc
/// publisher finishes a reader's handshake on its publishing thread, so two apps that each
/// publish and read (trader and gateway) would otherwise wait on each other. The connect runs on
/// a helper thread.
pub fn subscriber_polling(c: &Channel, reliable: bool, o: &OpenOptions, own: &mut Out) -> Result<In, String> {
    std::thread::scope(|s| {
        let connecting = s.spawn(|| subscriber(c, reliable, o));
        while !connecting.is_finished() {
            own.idle();
            std::thread::sleep(Duration::from_millis(1));
        }
        connecting.join().map_err(|_| "the connecting thread panicked".to_string())?
    })
}

/// Waits until `out`'s reader is there (rdma-rc: connected; others at once). A reader that gave
/// up on an earlier handshake (it timed out while this app was busy) is let go and its next try
/// awaited; the last such reason is in the error if none arrives.
pub fn wait_for_reader(out: &mut Out, who: &str, wait: Duration, stop: &AtomicBool) -> Result<(), String> {
    wait_for_subscriber(out.publisher_mut(), who, wait, stop)
}

/// [`wait_for_reader`] on a bare publisher (the replay's destination, a journal's server).
pub fn wait_for_subscriber(
    p: &mut tickbus::stream::AnyPublisher,
    who: &str,
    wait: Duration,
    stop: &AtomicBool,
) -> Result<(), String> {
    let deadline = Instant::now() + wait;
    let mut last = String::new();
    while !p.has_reader() {
        for why in p.dropped() {
            log::info!("{who} left before starting ({why}); waiting for its next try");
            last = format!(" (the last try ended: {why})");
        }
        if Instant::now() >= deadline || stop.load(Ordering::Acquire) {
            return Err(format!("{who} did not connect within {wait:?}{last}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_file_and_bare_names_are_shm_rings() {
        let dir = std::env::temp_dir().join(format!("tickbus-streams-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("desk.toml");
        std::fs::write(
            &file,
            "[streams]\nmd = \"ud-mcast://239.77.50.1/1?recovery=10.0.0.1:47101\"\norders = \"rdma-rc://10.0.0.2:47102/2\"\n",
        )
        .unwrap();
        let a = StreamArgs { streams: Some(file.clone()), orders: Some("my-orders".into()), ..StreamArgs::default() };
        let t = a.resolve().unwrap();
        assert_eq!(t.md.to_string(), "ud-mcast://239.77.50.1/1?recovery=10.0.0.1:47101");
        assert_eq!(t.orders.to_string(), "shm:my-orders", "the flag wins; a bare name is a shm ring");
        assert_eq!(t.execs.to_string(), "shm:execs", "neither: the shm default");
        std::fs::write(&file, "[streams]\nquotes = \"shm:q\"\n").unwrap();
        let e = StreamArgs { streams: Some(file.clone()), ..StreamArgs::default() }.resolve().unwrap_err();
        assert!(e.contains("unknown stream \"quotes\""), "{e}");
        std::fs::write(&file, "[streams]\nmd = \"tcp://x\"\n").unwrap();
        let e = StreamArgs { streams: Some(file), ..StreamArgs::default() }.resolve().unwrap_err();
        assert!(e.contains("[streams] md") && e.contains("unknown transport"), "{e}");
        let e = StreamArgs { md: Some("ud-mcast://10.1.1.1/1".into()), ..StreamArgs::default() }.resolve().unwrap_err();
        assert!(e.starts_with("--md: ") && e.contains("not a multicast group"), "{e}");
        // From the review: layouts the apps depend on, refused before anything is opened.
        for (args, says) in [
            (StreamArgs { md: Some("rdma-rc://10.0.0.1:7400/1".into()), ..StreamArgs::default() }, "not rdma-rc"),
            (StreamArgs { md: Some("shm:md?reliable".into()), ..StreamArgs::default() }, "market data is lossy"),
            (
                StreamArgs { orders: Some("shm:orders?slots=8".into()), ..StreamArgs::default() },
                "layout is the apps' own",
            ),
            (StreamArgs { execs: Some("shm:execs?lossy".into()), ..StreamArgs::default() }, "layout is the apps' own"),
            (StreamArgs { orders: Some("orders?slots=8".into()), ..StreamArgs::default() }, "ring name"),
        ] {
            let e = args.resolve().unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
