//! Where every word of a ring lives, and the checks that a mapped region is a ring we can use.
//!
//! ```text
//!  byte 0 ---------------- descriptor (written once by the creator, then `magic` last) ---------
//!         magic "TICKBUS1" | layout_version | mode | slot_size | slot_count | stream_id |
//!         max_consumers | ticks_per_ns (f64 bits) | created_unix_ns
//!  byte 128 -------------- producer line (written by the publisher only) ----------------------
//!         producer_position (next position to write) | producer_epoch | producer_token (pid)
//!  byte 256 + 128*i ------ consumer line i, i < MAX_CONSUMERS (reliable mode) -----------------
//!         position (next position it will read) | owner_token (pid, 0 = free) | attach_count
//!  byte 4088 ------------- lead word of slot 0 when slots are over 128 bytes (else unused)
//!  byte 4096 ------------- slot 0, slot 1, ... slot_count-1, each slot_size bytes -------------
//!
//!  one slot of over 128 bytes (a multiple of 64 by default):
//!  +0             payload, len bytes (read as whole words), starting on a cache line
//!  ...            unused
//!  slot_size-24   len   u32 | flags u32
//!  slot_size-16   trail u64   position+1, stored LAST with Release (the validity word)
//!  slot_size-8    lead  u64   of the slot after it: position+1, stored FIRST (seqlock begin);
//!                             the ring's last slot leaves this word unused (slot 0's is at 4088)
//!
//!  one slot of at most 128 bytes (one or two lines):
//!  +0             lead  u64   position+1, stored FIRST (seqlock begin)
//!  +8             payload, len bytes (read as whole words)
//!  ...            unused
//!  slot_size-16   len   u32 | flags u32
//!  slot_size-8    trail u64   position+1, stored LAST with Release (the validity word)
//! ```
//! A slot's *window* is its lead word through its trail: contiguous, `slot_size` bytes, one RDMA
//! WRITE each, and windows of neighbouring slots never overlap. In both shapes the window is
//! `lead | payload | ... | len | trail`; only where it starts differs (8 bytes before the slot,
//! or at it). Lines are 128 bytes apart because adjacent-line prefetchers pull lines in pairs.
//!
//! Why (layout 2): `len` shares the trail's line, which the reader already holds when it sees
//! the trail, so the payload's loads need not wait for a second miss to learn how many bytes to
//! read (layout 1 had `len` in the first line). Above 128 bytes the payload also starts on a
//! line, so a reader's vector copy never splits lines: moving the lab's same-payload floor 8
//! bytes off its line made it as slow as tickbus at 288 and 1344 B. That costs the writer one
//! more line (the lead's, in the previous slot), which the ping-pong showed is worth it from 288
//! B up but not in a one- or two-line slot (32 B: 1.13-1.23x the floor with the lead outside,
//! 0.94-1.07x with it inside), so small slots keep their lead inside.
//! The trail at the window's end matters for RDMA: one WRITE covering the window places bytes in
//! address order on rxe and real NICs, so the validity word lands last; `lead` lands first, so a
//! reader that copied a slot being overwritten sees `lead` changed when it re-checks.
use core::mem::{offset_of, size_of};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::error::LayoutError;

/// "TICKBUS1" as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"TICKBUS1");
/// Bumped whenever any offset in this file changes.
pub const LAYOUT_VERSION: u64 = 2;
/// Bytes before slot 0.
pub const HEADER_BYTES: usize = 4096;
/// Consumer lines in the header; the most reliable-mode consumers a ring can have.
pub const MAX_CONSUMERS: usize = 16;
/// Bytes a slot spends on framing: lead, len/flags, trail.
pub const SLOT_OVERHEAD: usize = 24;
/// Smallest slot size accepted.
pub const MIN_SLOT_SIZE: usize = 32;
/// Largest slot size accepted (1 MiB).
pub const MAX_SLOT_SIZE: usize = 1 << 20;

