//! The max-trials figure (the QRMeM paper's Figure 4) as a PNG. Text is drawn with the bundled
//! DejaVu Sans Mono (data/fonts), so the plot needs no system font library.

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
}
