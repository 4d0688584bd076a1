//! The subscribing side of a ring: poll the next slot, deliver it, report gaps.
//!
//! Owns: the reader's position, its copy-out buffer, and (reliable mode) its consumer line.
//! Never: blocks, allocates after attach, reads a clock, makes a syscall, or delivers a message
//! that failed the seqlock re-check.
use super::attach;
use super::counts::{Counter, Counters};
use super::error::AttachError;
use super::layout::{
    consumer_position_word, Geometry, Mode, RingConfig, C_ATTACHES, C_OWNER, C_POSITION, LINE_WORDS, W_PRODUCER_EPOCH,
    W_PRODUCER_POSITION, W_PRODUCER_TOKEN,
};
use super::memory::{RingMemory, Words};
use super::slot::{self, SlotState};
use super::sync::{AtomicU64, Ordering};

mod into;
pub use into::RecvInto;

/// Producer positions above this are taken for a corrupt header: at a billion messages a
/// second a real stream needs 146 years to get there.
const MAX_SANE_POSITION: u64 = 1 << 62;

/// Where a new observer starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// The next message published after attaching (live data).
    Latest,
    /// The oldest position the ring may still hold; a lap check still applies.
    Oldest,
    /// An explicit position (e.g. resuming after a gap was recovered elsewhere).
    Position(u64),
}

/// A message or a gap, in stream order.
#[derive(Debug, PartialEq, Eq)]
pub enum Recv<'a> {
    /// The next message.
    Message(Delivery<'a>),
    /// Messages were lost (lossy mode: the publisher lapped the reader).
    Gap(Gap),
}

/// One delivered message. `payload` is valid until the next call on the reader.
#[derive(Debug, PartialEq, Eq)]
pub struct Delivery<'a> {
    /// The message's position (its per-stream sequence number).
    pub position: u64,
    /// The message bytes, borrowed from the ring.
    pub payload: &'a [u8],
}

/// Messages the reader lost because the publisher lapped it (lossy mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// The position the reader expected.
    pub expected: u64,
    /// The position it resumed at; `resumed_at - expected` messages were lost.
    pub resumed_at: u64,
}

impl Gap {
    /// How many messages were lost.
    pub fn missed(&self) -> u64 {
        self.resumed_at.saturating_sub(self.expected)
    }
}

/// What a ring header says right now (for operators and tools; allocates).
#[derive(Debug, Clone, PartialEq)]
pub struct RingStatus {
    /// The ring's layout.
    pub config: RingConfig,
    /// Messages published so far (the next position).
    pub producer_position: u64,
    /// The publisher's token (pid); 0 once it closed cleanly.
    pub producer_token: u64,
    /// Publishers that have attached so far.
    pub epoch: u64,
    /// The consumer lines (reliable mode; empty for lossy rings).
    pub consumers: Vec<ConsumerLine>,
}

/// One consumer line of a reliable ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerLine {
    /// Which line this is.
    pub index: usize,
    /// Everything below this position has been consumed.
    pub position: u64,
    /// Owner token (pid); 0 if none attached.
    pub owner: u64,
    /// How many consumers have attached to this line.
    pub attaches: u64,
}

/// A subscriber of a ring: an observer (any number, never slows the publisher) or a reliable
/// consumer (holds a consumer line; the publisher waits for it).
pub struct RingReader<M: RingMemory> {
    words: Words,
    geo: Geometry,
    cfg: RingConfig,
    position: u64,
    consumer: Option<usize>,
    released: u64,
    credit_every: u64,
    /// Reliable consumer: credits go back only through [`RingReader::release_to`].
    manual_release: bool,
    /// Slots of dropped claims moved past since attach (touched only on that path).
    aborted: u64,
    /// Positions lost to laps since attaching (what every gap said, summed).
    missed: u64,
    buf: Box<[u64]>,
    /// Messages, bytes, position, gaps and laps for `tickbus stat` (none until a transport
    /// attaches its record).
    counters: Counters,
    _mem: M,
}

