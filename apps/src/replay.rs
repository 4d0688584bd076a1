//! `tickbus replay`: a recording (journal, ITCH file, pcap/pcapng of MoldUDP64) onto a stream:
//! a shm ring (`--ring NAME`), or any channel URI (`--dest`: shm, rdma-rc, ud-mcast).
//! Thin: sources, window, pacing and gaps are library code (`tickbus::replay`: a gap in the
//! recording is published as a `FeedGap` message); this opens the destination, waits for each
//! message's intended time, publishes it, and reports the achieved rate and the pacing error
//! (HdrHistogram, from each message's intended time).
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use hdrhistogram::Histogram;
use tickbus::replay::{self, parse_time_of_day, Pace, Player, Window};
use tickbus::shm::{self, ShmOptions, ShmPublisher};
use tickbus::time::TscScale;
use tickbus::{Mode, RingConfig};

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// A journal folder, an ITCH 5.0 file, or a pcap/pcapng capture of MoldUDP64 (detected).
    pub input: PathBuf,
    /// Publish onto shm ring NAME (created if missing).
    #[arg(long, value_name = "NAME", conflicts_with = "dest")]
    pub ring: Option<String>,
    /// Publish onto the stream this channel URI names (`shm:NAME`, `rdma-rc://IP:PORT/STREAM`,
    /// `ud-mcast://GROUP/STREAM?recovery=IP:PORT`; rdma-rc and ud-mcast need `--features
    /// rdma`). --reliable, --consumers, --max-payload, --slots and --stream apply where the URI
    /// does not say.
    #[arg(long, value_name = "URI")]
    pub dest: Option<String>,
    /// rdma-rc and ud-mcast: the shared secret where the URI names no `token-env`.
    #[arg(long, default_value = "")]
    pub token: String,
    /// rdma-rc and ud-mcast: the RDMA device (default: TICKBUS_RDMA_DEVICE, else the first).
    #[arg(long)]
    pub device: Option<String>,
    /// rdma-rc: how long to wait for a subscriber to connect before replaying (s).
    #[arg(long, default_value_t = 30.0, value_parser = crate::args::secs)]
    pub wait_secs: f64,
    /// Create the ring reliable (the replay waits for its consumers) instead of lossy.
    #[arg(long)]
    pub reliable: bool,
    /// Consumers of a reliable ring.
    #[arg(long, default_value_t = 1, value_parser = crate::args::within_usize(1, 64))]
    pub consumers: usize,
    /// Largest message the ring must hold (bytes).
    #[arg(long, default_value_t = 256, value_parser = crate::args::within_usize(1, 1 << 20))]
    pub max_payload: usize,
    /// Ring slots.
    #[arg(long, default_value_t = 4096, value_parser = crate::args::slots)]
    pub slots: usize,
    /// Stream id of the ring (default: the journal's, else 1).
    #[arg(long)]
    pub stream: Option<u32>,
    /// Replay at the recording's pace times N (default 1 when no other pacing is given).
    #[arg(long, conflicts_with_all = ["rate", "max"], value_parser = crate::args::speed)]
    pub speed: Option<f64>,
    /// Replay at a fixed rate (messages per second).
    #[arg(long, conflicts_with = "max", value_parser = crate::args::rate)]
    pub rate: Option<f64>,
    /// Replay as fast as the stream takes it.
    #[arg(long)]
    pub max: bool,
    /// Start at this time of day (HH:MM[:SS[.fraction]]; exchange time for ITCH, UTC otherwise).
    #[arg(long, value_parser = parse_time_of_day)]
    pub from: Option<u64>,
    /// Stop after this time of day (inclusive).
    #[arg(long, value_parser = parse_time_of_day)]
    pub to: Option<u64>,
    /// Start at this sequence number (journal position, ITCH message index, MoldUDP64 sequence).
    #[arg(long)]
    pub from_seq: Option<u64>,
    /// Stop after this sequence number (inclusive).
    #[arg(long)]
    pub to_seq: Option<u64>,
    /// Replay again from the start when the input ends, until interrupted.
    #[arg(long = "loop")]
    pub looping: bool,
    /// Only datagrams to this UDP port (captures).
    #[arg(long)]
    pub port: Option<u16>,
    /// Follow this MoldUDP64 session of a capture (10 characters; default: the first one in it).
    /// A capture is replayed as one stream: each message once (the other line's copy is a
    /// duplicate), in sequence order, holes as gaps, datagrams of other sessions skipped.
    #[arg(long)]
    pub session: Option<String>,
    /// At the recording's pace, wait out quiet spells up to this many seconds, no longer: a
    /// longer step of the recording's clock (a datagram stamped 0, a recorder off overnight) is
    /// replayed at once and counted.
    #[arg(long, default_value_t = 60.0, value_parser = crate::args::secs)]
    pub max_quiet_secs: f64,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: ReplayArgs) -> Result<(), String> {
    // Each value was checked where it was parsed (`args`).
    let pace = match (a.speed, a.rate, a.max) {
        (_, _, true) => Pace::Max,
        (_, Some(r), _) => Pace::Rate(r),
        (Some(s), _, _) => Pace::AsRecorded { speed: s },
        _ => Pace::AsRecorded { speed: 1.0 },
    };
    let session: Option<[u8; 10]> = match &a.session {
        Some(s) => Some(s.as_bytes().try_into().map_err(|_| format!("--session {s:?} must be exactly 10 characters"))?),
        None => None,
    };
    let window = Window { from_time: a.from, to_time: a.to, from_sequence: a.from_seq, to_sequence: a.to_seq };
    let mut source = replay::open_window(&a.input, &window, a.port).map_err(|e| e.to_string())?;
    if let Some(s) = session {
        source.pin_session(s);
    }
    let stream = a.stream.or(source.stream_id()).unwrap_or(1);
    let mode = if a.reliable { Mode::Reliable } else { Mode::Lossy };
    let mut cfg = RingConfig::for_payload(mode, stream, a.max_payload, a.slots);
    cfg.max_consumers = a.consumers;
    let stop = crate::pipeline::stop_flag()?;
    let (mut dest, name) = match (&a.ring, &a.dest) {
        (Some(name), _) => (
            Dest::Ring(shm::open_publisher(name, &cfg, &ShmOptions::default()).map_err(|e| e.to_string())?),
            name.clone(),
        ),
        (None, Some(uri)) => (Dest::Stream(open_uri(&a, uri, &cfg, &stop)?), uri.clone()),
        (None, None) => return Err("say where to replay to: --ring NAME or --dest URI".into()),
    };
    let name = name.as_str();
    let scale = TscScale { ticks_per_ns: cfg.ticks_per_ns };
    let bar = progress(&source, a.json);
    let mut err = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds");
    let mut player =
        Player::new(source, window, pace, cfg.ticks_per_ns, a.looping).with_max_quiet((a.max_quiet_secs * 1e9) as u64);
    let mut waiting = Waiting::default();
    let played = player
        .run(
            |m| {
                Ok(match &mut dest {
                    Dest::Ring(p) => publish(p, m, &stop, name, &mut waiting)?,
                    Dest::Stream(p) => publish_any(p, m, &stop)?,
                })
            },
            |due, now, source| {
                if let Some(due) = due {
                    err.saturating_record(scale.delta_ns(due, now).max(1));
                }
                if let Some(b) = &bar {
                    if b.position() + 4096 < source.offset() || source.size().is_none() {
                        b.set_position(source.offset());
                        let behind = due.map_or(0, |d| scale.delta_ns(d, now) / 1000);
                        b.set_message(format!("{} us behind schedule", behind));
                    }
                }
            },
            &stop,
        )
        .map_err(|e| e.to_string())?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let published = played.published;
    let (gaps, skipped) = (played.gap_records, played.skipped);
    let secs = scale.delta_ns(played.first_tsc, played.last_tsc) as f64 / 1e9;
    let rate = if secs > 0.0 { published as f64 / secs } else { 0.0 };
    let pct = |q: f64| if err.is_empty() { 0 } else { err.value_at_quantile(q) };
    let capture = player.source().capture_counts();
    let summary = serde_json::json!({
        "input": a.input.display().to_string(),
        "ring": name,
        "published": published,
        "stopped_before_the_end": played.stopped,
        "gap_records": gaps,
        "skipped_before_window": skipped,
        "quiet_spells_cut_short": played.cut_short,
        "seconds": secs,
        "rate_msgs_per_s": rate,
        "pacing_error_ns": {"p50": pct(0.5), "p99": pct(0.99), "max": if err.is_empty() { 0 } else { err.max() }},
        "capture": capture.map(|c| serde_json::json!({
            "duplicates": c.order.duplicates, "jumps_discarded": c.order.jumps_discarded,
            "messages_discarded": c.order.discarded, "other_session_datagrams": c.other_session,
            "missing": c.missing,
        })),
    });
    // Every message out before the process ends: an rdma-rc publisher ships what waits for
    // credit, a ud-mcast one sends a heartbeat saying where the stream ends (a lost tail is
    // recovered from it).
    if let Dest::Stream(p) = &mut dest {
        p.flush(Duration::from_secs(10)).map_err(|e| format!("{name}: flushing at the end: {e}"))?;
    }
    drop(dest);
    if a.json {
        println!("{summary}");
    } else {
        println!(
            "replayed {published} messages in {secs:.3} s ({rate:.0} msg/s); pacing error p50 {} ns, p99 {} ns, max {} ns; {gaps} gap records, {skipped} before the window{}",
            pct(0.5),
            pct(0.99),
            summary["pacing_error_ns"]["max"],
            if played.cut_short > 0 { format!("; {} quiet spells longer than --max-quiet-secs not waited out", played.cut_short) } else { String::new() },
        );
        if let Some(c) = capture {
            println!(
                "capture: {} duplicates (the other line's copies), {} messages missing (replayed as gaps), {} messages of {} jumps no later datagram continued discarded, {} datagrams of other sessions skipped",
                c.order.duplicates, c.missing, c.order.discarded, c.order.jumps_discarded, c.other_session
            );
        }
    }
    if played.stopped {
        return Err(format!(
            "stopped before the end of {}: {published} messages published, the rest not",
            a.input.display()
        ));
    }
    Ok(())
}

