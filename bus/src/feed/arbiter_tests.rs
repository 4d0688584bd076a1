//! The arbiter's unit tests: the A/B rules, re-requests, give-ups, sessions and the defences
//! against datagrams the real lines do not continue.
use super::*;
use tickbus_codecs::moldudp64::PacketBuilder;

const S: [u8; 10] = *b"SESSION001";

/// Packets of `per` messages each, message `i` being `[i as u8; 4]`.
fn packets(n: u64, per: u64) -> Vec<Vec<u8>> {
    let mut b = PacketBuilder::new(S, 1, 1400);
    let mut v = Vec::new();
    for i in 1..=n {
        b.push(&[i as u8; 4]);
        if i % per == 0 {
            v.push(b.take(|p| p.to_vec()));
        }
    }
    v
}

fn run(
    arb: &mut Arbiter,
    line: Line,
    p: &[u8],
    now: u64,
    got: &mut Vec<Result<u64, (u64, u64)>>,
    asks: &mut Vec<(u64, u16)>,
) {
    let pk = Packet::parse(p).unwrap();
    arb.on_packet(line, &pk, now, &mut |o| match o {
        Out::Message { sequence, message } => {
            assert_eq!(message, [sequence as u8; 4]);
            got.push(Ok(sequence))
        }
        Out::Lost { from, to } => got.push(Err((from, to))),
        Out::Rerequest { sequence, count } => asks.push((sequence, count)),
        Out::Session { .. } => {}
    });
}

#[test]
fn the_first_copy_wins_and_a_loss_on_one_line_is_no_gap() {
    let ps = packets(40, 4);
    let mut a = Arbiter::new(ArbiterOptions::default());
    let (mut got, mut asks) = (Vec::new(), Vec::new());
    for (k, p) in ps.iter().enumerate() {
        if k % 3 != 1 {
            run(&mut a, Line::A, p, k as u64, &mut got, &mut asks); // A drops every third
        }
        run(&mut a, Line::B, p, k as u64, &mut got, &mut asks);
    }
    assert_eq!(got, (1..=40).map(Ok).collect::<Vec<_>>());
    assert!(asks.is_empty());
    let s = a.stats();
    assert_eq!((s.delivered, s.lost, s.gaps, s.rerequests), (40, 0, 0, 0));
    assert_eq!(s.duplicates, 28, "every message but the 12 A lost came twice");
}

#[test]
fn what_both_lines_miss_is_rerequested_after_the_wait_and_recovered() {
    let ps = packets(20, 4);
    let mut a = Arbiter::new(ArbiterOptions::default());
    let (mut got, mut asks) = (Vec::new(), Vec::new());
    for (k, p) in ps.iter().enumerate() {
        if k == 1 {
            continue; // 5..=8 lost on both lines
        }
        run(&mut a, Line::A, p, 1000 + k as u64, &mut got, &mut asks);
    }
    assert_eq!(got, (1..=4).map(Ok).collect::<Vec<_>>(), "held behind the gap");
    assert!(asks.is_empty(), "not before the other line had its chance");
    a.poll(3_000_000, &mut |o| {
        if let Out::Rerequest { sequence, count } = o {
            asks.push((sequence, count))
        }
    });
    // Asked past everything held, so that the server's answer can confirm what came after the
    // hole (a jump ahead is not believed on its own line's word).
    assert_eq!(asks, vec![(5, 16)]);
    run(&mut a, Line::Retransmit, &ps[1], 3_000_100, &mut got, &mut asks);
    assert_eq!(got, (1..=8).map(Ok).collect::<Vec<_>>(), "9.. wait for a word beyond line A's");
    run(&mut a, Line::Retransmit, &ps[2], 3_000_150, &mut got, &mut asks);
    assert_eq!(got, (1..=12).map(Ok).collect::<Vec<_>>(), "each copy confirms its own message only");
    // The server answers what was asked: its copy of each message A's jump holds confirms it.
    for (k, p) in ps.iter().enumerate().skip(3) {
        run(&mut a, Line::Retransmit, p, 3_000_200 + k as u64, &mut got, &mut asks);
    }
    assert_eq!(got, (1..=20).map(Ok).collect::<Vec<_>>());
    assert_eq!((a.stats().recovered, a.stats().lost), (4, 0));
}

