//! Any capture file: datagrams out, MoldUDP64 and ITCH decoded from them; never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tickbus_codecs::moldudp64::Packet;
use tickbus_codecs::pcap::CaptureReader;

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = CaptureReader::new(data) else { return };
    for _ in 0..10_000 {
        match r.next_datagram() {
            Ok(Some(d)) => {
                if let Ok(p) = Packet::parse(d.payload) {
                    for (_, m) in p.messages() {
                        let _ = tickbus_codecs::itch::parse(m, 0);
                    }
                }
            }
            _ => break,
        }
    }
});
