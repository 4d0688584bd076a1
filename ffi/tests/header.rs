//! The committed C header is what cbindgen makes from this crate's source: an ABI change that
//! was not regenerated fails here (and so in CI). `TICKBUS_BLESS=1` rewrites it instead.
use std::path::Path;

#[test]
fn the_committed_header_matches_the_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("ffi/cbindgen.toml parses");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen reads ffi/src")
        .write(&mut generated);
    let path = dir.join("include/tickbus.h");
    if std::env::var_os("TICKBUS_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} does not match the code: regenerate it with `TICKBUS_BLESS=1 cargo test -p tickbus-ffi --test header` and commit it",
        path.display()
    );
}
