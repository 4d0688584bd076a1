//! Any datagrams on lines A, B and the retransmitter into the feed handler's arbitration, with
//! time passing: never a panic; each session is announced before its output; within a session
//! messages come out in sequence order, each once, each carried by some packet of that session;
//! a loss always moves forward.
#![no_main]
use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use tickbus::feed::{Arbiter, ArbiterOptions, Line, Out};
use tickbus_codecs::moldudp64::Packet;

type Carried = HashMap<([u8; 10], u64), Vec<Vec<u8>>>;

struct Check {
    session: Option<[u8; 10]>,
    next: u64,
}

impl Check {
    /// Checks one output; the arbiter announces each session it follows before its output
    /// (the end of the previous one is given up before the announcement).
    fn out(&mut self, carried: &Carried, o: Out<'_>) {
        let Some(session) = self.session else {
            assert!(matches!(o, Out::Session { .. }), "output before any session: {o:?}");
            if let Out::Session { session } = o {
                (self.session, self.next) = (Some(session), 1);
            }
            return;
        };
        match o {
            Out::Session { session: new } => {
                assert_ne!(new, session, "the same session announced twice");
                (self.session, self.next) = (Some(new), 1); // a new session starts again at 1
            }
            Out::Message { sequence, message } => {
                assert_eq!(sequence, self.next, "out of order or twice");
                let copies = carried.get(&(session, sequence)).expect("delivered a message no packet carried");
                assert!(copies.iter().any(|c| c.as_slice() == message), "delivered bytes no packet carried");
                self.next += 1;
            }
            Out::Lost { from, to } => {
                assert!(from == self.next && to > from, "a loss that does not move forward");
                self.next = to;
            }
            Out::Rerequest { sequence, count } => assert!(sequence == self.next && count > 0),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut opts = ArbiterOptions::default();
    opts.wait_other_line_ns = 10;
    opts.retry_ns = 20;
    opts.give_up_ns = 100;
    opts.max_request = 50;
    opts.max_held = 1000;
    opts.max_held_bytes = 4096;
    opts.max_jump = 64;
    opts.confirm_ns = 200;
    let mut a = Arbiter::new(opts);
    let mut check = Check { session: None, next: 1 };
    let mut carried = Carried::new();
    let mut now = 0u64;
    let mut rest = data;
    // Each datagram: line byte, length byte, then that many bytes.
    while let [line, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (dgram, more) = tail.split_at(n);
        rest = more;
        now += u64::from(*line >> 2);
        let line = match line & 3 {
            0 => Line::A,
            1 => Line::B,
            _ => Line::Retransmit,
        };
        if let Ok(p) = Packet::parse(dgram) {
            let session = p.header.session;
            for (seq, bytes) in p.messages() {
                carried.entry((session, seq)).or_default().push(bytes.to_vec());
            }
            a.on_packet(line, &p, now, &mut |o| check.out(&carried, o));
        }
        a.poll(now, &mut |o| check.out(&carried, o));
    }
});
