//! The benchmark suites behind `domos bench SUITE`.
//!
//! Every suite measures Domos and its baseline side by side in the same run and prints a table
//! for people (Domos' figure, the baseline's, their ratio) or, with `--json`, one JSON object
//! per line: `{"suite","name","unit","value","baseline","baseline_value"}`.

mod baseline;
mod ipc;
mod mem;

use std::time::Duration;

use domos_kernel::Console;

pub use baseline::{PIPE_ECHO, pipe_echo};

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

/// Runs `domos bench SUITE [--json]`.
///
/// # Errors
/// An unknown suite or option, or a failure of the measured system.
pub fn run(args: &[String]) -> Result<(), String> {
    let json = args.iter().any(|a| a == "--json");
    let suite =
        args.iter().find(|a| !a.starts_with("--")).ok_or("usage: domos bench SUITE [--json] (suites: ipc, mem)")?;
    if let Some(flag) = args.iter().find(|a| a.starts_with("--") && *a != "--json") {
        return Err(format!("unknown option {flag}"));
    }
    let figures = match suite.as_str() {
        "ipc" => ipc::run()?,
        "mem" => mem::run()?,
        other => return Err(format!("unknown suite {other} (suites: ipc, mem)")),
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
    println!(
        "{:<20} {:>12} {:>10}   {:<18} {:>12} {:>9}   what",
        "name", "domos", "≈cycles", "baseline", "baseline", "ratio"
    );
    for f in &figures {
        let cycles = if f.unit == "ns" { format!("{:.0}", f.value * mhz / 1000.0) } else { String::new() };
        println!(
            "{:<20} {:>9.1} {:<2} {:>10}   {:<18} {:>9.1} {:<2} {:>9.3}   {}",
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
    Ok(())
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

/// Boots `config` with the embedded components, waits, and returns the `bench NAME NS` lines.
pub(crate) fn measure(config: &str) -> Result<Vec<(String, f64)>, String> {
    let components = crate::embedded_components()?;
    let (kernel, outcome) = crate::boot(config, components, Console::capture(), Some(Duration::from_secs(300)))?;
    let lines = kernel.console.lines();
    kernel.shutdown();
    if !outcome.finished {
        return Err("the benchmark system did not finish within 300 s".into());
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
