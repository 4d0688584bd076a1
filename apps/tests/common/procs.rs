//! Apps as real processes on shm, for the multi-process tests: each test's rings in a folder
//! of its own (removed at the end), every child killed if the test fails, summaries read back.
use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A test's processes and the folder their rings and output live in.
pub struct Env {
    pub children: Vec<u32>,
    pub tag: String,
    pub tmp: PathBuf,
}

impl Env {
    pub fn new(name: &str) -> Env {
        let tag = format!("tickbus-{name}-{}", std::process::id());
        let tmp = std::env::temp_dir().join(&tag);
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        Env { children: Vec::new(), tag, tmp }
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tickbus"));
        c.args(args)
            .env("TICKBUS_HUGEPAGE_DIR", format!("/dev/hugepages/{}", self.tag))
            .env("TICKBUS_SHM_DIR", format!("/dev/shm/{}", self.tag));
        c
    }

    pub fn spawn(&mut self, args: &[&str]) -> Child {
        let out = File::create(self.tmp.join(format!("{}.err", self.children.len()))).unwrap();
        let child = self.cmd(args).stdout(Stdio::piped()).stderr(out).spawn().unwrap();
        self.children.push(child.id());
        child
    }

    pub fn path(&self, name: &str) -> String {
        self.tmp.join(name).to_str().unwrap().to_owned()
    }

    /// A trader on its own order and report rings (`k`), with a gateway of its own unless it
    /// trades with the exchange's (k = 0).
    pub fn trader(&mut self, k: usize, join: bool) -> Child {
        self.trader_with(k, join, &[])
    }

    pub fn trader_with(&mut self, k: usize, join: bool, more: &[&str]) -> Child {
        let (orders, execs) = (format!("orders{k}"), format!("execs{k}"));
        let journal = self.path("journal");
        let mut args = vec!["trader", "--md", "md", "--orders", &orders, "--execs", &execs, "--json"];
        if join {
            args.extend(["--join", &journal]);
        }
        args.extend(more);
        self.spawn(&args)
    }

    pub fn gateway(&mut self, k: usize) -> Child {
        self.gateway_with(k, &[])
    }

    pub fn gateway_with(&mut self, k: usize, more: &[&str]) -> Child {
        let (orders, execs) = (format!("orders{k}"), format!("execs{k}"));
        let mut args = vec!["gateway", "--md", "md", "--orders", &orders, "--execs", &execs, "--json"];
        args.extend(more);
        self.spawn(&args)
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        for &pid in &self.children {
            // A child already reaped (`finish`) may have had its pid reused by another process:
            // only a process whose parent is this one is still ours.
            if !is_our_child(pid) {
                continue;
            }
            // SAFETY: SIGKILL to a child this test started and has not reaped (a test that
            // failed leaves none behind); kill of a finished child not reaped yet is harmless.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        if std::thread::panicking() {
            // What each child said, for the failure's report (the folder goes next).
            for k in 0..self.children.len() {
                let said = std::fs::read_to_string(self.tmp.join(format!("{k}.err"))).unwrap_or_default();
                let tail: String =
                    said.lines().rev().take(12).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
                eprintln!("--- child {k} said (last lines):\n{tail}");
            }
        }
        let _ = std::fs::remove_dir_all(&self.tmp);
        let _ = std::fs::remove_dir_all(format!("/dev/hugepages/{}", self.tag));
        let _ = std::fs::remove_dir_all(format!("/dev/shm/{}", self.tag));
    }
}

/// Whether `pid` is a process whose parent is this one (/proc/PID/stat's fourth field).
fn is_our_child(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name, in parentheses, may hold spaces: the fields after it count from its end.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    after.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) == Some(std::process::id())
}

impl Env {
    /// Waits (up to `secs`) until child `k` has said `what` on stderr; when it did.
    pub fn said(&self, k: usize, what: &str, secs: u64) -> std::time::Instant {
        let file = self.tmp.join(format!("{k}.err"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while !std::fs::read_to_string(&file).unwrap_or_default().contains(what) {
            assert!(std::time::Instant::now() < deadline, "child {k} did not say {what:?} within {secs} s");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::time::Instant::now()
    }
}

/// Waits for a child (at most 10 minutes: a hung app fails the test instead of hanging the
/// suite) and reads the JSON summary it printed.
pub fn finish(mut child: Child, what: &str) -> serde_json::Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not finish within 10 minutes (killed)");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{what} failed ({:?})", out.status);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{what}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

pub fn sig(c: &Child, s: i32) {
    // SAFETY: kill(2) on our own child's pid; it only sends a signal.
    assert_eq!(unsafe { libc::kill(c.id() as i32, s) }, 0);
}

pub fn n(v: &serde_json::Value, path: &[&str]) -> u64 {
    path.iter().fold(v, |v, k| &v[*k]).as_u64().unwrap_or_else(|| panic!("{path:?} in {v}"))
}
