//! Any datagrams on lines A, B and the retransmitter into the feed handler's arbitration, with
//! time passing: never a panic; messages come out in sequence order, each once; a loss always
//! moves forward; nothing is delivered that no packet carried.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tickbus::feed::{Arbiter, ArbiterOptions, Line, Out};
use tickbus_codecs::moldudp64::Packet;

fuzz_target!(|data: &[u8]| {
    let opts = ArbiterOptions { wait_other_line_ns: 10, retry_ns: 20, give_up_ns: 100, max_request: 50, max_held: 1000 };
    let mut a = Arbiter::new(opts);
    let mut next = 1u64;
    let mut now = 0u64;
    let mut rest = data;
    let mut carried = std::collections::HashMap::<u64, Vec<Vec<u8>>>::new();
    let mut check = |carried: &std::collections::HashMap<u64, Vec<Vec<u8>>>, o: Out<'_>| match o {
        Out::Message { sequence, message } => {
            assert_eq!(sequence, next, "out of order or twice");
            let copies = carried.get(&sequence).expect("delivered a message no packet carried");
            assert!(copies.iter().any(|c| c.as_slice() == message), "delivered bytes no packet carried");
            next += 1;
        }
        Out::Lost { from, to } => {
            assert!(from == next && to > from, "a loss that does not move forward");
            next = to;
        }
        Out::Rerequest { sequence, count } => assert!(sequence == next && count > 0),
    };
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
            if p.header.sequence.get() < u64::MAX / 4 {
                for (seq, bytes) in p.messages() {
                    carried.entry(seq).or_default().push(bytes.to_vec());
                }
                a.on_packet(line, &p, now, &mut |o| check(&carried, o));
            }
        }
        a.poll(now, &mut |o| check(&carried, o));
    }
});
