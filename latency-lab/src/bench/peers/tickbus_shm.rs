//! tickbus over hugepage shared memory: one ring per direction, reliable mode (a full ring makes
//! the sender retry; nothing is lost), the receiver a consumer reading in place. In-process (two
//! threads, each end mapping the ring as another process would) and across two processes.
use std::error::Error;
use std::time::{Duration, Instant};

use tickbus::shm::{self, ShmError, ShmOptions, ShmPublisher, ShmSubscriber};
use tickbus::{Mode, Recv, RecvInto, RingConfig};

use crate::bench::transport::{message, put_stamp, stamp_of, CrossProcess, InProcess, Rx, Tx};

/// Slots per ring: deep enough for bursts, small enough (128 KiB at 64 B) to stay in L2.
pub const SLOTS: usize = 1024;

#[derive(Default)]
pub struct TickbusShm {
    pub opts: ShmOptions,
    pub made: Vec<String>,
    backing: String,
}

pub struct ShmTx {
    p: ShmPublisher,
    buf: Vec<u8>,
    /// Dropped after the publisher (field order): a ring is removed once nobody publishes it.
    _file: RemoveOnDrop,
}

struct RemoveOnDrop {
    name: String,
    opts: ShmOptions,
}

pub struct ShmRx {
    s: ShmSubscriber,
    buf: Vec<u8>,
    /// Receive with `try_recv_into` (the message's size is known) instead of `try_recv`.
    into: bool,
}

impl Tx for ShmTx {
    #[inline]
    fn try_send(&mut self, stamp: u64) -> bool {
        put_stamp(&mut self.buf, stamp);
        self.p.publish(&self.buf).is_ok()
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = shm::remove(&self.name, &self.opts);
    }
}

impl Rx for ShmRx {
    #[inline]
    fn try_recv(&mut self) -> Option<u64> {
        if self.into {
            return match self.s.try_recv_into(&mut self.buf)? {
                RecvInto::Message { .. } => Some(stamp_of(&self.buf)),
                other => panic!("ping-pong sends one size and keeps one message in flight, yet {other:?}"),
            };
        }
        match self.s.try_recv()? {
            Recv::Message(m) => {
                let n = m.payload.len();
                self.buf[..n].copy_from_slice(m.payload);
                Some(stamp_of(&self.buf))
            }
            Recv::Gap(g) => panic!("ping-pong keeps one message in flight: nothing can be lapped, yet {g:?}"),
        }
    }
}

/// Creates ring `name` in `mode` and its publishing end; also says how the ring is backed.
fn open_tx(
    name: &str,
    mode: Mode,
    size: usize,
    ticks_per_ns: f64,
    opts: &ShmOptions,
) -> Result<(ShmTx, String), Box<dyn Error>> {
    let c = RingConfig { ticks_per_ns, ..RingConfig::for_payload(mode, 1, size.max(8), SLOTS) };
    let p = shm::open_publisher(name, &c, opts)?;
    let m = if mode == Mode::Lossy { "lossy" } else { "reliable" };
    let note = format!("{:?}, {m}, {} slots of {} B", p.backing(), c.slot_count, c.slot_size);
    Ok((ShmTx { p, buf: message(size), _file: RemoveOnDrop { name: name.into(), opts: opts.clone() } }, note))
}

/// Opens the consumer end, waiting up to 5 s for the publisher to create the ring.
fn open_rx(name: &str, size: usize, opts: &ShmOptions) -> Result<ShmRx, Box<dyn Error>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match shm::open_consumer(name, opts) {
            Ok(s) => return Ok(ShmRx { s, buf: message(size), into: false }),
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                let _: ShmError = e;
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => return Err(e.into()),
        }
    }
}

impl InProcess for TickbusShm {
    type Tx = ShmTx;
    type Rx = ShmRx;
    fn name(&self) -> String {
        "tickbus shm".into()
    }
    fn note(&self) -> String {
        self.backing.clone()
    }
    fn channel(&mut self, size: usize, ticks_per_ns: f64) -> Result<(ShmTx, ShmRx), Box<dyn Error>> {
        let name = format!("lab-{}-{}", std::process::id(), self.made.len());
        self.made.push(name.clone());
        let (tx, note) = open_tx(&name, Mode::Reliable, size, ticks_per_ns, &self.opts)?;
        self.backing = note;
        Ok((tx, open_rx(&name, size, &self.opts)?))
    }
}

/// The same rings with counting off (`tickbus::counters::set_enabled(false)` while they are
/// opened): beside "tickbus shm", what the live counters cost on the round trip.
#[derive(Default)]
pub struct TickbusShmUncounted(pub TickbusShm);

impl InProcess for TickbusShmUncounted {
    type Tx = ShmTx;
    type Rx = ShmRx;
    fn name(&self) -> String {
        "tickbus shm (counters off)".into()
    }
    fn note(&self) -> String {
        format!("{}; no counters record, every counter update skipped", self.0.note())
    }
    fn channel(&mut self, size: usize, ticks_per_ns: f64) -> Result<(ShmTx, ShmRx), Box<dyn Error>> {
        tickbus::counters::set_enabled(false);
        let r = self.0.channel(size, ticks_per_ns);
        tickbus::counters::set_enabled(true);
        r
    }
}

/// The same rings, the consumer receiving with `try_recv_into` into a buffer of the message's
/// size, as a consumer of one fixed-layout message type would: it copies before it reads the
/// slot's length, which the floor rungs showed is what a length read first costs at 32 and 64 B.
#[derive(Default)]
pub struct TickbusShmInto(pub TickbusShm);

