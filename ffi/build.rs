//! Gives libtickbus_ffi.so a SONAME with the ABI version (`libtickbus_ffi.so.<TB_ABI_VERSION>`),
//! so an app linked against this ABI refuses to load a library of another one (install.sh
//! installs the file under that name with the usual `.so` link beside it).
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtickbus_ffi.so.{}", ABI_VERSION);
    }
}

/// Kept equal to `TB_ABI_VERSION` in src/lib.rs (a test there checks).
const ABI_VERSION: u32 = 1;
