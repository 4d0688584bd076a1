use std::collections::BTreeMap;

use super::*;

fn day(cfg: DayConfig) -> Vec<u8> {
    let mut out = Vec::new();
    write_itch(cfg, &mut out).unwrap();
    out
}

#[test]
fn the_same_seed_gives_the_same_bytes_and_another_seed_does_not() {
    let cfg = DayConfig::new(11, 20, 10_000);
    let a = day(cfg);
    assert_eq!(a, day(cfg));
    assert_ne!(a, day(DayConfig { seed: 12, ..cfg }));
}

#[test]
fn a_day_has_the_shape_of_a_day() {
    let cfg = DayConfig::new(4, 50, 100_000);
    let bytes = day(cfg);
    let mut counts: BTreeMap<u8, u64> = BTreeMap::new();
    let mut per_stock = vec![0u64; 51];
    let mut last_ts = 0;
    let mut system = Vec::new();
    for rec in frames(&bytes) {
        let m = rec.unwrap().message;
        *counts.entry(m.code()).or_default() += 1;
        let ts = m.header().timestamp_ns();
        assert!(ts >= last_ts, "timestamps never go back");
        last_ts = ts;
        per_stock[usize::from(m.header().stock_locate.get())] += 1;
        if let ItchMessage::SystemEvent(s) = m {
            system.push(s.event_code);
        }
    }
    assert_eq!(system, b"OSQMEC");
    assert_eq!(counts[&b'R'], 50);
    assert_eq!(counts[&b'Q'], 100, "an opening and a closing cross per stock");
    let flow: u64 = b"AFEDXUCP".iter().map(|c| counts.get(c).copied().unwrap_or(0)).sum();
    assert!(flow >= cfg.messages, "{counts:?}");
    let adds = counts[&b'A'] + counts[&b'F'];
    assert!(adds as f64 > 0.3 * flow as f64 && adds as f64 <= 0.6 * flow as f64, "{counts:?}");
    assert!(counts[&b'D'] > counts[&b'U'] && counts[&b'U'] > counts[&b'X'], "{counts:?}");
    assert!(counts[&b'E'] > counts[&b'C'] && counts[&b'P'] > 0 && counts[&b'F'] > 0, "{counts:?}");
    // Zipf popularity: the busiest stock sees far more than the median one.
    let mut sorted = per_stock[1..].to_vec();
    sorted.sort();
    assert!(sorted[49] > 5 * sorted[25], "{sorted:?}");
}

#[test]
fn a_day_with_a_build_up_reaches_its_peak_then_settles_and_one_without_is_unchanged() {
    // The build-up draws an extra coin only while building: a day without it is the same
    // bytes as before the knob existed (length and FNV-1a of this day as generated at 36fa518).
    let plain = DayConfig::new(6, 200, 40_000);
    let bytes = day(plain.with_peak_orders(0));
    let fnv = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3));
    assert_eq!((bytes.len(), fnv), (1_453_376, 0x0c57_2137_6b60_9e72));

    let cfg = plain.with_peak_orders(10_000);
    let mut g = DayGenerator::new(cfg);
    let (mut peak, mut at, mut k) = (0, 0, 0u64);
    while g.next_message().is_some() {
        k += 1;
        let n = g.book().resting_orders();
        if n > peak {
            (peak, at) = (n, k);
        }
    }
    assert!((10_000..10_100).contains(&peak), "built to the peak and no further: {peak}");
    assert!(at < k / 2, "the peak comes first, then the flow settles: peak at message {at} of {k}");
    assert!(g.book().resting_orders() < peak, "orders leave after the peak");
    // Without a build-up, the same flow rests far fewer orders at any time.
    let mut g = DayGenerator::new(plain);
    let mut most = 0;
    while g.next_message().is_some() {
        most = most.max(g.book().resting_orders());
    }
    assert!(most < 5_000, "{most}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]
    /// generate -> encode -> decode -> encode gives the same bytes, through the ITCH file and
    /// through a pcap of MoldUDP64, for any seed and shape of day.
    #[test]
    fn generated_days_round_trip_through_itch_and_pcap(seed in 0u64..u64::MAX, stocks in 1u16..40, messages in 0u64..4_000) {
        let cfg = DayConfig::new(seed, stocks, messages);
        let itch = day(cfg);
        let mut again = ItchFileWriter::new(Vec::new());
        let n = ItchFileReader::new(&itch[..]).for_each(|r| again.write_bytes(r.message.as_bytes()).unwrap()).unwrap();
        proptest::prop_assert_eq!(&again.finish().unwrap(), &itch);

        let mut pcap = Vec::new();
        let sum = write_pcap(cfg, &mut pcap, Endpoints::default()).unwrap();
        proptest::prop_assert_eq!(sum.messages, n);
        let mut from_pcap = ItchFileWriter::new(Vec::new());
        let mut r = crate::pcap::CaptureReader::new(&pcap[..]).unwrap();
        while let Some(d) = r.next_datagram().unwrap() {
            for (_, m) in crate::moldudp64::Packet::parse(d.payload).unwrap().messages() {
                from_pcap.write_bytes(m).unwrap();
            }
        }
        proptest::prop_assert_eq!(&from_pcap.finish().unwrap(), &itch);
    }
}
