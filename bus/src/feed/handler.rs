//! The feed handler's per-datagram path as one piece that `tickbus feed`, the lab's wire
//! benchmark and an embedding app all call: a MoldUDP64 datagram from line A or B goes to the
//! [`Arbiter`]; each message it delivers is parsed as ITCH, normalised into tickbus market data
//! (or passed on as it is, `raw`) and published on any stream ([`Publish`]), stamped with the
//! TSC at which its datagram was taken and how long after it its publish began (the header's
//! publish lag: a reader times the hop from the publish as well as from the ingress, as from
//! the venue's own messages); what both lines lost is published as a `FeedGap`. Re-requests go
//! back to the caller, who owns the socket they are sent on (off the hot path).
//!
//! Owns: the arbiter, the normaliser and the output stream. Never: reads a socket or a clock
//! other than the TSC as each message's publish begins (the caller passes the datagram, its
//! ingress TSC and the arbiter's clock), allocates, or makes a syscall of its own (the output
//! stream's transport may: see its docs).
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tickbus_codecs::md::FeedGap;
use tickbus_codecs::moldudp64::Packet;
use tickbus_codecs::normalize::Normalizer;
use tickbus_codecs::{Header, Message, FLAG_INGRESS_TSC};
use zerocopy::IntoBytes;

use super::arbiter::{Arbiter, ArbiterStats, Line, Out};
use super::repair::{BookRepair, RepairCounts};
use crate::snapshot::tap::SnapshotTap;
use crate::stream::{Publish, Retry};
use crate::time::{FastNs, Tsc, TscScale};

/// What the handler counted besides the arbiter's own statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct HandlerCounts {
    /// Messages published (normalised market data, or raw ITCH).
    pub published: u64,
    /// `FeedGap`s published (runs of messages both lines lost and nobody resent in time).
    pub gaps_published: u64,
    /// Delivered messages that are not ITCH this build can parse: counted, not published
    /// (normalised output only; raw output publishes them as they are).
    pub unparsed: u64,
    /// Datagrams that are not MoldUDP64 (too short, a length past the end): dropped.
    pub malformed: u64,
    /// Messages (and gaps) the stream refused for good ([`PublishFailed`]): delivered by the
    /// arbiter, not published. The first of each call is also returned as its error.
    pub failed: u64,
}

/// The output stream refused a message for good: the handler's stream is broken (or was
/// stopped while a reliable stream stayed full) and the message was not published.
#[derive(Debug, thiserror::Error)]
#[error("publishing the feed at position {position}: {source}")]
pub struct PublishFailed<E: std::error::Error + 'static> {
    /// The stream position the message would have had.
    pub position: u64,
    /// The transport's error.
    #[source]
    pub source: E,
}

/// Where [`FeedHandler`] sends a re-request: `(session, first sequence, count)`. The caller
/// sends it to the retransmission server on a socket of its own.
pub trait Rerequest {
    /// Asks for `count` messages of `session` from `sequence`.
    fn rerequest(&mut self, session: &[u8; 10], sequence: u64, count: u16);
}

impl<F: FnMut(&[u8; 10], u64, u16)> Rerequest for F {
    fn rerequest(&mut self, session: &[u8; 10], sequence: u64, count: u16) {
        self(session, sequence, count)
    }
}

/// No retransmission server: gaps wait out their time and are published as gaps.
pub struct NoRerequest;

impl Rerequest for NoRerequest {
    fn rerequest(&mut self, _: &[u8; 10], _: u64, _: u16) {}
}

/// Two MoldUDP64 lines in, one stream of market data out (see the module docs).
pub struct FeedHandler<P: Publish> {
    arb: Arbiter,
    norm: Normalizer,
    out: P,
    raw: bool,
    stop: Option<Arc<AtomicBool>>,
    counts: HandlerCounts,
    extras: Extras,
    lag: Lag,
}

/// How a message's publish lag is taken: the TSC as its publish begins, less its ingress, in ns
/// at the output stream's own calibration (the one its readers convert with).
struct Lag {
    tsc: Tsc,
    /// The output's calibration, by a multiply and a shift: the conversion lies between the
    /// TSC read and the publish it times.
    fast: FastNs,
}

