//! The C++ example (`examples/cpp`, the C++ twin of `tickbus trader`) as a C++ developer builds
//! it from the README: the C library installed into a prefix by `ffi/install.sh` (with the
//! build `cargo test` just made), the example configured and built by CMake through pkg-config,
//! then run against `tickbus exchange` over shm. Every order is answered exactly once, and the
//! exchange's gateway counts the same orders.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn run(c: &mut Command, what: &str) -> String {
    let o = c.output().unwrap_or_else(|e| panic!("{what}: {e} (is it installed? tools/setup-peers.sh)"));
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{what} failed ({}):\n{out}\n{err}", o.status);
    out.into_owned()
}

#[test]
fn the_cpp_trader_built_with_cmake_trades_with_the_exchange() {
    let tag = format!("tickbus-cpp-example-{}", std::process::id());
    let tmp = std::env::temp_dir().join(&tag);
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    // `cargo test` built libtickbus_ffi.{a,so} (a dev-dependency) beside this test.
    let deps: PathBuf = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    let prefix = tmp.join("prefix");
    run(Command::new(root().join("ffi/install.sh")).arg(&prefix).env("TICKBUS_FFI_LIB_DIR", &deps), "ffi/install.sh");
    let pc = std::fs::read_to_string(prefix.join("lib/pkgconfig/tickbus.pc")).unwrap();
    // The library under its SONAME (the ABI version), the development link beside it.
    assert!(prefix.join("lib/libtickbus_ffi.so.1").is_file(), "installed under its SONAME");
    assert_eq!(std::fs::read_link(prefix.join("lib/libtickbus_ffi.so")).unwrap(), Path::new("libtickbus_ffi.so.1"));
    assert!(pc.contains("-ltickbus_ffi") && pc.contains(&format!("prefix={}", prefix.display())), "{pc}");
    let build = tmp.join("build");
    run(
        Command::new("cmake")
            .args(["-S"])
            .arg(root().join("examples/cpp"))
            .arg("-B")
            .arg(&build)
            .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display())),
        "cmake (configure)",
    );
    run(Command::new("cmake").arg("--build").arg(&build), "cmake --build");
    let trader_bin = build.join("cpp_trader");
    assert!(trader_bin.exists());

    let tb = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tickbus"));
        c.args(args)
            .env("TICKBUS_HUGEPAGE_DIR", format!("/dev/hugepages/{tag}"))
            .env("TICKBUS_SHM_DIR", format!("/dev/shm/{tag}"));
        c
    };
    let day = tmp.join("day.itch");
    let day = day.to_str().unwrap();
    run(&mut tb(&["itch", "generate", "--seed", "5", "--stocks", "8", "--messages", "20000", "--itch", day]), "itch");
    let rings = ["--md", "shm:md", "--orders", "shm:orders", "--execs", "shm:execs"];
    let mut ex_args = vec!["exchange", "--itch", day, "--rate", "50000", "--json"];
    ex_args.extend(rings);
    let exchange = tb(&ex_args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let ex_pid = exchange.id();
    let trader = Command::new(&trader_bin)
        .args(rings)
        .env("TICKBUS_HUGEPAGE_DIR", format!("/dev/hugepages/{tag}"))
        .env("TICKBUS_SHM_DIR", format!("/dev/shm/{tag}"))
        .output();
    let exchange =
        tickbus_testkit::within(Duration::from_secs(120), "the exchange", move || exchange.wait_with_output());
    let cleanup = || {
        let _ = std::fs::remove_dir_all(&tmp);
        let _ = std::fs::remove_dir_all(format!("/dev/hugepages/{tag}"));
        let _ = std::fs::remove_dir_all(format!("/dev/shm/{tag}"));
    };
    let trader = trader.unwrap();
    let exchange = exchange.unwrap_or_else(|e| panic!("exchange {ex_pid}: {e}"));
    cleanup();
    let t_err = String::from_utf8_lossy(&trader.stderr);
    let e_err = String::from_utf8_lossy(&exchange.stderr);
    assert!(trader.status.success(), "cpp_trader failed ({}):\n{t_err}\nexchange:\n{e_err}", trader.status);
    assert!(exchange.status.success(), "exchange failed:\n{e_err}");
    let t: serde_json::Value = serde_json::from_slice(&trader.stdout).unwrap();
    let x: serde_json::Value = serde_json::from_slice(&exchange.stdout).unwrap();
    let n = |v: &serde_json::Value, path: &[&str]| {
        path.iter().fold(v, |v, k| &v[k]).as_u64().unwrap_or_else(|| panic!("no {path:?} in {v}"))
    };
    let orders = n(&t, &["orders"]);
    assert!(orders > 100, "the C++ trader traded: {t}");
    assert_eq!((n(&t, &["unanswered"]), n(&t, &["answered_twice"]), n(&t, &["unexpected"])), (0, 0, 0), "{t}");
    assert_eq!(n(&t, &["reports"]), orders, "one report per order: {t}");
    assert_eq!(n(&t, &["ticks"]), n(&x, &["md", "published"]), "every tick reached the C++ trader: {t} {x}");
    assert_eq!(n(&t, &["md_missed"]), 0);
    let g = &x["gateway"];
    assert_eq!(n(g, &["counts", "orders"]), orders, "every order reached the gateway: {g}");
    let answered = ["fills", "expired", "rejects"].iter().map(|k| n(g, &["counts", k])).sum::<u64>();
    assert_eq!(answered, orders, "each order answered once by the gateway");
    assert_eq!(n(g, &["counts", "fills"]), n(&t, &["fills"]), "the fills the gateway made are the ones the trader saw");
}
