//! One view of every stream on this host, from the processes' counters files and the shm ring
//! headers: what `tickbus stat` prints and serves, and what an embedding app can expose itself.
//!
//! Owns: joining records to rings and publishers to subscribers (lag), rates between two
//! snapshots, and the Prometheus text exposition. Never: writes a counter or a ring.
mod prometheus;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::counters::{self, Counter, Liveness, Role, Transport};
use crate::shm::{self, PublisherState, ShmOptions};
use crate::StartAt;

/// A path as it may be printed (control characters escaped): for names read from shared folders.
pub use crate::sys::fs::shown;
pub use prometheus::{prometheus, CONTENT_TYPE};

/// One stream end (a publisher or a subscriber) as its counters record shows it.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct StreamView {
    /// The owning process.
    pub pid: u64,
    /// Whose process it is: the uid owning its counters folder and file (a live process must
    /// run as that uid too).
    pub uid: u32,
    /// Its program name.
    pub program: String,
    /// The owning process is running: the figures are current.
    pub live: bool,
    /// Why the figures are not current (the process crashed or was killed).
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub stale: Option<String>,
    /// `publisher` or `subscriber`.
    pub role: String,
    /// `shm`, `rdma-rc` or `ud-mcast`.
    pub transport: String,
    /// The stream.
    pub stream_id: u32,
    /// The ring (shm), the endpoint (rdma-rc) or the group (ud-mcast).
    pub name: String,
    /// Every counter by name (see [`Counter::name`]).
    pub counters: BTreeMap<String, u64>,
    /// Subscriber: messages published that it has not read yet (when its publisher's position
    /// is known on this host: the ring header, or a live publisher record of the same stream).
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub lag: Option<u64>,
    /// Messages per second since the previous snapshot (`stat --watch`).
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub msgs_per_s: Option<f64>,
    /// Payload megabytes (10^6 bytes) per second since the previous snapshot.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub mb_per_s: Option<f64>,
    /// Seconds since the last message this publisher stamped (`last_activity_tsc`), when it
    /// keeps that counter.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub idle_s: Option<f64>,
    /// The record's index in its process's counters file (tells apart two ends of one stream
    /// in one process).
    pub record: usize,
}

impl StreamView {
    /// A counter's value.
    pub fn get(&self, c: Counter) -> u64 {
        self.counters.get(c.name()).copied().unwrap_or(0)
    }

    fn key(&self) -> (u64, usize, &str) {
        (self.pid, self.record, &self.name)
    }
}

/// One consumer line of a reliable shm ring.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ConsumerView {
    /// Which line this is.
    pub index: usize,
    /// Everything below this position has been consumed.
    pub position: u64,
    /// Messages published that it has not consumed yet.
    pub lag: u64,
    /// The owner's pid; 0 when free.
    pub pid: u64,
    /// Whether its owner is still running.
    pub alive: bool,
}

/// One shm ring file.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RingView {
    /// The ring's name.
    pub name: String,
    /// The ring file.
    pub path: PathBuf,
    /// `hugepages` or `fallback`.
    pub backing: String,
    /// `reliable` or `lossy`.
    pub mode: String,
    /// The stream carried.
    pub stream_id: u32,
    /// Bytes per slot.
    pub slot_size: usize,
    /// Slots in the ring.
    pub slot_count: usize,
    /// Messages published so far.
    pub position: u64,
    /// `live`, `closed` or `dead`.
    pub publisher: String,
    /// The publisher's pid (0 once it closed).
    pub publisher_pid: u64,
    /// The consumer lines (reliable rings).
    pub consumers: Vec<ConsumerView>,
}

/// Everything at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Snapshot {
    /// When the snapshot was taken (Unix nanoseconds).
    pub unix_ns: u64,
    /// Every stream end's counters record, live and stale.
    pub streams: Vec<StreamView>,
    /// Every shm ring file.
    pub rings: Vec<RingView>,
    /// Files that could not be read, each with what was wrong.
    pub errors: Vec<String>,
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Every ring file in the shm folders (hugetlbfs first), read without joining it.
pub fn rings(opts: &ShmOptions) -> (Vec<RingView>, Vec<String>) {
    let (mut out, mut errors) = (Vec::new(), Vec::new());
    let mut seen = std::collections::BTreeSet::new();
    for dir in [&opts.hugepage_dir, &opts.fallback_dir] {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        let mut names: Vec<String> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|n| !n.starts_with('.') && !n.ends_with(".tmp"))
            .collect();
        names.sort();
        for name in names {
            // A name in both folders is the one subscribers find: hugetlbfs first.
            if !seen.insert(name.clone()) {
                continue;
            }
            match ring(&name, opts) {
                Ok(r) => out.push(r),
                Err(e) => errors.push(format!("ring {}: {e}", crate::sys::fs::shown(&dir.join(&name)))),
            }
        }
    }
    (out, errors)
}

