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

/// The modules a line of code names as `crate::X`, including each of a group (`crate::{a, b}`).
fn named(code: &str) -> Vec<String> {
    let ident = |t: &str| -> String { t.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect() };
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + 7..];
        match rest.strip_prefix('{') {
            // A group: every top-level name in it (a nested group's head counts, its inside not).
            Some(group) => {
                let (mut depth, mut start) = (0, 0);
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            out.push(ident(group[start..].trim_start()));
                            break;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            out.push(ident(group[start..].trim_start()));
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
            }
            None => out.push(ident(rest)),
        }
    }
    out.retain(|t| !t.is_empty() && t != "self");
    out
}

/// Lines of code in `text` (comments left out) that name a `crate::X` the rule refuses. A group
/// that rustfmt spread over lines (`use crate::{` and its names below) is read whole, and
/// reported at the line it starts on.
fn offenders(text: &str, rule: Rule) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let code: Vec<&str> = lines.iter().map(|l| l.split("//").next().unwrap_or("")).collect();
    let mut found = Vec::new();
    for (n, line) in code.iter().enumerate() {
        if !line.contains("crate::") {
            continue;
        }
        // From this line on, as far as a group that opens here needs (its braces balanced).
        let mut joined = String::from(*line);
        let mut depth: i32 = line.matches('{').count() as i32 - line.matches('}').count() as i32;
        let mut next = n + 1;
        while line.contains("crate::{") && depth > 0 && next < code.len() {
            joined.push(' ');
            joined.push_str(code[next]);
            depth += code[next].matches('{').count() as i32 - code[next].matches('}').count() as i32;
            next += 1;
        }
        for target in named(&joined) {
            let bad = match rule {
                Rule::Only(list) => !list.contains(&target.as_str()),
                Rule::Not(list) => list.contains(&target.as_str()),
            };
            if bad {
                found.push((n + 1, lines[n].trim().to_owned()));
                break;
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
    let out = reaching_out("sys", Rule::Not(&["wire", "rdma", "mcast", "shm", "xdp", "stream", "control"]));
    assert!(out.is_empty(), "sys imports from above it:\n{}", out.join("\n"));
}

#[test]
fn no_transport_borrows_from_another() {
    let mut out = reaching_out("mcast", Rule::Not(&["rdma", "shm", "xdp"]));
    out.extend(reaching_out("rdma", Rule::Not(&["mcast", "shm", "xdp"])));
    out.extend(reaching_out("shm", Rule::Not(&["rdma", "mcast", "xdp"])));
    out.extend(reaching_out("xdp", Rule::Not(&["rdma", "mcast", "shm"])));
    out.extend(reaching_out("control", Rule::Not(&["rdma", "mcast", "shm", "xdp", "stream"])));
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
fn the_check_finds_an_import_in_code_and_in_a_group_and_not_in_a_comment() {
    let text = "use super::slot;\n// crate::fault in a comment\nlet t = crate::time::ticks_per_ns(); // crate::x\nuse crate::ring::Mode;\nuse crate::{ring::{Mode, Gap}, counters, self};\n";
    assert_eq!(
        offenders(text, Rule::Only(&["ring"])),
        vec![
            (3, "let t = crate::time::ticks_per_ns(); // crate::x".to_owned()),
            (5, "use crate::{ring::{Mode, Gap}, counters, self};".to_owned())
        ]
    );
    assert_eq!(named("use crate::{ring::{Mode, Gap}, counters, self};"), ["ring", "counters"]);
    assert!(offenders(text, Rule::Not(&["fault"])).is_empty());
    // Forbidding the ring finds the plain import and the group that names it.
    assert_eq!(offenders(text, Rule::Not(&["ring"])).iter().map(|(n, _)| *n).collect::<Vec<_>>(), [4, 5]);
    // A group rustfmt spread over lines is read whole and reported where it starts.
    let spread =
        "use super::x;\nuse crate::{\n    counters::Counter,\n    ring::Mode, // crate::fault\n};\nfn f() {}\n";
    assert_eq!(offenders(spread, Rule::Not(&["ring"])), vec![(2, "use crate::{".to_owned())]);
    assert!(offenders(spread, Rule::Not(&["fault"])).is_empty(), "a comment inside the group is not code");
}
