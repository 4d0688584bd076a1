//! A venue's whole-book service (NASDAQ calls its own GLIMPSE): on a TCP connection the venue
//! sends its book as it stands after a session's messages `1..next`, and closes. A feed handler
//! that lost messages for good (both lines missed them and nobody resent them: a `FeedGap`)
//! takes one, so its book is whole again from `next` on ([`super::repair`]).
//!
//! The book travels as tickbus snapshot chunks ([`SnapshotOrders`], the format `tickbus
//! snapshot` and the venue's snapshot stream use) with `as_of` = the session sequence of the
//! first message *not* in it, back to back, nothing else; the end of the connection ends it.
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

/// The bytes of `book`, which holds every message of the session before `next`: what the
/// service sends one client.
pub fn encode(book: &OrderBook, next: u64, out: &mut Vec<u8>) {
    out.clear();
    for c in book.snapshot_chunks(next, 0, 0) {
        out.extend_from_slice(c.as_bytes());
    }
}

/// Loads a glimpse's `bytes` into `book` (emptied first), refusing one of more than
/// `max_orders` orders; returns the session sequence it goes on from. On `Err` the book is
/// empty.
pub fn decode(bytes: &[u8], book: &mut OrderBook, max_orders: u64) -> Result<u64, GlimpseError> {
    let r = load(bytes, book, max_orders);
    if r.is_err() {
        book.clear();
    }
    r
}

fn load(bytes: &[u8], book: &mut OrderBook, max_orders: u64) -> Result<u64, GlimpseError> {
    book.clear();
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
            Step::Complete(l) if (i + 1) * SnapshotOrders::LEN == bytes.len() => return Ok(l.as_of),
            Step::Complete(_) => {
                return Err(GlimpseError::Trailing { bytes: bytes.len() - (i + 1) * SnapshotOrders::LEN })
            }
            // A glimpse starts at its first chunk: one that does not is damaged.
            Step::Waiting => return Err(GlimpseError::NoStart),
            Step::Partial => {}
        }
    }
    Err(GlimpseError::Short { bytes: bytes.len() })
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

    #[test]
    fn a_book_goes_over_and_comes_back_the_same_with_its_sequence() {
        let book = book_after(3_000);
        assert!(book.resting_orders() > 16, "more than one chunk");
        let mut bytes = Vec::new();
        encode(&book, 3_001, &mut bytes);
        let mut got = OrderBook::with_capacity(1 << 12, 64);
        assert_eq!(decode(&bytes, &mut got, 1 << 20).unwrap(), 3_001);
        assert_eq!(got.resting_orders(), book.resting_orders());
        assert_eq!(got.digest(), book.digest());
    }

    #[test]
    fn a_glimpse_cut_short_or_damaged_or_too_large_is_refused_and_leaves_no_book() {
        let book = book_after(3_000);
        let mut bytes = Vec::new();
        encode(&book, 3_001, &mut bytes);
        let mut got = OrderBook::with_capacity(1 << 12, 64);
        // One chunk short: the smallest cut that still parses chunk by chunk.
        let cut = &bytes[..bytes.len() - SnapshotOrders::LEN];
        assert!(matches!(decode(cut, &mut got, 1 << 20), Err(GlimpseError::Short { .. })));
        assert_eq!(got.resting_orders(), 0);
        // Half a chunk short.
        assert!(matches!(decode(&bytes[..bytes.len() - 10], &mut got, 1 << 20), Err(GlimpseError::Short { .. })));
        // Without its first chunk.
        assert!(matches!(decode(&bytes[SnapshotOrders::LEN..], &mut got, 1 << 20), Err(GlimpseError::NoStart)));
        // Nothing at all.
        assert!(matches!(decode(&[], &mut got, 1 << 20), Err(GlimpseError::Short { bytes: 0 })));
        // A chunk of another message type.
        let mut other = bytes.clone();
        other[0] ^= 0x7f;
        assert!(matches!(decode(&other, &mut got, 1 << 20), Err(GlimpseError::NotAChunk { index: 0 })));
        // A byte of an order's count changed.
        let mut bad = bytes.clone();
        bad[SnapshotOrders::LEN + 60] ^= 0x40;
        assert!(decode(&bad, &mut got, 1 << 20).is_err());
        assert_eq!(got.resting_orders(), 0);
        // Trailing bytes after the last chunk.
        let mut long = bytes.clone();
        long.extend_from_slice(&bytes[..SnapshotOrders::LEN]);
        assert!(
            matches!(decode(&long, &mut got, 1 << 20), Err(GlimpseError::Trailing { bytes }) if bytes == SnapshotOrders::LEN)
        );
        // The first chunk again part-way: a second snapshot is not taken for the first.
        let mut twice = bytes[..SnapshotOrders::LEN].to_vec();
        twice.extend_from_slice(&bytes);
        assert!(matches!(decode(&twice, &mut got, 1 << 20), Err(GlimpseError::Restarted { index: 1 })));
        assert_eq!(got.resting_orders(), 0);
        // A book that says it lost messages.
        let mut lossy = Vec::new();
        for c in book.snapshot_chunks(3_001, 5, 0) {
            lossy.extend_from_slice(c.as_bytes());
        }
        assert!(matches!(decode(&lossy, &mut got, 1 << 20), Err(GlimpseError::Lossy { lost: 5 })));
        // More orders than the limit.
        let limit = book.resting_orders() as u64 - 1;
        assert!(matches!(decode(&bytes, &mut got, limit), Err(GlimpseError::Damaged(SnapshotError::TooLarge { .. }))));
        assert_eq!(got.resting_orders(), 0);
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
        encode(&book, 2_001, &mut bytes);
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
