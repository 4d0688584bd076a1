//! The publishing side of a ring: claim a slot, write it, commit it.
//!
//! Owns: the producer position, the cached reliable-mode limit, the producer line of the header.
//! Never: blocks, allocates, reads a clock or makes a syscall. `Full` is returned, not waited on.
//!
//! One publisher per ring is part of the protocol (readers read reliable slots in place, trusting
//! that nobody rewrites them early). The safe constructors enforce it with the header's producer
//! token: they take the ring only when no publisher holds it, and a writer hands it back when
//! dropped. Taking over a ring whose publisher died without closing it is `unsafe`
//! ([`RingWriter::reclaim`]): only the transport can know the old publisher is really gone (shm
//! knows from a file lock the kernel dropped).
use super::attach;
use super::counts::{Counter, Counters};
use super::error::{ClaimError, LayoutError};
use super::hook::{self, WriterStep};
use super::layout::{
    Geometry, Mode, RingConfig, C_POSITION, FLAG_ABORTED, W_PRODUCER_EPOCH, W_PRODUCER_POSITION, W_PRODUCER_TOKEN,
};
use super::memory::{RingMemory, Words};
use super::slot;
use super::sync::{AtomicU64, Ordering};

/// The single publisher of a ring.
pub struct RingWriter<M: RingMemory> {
    words: Words,
    geo: Geometry,
    cfg: RingConfig,
    position: u64,
    /// Positions below `limit` may be written without looking at consumers (reliable mode);
    /// `u64::MAX` in lossy mode. Refreshed only when it looks full, like rtrb's cached head.
    limit: u64,
    epoch: u64,
    token: u64,
    previous_token: u64,
    /// Messages, bytes, position and back-pressure for `tickbus stat` (none until a transport
    /// attaches its record).
    counters: Counters,
    _mem: M,
}

impl<M: RingMemory> RingWriter<M> {
    /// Lays out a new ring in zeroed memory `mem` and becomes its publisher. `token` (non-zero)
    /// identifies this publisher (a pid for shm); `created_unix_ns` is recorded for operators.
    pub fn create(mem: M, cfg: &RingConfig, token: u64, created_unix_ns: u64) -> Result<Self, LayoutError> {
        let words = Words::new(&mem);
        cfg.validate()?;
        attach::check_header(&words)?;
        take_token(&words, token)?;
        attach::init(&words, cfg, created_unix_ns).inspect_err(|_| release_token(&words, token))?;
        Ok(Self::attached(mem, words, *cfg, token, 0))
    }

    /// Attaches to the ring in `mem` if it is initialised (it must have `cfg`'s layout), else
    /// lays out a new one with `cfg` (fresh memory, or a creator that died before publishing the
    /// magic). Refuses, without touching the header, a ring of another layout or one whose
    /// publisher has not closed it.
    pub fn open_or_create(mem: M, cfg: &RingConfig, token: u64, created_unix_ns: u64) -> Result<Self, LayoutError> {
        match attach::read(&Words::new(&mem)) {
            Err(LayoutError::NotReady) => Self::create(mem, cfg, token, created_unix_ns),
            Err(e) => Err(e),
            Ok(existing) if !existing.same_layout(cfg) => Err(LayoutError::Mismatch { existing }),
            Ok(_) => Self::attach(mem, token),
        }
    }

    /// [`RingWriter::open_or_create`], but takes the ring over even if its last publisher never
    /// closed it (it crashed), continuing its stream.
    ///
    /// # Safety
    /// No other writer of this ring may be live, in this process or any other (shm proves it with
    /// an exclusive lock on the ring file): readers read reliable slots in place and would see
    /// them rewritten under them.
    pub unsafe fn open_or_reclaim(
        mem: M,
        cfg: &RingConfig,
        token: u64,
        created_unix_ns: u64,
    ) -> Result<Self, LayoutError> {
        let words = Words::new(&mem);
        match attach::read(&words) {
            Err(LayoutError::NotReady) => {
                // A creator that died before the magic may have left its token: the caller's
                // guarantee says it is gone.
                words.word(W_PRODUCER_TOKEN).store(0, Ordering::Release);
                Self::create(mem, cfg, token, created_unix_ns)
            }
            Err(e) => Err(e),
            Ok(existing) if !existing.same_layout(cfg) => Err(LayoutError::Mismatch { existing }),
            // SAFETY: forwarded: no other writer is live.
            Ok(_) => unsafe { Self::reclaim(mem, token) },
        }
    }

