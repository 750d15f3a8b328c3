//! `domos`: boot a Domos system from its configuration, run benchmark suites.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use domos::control;

use domos_kernel::Console;
use domos_loader::{Component, ComponentRegistry, SystemConfig};

const USAGE: &str = "usage:
  domos boot [FILE] [--timeout SECONDS] [--run COMMAND] [--trace OUT.json] [--control PATH]
                                           boot a system (default: the embedded NFS file server,
                                           configs/file-server.toml) and report per domain once it
                                           ends (every thread done, --timeout, the --run command
                                           done, domos shutdown, Ctrl-C, SIGTERM or SIGHUP);
                                           --run runs COMMAND (sh -c) on the host once it booted;
                                           --trace writes when each thread ran and called whom (Perfetto);
                                           the operator's commands below reach it through its control socket
  domos ps [--control PATH]                list the running system's domains: id, parent, use and state
  domos top [--iterations N] [--control PATH]
                                           ps sorted by CPU time, every second, until q and Enter or Ctrl-C
  domos kill DOMAIN [--control PATH]       terminate a running domain and its children
  domos trace --seconds N OUT.json [--control PATH]
                                           record the running system's thread activity for N s (at most 600)
  domos start FILE.toml [--control PATH]   add the domains of a configuration fragment to the running system
  domos shutdown [--control PATH]          stop the running system: its boot prints the summary and exits
  domos check [FILE]                       check a configuration without running it (default: the embedded demo)
  domos components [FILE.wasm [SINGLE.wasm]]
                                           list the embedded components, or verify a component file (with its
                                           single-threaded build) and describe it
  domos new [--lang rust|c] NAME [DIR]     make a component NAME in DIR (default: here): a Rust crate or
                                           C with a Makefile, with a configuration that boots it; and say
                                           how to build and boot it
  domos header                             print domos.h, the C header of host calls, errors and entry points
  domos fs [--single] [--wait] IMAGE COMMAND
                                           inspect and change an ext2 image through the storage
                                           components (domos fs --help for the commands)
  domos mount [--single] [--wait] IMAGE DIR
                                           serve an ext2 image's file system at DIR through FUSE
                                           (root) until DIR is unmounted or Ctrl-C; leaves it clean
  domos bench SUITE [--json] [--pictures DIR] [--max-kib N]
                                           run a benchmark suite (suites: ipc, mem, sched, grafts, iozone, nfs);
                                           grafts, iozone and nfs draw pictures into DIR (default: bench-pictures);
                                           --max-kib N lowers iozone's largest file (quick runs);
                                           domos bench nfs --help for the NFS suite's own options";

