//! `domos`: boot a Domos system from its configuration, run benchmark suites.

use std::process::ExitCode;
use std::time::Duration;

use domos_kernel::Console;

const USAGE: &str = "usage:
  domos boot [FILE] [--timeout SECONDS] [--trace OUT.json]
                                           boot a system (default: the embedded demo) and report per domain;
                                           --trace writes when each thread ran and called whom (Perfetto)
  domos check [FILE]                       check a configuration without running it (default: the embedded demo)
  domos components                         list the embedded components
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
        Some("components") => components(),
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

fn read_config(path: Option<&String>) -> Result<(String, String), String> {
    match path {
        None => Ok(("embedded default (configs/demo-separate.toml)".into(), domos::DEFAULT_CONFIG.to_string())),
        Some(path) => {
            std::fs::read_to_string(path).map(|t| (path.clone(), t)).map_err(|e| format!("cannot read {path}: {e}"))
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
    let (origin, text) = read_config(file.as_ref())?;
    let components = domos::embedded_components()?;
    println!("domos: booting {origin}");
    let (kernel, outcome) = domos::boot_traced(&text, components, Console::Stdout, timeout, trace.is_some())?;
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
    let (origin, text) = read_config(args.first())?;
    let config = domos_loader::SystemConfig::parse(&text).map_err(|e| format!("{origin}: {e}"))?;
    let components = domos::embedded_components()?;
    let order = domos_loader::boot_order(&config, &components).map_err(|e| format!("{origin}: {e}"))?;
    let names: Vec<&str> = order.iter().map(|&d| config.domains[d].name.as_str()).collect();
    println!("{origin}: ok; boot order: {}", names.join(", "));
    Ok(())
}

fn components() -> Result<(), String> {
    use domos_loader::verifier::Kind;
    let registry = domos::embedded_components()?;
    for name in registry.names() {
        if let Some(c) = registry.get(name) {
            let list = |v: &[domos_loader::manifest::InterfaceVersion]| {
                v.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            };
            println!("{name} {}: {}", c.manifest.version, c.manifest.description);
            let policy = c.manifest.policy.as_deref().unwrap_or(name);
            match c.kind {
                Kind::Ordinary => {
                    println!("    provides: {}", list(&c.manifest.provides));
                    println!("    requires: {}", list(&c.manifest.requires));
                }
                Kind::LocalScheduler => println!("    a local scheduler, policy {policy}"),
                Kind::GlobalScheduler => println!("    a global scheduler, policy {policy}"),
            }
            println!("    host calls: {}", c.host_calls.join(", "));
            if !c.bounded.is_empty() {
                let bounds: Vec<String> = c
                    .bounded
                    .iter()
                    .map(|(export, bound)| format!("{export} (at most {bound} instructions)"))
                    .collect();
                println!("    bounded: {}", bounds.join(", "));
            }
            let runs = if c.has_single_build() {
                "threaded and single-threaded (compiled and interpreted domains)"
            } else {
                "threaded (compiled domains)"
            };
            println!("    builds: {runs}");
        }
    }
    Ok(())
}
