//! The pieces the suites' pictures share: an SVG document with a white background and a title.

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
