//! The publishing side of a ring: claim a slot, write it, commit it.
//!
//! Owns: the producer position, the cached reliable-mode limit, the producer line of the header.
//! Never: blocks, allocates, reads a clock or makes a syscall. `Full` is returned, not waited on.
use super::attach;
use super::error::{ClaimError, LayoutError};
use super::layout::{
    Geometry, Mode, RingConfig, C_POSITION, FLAG_ABORTED, W_PRODUCER_EPOCH, W_PRODUCER_POSITION, W_PRODUCER_TOKEN,
};
use super::memory::{RingMemory, Words};
use super::slot;
use super::sync::Ordering;

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
    previous_token: u64,
    _mem: M,
}

impl<M: RingMemory> RingWriter<M> {
    /// Lays out a new ring in zeroed memory `mem` and becomes its publisher. `token` identifies
    /// this publisher (a pid for shm); `created_unix_ns` is recorded for operators.
    pub fn create(mem: M, cfg: &RingConfig, token: u64, created_unix_ns: u64) -> Result<Self, LayoutError> {
        let words = Words::new(&mem);
        attach::init(&words, cfg, created_unix_ns)?;
        Self::attach(mem, token)
    }

    /// Attaches to the ring in `mem` if it is initialised, else lays out a new one with `cfg`
    /// (fresh memory, or a creator that died before publishing the magic). The caller checks
    /// that an existing ring's config is the one it wanted.
    pub fn open_or_create(mem: M, cfg: &RingConfig, token: u64, created_unix_ns: u64) -> Result<Self, LayoutError> {
        let words = Words::new(&mem);
        match attach::read(&words) {
            Err(LayoutError::NotReady) => Self::create(mem, cfg, token, created_unix_ns),
            Err(e) => Err(e),
            Ok(_) => Self::attach(mem, token),
        }
    }

    /// Becomes the publisher of an existing ring, continuing at its producer position and
    /// bumping its epoch. The caller guarantees no other publisher is live (shm: a file lock).
    pub fn attach(mem: M, token: u64) -> Result<Self, LayoutError> {
        let words = Words::new(&mem);
        let cfg = attach::read(&words)?;
        let geo = Geometry::new(&cfg);
        let position = words.word(W_PRODUCER_POSITION).load(Ordering::Acquire);
        let epoch = words.word(W_PRODUCER_EPOCH).fetch_add(1, Ordering::AcqRel) + 1;
        let previous_token = words.word(W_PRODUCER_TOKEN).swap(token, Ordering::AcqRel);
        let limit = if cfg.mode == Mode::Lossy { u64::MAX } else { 0 };
        Ok(RingWriter { words, geo, cfg, position, limit, epoch, previous_token, _mem: mem })
    }

    /// The ring's configuration.
    pub fn config(&self) -> &RingConfig {
        &self.cfg
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

    /// Reserves the next slot for a payload of `len` bytes and returns it for writing in place.
    /// Drop the claim without [`Claim::commit`] and readers skip the slot.
    #[inline]
    pub fn try_claim(&mut self, len: usize) -> Result<Claim<'_, M>, ClaimError> {
        let slot = self.reserve(len)?;
        Ok(Claim { writer: self, slot, len, done: false })
    }

    /// Copies `payload` into the next slot and publishes it; returns its position.
    #[inline]
    pub fn publish(&mut self, payload: &[u8]) -> Result<u64, ClaimError> {
        let slot = self.reserve(payload.len())?;
        slot::write_payload(&self.words, slot, payload);
        Ok(self.finish(slot, payload.len(), 0))
    }

    /// Checks room for `len` bytes at the current position and opens its slot for writing.
    #[inline(always)]
    fn reserve(&mut self, len: usize) -> Result<usize, ClaimError> {
        if len > self.geo.max_payload {
            return Err(ClaimError::TooLarge { len, max: self.geo.max_payload });
        }
        if self.position >= self.limit {
            self.refresh_limit()?;
        }
        let slot = self.geo.slot(self.position);
        slot::begin(&self.words, slot, self.position);
        crate::fault::hit(crate::fault::Point::WriterAfterLead);
        Ok(slot)
    }

    #[inline(always)]
    fn finish(&mut self, slot: usize, len: usize, flags: u64) -> u64 {
        let pos = self.position;
        slot::commit(&self.words, &self.geo, slot, pos, len, flags);
        crate::fault::hit(crate::fault::Point::WriterAfterTrail);
        self.position = pos + 1;
        self.words.word(W_PRODUCER_POSITION).store(pos + 1, Ordering::Release);
        pos
    }

    /// Reloads every consumer position; the slowest one bounds how far we may write.
    #[cold]
    fn refresh_limit(&mut self) -> Result<(), ClaimError> {
        let (consumer, consumer_position) = self.slowest_consumer();
        self.limit = consumer_position + self.geo.count;
        if self.position < self.limit {
            Ok(())
        } else {
            Err(ClaimError::Full { position: self.position, consumer, consumer_position })
        }
    }

    /// Index and position of the consumer furthest behind (reliable mode).
    pub fn slowest_consumer(&self) -> (usize, u64) {
        self.consumer_lines().map(|(i, pos, _)| (i, pos)).min_by_key(|(_, p)| *p).unwrap_or((0, self.position))
    }

    /// Every declared consumer line as (index, position, owner token; 0 = none attached).
    pub fn consumer_lines(&self) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
        (0..self.cfg.max_consumers).map(|i| {
            let line = Geometry::consumer(i);
            let pos = self.words.word(line + C_POSITION).load(Ordering::Acquire);
            (i, pos, self.words.word(line + super::layout::C_OWNER).load(Ordering::Acquire))
        })
    }

    /// Clears this publisher's token so readers can tell a clean close from a crash.
    pub fn close(&mut self) {
        self.words.word(W_PRODUCER_TOKEN).store(0, Ordering::Release);
    }
}

/// A reserved slot. Write the payload with [`Claim::bytes_mut`], then [`Claim::commit`].
pub struct Claim<'a, M: RingMemory> {
    writer: &'a mut RingWriter<M>,
    slot: usize,
    len: usize,
    done: bool,
}

impl<M: RingMemory> Claim<'_, M> {
    /// The slot's payload bytes, in place. They hold whatever the slot held last lap: write all
    /// `len` of them. In lossy mode a lapped reader may be copying these bytes concurrently; the
    /// seqlock discards what it copied, as in every seqlock.
    #[cfg(not(loom))]
    #[inline(always)]
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let p = self.writer.words.byte_ptr(self.slot + super::layout::SLOT_PAYLOAD);
        // SAFETY: the payload region of a reserved slot is `max_payload >= len` bytes inside the
        // ring, 8-aligned, and no other reference to it exists: only this publisher writes slots,
        // and in reliable mode no consumer reads a slot until its trail word is committed.
        unsafe { core::slice::from_raw_parts_mut(p, self.len) }
    }

    /// Copies `payload` (exactly the claimed length) into the slot.
    pub fn write(&mut self, payload: &[u8]) {
        assert_eq!(payload.len(), self.len, "claimed {} bytes, wrote {}", self.len, payload.len());
        slot::write_payload(&self.writer.words, self.slot, payload);
    }

    /// The position this slot will be published at.
    pub fn position(&self) -> u64 {
        self.writer.position
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
