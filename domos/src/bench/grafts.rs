//! `domos bench grafts`: Small and Seltzer's three grafts — page eviction, MD5, logical disk —
//! by technology, on the same inputs in the same run: native C (`gcc -O2`, the paper's
//! baseline) and native Rust in this process; compiled into a Domos domain with each safety
//! configuration; interpreted (Pulley); and as a server in another domain, called through a
//! portal once per operation. Every technology's results are checked against the native Rust
//! checksums before its time counts.
//!
//! Besides the usual table, the human output has the paper's Tables 1–6 for this machine and
//! writes its Figure 1 (break-even point against upcall time) as an SVG picture.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use domos_grafts::{logical_disk, md5, page_eviction};

use super::{Figure, leak, linux, measure, native, pick};

/// Rounds, and runs per technology in each: 30 runs in all, as in the paper.
const ROUNDS: usize = 3;
const RUNS: usize = 10;

/// Techniques measured inside Domos: JSON suffix, domain settings, description.
const DOMOS_TECHNIQUES: [(&str, &str, &str); 4] = [
    ("wasm", "", "Domos compiled (Cranelift, guard pages, preemptible)"),
    ("wasm_nopreempt", "preemption = false\n", "Domos compiled without preemption checks"),
    ("wasm_explicit", "bounds_checks = \"explicit\"\n", "Domos compiled with explicit bounds checks"),
    ("pulley", "translator = \"pulley\"\n", "Domos interpreted (Pulley)"),
];

/// The checksums of the native Rust runs, which every other technology must reproduce.
struct Expected {
    page_eviction: u64,
    md5: [u8; 16],
    logical_disk: u64,
}

/// Median wall time of `RUNS` runs of `work`, which must return `expected`, in ns.
fn time_native<T: PartialEq + std::fmt::Debug>(
    name: &str,
    expected: &T,
    mut work: impl FnMut() -> T,
) -> Result<f64, String> {
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let start = Instant::now();
        let result = std::hint::black_box(work());
        times.push(start.elapsed().as_nanos() as f64);
        if &result != expected {
            return Err(format!("{name}: result {result:?}, expected {expected:?}"));
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[RUNS / 2])
}

/// The MD5 inputs hashed by the system's `md5sum`, as a second check of the digest.
fn md5sum(data: &[u8]) -> Result<String, String> {
    let path = std::env::temp_dir().join(format!("domos-md5-{}", std::process::id()));
    std::fs::write(&path, data).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let output = std::process::Command::new("md5sum").arg(&path).output();
    let _ = std::fs::remove_file(&path);
    let output = output.map_err(|e| format!("cannot run md5sum: {e}"))?;
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .map(str::to_string)
        .ok_or_else(|| "md5sum printed nothing".into())
}