    /// Becomes the publisher of an existing ring whose last publisher closed it, continuing at
    /// its producer position and bumping its epoch. Refuses a ring that a live (or crashed)
    /// publisher still holds: see [`RingWriter::reclaim`].
    pub fn attach(mem: M, token: u64) -> Result<Self, LayoutError> {
        let words = Words::new(&mem);
        let cfg = attach::read(&words)?;
        take_token(&words, token)?;
        Ok(Self::attached(mem, words, cfg, token, 0))
    }

    /// Takes over an existing ring whatever its producer token says (its publisher crashed),
    /// continuing its stream after the last message that publisher published.
    ///
    /// # Safety
    /// No other writer of this ring may be live, in this process or any other.
    pub unsafe fn reclaim(mem: M, token: u64) -> Result<Self, LayoutError> {
        let words = Words::new(&mem);
        let cfg = attach::read(&words)?;
        if token == 0 {
            return Err(LayoutError::BadConfig { what: "a publisher token must not be 0 (0 means closed)" });
        }
        let previous = words.word(W_PRODUCER_TOKEN).swap(token, Ordering::AcqRel);
        Ok(Self::attached(mem, words, cfg, token, previous))
    }

    /// Bumps the epoch and finds where the stream continues: at the producer position, or past
    /// it if a publisher died after publishing a slot but before advancing the position (its
    /// trail word says the slot is published, so rewriting it would change a message a reader
    /// may already hold, and lose one).
    fn attached(mem: M, words: Words, cfg: RingConfig, token: u64, previous_token: u64) -> Self {
        let geo = Geometry::new(&cfg);
        let mut position = words.word(W_PRODUCER_POSITION).load(Ordering::Acquire);
        for _ in 0..geo.count {
            if slot::published(words.range(geo.slot(position), geo.slot_words)) != slot::stamp(position) {
                break;
            }
            position = position.wrapping_add(1);
        }
        words.word(W_PRODUCER_POSITION).store(position, Ordering::Release);
        let epoch = words.word(W_PRODUCER_EPOCH).fetch_add(1, Ordering::AcqRel).wrapping_add(1);
        let limit = if cfg.mode == Mode::Lossy { u64::MAX } else { 0 };
        let counters = Counters::none();
        RingWriter { words, geo, cfg, position, limit, epoch, token, previous_token, counters, _mem: mem }
    }

    /// The ring's configuration.
    pub fn config(&self) -> &RingConfig {
        &self.cfg
    }

    /// The memory the ring lives in (a transport's mapping).
    pub fn memory(&self) -> &M {
        &self._mem
    }

    /// When this incarnation of the ring was created (Unix ns): the stream's identity, as its
    /// readers see it (`Subscribe::source_id`), for what the publisher stamps in its own
    /// snapshots.
    pub fn created_unix_ns(&self) -> u64 {
        self.words.word(super::layout::W_CREATED_UNIX_NS).load(Ordering::Relaxed)
    }

    /// The position the next message will get (its per-stream sequence number).
    pub fn position(&self) -> u64 {
        self.position
    }

    /// How many publishers have attached to this ring, this one included.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The token of the publisher before this one if it never closed the ring (it crashed).
    pub fn previous_publisher(&self) -> Option<u64> {
        (self.previous_token != 0).then_some(self.previous_token)
    }

    /// Counts this writer's messages into `c` (a stream's record in the counters file).
    pub fn set_counters(&mut self, c: Counters) {
        c.set(Counter::Position, self.position);
        self.counters = c;
    }

