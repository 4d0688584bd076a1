//! Issue 25 item 17: every numeric argument of every command is checked for range and for
//! NaN/inf where it is parsed. Each bad value is refused at once with the option's name and a
//! non-zero exit, before anything is opened (no ring, socket or file appears). On the code before,
//! `doctor --cores 0-4000000000` built a 4-billion-entry list, `exchange --rate 1e-9` waited
//! deaf to Ctrl-C, and `--wait-secs inf` and `mold-server --rate 1e-20` panicked.
use std::process::Command;
use std::time::Duration;

const BAD_FLOATS: &[&str] = &["NaN", "inf", "-inf", "-1", "1e300"];

/// (command and the arguments it needs, option, values it must refuse).
fn table() -> Vec<(&'static [&'static str], &'static str, Vec<&'static str>)> {
    let f = || BAD_FLOATS.to_vec();
    let with = |extra: &[&'static str]| [BAD_FLOATS, extra].concat();
    vec![
        (&["exchange", "--itch", "/nonexistent"], "--rate", with(&["0", "1e-9", "2e8"])),
        (&["exchange", "--itch", "/nonexistent"], "--wait-secs", with(&["86401"])),
        (&["exchange", "--itch", "/nonexistent"], "--drain-secs", f()),
        (&["exchange", "--itch", "/nonexistent"], "--md-slots", vec!["0", "3", "-1", "4294967296"]),
        (&["trader"], "--wait-secs", f()),
        (&["trader"], "--drain-secs", f()),
        (&["trader"], "--md-quiet-secs", f()),
        (&["trader"], "--qty", vec!["0", "-5", "1e3", "99999999999999"]),
        (&["trader"], "--md", vec!["tcp://10.0.0.1:1/1", "ud-mcast://10.0.0.1/1", "shm:a/b", "shm:md?slots=3"]),
        (&["exchange", "--itch", "/nonexistent"], "--execs", vec!["rdma-rc://10.0.0.1/3"]),
        (&["gateway"], "--wait-secs", f()),
        (&["mold-server", "/nonexistent"], "--rate", with(&["1e-20", "0.5"])),
        (&["mold-server", "/nonexistent"], "--linger-ms", vec!["-1", "1e3", "86400001", "18446744073709551616"]),
        (&["mold-server", "/nonexistent"], "--start-delay-ms", vec!["-1", "86400001"]),
        (&["mold-server", "/nonexistent"], "--packet-bytes", vec!["0", "63", "65508"]),
        (&["mold-server", "/nonexistent"], "--answer-budget", vec!["0", "-1", "1e9"]),
        (&["feed", "--ring", "args-sweep"], "--slots", vec!["0", "5", "2147483648"]),
        (&["feed", "--ring", "args-sweep"], "--wait-ms", f()),
        (&["record", "--journal", "/nonexistent/j", "--ring", "x"], "--wait-secs", f()),
        (&["record", "--journal", "/nonexistent/j", "--ring", "x"], "--segment-mb", vec!["0", "1048577"]),
        (&["record", "--journal", "/nonexistent/j", "--ring", "x"], "--queue-mb", vec!["0", "4097", "65536"]),
        (&["replay", "/nonexistent", "--ring", "x"], "--speed", with(&["0", "0.0001"])),
        (&["replay", "/nonexistent", "--ring", "x"], "--rate", with(&["0", "1e-9"])),
        (&["replay", "/nonexistent", "--ring", "x"], "--max-quiet-secs", f()),
        (&["replay", "/nonexistent", "--ring", "x"], "--slots", vec!["0", "6"]),
        (&["replay", "/nonexistent", "--ring", "x"], "--consumers", vec!["0", "65"]),
        (&["replay", "/nonexistent", "--ring", "x"], "--max-payload", vec!["0", "1048577"]),
        (&["stat"], "--watch", with(&["0"])),
        (&["stat", "--watch"], "--count", vec!["0", "-1", "x"]),
        (&["doctor"], "--cores", vec!["0-4000000000", "8192", "x"]),
        (&["doctor"], "--memlock", vec!["-1", "99999999999G"]),
        (&["itch", "generate"], "--messages", vec!["0", "10000000001"]),
        (&["itch", "generate"], "--stocks", vec!["0", "65536"]),
    ]
}

#[test]
fn every_numeric_argument_refuses_nan_inf_and_out_of_range_values_by_name_at_once() {
    let shm = std::env::temp_dir().join(format!("tickbus-args-{}", std::process::id()));
    let mut checked = 0;
    for (cmd, opt, values) in table() {
        for v in values {
            let arg = format!("{opt}={v}");
            let mut c = Command::new(env!("CARGO_BIN_EXE_tickbus"));
            c.args(cmd).arg(&arg).env("TICKBUS_HUGEPAGE_DIR", shm.join("huge")).env("TICKBUS_SHM_DIR", shm.join("shm"));
            let what = format!("tickbus {} {arg}", cmd.join(" "));
            let out = tickbus_testkit::within(Duration::from_secs(10), &what.clone(), move || c.output().unwrap());
            assert!(!out.status.success(), "{what}: accepted");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(opt) && !err.contains("panicked"), "{what}: {err}");
            checked += 1;
        }
    }
    assert!(!shm.exists(), "nothing was made before the argument was refused");
    assert!(checked > 100, "{checked} values checked");
}