pub(crate) const LINE_WORDS: usize = 16;
/// Word index of the descriptor's `created_unix_ns`: a ring's identity across recreations.
pub(crate) const W_CREATED_UNIX_NS: usize = 8;
const _: () = assert!(offset_of!(Descriptor, created_unix_ns) == W_CREATED_UNIX_NS * 8);
pub(crate) const W_PRODUCER_POSITION: usize = 16;
pub(crate) const W_PRODUCER_EPOCH: usize = 17;
/// Word index of the publisher token (its pid for shm); tools read it from a ring file.
pub const W_PRODUCER_TOKEN: usize = 18;
pub(crate) const W_CONSUMERS: usize = 32;
pub(crate) const C_POSITION: usize = 0;
pub(crate) const C_OWNER: usize = 1;
pub(crate) const C_ATTACHES: usize = 2;
/// Word indices inside a slot's window (see the module doc): lead, then the payload; `len` and
/// `trail` are the window's last two words.
pub(crate) const SLOT_LEAD: usize = 0;
pub(crate) const SLOT_PAYLOAD: usize = 1;
/// Slots up to this size keep their lead word inside (see the module doc).
pub const LEAD_INSIDE_MAX: usize = 128;

/// How many bytes before its slot a window starts: 8 (the lead in the previous slot's last word)
/// for slots over [`LEAD_INSIDE_MAX`] bytes, else 0.
pub const fn window_shift(slot_size: usize) -> usize {
    if slot_size > LEAD_INSIDE_MAX {
        8
    } else {
        0
    }
}

/// Byte offset, from a ring's start, of the window of the slot at `index` (from its lead word to
/// its trail): where an RDMA WRITE of that slot goes.
pub const fn slot_window_offset(index: usize, slot_size: usize) -> usize {
    HEADER_BYTES - window_shift(slot_size) + index * slot_size
}

/// Word index of consumer line `index`'s position word: what a reliable consumer (or, over RDMA,
/// the remote subscriber's credit WRITE) updates and the publisher's limit check reads.
pub const fn consumer_position_word(index: usize) -> usize {
    W_CONSUMERS + index * LINE_WORDS + C_POSITION
}

/// Slot flag: the publisher dropped a claim without committing; readers skip the slot.
pub(crate) const FLAG_ABORTED: u64 = 1 << 32;

const _: () = {
    // The header's last word is slot 0's lead.
    assert!(W_CONSUMERS * 8 + MAX_CONSUMERS * LINE_WORDS * 8 <= HEADER_BYTES - 8);
    assert!(W_PRODUCER_POSITION * 8 == 128);
    assert!(W_CONSUMERS * 8 == 256);
    assert!(size_of::<Descriptor>() <= 128);
};

/// Delivery mode of a ring; fixed when it is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Market data: the publisher never waits; a reader that falls a lap behind is told the gap
    /// and resumes at the newest message.
    Lossy = 1,
    /// Orders: the publisher gets `Full` until every declared consumer has consumed.
    Reliable = 2,
}

impl Mode {
    fn from_wire(v: u64) -> Option<Mode> {
        match v {
            1 => Some(Mode::Lossy),
            2 => Some(Mode::Reliable),
            _ => None,
        }
    }
}

/// The descriptor's in-memory image (the first 72 bytes of a ring); tools read it from files.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Descriptor {
    /// [`MAGIC`]: identifies a tickbus ring.
    pub magic: u64,
    /// The layout version that made the ring.
    pub layout_version: u64,
    /// 1 lossy, 2 reliable ([`Mode`]).
    pub mode: u64,
    /// Bytes per slot.
    pub slot_size: u64,
    /// Slots in the ring.
    pub slot_count: u64,
    /// The stream carried.
    pub stream_id: u64,
    /// Consumer lines (reliable mode).
    pub max_consumers: u64,
    /// The creator's TSC rate (ticks per ns, f64 bits), so readers in other processes convert TSCs.
    pub ticks_per_ns_bits: u64,
    /// When the ring was created (Unix nanoseconds).
    pub created_unix_ns: u64,
}

