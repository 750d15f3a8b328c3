//! The pieces the suites' pictures share: an SVG document with a white background and a title,
//! and a line chart of several series on linear axes (`domos bench nfs`'s rate over time).

use std::fmt::Write as _;

/// Colours of successive series or marks.
pub const COLOURS: [&str; 8] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

/// The start of a `width` × `height` document, white, with `title` centred on `title_x`; the
/// caller adds its shapes and ends it with `</svg>`.
pub fn document(width: f64, height: f64, title_x: f64, title: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{title_x}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">{title}</text>\n"
    )
}

/// One series of a [`line_chart`]: its label and its points (x, y).
pub struct Series {
    /// The legend's text.
    pub label: String,
    /// The points, in order of x.
    pub points: Vec<(f64, f64)>,
}

/// A line chart of `series` from x = 0 and y = 0 up to their largest values, with a few grid
/// lines labelled on each axis and a legend on the right.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let (plot_w, height, left, top, bottom) = (550.0, 420.0, 80.0, 40.0, 50.0);
    // The legend's room: its swatch, then about 7 px a character at this font size.
    let longest = series.iter().map(|s| s.label.chars().count()).max().unwrap_or(0);
    let width = left + plot_w + 50.0 + 7.0 * longest as f64;
    let all = || series.iter().flat_map(|s| s.points.iter());
    let x_max = nice(all().map(|p| p.0).fold(0.0, f64::max));
    let y_max = nice(all().map(|p| p.1).fold(0.0, f64::max));
    let plot_h = height - top - bottom;
    let x = |v: f64| left + v / x_max * plot_w;
    let y = |v: f64| top + plot_h - v / y_max * plot_h;
    let mut svg = document(width, height, left + plot_w / 2.0, title);
    for i in 0..=5 {
        let (xv, yv) = (x_max * f64::from(i) / 5.0, y_max * f64::from(i) / 5.0);
        let _ = writeln!(
            svg,
            "<line x1=\"{0:.1}\" y1=\"{top}\" x2=\"{0:.1}\" y2=\"{1}\" stroke=\"#ddd\"/><text x=\"{0:.1}\" y=\"{2}\" text-anchor=\"middle\">{3}</text>",
            x(xv),
            top + plot_h,
            top + plot_h + 16.0,
            short(xv)
        );
        let _ = writeln!(
            svg,
            "<line x1=\"{left}\" y1=\"{0:.1}\" x2=\"{1}\" y2=\"{0:.1}\" stroke=\"#ddd\"/><text x=\"{2}\" y=\"{3:.1}\" text-anchor=\"end\">{4}</text>",
            y(yv),
            left + plot_w,
            left - 6.0,
            y(yv) + 4.0,
            short(yv)
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{x_label}</text>",
        left + plot_w / 2.0,
        height - 12.0
    );
    let _ = writeln!(
        svg,
        "<text x=\"16\" y=\"{0}\" transform=\"rotate(-90 16 {0})\" text-anchor=\"middle\">{y_label}</text>",
        top + plot_h / 2.0
    );
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let points: Vec<String> = s.points.iter().map(|&(px, py)| format!("{:.1},{:.1}", x(px), y(py))).collect();
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"/>",
            points.join(" ")
        );
        let at = top + 14.0 + 18.0 * i as f64;
        let _ = writeln!(
            svg,
            "<line x1=\"{0}\" y1=\"{1:.1}\" x2=\"{2}\" y2=\"{1:.1}\" stroke=\"{colour}\" stroke-width=\"3\"/><text x=\"{3}\" y=\"{4:.1}\">{5}</text>",
            left + plot_w + 10.0,
            at - 4.0,
            left + plot_w + 30.0,
            left + plot_w + 36.0,
            at,
            s.label
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// The smallest of 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 times a power of ten that is at least `v` (1 for
/// nothing).
fn nice(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let power = 10f64.powf(v.log10().floor());
    [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|&n| n >= v)
        .unwrap_or(10.0 * power)
}

/// `v` for an axis: `40k` for 40,000, `1.5` for 1.5.
fn short(v: f64) -> String {
    if v >= 1000.0 {
        let k = v / 1000.0;
        if k.fract() == 0.0 { format!("{k:.0}k") } else { format!("{k:.1}k") }
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_chart_scales_to_its_largest_point_and_names_every_series() {
        let series = [
            Series { label: "Domos".into(), points: vec![(0.0, 10_000.0), (1.0, 38_000.0)] },
            Series { label: "nfs-ganesha".into(), points: vec![(0.0, 20_000.0), (1.0, 21_000.0)] },
        ];
        let svg = line_chart("rate", "time (s)", "requests/s", &series);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains(">Domos</text>") && svg.contains(">nfs-ganesha</text>"));
        assert!(svg.contains(">40k</text>"), "the y axis ends at 40k: {svg}");
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!((nice(38_000.0), nice(0.0), nice(2.6), nice(12.0)), (40_000.0, 1.0, 3.0, 15.0));
    }

    #[test]
    fn the_canvas_widens_to_hold_the_longest_legend() {
        let chart = |label: &str| {
            line_chart("rate", "t", "r", &[Series { label: label.into(), points: vec![(0.0, 1.0), (1.0, 2.0)] }])
        };
        // 80 + 550 px of plot, the swatch's 50 and 7 px a character.
        assert!(chart("Domos").contains("width=\"715\""));
        assert!(chart("nfs-ganesha GETATTR UDP ×8").contains("width=\"862\""));
    }
}
