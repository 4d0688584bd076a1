//! The operator CLI against a real ring.
use std::process::Command;

use tickbus::shm::{self, HugepagePolicy, ShmOptions};
use tickbus::{Mode, RingConfig};

#[test]
fn inspect_shows_layout_publisher_and_consumers_then_rm_removes_the_ring() {
    let tag = format!("tickbus-cli-{}", std::process::id());
    let opts = ShmOptions::new(format!("/dev/hugepages/{tag}"), format!("/dev/shm/{tag}"), HugepagePolicy::Preferred);
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

#[test]
fn inspect_of_a_hand_made_ring_claiming_100000_consumers_is_an_error_not_a_panic() {
    let tag = format!("tickbus-cli-bad-{}", std::process::id());
    let opts = ShmOptions::new(format!("/dev/hugepages/{tag}"), format!("/dev/shm/{tag}"), HugepagePolicy::Never);
    drop(shm::open_publisher("md", &RingConfig::for_payload(Mode::Lossy, 4, 64, 16), &opts).unwrap());
    let path = opts.fallback_dir.join("md");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[48..56].copy_from_slice(&100_000u64.to_le_bytes()); // descriptor.max_consumers
    std::fs::write(&path, &bytes).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tickbus"))
        .args(["ring", "inspect", "md"])
        .env("TICKBUS_HUGEPAGE_DIR", &opts.hugepage_dir)
        .env("TICKBUS_SHM_DIR", &opts.fallback_dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&opts.fallback_dir);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("max_consumers") && err.contains(&path.display().to_string()), "{err}");
}

/// The library's diagnostics reach the CLI's logger: a ring falling back to 4 KiB pages is a
/// warning by default, and `-q` silences it (the library itself prints nothing).
#[test]
fn library_warnings_go_through_the_logger_and_q_silences_them() {
    let tag = format!("tickbus-cli-log-{}", std::process::id());
    let tmp = std::env::temp_dir().join(&tag);
    std::fs::create_dir_all(&tmp).unwrap();
    let itch = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data/itch/ex20101224.TEST_ITCH_50");
    let run = |quiet: bool, ring: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tickbus"));
        if quiet {
            c.arg("-q");
        }
        // Not a hugetlbfs folder: the ring falls back to /dev/shm, which is worth a warning.
        c.args(["feed", "--ring", ring, "--file", itch, "--json"])
            .env("TICKBUS_HUGEPAGE_DIR", tmp.join("not-hugetlbfs"))
            .env("TICKBUS_SHM_DIR", format!("/dev/shm/{tag}"))
            .output()
            .unwrap()
    };
    let loud = run(false, "loud");
    assert!(loud.status.success());
    let said = String::from_utf8_lossy(&loud.stderr);
    assert!(said.contains("WARN") && said.contains("falls back to") && said.contains("4 KiB pages"), "{said}");
    let quiet = run(true, "quiet");
    assert!(quiet.status.success());
    assert_eq!(String::from_utf8_lossy(&quiet.stderr), "", "-q leaves errors only");
    let _ = std::fs::remove_dir_all(&tmp);
    let _ = std::fs::remove_dir_all(format!("/dev/shm/{tag}"));
}
