//! A venue's whole-book service (NASDAQ calls its own GLIMPSE): on a TCP connection the venue
//! sends its book as it stands after a session's messages `1..next`, and closes. A feed handler
//! that lost messages for good (both lines missed them and nobody resent them: a `FeedGap`)
//! takes one, so its book is whole again from `next` on ([`super::repair`]).
//!
//! The book travels as a 16-byte header (`TBGL`, a version, a zero byte, the MoldUDP64
//! session it is of) and then tickbus snapshot chunks ([`SnapshotOrders`], the format `tickbus
//! snapshot` and the venue's snapshot stream use) with `as_of` = the session sequence of the
//! first message *not* in it, back to back, nothing else; the end of the connection ends it.
//! The session is what makes a sequence mean something: a venue restarted into a new session
//! serves a book whose sequences are of that session, and a feed following the old one must
//! not swap it in (a book of another session at a sequence past the loss would otherwise be
//! taken, and be wrong for every order).
//! (NASDAQ's GLIMPSE sends ITCH add-order messages over SoupBinTCP; a real venue's service
//! needs an adapter into a book, which this format already is.) The loader checks that the
//! chunks are one snapshot, whole, in order; anything short or damaged is refused with what
//! was wrong: never half a book.
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use tickbus_codecs::book::{OrderBook, SnapshotError, SnapshotLoader, Step};
use tickbus_codecs::md::SnapshotOrders;
use tickbus_codecs::Message;
use zerocopy::IntoBytes;

/// Why a glimpse was not taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GlimpseError {
    /// The service could not be reached or stopped sending.
    #[error("the venue's book service at {addr}: {why}")]
    Io {
        /// The service's address.
        addr: SocketAddr,
        /// What failed.
        why: std::io::Error,
    },
    /// It sent more than the limit (a hostile or broken service, or a book larger than this
    /// feed was built for).
    #[error("the venue's book service sent more than {limit} bytes (more orders than this feed takes): refused")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// It closed without sending anything.
    #[error("the venue's book service at {addr} closed without sending anything: it is busy (it serves a few clients at once), or this host is not in its allow-list (`mold-server --allow`)")]
    Empty {
        /// The service's address.
        addr: SocketAddr,
    },
    /// It sent something that is not one whole snapshot.
    #[error("the venue's book came damaged: {0}")]
    Damaged(#[from] SnapshotError),
    /// The bytes do not start with a glimpse's header: not a tickbus venue's book service.
    #[error("the venue's book service sent something that is not a tickbus glimpse (no `TBGL` header): does --glimpse name the venue's book service (`mold-server --glimpse`)?")]
    NotAGlimpse,
    /// A glimpse of a version this build does not read (or with its reserved byte set, which a
    /// later version may use).
    #[error("the venue's book service speaks glimpse version {found} (reserved byte {reserved}); this feed reads version {VERSION} with 0 there: run a venue and feed of the same release")]
    Version {
        /// The version found.
        found: u8,
        /// The reserved byte found.
        reserved: u8,
    },
    /// A book of another MoldUDP64 session than the one the feed follows: the venue restarted
    /// into a new session, or the address names another venue's service.
    #[error("the venue's book is of session {:?}, but the feed follows session {:?}: the venue restarted into a new session, or --glimpse names another venue's service", String::from_utf8_lossy(got), String::from_utf8_lossy(want))]
    OtherSession {
        /// The book's session.
        got: [u8; 10],
        /// The session followed.
        want: [u8; 10],
    },
    /// A chunk did not parse as a snapshot chunk (a wrong type, version or length).
    #[error("the venue's book came damaged: its chunk {index} is not a snapshot chunk")]
    NotAChunk {
        /// The chunk's index in what was sent.
        index: usize,
    },
    /// The first chunk was not a snapshot's first.
    #[error("the venue's book came damaged: it does not start with a snapshot's first chunk")]
    NoStart,
    /// A second snapshot started before the first ended (a glimpse is one snapshot).
    #[error("the venue's book came damaged: a second snapshot starts at its chunk {index}, before the first ended")]
    Restarted {
        /// The chunk's index in what was sent.
        index: usize,
    },
    /// The book says its maker lost messages before it (a venue's own book never does).
    #[error("the venue's book says {lost} messages are missing from it: refused")]
    Lossy {
        /// Messages it says it lost.
        lost: u64,
    },
    /// Bytes followed the snapshot's last chunk.
    #[error("the venue's book came with {bytes} bytes after its last chunk: refused")]
    Trailing {
        /// Bytes after the last chunk.
        bytes: usize,
    },
    /// The connection ended before the snapshot did (or it was not a whole number of chunks).
    #[error("the venue's book ended after {bytes} bytes, in the middle of a snapshot: the service closed early")]
    Short {
        /// Bytes received.
        bytes: usize,
    },
}