impl<M: RingMemory> RingReader<M> {
    /// Attaches an observer. On a lossy ring this is the normal subscriber; on a reliable ring
    /// it is a tap that copies messages out and may be lapped.
    pub fn observer(mem: M, start: StartAt) -> Result<Self, AttachError> {
        let mut r = Self::new(mem)?;
        let latest = r.producer_position()?;
        r.position = match start {
            StartAt::Latest => latest,
            StartAt::Oldest => latest.saturating_sub(r.geo.count - 1),
            StartAt::Position(p) => p,
        };
        Ok(r)
    }

    /// Attaches as a reliable consumer on the first line `claim(index)` grants, and resumes
    /// where that line's last owner stopped, so nothing published while no consumer was
    /// attached is lost. `claim` is the transport's exclusive hold on a line, one that the
    /// kernel drops when its holder dies (shm: a lock on the line's bytes of the ring file); the
    /// line's owner word is then written for operators only and decides nothing.
    pub fn consumer(mem: M, token: u64, mut claim: impl FnMut(usize) -> bool) -> Result<Self, AttachError> {
        let r = Self::reliable(mem)?;
        let max = r.cfg.max_consumers;
        let index = (0..max).find(|&i| claim(i)).ok_or(AttachError::NoFreeConsumer { max })?;
        r.line(index)[C_OWNER].store(token, Ordering::Release);
        r.take_line(index)
    }

    /// Attaches as a reliable consumer on the first line whose owner word is free (0). For
    /// memory that no other process maps (a heap ring, an RDMA subscriber's own ring): there, no
    /// consumer can die and leave its line behind, so the owner word alone decides.
    pub fn consumer_by_token(mem: M, token: u64) -> Result<Self, AttachError> {
        let r = Self::reliable(mem)?;
        let max = r.cfg.max_consumers;
        let take = |r: &Self, i: usize| {
            r.line(i)[C_OWNER].compare_exchange(0, token, Ordering::AcqRel, Ordering::Acquire).is_ok()
        };
        let index = (0..max).find(|&i| take(&r, i)).ok_or(AttachError::NoFreeConsumer { max })?;
        r.take_line(index)
    }

    fn reliable(mem: M) -> Result<Self, AttachError> {
        let r = Self::new(mem)?;
        if r.cfg.mode != Mode::Reliable {
            return Err(AttachError::Layout(super::error::LayoutError::BadConfig {
                what: "consumer() needs a reliable ring; use observer() on a lossy ring",
            }));
        }
        r.producer_position()?;
        Ok(r)
    }

    /// Starts at the position consumer line `index` (already ours) left. A position no real
    /// stream reaches is refused, and the line handed back: `pos + 1` would wrap to the stamp of
    /// a slot never written, so an unwritten slot would look published.
    fn take_line(mut self, index: usize) -> Result<Self, AttachError> {
        let line = self.line(index);
        line[C_ATTACHES].fetch_add(1, Ordering::Relaxed);
        let position = line[C_POSITION].load(Ordering::Acquire);
        if position > MAX_SANE_POSITION {
            line[C_OWNER].store(0, Ordering::Release);
            return Err(AttachError::CorruptConsumerPosition { index, position });
        }
        self.position = position;
        self.released = position;
        self.consumer = Some(index);
        Ok(self)
    }

    /// Consumer line `i` (below `max_consumers`, at most 16: validated at attach).
    fn line(&self, i: usize) -> &[AtomicU64] {
        self.words.range(Geometry::consumer(i), LINE_WORDS)
    }

    /// The producer position the header holds, refused if no real stream could be there.
    fn producer_position(&self) -> Result<u64, AttachError> {
        let position = self.words.word(W_PRODUCER_POSITION).load(Ordering::Acquire);
        if position > MAX_SANE_POSITION {
            return Err(AttachError::CorruptPosition { position });
        }
        Ok(position)
    }