/// A burst of losses on both lines: five holes that the server never fills. The holes behind the
/// first are given up together with it where a re-request covered them `give_up_ns` before,
/// never `give_up_ns` each in turn as `next` reaches them (five holes took 2 s after the first, a
/// few hundred minutes). With a server that answers (all but these holes), every hole is
/// re-requested before it is given up; with one that answered nothing for `give_up_ns`
/// (silent), every hole goes with the first.
#[test]
fn the_holes_behind_a_gap_are_timed_from_when_they_were_known_not_one_give_up_each() {
    for server_answers in [false, true] {
        holes_behind_a_gap(server_answers);
    }
}

fn holes_behind_a_gap(server_answers: bool) {
    // A re-request reaches two holes at most: the others need their own.
    let opts = ArbiterOptions { max_request: 8, ..ArbiterOptions::default() };
    let ps = packets(60, 2);
    let mut a = Arbiter::new(opts);
    let (mut got, mut asks) = (Vec::new(), Vec::new());
    // Packets 2, 5, 8, 11 and 14 lost on both lines: messages 5-6, 11-12, 17-18, 23-24, 29-30.
    for (k, p) in ps.iter().enumerate().filter(|(k, _)| !(k % 3 == 2 && *k < 15)) {
        run(&mut a, Line::A, p, k as u64, &mut got, &mut asks);
    }
    let holes = [(5, 7), (11, 13), (17, 19), (23, 25), (29, 31)];
    let mut lost_at = Vec::new();
    let mut now = 1_000_000;
    let mut answered = 0;
    while lost_at.len() < holes.len() && now < opts.confirm_ns + 10 * opts.give_up_ns {
        if server_answers {
            // The server is there: it answers each re-request with what it has, which is
            // everything but these holes (not silent, yet they stay open).
            for &(seq, count) in &asks[answered..] {
                let lost = |k: usize| k % 3 == 2 && k < 15;
                for (k, p) in ps.iter().enumerate().filter(|&(k, _)| !lost(k)) {
                    let first = 2 * k as u64 + 1;
                    if first + 1 >= seq && first < seq + u64::from(count) {
                        let before = got.len();
                        run(&mut a, Line::Retransmit, p, now, &mut got, &mut Vec::new());
                        // A gap can be given up as an answer arrives too.
                        lost_at.extend(got[before..].iter().filter_map(|g| g.err()).map(|(f, t)| (f, t, now)));
                    }
                }
            }
            answered = asks.len();
        }
        a.poll(now, &mut |o| match o {
            Out::Lost { from, to } => lost_at.push((from, to, now)),
            Out::Rerequest { sequence, count } => asks.push((sequence, count)),
            _ => {}
        });
        now += 1_000_000;
    }
    assert_eq!(lost_at.iter().map(|l| (l.0, l.1)).collect::<Vec<_>>(), holes, "every hole given up, by its size");
    // The first hole has been open since the first poll; the others are known from the moment
    // the jumps were believed (silent server: about confirm_ns, before the first is given up) or
    // the server's copies confirmed what follows them (at the first answers).
    let (first, second, last) = (lost_at[0].2, lost_at[1].2, lost_at[4].2);
    assert!(first >= opts.give_up_ns, "the first hole waited give_up_ns: {first}");
    if server_answers {
        // A re-request reaches two holes here: each pair goes give_up_ns after the re-request
        // that first covered it, the first pair together (old: give_up_ns per hole, 2 s from
        // the first to the last).
        assert!(second - first <= 10_000_000, "the second went with the first: {lost_at:?}");
        assert!(last - first <= 2 * opts.give_up_ns + 10_000_000, "not one give-up per hole: {lost_at:?}");
        for &(from, to) in &holes {
            assert!(
                asks.iter().any(|&(s, c)| s <= from && to <= s + u64::from(c)),
                "hole {from}..{to} was re-requested before it was given up: {asks:?}"
            );
        }
    } else {
        // Silent for give_up_ns: every hole, known since its packets came, goes with the first
        // (one per poll, a poll a ms here), without waiting for answers.
        assert!(last - first <= 5_000_000, "{lost_at:?}");
    }
    assert_eq!(a.stats().lost, 10);
}

