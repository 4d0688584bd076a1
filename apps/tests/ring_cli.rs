//! The operator CLI against a real ring.
use std::process::Command;

use tickbus::shm::{self, HugepagePolicy, ShmOptions};
use tickbus::{Mode, RingConfig};

#[test]
fn inspect_shows_layout_publisher_and_consumers_then_rm_removes_the_ring() {
    let tag = format!("tickbus-cli-{}", std::process::id());
    let opts = ShmOptions {
        hugepage_dir: format!("/dev/hugepages/{tag}").into(),
        fallback_dir: format!("/dev/shm/{tag}").into(),
        hugepages: HugepagePolicy::Preferred,
    };
    let mut p = shm::open_publisher("orders", &RingConfig::for_payload(Mode::Reliable, 4, 64, 16), &opts).unwrap();
    for _ in 0..5 {
        p.publish(&[1; 64]).unwrap();
    }
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_tickbus"))
            .args(args)
            .env("TICKBUS_HUGEPAGE_DIR", &opts.hugepage_dir)
            .env("TICKBUS_SHM_DIR", &opts.fallback_dir)
            .output()
            .unwrap()
    };
    let out = run(&["ring", "inspect", "orders"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("Reliable, stream 4, 16 slots x 128 B"), "{text}");
    assert!(text.contains(&format!("live (pid {})", std::process::id())), "{text}");
    assert!(text.contains("5 messages published"), "{text}");
    assert!(text.contains("consumer  0: position 0 (5 behind), no consumer attached"), "{text}");
    drop(p);
    assert!(run(&["ring", "rm", "orders"]).status.success());
    let gone = run(&["ring", "inspect", "orders"]);
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("is its publisher running?"));
    let _ = std::fs::remove_dir_all(&opts.hugepage_dir);
    let _ = std::fs::remove_dir_all(&opts.fallback_dir);
}