pub(crate) const DESCRIPTOR_WORDS: usize = size_of::<Descriptor>() / 8;
const _: () = {
    assert!(offset_of!(Descriptor, magic) == 0);
    assert!(offset_of!(Descriptor, layout_version) == 8);
    assert!(offset_of!(Descriptor, mode) == 16);
    assert!(offset_of!(Descriptor, slot_size) == 24);
    assert!(offset_of!(Descriptor, slot_count) == 32);
    assert!(offset_of!(Descriptor, stream_id) == 40);
    assert!(offset_of!(Descriptor, max_consumers) == 48);
    assert!(offset_of!(Descriptor, ticks_per_ns_bits) == 56);
    assert!(offset_of!(Descriptor, created_unix_ns) == 64);
};

/// What a creator chooses for a new ring.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RingConfig {
    /// Reliable (the slowest consumer holds the publisher back) or lossy (readers may be lapped).
    pub mode: Mode,
    /// Bytes per slot, a multiple of 8; payloads up to `slot_size - 24` fit.
    pub slot_size: usize,
    /// Slots in the ring, a power of two >= 2.
    pub slot_count: usize,
    /// The stream carried; subscribers check it.
    pub stream_id: u32,
    /// Reliable mode: how many consumers must consume each message (1..=16). Lossy: ignored.
    pub max_consumers: usize,
    /// TSC ticks per nanosecond, stored so that every process converts the same way.
    /// `RingConfig::for_payload` (in [`crate::time`], which owns the clock: the ring protocol
    /// imports nothing above it) fills in this process's calibration.
    pub ticks_per_ns: f64,
}

impl RingConfig {
    /// A ring whose slots hold payloads up to `max_payload` bytes, rounded so each slot is a whole
    /// number of 64-byte cache lines, stamped with the TSC rate `ticks_per_ns` its readers convert
    /// with. `RingConfig::for_payload` is this with the process's own calibration.
    pub fn with_clock(
        mode: Mode,
        stream_id: u32,
        max_payload: usize,
        slot_count: usize,
        ticks_per_ns: f64,
    ) -> RingConfig {
        RingConfig {
            mode,
            slot_size: (max_payload + SLOT_OVERHEAD).div_ceil(64) * 64,
            slot_count,
            stream_id,
            max_consumers: 1,
            ticks_per_ns,
        }
    }

    /// Largest payload a slot holds.
    pub fn max_payload(&self) -> usize {
        self.slot_size.saturating_sub(SLOT_OVERHEAD)
    }

    /// Bytes of memory the ring needs (header plus slots).
    pub fn ring_bytes(&self) -> usize {
        HEADER_BYTES + self.slot_size * self.slot_count
    }

    /// Checks every field, naming the first bad one and what to use instead.
    pub fn validate(&self) -> Result<(), LayoutError> {
        let bad = |what: &'static str| Err(LayoutError::BadConfig { what });
        if !self.slot_size.is_multiple_of(8) || !(MIN_SLOT_SIZE..=MAX_SLOT_SIZE).contains(&self.slot_size) {
            return bad("slot_size must be a multiple of 8 between 32 and 1 MiB");
        }
        if !self.slot_count.is_power_of_two() || self.slot_count < 2 || self.slot_count > 1 << 30 {
            return bad("slot_count must be a power of two between 2 and 2^30");
        }
        if self.mode == Mode::Reliable && !(1..=MAX_CONSUMERS).contains(&self.max_consumers) {
            return bad("max_consumers must be 1..=16 for a reliable ring");
        }
        if self.max_consumers > MAX_CONSUMERS {
            return bad("max_consumers must be at most 16");
        }
        if !(self.ticks_per_ns.is_finite() && self.ticks_per_ns > 0.0) {
            return bad("ticks_per_ns must be a positive finite number");
        }
        Ok(())
    }

