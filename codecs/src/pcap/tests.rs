use std::borrow::Cow;
use std::time::Duration;

use etherparse::PacketBuilder;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;

use super::*;
use crate::itch::{frames, ItchMessage};
use crate::moldudp64::{Arrival, GapTracker, Packet, PacketKind};
use crate::synth::{write_itch, write_pcap, DayConfig, DAY_EPOCH_NS};

fn udp_frame(dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 9)
        .udp(1000, dport)
        .write(&mut v, payload)
        .unwrap();
    v
}

#[test]
fn a_generated_capture_carries_the_same_messages_as_the_generated_file_in_sequence() {
    let cfg = DayConfig::new(21, 30, 20_000);
    let mut pcap = Vec::new();
    let sum = write_pcap(cfg, &mut pcap, Endpoints::default()).unwrap();
    let mut itch = Vec::new();
    let n = write_itch(cfg, &mut itch).unwrap();
    assert_eq!(sum.messages, n);
    assert!(sum.packets > 1_000 && sum.packets < n, "events share packets: {sum:?}");

    let mut r = CaptureReader::new(&pcap[..]).unwrap().with_port(26_477);
    assert_eq!(r.format(), CaptureFormat::Pcap);
    let mut want = frames(&itch);
    let mut gaps = GapTracker::new();
    let (mut datagrams, mut ended) = (0u64, false);
    while let Some(d) = r.next_datagram().unwrap() {
        datagrams += 1;
        assert_eq!(d.dst, Endpoints::default().dst);
        let p = Packet::parse(d.payload).unwrap();
        if p.kind() == PacketKind::EndOfSession {
            ended = true;
            continue;
        }
        assert!(matches!(gaps.on_packet(&p), Arrival::InOrder { .. }));
        for (_, m) in p.messages() {
            let w = want.next().unwrap().unwrap().message;
            assert_eq!(m, w.as_bytes());
            let exchange_ts = crate::itch::parse(m, 0).unwrap().header().timestamp_ns();
            assert_eq!(d.ts_ns, DAY_EPOCH_NS + exchange_ts + 20_000);
        }
    }
    assert!(want.next().is_none() && ended);
    assert_eq!((datagrams, r.packets(), r.skipped()), (sum.packets, sum.packets, Skipped::default()));
    assert_eq!(gaps.next, n + 1);
}

#[test]
fn frames_that_are_not_udp_datagrams_are_counted_by_reason() {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    let t = Duration::from_micros(5);
    let udp = udp_frame(26_477, b"hello");
    let mut other_port = udp_frame(53, b"dns");
    let mut tcp = Vec::new();
    PacketBuilder::ethernet2([2; 6], [3; 6])
        .ipv4([1, 1, 1, 1], [2, 2, 2, 2], 9)
        .tcp(1, 2, 3, 4)
        .write(&mut tcp, b"x")
        .unwrap();
    let mut v6 = Vec::new();
    PacketBuilder::ethernet2([2; 6], [3; 6]).ipv6([1; 16], [2; 16], 9).udp(1, 26_477).write(&mut v6, b"x").unwrap();
    for f in [&udp, &mut other_port, &tcp, &v6] {
        w.write_packet(&PcapPacket::new(t, f.len() as u32, f)).unwrap();
    }
    // A frame cut by the snap length: caplen < origlen.
    w.write_packet(&PcapPacket::new(t, udp.len() as u32 + 10, &udp)).unwrap();
    let bytes = w.into_writer();
    let mut r = CaptureReader::new(&bytes[..]).unwrap().with_port(26_477);
    let d = r.next_datagram().unwrap().unwrap();
    assert_eq!((d.packet, d.ts_ns, d.payload), (1, 5_000, &b"hello"[..]));
    assert_eq!(d.src.to_string(), "10.0.0.1:1000");
    assert!(r.next_datagram().unwrap().is_none());
    let s = r.skipped();
    assert_eq!((s.other_port, s.not_udp, s.not_ipv4, s.truncated, r.packets()), (1, 1, 1, 1, 5));
}

#[test]
fn pcapng_timestamps_follow_each_interfaces_resolution() {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let micro = InterfaceDescriptionBlock::new(DataLink::ETHERNET, 0);
    let mut nano = InterfaceDescriptionBlock::new(DataLink::ETHERNET, 0);
    nano.options.push(InterfaceDescriptionOption::IfTsResol(9));
    w.write_pcapng_block(micro).unwrap();
    w.write_pcapng_block(nano).unwrap();
    let f = udp_frame(26_477, b"abc");
    for (iface, raw) in [(0u32, 1_500u64), (1, 1_500)] {
        let epb = EnhancedPacketBlock {
            interface_id: iface,
            timestamp: Duration::from_nanos(raw),
            original_len: f.len() as u32,
            data: Cow::Borrowed(&f),
            options: vec![],
        };
        w.write_pcapng_block(epb).unwrap();
    }
    let bytes = w.into_inner();
    let mut r = CaptureReader::new(&bytes[..]).unwrap();
    assert_eq!(r.format(), CaptureFormat::PcapNg);
    assert_eq!(r.next_datagram().unwrap().unwrap().ts_ns, 1_500_000, "default resolution: microseconds");
    assert_eq!(r.next_datagram().unwrap().unwrap().ts_ns, 1_500, "if_tsresol 9: nanoseconds");
    assert!(r.next_datagram().unwrap().is_none());
}

#[test]
fn not_a_capture_a_foreign_link_type_and_a_cut_file_are_clear_errors() {
    let err = CaptureReader::new(&[0u8, 0, b'S', 0][..]).err().unwrap();
    assert!(err.to_string().contains("not a pcap or pcapng capture"), "{err}");
    let header = PcapHeader { datalink: DataLink::RAW, ..Default::default() };
    let raw = PcapWriter::with_header(Vec::new(), header).unwrap().into_writer();
    let err = CaptureReader::new(&raw[..]).err().unwrap();
    assert!(err.to_string().contains("not Ethernet"), "{err}");

    let mut w = PcapWriter::new(Vec::new()).unwrap();
    let f = udp_frame(1, b"payload");
    for _ in 0..3 {
        w.write_packet(&PcapPacket::new(Duration::ZERO, f.len() as u32, &f)).unwrap();
    }
    let mut bytes = w.into_writer();
    bytes.truncate(bytes.len() - 4);
    let mut r = CaptureReader::new(&bytes[..]).unwrap();
    assert!(r.next_datagram().unwrap().is_some());
    assert!(r.next_datagram().unwrap().is_some());
    let err = r.next_datagram().unwrap_err();
    assert!(err.to_string().starts_with("packet 3: malformed capture"), "{err}");
}

#[test]
fn random_bytes_after_a_valid_header_never_panic() {
    let good = PcapWriter::new(Vec::new()).unwrap().into_writer();
    for seed in 0..300 {
        let mut bytes = good.clone();
        bytes.extend(crate::testutil::junk(seed, 200));
        if let Ok(mut r) = CaptureReader::new(&bytes[..]) {
            while let Ok(Some(d)) = r.next_datagram() {
                if let Ok(p) = Packet::parse(d.payload) {
                    for (_, m) in p.messages() {
                        let _ = crate::itch::parse(m, 0).map(|m: ItchMessage<'_>| m.code());
                    }
                }
            }
        }
    }
}
