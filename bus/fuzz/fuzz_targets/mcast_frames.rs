//! Any datagrams into a ud-mcast subscriber's sequencing (what anyone on the fabric can send):
//! nothing panics, a frame is delivered only in order and never twice within a publisher run,
//! and a gap is always a forward move.
#![no_main]
use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;
use tickbus::wire::frame;
use tickbus::wire::sequencer::{Bounds, Sequencer, Verdict};

fuzz_target!(|data: &[u8]| {
    let bounds = Bounds { max_jump: 64, confirm: 3, quiet_ticks: 100 };
    let mut s = Sequencer::new(7, bounds);
    let mut seen = HashSet::new();
    let mut last: Option<(u64, u64)> = None;
    let mut clock = 0u64;
    // Each datagram: one length byte, then that many bytes (a frame header is 32).
    let mut rest = data;
    while let Some((&n, tail)) = rest.split_first() {
        let n = usize::from(n).min(tail.len());
        let (dgram, more) = tail.split_at(n);
        rest = more;
        clock += u64::from(n as u8 % 50);
        let Ok((h, _)) = frame::parse(dgram) else { continue };
        let mut offers = 0;
        loop {
            offers += 1;
            assert!(offers < 4, "a frame kept producing gaps");
            match s.classify(&h, || clock) {
                Verdict::Deliver => {
                    assert!(seen.insert((h.session, h.seq)), "delivered twice: {h:?}");
                    if let Some((session, seq)) = last {
                        assert!(session != h.session || h.seq > seq, "out of order: {h:?} after {seq}");
                    }
                    last = Some((h.session, h.seq));
                    break;
                }
                Verdict::Gap { from, to } => {
                    assert!(from < to, "a gap that goes backwards");
                    s.advance_to(to);
                }
                _ => break,
            }
        }
    }
});