    pub(crate) fn descriptor(&self, created_unix_ns: u64) -> Descriptor {
        Descriptor {
            magic: MAGIC,
            layout_version: LAYOUT_VERSION,
            mode: self.mode as u64,
            slot_size: self.slot_size as u64,
            slot_count: self.slot_count as u64,
            stream_id: u64::from(self.stream_id),
            max_consumers: if self.mode == Mode::Reliable { self.max_consumers as u64 } else { 0 },
            ticks_per_ns_bits: self.ticks_per_ns.to_bits(),
            created_unix_ns,
        }
    }

    /// Reads a config back from a descriptor, refusing foreign or newer rings.
    pub fn from_descriptor(d: &Descriptor) -> Result<RingConfig, LayoutError> {
        if d.magic != MAGIC {
            return Err(LayoutError::NotARing { found_magic: d.magic });
        }
        if d.layout_version != LAYOUT_VERSION {
            return Err(LayoutError::VersionMismatch { found: d.layout_version, supported: LAYOUT_VERSION });
        }
        let mode = Mode::from_wire(d.mode)
            .ok_or(LayoutError::BadConfig { what: "mode word is neither lossy (1) nor reliable (2)" })?;
        if mode == Mode::Lossy && d.max_consumers != 0 {
            return Err(LayoutError::BadConfig { what: "max_consumers must be 0 in a lossy ring's descriptor" });
        }
        let cfg = RingConfig {
            mode,
            slot_size: usize::try_from(d.slot_size).unwrap_or(usize::MAX),
            slot_count: usize::try_from(d.slot_count).unwrap_or(usize::MAX),
            stream_id: u32::try_from(d.stream_id)
                .map_err(|_| LayoutError::BadConfig { what: "stream_id does not fit u32" })?,
            max_consumers: usize::try_from(d.max_consumers).unwrap_or(usize::MAX),
            ticks_per_ns: f64::from_bits(d.ticks_per_ns_bits),
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Whether `other` describes the same slot layout (what a re-opening publisher must match).
    pub fn same_layout(&self, other: &RingConfig) -> bool {
        self.mode == other.mode
            && self.slot_size == other.slot_size
            && self.slot_count == other.slot_count
            && self.stream_id == other.stream_id
            && (self.mode == Mode::Lossy || self.max_consumers == other.max_consumers)
    }
}

/// Word arithmetic for an attached ring: precomputed so the hot path is shifts and adds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geometry {
    /// Word index of slot 0's window.
    pub first: usize,
    pub slot_words: usize,
    pub mask: u64,
    pub count: u64,
    pub max_payload: usize,
}

impl Geometry {
    pub fn new(cfg: &RingConfig) -> Geometry {
        super::wide::detect();
        Geometry {
            first: slot_window_offset(0, cfg.slot_size) / 8,
            slot_words: cfg.slot_size / 8,
            mask: cfg.slot_count as u64 - 1,
            count: cfg.slot_count as u64,
            max_payload: cfg.max_payload(),
        }
    }

    /// Index of the first word of the window of the slot that holds `position`: its lead word
    /// (the word before the slot for slots over 128 bytes, the slot's first word otherwise). The
    /// window is `slot_words` long and ends with the slot's trail.
    #[inline(always)]
    pub fn slot(&self, position: u64) -> usize {
        self.first + (position & self.mask) as usize * self.slot_words
    }

