//! A stream whose transport is chosen at run time, from a [`Channel`] URI: [`AnyPublisher`] and
//! [`AnySubscriber`] implement [`Publish`] and [`Subscribe`] with one `match` per call on a
//! variant that never changes (the branch is predicted; the handle stays inline, not boxed).
//! Opening waits, within [`OpenOptions::wait`], for what a peer has not made yet (a ring not
//! created, an rdma-rc publisher not listening, recovery not served yet); every such wait is
//! set-up, never the hot path.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickbus_codecs::Message;

use super::uri::{Channel, Endpoint};
use super::{Publish, Reliability, Retry, StreamClaim, Subscribe};
use crate::ring::{ClaimError, Mode, Recv, RecvInto, RingConfig, StartAt};
use crate::shm::{self, PublisherState, ShmError, ShmMemory, ShmOptions, ShmPublisher, ShmSubscriber};

/// What opening a stream needs beyond its URI: defaults for what the URI leaves unsaid, the
/// shared secret, and how long to wait for the peer.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OpenOptions {
    /// Where shm rings live (hugetlbfs first, /dev/shm as the fallback).
    pub shm: ShmOptions,
    /// Reliable or lossy, where the URI does not say.
    pub reliability: Reliability,
    /// The stream id of a shm ring this opens as publisher, where the URI does not say.
    pub stream: u32,
    /// Ring slots, where the URI does not say.
    pub slots: usize,
    /// Largest payload, where the URI does not say.
    pub payload: usize,
    /// Reliable consumer lines, where the URI does not say.
    pub consumers: usize,
    /// Where a lossy shm subscriber starts: the next message published (live data), or the
    /// oldest the ring still holds.
    pub start_at: StartAt,
    /// The handshake secret where the URI names no `token-env` (rdma-rc, ud-mcast).
    pub token: Vec<u8>,
    /// The RDMA device where the URI names none (None: `TICKBUS_RDMA_DEVICE`, else the first).
    pub device: Option<String>,
    /// Datagrams a ud-mcast publisher keeps for recovery, where the URI does not say (None:
    /// the transport's default, 1,024).
    pub history: Option<u32>,
    /// How long a subscriber waits for its publisher (and a ud-mcast subscriber for recovery).
    pub wait: Duration,
    /// Set it to give up waiting at once (Ctrl-C).
    pub stop: Option<Arc<AtomicBool>>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            shm: ShmOptions::default(),
            reliability: Reliability::Lossy,
            stream: 1,
            slots: 4096,
            payload: 128,
            consumers: 1,
            start_at: StartAt::Latest,
            token: Vec::new(),
            device: None,
            history: None,
            wait: Duration::from_secs(30),
            stop: None,
        }
    }
}

/// Why a stream could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// A shm ring could not be created or attached.
    #[error("{channel}: {source}")]
    Shm {
        /// The stream.
        channel: String,
        /// Why.
        source: ShmError,
    },
    /// An rdma-rc stream could not be opened.
    #[cfg(feature = "rdma")]
    #[error("{channel}: {source}")]
    Rdma {
        /// The stream.
        channel: String,
        /// Why.
        source: crate::rdma::RdmaError,
    },
    /// A ud-mcast stream could not be opened.
    #[cfg(feature = "rdma")]
    #[error("{channel}: {source}")]
    Mcast {
        /// The stream.
        channel: String,
        /// Why.
        source: crate::mcast::McastError,
    },
    /// The URI names an RDMA transport and this tickbus was built without it.
    #[error("{channel}: this tickbus was built without RDMA: build it with `--features rdma`")]
    NoRdma {
        /// The stream.
        channel: String,
    },
    /// The URI's `token-env` names a variable that is not set.
    #[error("{channel}: environment variable {var} (token-env) is not set: export the stream's secret in it")]
    Token {
        /// The stream.
        channel: String,
        /// The variable.
        var: String,
    },
    /// The peer did not appear in time.
    #[error("{channel}: {last} (after waiting {waited:?}: is the app that publishes it running, with the same URI and token?)")]
    Timeout {
        /// The stream.
        channel: String,
        /// How long it waited.
        waited: Duration,
        /// The last error seen.
        last: String,
    },
    /// The stop flag was set while waiting.
    #[error("{channel}: stopped while waiting for the stream's publisher")]
    Stopped {
        /// The stream.
        channel: String,
    },
}