/// One round: every technology measured `RUNS` times; the median of each, in ns (per search,
/// per MiB, per run of writes).
fn round(pages: &[u32], data: &[u8], blocks: &[u32], expected: &Expected) -> Result<Vec<(String, f64)>, String> {
    let searches = page_eviction::SEARCHES;
    let mut times: Vec<(String, f64)> = vec![
        (
            "page_eviction_c".into(),
            time_native("C page eviction", &expected.page_eviction, || native::c_page_eviction(pages, searches))?
                / searches as f64,
        ),
        (
            "page_eviction_rust".into(),
            time_native("Rust page eviction", &expected.page_eviction, || page_eviction::run(pages, searches))?
                / searches as f64,
        ),
        ("md5_c".into(), time_native("C MD5", &expected.md5, || native::c_md5(data))?),
        ("md5_rust".into(), time_native("Rust MD5", &expected.md5, || md5::digest(data))?),
        (
            "logical_disk_c".into(),
            time_native("C logical disk", &expected.logical_disk, || native::c_logical_disk(blocks))?,
        ),
        (
            "logical_disk_rust".into(),
            time_native("Rust logical disk", &expected.logical_disk, || logical_disk::run(blocks))?,
        ),
    ];
    let args = format!("{RUNS} {} {} {}", expected.page_eviction, md5::hex(&expected.md5), expected.logical_disk);
    for (suffix, settings, _) in DOMOS_TECHNIQUES {
        let results = measure(&format!(
            "[[domain]]\nname = \"Graft\"\nheap = \"64 MiB\"\n{settings}[[domain.component]]\nname = \"bench-grafts\"\nargs = \"run {args}\"\n"
        ))?;
        for graft in ["page_eviction", "md5", "logical_disk"] {
            times.push((format!("{graft}_{suffix}"), pick(&results, graft)?));
        }
    }
    let results = measure(&format!(
        "[system]\ncpus = 2\n\
         [[domain]]\nname = \"Application\"\nheap = \"64 MiB\"\nmax_message = \"128 KiB\"\n[[domain.component]]\nname = \"bench-grafts\"\nargs = \"server\"\n\
         [[domain]]\nname = \"Kernel\"\nheap = \"64 MiB\"\nmax_message = \"128 KiB\"\n[[domain.component]]\nname = \"bench-grafts\"\nargs = \"client {args}\"\n"
    ))?;
    for name in [
        "page_eviction_server",
        "md5_server",
        "logical_disk_server",
        "logical_disk_server_batch16",
        "logical_disk_server_batch256",
    ] {
        times.push((name.into(), pick(&results, name)?));
    }

    Ok(times)
}

/// Runs the suite.
///
/// # Errors
/// When a technology computes a different result, or the measured system fails.
pub fn run() -> Result<Vec<Figure>, String> {
    let pages = page_eviction::inputs(page_eviction::SEARCHES);
    let data = md5::inputs();
    let blocks = logical_disk::inputs(logical_disk::WRITES);
    let searches = page_eviction::SEARCHES;
    let expected = Expected {
        page_eviction: page_eviction::run(&pages, searches),
        md5: md5::digest(&data),
        logical_disk: logical_disk::run(&blocks),
    };
    let by_md5sum = md5sum(&data)?;
    if by_md5sum != md5::hex(&expected.md5) {
        return Err(format!("md5sum says {by_md5sum}, the graft {}", md5::hex(&expected.md5)));
    }

    // The machine is noisy over seconds, so the technologies take turns: every round measures
    // each of them, and each figure is the median of its round medians.
    let mut rounds: Vec<Vec<(String, f64)>> = Vec::new();
    let mut progress = super::Progress::new("grafts", ROUNDS);
    for n in 0..ROUNDS {
        progress.step(&format!("every technology, round {} of {ROUNDS}", n + 1));
        rounds.push(round(&pages, &data, &blocks, &expected)?);
    }
    let times: Vec<(String, f64)> = rounds[0]
        .iter()
        .map(|(name, _)| {
            let mut values: Vec<f64> = rounds.iter().filter_map(|round| pick(round, name).ok()).collect();
            values.sort_by(f64::total_cmp);
            (name.clone(), values[values.len() / 2])
        })
        .collect();

    let mut figures = Vec::new();
    for (name, value) in &times {
        let (graft, tech) = split_name(name);
        let baseline = format!("{graft}_c");
        let baseline_value = pick(&times, &baseline)?;
        figures.push(Figure {
            name: leak(name.clone()),
            unit: "ns",
            value: *value,
            baseline: leak(baseline),
            baseline_value,
            what: leak(format!("{} — {}", graft_description(graft), technique_description(tech))),
        });
    }
    let signal = linux::signal_ns()?;
    let upcall = pick(&times, "page_eviction_server")? - pick(&times, "page_eviction_wasm")?;
    figures.push(Figure {
        name: "linux_signal",
        unit: "ns",
        value: signal,
        baseline: "domos_upcall",
        baseline_value: upcall,
        what: "Linux: handling one signal (the paper's upcall estimate, Table 1) vs a Domos upcall (server − in-domain page eviction)",
    });
    figures.push(Figure {
        name: "page_fault",
        unit: "ns",
        value: linux::page_fault_ns()?,
        baseline: "minor_page_fault",
        baseline_value: linux::minor_fault_ns()?,
        what: "Linux: a page fault that reads its page from disk (Table 3) vs one served from the page cache",
    });
    let disk_read = (1u64 << 20) as f64 / linux::disk_write_bandwidth()? * 1e9;
    figures.push(Figure {
        name: "disk_read_1m",
        unit: "ns",
        value: disk_read,
        baseline: "md5_c",
        baseline_value: pick(&times, "md5_c")?,
        what: "Linux: time to move 1 MiB at the disk's write bandwidth (Table 4) vs C MD5 of 1 MiB",
    });
    Ok(figures)
}

