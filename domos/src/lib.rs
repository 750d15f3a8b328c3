//! The `domos` command's library: the embedded default components and configuration, booting
//! a system and reporting on it, and the benchmark suites.

use std::sync::Arc;
use std::time::Duration;

use domos_kernel::{BootOutcome, Console, DomainReport, Kernel, KernelOptions};
use domos_loader::{ComponentRegistry, SystemConfig};

pub mod bench;
pub mod fs;
pub mod trace;

mod guest {
    include!(concat!(env!("OUT_DIR"), "/components.rs"));
}

pub use guest::GUEST_DIR;

/// The system `domos boot` runs without a file: the demo, one domain per component.
pub const DEFAULT_CONFIG: &str = include_str!("../../configs/demo-separate.toml");

/// The components built into the binary.
///
/// # Errors
/// When an embedded component fails verification (a build problem).
pub fn embedded_components() -> Result<ComponentRegistry, String> {
    let mut registry = ComponentRegistry::default();
    for (name, threaded, single) in guest::EMBEDDED {
        registry.add_pair(name, threaded, single)?;
    }
    Ok(registry)
}

/// The components built into the binary that are called `names` (verifying a component takes
/// time: a command that needs four need not verify them all).
///
/// # Errors
/// As [`embedded_components`].
pub fn embedded_components_named(names: &[&str]) -> Result<ComponentRegistry, String> {
    let mut registry = ComponentRegistry::default();
    for (name, threaded, single) in guest::EMBEDDED.iter().filter(|(name, ..)| names.contains(name)) {
        registry.add_pair(name, threaded, single)?;
    }
    Ok(registry)
}

/// Both builds of a guest component (test components included), by crate name: the threaded
/// one and the single-threaded one.
///
/// # Errors
/// When a file cannot be read.
pub fn guest_component(name: &str) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let file = format!("{}.wasm", name.replace('-', "_"));
    let threaded = std::fs::read(std::path::Path::new(GUEST_DIR).join(&file))?;
    let single = std::fs::read(std::path::Path::new(guest::SINGLE_GUEST_DIR).join(&file))?;
    Ok((threaded, single))
}

/// Parses `config_text`, starts a kernel with `components` and boots the system.
///
/// # Errors
/// A configuration, component or dependency problem, before any component ran.
pub fn boot(
    config_text: &str,
    components: ComponentRegistry,
    console: Console,
    timeout: Option<Duration>,
) -> Result<(Arc<Kernel>, BootOutcome), String> {
    boot_traced(config_text, components, console, timeout, false)
}

/// [`boot`], with the thread activity trace recording from the start when `trace` is set
/// (`kernel.scheduler.trace`).
///
/// # Errors
/// As [`boot`].
pub fn boot_traced(
    config_text: &str,
    components: ComponentRegistry,
    console: Console,
    timeout: Option<Duration>,
    trace: bool,
) -> Result<(Arc<Kernel>, BootOutcome), String> {
    let config = SystemConfig::parse(config_text)?;
    let options = KernelOptions { cpus: config.system.cpus, slice: Duration::from_millis(config.system.slice_ms) };
    let kernel = Kernel::start(&options, components, console).map_err(|e| format!("cannot start the kernel: {e}"))?;
    if trace {
        kernel.scheduler.trace.switch_on();
    }
    match kernel.boot(&config, timeout) {
        Ok(outcome) => Ok((kernel, outcome)),
        Err(e) => {
            kernel.shutdown();
            Err(e)
        }
    }
}

/// The per-domain summary printed after a boot: every domain the kernel made, children included.
pub fn summary(kernel: &Kernel) -> String {
    let mut text = format!("domain summary (global scheduler {}):\n", kernel.scheduler.describe_global());
    for domain in &kernel.domains() {
        text.push_str(&format!("  {}\n", DomainReport::of(domain)));
    }
    text
}