/// Retries `f` while its error is retryable, until `o.wait` passes or `o.stop` is set;
/// `pause(e, most)` waits before the next try (at most `most`, the time left).
fn waiting<T, E: std::fmt::Display>(
    c: &Channel,
    o: &OpenOptions,
    mut retryable: impl FnMut(&E) -> bool,
    mut pause: impl FnMut(&E, Duration),
    mut f: impl FnMut() -> Result<T, E>,
    fail: impl FnOnce(E) -> OpenError,
) -> Result<T, OpenError> {
    let deadline = Instant::now() + o.wait;
    loop {
        match f() {
            Ok(t) => return Ok(t),
            Err(e) if retryable(&e) => {
                if o.stop.as_ref().is_some_and(|s| s.load(Ordering::Acquire)) {
                    return Err(OpenError::Stopped { channel: c.to_string() });
                }
                let now = Instant::now();
                if now >= deadline {
                    return Err(OpenError::Timeout { channel: c.to_string(), waited: o.wait, last: e.to_string() });
                }
                pause(&e, deadline - now);
            }
            Err(e) => return Err(fail(e)),
        }
    }
}

/// The pause between an RDMA peer's tries: each try is a handshake, not a folder lookup.
#[cfg(feature = "rdma")]
fn pause_5ms<E>(_: &E, most: Duration) {
    std::thread::sleep(Duration::from_millis(5).min(most));
}

fn ring_config(c: &Channel, o: &OpenOptions, stream: u32) -> RingConfig {
    let mode = match c.reliability.unwrap_or(o.reliability) {
        Reliability::Reliable => Mode::Reliable,
        Reliability::Lossy => Mode::Lossy,
    };
    let mut cfg = RingConfig::for_payload(mode, stream, c.payload.unwrap_or(o.payload), c.slots.unwrap_or(o.slots));
    if mode == Mode::Reliable {
        cfg.max_consumers = c.consumers.unwrap_or(o.consumers);
    }
    cfg
}

/// An rdma-rc connection that may work later: nobody listening yet, the publisher busy with
/// other handshakes or its lines all taken (a reader that died still holds one until its
/// publisher notices), or a handshake that timed out while the publisher was busy.
#[cfg(feature = "rdma")]
fn not_yet(e: &crate::rdma::RdmaError) -> bool {
    use crate::rdma::RdmaError as E;
    matches!(e, E::Connect { .. } | E::Refused { .. } | E::Handshake { .. })
}

/// The device `c` names, else the options' (None: the transport's default, from
/// `TICKBUS_RDMA_DEVICE` or the first device).
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
fn device(c: &Channel, o: &OpenOptions) -> Option<String> {
    c.device.clone().or_else(|| o.device.clone())
}

/// The secret for `c`: from its `token-env`, else the options'.
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
fn token(c: &Channel, o: &OpenOptions) -> Result<Vec<u8>, OpenError> {
    match &c.token_env {
        Some(var) => std::env::var_os(var)
            .map(|v| std::os::unix::ffi::OsStrExt::as_bytes(v.as_os_str()).to_vec())
            .ok_or_else(|| OpenError::Token { channel: c.to_string(), var: var.clone() }),
        None => Ok(o.token.clone()),
    }
}

