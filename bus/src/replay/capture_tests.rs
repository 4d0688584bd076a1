//! Captures replayed as one stream (issue 25 item 11): both lines of a feed in one capture,
//! another session, a stray datagram far ahead and one stamped 0.
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tickbus_codecs::moldudp64::PacketBuilder;
use tickbus_codecs::pcap::{Endpoints, MoldPcapWriter};

use crate::replay::{open, Pace, Played, Player, Source, Window};

const DAY: &[u8; 10] = b"SESSION001";
const OTHER: &[u8; 10] = b"SESSION002";
/// A wall time of today (ns since the epoch).
const T0: u64 = 1_796_000_000_000_000_000;

/// A datagram of `session` holding messages `first..first + n`, each `m<sequence>`.
fn datagram(session: &[u8; 10], first: u64, n: u64) -> Vec<u8> {
    let mut b = PacketBuilder::new(*session, first, 1400);
    for s in first..first + n {
        assert!(b.push(format!("m{s}").as_bytes()));
    }
    b.take(|p| p.to_vec())
}

struct CaptureFile(PathBuf);

impl CaptureFile {
    /// A capture of datagrams (capture time, bytes), in that order.
    fn new(datagrams: &[(u64, Vec<u8>)]) -> CaptureFile {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("tickbus-replay-capture-{}-{n}.pcap", std::process::id()));
        let mut w = MoldPcapWriter::new(std::fs::File::create(&path).unwrap(), Endpoints::default()).unwrap();
        for (ts, d) in datagrams {
            w.write(*ts, d).unwrap();
        }
        w.finish().unwrap();
        CaptureFile(path)
    }
}

impl Drop for CaptureFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A feed's day as its capture holds it: messages 1..=40 in datagrams of two on line A, each
/// copied on line B one datagram later; another session's datagrams in between, and a stray
/// datagram 1000 ahead. The first datagram (a copy of line A's first, captured by a tool that
/// had no time yet) is stamped 0.
fn day() -> Vec<(u64, Vec<u8>)> {
    let mut v = vec![(0, datagram(DAY, 1, 2))];
    let mut prev = None;
    for (k, first) in (1..=40).step_by(2).enumerate() {
        let ts = T0 + k as u64 * 1_000;
        let d = datagram(DAY, first, 2);
        v.push((ts, d.clone()));
        if let Some(p) = prev.replace(d) {
            v.push((ts + 10, p)); // line B, a datagram behind
        }
        if k == 5 {
            v.push((ts + 20, datagram(OTHER, 1, 2)));
            v.push((ts + 25, datagram(OTHER, 7, 1)));
            v.push((ts + 30, datagram(DAY, 1_000, 1))); // stray, past any --to-seq
        }
    }
    v.push((T0 + 50_000, prev.unwrap()));
    v
}

fn read(source: &mut Source) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(i) = source.next().unwrap() {
        assert!(i.gap.is_none(), "no hole in this capture: {i:?}");
        out.push((i.sequence, i.payload.to_vec()));
    }
    out
}

#[test]
fn both_lines_another_session_and_a_stray_datagram_replay_as_one_stream_each_message_once() {
    let c = CaptureFile::new(&day());
    let mut s = open(&c.0, None, None).unwrap();
    let got = read(&mut s);
    let want: Vec<(u64, Vec<u8>)> = (1..=40).map(|q| (q, format!("m{q}").into_bytes())).collect();
    assert_eq!(got, want, "each message of the day once, in order (before: line B's copies twice)");
    let k = s.capture_counts().unwrap();
    assert_eq!((k.order.duplicates, k.order.jumps_discarded, k.other_session, k.missing), (42, 1, 2, 0), "{k:?}");

    // The session pinned: the other one's three messages, alone.
    let mut s = open(&c.0, None, None).unwrap();
    s.pin_session(*OTHER);
    let got: Vec<u64> = read(&mut s).into_iter().map(|(q, _)| q).collect();
    assert_eq!(got, vec![1, 2], "the other session alone (its 7, a jump nothing continued, is discarded)");
}

#[test]
fn a_window_ends_at_its_last_sequence_not_at_a_datagram_past_it() {
    let c = CaptureFile::new(&day());
    let window = Window { to_sequence: Some(30), ..Window::default() };
    let mut player = Player::new(open(&c.0, None, None).unwrap(), window, Pace::Max, 1.0, false);
    let mut published = Vec::new();
    let stop = AtomicBool::new(false);
    let played = player
        .run(
            |m| {
                published.push(String::from_utf8(m.to_vec()).unwrap());
                Ok(true)
            },
            |_, _, _| {},
            &stop,
        )
        .unwrap();
    let want: Vec<String> = (1..=30).map(|q| format!("m{q}")).collect();
    assert_eq!(
        published, want,
        "before: line B's copies replayed too, and the stray datagram at 1000 ended the replay"
    );
    assert!(!played.stopped);
}

/// Plays the capture at `path` at its recording's pace on another thread; fails if that takes
/// over 20 s (the day lasts 50 µs of capture time), which is what waiting for a stamp of 0's
/// successor looked like.
fn played_at_recorded_pace(path: &std::path::Path, what: &str) -> Played {
    let path = path.to_owned();
    tickbus_testkit::within(Duration::from_secs(20), what, move || {
        let s = open(&path, None, None).unwrap();
        let mut p =
            Player::new(s, Window::default(), Pace::AsRecorded { speed: 1.0 }, crate::time::ticks_per_ns(), false);
        p.run(|_| Ok(true), |_, _, _| {}, &AtomicBool::new(false)).unwrap()
    })
}

#[test]
fn a_capture_whose_first_datagram_is_stamped_0_replays_at_its_own_pace_not_in_56_years() {
    let c = CaptureFile::new(&day());
    let played = played_at_recorded_pace(&c.0, "the replay waited for the stamp-0 datagram's successor");
    assert_eq!(played.published, 40);
    assert_eq!(played.cut_short, 1, "the step from 0 to today");

    // Line A's datagram of 11..12 stamped 0 in the middle of the day: waited out neither way.
    let mut d = day();
    assert_eq!(d[10].1, datagram(DAY, 11, 2));
    d[10].0 = 0;
    let c2 = CaptureFile::new(&d);
    let played = played_at_recorded_pace(&c2.0, "a datagram stamped 0 mid-day stalled the replay");
    assert_eq!((played.published, played.cut_short), (40, 3), "0 to today, back to 0, on to today: {played:?}");
}
