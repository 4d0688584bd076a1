//! The C ABI as C and C++ programs use it: each program in `tests/c` and `tests/cpp` is compiled
//! with gcc/g++ against `include/` and the `libtickbus_ffi.a` this build made, then run.
//! - errors.c, the C++ self-test and the journal reader run under AddressSanitizer and
//!   UndefinedBehaviorSanitizer: every documented error, never a crash.
//! - hot_path.c proves the hot path makes no syscall and no allocation through the C ABI.
//! - A C++ publisher process with this Rust process subscribing, and the reverse, on reliable
//!   and lossy rings: every message, in order, every field compared.
//! - The message structs' sizes and field offsets, as C and as C++ compile them, equal the
//!   Rust types'.
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bus::codecs::md::Quote;
use bus::codecs::Message;
use bus::shm::{HugepagePolicy, ShmOptions};
use bus::stream::{open_publisher, open_subscriber, Channel, OpenOptions, Publish, Retry, Subscribe};
use bus::{RecvInto, StartAt};
use libtest_mimic::{Arguments, Failed, Trial};

const N: u64 = 20_000;

fn main() {
    let args = Arguments::from_args();
    let tests = vec![
        Trial::test("c_errors_are_the_documented_ones_under_asan_ubsan", c_errors),
        Trial::test("c_hot_path_makes_no_syscall_and_no_allocation", c_hot_path),
        Trial::test("cpp_wrapper_selftest_under_asan_ubsan", cpp_selftest),
        Trial::test("cpp_publisher_rust_subscriber_reliable", || cpp_to_rust(true)),
        Trial::test("cpp_publisher_rust_subscriber_lossy", || cpp_to_rust(false)),
        Trial::test("rust_publisher_cpp_subscriber_reliable", || rust_to_cpp(true)),
        Trial::test("rust_publisher_cpp_subscriber_lossy", || rust_to_cpp(false)),
        Trial::test("c_journal_reader_matches_the_rust_reader", c_journal),
        Trial::test("message_layouts_match_in_c_and_cpp", layouts),
        Trial::test("c_stat_snapshot_finds_this_process_with_its_counts", c_stat),
        Trial::test("c_market_data_reader_matches_the_rust_normaliser_on_an_itch_file", || c_market_data(false)),
        Trial::test("c_market_data_reader_matches_the_rust_normaliser_on_a_capture", || c_market_data(true)),
    ];
    let conclusion = libtest_mimic::run(&args, tests);
    let _ = std::fs::remove_dir_all(shm_dir());
    let _ = std::fs::remove_dir_all(hugepage_dir());
    let _ = std::fs::remove_dir_all(counters_dir());
    conclusion.exit();
}

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// target/<profile>/deps: where `cargo test` put libtickbus_ffi.a, beside this test (cargo
/// builds the library's C forms with its rlib, which the tests depend on).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().expect("target/<profile>/deps/<test>").to_path_buf()
}

fn build_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ffi-c-abi");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn shm_dir() -> PathBuf {
    PathBuf::from(format!("/dev/shm/tickbus-ffi-{}", std::process::id()))
}

fn hugepage_dir() -> PathBuf {
    PathBuf::from(format!("/dev/hugepages/tickbus-ffi-{}", std::process::id()))
}

/// This test's own counters folder (on tmpfs, as counters must be), so a snapshot sees only its
/// programs.
fn counters_dir() -> PathBuf {
    PathBuf::from(format!("/dev/shm/tickbus-ffi-counters-{}", std::process::id()))
}

fn shm_options() -> ShmOptions {
    ShmOptions::new(hugepage_dir(), shm_dir(), HugepagePolicy::Preferred)
}

/// A ring name no other test (or earlier run) uses.
fn ring(tag: &str) -> String {
    format!("ffi-{tag}-{}", std::process::id())
}

