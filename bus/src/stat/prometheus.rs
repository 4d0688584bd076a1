//! The exposition of a snapshot for a Prometheus scrape, in the OpenMetrics text format, encoded
//! by `prometheus-client` (the Prometheus project's Rust client): one counter or gauge family per
//! tickbus counter, labelled by process, owner, role, transport, stream and name.
//!
//! Owns: which families there are and their labels, and escaping the label values: the encoder
//! writes a label value as it is given (a test here found a quote or newline in a ring or
//! program name went out raw and broke the scrape), and names come from files anyone may write.
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter as PromCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{Snapshot, StreamView};
use crate::counters::Counter;

/// The `Content-Type` of what [`prometheus`] returns.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Vec<(&'static str, String)>;

/// Positions, the activity stamp and the peer count are levels; every other counter only grows.
fn is_gauge(c: Counter) -> bool {
    matches!(c, Counter::Position | Counter::LastActivityTsc | Counter::Peers)
}

/// A label value as the text format wants it: backslash, double quote and newline escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn labels(s: &StreamView) -> Labels {
    vec![
        ("pid", s.pid.to_string()),
        ("uid", s.uid.to_string()),
        ("record", s.record.to_string()),
        ("program", escape(&s.program)),
        ("role", escape(&s.role)),
        ("transport", escape(&s.transport)),
        ("stream", s.stream_id.to_string()),
        ("name", escape(&s.name)),
    ]
}

/// A level as a gauge sample (OpenMetrics gauges are signed; a position past 2^63 is shown as
/// the largest one).
fn level(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Renders `snap` for a Prometheus scrape (serve it as [`CONTENT_TYPE`]).
pub fn prometheus(snap: &Snapshot) -> String {
    let mut reg = Registry::with_prefix("tickbus");
    let live = Family::<Labels, Gauge>::default();
    for s in &snap.streams {
        live.get_or_create(&labels(s)).set(i64::from(s.live));
    }
    reg.register("stream_live", "1 while the owning process runs, 0 for a crashed one's last figures", live);
    for c in Counter::ALL {
        let help = format!("tickbus counter `{}` per stream end", c.name());
        if is_gauge(c) {
            let f = Family::<Labels, Gauge>::default();
            for s in &snap.streams {
                f.get_or_create(&labels(s)).set(level(s.get(c)));
            }
            reg.register(c.name(), help, f);
        } else {
            let f = Family::<Labels, PromCounter>::default();
            for s in &snap.streams {
                f.get_or_create(&labels(s)).inc_by(s.get(c));
            }
            reg.register(c.name(), help, f);
        }
    }
    let lag = Family::<Labels, Gauge>::default();
    for s in &snap.streams {
        if let Some(l) = s.lag {
            lag.get_or_create(&labels(s)).set(level(l));
        }
    }
    reg.register("lag", "Messages published that the subscriber has not read", lag);
    let ring = Family::<Labels, Gauge>::default();
    for r in &snap.rings {
        let l =
            vec![("ring", escape(&r.name)), ("stream", r.stream_id.to_string()), ("publisher", escape(&r.publisher))];
        ring.get_or_create(&l).set(level(r.position));
    }
    reg.register("ring_position", "Messages published on a shm ring", ring);
    // A refused folder or unreadable file must not be silent in a scrape either.
    let errors = Gauge::<i64>::default();
    errors.set(level(snap.errors.len() as u64));
    reg.register(
        "stat_errors",
        "Counters folders refused and files unreadable in this snapshot (`tickbus stat` names each)",
        errors,
    );
    let mut out = String::new();
    encode(&mut out, &reg).expect("writing to a String cannot fail");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_is_one_family_with_help_type_and_escaped_labels() {
        let mut counters = std::collections::BTreeMap::new();
        for c in Counter::ALL {
            counters.insert(c.name().to_owned(), c as u64 * 10);
        }
        let s = StreamView {
            pid: 7,
            uid: 1000,
            program: "a\"b\\".into(),
            live: true,
            stale: None,
            role: "subscriber".into(),
            transport: "shm".into(),
            stream_id: 3,
            name: "md\nx".into(),
            counters,
            lag: Some(4),
            msgs_per_s: None,
            mb_per_s: None,
            idle_s: None,
            record: 0,
        };
        let ring = super::super::RingView {
            name: "r\"1".into(),
            path: "/dev/hugepages/tickbus/r".into(),
            backing: "hugepages".into(),
            mode: "lossy".into(),
            stream_id: 9,
            slot_size: 64,
            slot_count: 8,
            position: 12,
            publisher: "live".into(),
            publisher_pid: 7,
            consumers: vec![],
        };
        let text = prometheus(&Snapshot { unix_ns: 1, streams: vec![s], rings: vec![ring], errors: vec![] });
        assert!(text.contains("tickbus_ring_position{ring=\"r\\\"1\",stream=\"9\",publisher=\"live\"} 12\n"), "{text}");
        let l = r#"pid="7",uid="1000",record="0",program="a\"b\\",role="subscriber",transport="shm",stream="3",name="md\nx""#;
        assert!(text.contains(&format!("tickbus_gaps_total{{{l}}} 30\n")), "{text}");
        assert!(text.contains(&format!("tickbus_position{{{l}}} 0\n")), "{text}");
        assert!(text.contains(&format!("tickbus_lag{{{l}}} 4\n")), "{text}");
        assert!(text.contains("# TYPE tickbus_full counter\n"), "{text}");
        assert!(text.contains("# TYPE tickbus_position gauge\n"), "{text}");
        assert_eq!(text.matches("# TYPE ").count(), Counter::ALL.len() + 4);
        assert!(text.contains("tickbus_stat_errors 0\n"), "{text}");
        assert!(text.ends_with("# EOF\n"), "an OpenMetrics exposition ends so: {text}");
        // No line but the samples and the descriptors: the newline in the name was escaped.
        assert!(text.lines().all(|l| l.starts_with("tickbus_") || l.starts_with("# ")), "{text}");
    }
}