/// Where the replay publishes. One per replay, never moved while replaying: inline, not boxed.
#[allow(clippy::large_enum_variant)]
enum Dest {
    /// A shm ring by name, with its consumer lines looked at when it is full.
    Ring(ShmPublisher),
    /// Any stream by channel URI.
    Stream(tickbus::stream::AnyPublisher),
}

/// Opens the stream `uri` names, with the replay's layout where the URI does not say, and waits
/// (rdma-rc) for a subscriber to connect.
fn open_uri(
    a: &ReplayArgs,
    uri: &str,
    cfg: &RingConfig,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<tickbus::stream::AnyPublisher, String> {
    use tickbus::stream::{open_publisher, Channel, OpenOptions, Reliability};
    let c = Channel::parse(uri).map_err(|e| format!("--dest: {e}"))?;
    let mut o = OpenOptions::default();
    o.reliability = if a.reliable { Reliability::Reliable } else { Reliability::Lossy };
    (o.stream, o.slots, o.payload, o.consumers) = (cfg.stream_id, cfg.slot_count, cfg.max_payload(), cfg.max_consumers);
    o.token = a.token.clone().into_bytes();
    o.device = a.device.clone();
    o.wait = Duration::from_secs_f64(a.wait_secs);
    o.stop = Some(stop.clone());
    let mut p = open_publisher(&c, &o).map_err(|e| format!("--dest {e}"))?;
    // rdma-rc: a subscriber connects first (other transports have their reader at once).
    crate::streams::wait_for_subscriber(&mut p, "a subscriber", o.wait, stop)
        .map_err(|e| format!("--dest {uri}: {e}: start it first (e.g. `tickbus record --from {uri} --journal DIR`)"))?;
    Ok(p)
}

/// Publishes on a stream opened by URI, retrying while the transport says a retry helps (a full
/// reliable stream, a full send queue), with the transport's upkeep meanwhile; Ok(false) if
/// stopped first.
fn publish_any(
    p: &mut tickbus::stream::AnyPublisher,
    payload: &[u8],
    stop: &std::sync::atomic::AtomicBool,
) -> Result<bool, String> {
    use tickbus::stream::{Publish, Retry};
    loop {
        match p.publish(payload) {
            Ok(_) => return Ok(true),
            Err(e) if e.retry_helps() => {
                if stop.load(std::sync::atomic::Ordering::Acquire) {
                    return Ok(false);
                }
                p.idle();
                std::hint::spin_loop();
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Whether the replay is waiting on a full reliable ring, and whether it said so.
#[derive(Default)]
struct Waiting {
    since: Option<std::time::Instant>,
    said: bool,
}

/// How long a full ring is retried before the replay looks at who it is waiting for.
const WAIT_BEFORE_LOOKING: Duration = Duration::from_millis(200);

/// Publishes, retrying while a reliable ring is full, until interrupted: Ok(false) then (the
/// message was not published). A ring full because a consumer line has no live consumer (none
/// attached yet, or one died) is said once, naming the lines and how to start a consumer, and
/// waited on without spinning a core; a slow live consumer is waited on spinning.
fn publish(
    p: &mut ShmPublisher,
    payload: &[u8],
    stop: &std::sync::atomic::AtomicBool,
    ring: &str,
    waiting: &mut Waiting,
) -> Result<bool, String> {
    loop {
        match p.publish(payload) {
            Ok(_) => {
                if waiting.said {
                    log::error!("ring {ring}: its consumers are taking messages again; replaying on");
                }
                *waiting = Waiting::default();
                return Ok(true);
            }
            Err(tickbus::ring::ClaimError::Full { .. }) => {
                if stop.load(std::sync::atomic::Ordering::Acquire) {
                    return Ok(false);
                }
                let since = *waiting.since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() < WAIT_BEFORE_LOOKING {
                    std::hint::spin_loop();
                    continue;
                }
                let absent: Vec<String> =
                    p.consumer_status().iter().filter(|c| !c.alive).map(|c| c.index.to_string()).collect();
                if absent.is_empty() {
                    waiting.since = Some(std::time::Instant::now()); // look again in a while
                    continue; // a live consumer that is slow: it takes what is there
                }
                if !waiting.said {
                    waiting.said = true;
                    log::error!(
                        "waiting: ring {ring} is reliable and full, and consumer line(s) {} have no live consumer. Start them (e.g. `tickbus record --ring {ring} --journal DIR`, or `tickbus trader`), or replay onto a lossy ring (without --reliable)",
                        absent.join(", ")
                    );
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e @ tickbus::ring::ClaimError::TooLarge { .. }) => {
                return Err(format!("{e} (replay with --max-payload {})", payload.len()))
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn progress(source: &replay::Source, json: bool) -> Option<indicatif::ProgressBar> {
    if json || !std::io::stderr().is_terminal() {
        return None;
    }
    let b = match source.size() {
        Some(n) => indicatif::ProgressBar::new(n),
        None => indicatif::ProgressBar::new_spinner(),
    };
    b.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {bar:30} {percent}% ETA {eta} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    b.enable_steady_tick(Duration::from_millis(200));
    Some(b)
}