impl Lag {
    /// Stamps `h` (already stamped with its ingress) with the time since: read as the
    /// publish begins, so the lag never runs past the true start and a hop timed from it errs
    /// long, never short. An ingress of 0 (a caller with no clock) gets no lag: time since the
    /// TSC's origin is no lag.
    #[inline(always)]
    fn stamp(&self, h: &mut Header, ingress: u64) {
        if ingress != 0 {
            h.set_publish_lag_ns(self.fast.delta_ns(ingress, self.tsc.now()));
        }
    }
}

/// What the handler hands on besides publishing, when asked to.
#[derive(Default)]
struct Extras {
    /// Every message published, for a snapshot maker.
    tap: Option<SnapshotTap>,
    /// The book's repair after a loss.
    repair: Option<Box<BookRepair>>,
    /// The MoldUDP64 session the arbiter follows, as it said (`Out::Session`): a loss it gives
    /// up belongs to it, even one given up as a packet of the next session arrives.
    session: Option<[u8; 10]>,
}

impl<P: Publish> std::fmt::Debug for FeedHandler<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeedHandler")
            .field("stream", &self.out.stream_id())
            .field("position", &self.out.position())
            .field("raw", &self.raw)
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

impl<P: Publish> FeedHandler<P> {
    /// A handler arbitrating with `arb`, normalising with `norm` (its book sized for the day:
    /// [`Normalizer::with_capacity`]; `pre_touch` it first so page faults stay out of the first
    /// ticks), publishing on `out`.
    pub fn new(arb: Arbiter, norm: Normalizer, out: P) -> FeedHandler<P> {
        let out_ticks_per_ns = out.ticks_per_ns();
        FeedHandler {
            arb,
            norm,
            out,
            raw: false,
            stop: None,
            counts: HandlerCounts::default(),
            extras: Extras::default(),
            lag: Lag { tsc: Tsc::new(), fast: FastNs::new(TscScale { ticks_per_ns: out_ticks_per_ns }) },
        }
    }

    /// Hands every message published (its position and bytes) to `tap`: a snapshot maker's
    /// copy of the book ([`crate::snapshot::tap`]). One copy per message on this path.
    pub fn snapshot_tap(mut self, tap: SnapshotTap) -> FeedHandler<P> {
        self.extras.tap = Some(tap);
        self
    }

    /// Repairs the normaliser's book after a loss with the venue's book ([`super::repair`]):
    /// from a loss on, each message delivered is also kept in the repair's ring.
    pub fn repair(mut self, repair: BookRepair) -> FeedHandler<P> {
        self.extras.repair = Some(Box::new(repair));
        self
    }

    /// The repair's counts, if it repairs.
    pub fn repair_counts(&self) -> Option<RepairCounts> {
        self.extras.repair.as_ref().map(|r| r.counts())
    }

    /// Whether a repair of the book is under way (the market data is not right until it ends).
    pub fn repairing(&self) -> bool {
        self.extras.repair.as_ref().is_some_and(|r| r.repairing())
    }

    /// The snapshot tap, if it has one (its `lost`).
    pub fn tap(&self) -> Option<&SnapshotTap> {
        self.extras.tap.as_ref()
    }

    /// The repair's upkeep without the arbiter's (a file or capture fed with
    /// [`FeedHandler::on_message`]); [`FeedHandler::poll`] does it too.
    #[inline]
    pub fn poll_repair(&mut self) {
        if let Some(r) = &mut self.extras.repair {
            r.poll(&mut self.norm, self.out.position());
        }
    }

    /// Publishes each delivered ITCH message as it is instead of normalising it.
    pub fn raw(mut self, raw: bool) -> FeedHandler<P> {
        self.raw = raw;
        self
    }

    /// A reliable output stream that is full is retried until its consumers make room or
    /// `stop` is set (then the message fails). Without a flag a full stream fails at once:
    /// give one for a reliable stream.
    pub fn stop_on(mut self, stop: Arc<AtomicBool>) -> FeedHandler<P> {
        self.stop = Some(stop);
        self
    }

