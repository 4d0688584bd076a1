//! Single-process tests of the shm transport: placement, permissions, errors, reopen.
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::ring::{Mode, Recv, RingConfig, StartAt};
use crate::sys::fs::is_hugetlbfs;

/// Fresh, unique folders for one test; removed on drop.
pub(crate) struct Dirs(pub ShmOptions);

impl Dirs {
    pub fn new(policy: HugepagePolicy) -> Dirs {
        static N: AtomicUsize = AtomicUsize::new(0);
        let tag = format!("tickbus-test-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        Dirs(ShmOptions {
            hugepage_dir: std::path::Path::new("/dev/hugepages").join(&tag),
            fallback_dir: std::path::Path::new("/dev/shm").join(&tag),
            hugepages: policy,
        })
    }
}

impl Drop for Dirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0.hugepage_dir);
        let _ = std::fs::remove_dir_all(&self.0.fallback_dir);
    }
}

/// Whether this host has hugetlbfs at /dev/hugepages. CI sets TICKBUS_REQUIRE_HUGEPAGES=1 so
/// that a host without them fails instead of quietly testing only the fallback.
fn hugepages_here() -> bool {
    let here = is_hugetlbfs(std::path::Path::new("/dev/hugepages")).unwrap_or(false);
    if !here {
        assert!(
            std::env::var_os("TICKBUS_REQUIRE_HUGEPAGES").is_none(),
            "TICKBUS_REQUIRE_HUGEPAGES is set but /dev/hugepages is not hugetlbfs: run tools/setup-host.sh"
        );
        eprintln!("note: /dev/hugepages is not hugetlbfs here; hugepage placement not checked");
    }
    here
}

fn cfg(mode: Mode) -> RingConfig {
    RingConfig::for_payload(mode, 3, 64, 64)
}

