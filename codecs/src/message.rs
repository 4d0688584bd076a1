//! The [`Message`] trait every fixed-layout type implements, the type registry, and decode errors.
use core::fmt;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::header::{Header, HEADER_LEN};

/// Wire value of every message type. Market data 1..=15, orders 16..=31, execution reports 32..=47.
#[repr(u16)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MsgType {
    /// Top of book: best bid and ask: [`Quote`](crate::md::Quote).
    Quote = 1,
    /// A trade printed: [`Trade`](crate::md::Trade).
    Trade = 2,
    /// An order added to the book: [`OrderAdd`](crate::md::OrderAdd).
    OrderAdd = 3,
    /// A resting order changed price or quantity: [`OrderModify`](crate::md::OrderModify).
    OrderModify = 4,
    /// A resting order removed: [`OrderDelete`](crate::md::OrderDelete).
    OrderDelete = 5,
    /// A resting order executed: [`OrderExecute`](crate::md::OrderExecute).
    OrderExecute = 6,
    /// A price-level snapshot of one instrument: [`BookSnapshot`](crate::md::BookSnapshot).
    BookSnapshot = 7,
    /// Messages the feed handler lost: [`FeedGap`](crate::md::FeedGap).
    FeedGap = 8,
    /// A chunk of a whole-book snapshot: [`SnapshotOrders`](crate::md::SnapshotOrders).
    SnapshotOrders = 9,
    /// A new order: [`NewOrder`](crate::orders::NewOrder).
    NewOrder = 16,
    /// A cancel of an order: [`CancelOrder`](crate::orders::CancelOrder).
    CancelOrder = 17,
    /// A cancel/replace of an order: [`ReplaceOrder`](crate::orders::ReplaceOrder).
    ReplaceOrder = 18,
    /// The venue accepted an order: [`ExecAck`](crate::exec::ExecAck).
    ExecAck = 32,
    /// An order traded: [`ExecFill`](crate::exec::ExecFill).
    ExecFill = 33,
    /// The venue refused an order: [`ExecReject`](crate::exec::ExecReject).
    ExecReject = 34,
}

impl MsgType {
    /// Every type, in wire-value order.
    pub const ALL: [MsgType; 15] = [
        MsgType::Quote,
        MsgType::Trade,
        MsgType::OrderAdd,
        MsgType::OrderModify,
        MsgType::OrderDelete,
        MsgType::OrderExecute,
        MsgType::BookSnapshot,
        MsgType::FeedGap,
        MsgType::SnapshotOrders,
        MsgType::NewOrder,
        MsgType::CancelOrder,
        MsgType::ReplaceOrder,
        MsgType::ExecAck,
        MsgType::ExecFill,
        MsgType::ExecReject,
    ];

    /// The type with wire value `v`, if there is one.
    pub fn from_wire(v: u16) -> Option<MsgType> {
        MsgType::ALL.into_iter().find(|t| *t as u16 == v)
    }
}

impl fmt::Display for MsgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}({})", *self as u16)
    }
}

