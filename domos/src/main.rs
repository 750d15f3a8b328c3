//! `domos`: boot a Domos system from its configuration, run benchmark suites.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use domos_kernel::Console;
use domos_loader::{Component, ComponentRegistry, SystemConfig};

const USAGE: &str = "usage:
  domos boot [FILE] [--timeout SECONDS] [--trace OUT.json]
                                           boot a system (default: the embedded demo) and report per domain;
                                           --trace writes when each thread ran and called whom (Perfetto)
  domos check [FILE]                       check a configuration without running it (default: the embedded demo)
  domos components [FILE.wasm [SINGLE.wasm]]
                                           list the embedded components, or verify a component file (with its
                                           single-threaded build) and describe it
  domos header                             print domos.h, the C header of host calls, errors and entry points
  domos fs [--single] [--wait] IMAGE COMMAND
                                           inspect and change an ext2 image through the storage
                                           components (domos fs --help for the commands)
  domos bench SUITE [--json] [--pictures DIR]
                                           run a benchmark suite (suites: ipc, mem, sched, grafts, iozone);
                                           grafts and iozone draw pictures into DIR (default: bench-pictures)";

fn main() -> ExitCode {
    let raw: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if raw.first().is_some_and(|word| word == "fs") {
        return match domos::fs::run(&raw[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err((code, message)) => {
                if !message.is_empty() {
                    eprintln!("{message}");
                }
                ExitCode::from(code as u8)
            }
        };
    }
    // Other commands take text: a word that is not UTF-8 is refused, not a panic.
    let args: Vec<String> = match raw.iter().map(|word| word.clone().into_string()).collect() {
        Ok(args) => args,
        Err(word) => {
            eprintln!("domos: {}: not valid UTF-8", std::path::Path::new(&word).display());
            return ExitCode::from(2);
        }
    };
    let result = match args.first().map(String::as_str) {
        Some("boot") => boot(&args[1..]),
        Some("check") => check(&args[1..]),
        Some("components") => components(&args[1..]),
        Some("header") if args.len() == 1 => {
            let mut header = String::new();
            domos_abi::render_c_header(&mut header).expect("writing to a String cannot fail");
            print!("{header}");
            Ok(())
        }
        Some("bench") => domos::bench::run(&args[1..]),
        Some(domos::bench::PIPE_ECHO) => domos::bench::pipe_echo(),
        Some("help" | "--help" | "-h") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("domos: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The configuration `FILE` names, with its component files loaded beside the embedded
/// components, or the embedded default; with where it came from.
fn read_config(path: Option<&String>) -> Result<(String, SystemConfig, ComponentRegistry), String> {
    let mut components = domos::embedded_components()?;
    match path {
        None => {
            let config = SystemConfig::parse(domos::DEFAULT_CONFIG)?;
            Ok(("embedded default (configs/demo-separate.toml)".into(), config, components))
        }
        Some(path) => {
            let config = domos::load_config(Path::new(path), &mut components)?;
            Ok((path.clone(), config, components))
        }
    }
}

fn boot(args: &[String]) -> Result<(), String> {
    let mut file = None;
    let mut timeout = None;
    let mut trace = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--trace" => trace = Some(rest.next().ok_or("--trace takes a file name")?.clone()),
            "--timeout" => {
                let secs: f64 =
                    rest.next().and_then(|s| s.parse().ok()).ok_or("--timeout takes a number of seconds")?;
                timeout = Some(Duration::from_secs_f64(secs));
            }
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag}")),
            path => file = Some(path.to_string()),
        }
    }
    let (origin, config, components) = read_config(file.as_ref())?;
    println!("domos: booting {origin}");
    let (kernel, outcome) = domos::boot_config(&config, components, Console::Stdout, timeout, trace.is_some())?;
    if !outcome.finished {
        println!("domos: time limit reached with {} threads still running", kernel.scheduler.live_threads());
    }
    print!("{}", domos::summary(&kernel));
    if let Some(path) = trace {
        let domains: Vec<(u32, String)> = kernel.domains().iter().map(|d| (d.id, d.name.clone())).collect();
        std::fs::write(&path, domos::trace::chrome_json(&kernel.scheduler.trace, &domains))
            .map_err(|e| format!("cannot write the trace to {path}: {e}"))?;
        println!("domos: thread activity trace written to {path} (open it in https://ui.perfetto.dev)");
    }
    let failed: Vec<&str> =
        outcome.domains.iter().filter(|d| d.termination_reason().is_some()).map(|d| d.name.as_str()).collect();
    kernel.shutdown();
    if failed.is_empty() { Ok(()) } else { Err(format!("domains terminated abnormally: {}", failed.join(", "))) }
}

fn check(args: &[String]) -> Result<(), String> {
    if args.len() > 1 {
        return Err(USAGE.to_string());
    }
    let (origin, config, components) = read_config(args.first())?;
    let order = domos_loader::boot_order(&config, &components).map_err(|e| format!("{origin}: {e}"))?;
    let names: Vec<&str> = order.iter().map(|&d| config.domains[d].name.as_str()).collect();
    println!("{origin}: ok; boot order: {}", names.join(", "));
    Ok(())
}

/// `domos components`: every embedded component, or the component file named (verified as
/// `domos boot` would load it, beside the embedded components).
fn components(args: &[String]) -> Result<(), String> {
    let mut registry = domos::embedded_components()?;
    match args {
        [] => {
            for name in registry.names() {
                if let Some(component) = registry.get(name) {
                    print!("{}", describe(name, component));
                }
            }
        }
        [file] | [file, _] => {
            let single = args.get(1).map(Path::new);
            let component = domos::load_component_file(&mut registry, Path::new(file), single)?;
            print!("{}", describe(&component.manifest.name, &component));
        }
        _ => return Err(USAGE.to_string()),
    }
    Ok(())
}

/// What `domos components` says of one component.
fn describe(name: &str, c: &Component) -> String {
    use domos_loader::verifier::Kind;
    let list = |v: &[domos_loader::manifest::InterfaceVersion]| {
        v.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    };
    let mut text = format!("{name} {}: {}\n", c.manifest.version, c.manifest.description);
    let policy = c.manifest.policy.as_deref().unwrap_or(name);
    text += &match c.kind {
        Kind::Ordinary => {
            format!("    provides: {}\n    requires: {}\n", list(&c.manifest.provides), list(&c.manifest.requires))
        }
        Kind::LocalScheduler => format!("    a local scheduler, policy {policy}\n"),
        Kind::GlobalScheduler => format!("    a global scheduler, policy {policy}\n"),
    };
    text += &format!("    host calls: {}\n", c.host_calls.join(", "));
    if !c.bounded.is_empty() {
        let bounds: Vec<String> =
            c.bounded.iter().map(|(export, bound)| format!("{export} (at most {bound} instructions)")).collect();
        text += &format!("    bounded: {}\n", bounds.join(", "));
    }
    let runs = if c.has_single_build() {
        "threaded and single-threaded (compiled and interpreted domains)"
    } else {
        "threaded (compiled domains)"
    };
    text + &format!("    builds: {runs}\n")
}