    /// One datagram from `line`, taken at TSC `ingress`, with the arbiter's clock at `now_ns`.
    /// A datagram that is not MoldUDP64 is counted ([`HandlerCounts::malformed`]) and dropped.
    /// On an error the message it names (the first, if several failed) was not published and is
    /// lost to this stream (the arbiter delivered it): every such message is counted in
    /// [`HandlerCounts::failed`]. The handler stays usable, but a stream that refuses for good
    /// is broken: stop and say so, as `tickbus feed` does.
    #[inline]
    pub fn on_datagram(
        &mut self,
        line: Line,
        datagram: &[u8],
        ingress: u64,
        now_ns: u64,
        rerequest: &mut impl Rerequest,
    ) -> Result<(), PublishFailed<P::Error>> {
        let Ok(pk) = Packet::parse(datagram) else {
            self.counts.malformed += 1;
            return Ok(());
        };
        let session = pk.header.session;
        let FeedHandler { arb, norm, out, raw, stop, counts, extras, lag } = self;
        let mut failed = None;
        arb.on_packet(line, &pk, now_ns, &mut |o| {
            let r = emit(o, norm, out, *raw, stop.as_deref(), counts, extras, lag, &session, ingress, rerequest);
            if let Err(e) = r {
                failed.get_or_insert(e);
            }
        });
        failed.map_or(Ok(()), Err)
    }

    /// The arbiter's timers: re-requests due, gaps given up (published as gaps, stamped
    /// `ingress`), a jump or an end of session believed. Call it every poll, datagrams or not.
    #[inline]
    pub fn poll(
        &mut self,
        now_ns: u64,
        ingress: u64,
        rerequest: &mut impl Rerequest,
    ) -> Result<(), PublishFailed<P::Error>> {
        let session = self.arb.session().unwrap_or(*b"          ");
        let FeedHandler { arb, norm, out, raw, stop, counts, extras, lag } = self;
        let mut failed = None;
        arb.poll(now_ns, &mut |o| {
            if let Err(e) = emit(o, norm, out, *raw, stop.as_deref(), counts, extras, lag, &session, ingress, rerequest)
            {
                failed.get_or_insert(e);
            }
        });
        self.poll_repair();
        failed.map_or(Ok(()), Err)
    }

    /// One ITCH message already in order (a file, a capture put in order), bypassing the
    /// arbiter.
    pub fn on_message(&mut self, itch: &[u8], sequence: u64, ingress: u64) -> Result<(), PublishFailed<P::Error>> {
        let FeedHandler { norm, out, raw, stop, counts, extras, lag, .. } = self;
        message(norm, out, *raw, stop.as_deref(), counts, extras, lag, itch, sequence, ingress)
    }

    /// Messages `[from, to)` of MoldUDP64 session `session` (None: not known, as in an ITCH
    /// file) lost for good, published as a `FeedGap`, bypassing the arbiter. A book repair
    /// takes a venue's book only of that session.
    pub fn on_gap(
        &mut self,
        from: u64,
        to: u64,
        session: Option<&[u8; 10]>,
        ingress: u64,
    ) -> Result<(), PublishFailed<P::Error>> {
        let FeedHandler { out, stop, counts, extras, lag, .. } = self;
        gap(out, stop.as_deref(), counts, extras, lag, from, to, session, ingress)
    }

    /// The normaliser's book (whole unless messages were lost and not yet repaired).
    pub fn book(&self) -> &tickbus_codecs::book::OrderBook {
        self.norm.book()
    }

    /// The arbiter (its session, whether a gap is open, whether the session ended).
    pub fn arbiter(&self) -> &Arbiter {
        &self.arb
    }

    /// The arbiter's statistics.
    pub fn stats(&self) -> ArbiterStats {
        self.arb.stats()
    }

    /// What the handler counted.
    pub fn counts(&self) -> HandlerCounts {
        self.counts
    }

    /// The output stream.
    pub fn stream(&self) -> &P {
        &self.out
    }

    /// The output stream, for its idle upkeep.
    pub fn stream_mut(&mut self) -> &mut P {
        &mut self.out
    }
}

