//! `lobsters-bench chart`: SVG charts of the reports, because people would
//! rather look than read.
//!
//! - `--series LABEL=REPORT.json ...`: p95 latency (log scale) and achieved
//!   rate over time, one line per report, from each report's `windows[]`.
//! - `--history results/history.csv`: the Ladle/MariaDB ratios of every
//!   recorded side-by-side run, throughput ratios (higher is better) above,
//!   CPU ratios (lower is better) below.
//!
//! Plotters' SVG backend writes text as SVG `<text>`, so no font or system
//! library is needed to draw.

use crate::windows::WindowSummary;
use anyhow::{anyhow, bail, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// `lobsters-bench chart` options.
#[derive(Debug, Clone, clap::Args)]
pub struct ChartArgs {
    /// LABEL=PATH of a lobsters or vote JSON report (repeatable): draws p95
    /// latency and achieved rate per 10 s window.
    #[arg(long, value_name = "LABEL=PATH", conflicts_with = "history")]
    pub series: Vec<String>,
    /// A history CSV written by side-by-side.sh: draws every `*_ratio`
    /// column per run.
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Chart title.
    #[arg(long, default_value = "")]
    pub title: String,
    /// Where to write the SVG.
    #[arg(long)]
    pub out: PathBuf,
}

const SIZE: (u32, u32) = (1000, 800);
const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// One line of a chart.
struct Line {
    label: String,
    points: Vec<(f64, f64)>,
    /// Points drawn hollow (warm-up windows); empty: all filled.
    hollow: Vec<bool>,
    /// Indexes of points not joined to the one before (a window with no
    /// completed request lies between: no latency to draw).
    breaks: Vec<usize>,
}

impl Line {
    /// The points cut at `breaks` into separately drawn pieces.
    fn segments(&self) -> Vec<Vec<(f64, f64)>> {
        let mut cuts = self.breaks.clone();
        cuts.push(self.points.len());
        let mut from = 0;
        let mut out = Vec::new();
        for to in cuts {
            if to > from {
                out.push(self.points[from..to].to_vec());
                from = to;
            }
        }
        out
    }
}

/// Entry point of `lobsters-bench chart`.
pub fn main(args: ChartArgs) -> Result<()> {
    match &args.history {
        Some(csv) => draw_history(csv, &args.title, &args.out)?,
        None if args.series.is_empty() => bail!("give --series LABEL=PATH or --history CSV"),
        None => draw_windows(&args.series, &args.title, &args.out)?,
    }
    println!("chart written to {}", args.out.display());
    Ok(())
}

/// The `windows` of the JSON report at `path`.
pub fn read_windows(path: &Path) -> Result<Vec<WindowSummary>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let report: serde_json::Value = serde_json::from_str(&text)?;
    let windows = report
        .get("windows")
        .cloned()
        .ok_or_else(|| anyhow!("{} has no windows[]", path.display()))?;
    Ok(serde_json::from_value(windows)?)
}

fn draw_windows(series: &[String], title: &str, out: &Path) -> Result<()> {
    let mut p95 = Vec::new();
    let mut rate = Vec::new();
    for spec in series {
        let (label, path) = spec
            .split_once('=')
            .ok_or_else(|| anyhow!("--series wants LABEL=PATH, got {spec:?}"))?;
        let windows = read_windows(Path::new(path))?;
        // Plotted at each window's middle; empty windows have no latency.
        let mid = |w: &WindowSummary| w.start_s + w.duration_s / 2.0;
        let served: Vec<(usize, &WindowSummary)> = windows
            .iter()
            .enumerate()
            .filter(|(_, w)| w.completed > 0)
            .collect();
        p95.push(Line {
            label: label.to_owned(),
            points: served
                .iter()
                .map(|(_, w)| (mid(w), w.p95_ms.max(0.001)))
                .collect(),
            hollow: served.iter().map(|(_, w)| w.warmup).collect(),
            breaks: (1..served.len())
                .filter(|&k| served[k].0 != served[k - 1].0 + 1)
                .collect(),
        });
        rate.push(Line {
            label: label.to_owned(),
            points: windows.iter().map(|w| (mid(w), w.achieved_per_s)).collect(),
            hollow: windows.iter().map(|w| w.warmup).collect(),
            breaks: Vec::new(),
        });
    }
    let root = SVGBackend::new(out, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 24))?;
    let (top, bottom) = root.split_vertically(SIZE.1 / 2 - 20);
    let x_max = max_of(p95.iter().chain(&rate), |p| p.0).max(1.0) * 1.03;
    log_chart(
        &top,
        "p95 latency per 10 s window (ms, log scale; hollow: warm-up)",
        "ms",
        x_max,
        &p95,
    )?;
    linear_chart(
        &bottom,
        "achieved rate per 10 s window (pages/s or ops/s)",
        "s since start",
        x_max,
        &rate,
    )?;
    root.present()?;
    Ok(())
}