/// Opens `c` as its publisher: creates (or takes over) a shm ring, binds an rdma-rc publisher
/// at the URI's address, or starts sending to a ud-mcast group (serving recovery at its
/// `recovery` address).
pub fn open_publisher(c: &Channel, o: &OpenOptions) -> Result<AnyPublisher, OpenError> {
    match &c.endpoint {
        Endpoint::Shm { name, stream } => {
            let cfg = ring_config(c, o, stream.unwrap_or(o.stream));
            shm::open_publisher(name, &cfg, &o.shm)
                .map(AnyPublisher::Shm)
                .map_err(|source| OpenError::Shm { channel: c.to_string(), source })
        }
        #[cfg(feature = "rdma")]
        Endpoint::RdmaRc { addr, stream } => {
            let mut po = crate::rdma::PublisherOptions::new(token(c, o)?);
            po.device = device(c, o).or(po.device);
            crate::rdma::RdmaPublisher::bind(*addr, &ring_config(c, o, *stream), po)
                .map(AnyPublisher::RdmaRc)
                .map_err(|source| OpenError::Rdma { channel: c.to_string(), source })
        }
        #[cfg(feature = "rdma")]
        Endpoint::UdMcast { group, stream, recovery, history } => {
            let token = token(c, o)?;
            // No secret: the default queue key, as a tokenless publisher uses.
            let mut mo = crate::mcast::McastPublisherOptions {
                token: (!token.is_empty()).then(|| token.clone()),
                ..Default::default()
            };
            mo.device = device(c, o).or(mo.device);
            if let Some(h) = history.or(o.history) {
                mo.history = h;
            }
            let fail = |source| OpenError::Mcast { channel: c.to_string(), source };
            let mut p = crate::mcast::McastPublisher::new(*group, *stream, &mo).map_err(fail)?;
            if let Some(at) = recovery {
                p.listen_recovery(*at, token).map_err(fail)?;
            }
            Ok(AnyPublisher::UdMcast(p))
        }
        #[cfg(not(feature = "rdma"))]
        _ => Err(OpenError::NoRdma { channel: c.to_string() }),
    }
}

/// Opens `c` as a subscriber, waiting up to `o.wait` for its publisher: a reliable consumer
/// line or a lossy observer of a shm ring, a connection to an rdma-rc publisher, or a member of
/// a ud-mcast group (connected to its recovery, if the URI names one).
pub fn open_subscriber(c: &Channel, o: &OpenOptions) -> Result<AnySubscriber, OpenError> {
    match &c.endpoint {
        Endpoint::Shm { name, .. } => {
            let reliable = c.reliability.unwrap_or(o.reliability) == Reliability::Reliable;
            let fail = |source| OpenError::Shm { channel: c.to_string(), source };
            // Waits on the ring's folders, not by looking every few ms (`shm::RingWait`).
            let mut ring = shm::RingWait::new();
            let s = waiting(
                c,
                o,
                ShmError::is_retryable,
                |e, most| ring.pause(e, most, o.stop.as_deref()),
                || match reliable {
                    true => shm::open_consumer(name, &o.shm),
                    false => shm::open_observer(name, o.start_at, &o.shm),
                },
                fail,
            )?;
            Ok(AnySubscriber::Shm(s))
        }
        #[cfg(feature = "rdma")]
        Endpoint::RdmaRc { addr, stream } => {
            let mut so = crate::rdma::SubscriberOptions::new(token(c, o)?);
            so.device = device(c, o).or(so.device);
            let fail = |source| OpenError::Rdma { channel: c.to_string(), source };
            let s =
                waiting(c, o, not_yet, pause_5ms, || crate::rdma::RdmaSubscriber::connect(*addr, *stream, &so), fail)?;
            Ok(AnySubscriber::RdmaRc(s))
        }
        #[cfg(feature = "rdma")]
        Endpoint::UdMcast { group, stream, recovery, .. } => {
            let token = token(c, o)?;
            let mut mo = crate::mcast::McastSubscriberOptions {
                token: (!token.is_empty()).then(|| token.clone()),
                depth: 4096,
                ..Default::default()
            };
            mo.device = device(c, o).or(mo.device);
            let fail = |source| OpenError::Mcast { channel: c.to_string(), source };
            let mut s = crate::mcast::McastSubscriber::join(*group, *stream, &mo).map_err(fail)?;
            if let Some(at) = recovery {
                let not_there = |e: &crate::mcast::McastError| matches!(e, crate::mcast::McastError::Setup(r) if r.may_work_later());
                waiting(
                    c,
                    o,
                    not_there,
                    pause_5ms,
                    || s.connect_recovery(*at, &token, 64, Duration::from_secs(5)),
                    fail,
                )?;
            }
            Ok(AnySubscriber::UdMcast(s))
        }
        #[cfg(not(feature = "rdma"))]
        _ => Err(OpenError::NoRdma { channel: c.to_string() }),
    }
}

