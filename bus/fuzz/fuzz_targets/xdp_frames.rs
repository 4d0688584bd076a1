//! Any bytes as a raw frame off an AF_XDP ring: no panic; a datagram found is a part of the
//! frame behind its headers, and checking the UDP checksum as well never finds one the
//! unchecked parse refused, nor a different one.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tickbus::xdp::frame::parse_udp;

fuzz_target!(|frame: &[u8]| {
    let plain = parse_udp(frame, false);
    let checked = parse_udp(frame, true);
    if let Ok(c) = &checked {
        assert_eq!(plain.as_ref().ok(), Some(c), "the checked parse found what the plain one did not");
    }
    if let Ok(d) = plain {
        let (start, end) = (frame.as_ptr() as usize, frame.as_ptr() as usize + frame.len());
        let p = d.payload.as_ptr() as usize;
        assert!(
            p >= start + 14 + 20 + 8 && p + d.payload.len() <= end,
            "the payload lies behind the headers, in the frame"
        );
    }
});
