//! The layering ARCHITECTURE.md draws, held by reading the sources: a module that starts to
//! import from a layer above it (or from a sibling it must not lean on) fails here, naming the
//! file and line, instead of growing a cycle nobody sees.
use std::path::{Path, PathBuf};

/// Every `.rs` file under `bus/src/<dir>`.
fn sources(dir: &str) -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).unwrap_or_else(|e| panic!("reading {}: {e}", d.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(dir), &mut out);
    assert!(!out.is_empty(), "no sources under src/{dir}");
    out
}

/// Which modules a file may name as `crate::X`.
#[derive(Clone, Copy)]
enum Rule<'a> {
    /// Only these.
    Only(&'a [&'a str]),
    /// Any but these.
    Not(&'a [&'a str]),
}

/// Lines of code in `text` (comments left out) that name a `crate::X` the rule refuses.
fn offenders(text: &str, rule: Rule) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for (at, _) in code.match_indices("crate::") {
            let target: String =
                code[at + 7..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            let bad = match rule {
                Rule::Only(list) => !list.contains(&target.as_str()),
                Rule::Not(list) => list.contains(&target.as_str()),
            };
            if bad {
                found.push((n + 1, line.trim().to_owned()));
            }
        }
    }
    found
}

/// Every offending line under `bus/src/<dir>`, as `file:line: text`.
fn reaching_out(dir: &str, rule: Rule) -> Vec<String> {
    let mut found = Vec::new();
    for file in sources(dir) {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in offenders(&text, rule) {
            found.push(format!("{}:{n}: {line}", file.display()));
        }
    }
    found
}

#[test]
fn the_ring_protocol_imports_nothing_above_it() {
    let out = reaching_out("ring", Rule::Only(&["ring"]));
    assert!(out.is_empty(), "the ring imports from above it:\n{}", out.join("\n"));
}

#[test]
fn sys_does_not_import_the_wire_formats_or_a_transport() {
    let out = reaching_out("sys", Rule::Not(&["wire", "rdma", "mcast", "shm", "stream", "control"]));
    assert!(out.is_empty(), "sys imports from above it:\n{}", out.join("\n"));
}

#[test]
fn no_transport_borrows_from_another() {
    let mut out = reaching_out("mcast", Rule::Not(&["rdma", "shm"]));
    out.extend(reaching_out("rdma", Rule::Not(&["mcast", "shm"])));
    out.extend(reaching_out("shm", Rule::Not(&["rdma", "mcast"])));
    out.extend(reaching_out("control", Rule::Not(&["rdma", "mcast", "shm", "stream"])));
    assert!(out.is_empty(), "a transport borrows from another:\n{}", out.join("\n"));
}

#[test]
fn the_stream_api_and_the_agents_import_no_service_above_them() {
    let services: &[&str] = &["journal", "replay", "merge", "snapshot", "feed", "stat", "doctor"];
    let mut out = reaching_out("stream", Rule::Not(services));
    out.extend(reaching_out("agent", Rule::Not(services)));
    assert!(out.is_empty(), "the stream API imports a service:\n{}", out.join("\n"));
}

#[test]
fn the_check_finds_an_import_in_code_and_not_in_a_comment() {
    let text = "use super::slot;\n// crate::fault in a comment\nlet t = crate::time::ticks_per_ns(); // crate::x\nuse crate::ring::Mode;\n";
    assert_eq!(
        offenders(text, Rule::Only(&["ring"])),
        vec![(3, "let t = crate::time::ticks_per_ns(); // crate::x".to_owned())]
    );
    assert_eq!(offenders(text, Rule::Not(&["ring"])).len(), 1);
    assert!(offenders(text, Rule::Not(&["fault"])).is_empty());
}
