//! The lines of the RDMA control channel (rdma-rc set-up and ud-mcast recovery set-up).
//!
//! ```text
//!  subscriber                                     publisher
//!  HELLO tickbus-rdma 2 <stream> <nonce_s>   -->
//!                                            <--  HELLO tickbus-rdma 2 <nonce_p> <proof_p>
//!  AUTH <proof_s>                            -->   proof = HMAC-SHA256(token, role|nonce_s|nonce_p)
//!  ---- from here on every line ends in ` mac=<hex>` over the whole transcript (transcript.rs) ----
//!  rdma-rc:                                  <--  CONFIG <mode> <slot_size> <slot_count> <stream>
//!                                                  <max_consumers> <ticks_per_ns> <consumer> <imm>
//!                                            <--  EP <publisher endpoint: this subscriber's credit word>
//!  EP <subscriber endpoint: its ring>        -->
//!  RESUME <next position needed | ->         -->
//!                                            <--  READY           (publisher QP in RTS)
//!  READY                                     -->  (subscriber QP in RTS, receives posted)
//!                                            <--  START <position> (the publishing thread took it in)
//!  ud-mcast recovery:                        <--  HISTORY <session> <slot_bytes> <slots> <qkey>
//!                                            <--  EP <publisher endpoint: the history, READ only>
//!  EP <subscriber endpoint, no memory>       -->
//!                                            <--  READY
//! ```
//! Either side may send `ERR <reason>` and close. Every parser here names what is wrong and
//! quotes at most [`QUOTE_MAX`] characters of what the peer sent: a peer's junk is never
//! echoed back whole.
use crate::ring::{LayoutError, Mode, RingConfig, MAX_CONSUMERS};

/// A control line that is not the one the handshake expects, or one of whose fields is wrong.
/// Every variant quotes at most [`QUOTE_MAX`] characters of the peer's line. Retrying does not
/// help: the peer speaks another protocol or version, or is broken.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// The line is not the one this step of the handshake expects.
    #[error("expected {expected}, got {quoted}")]
    Unexpected {
        /// The line this step expects (its form).
        expected: &'static str,
        /// What came, quoted and cut short.
        quoted: String,
    },
    /// A field of the right line does not parse.
    #[error("bad {field} in {quoted}")]
    Field {
        /// The field.
        field: &'static str,
        /// The line, quoted and cut short.
        quoted: String,
    },
    /// A field holds a value this side does not know (a mode or write mode code).
    #[error("unknown {field} {value}")]
    Unknown {
        /// The field.
        field: &'static str,
        /// Its value.
        value: usize,
    },
    /// CONFIG's ring layout is not one this build can use.
    #[error("{0}")]
    Layout(#[from] LayoutError),
    /// CONFIG names a consumer line the ring does not have.
    #[error("consumer line {consumer} of a ring with {lines}")]
    ConsumerLine {
        /// The line named.
        consumer: usize,
        /// The lines the ring has.
        lines: usize,
    },
    /// A signed line's transcript MAC is missing, malformed or wrong (what, as a sentence).
    #[error("{0}")]
    Mac(&'static str),
    /// HISTORY's geometry is not one a subscriber reads sensibly.
    #[error("history geometry {slots} slots of {slot_bytes} bytes is not one this subscriber reads")]
    Geometry {
        /// Slots.
        slots: u64,
        /// Bytes per slot.
        slot_bytes: usize,
    },
}

fn unexpected(expected: &'static str, line: &str) -> ControlError {
    ControlError::Unexpected { expected, quoted: quote(line) }
}

fn field(field: &'static str, line: &str) -> ControlError {
    ControlError::Field { field, quoted: quote(line) }
}

/// Protocol version; bumped on any change to the lines above, and on any change to the ring's
/// slot layout ([`crate::ring::layout::LAYOUT_VERSION`]): the publisher WRITEs slots into the
/// subscriber's ring, so both must lay them out alike. 3: ring layout 2.
pub const PROTOCOL_VERSION: u32 = 3;
const _: () = assert!(crate::ring::layout::LAYOUT_VERSION == 2, "bump PROTOCOL_VERSION with the ring layout");
/// The protocol's name in every hello line.
pub const MAGIC: &str = "tickbus-rdma";
/// Longest line either side accepts, in bytes (with its newline).
pub const MAX_LINE: usize = 4096;
/// Characters of a peer's line an error message quotes.
pub const QUOTE_MAX: usize = 64;

/// How a publisher places messages: plain WRITE (subscriber polls memory; relies on in-order
/// placement) or WRITE_WITH_IMM (subscriber polls its CQ; the spec guarantees the data landed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Plain RDMA WRITE: the subscriber polls its ring's memory.
    Write,
    /// RDMA WRITE_WITH_IMM: the subscriber polls its completion queue.
    WriteWithImm,
}

/// What the publisher tells a subscriber after authentication.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamConfig {
    /// The ring's layout, which the subscriber's ring copies.
    pub ring: RingConfig,
    /// The consumer line this subscriber owns in the publisher's mirror (reliable mode).
    pub consumer: usize,
    /// How the publisher delivers.
    pub write_mode: WriteMode,
}

