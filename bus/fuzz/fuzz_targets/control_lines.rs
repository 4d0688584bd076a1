//! Every line parser of the RDMA control channel, on any bytes (split into lines): none may
//! panic, what parses must format back to the same value, and no line may open under a
//! transcript MAC it was not sealed with.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tickbus::wire::control::*;
use tickbus::wire::endpoint::Endpoint;
use tickbus::wire::transcript::{Role, Transcript};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut peer = Transcript::new();
    peer.start_signing(b"token", &[1; 16], &[2; 16]);
    for line in text.lines() {
        assert!(quote(line).chars().count() <= QUOTE_MAX * 10 + 40);
        let _ = parse_hello_sub(line);
        let _ = parse_hello_pub(line);
        let _ = parse_auth(line);
        let _ = parse_resume(line);
        let _ = parse_start(line);
        if let Ok(c) = parse_config(line) {
            assert_eq!(parse_config(&config_line(&c)), Ok(c));
        }
        if let Ok(h) = parse_history(line) {
            assert_eq!(parse_history(&history_line(&h)), Ok(h));
        }
        if let Some(ep) = line.strip_prefix("EP ").and_then(|l| l.parse::<Endpoint>().ok()) {
            assert_eq!(ep.to_string().parse::<Endpoint>(), Ok(ep));
            assert!(ep.addr.checked_add(ep.len).is_some());
        }
        // Forged lines never open; a sealed one opens once, as itself.
        assert!(peer.clone().open(Role::Publisher, line).is_err() || !line.contains(" mac="));
        let mut sealer = peer.clone();
        let sealed = sealer.seal(Role::Publisher, line);
        let mut opener = peer.clone();
        if !line.contains(" mac=") {
            assert_eq!(opener.open(Role::Publisher, &sealed).as_deref(), Ok(line));
        }
    }
});
