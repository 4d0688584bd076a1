//! What `tickbus itch inspect` counts, and how it prints it.
use std::collections::BTreeMap;

use serde::Serialize;
use tickbus_codecs::itch::ItchMessage;

/// Spec names of the type codes.
pub fn type_name(code: u8) -> &'static str {
    match code {
        b'S' => "system event",
        b'R' => "stock directory",
        b'H' => "stock trading action",
        b'Y' => "Reg SHO restriction",
        b'L' => "market participant position",
        b'V' => "MWCB decline level",
        b'W' => "MWCB status",
        b'K' => "IPO quoting period update",
        b'J' => "LULD auction collar",
        b'h' => "operational halt",
        b'A' => "add order",
        b'F' => "add order (MPID)",
        b'E' => "order executed",
        b'C' => "order executed with price",
        b'X' => "order cancel",
        b'D' => "order delete",
        b'U' => "order replace",
        b'P' => "trade (non-cross)",
        b'Q' => "cross trade",
        b'B' => "broken trade",
        b'I' => "NOII",
        b'N' => "RPII",
        b'O' => "direct listing capital raise",
        _ => "unknown",
    }
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct StockStats {
    pub locate: u16,
    pub stock: String,
    pub messages: u64,
    pub adds: u64,
    pub executions: u64,
    pub executed_shares: u64,
    pub trades: u64,
    pub traded_shares: u64,
    pub cancels: u64,
    pub deletes: u64,
    pub replaces: u64,
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct TypeCount {
    pub code: String,
    pub name: &'static str,
    pub count: u64,
}

/// Transport-level facts of a capture.
#[derive(Debug, Default, Clone, Serialize)]
pub struct CaptureStats {
    pub format: String,
    pub frames: u64,
    pub datagrams: u64,
    pub sessions: Vec<String>,
    pub heartbeats: u64,
    pub end_of_session: u64,
    pub gaps: u64,
    pub missing_messages: u64,
    pub duplicates: u64,
    pub not_mold: u64,
    pub skipped_not_ipv4: u64,
    pub skipped_not_udp: u64,
    pub skipped_fragments: u64,
    pub skipped_truncated: u64,
    pub skipped_other_port: u64,
    pub first_capture_ns: Option<u64>,
    pub last_capture_ns: Option<u64>,
}

/// Everything the inspect command reports.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub file: String,
    pub format: String,
    pub bytes: u64,
    pub messages: u64,
    pub types: Vec<TypeCount>,
    pub first_timestamp_ns: Option<u64>,
    pub last_timestamp_ns: Option<u64>,
    /// Messages per minute of the day (minute index since midnight -> count), non-empty only.
    pub per_minute: BTreeMap<u32, u64>,
    pub peak_second: Option<(String, u64)>,
    pub peak_millisecond: Option<(String, u64)>,
    pub stocks: Vec<StockStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureStats>,
    /// Set when reading stopped at malformed input; everything above counts what came before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Accumulates a report one message at a time.
#[derive(Default)]
pub struct Counter {
    types: Vec<u64>,
    stocks: Vec<StockStats>,
    messages: u64,
    first: Option<u64>,
    last: Option<u64>,
    per_second: BTreeMap<u64, u64>,
    ms: (u64, u64),
    peak_ms: (u64, u64),
}

impl Counter {
    pub fn observe(&mut self, m: &ItchMessage<'_>) {
        if self.types.is_empty() {
            self.types = vec![0; 256];
        }
        self.messages += 1;
        self.types[usize::from(m.code())] += 1;
        let ts = m.header().timestamp_ns();
        self.first.get_or_insert(ts);
        self.last = Some(ts);
        *self.per_second.entry(ts / 1_000_000_000).or_default() += 1;
        let ms = ts / 1_000_000;
        self.ms = if self.ms.0 == ms { (ms, self.ms.1 + 1) } else { (ms, 1) };
        if self.ms.1 > self.peak_ms.1 {
            self.peak_ms = self.ms;
        }
        let locate = usize::from(m.header().stock_locate.get());
        if locate == 0 {
            return; // system-wide messages
        }
        if self.stocks.len() <= locate {
            self.stocks.resize_with(locate + 1, StockStats::default);
        }
        let s = &mut self.stocks[locate];
        s.locate = locate as u16;
        s.messages += 1;
        match m {
            ItchMessage::StockDirectory(d) => s.stock = String::from_utf8_lossy(&d.stock).trim_end().to_owned(),
            ItchMessage::AddOrder(_) | ItchMessage::AddOrderMpid(_) => s.adds += 1,
            ItchMessage::OrderExecuted(e) => {
                s.executions += 1;
                s.executed_shares += u64::from(e.executed_shares.get());
            }
            ItchMessage::OrderExecutedWithPrice(e) => {
                s.executions += 1;
                s.executed_shares += u64::from(e.executed_shares.get());
            }
            ItchMessage::Trade(t) => {
                s.trades += 1;
                s.traded_shares += u64::from(t.shares.get());
            }
            ItchMessage::CrossTrade(t) => {
                s.trades += 1;
                s.traded_shares += t.shares.get();
            }
            ItchMessage::OrderCancel(_) => s.cancels += 1,
            ItchMessage::OrderDelete(_) => s.deletes += 1,
            ItchMessage::OrderReplace(_) => s.replaces += 1,
            _ => {}
        }
    }

    pub fn finish(self, file: String, format: String, bytes: u64) -> Report {
        let types = tickbus_codecs::itch::CODES
            .iter()
            .filter(|c| self.types.get(usize::from(**c)).is_some_and(|n| *n > 0))
            .map(|&c| TypeCount {
                code: (c as char).to_string(),
                name: type_name(c),
                count: self.types[usize::from(c)],
            })
            .collect();
        let mut per_minute = BTreeMap::new();
        for (s, n) in &self.per_second {
            *per_minute.entry((s / 60) as u32).or_default() += n;
        }
        let peak_second = self.per_second.iter().max_by_key(|(s, n)| (**n, std::cmp::Reverse(**s)));
        let mut stocks: Vec<StockStats> = self.stocks.into_iter().filter(|s| s.messages > 0).collect();
        for s in &mut stocks {
            if s.stock.is_empty() {
                s.stock = format!("locate {}", s.locate);
            }
        }
        stocks.sort_by_key(|s| (std::cmp::Reverse(s.messages), s.locate));
        Report {
            file,
            format,
            bytes,
            messages: self.messages,
            types,
            first_timestamp_ns: self.first,
            last_timestamp_ns: self.last,
            per_minute,
            peak_second: peak_second.map(|(s, n)| (clock(s * 1_000_000_000), *n)),
            peak_millisecond: (self.peak_ms.1 > 0).then(|| (clock(self.peak_ms.0 * 1_000_000), self.peak_ms.1)),
            stocks,
            capture: None,
            error: None,
        }
    }
}

/// `HH:MM:SS.nnnnnnnnn` since midnight.
pub fn clock(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    format!("{:02}:{:02}:{:02}.{:09}", s / 3600, s / 60 % 60, s % 60, ns % 1_000_000_000)
}

impl Report {
    /// The human-readable tables.
    pub fn render(&self, top: usize) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        let _ = writeln!(o, "{} ({}, {} bytes): {} messages", self.file, self.format, self.bytes, self.messages);
        if let (Some(f), Some(l)) = (self.first_timestamp_ns, self.last_timestamp_ns) {
            let _ = writeln!(o, "first {}  last {}", clock(f), clock(l));
        }
        if let Some(c) = &self.capture {
            let _ = writeln!(
                o,
                "capture: {} frames, {} datagrams, sessions {:?}, {} heartbeats, {} end-of-session, {} gaps ({} messages missing), {} duplicates, {} not MoldUDP64",
                c.frames, c.datagrams, c.sessions, c.heartbeats, c.end_of_session, c.gaps, c.missing_messages, c.duplicates, c.not_mold
            );
            let _ = writeln!(
                o,
                "skipped frames: {} not IPv4, {} not UDP, {} fragments, {} truncated, {} other port",
                c.skipped_not_ipv4, c.skipped_not_udp, c.skipped_fragments, c.skipped_truncated, c.skipped_other_port
            );
        }
        let _ = writeln!(o, "\ntype  {:<30} {:>12}", "name", "count");
        for t in &self.types {
            let _ = writeln!(o, "{:<5} {:<30} {:>12}", t.code, t.name, t.count);
        }
        let _ = writeln!(
            o,
            "\n{:<10} {:>10} {:>10} {:>10} {:>12} {:>8} {:>12} {:>9} {:>9} {:>9}",
            "stock",
            "messages",
            "adds",
            "execs",
            "exec shares",
            "trades",
            "trade shares",
            "cancels",
            "deletes",
            "replaces"
        );
        for s in self.stocks.iter().take(top) {
            let _ = writeln!(
                o,
                "{:<10} {:>10} {:>10} {:>10} {:>12} {:>8} {:>12} {:>9} {:>9} {:>9}",
                s.stock,
                s.messages,
                s.adds,
                s.executions,
                s.executed_shares,
                s.trades,
                s.traded_shares,
                s.cancels,
                s.deletes,
                s.replaces
            );
        }
        if self.stocks.len() > top {
            let _ = writeln!(o, "... and {} more stocks (--top N, or --json for all)", self.stocks.len() - top);
        }
        let _ = writeln!(o, "\nrate profile (messages per 30 minutes)");
        let mut halves: BTreeMap<u32, u64> = BTreeMap::new();
        for (m, n) in &self.per_minute {
            *halves.entry(m / 30).or_default() += n;
        }
        let max = halves.values().copied().max().unwrap_or(1).max(1);
        for (h, n) in &halves {
            let bar = "#".repeat((n * 50 / max) as usize);
            let _ = writeln!(o, "{:02}:{:02} {:>12} {bar}", h / 2, h % 2 * 30, n);
        }
        if let Some((at, n)) = &self.peak_second {
            let _ = writeln!(o, "peak second      {n:>9} messages at {}", &at[..8]);
        }
        if let Some((at, n)) = &self.peak_millisecond {
            let _ = writeln!(o, "peak millisecond {n:>9} messages at {}", &at[..12]);
        }
        if let Some(e) = &self.error {
            let _ = writeln!(o, "\nSTOPPED: {e}");
        }
        o
    }
}
