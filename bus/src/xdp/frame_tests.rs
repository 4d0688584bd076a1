//! Every refusal by the smallest frame that shows it: each length cut, one flipped checksum
//! byte, one flag.
use etherparse::{Ipv4HeaderSlice, PacketBuilder};

use super::*;

const SRC: [u8; 4] = [10, 0, 0, 1];
const GROUP: [u8; 4] = [239, 1, 2, 3];
/// Ethernet (14) + IPv4 (20): where the UDP header starts in an untagged frame.
const UDP_AT: usize = 34;

fn frame(payload: &[u8]) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2; 6], [1, 0, 0x5e, 1, 2, 3]).ipv4(SRC, GROUP, 8).udp(4000, 26400);
    let mut out = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut out, payload).unwrap();
    out
}

/// Recomputes the IPv4 header checksum of an untagged frame after a field was changed.
fn fix_ipv4_checksum(f: &mut [u8]) {
    let h = Ipv4HeaderSlice::from_slice(&f[14..]).unwrap().to_header();
    f[24..26].copy_from_slice(&h.calc_header_checksum().to_be_bytes());
}

#[test]
fn a_datagram_is_found_with_its_addresses_and_payload() {
    let f = frame(b"mold packet");
    let d = parse_udp(&f, true).unwrap();
    assert_eq!(d.src, "10.0.0.1:4000".parse().unwrap());
    assert_eq!(d.dst, "239.1.2.3:26400".parse().unwrap());
    assert_eq!((d.vlan, d.payload), (None, &b"mold packet"[..]));
}

#[test]
fn ethernet_padding_after_the_ip_packet_is_not_payload() {
    let mut f = frame(b"x");
    f.resize(60, 0); // a minimum-size Ethernet frame pads a short packet with zeros
    assert_eq!(parse_udp(&f, true).unwrap().payload, b"x");
}

#[test]
fn vlan_tags_are_read_through() {
    let b =
        PacketBuilder::ethernet2([2; 6], [3; 6]).single_vlan(0x123.try_into().unwrap()).ipv4(SRC, GROUP, 8).udp(1, 2);
    let mut f = Vec::new();
    b.write(&mut f, b"tagged").unwrap();
    let d = parse_udp(&f, true).unwrap();
    assert_eq!((d.vlan, d.payload), (Some(0x123), &b"tagged"[..]));
    let b = PacketBuilder::ethernet2([2; 6], [3; 6])
        .double_vlan(7.try_into().unwrap(), 9.try_into().unwrap())
        .ipv4(SRC, GROUP, 8)
        .udp(1, 2);
    let mut f = Vec::new();
    b.write(&mut f, b"qinq").unwrap();
    assert_eq!(parse_udp(&f, true).unwrap().payload, b"qinq");
}

/// Every prefix of a good frame, down to nothing, is refused as cut short.
#[test]
fn every_cut_of_a_frame_is_refused() {
    let f = frame(b"0123456789");
    for n in 0..f.len() {
        let e = parse_udp(&f[..n], false).unwrap_err();
        assert!(matches!(e, FrameError::Truncated | FrameError::NotIpv4), "cut at {n}: {e:?}");
        if n >= 14 + 20 {
            assert_eq!(e, FrameError::Truncated, "cut at {n}");
        }
    }
}

#[test]
fn a_udp_length_past_the_frame_is_refused() {
    let mut f = frame(b"0123456789");
    f[UDP_AT + 4..UDP_AT + 6].copy_from_slice(&100u16.to_be_bytes());
    assert_eq!(parse_udp(&f, false), Err(FrameError::Truncated));
    // And one below the UDP header's own 8 bytes.
    f[UDP_AT + 4..UDP_AT + 6].copy_from_slice(&7u16.to_be_bytes());
    assert_eq!(parse_udp(&f, false), Err(FrameError::Truncated));
}

#[test]
fn a_bad_ipv4_header_checksum_is_refused() {
    let mut f = frame(b"x");
    f[25] ^= 1;
    assert!(matches!(parse_udp(&f, false), Err(FrameError::Ipv4Checksum { .. })));
    // A field changed in flight, the checksum left as it was.
    let mut f = frame(b"x");
    f[22] = 1; // TTL
    assert!(matches!(parse_udp(&f, false), Err(FrameError::Ipv4Checksum { .. })));
}

#[test]
fn fragments_are_refused_first_and_later_ones() {
    let mut first = frame(b"0123456789");
    first[20] |= 0x20; // more fragments
    fix_ipv4_checksum(&mut first);
    assert_eq!(parse_udp(&first, false), Err(FrameError::Fragment));
    let mut later = frame(b"0123456789");
    later[21] = 1; // offset 8
    fix_ipv4_checksum(&mut later);
    assert_eq!(parse_udp(&later, false), Err(FrameError::Fragment));
}

#[test]
fn other_protocols_are_named() {
    let b = PacketBuilder::ethernet2([2; 6], [3; 6]).ipv4(SRC, GROUP, 8).tcp(1, 2, 0, 1024);
    let mut f = Vec::new();
    b.write(&mut f, b"tcp").unwrap();
    assert_eq!(parse_udp(&f, false), Err(FrameError::NotUdp(6)));
    let mut arp = frame(b"x");
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(parse_udp(&arp, false), Err(FrameError::NotIpv4));
}

#[test]
fn the_udp_checksum_is_checked_when_asked_and_set() {
    let mut f = frame(b"0123456789");
    *f.last_mut().unwrap() ^= 0xff;
    assert!(matches!(parse_udp(&f, true), Err(FrameError::UdpChecksum { .. })));
    assert!(parse_udp(&f, false).is_ok(), "not asked: not checked");
    f[UDP_AT + 6..UDP_AT + 8].copy_from_slice(&[0, 0]);
    assert!(parse_udp(&f, true).is_ok(), "0: the sender set none");
}

#[test]
fn refusals_are_counted_by_kind() {
    let mut c = FrameCounts::default();
    for e in [FrameError::Truncated, FrameError::NotIpv4, FrameError::NotUdp(6), FrameError::Fragment] {
        c.count(e);
    }
    c.count(FrameError::Ipv4Checksum { found: 1, computed: 2 });
    assert_eq!((c.truncated, c.not_udp, c.checksum, c.fragments, c.total()), (1, 2, 1, 1, 5));
}
