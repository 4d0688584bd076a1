//! With the `xdp` feature, compiles the feed's XDP program (`xdp/feed_steer.c`) to BPF with
//! clang; `tickbus::xdp` embeds the object and loads it at run time. Without the feature it does
//! nothing, so an embedder that does not take frames off the wire needs no clang.
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=xdp/feed_steer.c");
    println!("cargo:rerun-if-env-changed=TICKBUS_BPF_CLANG");
    if std::env::var_os("CARGO_FEATURE_XDP").is_none() {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("feed_steer.o");
    let clang = std::env::var("TICKBUS_BPF_CLANG").unwrap_or_else(|_| "clang".into());
    // The kernel's UAPI headers sit under the multiarch folder on Debian (asm/types.h).
    let multiarch = Command::new("gcc")
        .arg("-print-multiarch")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "x86_64-linux-gnu".into());
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror"])
        .arg(format!("-I/usr/include/{multiarch}"))
        .args(["-c", "xdp/feed_steer.c", "-o"])
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{clang} could not compile xdp/feed_steer.c to BPF ({s}): see its messages above"),
        Err(e) => panic!(
            "the `xdp` feature compiles its XDP program with clang, and `{clang}` did not run ({e}): \
             install clang and the kernel headers (`apt-get install clang linux-libc-dev`, done by \
             tools/setup-host.sh), or set TICKBUS_BPF_CLANG to a clang that targets bpf"
        ),
    }
}
