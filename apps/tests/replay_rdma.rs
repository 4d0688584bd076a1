//! `tickbus replay --dest` onto rdma-rc and ud-mcast, recorded on the other device by `tickbus
//! record --rdma` / `--mcast`, in the Soft-RoCE guest (rxe0 and rxe1): the second journal holds
//! every message of the first, in order, and the first's hole as a FeedGap message in its place.
//! Ignored (with the reason) on a host without two RDMA devices; a failure in the guest, where
//! TICKBUS_REQUIRE_RDMA=1 is set.
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Failed, Trial};
use tickbus::journal::{JournalMeta, JournalOptions, JournalReader, JournalWriter, Kind};
use tickbus_codecs::md::FeedGap;
use tickbus_codecs::Message;

mod common;

const TOKEN: &str = "replay-rdma-test";

fn main() {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    let skip = tickbus::rdma::device_names().len() < 2 && std::env::var_os("TICKBUS_REQUIRE_RDMA").is_none();
    if skip {
        eprintln!("replay_rdma: needs two RDMA devices (the Soft-RoCE guest: tools/test.sh): tests ignored");
    }
    let tests = vec![
        Trial::test("a_journal_replayed_over_rdma_rc_is_recorded_whole_with_its_gap", || {
            over("rdma-rc://127.0.0.1:47611/5?reliable", &["--rdma", "127.0.0.1:47611", "--stream", "5"], &[])
        }),
        Trial::test("a_journal_replayed_over_ud_mcast_is_recorded_whole_with_its_gap", || {
            // Paced: the recorder's receive queue holds what it has not taken yet, and it joins
            // without recovery (`record --mcast` takes no recovery address).
            over(
                "ud-mcast://239.77.62.1/6?recovery=127.0.0.1:47612",
                &["--mcast", "239.77.62.1", "--stream", "6"],
                &["--rate", "20000"],
            )
        }),
    ];
    libtest_mimic::run(&args, tests.into_iter().map(|t| t.with_ignored_flag(skip)).collect()).exit();
}

fn fill(seq: u64) -> Vec<u8> {
    (0..64u64).map(|k| (seq.wrapping_mul(31) ^ k) as u8).collect()
}

/// Messages 0..100 without 50..55 (a gap record of 5 there).
fn journal(dir: &Path) -> Result<(), Failed> {
    let meta = JournalMeta { stream_id: 5, source: "replay_rdma".into(), ticks_per_ns: tickbus::time::ticks_per_ns() };
    let mut w = JournalWriter::open(dir, meta, JournalOptions::default())?;
    let t = w.now();
    for seq in (0..50).chain(55..100) {
        if seq == 55 {
            w.append_gap(50, 5, t + 50)?;
        }
        w.append(seq, seq, t + seq, &fill(seq))?;
    }
    w.close()?;
    Ok(())
}

/// The messages a journal holds, in order, and its gap records' total.
fn messages(dir: &Path) -> (Vec<Vec<u8>>, u64) {
    let Ok(r) = JournalReader::open(dir) else { return (Vec::new(), 0) };
    let (mut out, mut missed) = (Vec::new(), 0);
    let mut c = r.cursor();
    while let Ok(Some(rec)) = c.next() {
        match rec.kind {
            Kind::Message(m) => out.push(m.to_vec()),
            Kind::Gap { count } => missed += count,
            Kind::End => {}
        }
    }
    (out, missed)
}

fn over(uri: &str, record_from: &[&str], pace: &[&str]) -> Result<(), Failed> {
    let d = tickbus::rdma::device_names();
    let dev = |i: usize, var: &str| std::env::var(var).ok().or_else(|| d.get(i).cloned()).ok_or("no RDMA device");
    let (replay_dev, record_dev) = (dev(0, "TICKBUS_RDMA_DEVICE")?, dev(1, "TICKBUS_RDMA_PEER_DEVICE")?);
    let dir = std::env::temp_dir().join(format!("replay-rdma-{}-{}", std::process::id(), record_from[0]));
    let _ = std::fs::remove_dir_all(&dir);
    let (src, dst) = (dir.join("source"), dir.join("recorded"));
    journal(&src)?;
    // The recorder first (it waits for the publisher), on the other device.
    let mut rec_args = vec!["record", "--journal", dst.to_str().ok_or("path")?, "--token", TOKEN, "--json"];
    rec_args.extend(record_from);
    let recorder = Command::new(env!("CARGO_BIN_EXE_tickbus"))
        .args(&rec_args)
        .env("TICKBUS_RDMA_DEVICE", &record_dev)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let recorder = RunningChild(Some(recorder));
    if record_from[0] == "--mcast" {
        std::thread::sleep(Duration::from_secs(1)); // joined before the first datagram
    }
    let mut args =
        vec!["replay", src.to_str().ok_or("path")?, "--dest", uri, "--device", &replay_dev, "--token", TOKEN];
    args.extend(["--wait-secs", "60", "--json"]);
    if pace.is_empty() {
        args.push("--max");
    } else {
        args.extend(pace);
    }
    let replay = match common::finish(common::spawn(&args), "replay") {
        Ok(r) => r,
        Err(e) => {
            let out = recorder.stop()?;
            return Err(format!("{e}\nthe recorder ({}): {}", out.status, String::from_utf8_lossy(&out.stderr)).into());
        }
    };
    assert_eq!((replay["published"].as_u64(), replay["gap_records"].as_u64()), (Some(95), Some(1)), "{replay}");
    // The recorder has everything once its journal holds 96 messages; then it is stopped.
    let deadline = Instant::now() + Duration::from_secs(60);
    while messages(&dst).0.len() < 96 {
        if Instant::now() > deadline {
            let (got, missed) = messages(&dst);
            return Err(format!("the recording holds {} of 96 messages ({missed} missed)", got.len()).into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = recorder.stop()?;
    assert!(out.status.success(), "record failed: {}", String::from_utf8_lossy(&out.stderr));
    let (got, missed) = messages(&dst);
    assert_eq!((got.len(), missed), (96, 0), "every message, no gap record: the hole travelled as a message");
    for (k, seq) in (0..50).enumerate() {
        assert_eq!(got[k], fill(seq), "message {seq}");
    }
    let g = FeedGap::parse(&got[50]).map_err(|e| format!("the hole is no FeedGap: {e}"))?;
    assert_eq!((g.first_sequence, g.count), (50, 5));
    for (k, seq) in (55..100).enumerate() {
        assert_eq!(got[51 + k], fill(seq), "message {seq}");
    }
    eprintln!("{uri}: 95 messages and the gap replayed and recorded whole");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A recorder, stopped with SIGTERM (killed if the test fails first).
struct RunningChild(Option<std::process::Child>);

impl RunningChild {
    fn stop(mut self) -> Result<std::process::Output, Failed> {
        let c = self.0.take().ok_or("stopped twice")?;
        // SAFETY: a signal to our own child, not yet waited for.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        Ok(c.wait_with_output()?)
    }
}

impl Drop for RunningChild {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
