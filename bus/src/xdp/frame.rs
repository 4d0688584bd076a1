//! The frames an AF_XDP socket hands over are whole Ethernet frames: no kernel stack checked
//! them. [`parse_udp`] takes one apart (Ethernet, up to two VLAN tags, IPv4, UDP) with
//! `etherparse`'s slicing, which checks every length against the frame, and adds the checks it
//! leaves to the caller: the IPv4 header checksum, fragments (never reassembled: market data is
//! never fragmented on a sane feed), and, when asked, the UDP checksum. Every refusal is a
//! [`FrameError`] naming what was wrong, counted by the caller; nothing here panics or allocates.
use std::net::SocketAddrV4;

use etherparse::{LinkExtSlice, NetSlice, SlicedPacket, TransportSlice};

/// A UDP datagram found in a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpFrame<'a> {
    /// Sender address and port.
    pub src: SocketAddrV4,
    /// Destination address (a multicast group, or this host) and port.
    pub dst: SocketAddrV4,
    /// The outermost VLAN id, if the frame was tagged.
    pub vlan: Option<u16>,
    /// The UDP payload (a MoldUDP64 packet, for the feed).
    pub payload: &'a [u8],
}

/// Why a frame was not a well-formed IPv4/UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// Shorter than its headers say, or a length field past the frame's end (cut short on the
    /// wire, or forged).
    #[error("a frame cut short or with a length past its end (Ethernet, VLAN, IPv4 or UDP)")]
    Truncated,
    /// Not IPv4 (ARP, IPv6, ...): the XDP program passes these to the kernel, so one here was
    /// steered wrongly.
    #[error("not an IPv4 frame")]
    NotIpv4,
    /// The IPv4 header's checksum does not match its bytes (damaged in flight).
    #[error("IPv4 header checksum {found:#06x}, its bytes sum to {computed:#06x}")]
    Ipv4Checksum {
        /// The checksum in the header.
        found: u16,
        /// The checksum its bytes give.
        computed: u16,
    },
    /// An IPv4 fragment: not reassembled (fix the sender's MTU; a feed never fragments).
    #[error("an IPv4 fragment (not reassembled: the sender's datagrams exceed the link's MTU)")]
    Fragment,
    /// IPv4 but not UDP.
    #[error("IPv4 protocol {0}, not UDP")]
    NotUdp(u8),
    /// The UDP checksum (checked when asked, and only when the sender set one) does not match.
    #[error("UDP checksum {found:#06x}, the datagram sums to {computed:#06x}")]
    UdpChecksum {
        /// The checksum in the header.
        found: u16,
        /// The checksum the datagram gives.
        computed: u16,
    },
}

/// Takes `frame` apart as Ethernet / VLAN* / IPv4 / UDP. With `udp_checksum`, a datagram whose
/// sender set a UDP checksum (0 means none over IPv4) must match it; the IPv4 header checksum is
/// always checked.
pub fn parse_udp(frame: &[u8], udp_checksum: bool) -> Result<UdpFrame<'_>, FrameError> {
    let p = SlicedPacket::from_ethernet(frame).map_err(|_| FrameError::Truncated)?;
    let Some(NetSlice::Ipv4(ip)) = &p.net else { return Err(FrameError::NotIpv4) };
    let h = ip.header();
    let header = h.to_header();
    let computed = header.calc_header_checksum();
    if computed != h.header_checksum() {
        return Err(FrameError::Ipv4Checksum { found: h.header_checksum(), computed });
    }
    if h.is_fragmenting_payload() {
        return Err(FrameError::Fragment);
    }
    let udp = match &p.transport {
        Some(TransportSlice::Udp(u)) => u,
        _ => return Err(FrameError::NotUdp(h.protocol().0)),
    };
    let (src_ip, dst_ip) = (h.source_addr(), h.destination_addr());
    if udp_checksum && udp.checksum() != 0 {
        let computed = udp
            .to_header()
            .calc_checksum_ipv4_raw(src_ip.octets(), dst_ip.octets(), udp.payload())
            .map_err(|_| FrameError::Truncated)?;
        if computed != udp.checksum() {
            return Err(FrameError::UdpChecksum { found: udp.checksum(), computed });
        }
    }
    let vlan = p.link_exts.iter().find_map(|e| match e {
        LinkExtSlice::Vlan(v) => Some(v.vlan_identifier().value()),
        _ => None,
    });
    Ok(UdpFrame {
        src: SocketAddrV4::new(src_ip, udp.source_port()),
        dst: SocketAddrV4::new(dst_ip, udp.destination_port()),
        vlan,
        payload: udp.payload(),
    })
}

/// Frames refused, by why (the feed's counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FrameCounts {
    /// Cut short or with a length past the frame.
    pub truncated: u64,
    /// Not IPv4, or IPv4 but not UDP.
    pub not_udp: u64,
    /// A checksum (IPv4 header, or UDP when checked) that did not match.
    pub checksum: u64,
    /// IPv4 fragments.
    pub fragments: u64,
}

impl FrameCounts {
    /// Counts one refusal.
    pub fn count(&mut self, e: FrameError) {
        let c = match e {
            FrameError::Truncated => &mut self.truncated,
            FrameError::NotIpv4 | FrameError::NotUdp(_) => &mut self.not_udp,
            FrameError::Ipv4Checksum { .. } | FrameError::UdpChecksum { .. } => &mut self.checksum,
            FrameError::Fragment => &mut self.fragments,
        };
        *c += 1;
    }

    /// Every refusal.
    pub fn total(&self) -> u64 {
        self.truncated + self.not_udp + self.checksum + self.fragments
    }
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
