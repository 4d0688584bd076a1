//! The venue refused an order, with a machine-readable reason and a short text.
use core::mem::offset_of;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::header::Header;
use crate::message::{impl_message, MsgType};

/// Bytes of free text in a reject (NUL-padded ASCII).
pub const REJECT_TEXT_LEN: usize = 32;

/// Why an order was rejected.
#[repr(u16)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    /// None of the reasons below; see the text.
    Other = 0,
    /// The venue does not trade this instrument.
    UnknownInstrument = 1,
    /// The price is invalid (off the tick grid, outside the price band, negative).
    InvalidPrice = 2,
    /// The quantity is invalid (zero, off the lot size, too large).
    InvalidQty = 3,
    /// A risk limit refused it.
    RiskLimit = 4,
    /// A cancel or replace names an order the venue does not know (or already done).
    UnknownOrder = 5,
    /// The market is closed for this instrument.
    MarketClosed = 6,
    /// The `client_order_id` was used before in this session.
    DuplicateId = 7,
}

impl RejectReason {
    /// The reason a wire value encodes (None for a value this build does not know).
    pub fn from_wire(v: u16) -> Option<RejectReason> {
        use RejectReason::*;
        [Other, UnknownInstrument, InvalidPrice, InvalidQty, RiskLimit, UnknownOrder, MarketClosed, DuplicateId]
            .into_iter()
            .find(|r| *r as u16 == v)
    }
}

/// Reject of `client_order_id`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct ExecReject {
    /// The common header: type, version, length, sequence and the publish TSC.
    pub header: Header,
    /// The sender's id for the order, unique per session.
    pub client_order_id: u64,
    /// The instrument, by the venue's numeric id.
    pub instrument_id: u32,
    /// [`RejectReason`] as its wire value (`reason()` decodes it).
    pub reason: u16,
    _pad: u16,
    /// The venue's timestamp in ns, on the venue's clock (tickbus's gateway: ns since it
    /// started).
    pub exchange_ts_ns: u64,
    /// Free text, UTF-8, NUL-padded ([`ExecReject::set_text`] fills it).
    pub text: [u8; REJECT_TEXT_LEN],
}

impl_message!(ExecReject, MsgType::ExecReject, 88);
const _: () = {
    assert!(offset_of!(ExecReject, client_order_id) == 32);
    assert!(offset_of!(ExecReject, instrument_id) == 40);
    assert!(offset_of!(ExecReject, reason) == 44);
    assert!(offset_of!(ExecReject, exchange_ts_ns) == 48);
    assert!(offset_of!(ExecReject, text) == 56);
};

impl ExecReject {
    /// The reason, if the wire value is known.
    pub fn reason(&self) -> Option<RejectReason> {
        RejectReason::from_wire(self.reason)
    }

    /// Stores `text`, truncated to [`REJECT_TEXT_LEN`] bytes at a UTF-8 boundary, NUL-padded.
    pub fn set_text(&mut self, text: &str) {
        let mut end = text.len().min(REJECT_TEXT_LEN);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        self.text = [0; REJECT_TEXT_LEN];
        self.text[..end].copy_from_slice(&text.as_bytes()[..end]);
    }

    /// The text up to the first NUL; invalid UTF-8 from a foreign sender yields `None`.
    pub fn text(&self) -> Option<&str> {
        let end = self.text.iter().position(|b| *b == 0).unwrap_or(REJECT_TEXT_LEN);
        core::str::from_utf8(&self.text[..end]).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{contract, golden, Message};

    fn sample() -> ExecReject {
        let mut m = ExecReject::new();
        m.client_order_id = 1001;
        m.instrument_id = 4;
        m.reason = RejectReason::RiskLimit as u16;
        m.exchange_ts_ns = 7;
        m.set_text("max position exceeded");
        m
    }

    #[test]
    fn layout_is_the_documented_little_endian_image() {
        let m = sample();
        let b = m.as_bytes();
        golden::at(b, 0, &[34, 0, 1, 0, 88, 0, 0, 0]);
        golden::at(b, 44, &[4, 0]);
        golden::at(b, 56, b"max position exceeded\0");
        assert_eq!(m.reason(), Some(RejectReason::RiskLimit));
        assert_eq!(m.text(), Some("max position exceeded"));
    }

    #[test]
    fn text_truncates_at_a_char_boundary() {
        let mut m = ExecReject::new();
        m.set_text(&"é".repeat(20)); // 40 bytes; 32 is a boundary (2-byte chars)
        assert_eq!(m.text().map(str::len), Some(32));
        m.set_text(&format!("a{}", "é".repeat(20))); // byte 32 splits a char
        assert_eq!(m.text().map(str::len), Some(31));
        m.text[0] = 0xFF;
        assert_eq!(m.text(), None);
    }

    #[test]
    fn satisfies_the_message_contract() {
        contract::check_all(&sample());
    }
}