fn main() -> ExitCode {
    let raw: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    // `fs` and `mount` take their words as they are (paths need not be UTF-8).
    type RawCommand = fn(&[std::ffi::OsString]) -> Result<(), (i32, String)>;
    let run: Option<RawCommand> = match raw.first() {
        Some(word) if word == "fs" => Some(domos::fs::run),
        Some(word) if word == "mount" => Some(domos::mount::run),
        _ => None,
    };
    if let Some(run) = run {
        return match run(&raw[1..]) {
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
        Some(command @ ("ps" | "top" | "kill" | "trace" | "start" | "shutdown")) => operator(command, &args[1..]),
        Some("components") => components(&args[1..]),
        Some("new") => domos::scaffold::run(&args[1..]),
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
            Ok(("embedded default (configs/file-server.toml)".into(), config, components))
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
    let mut control = None;
    let mut run = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--trace" => trace = Some(rest.next().ok_or("--trace takes a file name")?.clone()),
            "--control" => control = Some(PathBuf::from(rest.next().ok_or("--control takes a socket path")?)),
            "--run" => run = Some(rest.next().ok_or("--run takes a command")?.clone()),
            "--timeout" => {
                let secs: f64 =
                    rest.next().and_then(|s| s.parse().ok()).ok_or("--timeout takes a number of seconds")?;
                timeout = Some(Duration::from_secs_f64(secs));
            }
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag}")),
            path => file = Some(path.to_string()),
        }
    }
    let (origin, mut config, components) = read_config(file.as_ref())?;
    println!("domos: booting {origin}");
    // Before any thread or program starts, so that Ctrl-C, SIGTERM and SIGHUP wait for the loop
    // below, which stops the system in order.
    let signals = domos::signals::StopSignals::block();
    // Each passt lives until this function returns, after the kernel's shutdown (and quits by
    // itself once the kernel's connection closes, however domos ends).
    let passts = domos::passt::start(&mut config)?;
    // Locked until this function returns, after the kernel's shutdown and their sync.
    let images = domos::fs::lock_disk_images(&mut config)?;
    for passt in &passts {
        println!("domos: {}", passt.description);
    }
    let kernel = domos::start_kernel(&config, components, Console::Stdout, trace.is_some())?;
    let bound = match control::bind(&control.unwrap_or_else(control::default_path)) {
        Ok(bound) => bound,
        Err(e) => {
            kernel.shutdown();
            return Err(e);
        }
    };
    println!("domos: control socket {}", bound.path().display());
    let control = match bound.serve(kernel.clone(), config.clone()) {
        Ok(control) => control,
        Err(e) => {
            kernel.shutdown();
            return Err(e);
        }
    };
    // The kernel's boot returns once every main has started; the wait is here, so that an
    // operator's shutdown can end it.
    let outcome = match kernel.boot(&config, Some(Duration::ZERO)) {
        Ok(outcome) => outcome,
        Err(e) => {
            drop(control);
            kernel.shutdown();
            return Err(e);
        }
    };
    if !config.system.ready.is_empty() {
        println!("domos: ready: {}", config.system.ready);
    }
    let mut client = match run.as_deref().map(|command| Command::new("sh").args(["-c", command]).spawn()) {
        Some(Ok(child)) => Some(child),
        Some(Err(e)) => {
            drop(control);
            kernel.shutdown();
            return Err(format!("--run: cannot start sh: {e}"));
        }
        None => None,
    };
    let mut client_failed = None;
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        let step = deadline.map_or(WAIT_STEP, |d| d.saturating_duration_since(Instant::now()).min(WAIT_STEP));
        if kernel.scheduler.wait_idle(Some(step)) {
            break;
        }
        if control.shutdown_requested() {
            println!("domos: shutdown requested by the operator");
            break;
        }
        if let Some(signal) = signals.take() {
            println!("domos: signal {signal}: shutting down");
            break;
        }
        if let Some(status) = client.as_mut().and_then(|child| child.try_wait().transpose()) {
            client = None;
            match status {
                Ok(status) if status.success() => println!("domos: --run command done"),
                Ok(status) => client_failed = Some(format!("the --run command failed ({status})")),
                Err(e) => client_failed = Some(format!("the --run command: {e}")),
            }
            break;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            println!("domos: time limit reached with {} threads still running", kernel.scheduler.live_threads());
            break;
        }
    }
    drop(control);
    if let Some(mut child) = client {
        // The system ends first (a time limit, a signal): the command is ended with it.
        let _ = child.kill();
        let _ = child.wait();
    }
    print!("{}", domos::summary(&kernel));
    if let Some(path) = trace {
        let domains: Vec<(u32, String)> = kernel.domains().iter().map(|d| (d.id, d.name.clone())).collect();
        std::fs::write(&path, domos::trace::chrome_json(&kernel.scheduler.trace, &domains))
            .map_err(|e| format!("cannot write the trace to {path}: {e}"))?;
        println!("domos: thread activity trace written to {path} (open it in https://ui.perfetto.dev)");
    }
    let failed: Vec<&str> = outcome
        .domains
        .iter()
        .filter(|d| d.termination_reason().is_some_and(|reason| reason != control::KILL_REASON))
        .map(|d| d.name.as_str())
        .collect();
    kernel.shutdown();
    sync_disk_images(&images)?;
    if !failed.is_empty() {
        return Err(format!("domains terminated abnormally: {}", failed.join(", ")));
    }
    client_failed.map_or(Ok(()), Err)
}

/// How often the boot's wait looks for an operator's shutdown.
const WAIT_STEP: Duration = Duration::from_millis(50);