    pub fn consumer(i: usize) -> usize {
        W_CONSUMERS + i * LINE_WORDS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_payload_rounds_to_cache_lines_and_validates() {
        let c = RingConfig::for_payload(Mode::Lossy, 1, 64, 1024);
        assert_eq!(c.slot_size, 128);
        assert_eq!(c.max_payload(), 104);
        assert_eq!(RingConfig::for_payload(Mode::Lossy, 1, 40, 8).slot_size, 64);
        assert_eq!(c.ring_bytes(), 4096 + 128 * 1024);
        c.validate().unwrap();
    }

    #[test]
    fn bad_configs_name_the_field() {
        let ok = RingConfig::for_payload(Mode::Reliable, 1, 64, 16);
        let cases: [(RingConfig, &str); 5] = [
            (RingConfig { slot_count: 12, ..ok }, "slot_count"),
            (RingConfig { slot_size: 100, ..ok }, "slot_size"),
            (RingConfig { slot_size: 16, ..ok }, "slot_size"),
            (RingConfig { max_consumers: 17, ..ok }, "max_consumers"),
            (RingConfig { ticks_per_ns: f64::NAN, ..ok }, "ticks_per_ns"),
        ];
        for (cfg, field) in cases {
            let err = cfg.validate().unwrap_err().to_string();
            assert!(err.contains(field), "{err} should name {field}");
        }
    }

    #[test]
    fn descriptor_round_trips_and_refuses_foreign_rings() {
        let c = RingConfig { ticks_per_ns: 2.596, ..RingConfig::for_payload(Mode::Reliable, 9, 64, 16) };
        let d = c.descriptor(123);
        assert_eq!(RingConfig::from_descriptor(&d).unwrap(), c);
        assert!(matches!(
            RingConfig::from_descriptor(&Descriptor { magic: 7, ..d }),
            Err(LayoutError::NotARing { found_magic: 7 })
        ));
        assert!(matches!(
            RingConfig::from_descriptor(&Descriptor { layout_version: 1, ..d }),
            Err(LayoutError::VersionMismatch { found: 1, supported: 2 })
        ));
        assert!(RingConfig::from_descriptor(&Descriptor { mode: 3, ..d }).is_err());
    }

    #[test]
    fn large_slots_start_their_window_one_word_before_the_slot_with_the_payload_on_a_line() {
        let c = RingConfig::for_payload(Mode::Lossy, 1, 288, 4);
        assert_eq!(c.slot_size, 320);
        let g = Geometry::new(&c);
        // Slot 0's lead is the header's last word; its payload starts the first slot line.
        assert_eq!(g.slot(0), 511);
        assert_eq!(g.slot(0) + SLOT_PAYLOAD, HEADER_BYTES / 8);
        assert_eq!(g.slot(5), 511 + 40);
        assert_eq!(g.slot(5) * 8, slot_window_offset(5 % 4, c.slot_size));
        windows_tile(&c, &g);
        for k in 0..4u64 {
            let w = g.slot(k);
            assert_eq!((w + SLOT_PAYLOAD) * 8 % 64, 0, "slot {k}'s payload is not line-aligned");
            assert_eq!((w + g.slot_words - 2) * 8 / 64, (w + g.slot_words - 1) * 8 / 64, "slot {k}");
        }
    }

    #[test]
    fn small_slots_keep_their_lead_inside_and_touch_only_their_own_lines() {
        for payload in [8, 32, 40, 64, 104] {
            let c = RingConfig::for_payload(Mode::Lossy, 1, payload, 4);
            assert!(c.slot_size <= LEAD_INSIDE_MAX, "{payload} B");
            let g = Geometry::new(&c);
            assert_eq!(g.slot(0), HEADER_BYTES / 8, "{payload} B");
            assert_eq!(g.slot(3) * 8, slot_window_offset(3, c.slot_size));
            windows_tile(&c, &g);
            for k in 0..4u64 {
                // The whole window is the slot itself.
                let start = HEADER_BYTES / 8 + k as usize * g.slot_words;
                assert_eq!(g.slot(k), start, "{payload} B, slot {k}");
            }
        }
    }

    /// Each window ends where the next begins, and the last one ends inside the ring.
    fn windows_tile(c: &RingConfig, g: &Geometry) {
        for k in 0..c.slot_count as u64 - 1 {
            assert_eq!(g.slot(k) + g.slot_words, g.slot(k + 1));
        }
        assert!((g.slot(c.slot_count as u64 - 1) + g.slot_words) * 8 <= c.ring_bytes());
        assert!(g.slot(0) * 8 >= W_CONSUMERS * 8 + MAX_CONSUMERS * LINE_WORDS * 8);
    }
}