#[test]
fn what_is_not_recovered_in_time_is_given_up_with_its_size_and_a_lost_tail_too() {
    // One line only (B), no retransmission server: 9..=12 and 17..=20 are lost for good.
    let ps = packets(20, 4);
    let opts = ArbiterOptions::default();
    let mut a = Arbiter::new(opts);
    let (mut got, mut asks) = (Vec::new(), Vec::new());
    for (k, p) in ps.iter().enumerate().filter(|(k, _)| *k != 2 && *k != 4) {
        run(&mut a, Line::B, p, k as u64, &mut got, &mut asks);
    }
    let lost = |a: &mut Arbiter, now: u64, got: &mut Vec<Result<u64, (u64, u64)>>| {
        a.poll(now, &mut |o| {
            if let Out::Lost { from, to } = o {
                got.push(Err((from, to)))
            }
        })
    };
    lost(&mut a, opts.give_up_ns + 10, &mut got);
    assert_eq!(got, (1..=8).map(Ok).collect::<Vec<_>>(), "B's jump to 13 is not believed on its own");
    // A heartbeat on B: no messages, the next sequence 21; it continues B's jump.
    run(&mut a, Line::B, &heartbeat(S, 21), opts.give_up_ns + 20, &mut got, &mut asks);
    run(&mut a, Line::B, &heartbeat(S, 21), opts.give_up_ns + 30, &mut got, &mut asks);
    lost(&mut a, opts.confirm_ns - 1, &mut got);
    assert_eq!(got.len(), 8, "not before the jump stood confirm_ns");
    lost(&mut a, opts.confirm_ns + 10, &mut got);
    // 9..=12 lost; 13..=16 delivered; 17..=20 (the tail) known from the heartbeat.
    assert_eq!(got.iter().filter(|g| g.is_err()).copied().collect::<Vec<_>>(), vec![Err((9, 13))]);
    lost(&mut a, opts.confirm_ns + opts.give_up_ns + 30, &mut got); // the heartbeat's jump is believed
    assert_eq!(got.len(), 9, "the tail is a gap only from now: {got:?}");
    lost(&mut a, opts.confirm_ns + 2 * opts.give_up_ns + 40, &mut got);
    assert_eq!(got.last(), Some(&Err((17, 21))), "the heartbeat revealed the lost tail");
    assert_eq!((a.stats().lost, a.stats().gaps, a.stats().believed_by_time), (8, 2, 2));
}

fn packet_at(session: [u8; 10], first: u64, msgs: &[&[u8]]) -> Vec<u8> {
    let mut b = PacketBuilder::new(session, first, 1400);
    for m in msgs {
        b.push(m);
    }
    b.take(|p| p.to_vec())
}

