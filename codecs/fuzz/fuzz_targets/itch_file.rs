//! The streaming reader and the in-memory walk must agree on any bytes (messages, and errors
//! word for word), and never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tickbus_codecs::itch::{frames, ItchFileReader};

fuzz_target!(|data: &[u8]| {
    let mut r = ItchFileReader::new(data);
    let mut walk = frames(data);
    let mut failed = None;
    loop {
        let streamed = r.next_record();
        let walked = walk.next();
        match (streamed, walked) {
            (Ok(Some(a)), Some(Ok(b))) => {
                assert_eq!((a.offset, a.message.as_bytes()), (b.offset, b.message.as_bytes()));
                let _ = a.message.header().timestamp_ns();
            }
            (Ok(None), None) => break,
            // The same error, at the same offset (and again on a retry, below).
            (Err(a), Some(Err(b))) => {
                assert_eq!(a.to_string(), b.to_string());
                failed = Some(b.to_string());
                break;
            }
            (a, b) => panic!("reader and walk disagree: {:?} vs {:?}", a.map(|r| r.map(|r| r.offset)), b.map(|r| r.map(|r| r.offset))),
        }
    }
    if let Some(e) = failed {
        assert_eq!(r.next_record().unwrap_err().to_string(), e);
    }
});
