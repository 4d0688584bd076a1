//! The streaming reader and the in-memory walk must agree on any bytes, and never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tickbus_codecs::itch::{frames, ItchFileReader};

fuzz_target!(|data: &[u8]| {
    let mut r = ItchFileReader::new(data);
    let mut walk = frames(data);
    loop {
        let streamed = r.next_record();
        let walked = walk.next();
        match (streamed, walked) {
            (Ok(Some(a)), Some(Ok(b))) => {
                assert_eq!((a.offset, a.message.as_bytes()), (b.offset, b.message.as_bytes()));
                let _ = a.message.header().timestamp_ns();
            }
            (Ok(None), None) => break,
            (Err(_), Some(Err(_))) => break,
            (a, b) => panic!("reader and walk disagree: {:?} vs {:?}", a.map(|r| r.map(|r| r.offset)), b.map(|r| r.map(|r| r.offset))),
        }
    }
});
