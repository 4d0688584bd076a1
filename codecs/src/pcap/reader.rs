//! Reads UDP datagrams out of pcap or pcapng captures.
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddrV4;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::DataLink;

use super::CaptureError;
pub use crate::capture_format::CaptureFormat;

/// One UDP datagram: capture time (ns since the Unix epoch), addresses and payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// The packet's number in the capture (from 1).
    pub packet: u64,
    /// When it was captured (ns since the Unix epoch).
    pub ts_ns: u64,
    /// The sender's address and port.
    pub src: SocketAddrV4,
    /// The destination's address and port (the multicast group, for a feed).
    pub dst: SocketAddrV4,
    /// The UDP payload, borrowed from the reader.
    pub payload: &'a [u8],
}

/// Frames that were not IPv4/UDP datagrams, by reason: nothing is dropped silently.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Not Ethernet/IPv4 (ARP, IPv6, ...), or an undecodable frame.
    pub not_ipv4: u64,
    /// IPv4 but not UDP.
    pub not_udp: u64,
    /// IPv4 fragments (reassembly is not done; market data never fragments on a sane feed).
    pub fragments: u64,
    /// Frames cut short by the capture's snap length.
    pub truncated: u64,
    /// UDP to another port than the filter's.
    pub other_port: u64,
}

enum Inner<R: Read> {
    Pcap(PcapReader<R>),
    PcapNg { reader: PcapNgReader<R>, units_per_s: Vec<u64> },
}

/// Reads a capture one datagram at a time, reusing one buffer.
pub struct CaptureReader<R: Read> {
    inner: Inner<BufReader<R>>,
    format: CaptureFormat,
    port: Option<u16>,
    packets: u64,
    skipped: Skipped,
    frame: Vec<u8>,
}

impl<R: Read> CaptureReader<R> {
    /// Detects pcap (either byte order, micro- or nanosecond) or pcapng from the first bytes.
    pub fn new(input: R) -> Result<CaptureReader<R>, CaptureError> {
        let mut input = BufReader::with_capacity(1 << 16, input);
        let head = input.fill_buf()?;
        let mut magic = [0u8; 4];
        let n = head.len().min(4);
        magic[..n].copy_from_slice(&head[..n]);
        let bad = |e| CaptureError::Format { packet: 0, source: e };
        let (inner, format) = match CaptureFormat::detect(&magic[..n]) {
            Some(CaptureFormat::Pcap) => {
                let r = PcapReader::new(input).map_err(bad)?;
                if r.header().datalink != DataLink::ETHERNET {
                    return Err(CaptureError::LinkType(format!("{:?}", r.header().datalink)));
                }
                (Inner::Pcap(r), CaptureFormat::Pcap)
            }
            Some(CaptureFormat::PcapNg) => {
                let reader = PcapNgReader::new(input).map_err(bad)?;
                (Inner::PcapNg { reader, units_per_s: Vec::new() }, CaptureFormat::PcapNg)
            }
            None => return Err(CaptureError::NotACapture(magic)),
        };
        Ok(CaptureReader { inner, format, port: None, packets: 0, skipped: Skipped::default(), frame: Vec::new() })
    }

    /// Keep only datagrams to this UDP destination port (others are counted as `other_port`).
    pub fn with_port(mut self, port: u16) -> CaptureReader<R> {
        self.port = Some(port);
        self
    }

    /// Which container the capture is.
    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// Frames read so far, datagrams or not.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Frames skipped so far, by why (not IPv4/UDP, fragments, other ports).
    pub fn skipped(&self) -> Skipped {
        self.skipped
    }