/// Any transport's error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnyError {
    /// shm.
    #[error(transparent)]
    Shm(#[from] ClaimError),
    /// rdma-rc.
    #[cfg(feature = "rdma")]
    #[error(transparent)]
    Rdma(#[from] crate::rdma::RdmaError),
    /// ud-mcast.
    #[cfg(feature = "rdma")]
    #[error(transparent)]
    Mcast(#[from] crate::mcast::McastError),
}

impl From<core::convert::Infallible> for AnyError {
    fn from(e: core::convert::Infallible) -> Self {
        match e {}
    }
}

impl Retry for AnyError {
    fn retry_helps(&self) -> bool {
        match self {
            AnyError::Shm(e) => e.retry_helps(),
            #[cfg(feature = "rdma")]
            AnyError::Rdma(e) => e.retry_helps(),
            #[cfg(feature = "rdma")]
            AnyError::Mcast(e) => e.retry_helps(),
        }
    }
}

/// What became of a stream's publisher, as far as the transport can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    /// Running (or, ud-mcast, not known otherwise: multicast cannot tell).
    Live,
    /// It closed the stream (shm), or its connection is gone (rdma-rc cannot tell a clean close
    /// from a crash).
    Closed,
    /// Its process ended without closing the ring (shm).
    Died {
        /// Its pid.
        pid: u64,
    },
}

/// A publisher on any transport.
// One per stream per app, never moved on the hot path: inline, not boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyPublisher {
    /// A shm ring.
    Shm(ShmPublisher),
    /// rdma-rc.
    #[cfg(feature = "rdma")]
    RdmaRc(crate::rdma::RdmaPublisher),
    /// ud-mcast.
    #[cfg(feature = "rdma")]
    UdMcast(crate::mcast::McastPublisher),
}

/// A claim on any transport.
#[derive(Debug)]
#[non_exhaustive]
#[must_use = "a claim is published only by commit; dropped, its slot is aborted"]
pub enum AnyClaim<'a> {
    /// In place in a shm ring.
    Shm(super::ShmClaim<'a, ShmMemory>),
    /// Staged for rdma-rc.
    #[cfg(feature = "rdma")]
    RdmaRc(super::Staged<'a, crate::rdma::RdmaPublisher>),
    /// Staged for ud-mcast.
    #[cfg(feature = "rdma")]
    UdMcast(super::Staged<'a, crate::mcast::McastPublisher>),
}

/// Forwards one call to whichever transport `$self` is.
macro_rules! each {
    ($self:expr, $p:ident => $e:expr) => {
        match $self {
            Self::Shm($p) => $e,
            #[cfg(feature = "rdma")]
            Self::RdmaRc($p) => $e,
            #[cfg(feature = "rdma")]
            Self::UdMcast($p) => $e,
        }
    };
}

impl StreamClaim for AnyClaim<'_> {
    type Error = AnyError;
    fn position(&self) -> u64 {
        each!(self, c => c.position())
    }
    fn len(&self) -> usize {
        each!(self, c => c.len())
    }
    fn write(&mut self, payload: &[u8]) {
        each!(self, c => c.write(payload))
    }
    #[inline]
    fn store_word(&mut self, k: usize, value: u64) {
        each!(self, c => c.store_word(k, value))
    }
    #[inline]
    fn commit(self) -> Result<u64, AnyError> {
        each!(self, c => c.commit().map_err(AnyError::from))
    }
}

impl Publish for AnyPublisher {
    type Error = AnyError;
    type Claim<'a> = AnyClaim<'a>;

    #[inline]
    fn publish(&mut self, payload: &[u8]) -> Result<u64, AnyError> {
        each!(self, p => Publish::publish(p, payload).map_err(AnyError::from))
    }
    #[inline]
    fn send<T: Message>(&mut self, msg: &mut T) -> Result<u64, AnyError> {
        each!(self, p => Publish::send(p, msg).map_err(AnyError::from))
    }
    #[inline]
    fn try_claim(&mut self, len: usize) -> Result<AnyClaim<'_>, AnyError> {
        Ok(match self {
            Self::Shm(p) => AnyClaim::Shm(Publish::try_claim(p, len)?),
            #[cfg(feature = "rdma")]
            Self::RdmaRc(p) => AnyClaim::RdmaRc(Publish::try_claim(p, len)?),
            #[cfg(feature = "rdma")]
            Self::UdMcast(p) => AnyClaim::UdMcast(Publish::try_claim(p, len)?),
        })
    }
    #[inline]
    fn position(&self) -> u64 {
        each!(self, p => Publish::position(p))
    }
    #[inline]
    fn stream_id(&self) -> u32 {
        each!(self, p => Publish::stream_id(p))
    }
    fn max_payload(&self) -> usize {
        each!(self, p => Publish::max_payload(p))
    }
    fn reliability(&self) -> Reliability {
        each!(self, p => Publish::reliability(p))
    }
    fn ticks_per_ns(&self) -> f64 {
        each!(self, p => Publish::ticks_per_ns(p))
    }
    #[inline]
    fn idle(&mut self) {
        each!(self, p => Publish::idle(p))
    }
}

