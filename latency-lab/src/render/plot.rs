//! Percentile plots in the style of HdrHistogram's plotter: latency against percentile on a log
//! axis (1/(1-p): 90%, 99%, 99.9%, ... are evenly spaced), one curve per transport and peer.
use std::error::Error;
use std::path::Path;

use plotters::prelude::*;

use crate::model::pipeline::{Hop, Run};
use crate::model::Section;

/// Label of a point on the 1/(1-p) axis.
fn percentile_label(x: &f64) -> String {
    let p = 100.0 * (1.0 - 1.0 / x);
    if p <= 0.0 {
        "0%".into()
    } else {
        let digits = (x.log10().round() as usize).saturating_sub(2);
        format!("{p:.digits$}%")
    }
}

pub fn percentile_plot(sec: &Section, path: &Path) -> Result<(), Box<dyn Error>> {
    let curves: Vec<(String, Vec<(f64, f64)>)> = sec
        .rows
        .iter()
        .filter_map(|r| {
            let h = r.hist.as_ref()?;
            let top = (h.len() as f64).log10().floor().max(1.0);
            let pts = (0..=(top * 20.0) as usize)
                .map(|k| {
                    let x = 10f64.powf(k as f64 / 20.0);
                    (x, h.value_at_quantile(1.0 - 1.0 / x).max(1) as f64)
                })
                .collect();
            Some((r.name.clone(), pts))
        })
        .collect();
    let xmax = curves.iter().flat_map(|c| c.1.iter().map(|p| p.0)).fold(10.0, f64::max);
    let ymax = curves.iter().flat_map(|c| c.1.iter().map(|p| p.1)).fold(10.0, f64::max);
    let ymin = curves.iter().flat_map(|c| c.1.iter().map(|p| p.1)).fold(f64::MAX, f64::min).min(ymax / 10.0);
    let root = SVGBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let title = match sec.rate {
        Some(r) => format!("one-way latency, open loop {} msg/s, {} B", crate::model::rate_name(r), sec.size),
        None => format!("round-trip time, ping-pong, {} B", sec.size),
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((1f64..xmax).log_scale(), (ymin * 0.8..ymax * 1.3).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc("latency (ns)")
        .x_label_formatter(&percentile_label)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    for (i, (name, pts)) in curves.into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let width = if name.starts_with("tickbus") { 3 } else { 2 };
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(width)))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()?;
    root.present()?;
    Ok(())
}

/// The per-hop breakdown as stacked bars: two panels (p50, p99, each on its own scale), one bar
/// per rate, each hop's percentile stacked in pipeline order. The bar's height is the sum of the
/// hops, which tick-to-trade's own percentile need not equal (percentiles do not add); the
/// label above a bar gives both.
pub fn stacked_plot(runs: &[Run], path: &Path) -> Result<(), Box<dyn Error>> {
    let bars: Vec<Bar<'_>> = runs
        .iter()
        .map(|r| Bar {
            label: format!("{} msg/s", crate::model::rate_name(r.rate)),
            parts: &r.hops[..5],
            total: &r.hops[5],
        })
        .collect();
    stacked_bars("tick-to-trade per hop, stacked (ns), across processes over shm", "tick-to-trade", &bars, path)
}

/// One stacked bar: its label, its hops in order, and the end-to-end figure beside their sum.
pub struct Bar<'a> {
    pub label: String,
    pub parts: &'a [Hop],
    pub total: &'a Hop,
}

/// Stacked bars of hops (see [`stacked_plot`]); every bar has the first bar's hops, by position.
pub fn stacked_bars(title: &str, total_word: &str, bars: &[Bar<'_>], path: &Path) -> Result<(), Box<dyn Error>> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1100, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 22))?;
    let panels = root.split_evenly((1, 2));
    let names: Vec<String> = bars.first().map(|b| b.parts.iter().map(|h| h.name.clone()).collect()).unwrap_or_default();
    for (panel, (label, pick)) in panels.iter().zip([("p50", 0usize), ("p99", 1)]) {
        let value = |h: &Hop| if pick == 0 { h.p50 } else { h.p99 };
        let bars: Vec<(&str, Vec<u64>, u64)> =
            bars.iter().map(|b| (b.label.as_str(), b.parts.iter().map(value).collect(), value(b.total))).collect();
        let ymax = bars.iter().map(|b| b.1.iter().sum::<u64>().max(b.2)).max().unwrap_or(1).max(1) as f64 * 1.2;
        let mut chart = ChartBuilder::on(panel)
            .caption(label, ("sans-serif", 18))
            .margin(15)
            .x_label_area_size(20)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..bars.len().max(1) as f64, 0f64..ymax)?;
        chart.configure_mesh().disable_x_mesh().disable_x_axis().y_desc("ns").draw()?;
        for (k, name) in names.iter().enumerate() {
            let rects: Vec<_> = bars
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let base: u64 = b.1[..k.min(b.1.len())].iter().sum();
                    let top = base + b.1.get(k).copied().unwrap_or(0);
                    let (x0, x1) = (i as f64 + 0.2, i as f64 + 0.8);
                    Rectangle::new([(x0, base as f64), (x1, top as f64)], Palette99::pick(k).filled())
                })
                .collect();
            let series = chart.draw_series(rects)?;
            if pick == 0 {
                series
                    .label(name.clone())
                    .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], Palette99::pick(k).filled()));
            }
        }
        chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
            let sum: u64 = b.1.iter().sum();
            Text::new(
                format!("{}: hops {sum}, {total_word} {}", b.0, b.2),
                (i as f64 + 0.05, sum.max(b.2) as f64 * 1.05),
                ("sans-serif", 13),
            )
        }))?;
        if pick == 0 {
            chart.configure_series_labels().position(SeriesLabelPosition::UpperLeft).border_style(BLACK).draw()?;
        }
    }
    root.present()?;
    Ok(())
}

/// The wire-to-trade runs as stacked bars, one per ingest and rate.
pub fn wire_trade_plot(runs: &[crate::model::wire_trade::WireTrade], path: &Path) -> Result<(), Box<dyn Error>> {
    let bars: Vec<Bar<'_>> = runs
        .iter()
        .map(|r| Bar {
            label: format!(
                "{} {}/s{}",
                r.ingest,
                crate::model::rate_name(r.rate),
                if r.backlog.is_some() { " (backlogged)" } else { "" }
            ),
            parts: &r.hops,
            total: &r.total,
        })
        .collect();
    stacked_bars("wire-to-trade per hop, stacked (ns): veth -> feed -> trader -> gateway", "wire-to-trade", &bars, path)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_axis_reads_in_percentiles() {
        let l: Vec<String> = [1.0, 10.0, 100.0, 1e3, 1e4, 1e5].iter().map(super::percentile_label).collect();
        assert_eq!(l, ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]);
    }
}