    /// This writer's counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Reserves the next slot for a payload of `len` bytes and returns it for writing in place.
    /// Drop the claim without [`Claim::commit`] and readers skip the slot.
    #[inline]
    pub fn try_claim(&mut self, len: usize) -> Result<Claim<'_, M>, ClaimError> {
        let slot = self.reserve(len)?;
        Ok(Claim { writer: self, slot, len, done: false })
    }

    /// Copies `payload` into the next slot and publishes it; returns its position.
    // inline(always): behind the stream API's `match` on the transport (AnyPublisher /
    // AnySubscriber) LLVM kept this out of line, and the 32 B round trip through the stream API
    // cost 1.3-1.4x the direct handle's (lab row "tickbus shm (stream API, URI)"); inlined,
    // 1.02-1.12x.
    #[inline(always)]
    pub fn publish(&mut self, payload: &[u8]) -> Result<u64, ClaimError> {
        self.check_room(payload.len())?;
        let pos = self.position;
        // One bounds-checked slice of the slot, written by one out-of-line function (see
        // `slot::write`): split across `reserve` and `finish` and inlined, the same stores cost
        // the 64 B ping-pong 100-150 ns of round trip at some call sites.
        slot::write(self.slot_words(self.geo.slot(pos)), pos, payload);
        Ok(self.finished(payload.len(), 0))
    }

    #[inline(always)]
    fn slot_words(&self, slot: usize) -> &[AtomicU64] {
        self.words.range(slot, self.geo.slot_words)
    }

    /// Checks that `len` bytes fit a slot and, in reliable mode, that writing the current
    /// position would lap no consumer (lossy mode never refreshes: its limit is `u64::MAX`).
    #[inline(always)]
    fn check_room(&mut self, len: usize) -> Result<(), ClaimError> {
        if len > self.geo.max_payload {
            return Err(ClaimError::TooLarge { len, max: self.geo.max_payload });
        }
        if self.position >= self.limit {
            self.refresh_limit()?;
        }
        Ok(())
    }

    /// Checks room for `len` bytes at the current position and opens its slot for writing.
    #[inline(always)]
    fn reserve(&mut self, len: usize) -> Result<usize, ClaimError> {
        self.check_room(len)?;
        let slot = self.geo.slot(self.position);
        slot::begin(self.slot_words(slot), self.position);
        hook::report(WriterStep::AfterLead);
        Ok(slot)
    }

    #[inline(always)]
    fn finish(&mut self, slot: usize, len: usize, flags: u64) -> u64 {
        slot::commit(self.slot_words(slot), self.position, len, flags);
        self.finished(len, flags)
    }

    /// After the slot at the current position is committed: moves past it and counts it.
    #[inline(always)]
    fn finished(&mut self, len: usize, flags: u64) -> u64 {
        let pos = self.position;
        hook::report(WriterStep::AfterTrail);
        self.position = pos.wrapping_add(1);
        self.words.word(W_PRODUCER_POSITION).store(self.position, Ordering::Release);
        if flags == 0 {
            self.counters.add(Counter::Messages, 1);
            self.counters.add(Counter::Bytes, len as u64);
        }
        self.counters.set(Counter::Position, self.position);
        pos
    }

    /// Reloads every consumer position; the slowest one bounds how far we may write. A position
    /// beyond ours (a corrupt or hostile consumer line) counts as ours: it cannot let us
    /// overwrite what another consumer has not read, and the arithmetic cannot overflow.
    #[cold]
    fn refresh_limit(&mut self) -> Result<(), ClaimError> {
        let (consumer, consumer_position) = self.slowest_consumer();
        self.limit = consumer_position.saturating_add(self.geo.count);
        if self.position < self.limit {
            Ok(())
        } else {
            self.counters.add(Counter::Full, 1);
            Err(ClaimError::Full { position: self.position, consumer, consumer_position })
        }
    }

    /// Index and position of the consumer furthest behind (reliable mode), positions clamped to
    /// ours.
    pub fn slowest_consumer(&self) -> (usize, u64) {
        self.consumer_lines()
            .map(|(i, pos, _)| (i, pos.min(self.position)))
            .min_by_key(|(_, p)| *p)
            .unwrap_or((0, self.position))
    }

    /// Every declared consumer line as (index, position, owner token; 0 = none attached).
    pub fn consumer_lines(&self) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
        (0..self.cfg.max_consumers).map(|i| {
            let line = self.words.range(Geometry::consumer(i), super::layout::LINE_WORDS);
            (i, line[C_POSITION].load(Ordering::Acquire), line[super::layout::C_OWNER].load(Ordering::Acquire))
        })
    }
}

