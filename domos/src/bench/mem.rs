//! `domos bench mem`: memory objects against the host's `memcpy` and against copying the same
//! bytes in a portal message.

use super::{Figure, baseline, measure, pick};

const ROUNDS: u64 = 200;

/// Runs the suite.
///
/// # Errors
/// When the measured system fails.
pub fn run() -> Result<Vec<Figure>, String> {
    let mut progress = super::Progress::new("mem", 2);
    progress.step("memory objects between two domains");
    let results = measure(&format!(
        "[system]\ncpus = 2\n\
         [[domain]]\nname = \"Inspector\"\nmax_message = \"2 MiB\"\n[[domain.component]]\nname = \"bench-mem\"\nargs = \"server\"\n\
         [[domain]]\nname = \"Client\"\nheap = \"32 MiB\"\nmax_message = \"2 MiB\"\n[[domain.component]]\nname = \"bench-mem\"\nargs = \"client {ROUNDS}\"\n"
    ))?;
    progress.step("the host's memcpy");
    let memcpy = baseline::memcpy_round_trip(1 << 20, ROUNDS as u32);
    let pass_copy = pick(&results, "pass_1m_copy")?;
    let mut figures = vec![
        Figure {
            name: "memobj_copy_1m",
            unit: "ns",
            value: pick(&results, "memobj_copy_1m")?,
            baseline: "host_memcpy_1m",
            baseline_value: memcpy,
            what: "1 MiB from a component's heap into a memory object and back",
        },
        Figure {
            name: "memobj_typed_access",
            unit: "ns",
            value: pick(&results, "memobj_typed_access")?,
            baseline: "memobj_copy_1m",
            baseline_value: pick(&results, "memobj_copy_1m")? / (1 << 20) as f64 * 4.0,
            what: "one u32 read through the kernel (baseline: 4 bytes' share of the bulk copy)",
        },
        Figure {
            name: "pass_1m_memobj",
            unit: "ns",
            value: pick(&results, "pass_1m_memobj")?,
            baseline: "pass_1m_copy",
            baseline_value: pass_copy,
            what: "passing 1 MiB to another domain as a memory object vs copied in the message",
        },
    ];
    figures.push(accounting()?);
    figures.extend(nesting()?);
    Ok(figures)
}

/// Least-squares slope, intercept and r² of `points`.
fn fit(points: &[(f64, f64)]) -> (f64, f64, f64) {
    let n = points.len() as f64;
    let (sx, sy) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    let syy: f64 = points.iter().map(|(_, y)| (y - my).powi(2)).sum();
    let slope = sxy / sxx;
    let r2 = if syy == 0.0 { 1.0 } else { sxy * sxy / (sxx * syy) };
    (slope, my - slope * mx, r2)
}

/// The configuration of `bench-ipc nest` under `depth` sandboxes, each wrapping `IpcBench`.
fn nested(depth: usize, calls: u64) -> String {
    const LEVEL: u64 = 4 << 20;
    let server = "[system]\ncpus = 2\n[[domain]]\nname = \"Server\"\n[[domain.component]]\nname = \"bench-ipc\"\nargs = \"server\"\n";
    if depth == 0 {
        return format!(
            "{server}[[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"bench-ipc\"\nargs = \"nest {calls}\"\n"
        );
    }
    // Level `depth` runs bench-ipc; every level above runs a sandbox for the level below.
    let mut args = format!("wrap=IpcBench {LEVEL} {LEVEL} bench-ipc nest {calls}");
    for level in (1..depth).rev() {
        let limit = LEVEL * (depth - level + 1) as u64;
        args = format!("wrap=IpcBench grants=domains {limit} {limit} app-sandbox {args}");
    }
    let heap = LEVEL * (depth + 2) as u64;
    format!(
        "{server}[[domain]]\nname = \"Outer\"\nheap = {heap}\ngrants = [\"domains\"]\n[[domain.component]]\nname = \"app-sandbox\"\nargs = \"{args}\"\n"
    )
}

/// Figures for look-ups and small reads through 0 to 5 nested sandboxes.
pub fn nesting() -> Result<Vec<Figure>, String> {
    const CALLS: u64 = 20_000;
    let mut lookups = Vec::new();
    let mut reads = Vec::new();
    for depth in 0..=5 {
        let results = measure(&nested(depth, CALLS))?;
        lookups.push((depth as f64, pick(&results, "nest_lookup")?));
        reads.push((depth as f64, pick(&results, "nest_read")?));
    }
    let (lookup_slope, lookup_base, _) = fit(&lookups);
    let (read_slope, read_base, read_r2) = fit(&reads);
    Ok(vec![
        Figure {
            name: "nest_lookup_per_level",
            unit: "ns",
            value: lookup_slope,
            baseline: "nest_lookup_depth0",
            baseline_value: lookup_base,
            what: "added cost of a name look-up per sandbox level (least-squares slope over depths 0-5)",
        },
        Figure {
            name: "nest_read_per_level",
            unit: "ns",
            value: read_slope,
            baseline: "nest_read_depth0",
            baseline_value: read_base,
            what: "added cost of a small read per sandbox level, each level forwarding through its wrapper",
        },
        Figure {
            name: "nest_read_linearity",
            unit: "r2",
            value: read_r2,
            baseline: "linear",
            baseline_value: 1.0,
            what: "fit of the read cost against the depth",
        },
    ])
}

/// Allocation-heavy work (`work-sort` of a million numbers, its heap grown page by page) with
/// and without memory accounting: five runs of each, alternating, compared by their medians.
pub fn accounting() -> Result<Figure, String> {
    let config = |accounting: bool| {
        format!(
            "[[domain]]\nname = \"Work\"\nheap = \"64 MiB\"\naccounting = {accounting}\n[[domain.component]]\nname = \"work-sort\"\nargs = \"n=1000000\"\n"
        )
    };
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        with.push(pick(&measure(&config(true))?, "work_sort")?);
        without.push(pick(&measure(&config(false))?, "work_sort")?);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Ok(Figure {
        name: "accounting_overhead",
        unit: "x",
        value: median(with) / median(without),
        baseline: "no_accounting",
        baseline_value: 1.0,
        what: "work-sort of 1,000,000 numbers with memory accounting over the same without (medians of 5)",
    })
}