/// Flushes the disk image files to stable storage once the kernel has stopped their I/O threads
/// (which carried out every request queued): what the disk driver wrote reaches the image even
/// where the guest never asked for a flush. (What a buffer cache still holds unwritten is not
/// the kernel's to write; see CAVEATS.md.)
fn sync_disk_images(images: &[(String, std::fs::File)]) -> Result<(), String> {
    for (path, image) in images {
        image.sync_all().map_err(|e| format!("cannot sync the disk image {path}: {e}"))?;
    }
    Ok(())
}

/// `domos ps`, `top`, `kill`, `trace` and `shutdown`: requests to a running `domos boot`
/// through its control socket.
fn operator(command: &str, args: &[String]) -> Result<(), String> {
    let mut socket = None;
    let mut seconds = None;
    let mut iterations = None;
    let mut words = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--control" => socket = Some(PathBuf::from(rest.next().ok_or("--control takes a socket path")?)),
            "--seconds" if command == "trace" => {
                seconds = Some(
                    rest.next()
                        .and_then(|s| s.parse::<u64>().ok())
                        .filter(|s| (1..=control::MAX_TRACE_SECONDS).contains(s))
                        .ok_or(format!("--seconds takes a number from 1 to {}", control::MAX_TRACE_SECONDS))?,
                );
            }
            "--iterations" if command == "top" => {
                iterations =
                    Some(rest.next().and_then(|s| s.parse::<u64>().ok()).ok_or("--iterations takes a number")?);
            }
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag}")),
            word => words.push(word),
        }
    }
    let socket = socket.unwrap_or_else(control::default_path);
    let ask = |request: &str, timeout: u64| control::request(&socket, request, Duration::from_secs(timeout));
    match (command, words.as_slice()) {
        ("ps", []) => print!("{}", ask("ps", 10)?),
        ("shutdown", []) => print!("{}", ask("shutdown", 10)?),
        ("kill", [domain]) => {
            if domain.contains(['\n', '\r']) || domain.trim().is_empty() {
                return Err(format!("no domain named {domain:?}"));
            }
            print!("{}", ask(&format!("kill {domain}"), 10)?);
        }
        ("trace", [out]) => {
            let seconds = seconds.ok_or("trace needs --seconds N")?;
            println!("domos: recording the thread activity trace for {seconds} s");
            let json = ask(&format!("trace {seconds}"), seconds + 30)?;
            std::fs::write(out, json).map_err(|e| format!("cannot write the trace to {out}: {e}"))?;
            println!("domos: thread activity trace written to {out} (open it in https://ui.perfetto.dev)");
        }
        ("top", []) => top(&socket, iterations)?,
        ("start", [file]) => {
            let path = std::fs::canonicalize(file).map_err(|e| format!("cannot read {file}: {e}"))?;
            let path = path.to_str().ok_or_else(|| format!("{file}: the path is not UTF-8"))?;
            if path.contains(['\n', '\r']) {
                return Err(format!("{file}: start takes a path without line breaks"));
            }
            print!("{}", ask(&format!("start {path}"), 120)?);
        }
        _ => return Err(USAGE.to_string()),
    }
    Ok(())
}

/// `domos top`: `ps` sorted by CPU time, every second, `iterations` times or until `q` and
/// Enter on standard input (or Ctrl-C).
fn top(socket: &Path, iterations: Option<u64>) -> Result<(), String> {
    let (quit_tx, quit) = std::sync::mpsc::channel();
    // The reader is left blocked on standard input when top ends otherwise; the process exits.
    let _ = std::thread::Builder::new().name("domos-top-keys".into()).spawn(move || {
        let mut line = String::new();
        while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
            if line.trim() == "q" {
                let _ = quit_tx.send(());
                return;
            }
            line.clear();
        }
    });
    let mut done = 0u64;
    while iterations.is_none_or(|n| done < n) {
        let text = control::request(socket, "ps cpu", Duration::from_secs(10))?;
        // Clear the screen and go home, as top does.
        println!("\x1b[H\x1b[2J{text}(q and Enter, or Ctrl-C, to quit)");
        done += 1;
        if iterations.is_some_and(|n| done >= n) {
            break;
        }
        match quit.recv_timeout(Duration::from_secs(1)) {
            Ok(()) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            // Standard input ended (not a terminal): only Ctrl-C or --iterations end top.
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(Duration::from_secs(1)),
        }
    }
    Ok(())
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
    text += &format!("    host calls: {}\n", c.host_calls().join(", "));
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
