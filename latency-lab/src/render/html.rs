//! `index.html`: the whole report on one self-contained page (tables, the SVG plots inline, the
//! environment and the run's settings) for the people who would rather look than read. No
//! scripts, no external resources: it opens from a file, offline, in any browser.
use std::fmt::Write as _;
use std::path::Path;

use crate::model::{Report, Section, PERCENTILES};

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;background:#fff}\
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}\
table.lab td,table.lab th{text-align:right}table.lab td:first-child,table.lab th:first-child{text-align:left}th{background:#eef}tr.tickbus td{background:#eaf6ea}\
tr.suspect td{background:#fde8e8}.x{color:#777;font-size:.85em}pre{background:#f6f6f6;padding:.6em;overflow-x:auto}\
.fail{color:#b00;font-weight:bold}.warn{color:#a60}.met{color:#070;font-weight:bold}figure{margin:1em 0}figure svg{max-width:100%;height:auto}";

/// One table of percentiles with each figure's ratio to the floor and to the best peer.
fn section_table(sec: &Section, out: &mut String) {
    let key = sec.key();
    let _ = writeln!(out, "<table class=\"lab\" data-table=\"{}\"><tr><th>transport</th>", esc(&key));
    for (_, name) in PERCENTILES {
        let _ = write!(out, "<th>{name}</th>");
    }
    let _ = writeln!(out, "<th>max</th><th>n</th></tr>");
    for r in &sec.rows {
        let class = if r.suspect.is_some() || r.backlog.is_some() {
            "suspect"
        } else if r.kind == crate::model::Kind::Tickbus {
            "tickbus"
        } else {
            ""
        };
        let _ = write!(out, "<tr class=\"{class}\"><td title=\"{}\">{}{}</td>", esc(&r.note), esc(&r.name), r.marks());
        for (k, v) in r.ns.iter().enumerate() {
            let f = r.x_floor.as_ref().map_or("-".into(), |x| format!("{:.2}", x[k]));
            let b = r.x_best_peer.as_ref().map_or("-".into(), |x| format!("{:.2}", x[k]));
            let _ = write!(out, "<td>{v} <span class=\"x\">({f} | {b})</span></td>");
        }
        let _ = writeln!(out, "<td>{}</td></tr>", r.count);
    }
    let _ = writeln!(out, "</table>");
    for r in sec.rows.iter().filter_map(|r| r.suspect.as_ref().map(|w| (r, w))) {
        let _ = writeln!(out, "<p class=\"fail\">{}: {}</p>", esc(&r.0.name), esc(r.1));
    }
    for r in sec.rows.iter().filter_map(|r| r.backlog.as_ref().map(|b| (r, b))) {
        let _ = writeln!(out, "<p class=\"fail\">{}: {}</p>", esc(&r.0.name), esc(&r.1.says()));
    }
}

/// The plot `file` from the report folder, inline (an SVG is text); a note if it is missing.
fn plot(dir: &Path, file: &str, out: &mut String) {
    match std::fs::read_to_string(dir.join(file)) {
        Ok(svg) => {
            // Drop the XML declaration: inside HTML the <svg> element stands on its own.
            let svg = svg.find("<svg").map_or(svg.as_str(), |i| &svg[i..]);
            let _ = writeln!(
                out,
                "<figure data-plot=\"{}\">{svg}<figcaption>{}</figcaption></figure>",
                esc(file),
                esc(file)
            );
        }
        Err(e) => {
            let _ = writeln!(out, "<p class=\"warn\">plot {} missing: {e}</p>", esc(file));
        }
    }
}

/// The verdict panel, first on the page: every target, its figure with spread, met / not met /
/// backlogged / noisy, and a link to its table.
fn verdict_panel(targets: &[crate::model::verdict::Target], out: &mut String) {
    use crate::model::verdict::Status;
    let _ = writeln!(
        out,
        "<h2 id=\"verdicts\">Verdicts</h2><table data-table=\"verdicts\">\
         <tr><th>target</th><th>measured</th><th>goal</th><th>verdict</th><th>table</th></tr>"
    );
    for t in targets {
        let class = match t.status {
            Status::Met => "met",
            Status::NotMet => "fail",
            Status::Backlogged | Status::Noisy => "warn",
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{class}\">{}</td><td><a href=\"#{}\">table</a></td></tr>",
            esc(&t.what),
            esc(&t.figure),
            esc(&t.goal),
            esc(t.status.says()),
            esc(&t.anchor)
        );
    }
    if targets.is_empty() {
        let _ = writeln!(out, "<tr><td colspan=\"5\">no part with a target ran</td></tr>");
    }
    let _ = writeln!(out, "</table>");
}

fn pre(title: &str, id: &str, text: &str, out: &mut String) {
    let _ = writeln!(out, "<h2 id=\"{id}\">{}</h2><pre data-table=\"{id}\">{}</pre>", esc(title), esc(text));
}

/// Writes `dir/index.html` for `rep`, whose files (plots) are already in `dir`.
pub fn write(rep: &Report, dir: &Path) -> std::io::Result<()> {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>tickbus latency lab</title>\
         <style>{STYLE}</style></head><body><h1>tickbus latency lab</h1>"
    );
    verdict_panel(&rep.targets(), &mut o);
    let _ = writeln!(o, "<h2 id=\"settings\">Run</h2><table data-table=\"settings\">");
    let mut settings = vec![
        ("machine", rep.machine.clone()),
        ("cores", format!("{} / {}", rep.cores.0, rep.cores.1)),
        ("TSC", format!("{:.3} ticks/ns", rep.ticks_per_ns)),
    ];
    if !rep.command.is_empty() {
        settings.push(("command", rep.command.clone()));
    }
    for (k, v) in settings {
        let _ = writeln!(o, "<tr><td>{k}</td><td>{}</td></tr>", esc(&v));
    }
    let _ = writeln!(o, "</table>");
    for (title, env) in [("Environment", &rep.environment), ("RDMA guest environment", &rep.environment_rdma)] {
        let Some(env) = env else { continue };
        let id = &env.identity;
        let _ = writeln!(
            o,
            "<h2>{title}</h2><p>{} ({}), kernel {}, {} CPUs, {} GiB, {}; doctor: <b>{}</b></p>\
             <table data-table=\"{}\"><tr><th>check</th><th>status</th><th>found</th><th>fix</th></tr>",
            esc(&id.hostname),
            esc(&id.cpu_model),
            esc(&id.kernel),
            id.cpus,
            id.memory_bytes >> 30,
            esc(&id.virtualization),
            if env.ready() { "ready" } else { "NOT ready" },
            if title == "Environment" { "environment" } else { "environment-rdma" }
        );
        for f in &env.findings {
            let st = format!("{:?}", f.status).to_lowercase();
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td class=\"{st}\">{st}</td><td>{}</td><td>{}</td></tr>",
                esc(&f.check),
                esc(&f.detail),
                esc(f.remedy.as_deref().unwrap_or(""))
            );
        }
        let _ = writeln!(o, "</table>");
    }
    if let Some(t) = &rep.tick_to_trade {
        let _ = writeln!(o, "<h2 id=\"{}\">Tick-to-trade</h2>", esc(&t.key()));
        section_table(t, &mut o);
        plot(dir, &format!("{}.svg", t.key()), &mut o);
    }
    if !rep.pipeline.is_empty() {
        pre(
            "Trading pipeline across processes",
            "pipeline",
            &crate::render::text::pipeline_table(&rep.pipeline),
            &mut o,
        );
        plot(dir, "pipeline-hops.svg", &mut o);
    }
    if let Some(c) = &rep.snapshot_cost {
        pre(
            "The venue's publish latency with its snapshot maker",
            "snapshot-cost",
            &crate::render::text::snapshot_cost_table(c),
            &mut o,
        );
    }
    if let Some(c) = &rep.join_cost {
        pre(
            "The venue's publish latency while a late joiner catches up",
            "join-cost",
            &crate::render::text::join_cost_table(c),
            &mut o,
        );
    }
    if !rep.wire_trade.is_empty() {
        pre("Wire-to-trade", "wire-to-trade", &crate::render::text::wire_trade_table(&rep.wire_trade), &mut o);
        plot(dir, "wire-to-trade-hops.svg", &mut o);
    }
    if let Some(r) = &rep.pipeline_rdma {
        pre("Trading pipeline over RDMA", "pipeline-rdma", &crate::render::text::rdma_table(r), &mut o);
    }
    for f in &rep.fanout {
        let key = format!("fanout-{}", crate::model::slug(&f.transport));
        pre(&format!("Fan-out on {}", f.transport), &key, &f.table(), &mut o);
        plot(dir, &f.plot_file(), &mut o);
    }
    if let Some(v) = &rep.rdma_versus {
        pre(
            "RDMA beside perftest, in alternating rounds",
            "rdma-versus",
            &crate::render::text::versus_table(v),
            &mut o,
        );
    }
    for sec in &rep.sections {
        let what = match sec.rate {
            Some(r) => format!("one-way at {} msg/s, {} B", crate::model::rate_name(r), sec.size),
            None => format!("{}, {} B", sec.mode, sec.size),
        };
        let _ = writeln!(o, "<h2 id=\"{}\">{}</h2>", esc(&sec.key()), esc(&what));
        let _ = writeln!(o, "<p class=\"x\">ns (x floor | x best peer)</p>");
        section_table(sec, &mut o);
        plot(dir, &format!("{}.svg", sec.key()), &mut o);
    }
    if !rep.throughput.is_empty() {
        let _ = writeln!(
            o,
            "<h2 id=\"throughput\">Throughput, sender flat out</h2><table data-table=\"throughput\">\
             <tr><th>transport</th><th>size</th><th>msg/s</th><th>MB/s</th><th>x best peer</th></tr>"
        );
        for t in &rep.throughput {
            let x = t.x_best_peer.map_or("-".into(), |x| format!("{x:.2}"));
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{} B</td><td>{:.0}</td><td>{:.1}</td><td>{x}</td></tr>",
                esc(&t.name),
                t.size,
                t.msgs_per_s,
                t.mb_per_s
            );
        }
        let _ = writeln!(o, "</table>");
    }
    if let Some(i) = &rep.itch {
        pre("ITCH decode and the order book", "itch", &i.table(), &mut o);
    }
    if let Some(b) = &rep.book {
        pre("The order book at TotalView scale", "book", &b.table(), &mut o);
    }
    if let Some(j) = &rep.journal {
        pre("Journal", "journal", &j.table(), &mut o);
    }
    if !rep.notes.is_empty() {
        let _ = writeln!(o, "<h2 id=\"notes\">Notes</h2><ul>");
        for n in &rep.notes {
            let _ = writeln!(o, "<li>{}</li>", esc(n));
        }
        let _ = writeln!(o, "</ul>");
    }
    let _ = writeln!(o, "</body></html>");
    std::fs::write(dir.join("index.html"), o)
}
