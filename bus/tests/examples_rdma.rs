//! The RDMA examples run in the Soft-RoCE guest (tools/test.sh) and print what their docs say:
//! rdma-rc delivers every message in order; ud-mcast recovers what a subscriber that stopped
//! polling lost. Like every RDMA suite, ignored (with the reason) on a host without devices and
//! a failure in the guest, where TICKBUS_REQUIRE_RDMA=1 is set.
use std::path::PathBuf;
use std::process::Command;

use libtest_mimic::{Failed, Trial};

mod common;

fn main() {
    let tests = vec![
        Trial::test("rdma_pubsub_delivers_every_message_in_order", rdma_pubsub),
        Trial::test("mcast_pubsub_recovers_what_a_stalled_subscriber_lost", mcast_pubsub),
    ];
    common::rdma_test_main("examples_rdma", "TICKBUS_EX_ROLE", |_| Ok(()), tests);
}

/// Runs an example binary (built beside this test by `cargo test`) on the rig's two devices.
fn run(example: &str) -> Result<String, Failed> {
    let deps = std::env::current_exe()?.parent().ok_or("no folder")?.to_owned();
    let bin: PathBuf = deps.parent().ok_or("no folder")?.join("examples").join(example);
    if !bin.exists() {
        return Err(format!("{} is not built: build the examples with --features rdma", bin.display()).into());
    }
    let (local, peer) = common::rdma_devices();
    let out = Command::new(&bin).env("TICKBUS_RDMA_DEVICE", local).env("TICKBUS_RDMA_PEER_DEVICE", peer).output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!("{example} failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr)).into());
    }
    eprintln!("{stdout}");
    Ok(stdout)
}

fn rdma_pubsub() -> Result<(), Failed> {
    let out = run("rdma_pubsub")?;
    assert!(out.contains("publisher: sent 20000 messages by RDMA WRITE"), "{out}");
    assert!(out.contains("subscriber: received 20000 messages in order, none missing"), "{out}");
    Ok(())
}

fn mcast_pubsub() -> Result<(), Failed> {
    let out = run("mcast_pubsub")?;
    assert!(out.contains("publisher: sent 300 messages by UD multicast"), "{out}");
    let line = out.lines().find(|l| l.starts_with("subscriber:")).ok_or("no subscriber line")?;
    assert!(line.contains("received 300 messages in order") && line.ends_with(", 0 lost"), "{line}");
    let recovered: u64 = line.split('(').nth(1).and_then(|s| s.split(' ').next()).ok_or("no count")?.parse()?;
    assert!(recovered >= 300 - 64, "fewer recovered than the 64 receive slots could not hold: {line}");
    Ok(())
}
