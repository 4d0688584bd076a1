//! Every example runs, as a user would run it, and prints what its doc says (so none rots). The
//! examples are built by `cargo test` itself (all targets of the package); this finds them
//! beside the test binary.
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

static ONE: Mutex<()> = Mutex::new(());

fn run(example: &str, args: &[&str]) -> String {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_owned();
    let bin: PathBuf = deps.parent().unwrap().join("examples").join(example);
    assert!(bin.exists(), "{} is not built: run the suite with `cargo test` (it builds every example)", bin.display());
    let tag = format!("tickbus-example-{example}-{}", std::process::id());
    let (huge, shm) = (format!("/dev/hugepages/{tag}"), format!("/dev/shm/{tag}"));
    let out =
        Command::new(&bin).args(args).env("TICKBUS_HUGEPAGE_DIR", &huge).env("TICKBUS_SHM_DIR", &shm).output().unwrap();
    let _ = std::fs::remove_dir_all(&huge);
    let _ = std::fs::remove_dir_all(&shm);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{example}: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[test]
fn shm_pubsub_delivers_every_quote_across_processes() {
    let out = run("shm_pubsub", &[]);
    assert!(out.contains("publisher: sent 100000 quotes"), "{out}");
    assert!(out.contains("subscriber: received 100000 quotes in order, last bid 149"), "{out}");
}

#[test]
fn reliable_orders_loses_nothing_under_back_pressure() {
    let out = run("reliable_orders", &[]);
    assert!(out.contains("sent 20000 orders; the ring was full"), "{out}");
    assert!(out.contains("gateway received 20000 orders in order"), "{out}");
    let full: u64 = out.split("full ").nth(1).and_then(|s| s.split(' ').next()).unwrap().parse().unwrap();
    assert!(full > 0, "a 64-slot ring and a pausing consumer must push back: {out}");
}

#[test]
fn pinned_agents_pin_and_deliver_every_message() {
    let out = run("pinned_agents", &[]);
    assert!(out.contains("publisher agent on core ") && out.contains("(busy-spin)"), "{out}");
    assert!(out.contains("200000 messages published, 200000 received"), "{out}");
}

#[test]
fn itch_book_builds_the_book_of_a_day_and_of_the_third_party_file() {
    let out = run("itch_book", &[]);
    let first = out.lines().next().unwrap();
    assert!(first.starts_with("54910 messages,") && first.ends_with(" 0 misfits"), "{out}");
    assert!(out.lines().count() > 1, "a stock's best prices are shown: {out}");
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data/itch/ex20101224.TEST_ITCH_50");
    let out = run("itch_book", &[file]);
    assert!(out.starts_with("12012 messages,"), "{out}");
}