/// Where a ud-mcast publisher's history lives and how it is laid out, as it announces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct History {
    /// The publisher run's session id (it changes when the publisher restarts).
    pub session: u64,
    /// Bytes per history slot.
    pub slot_bytes: usize,
    /// Slots in the history.
    pub slots: u64,
    /// The stream's queue key: datagrams with another are dropped by the subscriber's NIC.
    pub qkey: u32,
}

/// `line` as an error message may show it: at most [`QUOTE_MAX`] characters, escaped.
pub fn quote(line: &str) -> String {
    let mut q: String = line.chars().take(QUOTE_MAX).flat_map(char::escape_default).collect();
    if line.chars().nth(QUOTE_MAX).is_some() {
        q.push_str(&format!("... ({} bytes)", line.len()));
    }
    format!("\"{q}\"")
}

/// Bytes as lowercase hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `N` bytes from `2N` hex digits (any other input, non-ASCII included, is None).
pub fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let b = s.as_bytes();
    if b.len() != 2 * N {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = digit(b[2 * i])? << 4 | digit(b[2 * i + 1])?;
    }
    Some(out)
}

/// The subscriber's hello: protocol, version, stream and its nonce.
pub fn hello_sub(stream: u32, nonce_s: &[u8; 16]) -> String {
    format!("HELLO {MAGIC} {PROTOCOL_VERSION} {stream} {}", hex(nonce_s))
}

/// Parses the subscriber's hello: (version, stream, nonce).
pub fn parse_hello_sub(line: &str) -> Result<(u32, u32, [u8; 16]), ControlError> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 5 || f[0] != "HELLO" || f[1] != MAGIC {
        return Err(unexpected("a tickbus-rdma hello", line));
    }
    let version = f[2].parse().map_err(|_| field("version", line))?;
    let stream = f[3].parse().map_err(|_| field("stream id", line))?;
    let nonce = unhex::<16>(f[4]).ok_or_else(|| field("nonce", line))?;
    Ok((version, stream, nonce))
}

/// The publisher's hello: protocol, version, its nonce and its proof of the token.
pub fn hello_pub(nonce_p: &[u8; 16], proof_p: &[u8; 32]) -> String {
    format!("HELLO {MAGIC} {PROTOCOL_VERSION} {} {}", hex(nonce_p), hex(proof_p))
}

/// Parses the publisher's hello: (version, nonce, proof).
pub fn parse_hello_pub(line: &str) -> Result<(u32, [u8; 16], [u8; 32]), ControlError> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 5 || f[0] != "HELLO" || f[1] != MAGIC {
        return Err(unexpected("a tickbus-rdma hello", line));
    }
    let version = f[2].parse().map_err(|_| field("version", line))?;
    let nonce = unhex::<16>(f[3]).ok_or_else(|| field("nonce", line))?;
    let proof = unhex::<32>(f[4]).ok_or_else(|| field("proof", line))?;
    Ok((version, nonce, proof))
}

/// The subscriber's proof of the token.
pub fn auth(proof_s: &[u8; 32]) -> String {
    format!("AUTH {}", hex(proof_s))
}

/// Parses the subscriber's proof (None when the line is not one).
pub fn parse_auth(line: &str) -> Option<[u8; 32]> {
    unhex::<32>(line.strip_prefix("AUTH ")?)
}

/// The line that tells a subscriber the stream's layout after authentication.
pub fn config_line(c: &StreamConfig) -> String {
    let r = &c.ring;
    format!(
        "CONFIG {} {} {} {} {} {} {} {}",
        r.mode as u32,
        r.slot_size,
        r.slot_count,
        r.stream_id,
        r.max_consumers,
        r.ticks_per_ns,
        c.consumer,
        u8::from(c.write_mode == WriteMode::WriteWithImm)
    )
}

/// Parses CONFIG, refusing any field that does not fit (never truncating it) and a consumer
/// line the ring does not have.
pub fn parse_config(line: &str) -> Result<StreamConfig, ControlError> {
    const NAMES: [&str; 9] =
        ["", "mode", "slot size", "slot count", "stream id", "max consumers", "ticks_per_ns", "consumer", "write mode"];
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 9 || f[0] != "CONFIG" {
        return Err(unexpected("CONFIG", line));
    }
    let n = |i: usize| f[i].parse::<usize>().map_err(|_| field(NAMES[i], line));
    let mode = match n(1)? {
        1 => Mode::Lossy,
        2 => Mode::Reliable,
        m => return Err(ControlError::Unknown { field: "mode", value: m }),
    };
    let ring = RingConfig {
        mode,
        slot_size: n(2)?,
        slot_count: n(3)?,
        stream_id: f[4].parse::<u32>().map_err(|_| field(NAMES[4], line))?,
        max_consumers: n(5)?,
        ticks_per_ns: f[6].parse().map_err(|_| field(NAMES[6], line))?,
    };
    ring.validate()?;
    let consumer = n(7)?;
    let lines = if mode == Mode::Reliable { ring.max_consumers } else { 1 };
    if consumer >= lines.min(MAX_CONSUMERS) {
        return Err(ControlError::ConsumerLine { consumer, lines });
    }
    let write_mode = match n(8)? {
        0 => WriteMode::Write,
        1 => WriteMode::WriteWithImm,
        m => return Err(ControlError::Unknown { field: "write mode", value: m }),
    };
    Ok(StreamConfig { ring, consumer, write_mode })
}