    fn new(mem: M) -> Result<Self, AttachError> {
        let words = Words::new(&mem);
        let cfg = attach::read(&words)?;
        let geo = Geometry::new(&cfg);
        let buf = vec![0u64; geo.max_payload.div_ceil(8)].into_boxed_slice();
        let credit_every = (geo.count / 4).max(1);
        Ok(RingReader {
            words,
            geo,
            cfg,
            position: 0,
            consumer: None,
            released: 0,
            credit_every,
            manual_release: false,
            aborted: 0,
            missed: 0,
            buf,
            counters: Counters::none(),
            _mem: mem,
        })
    }

    /// The ring's configuration (includes the publisher's TSC ticks-per-ns).
    pub fn config(&self) -> &RingConfig {
        &self.cfg
    }

    /// The position of the next message this reader will deliver.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// When the ring was created (Unix ns, as its creator wrote it): a recreated ring (a reboot,
    /// `ring rm`) has another value, so a recorder can tell it from the ring it recorded.
    pub fn created_unix_ns(&self) -> u64 {
        self.words.word(super::layout::W_CREATED_UNIX_NS).load(Ordering::Relaxed)
    }

    /// How many slots of dropped claims (no message) this reader has moved past since it
    /// attached: a recorder tells them from messages consumed elsewhere by this count.
    pub fn aborted_skipped(&self) -> u64 {
        self.aborted
    }

    /// Positions reported lost in gaps since this reader attached (whether or not it counts
    /// into a counters file).
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// The memory the ring lives in (a transport's mapping).
    pub fn memory(&self) -> &M {
        &self._mem
    }

    /// Position up to which this consumer has handed slots back (reliable mode).
    pub fn released(&self) -> u64 {
        self.released
    }

    /// The consumer line this reader holds, if it is a reliable consumer.
    pub fn consumer_index(&self) -> Option<usize> {
        self.consumer
    }

    /// The publisher's token (pid) and epoch as the ring header says now; token 0 = closed cleanly.
    pub fn publisher(&self) -> (u64, u64) {
        (
            self.words.word(W_PRODUCER_TOKEN).load(Ordering::Acquire),
            self.words.word(W_PRODUCER_EPOCH).load(Ordering::Acquire),
        )
    }

    /// A snapshot of the ring header: publisher position and every consumer line.
    pub fn status(&self) -> RingStatus {
        let (producer_token, epoch) = self.publisher();
        RingStatus {
            config: self.cfg,
            producer_position: self.words.word(W_PRODUCER_POSITION).load(Ordering::Acquire),
            producer_token,
            epoch,
            consumers: (0..self.cfg.max_consumers)
                .map(|i| {
                    let w = |k: usize| self.line(i)[k].load(Ordering::Acquire);
                    ConsumerLine { index: i, position: w(C_POSITION), owner: w(C_OWNER), attaches: w(C_ATTACHES) }
                })
                .collect(),
        }
    }

    /// Counts this reader's deliveries into `c` (a stream's record in the counters file).
    pub fn set_counters(&mut self, c: Counters) {
        c.set(Counter::Position, self.position);
        self.counters = c;
    }

    /// This reader's counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    #[inline(always)]
    fn count_message(&self, len: usize) {
        self.counters.add(Counter::Messages, 1);
        self.counters.add(Counter::Bytes, len as u64);
        self.counters.set(Counter::Position, self.position);
    }