/// `page_eviction_wasm_nopreempt` → (`page_eviction`, `wasm_nopreempt`).
fn split_name(name: &str) -> (&str, &str) {
    for graft in ["page_eviction", "md5", "logical_disk"] {
        if let Some(tech) = name.strip_prefix(graft).and_then(|rest| rest.strip_prefix('_')) {
            return (graft, tech);
        }
    }
    (name, "")
}

fn graft_description(graft: &str) -> &'static str {
    match graft {
        "page_eviction" => "one page-eviction search (64-entry hot list)",
        "md5" => "MD5 of 1 MiB",
        _ => "logical disk, 262,144 writes",
    }
}

fn technique_description(tech: &str) -> &'static str {
    match tech {
        "c" => "C, gcc -O2",
        "rust" => "Rust, native",
        "server" => "server domain, one portal call per operation",
        "server_batch16" => "server domain, one portal call per segment (16 writes)",
        "server_batch256" => "server domain, one portal call per 256 writes (1 MiB)",
        other => DOMOS_TECHNIQUES.iter().find(|(suffix, ..)| *suffix == other).map_or("", |(.., what)| what),
    }
}

/// How often the paper's model application finds a page worth saving: its hot list holds 64 of
/// 50,000 pages. A graft whose break-even point is lower cannot pay for itself there.
const MODEL_SAVES_ONE_IN: f64 = 781.0;

/// The paper's tables for this machine, and Figure 1 written into `pictures`.
///
/// # Errors
/// When a figure is missing or the picture cannot be written.
pub fn report(figures: &[Figure], pictures: &Path) -> Result<String, String> {
    let get = |name: &str| figures.iter().find(|f| f.name == name).map(|f| f.value).ok_or(format!("no {name}"));
    let techs: Vec<&str> = figures
        .iter()
        .filter_map(|f| f.name.strip_prefix("page_eviction_"))
        .chain(["server_batch16", "server_batch256"])
        .collect();
    let (signal, fault, disk) = (get("linux_signal")?, get("page_fault")?, get("disk_read_1m")?);
    let mut out = String::new();
    let _ = writeln!(out, "\nSmall & Seltzer, Tables 1, 3, 4 on this machine");
    let _ = writeln!(out, "  signal handling (upcall estimate)   {:>10.2} µs", signal / 1e3);
    let _ = writeln!(
        out,
        "  Domos upcall (portal, measured)     {:>10.2} µs",
        get("page_eviction_server")? / 1e3 - get("page_eviction_wasm")? / 1e3
    );
    let _ = writeln!(out, "  page fault from disk                {:>10.2} µs", fault / 1e3);
    let _ = writeln!(out, "  1 MiB at the disk's bandwidth       {:>10.2} ms", disk / 1e6);
    let table = |out: &mut String,
                 title: &str,
                 graft: &str,
                 unit: &str,
                 scale: f64,
                 last: &str,
                 derive: &dyn Fn(f64) -> f64| {
        let _ = writeln!(
            out,
            "\n{title}\n  {:<16} {:>12} {:>11} {:>14}",
            "technology",
            format!("raw ({unit})"),
            "normalised",
            last
        );
        let c = get(&format!("{graft}_c")).unwrap_or(f64::NAN);
        for tech in &techs {
            if let Ok(value) = get(&format!("{graft}_{tech}")) {
                let _ =
                    writeln!(out, "  {tech:<16} {:>12.3} {:>11.2} {:>14.2}", value / scale, value / c, derive(value));
            }
        }
    };
    table(&mut out, "Table 2: page eviction (one search)", "page_eviction", "µs", 1e3, "break-even", &|t| fault / t);
    let _ = writeln!(
        out,
        "  (the paper's model application saves a page once in {MODEL_SAVES_ONE_IN:.0} evictions: a graft pays off above that)"
    );
    table(&mut out, "Table 5: MD5 of 1 MiB", "md5", "ms", 1e6, "MD5/disk", &|t| t / disk);
    table(&mut out, "Table 6: logical disk, 262,144 writes", "logical_disk", "ms", 1e6, "ns per block", &|t| {
        t / logical_disk::WRITES as f64
    });
    std::fs::create_dir_all(pictures).map_err(|e| format!("cannot create {}: {e}", pictures.display()))?;
    let path = pictures.join("grafts-figure1.svg");
    let svg = figure1(
        get("page_eviction_c")?,
        fault,
        signal,
        get("page_eviction_server")? - get("page_eviction_wasm")?,
        &techs.iter().filter_map(|t| Some((*t, get(&format!("page_eviction_{t}")).ok()?))).collect::<Vec<_>>(),
    );
    std::fs::write(&path, svg).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let _ = writeln!(out, "\nFigure 1 (break-even point against upcall time): {}", path.display());
    Ok(out)
}

