//! The arbiter's defence as a property (see `sim.rs`, which the `feed_forgery` fuzz target
//! drives too): random real streams, losses and forgeries.
use proptest::prelude::*;

use crate::feed::sim::{run, Forgery, Scenario};

fn forgery() -> impl Strategy<Value = Forgery> {
    prop_oneof![
        (1..3000u64, 1..5u8).prop_map(|(ahead, count)| Forgery::Messages { ahead, count }),
        (1..3000u64).prop_map(|ahead| Forgery::Heartbeat { ahead }),
        (0..3000u64).prop_map(|ahead| Forgery::End { ahead }),
        (1..3000u64, 2..4u8).prop_map(|(ahead, packets)| Forgery::Run { ahead, packets }),
        (1..5000u64).prop_map(|seq| Forgery::OtherSession { seq }),
    ]
}

proptest! {
    // 256 cases unless PROPTEST_CASES says otherwise (proptest reads it).
    #![proptest_config(ProptestConfig::default())]
    #[test]
    fn delivered_is_exactly_the_real_stream_whatever_is_injected(
        packets in prop::collection::vec((1..5u64, 0..100u8, 0..100u8), 20..200),
        // Up to 40% of packets lost on a line, or the whole line dead (255: every packet; line
        // A still brings the first).
        loss_a in prop_oneof![3 => 0..40u8, 1 => Just(255u8)],
        loss_b in prop_oneof![3 => 0..40u8, 1 => Just(255u8)],
        forgeries in prop::collection::vec((0..200usize, any::<bool>(), forgery()), 0..12),
        session_pinned in any::<bool>(),
    ) {
        let s = Scenario { packets, loss_a, loss_b, forgeries, session_pinned };
        let r = run(&s);
        prop_assert!(r.is_ok(), "{:?}", r);
    }
}

/// Found by the feed_forgery fuzz target: a forged message at the sequence right after the
/// real stream's last, sent on line A, which then lost the real last message and sent only its
/// end of session at that sequence; the forged message was believed by time and delivered.
#[test]
fn a_forged_message_at_the_real_end_is_contradicted_by_the_lines_end_of_session() {
    let s = Scenario {
        packets: vec![(1, 0, 0), (1, 0, 50)],
        loss_a: 11,
        loss_b: 10,
        forgeries: vec![
            (1, false, Forgery::Messages { ahead: 257, count: 2 }),
            (1, false, Forgery::Run { ahead: 8, packets: 3 }),
            (0, false, Forgery::Messages { ahead: 1, count: 1 }),
            (0, false, Forgery::Heartbeat { ahead: 1282 }),
            (8, false, Forgery::End { ahead: 44 }),
        ],
        session_pinned: true,
    };
    assert_eq!(run(&s), Ok(()));
}
