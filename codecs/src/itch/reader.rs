//! Streaming reader of ITCH files: `[u16 BE length][message]` repeated, read through any `Read`
//! without loading the file.
//!
//! Some tools write the 2-byte prefix as zero (the test file in ../shared/data/itch does). The
//! reader takes the length from the prefix when it is set and agrees with the type, and from
//! the type's fixed size when it is zero; a prefix that contradicts the type is an error naming
//! the offset.
use std::io::{BufRead, BufReader, Read};

use super::dispatch::{parse, ItchError, ItchMessage};
use super::messages::message_len;

/// A message and where its frame starts in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub offset: u64,
    pub message: ItchMessage<'a>,
}

/// Reads ITCH messages one at a time; `next_record` reuses one small buffer (no per-message
/// allocation).
pub struct ItchFileReader<R: Read> {
    input: BufReader<R>,
    offset: u64,
    buf: [u8; 64],
}

impl<R: Read> ItchFileReader<R> {
    pub fn new(input: R) -> ItchFileReader<R> {
        ItchFileReader { input: BufReader::with_capacity(1 << 16, input), offset: 0, buf: [0; 64] }
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next message, `Ok(None)` at a clean end of file, or an error naming the offset (the
    /// reader cannot resynchronise after one: framing is lost).
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, std::io::Error> {
        let at = self.offset;
        let avail = self.input.fill_buf()?.len();
        if avail == 0 {
            return Ok(None);
        }
        let mut head = [0u8; 3];
        let got = read_up_to(&mut self.input, &mut head)?;
        if got < 3 {
            return Err(invalid(ItchError::Truncated { offset: at, missing: 3 - got }));
        }
        let prefix = u16::from_be_bytes([head[0], head[1]]);
        let code = head[2];
        let Some(expected) = message_len(code) else {
            return Err(invalid(ItchError::UnknownType { offset: at + 2, code }));
        };
        if prefix != 0 && usize::from(prefix) != expected {
            return Err(invalid(ItchError::PrefixMismatch { offset: at, code, prefix, expected }));
        }
        self.buf[0] = code;
        let got = read_up_to(&mut self.input, &mut self.buf[1..expected])?;
        if got < expected - 1 {
            return Err(invalid(ItchError::Truncated { offset: at + 3 + got as u64, missing: expected - 1 - got }));
        }
        self.offset = at + 2 + expected as u64;
        let message = parse(&self.buf[..expected], at + 2).map_err(invalid)?;
        Ok(Some(Record { offset: at, message }))
    }
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn invalid(e: ItchError) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn frame(prefix: Option<u16>, code: u8) -> Vec<u8> {
        let len = message_len(code).unwrap();
        let mut v = prefix.unwrap_or(len as u16).to_be_bytes().to_vec();
        v.push(code);
        v.extend(std::iter::repeat_n(0u8, len - 1));
        v
    }

    fn count(bytes: &[u8]) -> Result<Vec<u8>, String> {
        let mut r = ItchFileReader::new(bytes);
        let mut codes = Vec::new();
        while let Some(rec) = r.next_record().map_err(|e| e.to_string())? {
            codes.push(rec.message.code());
        }
        Ok(codes)
    }

    #[test]
    fn reads_true_and_zero_prefixes_and_names_the_offset_of_bad_frames() {
        let mut f = frame(None, b'S');
        f.extend(frame(Some(0), b'A'));
        f.extend(frame(None, b'D'));
        assert_eq!(count(&f).unwrap(), b"SAD");
        let bad = [frame(None, b'S'), frame(Some(30), b'A')].concat();
        let e = count(&bad).unwrap_err();
        assert!(e.contains("offset 14") && e.contains("contradicts type 'A'"), "{e}");
        let unknown = [frame(None, b'S'), vec![0, 5, b'Z', 1, 2, 3, 4]].concat();
        assert!(count(&unknown).unwrap_err().contains("offset 16: unknown ITCH message type 0x5a"));
        let short = &frame(None, b'A')[..20];
        assert!(count(short).unwrap_err().contains("file ends inside a message"));
        assert_eq!(count(&[]).unwrap(), b"");
    }

    #[test]
    fn never_panics_on_arbitrary_bytes() {
        for len in 0..300 {
            let _ = count(&crate::testutil::junk(len as u32, len));
        }
    }

    /// The third-party test file in ../shared/data/itch (BinaryFILE framing with zero prefixes):
    /// 465,048 bytes, 12,012 messages of types S, R, H, A, F, E, X, D, U, P.
    #[test]
    fn reads_the_shared_third_party_itch_file() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data/itch/ex20101224.TEST_ITCH_50");
        let file = std::fs::File::open(path).expect("../shared/data/itch is laid beside the checkout");
        let mut r = ItchFileReader::new(file);
        let mut counts: BTreeMap<char, u64> = BTreeMap::new();
        let mut last_ts = 0;
        while let Some(rec) = r.next_record().expect("the test file reads without error") {
            *counts.entry(rec.message.code() as char).or_default() += 1;
            last_ts = rec.message.header().timestamp_ns();
        }
        assert_eq!(r.offset(), 465_048, "every byte consumed");
        assert_eq!(counts.values().sum::<u64>(), 12_012, "{counts:?}");
        assert_eq!(counts.keys().collect::<String>(), "ADEFHPRSUX", "{counts:?}");
        assert!(last_ts > 0 && last_ts < 24 * 3600 * 1_000_000_000, "timestamps are ns since midnight");
    }
}
