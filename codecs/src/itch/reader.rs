//! Streaming reader of ITCH files: `[u16 BE length][message]` repeated, read through any `Read`
//! without loading the file.
//!
//! Some tools write the 2-byte prefix as zero (the test file in ../shared/data/itch does). The
//! reader takes the length from the prefix when it is set and agrees with the type, and from
//! the type's fixed size when it is zero; a prefix that contradicts the type is an error naming
//! the offset.
//!
//! The reader keeps its own 64 KiB buffer and decodes each message in place (a view into the
//! buffer, no copy per message); it refills only when a frame runs past the buffered bytes.
use std::io::Read;

use super::dispatch::{parse, parse_sized, ItchError, ItchMessage, LENS};

/// A message and where its frame starts in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Byte offset of the frame (its length prefix) in the file.
    pub offset: u64,
    /// The decoded message, borrowing the reader's buffer.
    pub message: ItchMessage<'a>,
}

/// The frame at the start of `rest` (which begins at file offset `offset`): its message length
/// and the message. Shared by the streaming reader and the in-memory walk, so both accept and
/// refuse exactly the same bytes.
#[inline(always)]
pub(super) fn frame_at(rest: &[u8], offset: u64) -> Result<(usize, ItchMessage<'_>), ItchError> {
    let expected = frame_len(rest, offset)?;
    let body = rest.get(2..2 + expected).ok_or_else(|| ItchError::Truncated {
        offset: offset + rest.len() as u64,
        missing: 2 + expected - rest.len(),
    })?;
    Ok((expected, parse(body, offset + 2)?))
}

/// The message length of the frame at the start of `rest`, from its first three bytes.
#[inline(always)]
fn frame_len(rest: &[u8], offset: u64) -> Result<usize, ItchError> {
    let [p0, p1, code, ..] = *rest else {
        return Err(ItchError::Truncated { offset, missing: 3 - rest.len() });
    };
    let prefix = u16::from_be_bytes([p0, p1]);
    let expected = usize::from(LENS[usize::from(code)]);
    if expected == 0 {
        return Err(ItchError::UnknownType { offset: offset + 2, code });
    }
    if prefix != 0 && usize::from(prefix) != expected {
        return Err(ItchError::PrefixMismatch { offset, code, prefix, expected });
    }
    Ok(expected)
}

const BUF: usize = 1 << 16;
/// The largest frame: a two-byte length prefix and the largest message (NOII, 50 bytes).
const MAX_FRAME: usize = 52;
// The fast path slices a whole frame out of MAX_FRAME buffered bytes: no type may be longer.
const _: () = {
    let mut i = 0;
    while i < LENS.len() {
        assert!(LENS[i] as usize + 2 <= MAX_FRAME);
        i += 1;
    }
};

/// Reads ITCH messages one at a time from any `Read`, without a per-message allocation or copy.
///
/// Why the input is boxed and the slow paths take a copy of the position (a local, written back
/// after), not `&mut self`:
/// a caller's loop keeps the reader on its stack, and a pointer into it handed to a function
/// that is not inlined (the refill) would pin the position in memory, so each message would
/// store it and the next load it back. With no pointer into the reader taken, the compiler can
/// keep the position in a register across the caller's loop.
pub struct ItchFileReader<R: Read> {
    input: Box<R>,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    eof: bool,
    /// The file offset of `buf[0]`: a frame at `pos` starts at `base + pos`.
    base: u64,
}

/// A reader's position, copied out for the slow paths: the next frame at `buf[pos]`, bytes
/// buffered up to `end`, whether the input has ended, and the file offset of `buf[0]`.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    pos: usize,
    end: usize,
    eof: bool,
    base: u64,
}

