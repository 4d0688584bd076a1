//! What the RDMA trading tests share: running `tickbus` with its output kept, a generated ITCH
//! day, and the checks every layout must pass (counts exact across the apps).
#![allow(dead_code)] // each test binary uses its part

pub mod procs;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running `tickbus`, killed if the test ends without waiting for it.
pub struct Running(Option<Child>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `tickbus` (built with this test, `--features rdma`) with `args`, its output piped.
pub fn spawn(args: &[&str]) -> Running {
    spawn_env(args, &[])
}

/// As [`spawn`], with environment variables set for the child.
pub fn spawn_env(args: &[&str], env: &[(&str, &str)]) -> Running {
    let child = Command::new(env!("CARGO_BIN_EXE_tickbus"))
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting tickbus");
    Running(Some(child))
}

impl Running {
    /// Whether the child has exited (it is not reaped: [`finish`] still reads its output).
    pub fn exited(&self) -> bool {
        self.0.as_ref().is_some_and(|c| {
            // SAFETY: siginfo_t is plain data (all-zero is valid). The pid is our child and not
            // yet reaped (only `finish` and Drop reap it, and they take it out of `self` first),
            // so it names no other process; WNOWAIT leaves it waitable for `finish`, and si_pid
            // is read from the `info` waitid filled (or left zero: no child changed state).
            unsafe {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
                libc::waitid(libc::P_PID, c.id(), &mut info, flags) == 0 && info.si_pid() != 0
            }
        })
    }
}

/// Waits for a child and parses the JSON summary it printed last; fails with its stderr.
pub fn finish(mut running: Running, what: &str) -> Result<serde_json::Value, String> {
    let child = running.0.take().expect("running");
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(format!("{what} failed ({}): {stderr}", out.status));
    }
    eprintln!("{what}: {}", stderr.trim_end());
    serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .map_err(|e| format!("{what} printed no JSON summary ({e}): {stdout}"))
}

/// Stops a child (SIGTERM: it prints what it has and exits).
pub fn kill(running: &Running) {
    signal(running, libc::SIGTERM);
}

/// Sends `sig` to a child (SIGKILL: it dies where it stands, as a crash would).
pub fn signal(running: &Running, sig: i32) {
    if let Some(c) = running.0.as_ref() {
        // SAFETY: a signal to our own child, not yet waited for (it is still in `running`).
        unsafe { libc::kill(c.id() as i32, sig) };
    }
}

/// Both apps' summaries, or every failure among them.
pub fn both<A, B>(a: Result<A, String>, b: Result<B, String>) -> Result<(A, B), String> {
    match (a, b) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        (a, b) => Err([a.err(), b.err()].into_iter().flatten().collect::<Vec<_>>().join("\n")),
    }
}

/// The digest (`OrderBook::digest`, as `tickbus trader` prints it) of the book built offline
/// from the whole ITCH file `day`.
pub fn offline_digest(day: &Path) -> String {
    let mut b = tickbus_codecs::book::OrderBook::with_capacity(1 << 16, 64);
    let mut r = tickbus_codecs::itch::ItchFileReader::new(std::fs::File::open(day).unwrap());
    while let Some(rec) = r.next_record().unwrap() {
        let _ = b.apply(&rec.message);
    }
    format!("{:016x}", b.digest())
}

/// A generated ITCH day of `messages` order-flow messages in `dir`.
pub fn day(dir: &Path, messages: u32) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("day.itch");
    let n = messages.to_string();
    let args = ["itch", "generate", "--seed", "7", "--stocks", "6", "--messages", &n, "--itch", file.to_str().unwrap()];
    let out = Command::new(env!("CARGO_BIN_EXE_tickbus")).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    file
}

fn n(v: &serde_json::Value, path: &[&str]) -> Result<u64, String> {
    path.iter().fold(v, |v, k| &v[k]).as_u64().ok_or_else(|| format!("no {path:?} in {v}"))
}