/// Why bytes did not decode as a message. Never allocates; every variant names what was wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Fewer bytes than a header.
    #[error("message truncated: {got} bytes, a header alone needs {HEADER_LEN}")]
    TooShortForHeader {
        /// The bytes given.
        got: usize,
    },
    /// A type this build does not know.
    #[error("unknown message type {found}: the publisher speaks a newer schema; upgrade tickbus-codecs")]
    UnknownType {
        /// The wire type found.
        found: u16,
    },
    /// Another type than the one asked for.
    #[error("expected a {expected} message, found type {found}")]
    WrongType {
        /// The type asked for.
        expected: MsgType,
        /// The wire type found.
        found: u16,
    },
    /// A version of the type this build does not read.
    #[error(
        "{msg_type} version {found} is not supported (this build reads version {supported}); upgrade the older side"
    )]
    UnsupportedVersion {
        /// The type.
        msg_type: MsgType,
        /// The version found.
        found: u16,
        /// The version this build reads.
        supported: u16,
    },
    /// A buffer of another length than the type's.
    #[error("{msg_type} must be {expected} bytes, the buffer holds {got}")]
    WrongLength {
        /// The type.
        msg_type: MsgType,
        /// The type's size.
        expected: usize,
        /// The buffer's length.
        got: usize,
    },
    /// A header whose length field disagrees with the type's size.
    #[error("{msg_type} header says length {declared}, but the type is {expected} bytes: corrupt or foreign frame")]
    LengthFieldMismatch {
        /// The type.
        msg_type: MsgType,
        /// The type's size.
        expected: usize,
        /// The header's length field.
        declared: u32,
    },
    /// A buffer not 8-byte aligned (zero-copy parsing needs it).
    #[error("buffer for {msg_type} is not 8-byte aligned; use Message::read (copies) or an aligned buffer")]
    Misaligned {
        /// The type.
        msg_type: MsgType,
    },
}

/// A fixed-layout bus message: `#[repr(C)]`, starts with a [`Header`], 8-byte aligned fields.
pub trait Message: FromBytes + IntoBytes + KnownLayout + Immutable + Sized {
    /// Wire type.
    const TYPE: MsgType;
    /// Schema version this build writes and reads.
    const VERSION: u16 = 1;
    /// Size in bytes, header included.
    const LEN: usize = core::mem::size_of::<Self>();

    /// The common header.
    fn header(&self) -> &Header;
    /// The common header, mutable (the publisher stamps stream, sequence and TSC).
    fn header_mut(&mut self) -> &mut Header;

    /// A zeroed message whose header already carries type, version and length.
    fn new() -> Self {
        let mut m = Self::new_zeroed();
        *m.header_mut() = Header::new(Self::TYPE, Self::VERSION, Self::LEN as u32);
        m
    }

    /// Zero-copy view of `bytes` as this type, after checking length, type, version and the
    /// header's length field. After `Ok`, no field access can panic.
    fn parse(bytes: &[u8]) -> Result<&Self, DecodeError> {
        check::<Self>(bytes)?;
        Self::ref_from_bytes(bytes).map_err(|_| DecodeError::Misaligned { msg_type: Self::TYPE })
    }

    /// Like [`Message::parse`] but copies, so `bytes` may have any alignment.
    fn read(bytes: &[u8]) -> Result<Self, DecodeError> {
        check::<Self>(bytes)?;
        Self::read_from_bytes(bytes).map_err(|_| DecodeError::WrongLength {
            msg_type: Self::TYPE,
            expected: Self::LEN,
            got: bytes.len(),
        })
    }
}

/// Validates the header of `bytes` against `M` without touching the body.
fn check<M: Message>(bytes: &[u8]) -> Result<(), DecodeError> {
    let h = Header::peek(bytes).ok_or(DecodeError::TooShortForHeader { got: bytes.len() })?;
    if h.msg_type != M::TYPE as u16 {
        return Err(DecodeError::WrongType { expected: M::TYPE, found: h.msg_type });
    }
    if h.version != M::VERSION {
        return Err(DecodeError::UnsupportedVersion { msg_type: M::TYPE, found: h.version, supported: M::VERSION });
    }
    if bytes.len() != M::LEN {
        return Err(DecodeError::WrongLength { msg_type: M::TYPE, expected: M::LEN, got: bytes.len() });
    }
    if h.length as usize != M::LEN {
        return Err(DecodeError::LengthFieldMismatch { msg_type: M::TYPE, expected: M::LEN, declared: h.length });
    }
    Ok(())
}