/// One arbiter output.
#[inline]
#[allow(clippy::too_many_arguments)]
fn emit<P: Publish>(
    o: Out<'_>,
    norm: &mut Normalizer,
    out: &mut P,
    raw: bool,
    stop: Option<&AtomicBool>,
    counts: &mut HandlerCounts,
    extras: &mut Extras,
    lag: &Lag,
    session: &[u8; 10],
    ingress: u64,
    rerequest: &mut impl Rerequest,
) -> Result<(), PublishFailed<P::Error>> {
    match o {
        Out::Message { sequence, message: m } => {
            message(norm, out, raw, stop, counts, extras, lag, m, sequence, ingress)
        }
        Out::Lost { from, to } => {
            let of = extras.session;
            gap(out, stop, counts, extras, lag, from, to, of.as_ref(), ingress)
        }
        Out::Rerequest { sequence, count } => {
            rerequest.rerequest(session, sequence, count);
            Ok(())
        }
        // Sequences start again; the market data goes on.
        Out::Session { session } => {
            extras.session = Some(session);
            if let Some(r) = &mut extras.repair {
                r.on_session(session);
            }
            Ok(())
        }
    }
}

#[inline]
#[allow(clippy::too_many_arguments)]
fn message<P: Publish>(
    norm: &mut Normalizer,
    out: &mut P,
    raw: bool,
    stop: Option<&AtomicBool>,
    counts: &mut HandlerCounts,
    extras: &mut Extras,
    lag: &Lag,
    itch: &[u8],
    sequence: u64,
    ingress: u64,
) -> Result<(), PublishFailed<P::Error>> {
    if raw {
        put(out, stop, counts, itch)?;
        counts.published += 1;
        return Ok(());
    }
    let Extras { tap, repair, .. } = extras;
    // Every message delivered, parsed or not: the repair must know the stream reached it.
    if let Some(r) = repair {
        r.on_message(sequence, itch);
    }
    let Ok(msg) = tickbus_codecs::itch::parse(itch, sequence) else {
        counts.unparsed += 1;
        return Ok(());
    };
    let stream = out.stream_id();
    let mut failed = None;
    norm.apply(&msg, &mut |mut m| {
        let h: &mut Header = m.header_mut();
        let position = out.position();
        h.stamp(stream, position, ingress);
        h.flags |= FLAG_INGRESS_TSC;
        lag.stamp(h, ingress);
        match put(out, stop, counts, m.as_bytes()) {
            Ok(()) => {
                counts.published += 1;
                if let Some(t) = tap {
                    t.push(position, m.as_bytes());
                }
            }
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    });
    failed.map_or(Ok(()), Err)
}

#[allow(clippy::too_many_arguments)]
fn gap<P: Publish>(
    out: &mut P,
    stop: Option<&AtomicBool>,
    counts: &mut HandlerCounts,
    extras: &mut Extras,
    lag: &Lag,
    from: u64,
    to: u64,
    session: Option<&[u8; 10]>,
    ingress: u64,
) -> Result<(), PublishFailed<P::Error>> {
    let mut g = FeedGap::new();
    g.first_sequence = from;
    g.count = to - from;
    let position = out.position();
    g.header.stamp(out.stream_id(), position, ingress);
    g.header.flags |= FLAG_INGRESS_TSC;
    // The book is wrong from here whether or not the gap is published.
    if let Some(r) = &mut extras.repair {
        r.on_lost(to, session.copied());
    }
    lag.stamp(&mut g.header, ingress); // the repair's work is the feed's, not the reader's hop
    put(out, stop, counts, g.as_bytes())?;
    counts.gaps_published += 1;
    if let Some(t) = &mut extras.tap {
        t.push(position, g.as_bytes());
    }
    Ok(())
}

/// Publishes `bytes`, retrying while the stream says a retry helps (a full reliable ring) and
/// `stop` is not set: a reliable stream's consumers hold the feed back, as they must (nothing
/// is dropped for them), and the lines' datagrams queue in the kernel or the AF_XDP ring
/// meanwhile. A message refused for good is counted.
#[inline]
fn put<P: Publish>(
    out: &mut P,
    stop: Option<&AtomicBool>,
    counts: &mut HandlerCounts,
    bytes: &[u8],
) -> Result<(), PublishFailed<P::Error>> {
    loop {
        match out.publish(bytes) {
            Ok(_) => return Ok(()),
            Err(e) if e.retry_helps() && stop.is_some_and(|s| !s.load(Ordering::Relaxed)) => std::hint::spin_loop(),
            Err(source) => {
                counts.failed += 1;
                return Err(PublishFailed { position: out.position(), source });
            }
        }
    }
}

#[cfg(test)]
mod tests;
