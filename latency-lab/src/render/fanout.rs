//! Fan-out as a table and a plot.
use std::error::Error;
use std::fmt::Write as _;
use std::path::Path;

use crate::model::fanout::{FanoutReport, FanoutRow};
use crate::model::slug;

impl FanoutReport {
    /// The table, with the publisher's cost as a multiple of its cost with one subscriber.
    pub fn table(&self) -> String {
        let mut s = format!(
            "FAN-OUT on {}: {}; {} msg/s open loop, {} messages of 64 B\n\
             subscribers  publish p50    p99   (x 1 sub)   subscriber one-way p50 / p99 (ns, each)   full\n",
            self.transport, self.setup, self.rate, self.messages
        );
        let base = self.rows.first().map_or(1, |r| r.publish_p50_ns.max(1));
        for r in &self.rows {
            let mut subs: Vec<String> =
                r.sub_p50_ns.iter().zip(&r.sub_p99_ns).map(|(a, b)| format!("{a}/{b}")).collect();
            if subs.is_empty() {
                subs.push("not measured".into());
            }
            let _ = writeln!(
                s,
                "{:>11} {:>12} {:>6}   {:>8.2}x   {:<40} {:>5}",
                r.subscribers,
                r.publish_p50_ns,
                r.publish_p99_ns,
                r.publish_p50_ns as f64 / base as f64,
                subs.join(" "),
                r.late_sends
            );
        }
        s
    }

    /// The plot's file name.
    pub fn plot_file(&self) -> String {
        format!("fanout-{}.svg", slug(&self.transport))
    }

    /// Publisher cost and subscriber latency against the subscriber count.
    pub fn plot(&self, path: &Path) -> Result<(), Box<dyn Error>> {
        use plotters::prelude::*;
        let pick = |f: &dyn Fn(&FanoutRow) -> u64| -> Vec<(f64, f64)> {
            self.rows.iter().map(|r| (r.subscribers as f64, f(r).max(1) as f64)).collect()
        };
        let median = |v: &[u64]| {
            let mut v = v.to_vec();
            v.sort_unstable();
            v.get(v.len() / 2).copied().unwrap_or(0)
        };
        let mut curves = vec![
            ("publisher cost p50", pick(&|r| r.publish_p50_ns)),
            ("publisher cost p99", pick(&|r| r.publish_p99_ns)),
        ];
        // A run that could not time its subscribers (two hosts' clocks) draws no line for them.
        if self.rows.iter().any(|r| !r.sub_p50_ns.is_empty()) {
            curves.push(("subscriber one-way p50 (median subscriber)", pick(&|r| median(&r.sub_p50_ns))));
            curves.push((
                "subscriber one-way p99 (worst subscriber)",
                pick(&|r| r.sub_p99_ns.iter().copied().max().unwrap_or(0)),
            ));
        }
        let xmax = self.rows.iter().map(|r| r.subscribers).max().unwrap_or(1) as f64;
        let ys = curves.iter().flat_map(|c| c.1.iter().map(|p| p.1));
        let (ymin, ymax) = ys.fold((f64::MAX, 1.0f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
        let root = SVGBackend::new(path, (1000, 600)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("fan-out on {}, {} msg/s, 64 B", self.transport, self.rate), ("sans-serif", 22))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0.5f64..xmax + 0.5, (ymin.min(ymax / 10.0) * 0.8..ymax * 1.3).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("subscribers")
            .y_desc("ns")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;
        for (i, (name, pts)) in curves.into_iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(3)))?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3)));
            chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
        root.present()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> FanoutReport {
        let row = |n: usize, p: u64| FanoutRow {
            subscribers: n,
            publish_p50_ns: p,
            publish_p99_ns: 2 * p,
            sub_p50_ns: vec![300; n],
            sub_p99_ns: vec![900; n],
            late_sends: 0,
            delivered: vec![10; n],
        };
        FanoutReport {
            transport: "shm".into(),
            setup: "test".into(),
            rate: 100_000,
            messages: 1000,
            rows: vec![row(1, 40), row(2, 50), row(4, 80)],
        }
    }

    #[test]
    fn the_table_gives_the_publisher_cost_against_one_subscriber() {
        let t = report().table();
        assert!(t.contains("1.25x") && t.contains("2.00x"), "{t}");
        assert!(t.contains("300/900 300/900 300/900 300/900"), "{t}");
    }

    #[test]
    fn the_plot_is_written() {
        let dir = std::env::temp_dir().join(format!("fanout-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("fanout.svg");
        report().plot(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("publisher cost p50") && svg.contains("<svg"), "an SVG with its legend");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
