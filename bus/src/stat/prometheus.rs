//! The Prometheus text exposition (format 0.0.4) of a snapshot: one gauge or counter family per
//! tickbus counter, labelled by process, role, transport, stream and name.
use std::fmt::Write as _;

use super::Snapshot;
use crate::counters::Counter;

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Counters only grow; positions, lag and the activity stamp are levels.
fn kind(c: Counter) -> &'static str {
    match c {
        Counter::Position | Counter::LastActivityTsc | Counter::Peers => "gauge",
        _ => "counter",
    }
}

/// Renders `snap` for a Prometheus scrape.
pub fn prometheus(snap: &Snapshot) -> String {
    let mut out = String::new();
    let labels = |s: &super::StreamView| {
        format!(
            "pid=\"{}\",record=\"{}\",program=\"{}\",role=\"{}\",transport=\"{}\",stream=\"{}\",name=\"{}\"",
            s.pid,
            s.record,
            escape(&s.program),
            s.role,
            s.transport,
            s.stream_id,
            escape(&s.name)
        )
    };
    let _ =
        writeln!(out, "# HELP tickbus_stream_live 1 while the owning process runs, 0 for a crashed one's last figures");
    let _ = writeln!(out, "# TYPE tickbus_stream_live gauge");
    for s in &snap.streams {
        let _ = writeln!(out, "tickbus_stream_live{{{}}} {}", labels(s), u8::from(s.live));
    }
    for c in Counter::ALL {
        let suffix = if kind(c) == "counter" { "_total" } else { "" };
        let metric = format!("tickbus_{}{suffix}", c.name());
        let _ = writeln!(out, "# HELP {metric} tickbus counter `{}` per stream end", c.name());
        let _ = writeln!(out, "# TYPE {metric} {}", kind(c));
        for s in &snap.streams {
            let _ = writeln!(out, "{metric}{{{}}} {}", labels(s), s.get(c));
        }
    }
    let _ = writeln!(out, "# HELP tickbus_lag Messages published that the subscriber has not read");
    let _ = writeln!(out, "# TYPE tickbus_lag gauge");
    for s in snap.streams.iter().filter(|s| s.lag.is_some()) {
        let _ = writeln!(out, "tickbus_lag{{{}}} {}", labels(s), s.lag.unwrap_or(0));
    }
    let _ = writeln!(out, "# HELP tickbus_ring_position Messages published on a shm ring");
    let _ = writeln!(out, "# TYPE tickbus_ring_position gauge");
    for r in &snap.rings {
        let _ = writeln!(
            out,
            "tickbus_ring_position{{ring=\"{}\",stream=\"{}\",publisher=\"{}\"}} {}",
            escape(&r.name),
            r.stream_id,
            r.publisher,
            r.position
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stat::StreamView;

    #[test]
    fn every_counter_is_one_family_with_help_type_and_escaped_labels() {
        let mut counters = std::collections::BTreeMap::new();
        for c in Counter::ALL {
            counters.insert(c.name().to_owned(), c as u64 * 10);
        }
        let s = StreamView {
            pid: 7,
            program: "a\"b".into(),
            live: true,
            stale: None,
            role: "subscriber".into(),
            transport: "shm".into(),
            stream_id: 3,
            name: "md".into(),
            counters,
            lag: Some(4),
            msgs_per_s: None,
            mb_per_s: None,
            idle_s: None,
            record: 0,
        };
        let text = prometheus(&Snapshot { unix_ns: 1, streams: vec![s], rings: vec![], errors: vec![] });
        let l = r#"pid="7",record="0",program="a\"b",role="subscriber",transport="shm",stream="3",name="md""#;
        assert!(text.contains(&format!("tickbus_gaps_total{{{l}}} 30\n")), "{text}");
        assert!(text.contains(&format!("tickbus_position{{{l}}} 0\n")), "{text}");
        assert!(text.contains(&format!("tickbus_lag{{{l}}} 4\n")), "{text}");
        assert!(text.contains("# TYPE tickbus_full_total counter\n"), "{text}");
        assert_eq!(text.matches("# TYPE ").count(), Counter::ALL.len() + 3);
    }
}
