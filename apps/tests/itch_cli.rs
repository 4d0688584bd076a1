//! `tickbus itch inspect|generate` on real files: the third-party ITCH file, generated days, and
//! damaged inputs.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tickbus")).args(args).output().unwrap()
}

fn json(path: &Path) -> Value {
    let out = run(&["itch", "inspect", "--json", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn counts(v: &Value) -> Vec<(String, u64)> {
    v["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["code"].as_str().unwrap().to_owned(), t["count"].as_u64().unwrap()))
        .collect()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tickbus-itch-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn inspect_counts_the_third_party_file_exactly() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/itch/ex20101224.TEST_ITCH_50");
    let v = json(&f);
    assert_eq!(v["messages"], 12_012);
    let want = [
        ("S", 6),
        ("R", 3),
        ("H", 3),
        ("A", 4_997),
        ("F", 3),
        ("E", 198),
        ("X", 45),
        ("D", 1_745),
        ("U", 12),
        ("P", 5_000),
    ];
    assert_eq!(counts(&v), want.map(|(c, n)| (c.to_owned(), n)).to_vec());
    let stocks: Vec<&str> = v["stocks"].as_array().unwrap().iter().map(|s| s["stock"].as_str().unwrap()).collect();
    assert_eq!(stocks, ["BOB", "CHAR", "ALC"]);
    assert_eq!(v["first_timestamp_ns"], 11_202_475_298_710u64);
    let text = String::from_utf8(run(&["itch", "inspect", f.to_str().unwrap()]).stdout).unwrap();
    assert!(text.contains("first 03:06:42.475298710"), "{text}");
    let p_line = text.lines().find(|l| l.starts_with("P ")).unwrap();
    assert_eq!(p_line.split_whitespace().collect::<Vec<_>>(), ["P", "trade", "(non-cross)", "5000"]);
}

#[test]
fn a_generated_day_inspects_the_same_as_an_itch_file_and_as_a_capture() {
    let (itch, pcap) = (tmp("day.itch"), tmp("day.pcap"));
    let out = run(&[
        "itch",
        "generate",
        "--seed",
        "7",
        "--stocks",
        "12",
        "--messages",
        "30000",
        "--itch",
        itch.to_str().unwrap(),
        "--pcap",
        pcap.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (a, b) = (json(&itch), json(&pcap));
    assert_eq!(counts(&a), counts(&b));
    assert_eq!(a["stocks"], b["stocks"]);
    assert_eq!(a["per_minute"], b["per_minute"]);
    assert_eq!(b["capture"]["gaps"], 0);
    assert_eq!(b["capture"]["end_of_session"], 1);
    assert_eq!(b["capture"]["sessions"][0], "SYNTHDAY01");
    let busiest =
        a["per_minute"].as_object().unwrap().iter().max_by_key(|(_, n)| n.as_u64().unwrap()).unwrap().0.clone();
    let minute: u32 = busiest.parse().unwrap();
    assert!(!(600..930).contains(&minute), "busiest minute {minute} is at the open or the close");
}

#[test]
fn damaged_inputs_are_reported_with_the_offset_and_what_came_before_is_counted() {
    let itch = tmp("cut.itch");
    assert!(run(&["itch", "generate", "--messages", "100", "--stocks", "2", "--itch", itch.to_str().unwrap()])
        .status
        .success());
    let mut bytes = std::fs::read(&itch).unwrap();
    let full = bytes.len();
    bytes.truncate(full - 5);
    std::fs::write(&itch, &bytes).unwrap();
    let out = run(&["itch", "inspect", itch.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("file ends inside a message") && err.contains("offset"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("STOPPED:"), "{text}");

    let junk = tmp("junk.bin");
    std::fs::write(&junk, b"\x00\x05Zhello").unwrap();
    let err = String::from_utf8_lossy(&run(&["itch", "inspect", junk.to_str().unwrap()]).stderr).into_owned();
    assert!(err.contains("offset 2: unknown ITCH message type 0x5a"), "{err}");
    let missing = run(&["itch", "inspect", "/nonexistent/file"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot open /nonexistent/file"));
}

#[test]
fn a_dropped_datagram_shows_as_a_gap_with_its_missing_messages() {
    use tickbus_codecs::pcap::{CaptureReader, Endpoints, MoldPcapWriter};
    let src = tmp("src.pcap");
    assert!(run(&["itch", "generate", "--messages", "2000", "--stocks", "3", "--pcap", src.to_str().unwrap()])
        .status
        .success());
    let bytes = std::fs::read(&src).unwrap();
    let mut r = CaptureReader::new(&bytes[..]).unwrap();
    let mut w = MoldPcapWriter::new(Vec::new(), Endpoints::default()).unwrap();
    let mut dropped = 0;
    while let Some(d) = r.next_datagram().unwrap() {
        if d.packet == 500 {
            dropped = u16::from_be_bytes([d.payload[18], d.payload[19]]);
            continue;
        }
        w.write(d.ts_ns, d.payload).unwrap();
    }
    let holed = tmp("holed.pcap");
    std::fs::write(&holed, w.finish().unwrap()).unwrap();
    let v = json(&holed);
    assert!(dropped > 0);
    assert_eq!(v["capture"]["gaps"], 1);
    assert_eq!(v["capture"]["missing_messages"], u64::from(dropped));
}