fn collect(got: &mut Vec<Result<u64, (u64, u64)>>) -> impl FnMut(Out<'_>) + '_ {
    |o| match o {
        Out::Message { sequence, .. } => got.push(Ok(sequence)),
        Out::Lost { from, to } => got.push(Err((from, to))),
        Out::Rerequest { .. } | Out::Session { .. } => {}
    }
}

#[test]
fn one_stray_packet_far_ahead_opens_no_gap_and_the_stream_goes_on() {
    let mut a = Arbiter::new(ArbiterOptions::default());
    let mut got = Vec::new();
    let stray = packet_at(S, 1 << 40, &[b"evil"]);
    a.on_packet(Line::A, &Packet::parse(&stray).unwrap(), 0, &mut collect(&mut got));
    for seq in 1..=5u64 {
        let p = packet_at(S, seq, &[&[seq as u8; 4]]);
        a.on_packet(Line::A, &Packet::parse(&p).unwrap(), seq, &mut collect(&mut got));
    }
    a.poll(10 * ArbiterOptions::default().give_up_ns, &mut collect(&mut got));
    assert_eq!(got, (1..=5).map(Ok).collect::<Vec<_>>(), "no gap, nothing lost");
    assert_eq!((a.stats().implausible, a.stats().lost), (1, 0));
    assert!(!a.has_open_gap());
}

#[test]
fn a_far_jump_is_believed_only_when_a_later_packet_continues_it() {
    let opts = ArbiterOptions::default();
    let mut a = Arbiter::new(opts);
    let mut got = Vec::new();
    let far = 5_000_001u64;
    let p = packet_at(S, far, &[b"late"]);
    a.on_packet(Line::A, &Packet::parse(&p).unwrap(), 0, &mut collect(&mut got));
    assert!(!a.has_open_gap(), "one packet is not believed");
    a.on_packet(Line::B, &Packet::parse(&p).unwrap(), 1, &mut collect(&mut got));
    a.on_packet(Line::A, &Packet::parse(&p).unwrap(), 1, &mut collect(&mut got));
    assert!(!a.has_open_gap(), "copies of the same packet (a forger's too) confirm nothing");
    let next = packet_at(S, far + 1, &[b"next"]);
    a.on_packet(Line::A, &Packet::parse(&next).unwrap(), 2, &mut collect(&mut got));
    assert!(a.has_open_gap(), "the packet after it is held, as a jump not yet believed");
    let after = packet_at(S, far + 2, &[b"more"]);
    a.on_packet(Line::A, &Packet::parse(&after).unwrap(), 3, &mut collect(&mut got));
    a.poll(opts.give_up_ns + 10, &mut collect(&mut got));
    assert!(got.is_empty(), "a jump on one line's word opens no gap before confirm_ns: {got:?}");
    a.poll(opts.confirm_ns + 10, &mut collect(&mut got));
    assert_eq!(got, vec![Err((1, far + 1)), Ok(far + 1), Ok(far + 2)]);
}

/// When the followed session ends with a hole open, switching to the next session gives the
/// hole up explicitly and delivers what was held, before anything of the new session.
#[test]
fn switching_sessions_gives_up_the_old_sessions_holes_explicitly() {
    let mut a = Arbiter::new(ArbiterOptions::default());
    let mut got = Vec::new();
    for seq in [1u64, 2, 5] {
        let p = packet_at(S, seq, &[b"m"]);
        a.on_packet(Line::A, &Packet::parse(&p).unwrap(), 0, &mut collect(&mut got));
    }
    let mut end = tickbus_codecs::moldudp64::rerequest(&S, 7, 0);
    end.count = tickbus_codecs::moldudp64::END_OF_SESSION.into();
    // A server repeats its end of session.
    for t in 0..2 {
        a.on_packet(Line::A, &Packet::parse(zerocopy::IntoBytes::as_bytes(&end)).unwrap(), t, &mut collect(&mut got));
    }
    assert!(!a.session_ended(), "an end of session counts only after confirm_ns of quiet");
    let other = *b"SESSION002";
    let p = packet_at(other, 1, &[b"n"]);
    let c = ArbiterOptions::default().confirm_ns;
    a.poll(c, &mut collect(&mut got));
    assert!(a.session_ended());
    a.on_packet(Line::B, &Packet::parse(&p).unwrap(), c, &mut collect(&mut got));
    assert_eq!(got, vec![Ok(1), Ok(2), Err((3, 5)), Ok(5), Err((6, 7)), Ok(1)]);
    assert_eq!((a.stats().lost, a.stats().gaps), (3, 2));
    // The switch is announced between the old session's last output and the new one's first.
    let mut b = Arbiter::new(ArbiterOptions::default());
    let mut seen = Vec::new();
    for (s, seq) in [(S, 1u64), (S, 3)] {
        let p = packet_at(s, seq, &[b"m"]);
        b.on_packet(Line::A, &Packet::parse(&p).unwrap(), 0, &mut |o| seen.push(format!("{o:?}")));
    }
    for t in 0..2 {
        b.on_packet(Line::A, &Packet::parse(zerocopy::IntoBytes::as_bytes(&end)).unwrap(), t, &mut |_| {});
    }
    b.poll(c, &mut |o| seen.push(format!("{o:?}")));
    b.on_packet(Line::B, &Packet::parse(&p).unwrap(), c, &mut |o| seen.push(format!("{o:?}")));
    let kinds: Vec<&str> = seen.iter().map(|o| o.split([' ', '{']).next().unwrap()).collect();
    assert_eq!(kinds, ["Session", "Message", "Lost", "Message", "Lost", "Session", "Message"], "{seen:?}");
    // Once the new one ends too, the first (a replay of it) is never followed again.
    let mut end2 = tickbus_codecs::moldudp64::rerequest(&other, 2, 0);
    end2.count = tickbus_codecs::moldudp64::END_OF_SESSION.into();
    b.on_packet(Line::A, &Packet::parse(zerocopy::IntoBytes::as_bytes(&end2)).unwrap(), c, &mut |_| {});
    let replay = packet_at(S, 1, &[b"m"]);
    let before = b.stats().other_session;
    b.poll(3 * c, &mut |_| {});
    assert!(b.session_ended());
    b.on_packet(Line::A, &Packet::parse(&replay).unwrap(), 3 * c, &mut |o| panic!("{o:?} from a retired session"));
    assert_eq!((b.session(), b.stats().other_session), (Some(other), before + 1));
}

#[test]
fn another_session_is_ignored_until_the_followed_one_ends() {
    let mut a = Arbiter::new(ArbiterOptions::default());
    let mut got = Vec::new();
    let other = *b"SESSION002";
    for (s, seq) in [(S, 1u64), (other, 1), (S, 2)] {
        let p = packet_at(s, seq, &[b"m"]);
        a.on_packet(Line::A, &Packet::parse(&p).unwrap(), 0, &mut collect(&mut got));
    }
    assert_eq!((got.len(), a.stats().other_session), (2, 1));
    let mut end = tickbus_codecs::moldudp64::rerequest(&S, 3, 0);
    end.count = tickbus_codecs::moldudp64::END_OF_SESSION.into();
    a.on_packet(Line::A, &Packet::parse(zerocopy::IntoBytes::as_bytes(&end)).unwrap(), 0, &mut collect(&mut got));
    let p = packet_at(other, 1, &[b"n"]);
    a.on_packet(Line::A, &Packet::parse(&p).unwrap(), 1, &mut collect(&mut got));
    assert_eq!(a.session(), Some(S), "not before the end stood confirm_ns");
    let c = ArbiterOptions::default().confirm_ns;
    a.on_packet(Line::A, &Packet::parse(&p).unwrap(), c, &mut collect(&mut got));
    assert_eq!(a.session(), Some(other), "the next session starts after the end of the first");
    assert_eq!(got, vec![Ok(1), Ok(2), Ok(1)]);
}

#[test]
fn what_is_held_behind_a_gap_is_bounded_in_bytes() {
    let opts = ArbiterOptions { max_held_bytes: 1000, ..ArbiterOptions::default() };
    let mut a = Arbiter::new(opts);
    let mut got = Vec::new();
    let big = [7u8; 300];
    for seq in 2..=10u64 {
        let p = packet_at(S, seq, &[&big]);
        a.on_packet(Line::A, &Packet::parse(&p).unwrap(), 0, &mut collect(&mut got));
    }
    assert!(a.held_bytes <= 1000);
    assert!(a.stats().not_held > 0);
}

fn heartbeat(session: [u8; 10], next: u64) -> Vec<u8> {
    zerocopy::IntoBytes::as_bytes(&tickbus_codecs::moldudp64::rerequest(&session, next, 0)).to_vec()
}

fn end_of_session(session: [u8; 10], next: u64) -> Vec<u8> {
    let mut end = tickbus_codecs::moldudp64::rerequest(&session, next, 0);
    end.count = tickbus_codecs::moldudp64::END_OF_SESSION.into();
    zerocopy::IntoBytes::as_bytes(&end).to_vec()
}

/// The review's reproduction in virtual time: a real stream flows on both lines, one message a
/// millisecond, and one forged heartbeat a little ahead of it lands on line A. Before the fix
/// it raised the known end at once, the gap to it was given up after `give_up_ns` while the
/// real stream was still filling it, and every real message after the jump was dropped as a
/// duplicate (600 of 2,000 delivered here, the rest dropped after a "lost" range).
#[test]
fn one_forged_heartbeat_ahead_of_a_flowing_stream_loses_nothing() {
    let opts = ArbiterOptions::default();
    let mut a = Arbiter::new(opts);
    let mut got = Vec::new();
    let ms = 1_000_000u64;
    for seq in 1..=2000u64 {
        let p = packet_at(S, seq, &[&[seq as u8; 4]]);
        a.on_packet(Line::A, &Packet::parse(&p).unwrap(), seq * ms, &mut collect(&mut got));
        a.on_packet(Line::B, &Packet::parse(&p).unwrap(), seq * ms, &mut collect(&mut got));
        if seq == 100 {
            let forged = heartbeat(S, seq + 5000);
            a.on_packet(Line::A, &Packet::parse(&forged).unwrap(), seq * ms, &mut collect(&mut got));
        }
        a.poll(seq * ms + ms / 2, &mut collect(&mut got));
    }
    let hb = heartbeat(S, 2001);
    a.on_packet(Line::A, &Packet::parse(&hb).unwrap(), 2001 * ms, &mut collect(&mut got));
    a.poll(10_000 * ms, &mut collect(&mut got));
    assert_eq!(got.len(), 2000, "delivered {} of 2000", got.iter().filter(|g| g.is_ok()).count());
    assert_eq!(got, (1..=2000).map(Ok).collect::<Vec<_>>());
    assert_eq!(a.stats().lost, 0);
    assert!(!a.has_open_gap());
}

/// A forged end of session, ahead of the stream or at its edge, neither ends the session (as
/// `--exit-at-end` would, with `--session` too) nor lets another session be followed: before
/// the fix it was believed at any sequence, at once.
#[test]
fn a_forged_end_of_session_ends_nothing_and_switches_nothing() {
    let opts = ArbiterOptions { session: Some(S), ..ArbiterOptions::default() };
    let mut a = Arbiter::new(opts);
    let mut got = Vec::new();
    let ms = 1_000_000u64;
    for seq in 1..=10u64 {
        let p = packet_at(S, seq, &[&[seq as u8; 4]]);
        a.on_packet(Line::A, &Packet::parse(&p).unwrap(), seq * ms, &mut collect(&mut got));
        let forged = end_of_session(S, if seq % 2 == 0 { seq + 1 } else { seq + 400 });
        a.on_packet(Line::B, &Packet::parse(&forged).unwrap(), seq * ms, &mut collect(&mut got));
        assert!(!a.session_ended(), "a forged end of session at {seq} was believed");
    }
    a.poll(10 * ms + opts.confirm_ns - 1, &mut collect(&mut got));
    assert!(!a.session_ended(), "not before confirm_ns of quiet");
    let p = packet_at(S, 11, &[&[11u8; 4]]);
    a.on_packet(Line::A, &Packet::parse(&p).unwrap(), 11 * ms + opts.confirm_ns, &mut collect(&mut got));
    assert!(!a.session_ended(), "a later packet reaching past the end contradicts it");
    assert_eq!(got, (1..=11).map(Ok).collect::<Vec<_>>());
    assert!(a.stats().ends_contradicted >= 1);
    // Unpinned: the forger's end and a packet of its session switch nothing either.
    let mut b = Arbiter::new(ArbiterOptions::default());
    let mut got = Vec::new();
    let p = packet_at(S, 1, &[&[1u8; 4]]);
    b.on_packet(Line::A, &Packet::parse(&p).unwrap(), 0, &mut collect(&mut got));
    b.on_packet(Line::B, &Packet::parse(&end_of_session(S, 2)).unwrap(), 1, &mut collect(&mut got));
    let p = packet_at(S, 2, &[&[2u8; 4]]);
    b.on_packet(Line::A, &Packet::parse(&p).unwrap(), 2, &mut collect(&mut got));
    let fake = packet_at(*b"FORGED0001", 1, &[b"evil"]);
    b.on_packet(Line::B, &Packet::parse(&fake).unwrap(), opts.confirm_ns + 10, &mut collect(&mut got));
    assert_eq!(b.session(), Some(S));
    assert_eq!(got, vec![Ok(1), Ok(2)]);
}

/// A run of forged packets continuing each other, ahead of a real jump (a loss on both lines)
/// that the server then confirms, does not ride on it: the real line's next packet discards it.
#[test]
fn a_forged_run_is_discarded_by_the_real_lines_next_packet() {
    let mut a = Arbiter::new(ArbiterOptions::default());
    let mut got = Vec::new();
    for seq in [1u64, 2, 3, 4] {
        let p = packet_at(S, seq, &[&[seq as u8; 4]]);
        a.on_packet(Line::A, &Packet::parse(&p).unwrap(), seq, &mut collect(&mut got));
    }
    for k in 0..3u64 {
        let p = packet_at(S, 100 + k, &[b"evil"]);
        a.on_packet(Line::A, &Packet::parse(&p).unwrap(), 5, &mut collect(&mut got));
    }
    assert!(a.has_open_gap(), "held, not believed");
    let p = packet_at(S, 5, &[&[5u8; 4]]);
    a.on_packet(Line::A, &Packet::parse(&p).unwrap(), 6, &mut collect(&mut got));
    assert!(!a.has_open_gap(), "the line went back below the run: discarded");
    assert_eq!((a.stats().contradicted, a.held_bytes), (1, 0));
    a.poll(10 * ArbiterOptions::default().confirm_ns, &mut collect(&mut got));
    assert_eq!(got, (1..=5).map(Ok).collect::<Vec<_>>());
}

/// From a review: both lines lose 10..=19; A's real 20..=29 opens a jump, and a forged packet
/// continuing it exactly (30..=34, sent before A's real copy) joins it. The server's matching
/// copy of 20 used to believe the whole jump, forged bytes included, and the server's real 30..
/// were then dropped as copies. Now each server copy confirms only its own message, and the
/// first one that differs discards what the forger added.
#[test]
fn a_forged_packet_continuing_a_real_jump_is_not_believed_with_it() {
    let mut a = Arbiter::new(ArbiterOptions::default());
    let mut got = Vec::new();
    let real = |s: u64| [s as u8; 4];
    let pkt = |from: u64, to: u64, fake: bool| {
        let msgs: Vec<[u8; 4]> = (from..to).map(|s| if fake { [0xEE; 4] } else { real(s) }).collect();
        let refs: Vec<&[u8]> = msgs.iter().map(|m| &m[..]).collect();
        packet_at(S, from, &refs)
    };
    let feed = |a: &mut Arbiter, line, p: Vec<u8>, t, got: &mut Vec<(u64, Vec<u8>)>| {
        a.on_packet(line, &Packet::parse(&p).unwrap(), t, &mut |o| {
            if let Out::Message { sequence, message } = o {
                got.push((sequence, message.to_vec()))
            }
        })
    };
    feed(&mut a, Line::A, pkt(1, 10, false), 1, &mut got);
    feed(&mut a, Line::A, pkt(20, 30, false), 2, &mut got);
    feed(&mut a, Line::A, pkt(30, 35, true), 3, &mut got); // the forger, at the jump's edge
    feed(&mut a, Line::A, pkt(30, 40, false), 4, &mut got);
    for s in (10..40).step_by(5) {
        feed(&mut a, Line::Retransmit, pkt(s, s + 5, false), 10, &mut got);
    }
    a.poll(10 * ArbiterOptions::default().confirm_ns, &mut |_| {});
    assert_eq!(got, (1..40).map(|s| (s, real(s).to_vec())).collect::<Vec<_>>(), "forged bytes delivered");
    assert_eq!(a.stats().lost, 0);
}

/// From a review: both lines lose 10..=19, both send the same 20..=29 ahead, then A goes quiet.
/// B's copies were dropped as duplicates of A's, B's jump was believed holding nothing, and the
/// give-up reported 10..=29 lost, 20..=29 included. Now the bytes both lines brought are held
/// for both, and only 10..=19 is given up.
#[test]
fn bytes_both_lines_brought_ahead_are_not_given_up_with_the_hole() {
    let opts = ArbiterOptions::default();
    let mut a = Arbiter::new(opts);
    let mut got = Vec::new();
    let msgs: Vec<[u8; 4]> = (20..30u64).map(|s| [s as u8; 4]).collect();
    let refs: Vec<&[u8]> = msgs.iter().map(|m| &m[..]).collect();
    let ahead = packet_at(S, 20, &refs);
    let first: Vec<[u8; 4]> = (1..10u64).map(|s| [s as u8; 4]).collect();
    let first_refs: Vec<&[u8]> = first.iter().map(|m| &m[..]).collect();
    let head = packet_at(S, 1, &first_refs);
    for line in [Line::A, Line::B] {
        a.on_packet(line, &Packet::parse(&head).unwrap(), 1, &mut collect(&mut got));
        a.on_packet(line, &Packet::parse(&ahead).unwrap(), 2, &mut collect(&mut got));
    }
    a.on_packet(Line::B, &Packet::parse(&heartbeat(S, 30)).unwrap(), 3, &mut collect(&mut got));
    a.poll(opts.confirm_ns + 10, &mut collect(&mut got));
    a.poll(opts.confirm_ns + opts.give_up_ns + 20, &mut collect(&mut got));
    let mut want: Vec<Result<u64, (u64, u64)>> = (1..10).map(Ok).collect();
    want.push(Err((10, 20)));
    want.extend((20..30).map(Ok));
    assert_eq!(got, want);
}

/// From a review: an end of session forged at the stream's edge during a quiet spell was
/// believed after confirm_ns, since the real heartbeats carry the same sequence. A heartbeat at
/// the end's sequence is a server still in session: it contradicts the end. A heartbeat forged
/// ahead of the stream contradicts a real end of nothing.
#[test]
fn a_heartbeat_at_the_edge_contradicts_a_forged_end_and_one_ahead_contradicts_nothing() {
    let opts = ArbiterOptions::default();
    let mut a = Arbiter::new(ArbiterOptions { session: Some(S), ..opts });
    let mut got = Vec::new();
    let p = packet_at(S, 1, &[&[1u8; 4]]);
    a.on_packet(Line::A, &Packet::parse(&p).unwrap(), 0, &mut collect(&mut got));
    a.on_packet(Line::B, &Packet::parse(&end_of_session(S, 2)).unwrap(), 1, &mut collect(&mut got));
    for k in 1..=5u64 {
        let t = k * opts.confirm_ns / 2;
        a.on_packet(Line::A, &Packet::parse(&heartbeat(S, 2)).unwrap(), t, &mut collect(&mut got));
        assert!(!a.session_ended(), "a forged end stood against the real heartbeats at {t}");
    }
    // The real end, then a forger's heartbeats ahead of it: the end stands.
    let t0 = 3 * opts.confirm_ns;
    a.on_packet(Line::A, &Packet::parse(&end_of_session(S, 2)).unwrap(), t0, &mut collect(&mut got));
    for k in 1..=3u64 {
        let hb = heartbeat(S, 3);
        a.on_packet(Line::B, &Packet::parse(&hb).unwrap(), t0 + k * opts.confirm_ns / 3, &mut collect(&mut got));
    }
    a.poll(t0 + opts.confirm_ns + 1, &mut collect(&mut got));
    assert!(a.session_ended(), "a heartbeat ahead of the stream kept the real end from counting");
}

/// As [`collect`], checking each message's bytes are the real stream's (`[seq; 4]`): a forged
/// one is recorded as `Err((seq, 0))`.
fn checked(got: &mut Vec<Result<u64, (u64, u64)>>) -> impl FnMut(Out<'_>) + '_ {
    |o| match o {
        Out::Message { sequence, message } if message == [sequence as u8; 4] => got.push(Ok(sequence)),
        Out::Message { sequence, .. } => got.push(Err((sequence, 0))),
        Out::Lost { from, to } => got.push(Err((from, to))),
        Out::Rerequest { .. } | Out::Session { .. } => {}
    }
}

/// From the attacker review: line B silent (its link down), line A flowing. Two forged packets
/// continuing each other on B, far ahead of A, stood 2 s uncontradicted (B sent nothing below
/// them) and were believed by time: their bytes delivered in place of the real ones when A got
/// there. Now a jump is not believed by time while the other line is heard at the stream's edge:
/// A reaches the forged sequences and its bytes contradict them.
#[test]
fn a_jump_forged_on_a_silent_line_is_not_believed_while_the_other_line_flows() {
    let opts = ArbiterOptions::default();
    let mut a = Arbiter::new(opts);
    let mut got = Vec::new();
    let ms = 1_000_000u64;
    let real = |seq: u64| packet_at(S, seq, &[&[seq as u8; 4]]);
    a.on_packet(Line::A, &Packet::parse(&real(1)).unwrap(), 0, &mut checked(&mut got));
    for k in 0..2u64 {
        let p = packet_at(S, 40 + k, &[b"evil"]);
        a.on_packet(Line::B, &Packet::parse(&p).unwrap(), ms + k, &mut checked(&mut got));
    }
    // A sends one message every 100 ms: it reaches 41 after 4 s, twice the confirmation time.
    for seq in 2..=45u64 {
        a.on_packet(Line::A, &Packet::parse(&real(seq)).unwrap(), seq * 100 * ms, &mut checked(&mut got));
    }
    a.poll(46 * 100 * ms, &mut checked(&mut got));
    assert_eq!(got, (1..=45).map(Ok).collect::<Vec<_>>(), "the real bytes, none lost");
    assert_eq!((a.stats().believed_by_time, a.stats().contradicted), (0, 1));
}

/// The other side of the rule: a real jump (a hole both lines lost, no server) is still believed
/// by time once the other line has gone quiet at the edge, here because it jumped too.
#[test]
fn a_real_jump_on_both_lines_with_no_server_is_still_believed_by_time() {
    let opts = ArbiterOptions::default();
    let mut a = Arbiter::new(opts);
    let mut got = Vec::new();
    let ms = 1_000_000u64;
    let real = |seq: u64| packet_at(S, seq, &[&[seq as u8; 4]]);
    for seq in (1..=4).chain(8..=30) {
        for line in [Line::A, Line::B] {
            a.on_packet(line, &Packet::parse(&real(seq)).unwrap(), seq * 100 * ms, &mut collect(&mut got));
        }
    }
    a.poll(40 * 100 * ms, &mut collect(&mut got));
    let want: Vec<_> = (1..=4).map(Ok).chain([Err((5, 8))]).chain((8..=30).map(Ok)).collect();
    assert_eq!(got, want);
}