fn ring(name: &str, opts: &ShmOptions) -> Result<RingView, String> {
    let s = shm::open_observer_uncounted(name, StartAt::Latest, opts).map_err(|e| e.to_string())?;
    let st = s.reader().status();
    let (publisher, publisher_pid) = match s.publisher_state() {
        PublisherState::Live { pid, .. } => ("live", pid),
        PublisherState::Closed { .. } => ("closed", 0),
        PublisherState::Dead { pid, .. } => ("dead", pid),
    };
    let consumers = st
        .consumers
        .iter()
        .map(|l| ConsumerView {
            index: l.index,
            position: l.position,
            lag: st.producer_position.saturating_sub(l.position),
            pid: l.owner,
            alive: l.owner != 0 && crate::sys::process::alive(l.owner),
        })
        .collect();
    Ok(RingView {
        name: name.to_owned(),
        path: s.path().to_owned(),
        backing: match s.backing() {
            shm::Backing::Hugepages => "hugepages".into(),
            shm::Backing::Fallback { .. } => "fallback".into(),
        },
        mode: format!("{:?}", st.config.mode).to_lowercase(),
        stream_id: st.config.stream_id,
        slot_size: st.config.slot_size,
        slot_count: st.config.slot_count,
        position: st.producer_position,
        publisher: publisher.into(),
        publisher_pid,
        consumers,
    })
}

/// Reads every counters file in `dirs` (see [`counters::counters_dirs`]) and every ring, and
/// joins them.
pub fn snapshot(dirs: &[PathBuf], opts: &ShmOptions) -> Snapshot {
    let (mut files, mut errors) = (Vec::new(), Vec::new());
    for dir in dirs {
        let (f, e) = counters::scan(dir);
        files.extend(f);
        errors.extend(e);
    }
    let (rings, ring_errors) = rings(opts);
    errors.extend(ring_errors);
    let now = unix_ns();
    let mut streams = Vec::new();
    for f in &files {
        let (live, stale) = match &f.liveness {
            Liveness::Live => (true, None),
            Liveness::Stale { reason } | Liveness::Unverified { reason } => (false, Some(reason.clone())),
        };
        for r in &f.streams {
            let counters = Counter::ALL.iter().map(|&c| (c.name().to_owned(), r.get(c))).collect();
            // The owner's TSC counters become seconds through its own calibration and the TSC
            // and wall time it noted when it made the file (same host, same TSC).
            let last = r.get(Counter::LastActivityTsc);
            let idle_s = (live && last != 0 && f.ticks_per_ns > 0.0).then(|| {
                let at = f.unix_ns_at_create as f64 + last.wrapping_sub(f.tsc_at_create) as i64 as f64 / f.ticks_per_ns;
                ((now as f64 - at) / 1e9).max(0.0)
            });
            streams.push(StreamView {
                pid: f.pid,
                uid: f.uid,
                program: f.program.clone(),
                live,
                stale: stale.clone(),
                role: r.role.name().into(),
                transport: r.transport.name().into(),
                stream_id: r.stream_id,
                name: r.name.clone(),
                counters,
                lag: None,
                msgs_per_s: None,
                mb_per_s: None,
                idle_s,
                record: r.index,
            });
        }
    }
    let lags: Vec<Option<u64>> = streams.iter().map(|s| lag(s, &streams, &rings)).collect();
    for (s, l) in streams.iter_mut().zip(lags) {
        s.lag = l;
    }
    Snapshot { unix_ns: now, streams, rings, errors }
}

