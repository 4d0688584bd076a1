//! Any datagram: parse, walk its messages, decode each as ITCH, track its sequence.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tickbus_codecs::moldudp64::{GapTracker, Packet};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Packet::parse(data) {
        let mut n = 0u64;
        for (seq, m) in p.messages() {
            assert_eq!(seq, p.header.sequence.get() + n);
            n += 1;
            let _ = tickbus_codecs::itch::parse(m, 0).map(|m| m.code());
        }
        assert_eq!(n, u64::from(p.message_count()));
        let _ = GapTracker::new().on_packet(&p);
    }
});
