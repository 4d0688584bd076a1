//! One message of any type, decoded from exactly its bytes.
use zerocopy::FromBytes;

use super::messages::*;

/// Why bytes are not an ITCH message (or an ITCH file is malformed). Each variant names the byte
/// offset in the input and, where known, the message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ItchError {
    /// A type code ITCH 5.0 does not have.
    #[error("offset {offset}: unknown ITCH message type {code:#04x} ({})", printable(*.code))]
    UnknownType {
        /// Byte offset of the type code.
        offset: u64,
        /// The code found.
        code: u8,
    },
    /// A message whose frame is not its type's size.
    #[error("offset {offset}: type '{}' is {expected} bytes but the frame holds {got}", *.code as char)]
    WrongLength {
        /// Byte offset of the message.
        offset: u64,
        /// Its type code.
        code: u8,
        /// The type's size.
        expected: usize,
        /// The bytes the frame holds.
        got: usize,
    },
    /// The input ends inside a message.
    #[error("offset {offset}: file ends inside a message ({missing} more bytes needed)")]
    Truncated {
        /// Byte offset where the input runs short (the frame's start when even its length
        /// prefix and type are cut).
        offset: u64,
        /// Bytes still needed.
        missing: usize,
    },
    /// A length prefix that contradicts the type code.
    #[error("offset {offset}: length prefix {prefix} contradicts type '{}' ({expected} bytes): corrupt or not ITCH 5.0", *.code as char)]
    PrefixMismatch {
        /// Byte offset of the frame.
        offset: u64,
        /// The type code.
        code: u8,
        /// The length prefix.
        prefix: u16,
        /// The type's size.
        expected: usize,
    },
    /// A frame of no bytes.
    #[error("offset {offset}: empty frame")]
    Empty {
        /// Byte offset of the frame.
        offset: u64,
    },
}

impl ItchError {
    /// The same error with its offset moved by `base` (for a walk that began at file offset
    /// `base`).
    pub fn shifted(self, base: u64) -> ItchError {
        match self {
            ItchError::UnknownType { offset, code } => ItchError::UnknownType { offset: offset + base, code },
            ItchError::WrongLength { offset, code, expected, got } => {
                ItchError::WrongLength { offset: offset + base, code, expected, got }
            }
            ItchError::Truncated { offset, missing } => ItchError::Truncated { offset: offset + base, missing },
            ItchError::PrefixMismatch { offset, code, prefix, expected } => {
                ItchError::PrefixMismatch { offset: offset + base, code, prefix, expected }
            }
            ItchError::Empty { offset } => ItchError::Empty { offset: offset + base },
        }
    }
}

fn printable(b: u8) -> char {
    if b.is_ascii_graphic() {
        b as char
    } else {
        '?'
    }
}