/// Exact counts across the exchange (with its gateway) and the trader: every tick published
/// reached the trader (directly or recovered), every order reached the gateway and got exactly
/// one report back, each timed on every hop (`timed`: the trader's TSC is comparable to the
/// gateway's, i.e. one host). Returns (ticks, orders, recovered).
pub fn check_counts(ex: &serde_json::Value, tr: &serde_json::Value, timed: bool) -> Result<(u64, u64, u64), String> {
    let gw = &ex["gateway"];
    let published = n(ex, &["md", "published"])?;
    let ensure = |ok: bool, what: &str| if ok { Ok(()) } else { Err(format!("{what}\nexchange: {ex}\ntrader: {tr}")) };
    ensure(published > 1000 && n(ex, &["md", "failed"])? == 0, "the exchange published the day")?;
    ensure(ex["transport_errors"].as_array().is_some_and(|e| e.is_empty()), "no transport errors at the exchange")?;
    ensure(n(tr, &["counts", "ticks"])? == published, "every tick reached the trader")?;
    ensure(n(tr, &["counts", "md_missed"])? == 0 && n(tr, &["counts", "feed_gaps"])? == 0, "no market data lost")?;
    let orders = n(tr, &["counts", "orders"])?;
    ensure(orders > 50, "the trader traded")?;
    ensure(n(tr, &["counts", "orders_failed"])? == 0 && n(tr, &["in_flight"])? == 0, "no order lost or unanswered")?;
    ensure(
        n(tr, &["counts", "reports"])? == orders && n(tr, &["counts", "reports_unexpected"])? == 0,
        "one report per order",
    )?;
    ensure(n(gw, &["counts", "orders"])? == orders, "every order reached the gateway")?;
    ensure(
        n(gw, &["counts", "reports"])? == orders && n(gw, &["counts", "reports_failed"])? == 0,
        "every order answered",
    )?;
    let answered: u64 = ["fills", "expired", "rejects"].iter().map(|k| n(gw, &["counts", k]).unwrap_or(0)).sum();
    ensure(answered == orders, "each order answered once")?;
    ensure(n(gw, &["counts", "fills"])? == n(tr, &["strategy", "filled_orders"])?, "fills agree")?;
    if timed {
        ensure(n(gw, &["timed"])? == orders, "every order timed end to end")?;
    }
    Ok((published, orders, n(tr, &["md_recovered"])?))
}

/// `tickbus doctor --json ARGS`, run through `wrap` (e.g. `prlimit --memlock=...`, or nothing):
/// its JSON and exit code.
pub fn doctor(wrap: &[&str], args: &[&str]) -> (serde_json::Value, i32) {
    let bin = env!("CARGO_BIN_EXE_tickbus");
    let mut argv: Vec<&str> = wrap.to_vec();
    argv.extend([bin, "doctor", "--json"]);
    argv.extend(args);
    let out = Command::new(argv[0]).args(&argv[1..]).output().unwrap_or_else(|e| panic!("running {argv:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("{argv:?} printed no JSON ({e}): {stdout}\nstderr: {}", String::from_utf8_lossy(&out.stderr))
    });
    (json, out.status.code().expect("doctor exited by a signal"))
}

/// The finding named `check` in a doctor's JSON.
pub fn finding<'a>(d: &'a serde_json::Value, check: &str) -> &'a serde_json::Value {
    d["findings"]
        .as_array()
        .and_then(|a| a.iter().find(|f| f["check"] == check))
        .unwrap_or_else(|| panic!("no `{check}` finding in {d:#}"))
}

/// The exit code is 1 exactly when some finding failed, and `ready` says the same.
pub fn check_verdict(d: &serde_json::Value, code: i32) {
    let fails = d["findings"].as_array().unwrap().iter().filter(|f| f["status"] == "fail").count();
    assert_eq!(code, if fails == 0 { 0 } else { 1 }, "exit code against {fails} failures: {d:#}");
    assert_eq!(d["ready"], fails == 0, "{d:#}");
    for f in d["findings"].as_array().unwrap() {
        if f["status"] == "fail" || f["status"] == "warn" {
            assert!(f["remedy"].as_str().is_some_and(|r| !r.is_empty()), "a {} without a remedy: {f:#}", f["status"]);
        }
    }
}

/// Trader `who` (its summary `t`) holds the day's book (`want`) and saw each of the
/// `published` messages once.
pub fn holds_the_day(who: &str, t: &serde_json::Value, want: &str, published: u64) -> Result<(), String> {
    if t["book_digest"].as_str() != Some(want) {
        return Err(format!("trader {who}'s book is not the day's ({want}): {t}"));
    }
    if t["counts"]["ticks"].as_u64() != Some(published) {
        return Err(format!("trader {who} did not see all {published} messages once: {t}"));
    }
    Ok(())
}

/// Trader `who` read the journal, then cut over to the live group before the day's end, and
/// lost nothing in between.
pub fn joined_mid_day(who: &str, t: &serde_json::Value, published: u64) -> Result<(), String> {
    let j = &t["join"];
    let cut = j["cut_over"].as_u64().ok_or_else(|| format!("trader {who} never cut over to the live group: {j}"))?;
    if !(j["from_journal"].as_u64() > Some(0) && cut > 0 && cut < published) {
        return Err(format!("trader {who} did not join mid-day from the journal: {j}"));
    }
    if j["unfilled"].as_u64() != Some(0) || j["journal_gaps"].as_u64() != Some(0) {
        return Err(format!("trader {who} lost messages: {j}"));
    }
    Ok(())
}