/// Compiles `sources` (C if `cpp` is false) against include/ and libtickbus_ffi.a into `name`.
fn compile(name: &str, sources: &[PathBuf], cpp: bool, sanitize: bool) -> Result<PathBuf, Failed> {
    let out = build_dir().join(name);
    let mut c = Command::new(if cpp { "g++" } else { "gcc" });
    c.arg(if cpp { "-std=c++17" } else { "-std=c11" })
        .args(["-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pthread"])
        .arg("-I")
        .arg(manifest().join("include"));
    if sanitize {
        c.args(["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]);
    }
    c.args(sources).arg(lib_dir().join("libtickbus_ffi.a")).args(["-ldl", "-lm"]);
    if cfg!(feature = "rdma") {
        c.args(["-libverbs", "-lrdmacm"]);
    }
    c.arg("-o").arg(&out);
    let o = c.output().map_err(|e| format!("running {c:?}: {e}: is gcc/g++ installed (tools/setup-peers.sh)?"))?;
    if !o.status.success() {
        return Err(format!("{c:?} failed:\n{}", String::from_utf8_lossy(&o.stderr)).into());
    }
    Ok(out)
}

/// Runs a built program with the test's ring folders; its stdout, or an error with both streams.
fn run(cmd: &mut Command, limit: Duration) -> Result<String, Failed> {
    cmd.env("TICKBUS_SHM_DIR", shm_dir())
        .env("TICKBUS_HUGEPAGE_DIR", hugepage_dir())
        .env("TICKBUS_COUNTERS_DIR", counters_dir())
        .env("ASAN_OPTIONS", "abort_on_error=0:detect_leaks=1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().map_err(|e| format!("spawning {cmd:?}: {e}"))?;
    let o = tickbus_testkit::within(limit, "a C/C++ test program", move || child.wait_with_output())
        .map_err(|e| format!("{e}"))?;
    let (out, err) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr));
    if !o.status.success() {
        return Err(format!("{cmd:?} exited {}\nstdout:\n{out}\nstderr:\n{err}", o.status).into());
    }
    Ok(out)
}

fn src(rel: &str) -> PathBuf {
    manifest().join("tests").join(rel)
}

fn c_errors() -> Result<(), Failed> {
    let bin = compile("errors", &[src("c/errors.c")], false, true)?;
    let out = run(Command::new(bin).arg(ring("errors")), Duration::from_secs(60))?;
    assert!(out.contains("all documented errors returned"), "{out}");
    Ok(())
}

fn c_hot_path() -> Result<(), Failed> {
    let bin = compile("hot_path", &[src("c/hot_path.c")], false, false)?;
    let out = run(Command::new(bin).arg(ring("hot")), Duration::from_secs(120))?;
    // The program exits 0 only with zero counts; the counts are checked here as well.
    assert!(out.contains("control: 1 syscalls, 1 allocations"), "{out}");
    assert!(out.contains("steady state: 100000 messages") && out.contains(" 0 syscalls, 0 allocations"), "{out}");
    Ok(())
}

fn pubsub() -> Result<PathBuf, Failed> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| compile("pubsub", &[src("cpp/pubsub.cpp")], true, true).map_err(|e| format!("{e:?}")))
        .clone()
        .map_err(Failed::from)
}

fn cpp_selftest() -> Result<(), Failed> {
    let itch = build_dir().join(format!("self-{}.itch", std::process::id()));
    let mut day = Vec::new();
    bus::codecs::synth::write_itch(bus::codecs::synth::DayConfig::new(3, 4, 3000), &mut day)?;
    std::fs::write(&itch, &day)?;
    let out = run(Command::new(pubsub()?).args(["selftest", &ring("self")]).arg(&itch), Duration::from_secs(60));
    let _ = std::fs::remove_file(&itch);
    let out = out?;
    assert!(out.contains("selftest: ok"), "{out}");
    Ok(())
}

/// The quote with index `k`, as pubsub.cpp builds it.
fn quote(k: u64) -> Quote {
    let mut q = Quote::new();
    q.instrument_id = k as u32;
    q.bid_px = k as i64 * 3 - 7;
    q.bid_qty = k ^ 0xabcdef;
    q.ask_px = -(k as i64) * 5;
    q.ask_qty = k * k;
    q.exchange_ts_ns = 34_200_000_000_000 + k;
    q
}

fn uri(tag: &str, reliable: bool) -> String {
    // Lossy: the ring holds every message, so a reader that starts at the oldest sees them all.
    if reliable {
        format!("shm:{}?reliable&slots=256", ring(tag))
    } else {
        format!("shm:{}?lossy&slots=32768", ring(tag))
    }
}

fn options() -> OpenOptions {
    let mut o = OpenOptions::default();
    o.shm = shm_options();
    o.wait = Duration::from_secs(20);
    o.start_at = StartAt::Oldest;
    o
}