fn max_of<'a>(lines: impl Iterator<Item = &'a Line>, f: impl Fn(&(f64, f64)) -> f64) -> f64 {
    lines
        .flat_map(|l| l.points.iter().map(&f))
        .fold(0.0, f64::max)
}

fn min_positive<'a>(lines: impl Iterator<Item = &'a Line>) -> f64 {
    lines
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .filter(|y| *y > 0.0)
        .fold(f64::INFINITY, f64::min)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Lines on a log-scale y axis spanning every point, decade-aligned.
fn log_chart(area: &Area, caption: &str, y_desc: &str, x_max: f64, lines: &[Line]) -> Result<()> {
    let lo = min_positive(lines.iter());
    let lo = if lo.is_finite() { lo } else { 0.1 };
    let hi = max_of(lines.iter(), |p| p.1).max(lo * 10.0);
    let (lo, hi) = (
        10f64.powf(lo.log10().floor()),
        10f64.powf(hi.log10().ceil()),
    );
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .y_desc(y_desc)
        .y_label_formatter(&|v| format_number(*v))
        .draw()?;
    draw_lines(&mut chart, lines)
}

/// Lines on a linear y axis from 0.
fn linear_chart(
    area: &Area,
    caption: &str,
    x_desc: &str,
    x_max: f64,
    lines: &[Line],
) -> Result<()> {
    let hi = (max_of(lines.iter(), |p| p.1) * 1.1).max(1.0);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..hi)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_label_formatter(&|v| format_number(*v))
        .draw()?;
    draw_lines(&mut chart, lines)
}