impl InProcess for TickbusShmInto {
    type Tx = ShmTx;
    type Rx = ShmRx;
    fn name(&self) -> String {
        "tickbus shm (receive into)".into()
    }
    fn note(&self) -> String {
        format!("{}; the consumer copies into a buffer of the message's size, then checks the length", self.0.note())
    }
    fn channel(&mut self, size: usize, ticks_per_ns: f64) -> Result<(ShmTx, ShmRx), Box<dyn Error>> {
        let (tx, mut rx) = self.0.channel(size, ticks_per_ns)?;
        rx.into = true;
        Ok((tx, rx))
    }
}

/// Lossy rings read by observers, tickbus's market-data path: the reader copies each slot out
/// under the seqlock (it may be lapped) instead of reading it in place, and the publisher never
/// waits. Ping-pong keeps one message in flight, so nothing is lapped here; what it measures is
/// the observer's copy and re-check beside the reliable consumer's in-place read.
#[derive(Default)]
pub struct TickbusShmLossy(pub TickbusShm);

impl InProcess for TickbusShmLossy {
    type Tx = ShmTx;
    type Rx = ShmRx;
    fn name(&self) -> String {
        "tickbus shm (lossy, observer)".into()
    }
    fn note(&self) -> String {
        self.0.backing.clone()
    }
    fn channel(&mut self, size: usize, ticks_per_ns: f64) -> Result<(ShmTx, ShmRx), Box<dyn Error>> {
        let name = format!("lab-lossy-{}-{}", std::process::id(), self.0.made.len());
        self.0.made.push(name.clone());
        let (tx, note) = open_tx(&name, Mode::Lossy, size, ticks_per_ns, &self.0.opts)?;
        self.0.backing = format!("{note}, observer copies out");
        let s = shm::open_observer(&name, tickbus::StartAt::Latest, &self.0.opts)?;
        Ok((tx, ShmRx { s, buf: message(size), into: false }))
    }
}

/// The same rings, one end in each of two processes.
#[derive(Default)]
pub struct TickbusShmProcesses {
    pub opts: ShmOptions,
}

impl CrossProcess for TickbusShmProcesses {
    type Tx = ShmTx;
    type Rx = ShmRx;
    const KEY: &'static str = "tickbus-shm";
    fn name(&self) -> String {
        "tickbus shm (2 processes)".into()
    }
    fn note(&self) -> String {
        format!("reliable, {SLOTS} slots, publisher and consumer in separate processes")
    }
    fn tx(&self, channel: &str, size: usize, ticks_per_ns: f64) -> Result<ShmTx, Box<dyn Error>> {
        Ok(open_tx(channel, Mode::Reliable, size, ticks_per_ns, &self.opts)?.0)
    }
    fn rx(&self, channel: &str, size: usize) -> Result<ShmRx, Box<dyn Error>> {
        open_rx(channel, size, &self.opts)
    }
}

/// The same reliable rings opened by channel URI (`shm:NAME?reliable&slots=1024&payload=N`)
/// and driven through the one stream API (`tickbus::stream`: `AnyPublisher`/`AnySubscriber`,
/// the `Publish`/`Subscribe` traits, one `match` per call): beside "tickbus shm" in the same
/// run, what the abstraction costs on the round trip.
#[derive(Default)]
pub struct TickbusStream {
    pub made: usize,
}

pub struct StreamTx {
    p: tickbus::stream::AnyPublisher,
    buf: Vec<u8>,
    _file: RemoveOnDrop,
}

pub struct StreamRx {
    s: tickbus::stream::AnySubscriber,
    buf: Vec<u8>,
}

impl Tx for StreamTx {
    #[inline]
    fn try_send(&mut self, stamp: u64) -> bool {
        use tickbus::stream::Publish;
        put_stamp(&mut self.buf, stamp);
        self.p.publish(&self.buf).is_ok()
    }
}

impl Rx for StreamRx {
    #[inline]
    fn try_recv(&mut self) -> Option<u64> {
        use tickbus::stream::Subscribe;
        match self.s.try_recv().expect("a shm stream's receive cannot fail")? {
            Recv::Message(m) => {
                let n = m.payload.len();
                self.buf[..n].copy_from_slice(m.payload);
                Some(stamp_of(&self.buf))
            }
            Recv::Gap(g) => panic!("ping-pong keeps one message in flight: nothing can be lapped, yet {g:?}"),
        }
    }
}

impl InProcess for TickbusStream {
    type Tx = StreamTx;
    type Rx = StreamRx;
    fn name(&self) -> String {
        "tickbus shm (stream API, URI)".into()
    }
    fn note(&self) -> String {
        format!(
            "shm:NAME?reliable&slots={SLOTS}, opened and driven through tickbus::stream (AnyPublisher, AnySubscriber)"
        )
    }
    fn channel(&mut self, size: usize, ticks_per_ns: f64) -> Result<(StreamTx, StreamRx), Box<dyn Error>> {
        use tickbus::stream::{open_publisher, open_subscriber, Channel, OpenOptions};
        let name = format!("lab-uri-{}-{}", std::process::id(), self.made);
        self.made += 1;
        let channel = Channel::parse(&format!("shm:{name}?reliable&slots={SLOTS}&payload={}", size.max(8)))?;
        let o = OpenOptions::default();
        let p = open_publisher(&channel, &o)?;
        // The stream records the ring's TSC rate itself; the lab converts with its own (same host).
        let _ = ticks_per_ns;
        let s = open_subscriber(&channel, &o)?;
        let file = RemoveOnDrop { name, opts: o.shm.clone() };
        Ok((StreamTx { p, buf: message(size), _file: file }, StreamRx { s, buf: message(size) }))
    }
}
