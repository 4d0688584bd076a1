//! Ring files and folders planted or tampered with by another local user, and operations that
//! must not change a ring they refuse. Tests run as root, so "another user" is played by
//! chown/chmod to a uid that is not ours.
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use super::tests::Dirs;
use super::*;
use crate::ring::{Mode, RingConfig, StartAt};

fn cfg(mode: Mode) -> RingConfig {
    RingConfig::for_payload(mode, 3, 64, 64)
}

/// Options that only use /dev/shm (hugetlbfs needs whole pages for planted files).
fn shm_only() -> Dirs {
    Dirs::new(HugepagePolicy::Never)
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn chown(p: &Path, uid: u32) {
    std::os::unix::fs::lchown(p, Some(uid), None).unwrap();
}

/// Another uid than ours (nobody), for files "another user" made.
const OTHER_UID: u32 = 65534;

fn ring_file(d: &Dirs, name: &str) -> PathBuf {
    d.0.fallback_dir.join(name)
}

#[test]
fn a_symlink_planted_as_the_ring_file_is_refused_and_its_target_left_untouched() {
    let d = shm_only();
    std::fs::create_dir_all(&d.0.fallback_dir).unwrap();
    chmod(&d.0.fallback_dir, 0o700);
    let target = d.0.fallback_dir.with_extension("victim");
    std::fs::write(&target, b"precious").unwrap();
    symlink(&target, ring_file(&d, "md")).unwrap();
    let err = open_publisher("md", &cfg(Mode::Lossy), &d.0).expect_err("a symlinked ring must be refused");
    let text = err.to_string();
    assert!(text.contains("symbolic link") && text.contains("md"), "{text}");
    assert_eq!(std::fs::read(&target).unwrap(), b"precious", "the link's target was written through");
    let err = open_observer("md", StartAt::Latest, &d.0).expect_err("subscribers refuse it too");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    let _ = std::fs::remove_file(&target);
}

#[test]
fn a_ring_folder_that_is_a_symlink_owned_by_another_user_or_writable_by_others_is_refused() {
    // Writable by others: anyone could swap the ring file under us.
    let d = shm_only();
    std::fs::create_dir_all(&d.0.fallback_dir).unwrap();
    chmod(&d.0.fallback_dir, 0o777);
    let err = open_publisher("md", &cfg(Mode::Lossy), &d.0).expect_err("a 0777 folder must be refused");
    assert!(err.to_string().contains("writable by others"), "{err}");
    assert!(!ring_file(&d, "md").exists(), "nothing may be created in it");

    // Owned by another user (who created it first).
    chmod(&d.0.fallback_dir, 0o700);
    chown(&d.0.fallback_dir, OTHER_UID);
    let err = open_publisher("md", &cfg(Mode::Lossy), &d.0).expect_err("a foreign folder must be refused");
    assert!(err.to_string().contains("owned by uid 65534"), "{err}");

    // A symlink to a folder of the attacker's choosing.
    let d2 = shm_only();
    std::fs::create_dir_all(d2.0.fallback_dir.parent().unwrap()).unwrap();
    symlink(&d.0.fallback_dir, &d2.0.fallback_dir).unwrap();
    let err = open_publisher("md", &cfg(Mode::Lossy), &d2.0).expect_err("a symlinked folder must be refused");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    let _ = std::fs::remove_file(&d2.0.fallback_dir);
}

#[test]
fn a_valid_ring_readable_by_others_or_owned_by_another_user_is_refused() {
    let d = shm_only();
    drop(open_publisher("orders", &cfg(Mode::Reliable), &d.0).unwrap());
    let path = ring_file(&d, "orders");
    chmod(&path, 0o666);
    for err in [
        open_publisher("orders", &cfg(Mode::Reliable), &d.0).err(),
        open_consumer("orders", &d.0).err(),
        open_observer("orders", StartAt::Latest, &d.0).err(),
    ] {
        let err = err.expect("a 0666 ring (anyone may read orders and inject them) must be refused");
        assert!(err.to_string().contains("readable or writable by others"), "{err}");
    }
    chmod(&path, 0o600);
    chown(&path, OTHER_UID);
    let err = open_consumer("orders", &d.0).expect_err("a ring another user planted must be refused");
    assert!(err.to_string().contains("owned by uid 65534"), "{err}");
}

#[test]
fn a_refused_reopen_leaves_the_ring_header_untouched() {
    let d = shm_only();
    drop(open_publisher("md", &cfg(Mode::Lossy), &d.0).unwrap());
    let path = ring_file(&d, "md");
    let before = std::fs::read(&path).unwrap()[..4096].to_vec();
    let other = RingConfig { slot_count: 32, ..cfg(Mode::Lossy) };
    assert!(matches!(open_publisher("md", &other, &d.0), Err(ShmError::LayoutMismatch { .. })));
    let after = std::fs::read(&path).unwrap()[..4096].to_vec();
    assert_eq!(before, after, "the refused publisher changed the header (epoch, token)");
}

#[test]
fn remove_refuses_a_ring_whose_publisher_is_alive() {
    let d = shm_only();
    let mut p = open_publisher("md", &cfg(Mode::Lossy), &d.0).unwrap();
    let err = remove("md", &d.0).expect_err("removing a live ring must be refused");
    assert!(matches!(err, ShmError::PublisherActive { .. }), "{err}");
    assert!(ring_file(&d, "md").exists());
    p.publish(b"still here").unwrap();
    drop(p);
    assert!(remove("md", &d.0).unwrap(), "a closed ring can be removed");
}

#[test]
fn a_lossy_ring_file_claiming_100000_consumers_is_refused_not_read_out_of_bounds() {
    let d = shm_only();
    drop(open_publisher("md", &cfg(Mode::Lossy), &d.0).unwrap());
    let path = ring_file(&d, "md");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[48..56].copy_from_slice(&100_000u64.to_le_bytes()); // max_consumers
    std::fs::write(&path, &bytes).unwrap();
    let r = open_observer("md", StartAt::Latest, &d.0);
    let err = r.map(|s| s.reader().status().consumers.len()).expect_err("a corrupt descriptor must be refused");
    assert!(err.to_string().contains("max_consumers"), "{err}");
}