/// Implements [`Message`] for a struct whose first field is `header: Header`, and asserts at
/// compile time that the header sits at offset 0, the size is `$len` and a multiple of 8.
macro_rules! impl_message {
    ($ty:ty, $kind:expr, $len:expr) => {
        impl $crate::message::Message for $ty {
            const TYPE: $crate::message::MsgType = $kind;
            fn header(&self) -> &$crate::header::Header {
                &self.header
            }
            fn header_mut(&mut self) -> &mut $crate::header::Header {
                &mut self.header
            }
        }
        const _: () = {
            assert!(core::mem::offset_of!($ty, header) == 0);
            assert!(core::mem::size_of::<$ty>() == $len);
            assert!(core::mem::size_of::<$ty>() % 8 == 0);
            assert!(core::mem::align_of::<$ty>() == 8);
        };
    };
}
pub(crate) use impl_message;

/// Shared checks every message file runs on its own type: the four contract tests (construct,
/// parse, round-trip, wrong length / type / version) so each file only adds its golden bytes.
#[cfg(test)]
pub(crate) mod contract {
    use super::*;

    /// A buffer with 8-byte alignment, as the ring hands out.
    #[repr(C, align(8))]
    pub struct Aligned<const N: usize>(pub [u8; N]);

    pub fn check_all<M: Message + PartialEq + core::fmt::Debug>(sample: &M) {
        // construct: header carries type, version, length
        let fresh = M::new();
        assert_eq!(fresh.header().msg_type, M::TYPE as u16);
        assert_eq!(fresh.header().version, M::VERSION);
        assert_eq!(fresh.header().length as usize, M::LEN);

        // round trip through bytes, zero-copy and copying
        let mut buf = Aligned([0u8; 2048]);
        let bytes = &mut buf.0[..M::LEN];
        bytes.copy_from_slice(sample.as_bytes());
        assert_eq!(M::parse(bytes).expect("parse"), sample);
        assert_eq!(&M::read(bytes).expect("read"), sample);

        // wrong lengths: one short, one long, header only
        let long = &buf.0[..M::LEN + 8];
        assert!(matches!(M::parse(long), Err(DecodeError::WrongLength { got, .. }) if got == M::LEN + 8));
        assert!(matches!(M::parse(&buf.0[..M::LEN - 8]), Err(DecodeError::WrongLength { .. })));
        assert!(matches!(M::parse(&buf.0[..5]), Err(DecodeError::TooShortForHeader { got: 5 })));

        // misaligned buffer: parse refuses, read copies
        let mut shifted = Aligned([0u8; 2048]);
        shifted.0[1..=M::LEN].copy_from_slice(sample.as_bytes());
        assert!(matches!(M::parse(&shifted.0[1..=M::LEN]), Err(DecodeError::Misaligned { .. })));
        assert_eq!(&M::read(&shifted.0[1..=M::LEN]).expect("read unaligned"), sample);

        // wrong version, wrong type, lying length field
        let mut bad = Aligned([0u8; 2048]);
        bad.0[..M::LEN].copy_from_slice(sample.as_bytes());
        bad.0[2] = 99;
        assert!(matches!(M::parse(&bad.0[..M::LEN]), Err(DecodeError::UnsupportedVersion { found: 99, .. })));
        bad.0[..M::LEN].copy_from_slice(sample.as_bytes());
        bad.0[0] = 0xEE;
        assert!(matches!(M::parse(&bad.0[..M::LEN]), Err(DecodeError::WrongType { found: 0xEE, .. })));
        bad.0[..M::LEN].copy_from_slice(sample.as_bytes());
        bad.0[4] ^= 0x08;
        assert!(matches!(M::parse(&bad.0[..M::LEN]), Err(DecodeError::LengthFieldMismatch { .. })));
    }
}

#[cfg(test)]
pub(crate) mod golden {
    /// Asserts that `bytes[offset..]` starts with `expected` (a field's little-endian image).
    pub fn at(bytes: &[u8], offset: usize, expected: &[u8]) {
        assert_eq!(&bytes[offset..offset + expected.len()], expected, "bytes at offset {offset}");
    }
}
