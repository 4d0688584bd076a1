//! Errors of the ring protocol. One enum per operation; each variant says whether retrying helps.
//! None allocates: they are returned on the hot path.
use core::fmt;

/// A region is not a ring this build can use, or a config is invalid. Retrying does not help.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// The region does not start with the ring's magic.
    #[error("not a tickbus ring (magic {found_magic:#018x}); check the path or stream name")]
    NotARing {
        /// The first word found.
        found_magic: u64,
    },
    /// A ring of another layout version.
    #[error("ring layout version {found}, this build speaks {supported}; run the same tickbus version on both sides or recreate the ring")]
    VersionMismatch {
        /// The version the ring says.
        found: u64,
        /// The version this build speaks.
        supported: u64,
    },
    /// A [`RingConfig`](crate::ring::RingConfig) that cannot make a ring.
    #[error("invalid ring config: {what}")]
    BadConfig {
        /// Which field and why.
        what: &'static str,
    },
    /// The region is smaller than the ring it describes.
    #[error("ring needs {need} bytes but the region has {have}; the file was truncated or the mapping is too small")]
    TooSmall {
        /// Bytes the ring needs.
        need: usize,
        /// Bytes the region has.
        have: usize,
    },
    /// The magic word is still zero: the creator has not finished.
    #[error("ring not initialised yet (magic is zero): the publisher is still creating it; retry shortly")]
    NotReady,
    /// Another publisher holds the ring (its token is set): one ring has one publisher.
    #[error("the ring already has a publisher (token {token}); a ring has exactly one publisher: stop it first, or, if it crashed, let its transport reclaim the ring")]
    PublisherLive {
        /// The publisher's token (its pid).
        token: u64,
    },
    /// An existing ring has another layout than the one asked for; nothing was changed.
    #[error("the ring exists with another layout ({existing:?}); remove it or open it with its own layout")]
    Mismatch {
        /// The layout the ring has.
        existing: crate::ring::RingConfig,
    },
}

/// A claim or publish could not take a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClaimError {
    /// Reliable mode: consumer `consumer` still holds position `consumer_position`. Retry after it
    /// consumes; if it never does, check it is alive (the transport's `consumer_status`).
    #[error("ring full: consumer {consumer} is at position {consumer_position}, publisher at {position}; retry when it catches up")]
    Full {
        /// The publisher's position.
        position: u64,
        /// The consumer line holding it back.
        consumer: usize,
        /// That consumer's position.
        consumer_position: u64,
    },
    /// The payload is larger than a slot. Retrying never helps: use a ring with larger slots.
    #[error("payload of {len} bytes exceeds the slot's {max} bytes; create the ring with a larger slot_size")]
    TooLarge {
        /// The payload's length.
        len: usize,
        /// The most a slot carries.
        max: usize,
    },
}

impl ClaimError {
    /// Whether trying again later can succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, ClaimError::Full { .. })
    }
}

/// A typed send failed; the message is handed back so nothing is lost.
#[derive(PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError<T> {
    /// Reliable mode: a consumer holds the slot. Retry after it consumes.
    #[error("ring full; message handed back, retry when the consumer catches up")]
    Full(T),
    /// The message is larger than a slot: it never fits.
    #[error("message larger than a slot; message handed back")]
    TooLarge(T),
}

impl<T> SendError<T> {
    /// The message that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            SendError::Full(t) | SendError::TooLarge(t) => t,
        }
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Full(_) => f.write_str("Full(..)"),
            SendError::TooLarge(_) => f.write_str("TooLarge(..)"),
        }
    }
}

/// A reader could not attach.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AttachError {
    /// The region is not a usable ring.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// Every consumer line is held by a live process.
    #[error("all {max} consumer slots of this reliable ring are held by live processes; create the ring with more max_consumers or stop one")]
    NoFreeConsumer {
        /// The ring's consumer lines.
        max: usize,
    },
    /// A consumer line asked for by index that the ring does not have.
    #[error("consumer slot {index} does not exist (ring has {max})")]
    NoSuchConsumer {
        /// The line asked for.
        index: usize,
        /// The ring's consumer lines.
        max: usize,
    },
    /// The header's producer position is past any real stream.
    #[error("producer position {position} in the ring header is past any real stream (above 2^62): the header is corrupt; recreate the ring")]
    CorruptPosition {
        /// The position found.
        position: u64,
    },
    /// A consumer line's position is past any real stream.
    #[error("consumer line {index} holds position {position}, past any real stream (above 2^62): the line is corrupt: recreate the ring (`tickbus ring inspect <name>` shows its lines)")]
    CorruptConsumerPosition {
        /// The line.
        index: usize,
        /// The position found.
        position: u64,
    },
}
