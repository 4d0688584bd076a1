//! Writes ITCH files (`[u16 BE length][message]` framing, true lengths), and walks an ITCH file
//! that is already in memory without copying a byte.
//!
//! Owns: the framing on the way out and the zero-copy walk. Never: writes a frame that
//! [`parse`] would refuse, or panics on any input.
use std::io::{self, Write};

use zerocopy::{Immutable, IntoBytes};

use super::dispatch::{parse, ItchError};
use super::reader::{frame_at, Record};

/// Frames messages into any `Write` (wrap files in a `BufWriter`).
pub struct ItchFileWriter<W: Write> {
    out: W,
    messages: u64,
}

impl<W: Write> ItchFileWriter<W> {
    /// A writer of length-prefixed ITCH frames to `out` (wrap a file in a `BufWriter`).
    pub fn new(out: W) -> ItchFileWriter<W> {
        ItchFileWriter { out, messages: 0 }
    }

    /// Writes one message given as its wire bytes; refuses bytes that are not exactly one valid
    /// message (nothing is written then).
    pub fn write_bytes(&mut self, msg: &[u8]) -> io::Result<()> {
        parse(msg, self.messages).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        self.out.write_all(&(msg.len() as u16).to_be_bytes())?;
        self.out.write_all(msg)?;
        self.messages += 1;
        Ok(())
    }

    /// Writes one message view (`AddOrder`, `SystemEvent`, ...).
    pub fn write<T: IntoBytes + Immutable>(&mut self, msg: &T) -> io::Result<()> {
        self.write_bytes(msg.as_bytes())
    }

    /// Messages written so far.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// Flushes and returns the sink.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Iterates the messages of an ITCH file held in memory (a `Vec` or an mmap), zero-copy: each
/// message borrows `bytes`. Accepts true and zero length prefixes like [`super::ItchFileReader`];
/// stops after the first error (framing is lost).
pub fn frames(bytes: &[u8]) -> Frames<'_> {
    Frames { bytes, at: 0, failed: false }
}

/// See [`frames`].
pub struct Frames<'a> {
    bytes: &'a [u8],
    at: usize,
    failed: bool,
}

impl Frames<'_> {
    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.at as u64
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<Record<'a>, ItchError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let rest = &self.bytes[self.at..];
        if rest.is_empty() || self.failed {
            return None;
        }
        let offset = self.at as u64;
        let r = frame_at(rest, offset);
        match r {
            Ok((len, message)) => {
                self.at += 2 + len;
                Some(Ok(Record { offset, message }))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::itch::{AddOrder, ItchFileReader, ItchHeader, ItchMessage, SystemEvent};
    use zerocopy::big_endian::{U32, U64};

    fn add(r: u64) -> AddOrder {
        AddOrder {
            header: ItchHeader::new(b'A', 7, 0, 34_200_000_000_123),
            order_reference_number: U64::new(r),
            side: b'B',
            shares: U32::new(100),
            stock: *b"ACME    ",
            price: U32::new(1_234_500),
        }
    }

    #[test]
    fn written_files_read_back_through_both_readers() {
        let mut w = ItchFileWriter::new(Vec::new());
        w.write(&SystemEvent { header: ItchHeader::new(b'S', 0, 0, 5), event_code: b'O' }).unwrap();
        w.write(&add(1)).unwrap();
        w.write(&add(2)).unwrap();
        assert_eq!(w.messages(), 3);
        let bytes = w.finish().unwrap();
        assert_eq!(&bytes[..3], &[0, 12, b'S']);
        let walked: Vec<_> = frames(&bytes).map(|r| r.unwrap()).collect();
        let mut rd = ItchFileReader::new(&bytes[..]);
        for rec in &walked {
            let streamed = rd.next_record().unwrap().unwrap();
            assert_eq!(streamed.offset, rec.offset);
            assert_eq!(streamed.message.as_bytes(), rec.message.as_bytes());
        }
        assert!(rd.next_record().unwrap().is_none());
        let ItchMessage::AddOrder(a) = walked[2].message else { panic!("{:?}", walked[2]) };
        assert_eq!((a.order_reference_number.get(), a.header.timestamp_ns()), (2, 34_200_000_000_123));
    }

    #[test]
    fn refuses_to_write_a_malformed_message_and_writes_nothing() {
        let mut w = ItchFileWriter::new(Vec::new());
        let bytes = add(1);
        let err = w.write_bytes(&bytes.as_bytes()[..30]).unwrap_err();
        assert!(err.to_string().contains("type 'A' is 36 bytes"), "{err}");
        assert!(w.write_bytes(b"Zxx").is_err());
        assert_eq!(w.finish().unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn the_walk_names_the_offset_of_truncation_and_stops() {
        let mut w = ItchFileWriter::new(Vec::new());
        w.write(&add(1)).unwrap();
        let mut bytes = w.finish().unwrap();
        bytes.extend_from_slice(&[0, 36, b'A', 0, 0]);
        let got: Vec<_> = frames(&bytes).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1], Err(ItchError::Truncated { offset: 43, missing: 33 }));
        for seed in 0..200 {
            let junk = crate::testutil::junk(seed, 300);
            for r in frames(&junk) {
                let _ = r;
            }
        }
    }
}