fn cpp_to_rust(reliable: bool) -> Result<(), Failed> {
    let u = uri(if reliable { "c2r-rel" } else { "c2r-lossy" }, reliable);
    let mut child = Command::new(pubsub()?)
        .args(["pub", &u, &N.to_string()])
        .env("TICKBUS_SHM_DIR", shm_dir())
        .env("TICKBUS_HUGEPAGE_DIR", hugepage_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let received = (|| -> Result<u64, Failed> {
        let mut s = open_subscriber(&Channel::parse(&u)?, &options())?;
        let mut buf = Quote::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut k = 0;
        while k < N {
            match s.try_recv_into(zerocopy::IntoBytes::as_mut_bytes(&mut buf))? {
                Some(RecvInto::Message { position }) => {
                    let want = quote(k);
                    let same =
                        (buf.instrument_id, buf.bid_px, buf.bid_qty, buf.ask_px, buf.ask_qty, buf.exchange_ts_ns)
                            == (
                                want.instrument_id,
                                want.bid_px,
                                want.bid_qty,
                                want.ask_px,
                                want.ask_qty,
                                want.exchange_ts_ns,
                            );
                    if position != k || buf.header.sequence != k || !same {
                        return Err(format!("message {k}: position {position}, got {buf:?}").into());
                    }
                    k += 1;
                }
                Some(other) => return Err(format!("after {k} messages: {other:?}").into()),
                None if Instant::now() > deadline => return Err(format!("only {k} of {N} messages in 60 s").into()),
                None => {}
            }
        }
        Ok(k)
    })();
    drop(child.stdin.take()); // the publisher may exit now
    let o = tickbus_testkit::within(Duration::from_secs(30), "the C++ publisher", move || child.wait_with_output())?;
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let received = received.map_err(|e| format!("{e:?}\npublisher stderr:\n{err}"))?;
    assert!(o.status.success(), "publisher exited {}:\n{err}", o.status);
    assert!(out.contains(&format!("sent {N}")), "{out}");
    assert_eq!(received, N);
    Ok(())
}

fn rust_to_cpp(reliable: bool) -> Result<(), Failed> {
    let u = uri(if reliable { "r2c-rel" } else { "r2c-lossy" }, reliable);
    let mut p = open_publisher(&Channel::parse(&u)?, &options())?;
    let mut cmd = Command::new(pubsub()?);
    cmd.args(["sub", &u, &N.to_string()]);
    let child = std::thread::spawn(move || run(&mut cmd, Duration::from_secs(90)).map_err(|e| format!("{e:?}")));
    let deadline = Instant::now() + Duration::from_secs(60);
    for k in 0..N {
        let mut q = quote(k);
        loop {
            match p.send(&mut q) {
                Ok(at) => {
                    assert_eq!(at, k);
                    break;
                }
                Err(e) if e.retry_helps() && Instant::now() < deadline => std::hint::spin_loop(),
                Err(e) => return Err(format!("message {k}: {e}").into()),
            }
        }
    }
    let out = child.join().expect("runner thread")?;
    assert!(out.contains(&format!("received {N} missed 0")), "{out}");
    Ok(())
}

fn c_journal() -> Result<(), Failed> {
    use bus::journal::{JournalMeta, JournalOptions, JournalReader, JournalWriter, Kind};
    let dir = build_dir().join(format!("journal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let meta = JournalMeta { stream_id: 9, source: "ffi test".into(), ticks_per_ns: bus::time::ticks_per_ns() };
    // Small segments and a dense index: several segments, and a seek that uses the index.
    let mut opts = JournalOptions::default();
    opts.segment_bytes = 64 << 10;
    opts.index_every = 16;
    let mut w = JournalWriter::open(&dir, meta, opts)?;
    let t = w.now();
    for seq in 0..3000u64 {
        if (1000..1010).contains(&seq) {
            continue;
        }
        if seq == 1010 {
            w.append_gap(1000, 10, t + seq)?;
        }
        let payload: Vec<u8> = (0..(seq % 97) as usize + 8).map(|k| (seq as usize * 31 + k) as u8).collect();
        w.append(seq, seq * 7, t + seq, &payload)?;
    }
    w.close()?;
    let fnv = |b: &[u8]| b.iter().fold(0xcbf29ce484222325u64, |h, x| (h ^ *x as u64).wrapping_mul(0x100000001b3));
    let expected = |from: u64| -> Result<String, Failed> {
        let r = JournalReader::open(&dir)?;
        let mut s = format!("stream 9 segments {}\n", r.segments().len());
        let mut c = r.seek_sequence(from)?;
        while let Some(rec) = c.next()? {
            match rec.kind {
                Kind::Message(m) => {
                    s += &format!(
                        "M {} {} {} {} {:016x}\n",
                        rec.sequence,
                        rec.publish_tsc,
                        rec.receive_tsc,
                        m.len(),
                        fnv(m)
                    )
                }
                Kind::Gap { count } => s += &format!("G {} {count}\n", rec.sequence),
                Kind::End => {}
            }
        }
        Ok(s)
    };
    let bin = compile("journal", &[src("c/journal.c")], false, true)?;
    let all = run(Command::new(&bin).arg(&dir), Duration::from_secs(60))?;
    let want = expected(0)?;
    assert!(want.lines().count() == 2 + 2990 && want.contains("\nG 1000 10\n"), "the Rust reader: {want}");
    assert!(!want.starts_with("stream 9 segments 1\n"), "the journal spans several segments");
    assert_eq!(all, want);
    let tail = run(Command::new(&bin).arg(&dir).arg("2500"), Duration::from_secs(60))?;
    assert!(tail.lines().nth(1).is_some_and(|l| l.starts_with("M 2500 ")), "{tail}");
    assert_eq!(tail, expected(2500)?);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Offsets and sizes of every message struct's public fields, by the Rust compiler.
macro_rules! rust_layouts {
    ($($c:literal $t:ty { $($f:ident),* })*) => {{
        fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
            core::mem::size_of::<F>()
        }
        let mut v: Vec<(String, usize, usize)> = Vec::new();
        $(
            v.push(($c.to_string(), 0, core::mem::size_of::<$t>()));
            $( v.push((format!("{}.{}", $c, stringify!($f)), core::mem::offset_of!($t, $f), field_size(|m: &$t| &m.$f))); )*
        )*
        v
    }};
}

fn layouts() -> Result<(), Failed> {
    let rust = rust_layouts! {
        "tb_header" bus::codecs::Header { msg_type, version, length, stream_id, flags, sequence, publish_tsc }
        "tb_level" bus::codecs::md::Level { price, qty, orders }
        "tb_book_snapshot" bus::codecs::md::BookSnapshot { header, instrument_id, bid_depth, ask_depth, exchange_ts_ns, bids, asks }
        "tb_feed_gap" bus::codecs::md::FeedGap { header, first_sequence, count }
        "tb_resting_order" bus::codecs::md::RestingOrder { order_id, price, qty, instrument_id, side }
        "tb_snapshot_orders" bus::codecs::md::SnapshotOrders { header, as_of, total_orders, lost, source, chunk, chunks, count, orders }
        "tb_order_add" bus::codecs::md::OrderAdd { header, instrument_id, side, order_id, price, qty, exchange_ts_ns }
        "tb_order_delete" bus::codecs::md::OrderDelete { header, instrument_id, order_id, exchange_ts_ns }
        "tb_order_execute" bus::codecs::md::OrderExecute { header, instrument_id, order_id, exec_qty, price, match_id, exchange_ts_ns }
        "tb_order_modify" bus::codecs::md::OrderModify { header, instrument_id, order_id, new_price, new_qty, exchange_ts_ns }
        "tb_quote" bus::codecs::md::Quote { header, instrument_id, bid_px, bid_qty, ask_px, ask_qty, exchange_ts_ns }
        "tb_trade" bus::codecs::md::Trade { header, instrument_id, side, price, qty, trade_id, exchange_ts_ns }
        "tb_cancel_order" bus::codecs::orders::CancelOrder { header, client_order_id, orig_client_order_id, instrument_id }
        "tb_new_order" bus::codecs::orders::NewOrder { header, client_order_id, instrument_id, side, time_in_force, ord_type, price, qty, account }
        "tb_replace_order" bus::codecs::orders::ReplaceOrder { header, client_order_id, orig_client_order_id, instrument_id, new_price, new_qty }
        "tb_exec_ack" bus::codecs::exec::ExecAck { header, client_order_id, exchange_order_id, instrument_id, exchange_ts_ns }
        "tb_exec_fill" bus::codecs::exec::ExecFill { header, client_order_id, exchange_order_id, instrument_id, side, fill_px, fill_qty, leaves_qty, exec_id, exchange_ts_ns }
        "tb_exec_reject" bus::codecs::exec::ExecReject { header, client_order_id, instrument_id, reason, exchange_ts_ns, text }
    };
    // The same questions asked of the C and C++ compilers, through the generated header.
    let mut c = String::from("#include <stddef.h>\n#include <stdio.h>\n#include \"tickbus.h\"\nint main(void) {\n");
    for (name, _, _) in &rust {
        match name.split_once('.') {
            None => c += &format!("  printf(\"{name} 0 %zu\\n\", sizeof({name}));\n"),
            Some((t, f)) => {
                c += &format!("  printf(\"{name} %zu %zu\\n\", offsetof({t}, {f}), sizeof((({t} *)0)->{f}));\n")
            }
        }
    }
    c += "  return 0;\n}\n";
    let want: String = rust.iter().map(|(n, o, s)| format!("{n} {o} {s}\n")).collect();
    for cpp in [false, true] {
        let file = build_dir().join(if cpp { "layout.cpp" } else { "layout.c" });
        std::fs::File::create(&file)?.write_all(c.as_bytes())?;
        let bin = compile(if cpp { "layout_cpp" } else { "layout_c" }, &[file], cpp, false)?;
        let got = run(&mut Command::new(bin), Duration::from_secs(30))?;
        assert_eq!(got, want, "{} layouts differ from Rust's", if cpp { "C++" } else { "C" });
    }
    Ok(())
}

fn c_stat() -> Result<(), Failed> {
    let bin = compile("stat", &[src("c/stat.c")], false, true)?;
    let out = run(Command::new(bin).arg(ring("stat")), Duration::from_secs(60))?;
    assert!(out.contains("found this process's streams and ring with its counts"), "{out}");
    Ok(())
}

/// An ITCH file, or a pcap of the same day as MoldUDP64 (what the installed library reads with
/// its default `pcap` feature), through `tb_market_data_*` against the Rust normaliser.
fn c_market_data(capture: bool) -> Result<(), Failed> {
    use bus::codecs::normalize::Normalizer;
    use bus::codecs::synth::{write_itch, write_pcap, DayConfig};
    let cfg = DayConfig::new(11, 5, 3000);
    let file = build_dir().join(format!("day-{}.{}", std::process::id(), if capture { "pcap" } else { "itch" }));
    let mut day = Vec::new();
    if capture {
        write_pcap(cfg, &mut day, bus::codecs::pcap::Endpoints::default())?;
    } else {
        write_itch(cfg, &mut day)?;
    }
    std::fs::write(&file, &day)?;
    // The Rust normaliser over the same file, as `tickbus exchange` runs it.
    let fnv = |b: &[u8]| b.iter().fold(0xcbf29ce484222325u64, |h, x| (h ^ *x as u64).wrapping_mul(0x100000001b3));
    let mut want = String::new();
    let mut norm = Normalizer::new();
    let mut source = bus::replay::open(&file, None, None)?;
    let (mut position, mut unparsed) = (0u64, 0u64);
    while let Some(item) = source.next()? {
        let Ok(msg) = bus::codecs::itch::parse(item.payload, item.sequence) else {
            unparsed += 1;
            continue;
        };
        let t = item.time_ns.unwrap_or(0);
        norm.apply(&msg, &mut |m| {
            let b = m.as_bytes();
            let h = bus::codecs::Header::peek(b).expect("a header");
            want += &format!("{position} {} {} {t} {:016x}\n", h.msg_type, b.len(), fnv(b));
            position += 1;
        });
    }
    want += &format!("end {unparsed}\n");
    assert!(position > 1000, "the day normalises to messages: {position}");
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let bin = BIN
        .get_or_init(|| compile("market_data", &[src("c/market_data.c")], false, true).map_err(|e| format!("{e:?}")))
        .clone()?;
    let got = run(Command::new(bin).arg(&file), Duration::from_secs(60))?;
    let _ = std::fs::remove_file(&file);
    assert_eq!(got, want);
    Ok(())
}
