//! The benchmark suites behind `domos bench SUITE`.
//!
//! Every suite measures Domos and its baseline side by side in the same run and prints a table
//! for people (Domos' figure, the baseline's, their ratio) or, with `--json`, one JSON object
//! per line: `{"suite","name","unit","value","baseline","baseline_value"}`.

mod baseline;
mod grafts;
mod iozone;
mod ipc;
mod linux;
mod mem;
mod native;
mod nfs;
mod sched;
mod svg;

use std::time::Duration;

use domos_kernel::Console;

pub use baseline::{PIPE_ECHO, pipe_echo};

/// What a suite is doing and how far it is, on a terminal (`crate::progress`):
/// `domos bench sched: [3/7] portal round trips, round 2`.
pub struct Progress {
    line: crate::progress::Progress,
    steps: usize,
    done: usize,
}

impl Progress {
    /// Progress of `suite` through `steps` steps.
    pub fn new(suite: &'static str, steps: usize) -> Progress {
        Progress { line: crate::progress::Progress::new(format!("domos bench {suite}")), steps, done: 0 }
    }

    /// Starts the next step, `what`.
    pub fn step(&mut self, what: &str) {
        self.done += 1;
        self.line.show(&format!("[{}/{}] {what}", self.done.min(self.steps), self.steps));
    }
}

/// One measured figure.
#[derive(Debug, Clone)]
pub struct Figure {
    /// Stable name (JSON `name`).
    pub name: &'static str,
    /// Unit: `ns`, `x`, …
    pub unit: &'static str,
    /// Domos' value.
    pub value: f64,
    /// Name of the figure it is compared with.
    pub baseline: &'static str,
    /// The baseline's value, measured in the same run.
    pub baseline_value: f64,
    /// What was measured, for the table.
    pub what: &'static str,
}

const USAGE: &str =
    "usage: domos bench SUITE [--json] [--pictures DIR] [--max-kib N] (suites: ipc, mem, sched, grafts, iozone, nfs;
       domos bench nfs --help for its own options)";

