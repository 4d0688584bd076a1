//! Any bytes as a channel URI: no panic; an error never quotes a control character raw; what
//! parses prints in canonical form, which parses back to the same channel and prints the same.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tickbus::stream::Channel;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Channel::parse(text) {
        Ok(c) => {
            let canonical = c.to_string();
            let again = Channel::parse(&canonical).unwrap_or_else(|e| panic!("{canonical:?} does not parse: {e}"));
            assert_eq!(again, c, "{text:?} -> {canonical:?}");
            assert_eq!(again.to_string(), canonical);
        }
        Err(e) => {
            let shown = e.to_string();
            assert!(!shown.chars().any(|ch| ch.is_control()), "{shown:?}");
        }
    }
});
