//! The feed arbiter against forged datagrams, checked against issue 25's property (not only for
//! panics): the input chooses the real stream's packets and their losses on lines A and B and
//! the forgeries injected ahead of the stream (messages, heartbeats, ends of session, runs,
//! other sessions) on either line, pinned or not; the messages delivered must be exactly the
//! real stream's, in order, once each, nothing given up, and the session must end where the
//! real one does (`tickbus::feed::sim`, the harness the unit tests' proptest uses).
#![no_main]
use libfuzzer_sys::fuzz_target;
use tickbus::feed::sim::{run, Forgery, Scenario};

fuzz_target!(|data: &[u8]| {
    let Some((&[flags, loss_a, loss_b, n_forged], rest)) = data.split_first_chunk::<4>() else { return };
    let n_forged = usize::from(n_forged % 13);
    let (forged, real) = rest.split_at((n_forged * 5).min(rest.len()));
    let forgeries = forged
        .chunks_exact(5)
        .map(|f| {
            let ahead = u64::from(u16::from_le_bytes([f[2], f[3]]) % 3000);
            let what = match f[1] % 5 {
                0 => Forgery::Messages { ahead: ahead + 1, count: f[4] % 4 + 1 },
                1 => Forgery::Heartbeat { ahead: ahead + 1 },
                2 => Forgery::End { ahead },
                3 => Forgery::Run { ahead: ahead + 1, packets: f[4] % 2 + 2 },
                _ => Forgery::OtherSession { seq: ahead + 1 },
            };
            (usize::from(f[0] % 200), f[4] & 0x80 != 0, what)
        })
        .collect();
    let packets: Vec<(u64, u8, u8)> =
        real.chunks_exact(3).take(200).map(|p| (u64::from(p[0] % 4) + 1, p[1] % 100, p[2] % 100)).collect();
    let s = Scenario { packets, loss_a: loss(loss_a), loss_b: loss(loss_b), forgeries, session_pinned: flags & 1 != 0 };
    if let Err(why) = run(&s) {
        panic!("{why}: {s:?}");
    }
});

/// Up to 40% of a line's packets lost, or (one byte value in 16) the whole line dead.
fn loss(b: u8) -> u8 {
    if b >= 240 {
        255
    } else {
        b % 40
    }
}
