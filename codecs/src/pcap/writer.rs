//! Writes captures of MoldUDP64 datagrams (pcap, nanosecond timestamps, Ethernet/IPv4/UDP).
use std::io::Write;
use std::net::SocketAddrV4;
use std::time::Duration;

use etherparse::PacketBuilder;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};

use super::CaptureError;

/// Who sends to whom: a feed is one source multicasting to a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoints {
    /// The source's Ethernet address.
    pub src_mac: [u8; 6],
    /// The destination's Ethernet address (a multicast MAC for a group).
    pub dst_mac: [u8; 6],
    /// The source's address and port.
    pub src: SocketAddrV4,
    /// The destination's address and port.
    pub dst: SocketAddrV4,
}

impl Default for Endpoints {
    /// 10.0.0.1:40000 to multicast group 233.54.12.1:26477 (with its 01:00:5e MAC).
    fn default() -> Endpoints {
        Endpoints {
            src_mac: [0x02, 0, 0, 0, 0, 1],
            dst_mac: [0x01, 0x00, 0x5e, 0x36, 0x0c, 0x01],
            src: SocketAddrV4::new([10, 0, 0, 1].into(), 40_000),
            dst: SocketAddrV4::new([233, 54, 12, 1].into(), 26_477),
        }
    }
}

/// Writes one datagram per call.
pub struct MoldPcapWriter<W: Write> {
    pcap: PcapWriter<W>,
    at: Endpoints,
    frame: Vec<u8>,
}

impl<W: Write> MoldPcapWriter<W> {
    /// A writer of an Ethernet, nanosecond-resolution pcap to `out`, framing every datagram between
    /// `at`'s endpoints.
    pub fn new(out: W, at: Endpoints) -> Result<MoldPcapWriter<W>, CaptureError> {
        let header =
            PcapHeader { datalink: DataLink::ETHERNET, ts_resolution: TsResolution::NanoSecond, ..Default::default() };
        let pcap = PcapWriter::with_header(out, header).map_err(CaptureError::Write)?;
        Ok(MoldPcapWriter { pcap, at, frame: Vec::with_capacity(1_600) })
    }

    /// Writes `payload` as a UDP datagram captured at `ts_ns` (ns since the Unix epoch).
    pub fn write(&mut self, ts_ns: u64, payload: &[u8]) -> Result<(), CaptureError> {
        let b = PacketBuilder::ethernet2(self.at.src_mac, self.at.dst_mac)
            .ipv4(self.at.src.ip().octets(), self.at.dst.ip().octets(), 32)
            .udp(self.at.src.port(), self.at.dst.port());
        self.frame.clear();
        b.write(&mut self.frame, payload).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let p = PcapPacket::new(Duration::from_nanos(ts_ns), self.frame.len() as u32, &self.frame);
        self.pcap.write_packet(&p).map_err(CaptureError::Write)?;
        Ok(())
    }

    /// Flushes and hands back the output.
    pub fn finish(self) -> Result<W, CaptureError> {
        let mut w = self.pcap.into_writer();
        w.flush()?;
        Ok(w)
    }
}