impl<R: Read> ItchFileReader<R> {
    /// A reader of `input`; it reads 64 KiB at a time, so an unbuffered `File` is fine.
    pub fn new(input: R) -> ItchFileReader<R> {
        ItchFileReader {
            input: Box::new(input),
            buf: vec![0; BUF].into_boxed_slice(),
            pos: 0,
            end: 0,
            eof: false,
            base: 0,
        }
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// The next message, `Ok(None)` at a clean end of file, or an error naming the offset. A
    /// malformed frame gives the same error on every later call (framing is lost: the reader
    /// cannot resynchronise); after a read that failed (`WouldBlock`, say), a later call reads on
    /// from the bytes already taken.
    ///
    /// Why it is two paths: while a whole largest frame is buffered, a frame is one bounds check,
    /// a table look-up of its length and a view, with nothing that can run short; everything
    /// else (a frame across the buffer's end, a refill, the end of the file, an error) takes the
    /// slow path, which accepts and refuses exactly the same bytes.
    #[inline(always)]
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, std::io::Error> {
        let pos = self.pos;
        let framed = match self.buf[..self.end].get(pos..pos + MAX_FRAME) {
            Some(&[p0, p1, code, ..]) => {
                let len = usize::from(LENS[usize::from(code)]);
                let prefix = usize::from(u16::from_be_bytes([p0, p1]));
                (len != 0 && (prefix == 0 || prefix == len)).then_some((code, len))
            }
            _ => None,
        };
        if let Some((code, len)) = framed {
            let offset = self.base + pos as u64;
            self.pos = pos + 2 + len;
            // A fixed-size view of the frame: every length check below is known at compile
            // time (the bounds were checked above).
            let frame: &[u8; MAX_FRAME] = self.buf[pos..pos + MAX_FRAME].try_into().expect("MAX_FRAME bytes");
            let body: &[u8; MAX_FRAME - 2] = frame[2..].try_into().expect("the frame after its prefix");
            // Cannot fail: the code names a type (its length is not 0) and the body holds it.
            let message = parse_sized(body, code).ok_or(ItchError::UnknownType { offset: offset + 2, code });
            return Ok(Some(Record { offset, message: message.map_err(invalid)? }));
        }
        // A copy of the position for the slow path (a pointer to a local, not into the
        // reader), written back whatever it returns: a refill may have moved the buffered bytes
        // before an error, and a caller that retries must read on from where they now are.
        let mut c = Cursor { pos, end: self.end, eof: self.eof, base: self.base };
        let found = next_frame_slow(&mut *self.input, &mut self.buf, &mut c);
        (self.pos, self.end, self.eof, self.base) = (c.pos, c.end, c.eof, c.base);
        let Some(len) = found? else { return Ok(None) };
        let at = self.pos - 2 - len;
        let offset = self.base + at as u64;
        let message = parse(&self.buf[at + 2..at + 2 + len], offset + 2).map_err(invalid)?;
        Ok(Some(Record { offset, message }))
    }

    /// Calls `f` with every remaining message, in order; returns how many. Stops at the first
    /// malformed frame with its error (the messages before it were delivered). It is
    /// [`ItchFileReader::next_record`] in a loop: that is as fast as streaming gets here, as the
    /// position stays in a register either way.
    pub fn for_each(&mut self, mut f: impl FnMut(Record<'_>)) -> Result<u64, std::io::Error> {
        let mut n = 0u64;
        while let Some(rec) = self.next_record()? {
            f(rec);
            n += 1;
        }
        Ok(n)
    }
}

/// [`ItchFileReader::next_record`] near the buffer's end, at the end of the file, or for a frame
/// that is wrong: the next frame's message length, the cursor moved just past it (so the frame
/// is the `2 + len` bytes before `c.pos`); None at a clean end of file. On an error `c` is where
/// the buffered bytes now are, at the frame that failed (the same error again on a retry) or,
/// for a failed read, at the bytes read so far.
#[cold]
#[inline(never)]
fn next_frame_slow<R: Read>(input: &mut R, buf: &mut [u8], c: &mut Cursor) -> std::io::Result<Option<usize>> {
    loop {
        let rest = &buf[c.pos..c.end];
        let offset = c.base + c.pos as u64;
        match frame_len(rest, offset) {
            Ok(len) if rest.len() >= 2 + len => {
                c.pos += 2 + len;
                return Ok(Some(len));
            }
            Ok(_) | Err(ItchError::Truncated { .. }) => {}
            Err(e) => return Err(invalid(e)),
        }
        if c.eof {
            if rest.is_empty() {
                return Ok(None);
            }
            let e = frame_at(rest, offset).err().unwrap_or(ItchError::Empty { offset });
            return Err(invalid(e));
        }
        refill(input, buf, c)?;
    }
}

/// Moves the unread tail to the front of `buf` and reads more, keeping `c` true to the buffer
/// after every step (an error leaves it at the bytes read so far); sets `eof` when the input
/// ended.
#[cold]
fn refill<R: Read>(input: &mut R, buf: &mut [u8], c: &mut Cursor) -> std::io::Result<()> {
    buf.copy_within(c.pos..c.end, 0);
    (c.end, c.base, c.pos) = (c.end - c.pos, c.base + c.pos as u64, 0);
    while c.end < buf.len() {
        match input.read(&mut buf[c.end..]) {
            Ok(0) => {
                c.eof = true;
                break;
            }
            Ok(n) => {
                c.end += n;
                // More than the largest frame (52 bytes): decode now, read more later.
                if c.end >= 64 {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn invalid(e: ItchError) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::itch::message_len;
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

    /// A `Read` that hands out at most `n` bytes per call, as pipes and sockets do.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(out.len()).min(self.0.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn short_reads_and_buffer_boundaries_give_the_same_messages_as_the_in_memory_walk() {
        let mut day = Vec::new();
        crate::synth::write_itch(crate::synth::DayConfig::new(9, 5, 20_000), &mut day).unwrap();
        assert!(day.len() > 4 * BUF, "the file spans several buffer refills");
        for chunk in [1, 7, 4096, usize::MAX] {
            let mut r = ItchFileReader::new(Trickle(&day, chunk));
            let mut walk = crate::itch::frames(&day);
            while let Some(rec) = r.next_record().unwrap() {
                let w = walk.next().unwrap().unwrap();
                assert_eq!((rec.offset, rec.message.as_bytes()), (w.offset, w.message.as_bytes()), "chunk {chunk}");
            }
            assert!(walk.next().is_none(), "chunk {chunk}: the reader stopped early");
            let mut walk = crate::itch::frames(&day);
            let n = ItchFileReader::new(Trickle(&day, chunk))
                .for_each(|rec| {
                    let w = walk.next().unwrap().unwrap();
                    assert_eq!((rec.offset, rec.message.as_bytes()), (w.offset, w.message.as_bytes()));
                })
                .unwrap();
            assert!(walk.next().is_none() && n > 20_000, "chunk {chunk}: for_each delivered {n}");
            let cut = &day[..day.len() - 3];
            let err = read_to_error(&mut ItchFileReader::new(Trickle(cut, chunk)), "a cut file");
            assert!(err.contains("file ends inside a message"), "chunk {chunk}: {err}");
            let err = ItchFileReader::new(Trickle(cut, chunk)).for_each(|_| {}).unwrap_err().to_string();
            assert!(err.contains("file ends inside a message"), "chunk {chunk}: {err}");
        }
    }

    /// A `Read` over `bytes` in chunks of `chunk` that fails once, with `WouldBlock`, on its
    /// first read at or past byte `fail_at`.
    struct FailsOnce<'a> {
        bytes: &'a [u8],
        at: usize,
        chunk: usize,
        fail_at: usize,
        failed: bool,
    }

    impl Read for FailsOnce<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if !self.failed && self.at >= self.fail_at {
                self.failed = true;
                return Err(std::io::ErrorKind::WouldBlock.into());
            }
            let n = self.chunk.min(out.len()).min(self.bytes.len() - self.at);
            out[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    /// Reads until the reader fails; its error's text.
    fn read_to_error<R: Read>(r: &mut ItchFileReader<R>, what: &str) -> String {
        loop {
            match r.next_record() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("{what}: read to the end"),
                Err(e) => break e.to_string(),
            }
        }
    }

    /// A `Read` of `bytes` whose reads never run past byte `cut` in one go: one of them ends
    /// exactly there.
    struct EndsAt<'a> {
        bytes: &'a [u8],
        at: usize,
        cut: usize,
    }

    impl Read for EndsAt<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let stop = if self.at < self.cut { self.cut } else { self.bytes.len() };
            let n = out.len().min(stop - self.at);
            out[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    /// Errors after refills name the same offset and say the same as the in-memory walk's,
    /// whatever the reads' sizes, and a retry gives the same error again: a frame damaged across
    /// 64 KiB (the first buffer's end when the input comes 64 KiB at a time), one far past it,
    /// each also where a read ends one byte into it (so the damage is found after a refill in
    /// the same call), and a cut file. A read that fails mid-refill loses nothing: the caller
    /// retries and every message arrives.
    #[test]
    fn errors_after_refills_match_the_walk_and_a_failed_read_loses_nothing() {
        let mut day = Vec::new();
        crate::synth::write_itch(crate::synth::DayConfig::new(9, 5, 20_000), &mut day).unwrap();
        let straddling = crate::itch::frames(&day)
            .map(|r| r.unwrap())
            .find(|r| r.offset < BUF as u64 && r.offset + 2 + r.message.as_bytes().len() as u64 > BUF as u64)
            .expect("a frame crosses 64 KiB")
            .offset as usize;
        let far = crate::itch::frames(&day).map(|r| r.unwrap().offset as usize).find(|&o| o > 3 * BUF + 1000).unwrap();
        let mut cases: Vec<(Vec<u8>, usize)> = [straddling, far]
            .into_iter()
            .map(|at| {
                let mut bad = day.clone();
                bad[at + 1] = bad[at + 1].wrapping_add(1); // the prefix contradicts the type
                (bad, at)
            })
            .collect();
        // The cut file: its reads end at its end.
        cases.push((day[..day.len() - 3].to_vec(), day.len() - 4));
        for (bad, at) in &cases {
            let walk_err = crate::itch::frames(bad).find_map(|r| r.err()).expect("the walk refuses it").to_string();
            let mut r = ItchFileReader::new(EndsAt { bytes: bad, at: 0, cut: at + 1 });
            assert_eq!(read_to_error(&mut r, "a read ending in the frame"), walk_err);
            assert_eq!(r.next_record().unwrap_err().to_string(), walk_err, "a retry");
            for chunk in [1, 7, 4096, usize::MAX] {
                let mut r = ItchFileReader::new(Trickle(bad, chunk));
                assert_eq!(read_to_error(&mut r, &format!("chunk {chunk}")), walk_err, "chunk {chunk}");
                assert_eq!(r.next_record().unwrap_err().to_string(), walk_err, "chunk {chunk}: a retry");
            }
        }
        for (chunk, fail_at) in [(4096, BUF + 100), (7, BUF - 3), (usize::MAX, BUF), (1, 2 * BUF + 11)] {
            let mut r = ItchFileReader::new(FailsOnce { bytes: &day, at: 0, chunk, fail_at, failed: false });
            let mut walk = crate::itch::frames(&day);
            let mut failures = 0;
            loop {
                match r.next_record() {
                    Ok(Some(rec)) => {
                        let w = walk.next().unwrap().unwrap();
                        assert_eq!(
                            (rec.offset, rec.message.as_bytes()),
                            (w.offset, w.message.as_bytes()),
                            "chunk {chunk}"
                        );
                    }
                    Ok(None) => break,
                    Err(e) => {
                        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "chunk {chunk}: {e}");
                        failures += 1;
                    }
                }
            }
            assert!(walk.next().is_none() && failures == 1, "chunk {chunk}: every message once, one failure");
            assert_eq!(r.offset(), day.len() as u64, "chunk {chunk}");
        }
    }

    /// Damage deep inside a file, where the reader takes its fast path (a whole largest frame
    /// buffered): it stops at the same frame with the same error as the in-memory walk.
    #[test]
    fn damage_mid_file_is_refused_where_the_walk_refuses_it() {
        let mut day = Vec::new();
        crate::synth::write_itch(crate::synth::DayConfig::new(4, 5, 5_000), &mut day).unwrap();
        let at = crate::itch::frames(&day).nth(2_000).unwrap().unwrap().offset as usize;
        type Damage = fn(&mut [u8]);
        let damages: [(&str, Damage); 3] = [
            ("a contradicting prefix", |f| f[1] = f[1].wrapping_add(1)),
            ("an unknown type", |f| f[2] = b'Z'),
            ("a one-byte prefix", |f| f[..2].copy_from_slice(&[0, 1])),
        ];
        for (what, damage) in damages {
            let mut bad = day.clone();
            damage(&mut bad[at..]);
            let walk_err = crate::itch::frames(&bad).find_map(|r| r.err()).expect("the walk refuses it");
            let mut r = ItchFileReader::new(&bad[..]);
            let mut before = 0;
            let err = loop {
                match r.next_record() {
                    Ok(Some(_)) => before += 1,
                    Ok(None) => panic!("{what}: read to the end"),
                    Err(e) => break e.to_string(),
                }
            };
            assert_eq!(err, walk_err.to_string(), "{what}");
            assert_eq!(before, 2_000, "{what}: every message before the damage is delivered");
        }
    }
}