#[test]
fn publisher_creates_a_0600_ring_on_hugepages_when_they_exist() {
    let d = Dirs::new(HugepagePolicy::Preferred);
    let p = open_publisher("md", &cfg(Mode::Lossy), &d.0).unwrap();
    let mode = std::fs::metadata(p.path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    if hugepages_here() {
        assert_eq!(p.backing(), &Backing::Hugepages);
        assert!(p.path().starts_with("/dev/hugepages"));
    }
}

#[test]
fn required_hugepages_without_hugetlbfs_is_an_error_that_says_how_to_reserve_them() {
    let mut d = Dirs::new(HugepagePolicy::Required);
    d.0.hugepage_dir = d.0.fallback_dir.join("not-hugetlbfs");
    let err = open_publisher("md", &cfg(Mode::Lossy), &d.0).expect_err("must refuse");
    assert!(matches!(err, ShmError::HugepagesUnavailable { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("not on a hugetlbfs mount") && text.contains("nr_hugepages"), "{text}");
}

#[test]
fn preferred_hugepages_fall_back_to_dev_shm_and_say_why() {
    let mut d = Dirs::new(HugepagePolicy::Preferred);
    d.0.hugepage_dir = d.0.fallback_dir.join("not-hugetlbfs");
    let p = open_publisher("md", &cfg(Mode::Lossy), &d.0).unwrap();
    assert!(matches!(p.backing(), Backing::Fallback { reason } if reason.contains("not on a hugetlbfs mount")));
    assert!(p.path().starts_with(&d.0.fallback_dir));
    let s = open_observer("md", StartAt::Latest, &d.0).unwrap();
    assert_eq!(s.path(), p.path());
}

#[test]
fn a_second_publisher_is_refused_while_the_first_lives_and_continues_after_it_closes() {
    let d = Dirs::new(HugepagePolicy::Preferred);
    let mut p = open_publisher("orders", &cfg(Mode::Lossy), &d.0).unwrap();
    let mut s = open_observer("orders", StartAt::Latest, &d.0).unwrap();
    assert!(matches!(s.publisher_state(), PublisherState::Live { epoch: 1, .. }));
    let err = open_publisher("orders", &cfg(Mode::Lossy), &d.0).err().unwrap();
    assert!(matches!(err, ShmError::PublisherActive { pid, .. } if pid == u64::from(std::process::id())), "{err}");
    assert!(err.is_retryable());
    p.publish(b"first").unwrap();
    drop(p);
    assert_eq!(s.publisher_state(), PublisherState::Closed { epoch: 1 });
    let mut p2 = open_publisher("orders", &cfg(Mode::Lossy), &d.0).unwrap();
    assert_eq!((p2.position(), p2.reclaimed_from()), (1, None));
    p2.publish(b"second").unwrap();
    for want in [&b"first"[..], b"second"] {
        assert!(matches!(s.try_recv(), Some(Recv::Message(m)) if m.payload == want));
    }
}

#[test]
fn reopening_with_another_layout_is_a_clear_error() {
    let d = Dirs::new(HugepagePolicy::Preferred);
    drop(open_publisher("md", &cfg(Mode::Lossy), &d.0).unwrap());
    let path = d.0.hugepage_dir.join("md");
    let path = if path.exists() { path } else { d.0.fallback_dir.join("md") };
    let size = std::fs::metadata(&path).unwrap().len();
    for other in [
        RingConfig { slot_count: 128, ..cfg(Mode::Lossy) },
        RingConfig { slot_count: 1 << 16, ..cfg(Mode::Lossy) }, // larger than the file
    ] {
        let err = open_publisher("md", &other, &d.0).err().unwrap();
        assert!(matches!(err, ShmError::LayoutMismatch { .. }), "{err}");
        assert!(err.to_string().contains("remove it"));
    }
    assert_eq!(std::fs::metadata(&path).unwrap().len(), size, "a refused reopen must not resize the ring");
}

#[test]
fn foreign_files_and_other_versions_are_refused_by_name() {
    let d = Dirs::new(HugepagePolicy::Never);
    std::fs::DirBuilder::new().mode(0o700).create(&d.0.fallback_dir).unwrap();
    let path = d.0.fallback_dir.join("junk");
    std::fs::write(&path, vec![0xAB; 8192]).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = open_observer("junk", StartAt::Latest, &d.0).err().unwrap();
    assert!(err.to_string().contains("not a tickbus ring"), "{err}");
    assert!(!err.is_retryable());

    drop(open_publisher("v", &cfg(Mode::Lossy), &d.0).unwrap());
    let vpath = d.0.fallback_dir.join("v");
    let mut bytes = std::fs::read(&vpath).unwrap();
    bytes[8] = 99; // layout_version
    std::fs::write(&vpath, &bytes).unwrap();
    let err = open_observer("v", StartAt::Latest, &d.0).err().unwrap();
    assert!(err.to_string().contains("layout version 99"), "{err}");

    // A publisher asking for a bigger ring over a ring of another layout version is refused
    // before the file is resized (nothing of the old ring may change).
    let size = bytes.len() as u64;
    let big = RingConfig::for_payload(Mode::Lossy, 1, 1344, 1024);
    let err = open_publisher("v", &big, &d.0).err().unwrap();
    assert!(err.to_string().contains("layout version 99"), "{err}");
    assert_eq!(std::fs::metadata(&vpath).unwrap().len(), size, "a refused ring must not be resized");
}

#[test]
fn subscribing_before_the_publisher_exists_is_a_retryable_not_found() {
    let d = Dirs::new(HugepagePolicy::Preferred);
    let err = open_observer("later", StartAt::Latest, &d.0).err().unwrap();
    assert!(matches!(&err, ShmError::NotFound { searched, .. } if searched.len() == 2), "{err}");
    assert!(err.is_retryable());
    assert!(matches!(open_observer("../etc", StartAt::Latest, &d.0), Err(ShmError::BadName { .. })));
}

#[test]
fn reliable_consumer_over_shm_bounds_the_publisher_and_resumes_after_reattach() {
    let d = Dirs::new(HugepagePolicy::Preferred);
    let small = RingConfig::for_payload(Mode::Reliable, 3, 64, 4);
    let mut p = open_publisher("orders", &small, &d.0).unwrap();
    for i in 0..4u8 {
        p.publish(&[i; 8]).unwrap();
    }
    assert!(p.publish(&[9; 8]).is_err());
    let mut c = open_consumer("orders", &d.0).unwrap();
    assert!(matches!(c.try_recv(), Some(Recv::Message(m)) if m.payload == [0; 8]));
    drop(c);
    let mut c = open_consumer("orders", &d.0).unwrap();
    assert!(matches!(c.try_recv(), Some(Recv::Message(m)) if m.position == 1));
    assert!(p.publish(&[4; 8]).is_ok());
}
