//! Any bytes as a journal segment (a damaged or foreign file): the header check and the record
//! walk never panic, a record never claims bytes past the input, and a parsed record re-emits
//! to bytes that parse back to the same record.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tickbus::journal::format::{self, RecordHeader, SegmentHeader};
use zerocopy::FromBytes;

fuzz_target!(|data: &[u8]| {
    let _ = SegmentHeader::parse(data);
    let mut at = 0usize;
    while at < data.len() {
        match format::parse(&data[at..], at as u64) {
            Ok(Some((r, n))) => {
                assert!(n >= format::record_bytes(0) && at + n <= data.len());
                let (h, _) = RecordHeader::read_from_prefix(&data[at..]).expect("a parsed record has a header");
                let start = at + format::RECORD_HEADER_BYTES;
                let payload = &data[start..start + h.len as usize];
                let mut out = vec![0u8; n];
                assert_eq!(format::emit(&mut out, &h, payload), n);
                assert_eq!(&out[..start - at + payload.len()], &data[at..start + payload.len()]);
                let (again, m) = format::parse(&out, 0).expect("re-emitted record parses").expect("not empty");
                assert_eq!((again, m), (r, n), "a parsed record re-emits to the same record");
                at += n;
            }
            Ok(None) | Err(_) => break,
        }
    }
});