/// Runs `domos bench SUITE [--json] [--pictures DIR] [--max-kib N]`; suites that draw write
/// their pictures into DIR (default `bench-pictures`); `--max-kib` lowers iozone's largest file
/// (default 512, JX's grid) for quick runs. `nfs` takes options of its own ([`nfs::USAGE`]).
///
/// # Errors
/// An unknown suite or option, or a failure of the measured system.
pub fn run(args: &[String]) -> Result<(), String> {
    let (mut json, mut suite, mut pictures) = (false, None, std::path::PathBuf::from("bench-pictures"));
    let mut max_kib = iozone::MAX_FILE_KIB;
    let mut nfs_options = nfs::Options::default();
    let mut nfs_only = None;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "--json" => json = true,
            "--pictures" => pictures = words.next().ok_or("--pictures needs a directory")?.into(),
            "--max-kib" => {
                max_kib = words
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n: &u64| n.is_power_of_two() && (4..=iozone::MAX_FILE_KIB).contains(n))
                    .ok_or("--max-kib needs a power of two from 4 to 512")?;
            }
            "--help" | "-h" if suite == Some("nfs") => {
                println!("{}", nfs::USAGE);
                return Ok(());
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            flag if flag.starts_with("--") && nfs_options.take(flag, &mut words)? => nfs_only = Some(flag.to_string()),
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}\n{USAGE}")),
            name if suite.is_none() => suite = Some(name),
            extra => return Err(format!("unexpected argument {extra}\n{USAGE}")),
        }
    }
    let suite = suite.ok_or(USAGE)?;
    if let Some(flag) = nfs_only.filter(|_| suite != "nfs") {
        return Err(format!("{flag} is an option of domos bench nfs only\n{USAGE}"));
    }
    let mut nfs_report = String::new();
    let figures = match suite {
        "ipc" => ipc::run()?,
        "mem" => mem::run()?,
        "sched" => sched::run()?,
        "grafts" => grafts::run()?,
        "iozone" => iozone::run(max_kib)?,
        "nfs" => {
            let results = nfs::run(&nfs_options, &pictures)?;
            nfs_report = results.report;
            results.figures
        }
        other => return Err(format!("unknown suite {other}\n{USAGE}")),
    };
    let mhz = cpu_mhz();
    if json {
        for f in &figures {
            println!(
                "{{\"suite\":\"{suite}\",\"name\":\"{}\",\"unit\":\"{}\",\"value\":{:.2},\"baseline\":\"{}\",\"baseline_value\":{:.2}}}",
                f.name, f.unit, f.value, f.baseline, f.baseline_value
            );
        }
        return Ok(());
    }
    println!(
        "domos bench {suite}: Domos and its baseline in the same run (CPU clock {:.0} MHz; cycles = ns × clock)",
        mhz
    );
    let width = figures.iter().map(|f| f.name.len()).max().unwrap_or(0).max(20);
    let baseline_width = figures.iter().map(|f| f.baseline.len()).max().unwrap_or(0).max(18);
    println!(
        "{:<width$} {:>12} {:>10}   {:<baseline_width$} {:>12} {:>9}   what",
        "name", "domos", "≈cycles", "baseline", "baseline", "ratio"
    );
    for f in &figures {
        let cycles = if f.unit == "ns" { format!("{:.0}", f.value * mhz / 1000.0) } else { String::new() };
        println!(
            "{:<width$} {:>9.1} {:<2} {:>10}   {:<baseline_width$} {:>9.1} {:<2} {:>9.3}   {}",
            f.name,
            f.value,
            f.unit,
            cycles,
            f.baseline,
            f.baseline_value,
            f.unit,
            f.value / f.baseline_value,
            f.what
        );
    }
    match suite {
        "grafts" => print!("{}", grafts::report(&figures, &pictures)?),
        "iozone" => print!("{}", iozone::report(&figures, &pictures, max_kib)?),
        "nfs" => print!("{nfs_report}"),
        _ => {}
    }
    Ok(())
}

/// Figures carry `&'static str`s; the suites that name figures at run time name a few hundred
/// once per run.
pub(crate) fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

/// The CPU clock from `/proc/cpuinfo` (for cycle estimates), or 2400 MHz when unknown.
fn cpu_mhz() -> f64 {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("cpu MHz"))
                .and_then(|l| l.split(':').nth(1))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(2400.0)
}

/// Boots `config` with the embedded components, waits, and returns the `bench NAME NS` lines;
/// an `error` line from a component fails the run.
pub(crate) fn measure(config: &str) -> Result<Vec<(String, f64)>, String> {
    let components = crate::embedded_components()?;
    let (kernel, outcome) = crate::boot(config, components, Console::capture(), Some(Duration::from_secs(300)))?;
    let lines = kernel.console.lines();
    kernel.shutdown();
    if !outcome.finished {
        return Err("the benchmark system did not finish within 300 s".into());
    }
    if let Some(error) = lines.iter().find(|l| l.contains("] error ")) {
        return Err(format!("a benchmark component failed: {error}"));
    }
    if let Some(failed) =
        lines.iter().find(|l| l.starts_with("[kernel]") && l.contains("scheduler") && l.contains(" failed: "))
    {
        return Err(format!("a scheduler component failed: {failed}"));
    }
    if let Some(dead) = outcome.domains.iter().find_map(|d| d.termination_reason()) {
        return Err(format!("a benchmark domain failed: {dead}"));
    }
    Ok(lines
        .iter()
        .filter_map(|l| {
            let mut words = l.split("] bench ").nth(1)?.split_whitespace();
            Some((words.next()?.to_string(), words.next()?.parse().ok()?))
        })
        .collect())
}

pub(crate) fn pick(results: &[(String, f64)], name: &str) -> Result<f64, String> {
    results.iter().find(|(n, _)| n == name).map(|(_, v)| *v).ok_or_else(|| format!("the benchmark printed no {name}"))
}