/// `RESUME <position>` (a reliable subscriber reconnecting: the next position it needs) or
/// `RESUME -` (start wherever the publisher says).
pub fn resume_line(next: Option<u64>) -> String {
    match next {
        Some(p) => format!("RESUME {p}"),
        None => "RESUME -".to_owned(),
    }
}

/// Parses the subscriber's resume line: the position to resume from, or None for a fresh start.
pub fn parse_resume(line: &str) -> Result<Option<u64>, ControlError> {
    match line.strip_prefix("RESUME ") {
        Some("-") => Ok(None),
        Some(p) => p.parse().map(Some).map_err(|_| field("RESUME position", line)),
        None => Err(unexpected("RESUME", line)),
    }
}

/// Parses the publisher's start line: the position the subscriber's ring starts at.
pub fn parse_start(line: &str) -> Result<u64, ControlError> {
    line.strip_prefix("START ").and_then(|p| p.parse().ok()).ok_or_else(|| unexpected("START <position>", line))
}

/// The line that tells a ud-mcast subscriber where the publisher's history is.
pub fn history_line(h: &History) -> String {
    format!("HISTORY {} {} {} {}", h.session, h.slot_bytes, h.slots, h.qkey)
}

/// Parses HISTORY, refusing a geometry no subscriber could READ sensibly.
pub fn parse_history(line: &str) -> Result<History, ControlError> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let bad = || unexpected("HISTORY <session> <slot_bytes> <slots> <qkey>", line);
    if f.len() != 5 || f[0] != "HISTORY" {
        return Err(bad());
    }
    let h = History {
        session: f[1].parse().map_err(|_| bad())?,
        slot_bytes: f[2].parse().map_err(|_| bad())?,
        slots: f[3].parse().map_err(|_| bad())?,
        qkey: f[4].parse().map_err(|_| bad())?,
    };
    let sane = h.slots > 0
        && h.slots <= 1 << 24
        && (64..=1 << 20).contains(&h.slot_bytes)
        && h.slot_bytes.is_multiple_of(64)
        && (h.slot_bytes as u64).checked_mul(h.slots).is_some();
    if !sane {
        return Err(ControlError::Geometry { slots: h.slots, slot_bytes: h.slot_bytes });
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hellos_config_resume_and_history_round_trip_and_reject_junk() {
        let n = [0xAB; 16];
        assert_eq!(parse_hello_sub(&hello_sub(7, &n)).unwrap(), (PROTOCOL_VERSION, 7, n));
        let m = [0xCD; 32];
        assert_eq!(parse_hello_pub(&hello_pub(&n, &m)).unwrap(), (PROTOCOL_VERSION, n, m));
        assert_eq!(parse_auth(&auth(&m)), Some(m));
        assert!(parse_hello_sub("GET / HTTP/1.1").unwrap_err().to_string().contains("expected a tickbus-rdma hello"));
        let c = StreamConfig {
            ring: RingConfig { ticks_per_ns: 2.596, ..RingConfig::for_payload(Mode::Reliable, 9, 64, 256) },
            consumer: 0,
            write_mode: WriteMode::WriteWithImm,
        };
        assert_eq!(parse_config(&config_line(&c)).unwrap(), c);
        assert!(parse_config("CONFIG 1 100 3 1 1 1.0 0 0").is_err(), "invalid geometry is refused");
        assert_eq!(parse_resume(&resume_line(Some(42))), Ok(Some(42)));
        assert_eq!(parse_resume(&resume_line(None)), Ok(None));
        assert_eq!(parse_start("START 9"), Ok(9));
        let h = History { session: 5, slot_bytes: 4160, slots: 1024, qkey: 77 };
        assert_eq!(parse_history(&history_line(&h)), Ok(h));
        assert!(parse_history("HISTORY 5 4160 0 1").is_err());
        assert!(parse_history("HISTORY 5 4160 18446744073709551615 1").is_err());
    }

    #[test]
    fn quotes_are_short_escaped_and_hex_refuses_non_ascii() {
        let q = quote(&("\u{1b}[31m".to_owned() + &"x".repeat(500)));
        assert!(q.len() < 120 && q.contains("\\u{1b}") && q.contains("(505 bytes)"), "{q}");
        assert_eq!(unhex::<2>("a€"), None);
        assert_eq!(unhex::<2>("0aFf"), Some([0x0a, 0xff]));
    }
}