fn draw_lines<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    lines: &[Line],
) -> Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, line) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut segments = line.segments().into_iter();
        let first = segments.next().unwrap_or_default();
        for rest in segments {
            chart.draw_series(LineSeries::new(rest, color.stroke_width(2)))?;
        }
        chart
            .draw_series(LineSeries::new(first, color.stroke_width(2)))?
            .label(line.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(line.points.iter().enumerate().map(|(j, &p)| {
            let hollow = line.hollow.get(j).copied().unwrap_or(false);
            let style = if hollow {
                color.stroke_width(2)
            } else {
                color.filled()
            };
            Circle::new(p, 4, style)
        }))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// 1234.5 -> "1235", 2.5 -> "2.5", 0.01 -> "0.01".
fn format_number(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// A history CSV: header names, then one row per run.
#[derive(Debug, PartialEq)]
pub struct History {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl History {
    /// Parses comma-separated text with a header line (fields never contain
    /// commas: side-by-side.sh writes numbers, dates and commit ids).
    pub fn parse(text: &str) -> Result<History> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let header = lines.next().ok_or_else(|| anyhow!("empty history"))?;
        let columns: Vec<String> = header.split(',').map(|c| c.trim().to_owned()).collect();
        let rows = lines
            .map(|l| l.split(',').map(|f| f.trim().to_owned()).collect())
            .collect();
        Ok(History { columns, rows })
    }

    /// The value of `column` in each row (None where empty or not a number).
    pub fn numbers(&self, column: &str) -> Vec<Option<f64>> {
        let i = self.columns.iter().position(|c| c == column);
        self.rows
            .iter()
            .map(|r| i.and_then(|i| r.get(i)).and_then(|f| f.parse().ok()))
            .collect()
    }

    /// `date commit` of each row, for the x axis.
    pub fn run_labels(&self) -> Vec<String> {
        let get = |r: &Vec<String>, name: &str| {
            self.columns
                .iter()
                .position(|c| c == name)
                .and_then(|i| r.get(i).cloned())
                .unwrap_or_default()
        };
        self.rows
            .iter()
            .map(|r| {
                let date = get(r, "date");
                let commit = get(r, "commit");
                format!("{} {}", date.get(..10).unwrap_or(&date), commit)
            })
            .collect()
    }

    /// One line per `*_ratio` column accepted by `keep`, over run indexes.
    fn ratio_lines(&self, keep: impl Fn(&str) -> bool) -> Vec<Line> {
        self.columns
            .iter()
            .filter(|c| c.ends_with("_ratio") && keep(c))
            .map(|c| Line {
                label: c.trim_end_matches("_ratio").to_owned(),
                points: self
                    .numbers(c)
                    .into_iter()
                    .enumerate()
                    .filter_map(|(i, v)| v.filter(|v| *v > 0.0).map(|v| (i as f64, v)))
                    .collect(),
                hollow: Vec::new(),
                breaks: Vec::new(),
            })
            .filter(|l| !l.points.is_empty())
            .collect()
    }
}

fn draw_history(csv: &Path, title: &str, out: &Path) -> Result<()> {
    let text =
        std::fs::read_to_string(csv).with_context(|| format!("reading {}", csv.display()))?;
    let history = History::parse(&text)?;
    if history.rows.is_empty() {
        bail!("{} has no runs yet", csv.display());
    }
    let is_cpu = |c: &str| c.contains("cpu");
    let throughput = history.ratio_lines(|c| !is_cpu(c));
    let cpu = history.ratio_lines(is_cpu);
    let labels = history.run_labels();
    let root = SVGBackend::new(out, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 24))?;
    let (top, bottom) = root.split_vertically(SIZE.1 / 2 - 20);
    let x_max = (history.rows.len() as f64 - 0.5).max(0.5);
    history_chart(
        &top,
        "Ladle/MariaDB throughput (higher is better, log scale)",
        &labels,
        x_max,
        &throughput,
    )?;
    history_chart(
        &bottom,
        "Ladle/MariaDB server CPU per page/query (lower is better, log scale)",
        &labels,
        x_max,
        &cpu,
    )?;
    root.present()?;
    Ok(())
}

/// Ratios over runs: log scale, a line at 1.0 (parity), runs labelled by
/// date and commit.
fn history_chart(
    area: &Area,
    caption: &str,
    labels: &[String],
    x_max: f64,
    lines: &[Line],
) -> Result<()> {
    let lo = min_positive(lines.iter()).min(1.0);
    let lo = if lo.is_finite() { lo } else { 0.1 };
    let hi = max_of(lines.iter(), |p| p.1).max(1.0);
    let (lo, hi) = (
        10f64.powf(lo.log10().floor()),
        10f64.powf(hi.log10().ceil()),
    );
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..x_max, (lo..hi).log_scale())?;
    let label_of = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            labels.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .x_labels(labels.len().clamp(2, 12) * 2 + 1)
        .x_label_formatter(&label_of)
        .y_desc("Ladle / MariaDB")
        .y_label_formatter(&|v| format_number(*v))
        .draw()?;
    chart.draw_series(LineSeries::new(
        vec![(-0.5, 1.0), (x_max, 1.0)],
        BLACK.mix(0.5).stroke_width(1),
    ))?;
    draw_lines(&mut chart, lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_csv_columns_and_ratio_lines() {
        let h = History::parse(
            "date,commit,lobsters_max_ratio,lobsters_cpu_per_page_ratio\n\
             2026-11-25T21:00:00Z,abc1234,0.71,1.5\n\
             2026-11-26T09:00:00Z,def5678,,0.4\n",
        )
        .unwrap();
        assert_eq!(h.numbers("lobsters_max_ratio"), [Some(0.71), None]);
        assert_eq!(h.run_labels(), ["2026-11-25 abc1234", "2026-11-26 def5678"]);
        let cpu = h.ratio_lines(|c| c.contains("cpu"));
        assert_eq!(cpu.len(), 1);
        assert_eq!(cpu[0].label, "lobsters_cpu_per_page");
        assert_eq!(cpu[0].points, [(0.0, 1.5), (1.0, 0.4)]);
        assert_eq!(cpu[0].segments().len(), 1);
    }

    #[test]
    fn lines_break_where_windows_had_no_latency() {
        let line = Line {
            label: "x".into(),
            points: vec![(0.0, 1.0), (1.0, 2.0), (5.0, 3.0)],
            hollow: Vec::new(),
            breaks: vec![2],
        };
        assert_eq!(
            line.segments(),
            [vec![(0.0, 1.0), (1.0, 2.0)], vec![(5.0, 3.0)]]
        );
    }

    #[test]
    fn draws_both_charts_as_svg() {
        let dir = std::env::temp_dir().join(format!("lobsters-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let report = dir.join("r.json");
        let w = |start_s: f64, p95_ms: f64, completed: u64| WindowSummary {
            run: 0,
            target_per_s: Some(200.0),
            start_s,
            duration_s: 10.0,
            warmup: start_s < 10.0,
            completed,
            achieved_per_s: completed as f64 / 10.0,
            p50_ms: p95_ms / 2.0,
            p95_ms,
            p99_ms: p95_ms * 2.0,
            errors: 0,
        };
        let windows = vec![w(0.0, 16_000.0, 80), w(10.0, 20.0, 2000), w(20.0, 0.0, 0)];
        std::fs::write(
            &report,
            serde_json::json!({ "windows": windows }).to_string(),
        )
        .unwrap();
        let out = dir.join("w.svg");
        draw_windows(&[format!("Ladle={}", report.display())], "t", &out).unwrap();
        let svg = std::fs::read_to_string(&out).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("Ladle"), "{svg}");
        let csv = dir.join("h.csv");
        std::fs::write(
            &csv,
            "date,commit,vote_ratio,cpu_ratio\n2026-11-25,abc,165,0.6\n",
        )
        .unwrap();
        let out = dir.join("h.svg");
        draw_history(&csv, "h", &out).unwrap();
        assert!(std::fs::read_to_string(&out).unwrap().contains("abc"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