impl<M: RingMemory> Drop for RingWriter<M> {
    /// Hands the ring back: readers see "closed", not "dead", and another publisher may attach.
    fn drop(&mut self) {
        let _ = self.words.word(W_PRODUCER_TOKEN).compare_exchange(self.token, 0, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// Takes the producer token of a ring no publisher holds.
fn take_token(words: &Words, token: u64) -> Result<(), LayoutError> {
    if token == 0 {
        return Err(LayoutError::BadConfig { what: "a publisher token must not be 0 (0 means closed)" });
    }
    words
        .word(W_PRODUCER_TOKEN)
        .compare_exchange(0, token, Ordering::AcqRel, Ordering::Acquire)
        .map(|_| ())
        .map_err(|holder| LayoutError::PublisherLive { token: holder })
}

fn release_token(words: &Words, token: u64) {
    let _ = words.word(W_PRODUCER_TOKEN).compare_exchange(token, 0, Ordering::AcqRel, Ordering::Acquire);
}

/// A reserved slot. Write the payload with [`Claim::write`] (or, unsafely, in place with
/// [`Claim::bytes_mut`]), then [`Claim::commit`].
#[must_use = "a claim is published only by commit; dropped, its slot is aborted"]
pub struct Claim<'a, M: RingMemory> {
    writer: &'a mut RingWriter<M>,
    slot: usize,
    len: usize,
    done: bool,
}

impl<M: RingMemory> Claim<'_, M> {
    /// The slot's payload bytes, in place. They hold whatever the slot held last lap: write all
    /// `len` of them.
    ///
    /// # Safety
    /// A lapped observer (any reader of a lossy ring, or a tap on a reliable one) may be copying
    /// these words with atomic loads while you write them through the slice: the seqlock
    /// discards what it copied, but the Rust memory model calls a plain write racing an atomic
    /// read a data race. Call this only where no observer of the ring can be lapped onto this
    /// slot (a reliable ring with consumers only), or where you accept that race as every
    /// seqlock does; otherwise use [`Claim::write`], which stores whole words atomically.
    #[cfg(not(loom))]
    #[inline(always)]
    pub unsafe fn bytes_mut(&mut self) -> &mut [u8] {
        let p = slot::payload_ptr(self.writer.slot_words(self.slot), self.len) as *mut u8;
        // SAFETY: the payload region of a reserved slot is `max_payload >= len` bytes inside the
        // ring (payload_ptr checks), 8-aligned; only this publisher writes slots (the producer
        // token), reliable consumers read a slot only after its trail word is committed, and the
        // caller accepts (or rules out) racing lapped observers.
        unsafe { core::slice::from_raw_parts_mut(p, self.len) }
    }

    /// Copies `payload` (exactly the claimed length) into the slot.
    pub fn write(&mut self, payload: &[u8]) {
        assert_eq!(payload.len(), self.len, "claimed {} bytes, wrote {}", self.len, payload.len());
        slot::write_payload(self.writer.slot_words(self.slot), payload);
    }

    /// Stores `value` as payload word `k` (bytes `8k..8k+8`), atomically: a safe in-place write
    /// of one field. Panics if the word is beyond the claimed length.
    #[inline(always)]
    pub fn store_word(&mut self, k: usize, value: u64) {
        assert!(8 * k + 8 <= self.len, "word {k} is beyond the {} claimed bytes", self.len);
        let s = self.writer.slot_words(self.slot);
        s[super::layout::SLOT_PAYLOAD + k].store(value, Ordering::Relaxed);
    }

    /// The position this slot will be published at.
    pub fn position(&self) -> u64 {
        self.writer.position
    }

    /// The writer's live counters (a typed claim records its publish TSC there).
    pub fn counters(&self) -> &Counters {
        self.writer.counters()
    }

    /// Publishes the slot; returns its position.
    #[inline(always)]
    pub fn commit(mut self) -> u64 {
        self.done = true;
        self.writer.finish(self.slot, self.len, 0)
    }
}

impl<M: RingMemory> Drop for Claim<'_, M> {
    fn drop(&mut self) {
        if !self.done {
            self.writer.finish(self.slot, 0, FLAG_ABORTED);
        }
    }
}
