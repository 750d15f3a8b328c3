//! The `domos` command's library: the embedded default components and configuration, component
//! files, booting a system and reporting on it, and the benchmark suites.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use domos_kernel::{BootOutcome, Console, DomainReport, Kernel, KernelOptions};
use domos_loader::{Component, ComponentRegistry, SystemConfig};

pub mod bench;
pub mod control;
pub mod fs;
pub mod fusermount;
pub mod host;
pub mod mount;
pub mod passt;
pub mod progress;
pub mod scaffold;
pub mod signals;
pub mod trace;

mod guest {
    include!(concat!(env!("OUT_DIR"), "/components.rs"));
}

pub use guest::{C_GUEST_DIR, GUEST_DIR};

/// The system `domos boot` runs without a file: the NFS file server on 127.0.0.1, one domain per
/// component.
pub const DEFAULT_CONFIG: &str = include_str!("../../configs/file-server.toml");

/// The components built into the binary.
///
/// # Errors
/// When an embedded component fails verification (a build problem).
pub fn embedded_components() -> Result<ComponentRegistry, String> {
    let mut registry = ComponentRegistry::default();
    for (name, threaded, single) in guest::EMBEDDED {
        registry.add_pair(&format!("{name} (embedded)"), threaded, single)?;
    }
    registry.add_collocated("(embedded)", guest::COLLOCATED);
    Ok(registry)
}

/// Verifies the component file `path`, with its single-threaded build `single` if given, and
/// registers it under its manifest name.
///
/// # Errors
/// A file that cannot be read, the loader's reason for refusing the module, or a name the
/// registry holds already (an embedded component's, say), each naming the file.
pub fn load_component_file(
    components: &mut ComponentRegistry,
    path: &Path,
    single: Option<&Path>,
) -> Result<Arc<Component>, String> {
    let read = |file: &Path| {
        std::fs::read(file).map_err(|e| format!("component file {}: cannot read it: {e}", file.display()))
    };
    let threaded = read(path)?;
    match single {
        None => components.add(&format!("file {}", path.display()), &threaded),
        Some(single) => {
            let origin = format!("file {} (single-threaded build {})", path.display(), single.display());
            components.add_pair(&origin, &threaded, &read(single)?)
        }
    }
}

/// Loads the component files `config` names, relative to the directory `dir` of the
/// configuration file, into `components`, and names them in `config`. A file named by several
/// components is loaded once, with the single-threaded build any of them gives.
///
/// # Errors
/// As [`load_component_file`], two different single-threaded builds for one file, or a domain
/// interpreted by Pulley whose component file has no single-threaded build.
pub fn load_component_files(
    config: &mut SystemConfig,
    dir: &Path,
    components: &mut ComponentRegistry,
) -> Result<(), String> {
    let mut singles: BTreeMap<PathBuf, Option<PathBuf>> = BTreeMap::new();
    for file in &config.files {
        let single = singles.entry(dir.join(&file.path)).or_default();
        match (single.as_ref(), file.single.as_deref().map(|s| dir.join(s))) {
            (Some(first), Some(other)) if *first != other => {
                return Err(format!(
                    "component file {} is given two single-threaded builds, {} and {}",
                    dir.join(&file.path).display(),
                    first.display(),
                    other.display()
                ));
            }
            (_, Some(given)) => *single = Some(given),
            (_, None) => {}
        }
    }
    let mut loaded: BTreeMap<PathBuf, Arc<Component>> = BTreeMap::new();
    config.load_files(|file| {
        let path = dir.join(&file.path);
        if let Some(component) = loaded.get(&path) {
            return Ok(component.clone());
        }
        let single = singles.get(&path).cloned().flatten();
        let component = load_component_file(components, &path, single.as_deref())?;
        loaded.insert(path, component.clone());
        Ok(component)
    })
}

/// Reads the configuration file `path` and loads the component files it names (relative to
/// the file's directory) into `components`.
///
/// # Errors
/// A file that cannot be read, a configuration error, or a component file refused; each names
/// the configuration file.
pub fn load_config(path: &Path, components: &mut ComponentRegistry) -> Result<SystemConfig, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut config = SystemConfig::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new(""));
    load_component_files(&mut config, dir, components).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(config)
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
    registry.add_collocated("(embedded)", guest::COLLOCATED);
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
    boot_config(&SystemConfig::parse(config_text)?, components, console, timeout, trace)
}

/// Starts a kernel with `components` and boots the system `config` (whose component files, if
/// any, [`load_config`] or [`load_component_files`] has loaded), tracing as [`boot_traced`].
///
/// # Errors
/// As [`boot`].
pub fn boot_config(
    config: &SystemConfig,
    components: ComponentRegistry,
    console: Console,
    timeout: Option<Duration>,
    trace: bool,
) -> Result<(Arc<Kernel>, BootOutcome), String> {
    let kernel = start_kernel(config, components, console, trace)?;
    match kernel.boot(config, timeout) {
        Ok(outcome) => Ok((kernel, outcome)),
        Err(e) => {
            kernel.shutdown();
            Err(e)
        }
    }
}

/// Locks a mutex, ignoring poisoning (a panicking holder leaves the data whole).
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts a kernel for `config` with `components`, the thread activity trace recording from
/// the start when `trace` is set, and, for a user without root, its FUSE devices mounted through
/// `fusermount3` ([`fusermount::mount_for_user`]); [`Kernel::boot`] then boots the system.
///
/// # Errors
/// When wasmtime or the OS refuse, or `fusermount3` does.
pub fn start_kernel(
    config: &SystemConfig,
    components: ComponentRegistry,
    console: Console,
    trace: bool,
) -> Result<Arc<Kernel>, String> {
    let options = KernelOptions { cpus: config.system.cpus, slice: Duration::from_millis(config.system.slice_ms) };
    let kernel = Kernel::start(&options, components, console).map_err(|e| format!("cannot start the kernel: {e}"))?;
    if trace {
        kernel.scheduler.trace.switch_on();
    }
    if let Err(e) = fusermount::mount_for_user(&kernel, config) {
        kernel.shutdown();
        return Err(e);
    }
    Ok(kernel)
}

/// The per-domain summary printed after a boot: every domain the kernel made, children included.
pub fn summary(kernel: &Kernel) -> String {
    let mut text = format!("domain summary (global scheduler {}):\n", kernel.scheduler.describe_global());
    for domain in &kernel.domains() {
        text.push_str(&format!("  {}\n", DomainReport::of(domain)));
    }
    text
}
