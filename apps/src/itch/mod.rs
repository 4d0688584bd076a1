//! `tickbus itch ...`: inspect ITCH files and MoldUDP64 captures; generate synthetic days.
mod stats;

use std::fs::File;
use std::io::{BufReader, BufWriter, Read};
use std::path::Path;

use tickbus_codecs::itch::{parse, ItchFileReader};
use tickbus_codecs::moldudp64::{Arrival, GapTracker, Packet, PacketKind};
use tickbus_codecs::pcap::{CaptureError, CaptureFormat, CaptureReader, Endpoints};
use tickbus_codecs::synth::{write_itch, write_pcap, DayConfig};

pub use stats::{Counter, Report};

fn open(path: &Path) -> Result<File, String> {
    File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))
}

/// Reads the file (format detected from its first bytes) into a report. Malformed input stops
/// the count and is named in `report.error`; what came before is still counted.
pub fn report(path: &Path, port: Option<u16>) -> Result<Report, String> {
    let bytes = std::fs::metadata(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?.len();
    let name = path.display().to_string();
    let mut head = [0u8; 4];
    let n = open(path)?.read(&mut head).map_err(|e| e.to_string())?;
    let is_capture = CaptureFormat::detect(&head[..n]).is_some();
    let mut counter = Counter::default();
    if !is_capture {
        let mut r = ItchFileReader::new(BufReader::new(open(path)?));
        let error = loop {
            match r.next_record() {
                Ok(Some(rec)) => counter.observe(&rec.message),
                Ok(None) => break None,
                Err(e) => break Some(format!("{e} (ITCH file)")),
            }
        };
        let mut rep = counter.finish(name, "ITCH 5.0 file".into(), bytes);
        rep.error = error;
        return Ok(rep);
    }
    let mut r = CaptureReader::new(BufReader::new(open(path)?)).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(p) = port {
        r = r.with_port(p);
    }
    let mut cap = stats::CaptureStats { format: format!("{:?}", r.format()), ..Default::default() };
    let mut trackers: Vec<([u8; 10], GapTracker)> = Vec::new();
    let error = loop {
        let d = match r.next_datagram() {
            Ok(Some(d)) => d,
            Ok(None) => break None,
            Err(e) => break Some(e.to_string()),
        };
        cap.datagrams += 1;
        cap.first_capture_ns.get_or_insert(d.ts_ns);
        cap.last_capture_ns = Some(d.ts_ns);
        let Ok(p) = Packet::parse(d.payload) else {
            cap.not_mold += 1;
            continue;
        };
        let session = p.header.session;
        let i = match trackers.iter().position(|(s, _)| *s == session) {
            Some(i) => i,
            None => {
                trackers.push((session, GapTracker::new()));
                cap.sessions.push(String::from_utf8_lossy(&session).into_owned());
                trackers.len() - 1
            }
        };
        match p.kind() {
            PacketKind::Heartbeat => cap.heartbeats += 1,
            PacketKind::EndOfSession => {
                cap.end_of_session += 1;
                continue;
            }
            PacketKind::Messages => {}
        }
        let (from, to) = match trackers[i].1.on_packet(&p) {
            Arrival::Duplicate => {
                cap.duplicates += 1;
                continue;
            }
            Arrival::InOrder { from, to } => (from, to),
            Arrival::Gap { missing_from, missing_to, from, to } => {
                cap.gaps += 1;
                cap.missing_messages += missing_to - missing_from;
                (from, to)
            }
        };
        let mut bad = None;
        for (seq, m) in p.messages().filter(|(s, _)| (from..to).contains(s)) {
            match parse(m, 0) {
                Ok(m) => counter.observe(&m),
                Err(e) => {
                    bad = Some(format!("packet {}, session sequence {seq}: {e}", d.packet));
                    break;
                }
            }
        }
        if bad.is_some() {
            break bad;
        }
    };
    let s = r.skipped();
    cap.frames = r.packets();
    (cap.skipped_not_ipv4, cap.skipped_not_udp, cap.skipped_fragments, cap.skipped_truncated, cap.skipped_other_port) =
        (s.not_ipv4, s.not_udp, s.fragments, s.truncated, s.other_port);
    let mut rep = counter.finish(name, format!("{} capture of MoldUDP64", cap.format), bytes);
    rep.capture = Some(cap);
    rep.error = error;
    Ok(rep)
}

pub fn inspect(path: &Path, json: bool, top: usize, port: Option<u16>) -> Result<(), String> {
    let rep = report(path, port)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&rep).map_err(|e| e.to_string())?);
    } else {
        print!("{}", rep.render(top));
    }
    match rep.error {
        Some(e) => Err(format!("{} is malformed after {} messages: {e}", path.display(), rep.messages)),
        None => Ok(()),
    }
}

pub fn generate(itch: Option<&Path>, pcap: Option<&Path>, seed: u64, stocks: u16, messages: u64) -> Result<(), String> {
    if itch.is_none() && pcap.is_none() {
        return Err("nothing to write: give --itch FILE and/or --pcap FILE".into());
    }
    let cfg = DayConfig::new(seed, stocks, messages);
    let create =
        |p: &Path| File::create(p).map(BufWriter::new).map_err(|e| format!("cannot create {}: {e}", p.display()));
    if let Some(p) = itch {
        let n = write_itch(cfg, create(p)?).map_err(|e| format!("writing {}: {e}", p.display()))?;
        println!("wrote {} ({n} ITCH messages, seed {seed}, {stocks} stocks)", p.display());
    }
    if let Some(p) = pcap {
        let s = write_pcap(cfg, create(p)?, Endpoints::default())
            .map_err(|e: CaptureError| format!("writing {}: {e}", p.display()))?;
        println!("wrote {} ({} messages in {} MoldUDP64 datagrams, seed {seed})", p.display(), s.messages, s.packets);
    }
    Ok(())
}