impl AnyPublisher {
    /// ud-mcast: a heartbeat saying where the stream is (call when quiet, so subscribers learn
    /// of a lost tail); others: nothing to do.
    pub fn heartbeat(&mut self) -> Result<(), AnyError> {
        #[cfg(feature = "rdma")]
        if let Self::UdMcast(p) = self {
            p.heartbeat()?;
        }
        Ok(())
    }

    /// ud-mcast: sends what is queued and a heartbeat (set-up path: may wait `timeout`);
    /// others: nothing to do.
    pub fn flush(&mut self, timeout: Duration) -> Result<(), AnyError> {
        #[cfg(feature = "rdma")]
        if let Self::UdMcast(p) = self {
            p.flush(timeout)?;
        }
        let _ = timeout;
        Ok(())
    }

    /// rdma-rc: subscribers dropped since the last call, with why (call when idle); a reader
    /// that left cleanly is not a failure and is not listed. Others: none.
    pub fn dropped(&mut self) -> Vec<String> {
        match self {
            #[cfg(feature = "rdma")]
            Self::RdmaRc(p) => p
                .take_dropped()
                .into_iter()
                .filter(|(_, e)| !matches!(e, crate::rdma::RdmaError::Left { .. }))
                .map(|(peer, e)| format!("{peer}: {e}"))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Whether a reader is there to take what is published: shm and ud-mcast always (a shm
    /// ring holds what is published for a reader to come; multicast cannot tell), rdma-rc once
    /// a subscriber connected.
    pub fn has_reader(&mut self) -> bool {
        match self {
            #[cfg(feature = "rdma")]
            Self::RdmaRc(p) => {
                p.poll();
                !p.subscribers().is_empty()
            }
            _ => true,
        }
    }
}

/// A subscriber on any transport.
#[allow(clippy::large_enum_variant)] // as AnyPublisher: inline on purpose
#[derive(Debug)]
#[non_exhaustive]
pub enum AnySubscriber {
    /// A shm ring.
    Shm(ShmSubscriber),
    /// rdma-rc.
    #[cfg(feature = "rdma")]
    RdmaRc(crate::rdma::RdmaSubscriber),
    /// ud-mcast.
    #[cfg(feature = "rdma")]
    UdMcast(crate::mcast::McastSubscriber),
}

impl Subscribe for AnySubscriber {
    type Error = AnyError;

    /// Always inlined: out of line, its result went through the stack, stored a field at a
    /// time and read back by the caller in wide loads the CPU cannot serve from those stores
    /// (a stall on every poll, the largest part of an idle poll in a profile of the trader).
    #[inline(always)]
    fn try_recv(&mut self) -> Result<Option<Recv<'_>>, AnyError> {
        each!(self, s => Subscribe::try_recv(s).map_err(AnyError::from))
    }
    #[inline]
    fn try_recv_into(&mut self, out: &mut [u8]) -> Result<Option<RecvInto>, AnyError> {
        each!(self, s => Subscribe::try_recv_into(s, out).map_err(AnyError::from))
    }
    #[inline]
    fn position(&self) -> u64 {
        each!(self, s => Subscribe::position(s))
    }
    fn missed(&self) -> u64 {
        each!(self, s => Subscribe::missed(s))
    }
    fn max_payload(&self) -> usize {
        each!(self, s => Subscribe::max_payload(s))
    }
    fn reliability(&self) -> Reliability {
        each!(self, s => Subscribe::reliability(s))
    }
    fn ticks_per_ns(&self) -> f64 {
        each!(self, s => Subscribe::ticks_per_ns(s))
    }
    fn set_manual_release(&mut self, manual: bool) -> bool {
        each!(self, s => Subscribe::set_manual_release(s, manual))
    }
    #[inline]
    fn release_to(&mut self, position: u64) {
        each!(self, s => Subscribe::release_to(s, position))
    }
    fn window(&self) -> u64 {
        each!(self, s => Subscribe::window(s))
    }
    fn aborted(&self) -> u64 {
        each!(self, s => Subscribe::aborted(s))
    }
    fn source_id(&self) -> Option<u64> {
        each!(self, s => Subscribe::source_id(s))
    }
}

impl AnySubscriber {
    /// What became of the stream's publisher (a syscall on shm and rdma-rc: call it when idle).
    pub fn publisher(&self) -> PeerState {
        match self {
            Self::Shm(s) => match s.publisher_state() {
                PublisherState::Live { .. } => PeerState::Live,
                PublisherState::Closed { .. } => PeerState::Closed,
                PublisherState::Dead { pid, .. } => PeerState::Died { pid },
            },
            #[cfg(feature = "rdma")]
            Self::RdmaRc(s) => match s.publisher_gone() {
                true => PeerState::Closed,
                false => PeerState::Live,
            },
            #[cfg(feature = "rdma")]
            Self::UdMcast(_) => PeerState::Live,
        }
    }

    /// ud-mcast: messages recovered from the publisher's history after the fabric lost them.
    pub fn recovered(&self) -> u64 {
        match self {
            #[cfg(feature = "rdma")]
            Self::UdMcast(s) => s.stats().recovered,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(tag: &str) -> OpenOptions {
        let dir = std::env::temp_dir().join(format!("tickbus-any-{tag}-{}", std::process::id()));
        OpenOptions {
            shm: ShmOptions::new(dir.join("huge"), dir.join("shm"), shm::HugepagePolicy::Preferred),
            wait: Duration::from_millis(300),
            ..OpenOptions::default()
        }
    }

    #[test]
    fn a_shm_uri_opens_a_reliable_pair_that_claims_and_receives_into() {
        let o = opts("pair");
        let c = Channel::parse("shm:orders?reliable&slots=8&payload=64&stream=9").unwrap();
        let mut p = open_publisher(&c, &o).unwrap();
        let mut s = open_subscriber(&c, &o).unwrap();
        assert_eq!((p.stream_id(), p.reliability()), (9, Reliability::Reliable));
        assert!(p.max_payload() >= 64);
        assert_eq!(Subscribe::reliability(&s), Reliability::Reliable);
        for i in 0..20u64 {
            let mut claim = p.try_claim(16).unwrap();
            claim.store_word(0, i);
            claim.store_word(1, 0);
            claim.commit().unwrap();
            let mut out = [0u8; 16];
            assert!(matches!(s.try_recv_into(&mut out), Ok(Some(RecvInto::Message { position })) if position == i));
            assert_eq!(u64::from_le_bytes(out[..8].try_into().unwrap()), i);
        }
        assert_eq!(s.publisher(), PeerState::Live);
        drop(p);
        assert_eq!(s.publisher(), PeerState::Closed);
        let _ = shm::remove("orders", &o.shm);
    }

    #[test]
    fn a_subscriber_waits_for_its_publisher_then_says_whom_it_waited_for() {
        let o = opts("wait");
        let c = Channel::parse("shm:nobody-publishes-this").unwrap();
        let t = Instant::now();
        let e = open_subscriber(&c, &o).unwrap_err().to_string();
        assert!(t.elapsed() >= o.wait, "gave up before the wait");
        assert!(e.contains("shm:nobody-publishes-this") && e.contains("is the app that publishes it running"), "{e}");
        let stop = Arc::new(AtomicBool::new(true));
        let e = open_subscriber(&c, &OpenOptions { stop: Some(stop), wait: Duration::from_secs(60), ..o }).unwrap_err();
        assert!(matches!(e, OpenError::Stopped { .. }), "{e}");
    }

    #[cfg(not(feature = "rdma"))]
    #[test]
    fn an_rdma_uri_in_a_build_without_rdma_says_how_to_build_it() {
        let c = Channel::parse("rdma-rc://127.0.0.1:7400/7").unwrap();
        let e = open_publisher(&c, &OpenOptions::default()).unwrap_err().to_string();
        assert!(e.contains("--features rdma"), "{e}");
    }
}