/// A live subscriber's distance behind its publisher's position, when that is known here: the
/// ring of that name (shm; a name cut to the record's 64 bytes is not trusted), or the live
/// publisher of the same transport and stream, with the same name if there is one, else the
/// only one.
fn lag(s: &StreamView, all: &[StreamView], rings: &[RingView]) -> Option<u64> {
    if !s.live || s.role != Role::Subscriber.name() {
        return None;
    }
    let head = if s.transport == Transport::Shm.name() {
        if s.name.len() >= 64 {
            return None;
        }
        rings.iter().find(|r| r.name == s.name).map(|r| r.position)
    } else {
        let pubs: Vec<&StreamView> = all
            .iter()
            .filter(|p| {
                p.live && p.role == Role::Publisher.name() && p.transport == s.transport && p.stream_id == s.stream_id
            })
            .collect();
        let named: Vec<&StreamView> = pubs.iter().copied().filter(|p| p.name == s.name).collect();
        match (named.as_slice(), pubs.as_slice()) {
            ([p], _) | ([], [p]) => Some(p.get(Counter::Position)),
            _ => None, // none here, or ambiguous
        }
    }?;
    Some(head.saturating_sub(s.get(Counter::Position)))
}

impl Snapshot {
    /// Fills in each live stream's rates from the same stream in `prev`.
    pub fn rates_since(&mut self, prev: &Snapshot) {
        let secs = self.unix_ns.saturating_sub(prev.unix_ns) as f64 / 1e9;
        if secs <= 0.0 {
            return;
        }
        for s in self.streams.iter_mut().filter(|s| s.live) {
            let Some(p) = prev.streams.iter().find(|p| p.key() == s.key()) else { continue };
            let dm = s.get(Counter::Messages).saturating_sub(p.get(Counter::Messages));
            let db = s.get(Counter::Bytes).saturating_sub(p.get(Counter::Bytes));
            s.msgs_per_s = Some(dm as f64 / secs);
            s.mb_per_s = Some(db as f64 / secs / 1e6);
        }
    }

    /// The operator's table: one line per stream end, then the rings.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<8} {:>6} {:<12} {:<10} {:<8} {:>6} {:<22} {:>12} {:>12} {:>10} {:>8} {:>8} {:>8} {:>7} {:>11} {:>9}",
            "pid",
            "uid",
            "program",
            "role",
            "fabric",
            "stream",
            "name",
            "position",
            "messages",
            "lag",
            "gaps",
            "missed",
            "full",
            "errors",
            "msgs/s",
            "MB/s"
        );
        for v in &self.streams {
            let opt = |x: Option<u64>| x.map_or("-".into(), |x| x.to_string());
            let rate = |x: Option<f64>, p: usize| x.map_or("-".into(), |x| format!("{x:.p$}"));
            let _ = writeln!(
                s,
                "{:<8} {:>6} {:<12} {:<10} {:<8} {:>6} {:<22} {:>12} {:>12} {:>10} {:>8} {:>8} {:>8} {:>7} {:>11} {:>9}{}",
                v.pid,
                v.uid,
                v.program.chars().take(12).collect::<String>(),
                v.role,
                v.transport,
                v.stream_id,
                v.name.chars().take(22).collect::<String>(),
                v.get(Counter::Position),
                v.get(Counter::Messages),
                opt(v.lag),
                v.get(Counter::Gaps),
                v.get(Counter::Missed),
                v.get(Counter::Full),
                v.get(Counter::Errors),
                rate(v.msgs_per_s, 0),
                rate(v.mb_per_s, 2),
                match &v.stale {
                    Some(r) => format!("  STALE: {r}"),
                    None => String::new(),
                }
            );
        }
        if self.streams.is_empty() {
            let _ = writeln!(s, "(no streams: no process on this host has a tickbus stream open)");
        }
        for r in &self.rings {
            let _ = writeln!(s, "{}", ring_line(r));
        }
        for e in &self.errors {
            let _ = writeln!(s, "error: {e}");
        }
        s
    }
}

/// One ring in a line (`tickbus ring list`, and under `stat`'s table).
pub fn ring_line(r: &RingView) -> String {
    let publisher = match r.publisher.as_str() {
        "live" => format!("publisher pid {}", r.publisher_pid),
        "dead" => format!("publisher pid {} DEAD", r.publisher_pid),
        other => format!("publisher {other}"),
    };
    let consumers: Vec<String> = r
        .consumers
        .iter()
        .filter(|c| c.pid != 0)
        .map(|c| format!("#{} pid {}{} lag {}", c.index, c.pid, if c.alive { "" } else { " DEAD" }, c.lag))
        .collect();
    format!(
        "ring {:<24} {:<9} {:<8} stream {:<5} {} x {} B, position {}, {publisher}{}{}",
        r.name,
        r.backing,
        r.mode,
        r.stream_id,
        r.slot_count,
        r.slot_size,
        r.position,
        if consumers.is_empty() { "" } else { ", consumers " },
        consumers.join(", ")
    )
}