/// The first bytes of a glimpse.
const MAGIC: [u8; 4] = *b"TBGL";
/// The glimpse format's version; a change to the header or the chunks makes a new one.
pub const VERSION: u8 = 1;
/// The header's length: magic, version, a zero byte, the session.
pub const HEADER_LEN: usize = 16;

/// What a loaded glimpse is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Glimpse {
    /// The MoldUDP64 session whose messages the book holds.
    pub session: [u8; 10],
    /// The session sequence of the first message not in the book: the feed goes on from it.
    pub next: u64,
}

/// The bytes of `book`, which holds every message of `session` before `next`: what the
/// service sends one client.
pub fn encode(book: &OrderBook, session: &[u8; 10], next: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&[VERSION, 0]);
    out.extend_from_slice(session);
    for c in book.snapshot_chunks(next, 0, 0) {
        out.extend_from_slice(c.as_bytes());
    }
}

/// Loads a glimpse's `bytes` into `book` (emptied first), refusing one of more than
/// `max_orders` orders, and one of another session than `follows` (None: the feed follows none
/// yet, any is taken); says what it is of. On `Err` the book is empty.
pub fn decode(
    bytes: &[u8],
    book: &mut OrderBook,
    max_orders: u64,
    follows: Option<&[u8; 10]>,
) -> Result<Glimpse, GlimpseError> {
    let r = load(bytes, book, max_orders, follows);
    if r.is_err() {
        book.clear();
    }
    r
}

fn load(
    bytes: &[u8],
    book: &mut OrderBook,
    max_orders: u64,
    follows: Option<&[u8; 10]>,
) -> Result<Glimpse, GlimpseError> {
    book.clear();
    // Even a few bytes that cannot begin the magic are not a glimpse (not one cut short).
    if !bytes.iter().zip(MAGIC).all(|(b, m)| *b == m) {
        return Err(GlimpseError::NotAGlimpse);
    }
    let Some((head, bytes)) = bytes.split_first_chunk::<HEADER_LEN>() else {
        return Err(GlimpseError::Short { bytes: bytes.len() });
    };
    if head[4] != VERSION || head[5] != 0 {
        return Err(GlimpseError::Version { found: head[4], reserved: head[5] });
    }
    let session: [u8; 10] = head[6..].try_into().expect("16 - 6 bytes");
    if let Some(want) = follows.filter(|w| **w != session) {
        return Err(GlimpseError::OtherSession { got: session, want: *want });
    }
    let mut loader = SnapshotLoader::with_limit(max_orders);
    let whole = bytes.len() - bytes.len() % SnapshotOrders::LEN;
    for (i, c) in bytes[..whole].chunks_exact(SnapshotOrders::LEN).enumerate() {
        let chunk = SnapshotOrders::parse(c).map_err(|_| GlimpseError::NotAChunk { index: i })?;
        let step = loader.offer(book, chunk)?;
        if loader.abandoned() > 0 {
            // The loader takes a new first chunk as a new snapshot; a glimpse is one.
            return Err(GlimpseError::Restarted { index: i });
        }
        match step {
            Step::Complete(l) if l.lost != 0 => return Err(GlimpseError::Lossy { lost: l.lost }),
            // Anything after the last chunk is not part of a glimpse.
            Step::Complete(l) if (i + 1) * SnapshotOrders::LEN == bytes.len() => {
                return Ok(Glimpse { session, next: l.as_of })
            }
            Step::Complete(_) => {
                return Err(GlimpseError::Trailing { bytes: bytes.len() - (i + 1) * SnapshotOrders::LEN })
            }
            // A glimpse starts at its first chunk: one that does not is damaged.
            Step::Waiting => return Err(GlimpseError::NoStart),
            Step::Partial => {}
        }
    }
    Err(GlimpseError::Short { bytes: HEADER_LEN + bytes.len() })
}

/// Sends `bytes` (from [`encode`]) to one client, all within `timeout` (a client that reads
/// slowly, or not at all, must not hold the venue's service: the deadline is for the whole
/// book, not each write).
pub fn serve(mut client: TcpStream, bytes: &[u8], timeout: Duration) -> std::io::Result<()> {
    let deadline = Instant::now() + timeout;
    client.set_nodelay(true)?;
    let mut sent = 0;
    while sent < bytes.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "the client did not take the book in time"));
        }
        client.set_write_timeout(Some(left))?;
        let end = bytes.len().min(sent + 64 * 1024);
        match client.write(&bytes[sent..end]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    client.shutdown(std::net::Shutdown::Write)
}