/// The paper's Figure 1: the break-even point of a page-eviction server, fault time over (C
/// graft time + upcall time), against the upcall time, on log–log axes, with the break-even
/// points of the in-domain technologies as horizontal lines and the measured Domos upcall and
/// Linux signal marked on the curve.
fn figure1(c: f64, fault: f64, signal: f64, upcall: f64, techs: &[(&str, f64)]) -> String {
    let (width, height, left, right, top, bottom) = (760.0, 480.0, 70.0, 200.0, 30.0, 50.0);
    let (x_lo, x_hi) = (10f64.log10(), 100_000f64.log10()); // upcall, ns
    let break_even = |upcall: f64| fault / (c + upcall);
    let y_hi = break_even(0.0).max(MODEL_SAVES_ONE_IN * 2.0).log10().ceil();
    let y_lo = (break_even(100_000.0) * 0.5).log10().floor().min(0.0);
    let x = |ns: f64| left + (ns.log10() - x_lo) / (x_hi - x_lo) * (width - left - right);
    let y = |v: f64| top + (y_hi - v.log10()) / (y_hi - y_lo) * (height - top - bottom);
    let mut svg = super::svg::document(
        width,
        height,
        (width - right + left) / 2.0,
        &format!("Break-even vs upcall time (page eviction; fault {:.0} µs)", fault / 1e3),
    );
    for decade in (x_lo as i32)..=(x_hi as i32) {
        let ns = 10f64.powi(decade);
        let label = if ns < 1000.0 { format!("{ns:.0} ns") } else { format!("{:.0} µs", ns / 1e3) };
        let _ = writeln!(
            svg,
            "<line x1=\"{0:.1}\" y1=\"{top}\" x2=\"{0:.1}\" y2=\"{1}\" stroke=\"#ddd\"/><text x=\"{0:.1}\" y=\"{2}\" text-anchor=\"middle\">{label}</text>",
            x(ns),
            height - bottom,
            height - bottom + 16.0
        );
    }
    for decade in (y_lo as i32)..=(y_hi as i32) {
        let v = 10f64.powi(decade);
        let _ = writeln!(
            svg,
            "<line x1=\"{left}\" y1=\"{0:.1}\" x2=\"{1}\" y2=\"{0:.1}\" stroke=\"#ddd\"/><text x=\"{2}\" y=\"{3:.1}\" text-anchor=\"end\">{v}</text>",
            y(v),
            width - right,
            left - 6.0,
            y(v) + 4.0
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">upcall time</text>",
        (width - right + left) / 2.0,
        height - 12.0
    );
    let _ = writeln!(
        svg,
        "<text x=\"16\" y=\"{0}\" transform=\"rotate(-90 16 {0})\" text-anchor=\"middle\">break-even (evictions per page saved)</text>",
        (height - bottom + top) / 2.0
    );
    let points: Vec<String> = (0..=200)
        .map(|i| 10f64.powf(x_lo + (x_hi - x_lo) * f64::from(i) / 200.0))
        .map(|ns| format!("{:.1},{:.1}", x(ns), y(break_even(ns))))
        .collect();
    let _ =
        writeln!(svg, "<polyline fill=\"none\" stroke=\"black\" stroke-width=\"2\" points=\"{}\"/>", points.join(" "));
    let colours = super::svg::COLOURS;
    let model = y(MODEL_SAVES_ONE_IN);
    let _ = writeln!(
        svg,
        "<line x1=\"{left}\" y1=\"{model:.1}\" x2=\"{}\" y2=\"{model:.1}\" stroke=\"#999\" stroke-width=\"3\" opacity=\"0.5\"/><text x=\"{}\" y=\"{:.1}\" fill=\"#666\">the model saves 1 page in 781</text>",
        width - right,
        left + 6.0,
        model - 6.0
    );
    // Labels keep 14 px apart, since several technologies break even at nearly the same point.
    let mut lines: Vec<(&str, f64)> = techs
        .iter()
        .filter(|(tech, _)| !tech.starts_with("server"))
        .map(|(tech, time)| (*tech, fault / time))
        .collect();
    lines.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut label_at = f64::NEG_INFINITY;
    for (i, (tech, level)) in lines.into_iter().enumerate() {
        let (colour, at) = (colours[i % colours.len()], y(level));
        label_at = (at + 4.0).max(label_at + 14.0);
        let _ = writeln!(
            svg,
            "<line x1=\"{left}\" y1=\"{at:.1}\" x2=\"{}\" y2=\"{at:.1}\" stroke=\"{colour}\" stroke-dasharray=\"6 4\"/><text x=\"{}\" y=\"{label_at:.1}\" fill=\"{colour}\">{tech} ({level:.0})</text>",
            width - right,
            width - right + 6.0
        );
    }
    for (label, at) in [("Domos portal", upcall), ("Linux signal", signal)] {
        let _ = writeln!(
            svg,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"black\"/><text x=\"{:.1}\" y=\"{:.1}\">{label} ({:.2} µs)</text>",
            x(at),
            y(break_even(at)),
            x(at) + 8.0,
            y(break_even(at)) - 8.0,
            at / 1e3
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_md5sum_agrees_with_the_graft() {
        let data = md5::inputs();
        assert_eq!(md5sum(&data).unwrap(), md5::hex(&md5::digest(&data)));
        assert_eq!(md5sum(b"abc").unwrap(), "900150983cd24fb0d6963f7d28e17f72");
    }

    #[test]
    fn figure_1_falls_with_the_upcall_time_and_marks_every_technology() {
        let svg = figure1(100.0, 30_000.0, 1_500.0, 600.0, &[("c", 100.0), ("wasm", 150.0), ("server", 700.0)]);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("c (300)") && svg.contains("wasm (200)") && !svg.contains("server ("));
        assert!(svg.contains("Domos portal (0.60 µs)") && svg.contains("Linux signal (1.50 µs)"));
        let curve: Vec<f64> = svg
            .split("points=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .map(|points| points.split([' ', ',']).filter_map(|v| v.parse().ok()).skip(1).step_by(2).collect())
            .unwrap_or_default();
        assert!(curve.len() > 100 && curve.windows(2).all(|w| w[1] >= w[0]), "break-even falls (y grows downwards)");
    }
}