/// A decoded message, borrowing its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItchMessage<'a> {
    /// `S`: [`SystemEvent`].
    SystemEvent(&'a SystemEvent),
    /// `R`: [`StockDirectory`].
    StockDirectory(&'a StockDirectory),
    /// `H`: [`StockTradingAction`].
    StockTradingAction(&'a StockTradingAction),
    /// `Y`: [`RegShoRestriction`].
    RegShoRestriction(&'a RegShoRestriction),
    /// `L`: [`MarketParticipantPosition`].
    MarketParticipantPosition(&'a MarketParticipantPosition),
    /// `V`: [`MwcbDeclineLevel`].
    MwcbDeclineLevel(&'a MwcbDeclineLevel),
    /// `W`: [`MwcbStatus`].
    MwcbStatus(&'a MwcbStatus),
    /// `K`: [`IpoQuotingPeriodUpdate`].
    IpoQuotingPeriodUpdate(&'a IpoQuotingPeriodUpdate),
    /// `J`: [`LuldAuctionCollar`].
    LuldAuctionCollar(&'a LuldAuctionCollar),
    /// `h`: [`OperationalHalt`].
    OperationalHalt(&'a OperationalHalt),
    /// `A`: [`AddOrder`].
    AddOrder(&'a AddOrder),
    /// `F`: [`AddOrderMpid`].
    AddOrderMpid(&'a AddOrderMpid),
    /// `E`: [`OrderExecuted`].
    OrderExecuted(&'a OrderExecuted),
    /// `C`: [`OrderExecutedWithPrice`].
    OrderExecutedWithPrice(&'a OrderExecutedWithPrice),
    /// `X`: [`OrderCancel`].
    OrderCancel(&'a OrderCancel),
    /// `D`: [`OrderDelete`].
    OrderDelete(&'a OrderDelete),
    /// `U`: [`OrderReplace`].
    OrderReplace(&'a OrderReplace),
    /// `P`: [`Trade`].
    Trade(&'a Trade),
    /// `Q`: [`CrossTrade`].
    CrossTrade(&'a CrossTrade),
    /// `B`: [`BrokenTrade`].
    BrokenTrade(&'a BrokenTrade),
    /// `I`: [`Noii`].
    Noii(&'a Noii),
    /// `N`: [`Rpii`].
    Rpii(&'a Rpii),
    /// `O`: [`DirectListingCapitalRaise`].
    DirectListingCapitalRaise(&'a DirectListingCapitalRaise),
}

/// Evaluates `$body` with `$m` bound to the view inside whichever variant `$msg` holds: the one
/// place that lists every variant for code that treats all types alike.
macro_rules! with_view {
    ($msg:expr, $m:ident => $body:expr) => {
        match $msg {
            ItchMessage::SystemEvent($m) => $body,
            ItchMessage::StockDirectory($m) => $body,
            ItchMessage::StockTradingAction($m) => $body,
            ItchMessage::RegShoRestriction($m) => $body,
            ItchMessage::MarketParticipantPosition($m) => $body,
            ItchMessage::MwcbDeclineLevel($m) => $body,
            ItchMessage::MwcbStatus($m) => $body,
            ItchMessage::IpoQuotingPeriodUpdate($m) => $body,
            ItchMessage::LuldAuctionCollar($m) => $body,
            ItchMessage::OperationalHalt($m) => $body,
            ItchMessage::AddOrder($m) => $body,
            ItchMessage::AddOrderMpid($m) => $body,
            ItchMessage::OrderExecuted($m) => $body,
            ItchMessage::OrderExecutedWithPrice($m) => $body,
            ItchMessage::OrderCancel($m) => $body,
            ItchMessage::OrderDelete($m) => $body,
            ItchMessage::OrderReplace($m) => $body,
            ItchMessage::Trade($m) => $body,
            ItchMessage::CrossTrade($m) => $body,
            ItchMessage::BrokenTrade($m) => $body,
            ItchMessage::Noii($m) => $body,
            ItchMessage::Rpii($m) => $body,
            ItchMessage::DirectListingCapitalRaise($m) => $body,
        }
    };
}

impl<'a> ItchMessage<'a> {
    /// The common header of whichever type this is.
    pub fn header(&self) -> &'a ItchHeader {
        with_view!(*self, m => &m.header)
    }

    /// The one-letter type code.
    pub fn code(&self) -> u8 {
        self.header().msg_type
    }

    /// The message's wire bytes (exactly `message_len(code)` of them), for re-encoding.
    pub fn as_bytes(&self) -> &'a [u8] {
        use zerocopy::IntoBytes;
        with_view!(*self, m => m.as_bytes())
    }
}

/// Message sizes by type code (0: not an ITCH 5.0 type), so framing costs one load per message.
pub(super) const LENS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < CODES.len() {
        let code = CODES[i];
        t[code as usize] = match message_len(code) {
            Some(n) => n as u8,
            None => 0,
        };
        i += 1;
    }
    t
};

/// Decodes `bytes`, exactly one message, found at `offset` of the input (for error messages).
#[inline]
pub fn parse(bytes: &[u8], offset: u64) -> Result<ItchMessage<'_>, ItchError> {
    let code = *bytes.first().ok_or(ItchError::Empty { offset })?;
    // One dispatch on the type: zerocopy checks the length as it makes the view.
    macro_rules! view {
        ($v:ident) => {
            match $v::ref_from_bytes(bytes) {
                Ok(m) => ItchMessage::$v(m),
                Err(_) => return Err(ItchError::WrongLength { offset, code, expected: $v::LEN, got: bytes.len() }),
            }
        };
    }
    Ok(match code {
        b'S' => view!(SystemEvent),
        b'R' => view!(StockDirectory),
        b'H' => view!(StockTradingAction),
        b'Y' => view!(RegShoRestriction),
        b'L' => view!(MarketParticipantPosition),
        b'V' => view!(MwcbDeclineLevel),
        b'W' => view!(MwcbStatus),
        b'K' => view!(IpoQuotingPeriodUpdate),
        b'J' => view!(LuldAuctionCollar),
        b'h' => view!(OperationalHalt),
        b'A' => view!(AddOrder),
        b'F' => view!(AddOrderMpid),
        b'E' => view!(OrderExecuted),
        b'C' => view!(OrderExecutedWithPrice),
        b'X' => view!(OrderCancel),
        b'D' => view!(OrderDelete),
        b'U' => view!(OrderReplace),
        b'P' => view!(Trade),
        b'Q' => view!(CrossTrade),
        b'B' => view!(BrokenTrade),
        b'I' => view!(Noii),
        b'N' => view!(Rpii),
        b'O' => view!(DirectListingCapitalRaise),
        _ => return Err(ItchError::UnknownType { offset, code }),
    })
}

/// Decodes the message of type `code` at the start of `body`, which holds at least the longest
/// message (`N` bytes, N >= 50): the fast path of `ItchFileReader::next_record`, whose frame
/// prefix already matched the type's length. With a fixed-size view every slice and length
/// check is known at compile time and folds away, leaving the one dispatch on the type (`parse`
/// must check both at run time). None for a code that is not ITCH 5.0.
#[inline(always)]
pub(super) fn parse_sized<const N: usize>(body: &[u8; N], code: u8) -> Option<ItchMessage<'_>> {
    const { assert!(N >= 50, "the body must hold the longest ITCH 5.0 message (50 bytes)") };
    macro_rules! view {
        ($v:ident) => {
            ItchMessage::$v($v::ref_from_bytes(&body[..$v::LEN]).ok()?)
        };
    }
    Some(match code {
        b'S' => view!(SystemEvent),
        b'R' => view!(StockDirectory),
        b'H' => view!(StockTradingAction),
        b'Y' => view!(RegShoRestriction),
        b'L' => view!(MarketParticipantPosition),
        b'V' => view!(MwcbDeclineLevel),
        b'W' => view!(MwcbStatus),
        b'K' => view!(IpoQuotingPeriodUpdate),
        b'J' => view!(LuldAuctionCollar),
        b'h' => view!(OperationalHalt),
        b'A' => view!(AddOrder),
        b'F' => view!(AddOrderMpid),
        b'E' => view!(OrderExecuted),
        b'C' => view!(OrderExecutedWithPrice),
        b'X' => view!(OrderCancel),
        b'D' => view!(OrderDelete),
        b'U' => view!(OrderReplace),
        b'P' => view!(Trade),
        b'Q' => view!(CrossTrade),
        b'B' => view!(BrokenTrade),
        b'I' => view!(Noii),
        b'N' => view!(Rpii),
        b'O' => view!(DirectListingCapitalRaise),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn the_fixed_size_fast_path_gives_what_parse_gives_for_every_type_and_nothing_for_the_rest() {
        for code in 0..=255u8 {
            // The longest message and then some, the rest of the bytes not the message's.
            let mut body = [0xa5u8; 60];
            body[0] = code;
            match message_len(code) {
                Some(len) => {
                    let fast = parse_sized(&body, code).unwrap();
                    let slow = parse(&body[..len], 0).unwrap();
                    assert_eq!((fast.code(), fast.as_bytes()), (slow.code(), slow.as_bytes()), "{}", code as char);
                }
                None => assert!(parse_sized(&body, code).is_none(), "{code}"),
            }
        }
    }

    #[test]
    fn every_type_parses_at_its_size_and_refuses_other_sizes() {
        for code in CODES {
            let len = message_len(code).unwrap();
            let mut buf = vec![0u8; len + 1];
            buf[0] = code;
            let m = parse(&buf[..len], 7).unwrap();
            assert_eq!(m.code(), code);
            assert_eq!(parse(&buf, 7), Err(ItchError::WrongLength { offset: 7, code, expected: len, got: len + 1 }));
            assert!(matches!(parse(&buf[..len - 1], 7), Err(ItchError::WrongLength { .. })));
        }
        assert_eq!(parse(b"Z123", 3), Err(ItchError::UnknownType { offset: 3, code: b'Z' }));
        assert_eq!(parse(b"", 9), Err(ItchError::Empty { offset: 9 }));
    }

    #[test]
    fn add_order_golden_bytes_decode_big_endian_fields() {
        // type | locate | tracking | timestamp(6) | order ref(8) | side | shares(4) | stock(8) | price(4)
        let mut b = [0u8; 36];
        b[0] = b'A';
        b[1..3].copy_from_slice(&42u16.to_be_bytes());
        b[3..5].copy_from_slice(&3u16.to_be_bytes());
        b[5..11].copy_from_slice(&[0x00, 0x00, 0x1f, 0x1a, 0x71, 0x8f]);
        b[11..19].copy_from_slice(&12345u64.to_be_bytes());
        b[19] = b'B';
        b[20..24].copy_from_slice(&100u32.to_be_bytes());
        b[24..32].copy_from_slice(b"AAPL    ");
        b[32..36].copy_from_slice(&1_000_000u32.to_be_bytes()); // $100.0000
        let ItchMessage::AddOrder(a) = parse(&b, 0).unwrap() else { panic!("not an add order") };
        assert_eq!(a.header.stock_locate.get(), 42);
        assert_eq!(a.header.timestamp_ns(), 0x1f1a718f);
        assert_eq!(a.order_reference_number.get(), 12345);
        assert_eq!((a.side, a.shares.get(), &a.stock, a.price.get()), (b'B', 100, b"AAPL    ", 1_000_000));
        assert_eq!(a.as_bytes(), &b);
    }
}