/// Takes a glimpse from the service at `addr`: connects, reads to the end (at most
/// `max_bytes`, all within `timeout`) into `buf` (cleared first).
pub fn fetch(addr: SocketAddr, timeout: Duration, max_bytes: usize, buf: &mut Vec<u8>) -> Result<(), GlimpseError> {
    let io = |why| GlimpseError::Io { addr, why };
    let deadline = Instant::now() + timeout;
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(io)?;
    buf.clear();
    let mut block = [0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no whole book within {timeout:?}"),
            )));
        }
        s.set_read_timeout(Some(left)).map_err(io)?;
        let n = match s.read(&mut block) {
            Ok(0) if buf.is_empty() => return Err(GlimpseError::Empty { addr }),
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        };
        if buf.len() + n > max_bytes {
            return Err(GlimpseError::TooLarge { limit: max_bytes });
        }
        buf.extend_from_slice(&block[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickbus_codecs::itch::frames;
    use tickbus_codecs::synth::{write_itch, DayConfig};

    /// A book of a generated day's first `n` messages.
    fn book_after(n: usize) -> OrderBook {
        let mut day = Vec::new();
        write_itch(DayConfig::new(3, 5, 4_000), &mut day).unwrap();
        let mut book = OrderBook::with_capacity(1 << 12, 64);
        for f in frames(&day).take(n) {
            let _ = book.apply(&f.unwrap().message);
        }
        book
    }

    const S: &[u8; 10] = b"000000001A";

    #[test]
    fn a_book_goes_over_and_comes_back_the_same_with_its_session_and_sequence() {
        let book = book_after(3_000);
        assert!(book.resting_orders() > 16, "more than one chunk");
        let mut bytes = Vec::new();
        encode(&book, S, 3_001, &mut bytes);
        let mut got = OrderBook::with_capacity(1 << 12, 64);
        assert_eq!(decode(&bytes, &mut got, 1 << 20, Some(S)).unwrap(), Glimpse { session: *S, next: 3_001 });
        assert_eq!(got.resting_orders(), book.resting_orders());
        assert_eq!(got.digest(), book.digest());
        // A feed that follows no session yet takes any.
        assert_eq!(decode(&bytes, &mut got, 1 << 20, None).unwrap().session, *S);
    }

    #[test]
    fn a_book_of_another_session_or_not_a_glimpse_is_refused_before_it_is_loaded() {
        let book = book_after(3_000);
        let mut bytes = Vec::new();
        encode(&book, S, 3_001, &mut bytes);
        let mut got = OrderBook::with_capacity(1 << 12, 64);
        // The smallest difference: one character of the session.
        let e = decode(&bytes, &mut got, 1 << 20, Some(b"000000001B")).unwrap_err();
        assert!(matches!(e, GlimpseError::OtherSession { got: g, want: w } if g == *S && &w == b"000000001B"), "{e}");
        assert!(e.to_string().contains("\"000000001A\"") && e.to_string().contains("restarted"), "{e}");
        assert_eq!(got.resting_orders(), 0);
        let mut v2 = bytes.clone();
        v2[4] = 2;
        let e = decode(&v2, &mut got, 1 << 20, Some(S)).unwrap_err();
        assert!(matches!(e, GlimpseError::Version { found: 2, .. }) && e.to_string().contains("same release"), "{e}");
        let mut reserved = bytes.clone();
        reserved[5] = 1;
        let e = decode(&reserved, &mut got, 1 << 20, Some(S)).unwrap_err();
        assert!(matches!(e, GlimpseError::Version { found: 1, reserved: 1 }), "{e}");
        // Three bytes that cannot begin a glimpse, and three that can.
        assert!(matches!(decode(b"HTT", &mut got, 1 << 20, None), Err(GlimpseError::NotAGlimpse)));
        assert!(matches!(decode(b"TBG", &mut got, 1 << 20, None), Err(GlimpseError::Short { bytes: 3 })));
        // The chunks alone (a service of the format before the header): not a glimpse.
        assert!(matches!(decode(&bytes[HEADER_LEN..], &mut got, 1 << 20, None), Err(GlimpseError::NotAGlimpse)));
        assert!(matches!(decode(b"HTTP/1.1 400", &mut got, 1 << 20, None), Err(GlimpseError::NotAGlimpse)));
        assert!(matches!(
            decode(&bytes[..HEADER_LEN - 1], &mut got, 1 << 20, None),
            Err(GlimpseError::Short { bytes: 15 })
        ));
        assert_eq!(got.resting_orders(), 0);
    }

    #[test]
    fn a_glimpse_cut_short_or_damaged_or_too_large_is_refused_and_leaves_no_book() {
        let book = book_after(3_000);
        let mut bytes = Vec::new();
        encode(&book, S, 3_001, &mut bytes);
        let (h, c) = (HEADER_LEN, SnapshotOrders::LEN);
        let mut got = OrderBook::with_capacity(1 << 12, 64);
        let mut decode = |b: &[u8], limit| decode(b, &mut got, limit, Some(S));
        // One chunk short: the smallest cut that still parses chunk by chunk.
        assert!(matches!(decode(&bytes[..bytes.len() - c], 1 << 20), Err(GlimpseError::Short { .. })));
        // Half a chunk short.
        assert!(matches!(decode(&bytes[..bytes.len() - 10], 1 << 20), Err(GlimpseError::Short { .. })));
        // Without its first chunk.
        let mut headless = bytes[..h].to_vec();
        headless.extend_from_slice(&bytes[h + c..]);
        assert!(matches!(decode(&headless, 1 << 20), Err(GlimpseError::NoStart)));
        // Nothing at all.
        assert!(matches!(decode(&[], 1 << 20), Err(GlimpseError::Short { bytes: 0 })));
        // The header and no chunk.
        assert!(matches!(decode(&bytes[..h], 1 << 20), Err(GlimpseError::Short { bytes: 16 })));
        // A chunk of another message type.
        let mut other = bytes.clone();
        other[h] ^= 0x7f;
        assert!(matches!(decode(&other, 1 << 20), Err(GlimpseError::NotAChunk { index: 0 })));
        // A byte of an order's count changed.
        let mut bad = bytes.clone();
        bad[h + c + 60] ^= 0x40;
        assert!(decode(&bad, 1 << 20).is_err());
        // Trailing bytes after the last chunk.
        let mut long = bytes.clone();
        long.extend_from_slice(&bytes[h..h + c]);
        assert!(matches!(decode(&long, 1 << 20), Err(GlimpseError::Trailing { bytes }) if bytes == c));
        // The first chunk again part-way: a second snapshot is not taken for the first.
        let mut twice = bytes[..h + c].to_vec();
        twice.extend_from_slice(&bytes[h..]);
        assert!(matches!(decode(&twice, 1 << 20), Err(GlimpseError::Restarted { index: 1 })));
        // A book that says it lost messages.
        let mut lossy = bytes[..h].to_vec();
        for c in book.snapshot_chunks(3_001, 5, 0) {
            lossy.extend_from_slice(c.as_bytes());
        }
        assert!(matches!(decode(&lossy, 1 << 20), Err(GlimpseError::Lossy { lost: 5 })));
        // More orders than the limit.
        let limit = book.resting_orders() as u64 - 1;
        assert!(matches!(decode(&bytes, limit), Err(GlimpseError::Damaged(SnapshotError::TooLarge { .. }))));
        assert_eq!(got.resting_orders(), 0, "every refusal left the book empty");
    }

    #[test]
    fn a_client_that_does_not_read_is_given_up_at_the_deadline_for_the_whole_book() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (c, _) = l.accept().unwrap();
        // More than the sockets' buffers hold: the writes block once they are full.
        let bytes = vec![0u8; 64 << 20];
        let t = Instant::now();
        assert!(serve(c, &bytes, Duration::from_millis(300)).is_err());
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        drop(client);
    }

    #[test]
    fn fetch_takes_what_the_service_sends_and_refuses_more_than_its_limit() {
        let book = book_after(2_000);
        let mut bytes = Vec::new();
        encode(&book, S, 2_001, &mut bytes);
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let sent = bytes.clone();
        let server = std::thread::spawn(move || {
            for _ in 0..2 {
                let (c, _) = l.accept().unwrap();
                let _ = serve(c, &sent, Duration::from_secs(5));
            }
            // A service that closes at once (busy, or not allowed).
            drop(l.accept().unwrap());
        });
        let mut buf = Vec::new();
        fetch(addr, Duration::from_secs(5), 1 << 24, &mut buf).unwrap();
        assert_eq!(buf, bytes);
        let small = bytes.len() - 1;
        assert!(matches!(
            fetch(addr, Duration::from_secs(5), small, &mut buf),
            Err(GlimpseError::TooLarge { limit }) if limit == small
        ));
        let e = fetch(addr, Duration::from_secs(5), 1 << 24, &mut buf).unwrap_err();
        assert!(matches!(e, GlimpseError::Empty { .. }) && e.to_string().contains("allow"), "{e}");
        server.join().unwrap();
        // Nobody there: said, with the address.
        let e = fetch(addr, Duration::from_millis(500), 1 << 24, &mut buf).unwrap_err().to_string();
        assert!(e.contains(&addr.to_string()), "{e}");
    }
}