    /// The next message or gap, or `None` if nothing new is published.
    #[inline]
    #[must_use = "a message taken and not looked at is lost to this reader"]
    pub fn try_recv(&mut self) -> Option<Recv<'_>> {
        self.try_recv_before(u64::MAX)
    }

    /// Like [`RingReader::try_recv`], but reads no slot at or beyond position `limit`: for
    /// memory where the transport knows exactly which slots have landed (RDMA WRITE_WITH_IMM:
    /// a completion per slot), so a slot whose completion has not arrived is never read, even
    /// after skipping an aborted slot or resuming after a gap.
    // inline(always): behind the stream API's `match` on the transport (AnyPublisher /
    // AnySubscriber) LLVM kept this out of line, and the 32 B round trip through the stream API
    // cost 1.3-1.4x the direct handle's (lab row "tickbus shm (stream API, URI)"); inlined,
    // 1.02-1.12x.
    #[inline(always)]
    #[must_use = "a message taken and not looked at is lost to this reader"]
    pub fn try_recv_before(&mut self, limit: u64) -> Option<Recv<'_>> {
        if self.consumer.is_some() {
            return self.recv_consumer(limit);
        }
        match self.observe_next(limit)? {
            Err(gap) => Some(Recv::Gap(gap)),
            Ok((position, len)) => {
                self.consume(len);
                let payload = &zerocopy::IntoBytes::as_bytes(&self.buf[..])[..len];
                Some(Recv::Message(Delivery { position, payload }))
            }
        }
    }

    /// Reliable consumer: the slot cannot be overwritten until our consumer line passes it, so
    /// the payload is delivered in place, without a copy.
    #[inline(always)]
    fn recv_consumer(&mut self, limit: u64) -> Option<Recv<'_>> {
        self.credit_if_due();
        loop {
            let position = self.position;
            let slot = match self.next_published(limit)? {
                Ok(slot) => slot,
                Err(gap) => return Some(Recv::Gap(gap)),
            };
            let (len, aborted) = slot::read_len(self.words.range(slot, self.geo.slot_words), &self.geo);
            if aborted {
                self.skip_aborted();
                continue;
            }
            self.consume(len);
            return Some(Recv::Message(Delivery { position, payload: self.in_place(slot, len) }));
        }
    }

    /// Reliable consumer, before a receive: credits the publisher once a quarter of the ring
    /// (`credit_every`) was consumed. Everything below `position` was delivered and its borrow
    /// has ended (the caller holds &mut self).
    #[inline(always)]
    fn credit_if_due(&mut self) {
        if !self.manual_release && self.position.wrapping_sub(self.released) >= self.credit_every {
            self.release();
        }
    }

    /// Reliable consumer: the slot of the next position if it is published (and below `limit`),
    /// not yet consumed; `None` if not, crediting what was read now the ring has run dry; or the
    /// gap of a lap (a corrupt ring: a reliable publisher never laps its consumer).
    #[inline(always)]
    fn next_published(&mut self, limit: u64) -> Option<Result<usize, Gap>> {
        let pos = self.position;
        let slot = self.geo.slot(pos);
        let state =
            if pos >= limit { SlotState::Empty } else { slot::peek(self.words.range(slot, self.geo.slot_words), pos) };
        match state {
            SlotState::Empty => {
                if !self.manual_release && self.released != self.position {
                    self.release();
                }
                None
            }
            SlotState::Lapped { seen } => Some(Err(self.resync(seen))),
            SlotState::Ready { .. } => Some(Ok(slot)),
        }
    }

    /// Observer: copies the next published message below `limit` into `buf` under the seqlock,
    /// skipping dropped claims, and returns its position and length, not yet consumed; `None` if
    /// nothing new is published, or the gap of a lap.
    #[inline(always)]
    fn observe_next(&mut self, limit: u64) -> Option<Result<(u64, usize), Gap>> {
        loop {
            let pos = self.position;
            if pos >= limit {
                return None;
            }
            let s = self.words.range(self.geo.slot(pos), self.geo.slot_words);
            match slot::read_copy(s, &self.geo, pos, &mut self.buf) {
                SlotState::Empty => return None,
                SlotState::Lapped { seen } => return Some(Err(self.resync(seen))),
                SlotState::Ready { aborted: true, .. } => self.skip_aborted(),
                SlotState::Ready { len, aborted: false } => return Some(Ok((pos, len))),
            }
        }
    }

    /// Moves past the message at the reader's position, `len` bytes, and counts it.
    #[inline(always)]
    fn consume(&mut self, len: usize) {
        self.position = self.position.wrapping_add(1);
        self.count_message(len);
    }

    /// Moves past a dropped claim's slot (no message in it).
    #[inline(always)]
    fn skip_aborted(&mut self) {
        self.position = self.position.wrapping_add(1);
        self.aborted += 1;
        self.counters.set(Counter::Position, self.position);
    }

    #[cfg(not(loom))]
    #[inline(always)]
    fn in_place(&self, slot: usize, len: usize) -> &[u8] {
        let p = slot::payload_ptr(self.words.range(slot, self.geo.slot_words), len);
        // SAFETY: `len <= max_payload`, so the bytes lie inside this slot's payload region
        // (payload_ptr checks). The slot's trail word was Acquire-loaded as published, and the
        // publisher cannot reuse the slot until our consumer line (stored with Release after
        // this borrow ends) passes it.
        unsafe { core::slice::from_raw_parts(p, len) }
    }

    /// Under loom there are no raw bytes: copy through the atomics (same synchronisation).
    #[cfg(loom)]
    fn in_place(&mut self, slot: usize, len: usize) -> &[u8] {
        let s = self.words.range(slot, self.geo.slot_words);
        for k in 0..len.div_ceil(8) {
            self.buf[k] = s[super::layout::SLOT_PAYLOAD + k].load(Ordering::Relaxed);
        }
        &zerocopy::IntoBytes::as_bytes(&self.buf[..])[..len]
    }

    /// Delivers up to `limit` messages or gaps to `f`; returns how many.
    #[inline]
    pub fn poll(&mut self, limit: usize, mut f: impl FnMut(Recv<'_>)) -> usize {
        let mut n = 0;
        while n < limit {
            match self.try_recv() {
                Some(r) => f(r),
                None => break,
            }
            n += 1;
        }
        n
    }

    /// Reliable consumer: from now on, consumed slots go back to the publisher only when
    /// [`RingReader::release_to`] says so (a recorder releases what its journal holds). A slot
    /// that is not released can never be rewritten, so after a crash the next consumer resumes
    /// at the last release.
    pub fn set_manual_release(&mut self, manual: bool) {
        self.manual_release = manual;
    }

    /// Reliable consumer: hands slots below `position` back to the publisher (never past what
    /// was delivered, never backwards).
    pub fn release_to(&mut self, position: u64) {
        if let Some(i) = self.consumer {
            let p = position.min(self.position);
            if p > self.released {
                self.words.word(consumer_position_word(i)).store(p, Ordering::Release);
                self.released = p;
            }
        }
    }

    /// Hands consumed slots back to the publisher (reliable mode).
    #[inline]
    fn release(&mut self) {
        if let Some(i) = self.consumer {
            self.words.word(consumer_position_word(i)).store(self.position, Ordering::Release);
            self.released = self.position;
        }
    }

    /// After a lap: jump to the newest position the publisher is known to have reached.
    #[cold]
    fn resync(&mut self, seen: u64) -> Gap {
        let latest = self.words.word(W_PRODUCER_POSITION).load(Ordering::Acquire);
        // `seen` can be 0 only if the slot's memory is corrupt; never underflow on it.
        let resumed_at = latest.max(seen.saturating_sub(1)).max(self.position.wrapping_add(1));
        let gap = Gap { expected: self.position, resumed_at };
        self.position = resumed_at;
        self.missed += gap.missed();
        self.counters.add(Counter::Gaps, 1);
        self.counters.add(Counter::Missed, gap.missed());
        self.counters.add(Counter::Laps, 1);
        self.counters.set(Counter::Position, resumed_at);
        gap
    }
}

impl<M: RingMemory> Drop for RingReader<M> {
    /// A consumer leaves its position behind (the next consumer resumes there) and frees its line.
    /// With manual release, only what was released explicitly counts as consumed.
    fn drop(&mut self) {
        if let Some(i) = self.consumer {
            if !self.manual_release {
                self.release();
            }
            self.line(i)[C_OWNER].store(0, Ordering::Release);
        }
    }
}
