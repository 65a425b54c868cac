//! The reports' figures as PNGs: the max-trials sweep (the QRMeM paper's Figure 4), each
//! report's cost-quality figure (every method a point: score and fact recall against LLM tokens
//! per question) and the runs-side-by-side figure of `qrmem compare`. Text is drawn with the
//! bundled DejaVu Sans Mono (data/fonts), so the plots need no system font library.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

static FONT: &[u8] = include_bytes!("../../data/fonts/DejaVuSansMono.ttf");

fn ensure_font() -> Result<(), String> {
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        register_font("sans-serif", FontStyle::Normal, FONT)
            .map_err(|_| "the bundled font cannot be loaded".to_string())
    })
    .clone()
}

/// Draws `metric` against max trials, one line per method.
pub fn trials_png(
    path: &Path,
    metric: &str,
    sweep: &BTreeMap<String, Vec<(usize, f64)>>,
) -> Result<(), String> {
    ensure_font()?;
    let e = |x: &dyn std::fmt::Display| format!("drawing {}: {x}", path.display());
    let max_t = sweep
        .values()
        .flat_map(|v| v.iter().map(|p| p.0))
        .max()
        .unwrap_or(1);
    let min_t = sweep
        .values()
        .flat_map(|v| v.iter().map(|p| p.0))
        .min()
        .unwrap_or(1);
    let top = sweep
        .values()
        .flat_map(|v| v.iter().map(|p| p.1))
        .fold(10.0f64, f64::max);
    let root = BitMapBackend::new(path, (640, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{metric} against max trials"), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(
            min_t as f64 - 0.2..max_t as f64 + 0.2,
            0.0..(top * 1.15).min(100.0),
        )
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("max trials")
        .y_desc(metric)
        .x_labels(max_t - min_t + 1)
        .x_label_formatter(&|x| format!("{:.0}", x))
        .draw()
        .map_err(|x| e(&x))?;
    let palette = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
    for (i, (method, pts)) in sweep.iter().enumerate() {
        let color = palette[i % palette.len()];
        let data: Vec<(f64, f64)> = pts.iter().map(|&(t, f)| (t as f64, f)).collect();
        chart
            .draw_series(LineSeries::new(data.clone(), color.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(method.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        chart
            .draw_series(data.into_iter().map(|p| Circle::new(p, 4, color.filled())))
            .map_err(|x| e(&x))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// A log10 axis value as tokens: "316", "1.0k".
fn token_label(x: &f64) -> String {
    let t = 10f64.powf(*x);
    if t >= 1000.0 {
        format!("{:.1}k", t / 1000.0)
    } else {
        format!("{t:.0}")
    }
}

/// One method of a report as the cost-quality figure draws it.
#[derive(Clone, Debug, PartialEq)]
pub struct CostPoint {
    pub method: String,
    /// Prompt and completion tokens of the LLM calls per question (no memory build).
    pub tokens: f64,
    /// F1 (accuracy for multiple choice), 0..100.
    pub score: f64,
    /// Answer-context fact recall, 0..100, where the dataset has gold evidence.
    pub recall: Option<f64>,
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(0, 0, 0),
];

/// The cost-quality figure: `metric` (left) and, where any point has one, fact recall (right)
/// against LLM tokens per question on a log axis, one labelled point per method. The points'
/// order is the report's row order; returns how many points each panel drew.
pub fn cost_quality_png(
    path: &Path,
    title: &str,
    metric: &str,
    points: &[CostPoint],
) -> Result<(usize, usize), String> {
    ensure_font()?;
    let e = |x: &dyn std::fmt::Display| format!("drawing {}: {x}", path.display());
    let with_recall: Vec<&CostPoint> = points.iter().filter(|p| p.recall.is_some()).collect();
    let width = if with_recall.is_empty() { 640 } else { 1200 };
    let root = BitMapBackend::new(path, (width, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let root = root.titled(title, ("sans-serif", 18)).map_err(|x| e(&x))?;
    let panels = if with_recall.is_empty() {
        vec![root]
    } else {
        let (a, b) = root.split_horizontally(width / 2);
        vec![a, b]
    };
    let tokens: Vec<f64> = points.iter().map(|p| p.tokens.max(1.0)).collect();
    let lo = tokens
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .max(1.0);
    let hi = tokens.iter().copied().fold(1.0f64, f64::max);
    // The x axis is log10 of the tokens, labelled in tokens.
    let (lo, hi) = ((lo / 1.5).log10(), (hi * 1.5).log10());
    let mut drawn = (0, 0);
    for (k, area) in panels.iter().enumerate() {
        let (label, values): (&str, Vec<(f64, f64, &str, usize)>) = if k == 0 {
            (
                metric,
                points
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (p.tokens.max(1.0).log10(), p.score, p.method.as_str(), i))
                    .collect(),
            )
        } else {
            (
                "answer-context fact recall %",
                points
                    .iter()
                    .enumerate()
                    .filter_map(|(i, p)| {
                        p.recall
                            .map(|r| (p.tokens.max(1.0).log10(), r, p.method.as_str(), i))
                    })
                    .collect(),
            )
        };
        let top = values.iter().map(|v| v.1).fold(10.0f64, f64::max);
        let mut chart = ChartBuilder::on(area)
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(54)
            .build_cartesian_2d(lo..hi, 0.0..(top * 1.12).min(105.0))
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .x_desc("LLM tokens per question (prompt + completion; memory builds not included)")
            .y_desc(label)
            .x_labels(8)
            .light_line_style(WHITE.mix(0.0))
            .x_label_formatter(&token_label)
            .draw()
            .map_err(|x| e(&x))?;
        // Each label beside its own point, where it overlaps no other label or point
        // (`place_labels`), with a leader line when it had to move away.
        let area = LabelBox::of(chart.plotting_area().get_pixel_range());
        let pixels: Vec<(i32, i32)> = values
            .iter()
            .map(|&(x, y, ..)| chart.backend_coord(&(x, y)))
            .collect();
        let chars: Vec<usize> = values.iter().map(|v| v.2.chars().count()).collect();
        let offsets = place_labels(&pixels, &chars, area, false);
        chart
            .draw_series(values.iter().zip(&offsets).map(|(&(x, y, name, i), &off)| {
                let color = PALETTE[i % PALETTE.len()];
                let line = leader(off, name.chars().count())
                    .map(|l| l.to_vec())
                    .unwrap_or_default();
                EmptyElement::at((x, y))
                    + PathElement::new(line, color.mix(0.5).stroke_width(1))
                    + Circle::new((0, 0), 5, color.filled())
                    + Text::new(
                        name.to_string(),
                        off,
                        ("sans-serif", 12).into_font().color(&color),
                    )
            }))
            .map_err(|x| e(&x))?;
        if k == 0 {
            drawn.0 = values.len();
        } else {
            drawn.1 = values.len();
        }
    }
    panels
        .first()
        .map(|p| p.present())
        .transpose()
        .map_err(|x| e(&x))?;
    Ok(drawn)
}

/// One method of a report as the budget figure draws it: its budget family (the name with its
/// number as N, e.g. `bm25-passagesN`), its answer-context tokens per question, its score and
/// its fact recall.
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetPoint {
    pub family: String,
    pub method: String,
    pub tokens: f64,
    pub score: f64,
    pub recall: f64,
}

/// The family and budget of a method name that carries a context budget: the number after
/// `-passages`, `-sentences` or `-top` (`bm25-passages400` -> (`bm25-passagesN`, 400)).
pub fn budget_family(method: &str) -> Option<(String, usize)> {
    for marker in ["-passages", "-sentences", "-top"] {
        let Some(at) = method.rfind(marker) else {
            continue;
        };
        let digits: String = method[at + marker.len()..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        let Ok(n) = digits.parse::<usize>() else {
            continue;
        };
        let rest = &method[at + marker.len() + digits.len()..];
        return Some((format!("{}{marker}N{rest}", &method[..at]), n));
    }
    None
}

/// The budget figure (issue 66): `metric` (left) and answer-context fact recall (right) against
/// the answer context's tokens per question (log axis), one line per budget family through its
/// budgets, each family's name next to its rightmost point. Returns the families drawn.
pub fn budget_png(
    path: &Path,
    title: &str,
    metric: &str,
    points: &[BudgetPoint],
) -> Result<usize, String> {
    ensure_font()?;
    let e = |x: &dyn std::fmt::Display| format!("drawing {}: {x}", path.display());
    let mut families: BTreeMap<&str, Vec<&BudgetPoint>> = BTreeMap::new();
    for p in points {
        families.entry(p.family.as_str()).or_default().push(p);
    }
    for v in families.values_mut() {
        v.sort_by(|a, b| a.tokens.total_cmp(&b.tokens));
    }
    let root = BitMapBackend::new(path, (1200, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let root = root.titled(title, ("sans-serif", 18)).map_err(|x| e(&x))?;
    let (a, b) = root.split_horizontally(600);
    let lo = points
        .iter()
        .map(|p| p.tokens.max(1.0))
        .fold(f64::INFINITY, f64::min);
    let hi = points.iter().map(|p| p.tokens.max(1.0)).fold(1.0, f64::max);
    let (lo, hi) = ((lo.max(1.0) / 1.4).log10(), (hi * 2.2).log10());
    for (k, area) in [a, b].iter().enumerate() {
        let value = |p: &BudgetPoint| if k == 0 { p.score } else { p.recall };
        let label = if k == 0 {
            metric
        } else {
            "answer-context fact recall %"
        };
        let top = points.iter().map(value).fold(10.0f64, f64::max);
        let mut chart = ChartBuilder::on(area)
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(54)
            .build_cartesian_2d(lo..hi, 0.0..(top * 1.12).min(105.0))
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .x_desc("answer-context tokens per question")
            .y_desc(label)
            .x_labels(8)
            .light_line_style(WHITE.mix(0.0))
            .x_label_formatter(&token_label)
            .draw()
            .map_err(|x| e(&x))?;
        for (i, (family, pts)) in families.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let data: Vec<(f64, f64)> = pts
                .iter()
                .map(|p| (p.tokens.max(1.0).log10(), value(p)))
                .collect();
            chart
                .draw_series(LineSeries::new(data.clone(), color.stroke_width(2)))
                .map_err(|x| e(&x))?;
            chart
                .draw_series(data.iter().map(|&p| Circle::new(p, 4, color.filled())))
                .map_err(|x| e(&x))?;
            if let Some(&last) = data.last() {
                chart
                    .draw_series(std::iter::once(
                        EmptyElement::at(last)
                            + Text::new(
                                family.to_string(),
                                (7, -6),
                                ("sans-serif", 12).into_font().color(&color),
                            ),
                    ))
                    .map_err(|x| e(&x))?;
            }
        }
    }
    root.present().map_err(|x| e(&x))?;
    Ok(families.len())
}

/// One method across the compared runs: its value in each run (None: not in that run).
#[derive(Clone, Debug, PartialEq)]
pub struct RunSeries {
    pub method: String,
    pub values: Vec<Option<f64>>,
}

/// The runs-side-by-side figure: for each panel (a metric and its series), one line per method
/// across the runs (x: the runs, labelled `runs`). Returns the points drawn per panel.
pub fn compare_png(
    path: &Path,
    runs: &[String],
    panels: &[(&str, Vec<RunSeries>)],
) -> Result<Vec<usize>, String> {
    ensure_font()?;
    let e = |x: &dyn std::fmt::Display| format!("drawing {}: {x}", path.display());
    let width = 600 * panels.len().max(1) as u32;
    let root = BitMapBackend::new(path, (width, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let areas = root.split_evenly((1, panels.len().max(1)));
    let n = runs.len().max(1);
    let mut drawn = Vec::new();
    for (area, (metric, series)) in areas.iter().zip(panels) {
        let top = series
            .iter()
            .flat_map(|s| s.values.iter().flatten())
            .copied()
            .fold(10.0f64, f64::max);
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{metric} by run"), ("sans-serif", 18))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(50)
            // Room on the right of the last run for the methods' names.
            .build_cartesian_2d(-0.3..(n as f64 + 0.1), 0.0..(top * 1.12).min(105.0))
            .map_err(|x| e(&x))?;
        let labels = runs.to_vec();
        chart
            .configure_mesh()
            // Ticks fine enough to hold every run's integer position; only those are named.
            .x_labels(10 * n)
            .disable_x_mesh()
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    labels.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc(*metric)
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|x| e(&x))?;
        // Each method's name beside its last point, where it overlaps no other name or point
        // (`place_labels`), with a leader line when it had to move away.
        let ends: Vec<(usize, f64, f64)> = series
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.values
                    .iter()
                    .enumerate()
                    .rev()
                    .find_map(|(r, v)| v.map(|v| (i, r as f64, v)))
            })
            .collect();
        let area = LabelBox::of(chart.plotting_area().get_pixel_range());
        let all_points: Vec<(i32, i32)> = series
            .iter()
            .flat_map(|s| {
                s.values
                    .iter()
                    .enumerate()
                    .filter_map(|(r, v)| v.map(|v| (r as f64, v)))
            })
            .map(|p| chart.backend_coord(&p))
            .collect();
        // The ends first (they are labelled), then every other point as an obstacle.
        let mut pixels: Vec<(i32, i32)> = ends
            .iter()
            .map(|&(_, x, y)| chart.backend_coord(&(x, y)))
            .collect();
        let chars: Vec<usize> = ends
            .iter()
            .map(|&(i, ..)| series[i].method.chars().count())
            .collect();
        pixels.extend(all_points);
        let offsets = place_labels(&pixels, &chars, area, true);
        let label_at: BTreeMap<usize, (i32, i32)> = ends
            .iter()
            .zip(&offsets)
            .map(|(&(i, ..), &o)| (i, o))
            .collect();
        let mut points = 0;
        for (i, s) in series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let pts: Vec<(f64, f64)> = s
                .values
                .iter()
                .enumerate()
                .filter_map(|(r, v)| v.map(|v| (r as f64, v)))
                .collect();
            points += pts.len();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(|x| e(&x))?;
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
                .map_err(|x| e(&x))?;
            // The method's name beside its last point.
            if let (Some(&last), Some(&off)) = (pts.last(), label_at.get(&i)) {
                let line = leader(off, s.method.chars().count())
                    .map(|l| l.to_vec())
                    .unwrap_or_default();
                chart
                    .draw_series(std::iter::once(
                        EmptyElement::at(last)
                            + PathElement::new(line, color.mix(0.5).stroke_width(1))
                            + Text::new(
                                s.method.clone(),
                                off,
                                ("sans-serif", 12).into_font().color(&color),
                            ),
                    ))
                    .map_err(|x| e(&x))?;
            }
        }
        drawn.push(points);
    }
    root.present().map_err(|x| e(&x))?;
    Ok(drawn)
}

/// Pixels a label of `chars` characters takes at the figures' 12-point monospaced font.
const LABEL_CHAR_PX: i32 = 7;
const LABEL_HEIGHT_PX: i32 = 13;
/// A drawn point's radius (the figures' circles are 4-5 pixels) and the gap to its label.
const POINT_PX: i32 = 5;

/// A label's box: its top-left corner and size, in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LabelBox {
    x: i32,
    y: i32,
    w: i32,
    h: i32,
}

impl LabelBox {
    /// The box of a pixel range (a plotting area's).
    fn of((xs, ys): (std::ops::Range<i32>, std::ops::Range<i32>)) -> Self {
        LabelBox {
            x: xs.start,
            y: ys.start,
            w: xs.end - xs.start,
            h: ys.end - ys.start,
        }
    }

    fn overlaps(&self, o: &LabelBox) -> bool {
        self.x < o.x + o.w && o.x < self.x + self.w && self.y < o.y + o.h && o.y < self.y + self.h
    }

    fn inside(&self, area: &LabelBox) -> bool {
        self.x >= area.x
            && self.y >= area.y
            && self.x + self.w <= area.x + area.w
            && self.y + self.h <= area.y + area.h
    }
}

/// Where each point's label goes (the offset of its top-left corner from the point): the
/// nearest position beside, above or below the point whose box stays inside `area` and overlaps
/// neither a label placed before nor any point (`right_only`: only right of the point, where a
/// line figure's last points have room). A label with no such position takes the nearest one inside the area. Labels are
/// placed in the points' order.
fn place_labels(
    points: &[(i32, i32)],
    chars: &[usize],
    area: LabelBox,
    right_only: bool,
) -> Vec<(i32, i32)> {
    let h = LABEL_HEIGHT_PX;
    let dots: Vec<LabelBox> = points
        .iter()
        .map(|&(x, y)| LabelBox {
            x: x - POINT_PX,
            y: y - POINT_PX,
            w: 2 * POINT_PX,
            h: 2 * POINT_PX,
        })
        .collect();
    if right_only {
        return column_labels(points, chars, area);
    }
    let mut placed: Vec<LabelBox> = Vec::new();
    let mut offsets = Vec::new();
    for (i, &(px, py)) in points.iter().enumerate() {
        let w = chars.get(i).copied().unwrap_or(0) as i32 * LABEL_CHAR_PX;
        let gap = POINT_PX + 2;
        // Right, left, above and below the point, then ever farther up and down on either
        // side and centred, nearest (by the label centre's distance) first.
        let mut candidates: Vec<(i32, i32)> = Vec::new();
        for k in 0..=48 {
            for dy in [-h / 2 - k * h / 2, -h / 2 + k * h / 2] {
                candidates.push((gap, dy));
                candidates.push((-w - gap, dy));
                if dy + h <= -gap || dy >= gap {
                    candidates.push((-w / 2, dy));
                }
            }
        }
        let centre = |&(dx, dy): &(i32, i32)| {
            let cx = (dx + w / 2).abs() - w / 2;
            let cy = dy + h / 2;
            cx.max(0) + 2 * cy.abs()
        };
        candidates.sort_by_key(centre);
        candidates.dedup();
        let at = |&(dx, dy): &(i32, i32)| LabelBox {
            x: px + dx,
            y: py + dy,
            w,
            h,
        };
        let free = candidates.iter().find(|c| {
            let b = at(c);
            b.inside(&area)
                && !placed.iter().any(|o| o.overlaps(&b))
                && !dots.iter().any(|d| d.overlaps(&b))
        });
        let chosen = match free {
            Some(&c) => c,
            None => {
                // Clamp the first position into the area.
                let (dx, dy) = candidates.first().copied().unwrap_or((gap, -h / 2));
                let x = (px + dx).clamp(area.x, (area.x + area.w - w).max(area.x));
                let y = (py + dy).clamp(area.y, (area.y + area.h - h).max(area.y));
                (x - px, y - py)
            }
        };
        placed.push(at(&chosen));
        offsets.push(chosen);
    }
    offsets
}

/// The labels of the first `chars.len()` points in one column right of them, in the points'
/// top-to-bottom order (so no two leaders cross), each as near its point's height as the
/// labels above it and the area's bottom allow.
fn column_labels(points: &[(i32, i32)], chars: &[usize], area: LabelBox) -> Vec<(i32, i32)> {
    let h = LABEL_HEIGHT_PX;
    let labelled = &points[..chars.len().min(points.len())];
    let mut order: Vec<usize> = (0..labelled.len()).collect();
    order.sort_by_key(|&i| (labelled[i].1, i));
    // Tops wanted, then pushed down past the label above, then up from the bottom.
    let mut tops: Vec<i32> = Vec::with_capacity(order.len());
    for (k, &i) in order.iter().enumerate() {
        let want = (labelled[i].1 - h / 2).max(area.y);
        let top = match k {
            0 => want,
            _ => want.max(tops[k - 1] + h),
        };
        tops.push(top);
    }
    let mut floor = area.y + area.h;
    for top in tops.iter_mut().rev() {
        *top = (*top).min(floor - h);
        floor = *top;
    }
    let x = labelled.iter().map(|p| p.0).max().unwrap_or(0) + POINT_PX + 12;
    let mut offsets = vec![(0, 0); labelled.len()];
    for (k, &i) in order.iter().enumerate() {
        let (px, py) = labelled[i];
        offsets[i] = (x - px, tops[k] - py);
    }
    offsets
}

/// A label's leader: from the point to the nearer side of its label when the label sits away
/// from the point (more than a line's height from it), else none.
fn leader(offset: (i32, i32), chars: usize) -> Option<[(i32, i32); 2]> {
    let (dx, dy) = offset;
    let w = chars as i32 * LABEL_CHAR_PX;
    let mid_y = dy + LABEL_HEIGHT_PX / 2;
    if mid_y.abs() <= LABEL_HEIGHT_PX {
        return None;
    }
    let end_x = if dx >= 0 { dx } else { dx + w };
    Some([(0, 0), (end_x, mid_y)])
}

#[cfg(test)]
mod tests {
    #[test]
    fn writes_a_png() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.png");
        let mut sweep = std::collections::BTreeMap::new();
        sweep.insert("kn".to_string(), vec![(1, 20.0), (2, 30.0), (3, 35.5)]);
        super::trials_png(&path, "F1", &sweep).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
    }

    /// The image's pixels of `color`, counted (read back from the PNG).
    fn pixels_of(path: &std::path::Path, color: super::RGBColor) -> usize {
        let img = image::open(path).unwrap().to_rgb8();
        img.pixels()
            .filter(|p| p.0 == [color.0, color.1, color.2])
            .count()
    }

    #[test]
    fn the_cost_quality_figure_draws_one_point_per_method() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.png");
        let points = vec![
            super::CostPoint {
                method: "bm25-top3".into(),
                tokens: 2000.0,
                score: 31.8,
                recall: Some(77.2),
            },
            super::CostPoint {
                method: "kn".into(),
                tokens: 19000.0,
                score: 21.6,
                recall: Some(90.0),
            },
            super::CostPoint {
                method: "summary-tree".into(),
                tokens: 5600.0,
                score: 17.9,
                recall: None,
            },
        ];
        let drawn = super::cost_quality_png(&path, "t", "F1", &points).unwrap();
        assert_eq!(drawn, (3, 2));
        let img = image::open(&path).unwrap();
        assert_eq!((img.width(), img.height()), (1200, 520));
        // Each method's colour is on the image (its point and label).
        for (i, _) in points.iter().enumerate() {
            assert!(pixels_of(&path, super::PALETTE[i]) > 20, "method {i}");
        }
        assert_eq!(pixels_of(&path, super::PALETTE[4]), 0);
    }

    #[test]
    fn budget_families_and_the_budget_figure() {
        assert_eq!(
            super::budget_family("bm25-passages400"),
            Some(("bm25-passagesN".to_string(), 400))
        );
        assert_eq!(
            super::budget_family("kn-passages400-check44"),
            Some(("kn-passagesN-check44".to_string(), 400))
        );
        assert_eq!(
            super::budget_family("bm25-top3"),
            Some(("bm25-topN".to_string(), 3))
        );
        assert_eq!(super::budget_family("gold-passages"), None);
        assert_eq!(super::budget_family("kn"), None);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.png");
        let point = |method: &str, tokens: f64, score: f64, recall: f64| super::BudgetPoint {
            family: super::budget_family(method).unwrap().0,
            method: method.into(),
            tokens,
            score,
            recall,
        };
        let points = vec![
            point("bm25-passages200", 190.0, 25.0, 60.0),
            point("bm25-passages400", 390.0, 30.0, 75.0),
            point("bm25-passages1200", 1180.0, 28.0, 94.0),
            point("kn-passages400", 380.0, 33.0, 85.0),
        ];
        assert_eq!(super::budget_png(&path, "t", "F1", &points).unwrap(), 2);
        assert!(pixels_of(&path, super::PALETTE[0]) > 20);
        assert!(pixels_of(&path, super::PALETTE[1]) > 20);
        assert_eq!(pixels_of(&path, super::PALETTE[2]), 0);
    }

    #[test]
    fn the_compare_figure_draws_each_methods_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.png");
        let runs = vec!["0.5b".to_string(), "1.5b".to_string()];
        let f1 = vec![
            super::RunSeries {
                method: "kn".into(),
                values: vec![Some(21.6), Some(44.4)],
            },
            super::RunSeries {
                method: "te".into(),
                values: vec![None, Some(48.6)],
            },
        ];
        let drawn = super::compare_png(&path, &runs, &[("F1", f1)]).unwrap();
        assert_eq!(drawn, vec![3]);
        assert!(pixels_of(&path, super::PALETTE[0]) > 20);
        assert!(pixels_of(&path, super::PALETTE[1]) > 20);
    }

    /// Labels placed beside crowded points overlap neither each other nor any point and stay
    /// inside the plot; a lone point's label sits right beside it, with no leader.
    #[test]
    fn labels_go_beside_their_points_without_overlapping() {
        use super::{
            column_labels, leader, place_labels, LabelBox, LABEL_CHAR_PX, LABEL_HEIGHT_PX,
        };
        let area = LabelBox {
            x: 0,
            y: 0,
            w: 600,
            h: 400,
        };
        let mut points = vec![(300, 200); 6];
        points.extend([(310, 205), (120, 50), (590, 390)]);
        let chars: Vec<usize> = (0..points.len()).map(|i| 10 + 3 * i).collect();
        let offsets = place_labels(&points, &chars, area, false);
        let boxes: Vec<LabelBox> = points
            .iter()
            .zip(&offsets)
            .zip(&chars)
            .map(|((p, o), &c)| LabelBox {
                x: p.0 + o.0,
                y: p.1 + o.1,
                w: c as i32 * LABEL_CHAR_PX,
                h: LABEL_HEIGHT_PX,
            })
            .collect();
        for (i, b) in boxes.iter().enumerate() {
            assert!(b.inside(&area), "label {i} {b:?}");
            for (j, o) in boxes.iter().enumerate().skip(i + 1) {
                assert!(!b.overlaps(o), "labels {i} and {j}: {b:?} {o:?}");
            }
            for p in &points {
                let dot = LabelBox {
                    x: p.0 - 5,
                    y: p.1 - 5,
                    w: 10,
                    h: 10,
                };
                assert!(!b.overlaps(&dot), "label {i} covers the point {p:?}");
            }
        }
        // The lone point at (120, 50): right beside it, vertically centred, no leader.
        assert_eq!(offsets[7], (7, -LABEL_HEIGHT_PX / 2));
        assert_eq!(leader(offsets[7], chars[7]), None);
        // A crowded label that moved away has a leader from its point.
        assert!(offsets[..6]
            .iter()
            .zip(&chars)
            .any(|(&o, &c)| leader(o, c).is_some()));

        // The column: the labels keep their points' top-to-bottom order, never overlap, and
        // stay inside; the point below the rest is labelled last.
        let ends = [(400, 100), (400, 104), (400, 98), (400, 300), (400, 102)];
        let offsets = column_labels(&ends, &[8, 8, 8, 8, 8], area);
        let tops: Vec<i32> = ends.iter().zip(&offsets).map(|(p, o)| p.1 + o.1).collect();
        let mut by_point: Vec<usize> = (0..ends.len()).collect();
        by_point.sort_by_key(|&i| ends[i].1);
        for w in by_point.windows(2) {
            assert!(tops[w[1]] >= tops[w[0]] + LABEL_HEIGHT_PX, "{tops:?}");
        }
        assert_eq!(tops[3], 300 - LABEL_HEIGHT_PX / 2);
        assert!(tops.iter().all(|&t| t >= 0 && t + LABEL_HEIGHT_PX <= 400));
    }
}
