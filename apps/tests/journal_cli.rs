//! `tickbus journal cat` and `journal verify` as a script would run them: a journal of decoded
//! order adds and a gap, cut by sequence and by time; verify's exit code on a sound journal, on
//! a flipped bit (naming the file) and on a bad index entry.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tickbus::journal::{segment_path, JournalMeta, JournalOptions, JournalWriter};
use tickbus_codecs::md::OrderAdd;
use tickbus_codecs::Message;
use zerocopy::IntoBytes;

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("tickbus-jcli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tickbus(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tickbus")).args(args).output().unwrap()
}

/// 3,000 positions of order adds (a gap of 10 at 1,000), received 1 ms apart.
fn written(dir: &Path) {
    let mut opts = JournalOptions::default();
    (opts.segment_bytes, opts.index_every) = (64 << 10, 64);
    let meta = JournalMeta { stream_id: 1, source: "test".into(), ticks_per_ns: tickbus::time::ticks_per_ns() };
    let mut w = JournalWriter::open(dir, meta, opts).unwrap();
    let t0 = w.now();
    let ms = (tickbus::time::ticks_per_ns() * 1e6) as u64;
    let mut s = 0;
    while s < 3000 {
        if s == 1000 {
            w.append_gap(1000, 10, t0 + s * ms).unwrap();
            s += 10;
            continue;
        }
        let mut m = OrderAdd::new();
        m.order_id = 7_000 + s;
        m.qty = s;
        m.header_mut().stamp(1, s, 0);
        w.append(s, 0, t0 + s * ms, m.as_bytes()).unwrap();
        s += 1;
    }
    w.close().unwrap();
}

fn lines(o: &Output) -> Vec<String> {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap().lines().map(str::to_owned).collect()
}

#[test]
fn cat_prints_the_records_asked_for_by_sequence_and_by_time() {
    let d = Dir::new("cat");
    written(&d.0);
    let j = d.0.to_str().unwrap();
    let got = lines(&tickbus(&["journal", "cat", j, "--from", "995", "--to", "1012", "--json"]));
    let v: Vec<serde_json::Value> = got.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let seqs: Vec<u64> = v.iter().map(|r| r["sequence"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [995, 996, 997, 998, 999, 1000, 1010, 1011, 1012]);
    assert_eq!(v[0]["type"], "order_add");
    assert_eq!(v[0]["order_id"], 7_995);
    assert_eq!(v[0]["qty"], 995);
    assert_eq!(v[5]["type"], "gap");
    assert_eq!(v[5]["gap"], 10);
    // By time: the receive times of records 996 and 998, as cat printed them.
    let at = |k: usize| v[k]["received"].as_str().unwrap().to_owned();
    let (a, b) = (at(1), at(3)); // 996 and 998
    let got = lines(&tickbus(&["journal", "cat", j, "--from", &a, "--to", &b]));
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(got[0].trim_start().starts_with("996 ") && got[0].contains("order_add") && got[0].contains("qty=996"));
    assert!(got[2].trim_start().starts_with("998 "), "{got:?}");
    // A bound that is neither says what it takes.
    let o = tickbus(&["journal", "cat", j, "--from", "half past ten"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("RFC 3339"));
}

#[test]
fn verify_exits_zero_only_for_a_sound_journal_and_names_what_is_wrong() {
    let d = Dir::new("verify");
    written(&d.0);
    let j = d.0.to_str().unwrap();
    let o = tickbus(&["journal", "verify", j, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&lines(&o).join("\n").into_bytes()).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["messages"], 2990);
    assert_eq!(v["missed"], 10);

    // A bad index entry: exit 1, the entry named; the records still read.
    let idx = d.0.join("0000000000.idx");
    let mut b = std::fs::read(&idx).unwrap();
    b[24 + 16] ^= 8; // entry 1's offset, 8 bytes off
    std::fs::write(&idx, &b).unwrap();
    let o = tickbus(&["journal", "verify", j]);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("BAD INDEX") && out.contains("entry 1"), "{out}");

    // A flipped bit in a record: exit 1, the file and offset named.
    let seg = segment_path(&d.0, 1);
    let mut b = std::fs::read(&seg).unwrap();
    let at = b.len() / 2;
    b[at] ^= 1;
    std::fs::write(&seg, &b).unwrap();
    let o = tickbus(&["journal", "verify", j]);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("DAMAGED") && out.contains(&seg.display().to_string()), "{out}");
}