    /// The next UDP datagram, `Ok(None)` at the end, or an error naming the packet number.
    pub fn next_datagram(&mut self) -> Result<Option<Datagram<'_>>, CaptureError> {
        loop {
            let Some(ts_ns) = self.next_frame()? else { return Ok(None) };
            if let Some((src, dst, range)) = classify(&self.frame, self.port, &mut self.skipped) {
                return Ok(Some(Datagram { packet: self.packets, ts_ns, src, dst, payload: &self.frame[range] }));
            }
        }
    }

    /// Copies the next Ethernet frame into `self.frame`; returns its time.
    fn next_frame(&mut self) -> Result<Option<u64>, CaptureError> {
        let packet = self.packets + 1;
        let bad = |source| CaptureError::Format { packet, source };
        match &mut self.inner {
            Inner::Pcap(r) => {
                let Some(p) = r.next_packet() else { return Ok(None) };
                let p = p.map_err(bad)?;
                self.packets = packet;
                if (p.data.len() as u64) < u64::from(p.orig_len) {
                    self.skipped.truncated += 1;
                    self.frame.clear();
                    return Ok(Some(0));
                }
                self.frame.clear();
                self.frame.extend_from_slice(&p.data);
                Ok(Some(p.timestamp.as_nanos() as u64))
            }
            Inner::PcapNg { reader, units_per_s } => loop {
                let Some(b) = reader.next_block() else { return Ok(None) };
                match b.map_err(bad)? {
                    Block::InterfaceDescription(i) => {
                        if i.linktype != DataLink::ETHERNET {
                            return Err(CaptureError::LinkType(format!("{:?}", i.linktype)));
                        }
                        units_per_s.push(tsresol(&i.options));
                    }
                    Block::EnhancedPacket(p) => {
                        self.packets = packet;
                        // pcap-file hands back the raw timestamp as if it were nanoseconds;
                        // rescale by the interface's if_tsresol (default: microseconds).
                        let units = units_per_s.get(p.interface_id as usize).copied().unwrap_or(1_000_000);
                        let raw = p.timestamp.as_nanos();
                        let ts = (raw * 1_000_000_000 / u128::from(units.max(1))) as u64;
                        self.frame.clear();
                        if (p.data.len() as u64) < u64::from(p.original_len) {
                            self.skipped.truncated += 1;
                        } else {
                            self.frame.extend_from_slice(&p.data);
                        }
                        return Ok(Some(ts));
                    }
                    Block::SimplePacket(p) => {
                        self.packets = packet;
                        self.frame.clear();
                        self.frame.extend_from_slice(&p.data);
                        return Ok(Some(0));
                    }
                    _ => {}
                }
            },
        }
    }
}

/// Units per second from an `if_tsresol` option: 10^n, or 2^n when the top bit is set.
fn tsresol(options: &[InterfaceDescriptionOption<'_>]) -> u64 {
    for o in options {
        if let InterfaceDescriptionOption::IfTsResol(r) = o {
            let n = u32::from(r & 0x7f);
            return if r & 0x80 != 0 { 1u64.checked_shl(n).unwrap_or(0) } else { 10u64.checked_pow(n).unwrap_or(0) };
        }
    }
    1_000_000
}

/// Addresses and payload range of an IPv4/UDP frame, or None (and a count of why).
fn classify(
    frame: &[u8],
    port: Option<u16>,
    skipped: &mut Skipped,
) -> Option<(SocketAddrV4, SocketAddrV4, std::ops::Range<usize>)> {
    if frame.is_empty() {
        return None; // truncated, already counted
    }
    let Ok(p) = SlicedPacket::from_ethernet(frame) else {
        skipped.not_ipv4 += 1;
        return None;
    };
    let Some(NetSlice::Ipv4(ip)) = &p.net else {
        skipped.not_ipv4 += 1;
        return None;
    };
    if ip.header().is_fragmenting_payload() {
        skipped.fragments += 1;
        return None;
    }
    let Some(TransportSlice::Udp(udp)) = &p.transport else {
        skipped.not_udp += 1;
        return None;
    };
    if port.is_some_and(|want| want != udp.destination_port()) {
        skipped.other_port += 1;
        return None;
    }
    let src = SocketAddrV4::new(ip.header().source_addr(), udp.source_port());
    let dst = SocketAddrV4::new(ip.header().destination_addr(), udp.destination_port());
    let payload = udp.payload();
    let start = payload.as_ptr() as usize - frame.as_ptr() as usize;
    Some((src, dst, start..start + payload.len()))
}
