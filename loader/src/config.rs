//! System configurations: one TOML file describes a whole system, in the spirit of JX's
//! `boot.rc` — which domains exist, which components run in each, with which limits and
//! translator, and how services are wired by name.
//!
//! ```toml
//! [system]
//! name = "demo, one domain per component"
//! cpus = 2
//!
//! [[domain]]
//! name = "Store"
//! heap = "8 MiB"
//! translator = "cranelift"
//! [[domain.component]]
//! name = "svc-kv"
//! args = ["max_tables=16"]
//! register = { KeyValueStore = "kv" }
//! [[domain.component]]
//! path = "build/svc-log.wasm"
//! single = "build/svc-log.single.wasm"
//! ```
//!
//! A component is named either by its manifest name, for one embedded in `domos`, or by the
//! path of its `.wasm` file (relative to the configuration file), optionally with its
//! single-threaded build. This crate reads no files: the caller loads the files the configuration
//! lists ([`SystemConfig::files`]) with [`SystemConfig::load_files`].

use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use domos_abi::Grant;

use crate::codegen::{BoundsChecks, CodeGen, Translator};
use crate::component::Component;
use crate::scheduler::{GlobalScheduler, LocalScheduler};

/// A parsed system configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemConfig {
    /// System-wide settings.
    #[serde(default)]
    pub system: SystemSection,
    /// The domains, booted in dependency order.
    #[serde(rename = "domain", default)]
    pub domains: Vec<DomainConfig>,
    /// Emulated devices whose memory components with the `devices` grant can obtain.
    #[serde(rename = "device", default)]
    pub devices: Vec<DeviceConfig>,
    /// Emulated disks, which drivers with the `devices` grant open.
    #[serde(rename = "disk", default)]
    pub disks: Vec<DiskConfig>,
    /// Emulated network cards, which drivers with the `devices` grant open.
    #[serde(rename = "nic", default)]
    pub nics: Vec<crate::nic::NicConfig>,
    /// `/dev/fuse` connections mounted on the host, which drivers with the `devices` grant open.
    #[serde(rename = "fuse", default)]
    pub fuses: Vec<crate::fuse::FuseConfig>,
    /// The components named by their files, which [`SystemConfig::load_files`] loads.
    #[serde(skip)]
    pub files: Vec<ComponentFile>,
}

/// A component a configuration names by its file (`path`, and `single` for its single-threaded
/// build) rather than by its manifest name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentFile {
    /// The domain's index in [`SystemConfig::domains`].
    pub domain: usize,
    /// The component's index in that domain's `components`.
    pub component: usize,
    /// The threaded build, as the configuration wrote it: relative to the configuration file.
    pub path: String,
    /// The single-threaded build, likewise, if the configuration gives one.
    pub single: Option<String>,
}

/// Only the keys that name component files, read beside the configuration proper (whose
/// [`ComponentConfig`] keeps the fields the kernel uses).
#[derive(Deserialize)]
struct FileKeys {
    #[serde(rename = "domain", default)]
    domains: Vec<DomainFileKeys>,
}

#[derive(Deserialize)]
struct DomainFileKeys {
    #[serde(rename = "component", default)]
    components: Vec<ComponentFileKeys>,
}

#[derive(Deserialize)]
struct ComponentFileKeys {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    single: Option<String>,
}

/// One `[[disk]]`: an image file, or RAM when no image is given.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskConfig {
    /// The name drivers open.
    pub name: String,
    /// The image file, used in place (its size is the disk's).
    #[serde(default)]
    pub image: Option<String>,
    /// Bytes of RAM disk, when there is no image.
    #[serde(default)]
    pub size: Option<Size>,
}

/// The largest `heap` of a domain: a quota, not a reservation, but one no machine of this kind
/// could honour.
pub const MAX_HEAP: u64 = 64 << 30;

/// Most live threads a domain may be configured for.
pub const MAX_THREADS: u32 = 1024;

/// Most service threads per component instance a domain may be configured for.
pub const MAX_SERVICE_THREADS: u32 = 256;

/// The largest RAM disk.
const MAX_RAM_DISK: u64 = 4 << 30;

/// One `[[device]]`: an emulated device's memory.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceConfig {
    /// The name components ask for.
    pub name: String,
    /// Bytes of device memory.
    pub size: Size,
}

/// The `[system]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemSection {
    /// A name for people.
    #[serde(default)]
    pub name: String,
    /// Kernel CPUs (worker OS threads); 0 means one per core.
    #[serde(default)]
    pub cpus: usize,
    /// Scheduler time slice in milliseconds.
    #[serde(default = "default_slice")]
    pub slice_ms: u64,
    /// How long each component's `init` may run at boot, in milliseconds; a domain whose `init`
    /// has not returned by then is terminated and the boot goes on.
    #[serde(default = "default_init_timeout")]
    pub init_timeout_ms: u64,
    /// How the global scheduler picks a domain: built in, `stride` (default) or `round-robin`,
    /// or a scheduler component, `{ component = "sched-stride" }`.
    #[serde(default)]
    pub scheduler: SchedulerChoice<GlobalScheduler>,
    /// What `domos boot` prints once the system has booted: how to reach it (a file server's
    /// address and a client command, say).
    #[serde(default)]
    pub ready: String,
}

fn default_slice() -> u64 {
    10
}

fn default_init_timeout() -> u64 {
    10_000
}

impl Default for SystemSection {
    fn default() -> Self {
        SystemSection {
            name: String::new(),
            cpus: 0,
            slice_ms: default_slice(),
            init_timeout_ms: default_init_timeout(),
            scheduler: SchedulerChoice::default(),
            ready: String::new(),
        }
    }
}

/// One `[[domain]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DomainConfig {
    /// Unique name.
    pub name: String,
    /// Heap limit: bytes, or a string such as `"8 MiB"`.
    #[serde(default)]
    pub heap: Option<Size>,
    /// Per-call quota: the largest portal message, either way.
    #[serde(default)]
    pub max_message: Option<Size>,
    /// Shadow stack per thread.
    #[serde(default)]
    pub stack: Option<Size>,
    /// Most service threads per component running calls at once.
    #[serde(default)]
    pub service_threads: Option<u32>,
    /// Most live threads.
    #[serde(default)]
    pub threads: Option<u32>,
    /// Whether the heap quota is enforced (default true); off only to measure what
    /// accounting costs (`domos bench mem`).
    #[serde(default)]
    pub accounting: Option<bool>,
    /// CPU tickets: the domain's share of the CPUs (default 100). A child's are taken from its
    /// parent's (by default half of them).
    #[serde(default)]
    pub cpu_share: Option<u64>,
    /// Cranelift or Pulley.
    #[serde(default)]
    pub translator: Translator,
    /// `guard-pages` (default for Cranelift) or `explicit` (Pulley's only way).
    #[serde(default)]
    pub bounds_checks: Option<BoundsChecks>,
    /// Whether the domain's code can be preempted (default true); `false` removes the epoch
    /// checks from its code and trusts it to return (see `CodeGen::preemption`).
    #[serde(default)]
    pub preemption: Option<bool>,
    /// Host-call classes granted beyond the basic ones.
    #[serde(default, deserialize_with = "grants")]
    pub grants: Vec<Grant>,
    /// The local scheduler: built in, `round-robin` (default), `priority` or `fifo`, or a
    /// scheduler component, `{ component = "sched-fifo", slice_ms = 2 }`.
    #[serde(default)]
    pub scheduler: SchedulerChoice<LocalScheduler>,
    /// Whether the domain runs its components from the collocated build (default false): one
    /// module and one heap for all of them, their calls to one another plain calls instead of
    /// copying portal calls (JX's components in one domain; decision 0015). Only components
    /// built into `domos` from `components/` are in that build, and only compiled domains
    /// (Cranelift) run it.
    #[serde(default)]
    pub collocate: bool,
    /// The components, in load order.
    #[serde(rename = "component", default)]
    pub components: Vec<ComponentConfig>,
}

/// A scheduler: one built into the kernel (`B`), or a scheduler component.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(
    untagged,
    expecting = "a built-in scheduler (a domain's: \"round-robin\", \"priority\" or \"fifo\"; the system's: \"stride\" or \"round-robin\"), or a scheduler component: { component = \"NAME\", slice_ms = MS }"
)]
pub enum SchedulerChoice<B> {
    /// The kernel's own (Rust) scheduler with this policy, the reference for comparisons.
    BuiltIn(B),
    /// A scheduler component.
    Component(SchedulerComponentConfig),
}

impl<B: Default> Default for SchedulerChoice<B> {
    fn default() -> Self {
        SchedulerChoice::BuiltIn(B::default())
    }
}

/// A scheduler component in a configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerComponentConfig {
    /// The component's name.
    pub component: String,
    /// For a local scheduler: a time slice of its own, shorter than the system's, at the end of
    /// which it is *interrupted* (`domos_sched_interrupted`) and picks the domain's next thread
    /// while the domain keeps its CPU.
    #[serde(default)]
    pub slice_ms: Option<u64>,
}

/// One `[[domain.component]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "RawComponentConfig")]
pub struct ComponentConfig {
    /// The component's name (from its manifest). For a component named by its file (`path`),
    /// empty until [`SystemConfig::load_files`] has loaded it.
    pub name: String,
    /// Its arguments: a list of byte strings, passed to the component intact (the `args` host
    /// call, encoded as [`domos_abi::ARGUMENTS_DOC`] says). Written as a TOML array, whose items
    /// are strings or, for bytes that are not UTF-8, arrays of byte values
    /// (`args = ["put", [0x2f, 0xff]]`); or as one string, split at white space (`args = "n=1
    /// m=2"`).
    #[serde(default)]
    pub args: Vec<Vec<u8>>,
    /// Names it registers → the names the system publishes them under.
    #[serde(default)]
    pub register: BTreeMap<String, String>,
    /// Names it looks up → the system names they resolve to.
    #[serde(default)]
    pub bind: BTreeMap<String, String>,
}

/// A `[[domain.component]]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawComponentConfig {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    single: Option<String>,
    #[serde(default)]
    args: Option<toml::Value>,
    #[serde(default)]
    register: BTreeMap<String, String>,
    #[serde(default)]
    bind: BTreeMap<String, String>,
}

impl ComponentConfig {
    /// The arguments encoded for the `args` host call ([`domos_abi::ARGUMENTS_DOC`]).
    pub fn encoded_args(&self) -> Vec<u8> {
        let mut out = Vec::new();
        domos_abi::encode_arguments(self.args.iter().map(Vec::as_slice), &mut out);
        out
    }
}

/// The list `args` gives: one string split at white space (the form every configuration had
/// before arguments were a list), or an array of strings and arrays of byte values.
fn arguments(args: Option<toml::Value>) -> Result<Vec<Vec<u8>>, String> {
    let items = match args {
        None => return Ok(Vec::new()),
        Some(toml::Value::String(words)) => {
            return Ok(words.split_whitespace().map(|word| word.as_bytes().to_vec()).collect());
        }
        Some(toml::Value::Array(items)) => items,
        Some(other) => {
            return Err(format!(
                "`args` is a list of strings (args = [\"a\", \"b c\"]) or one string split at white space; \
                 found: {}",
                other.type_str()
            ));
        }
    };
    let bad = |index: usize| {
        format!(
            "`args` item {index}: an argument is a string, or an array of byte values 0-255 for bytes \
             that are not UTF-8 ([0x2f, 0xff])"
        )
    };
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| match item {
            toml::Value::String(text) => Ok(text.into_bytes()),
            toml::Value::Array(bytes) => bytes
                .iter()
                .map(|byte| byte.as_integer().and_then(|b| u8::try_from(b).ok()).ok_or_else(|| bad(index)))
                .collect(),
            _ => Err(bad(index)),
        })
        .collect()
}

impl TryFrom<RawComponentConfig> for ComponentConfig {
    type Error = String;

    fn try_from(raw: RawComponentConfig) -> Result<Self, String> {
        let name = match (raw.name, raw.path.as_deref(), raw.single.is_some()) {
            (Some(name), Some(path), _) => {
                return Err(format!(
                    "component {name} is named both by `name` (a component embedded in domos) and by `path` \
                     ({path}); give one of them"
                ));
            }
            (Some(name), None, true) => {
                return Err(format!(
                    "component {name}: `single` names the single-threaded build of a component file, so it \
                     goes with `path`, not with `name`"
                ));
            }
            (Some(name), None, false) => name,
            (None, Some(""), _) => return Err("a component's `path` is empty".into()),
            (None, Some(_), _) if raw.single.as_deref() == Some("") => {
                return Err("a component's `single` is empty".into());
            }
            (None, Some(_), _) => String::new(),
            (None, None, _) => {
                return Err("a component needs `name` (one embedded in domos) or `path` (a .wasm file)".into());
            }
        };
        Ok(ComponentConfig { name, args: arguments(raw.args)?, register: raw.register, bind: raw.bind })
    }
}

/// CPU tickets of a domain that does not say otherwise.
pub const DEFAULT_CPU_SHARE: u64 = 100;

/// Limits and options of a domain, from its configuration.
#[derive(Debug, Clone)]
pub struct DomainLimits {
    /// Most bytes of heap (all component memories, stacks and message buffers included).
    pub heap: u64,
    /// Most bytes in one portal message, either way (the per-call quota).
    pub max_message: u32,
    /// Bytes of shadow stack per thread and component.
    pub stack: u32,
    /// Most service threads per component instance running calls at once.
    pub service_threads: u32,
    /// Most threads alive at once.
    pub threads: u32,
    /// Whether the heap quota is enforced; without it memory is neither counted nor limited.
    pub accounting: bool,
    /// CPU tickets: the domain's share of the CPUs against the other domains' tickets.
    pub cpu_share: u64,
}

impl Default for DomainLimits {
    fn default() -> Self {
        DomainLimits {
            heap: 16 << 20,
            max_message: 64 * 1024,
            stack: 64 * 1024,
            service_threads: 4,
            threads: 64,
            accounting: true,
            cpu_share: DEFAULT_CPU_SHARE,
        }
    }
}

/// Deserializes `grants = ["devices", …]` by the names of `domos_abi::Grant`.
fn grants<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Grant>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    names
        .iter()
        .map(|name| {
            Grant::named(name).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "unknown grant `{name}` (grants: {})",
                    Grant::ALL.iter().map(|g| g.name()).collect::<Vec<_>>().join(", ")
                ))
            })
        })
        .collect()
}

/// A byte size: an integer, or a string with a unit (`B`, `KiB`, `MiB`, `GiB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bytes(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Bytes(b) => Ok(Size(b)),
            Raw::Text(t) => parse_size(&t).map(Size).map_err(serde::de::Error::custom),
        }
    }
}

fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| format!("`{text}` is not a size such as \"8 MiB\""))?;
    let scale = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => {
            return Err(format!("unknown size unit `{other}` (use B, KiB, MiB or GiB)"));
        }
    };
    number.checked_mul(scale).ok_or_else(|| format!("`{text}` is too large"))
}

impl DomainConfig {
    /// Parses one `[[domain]]` table given alone (a child domain's description, from the
    /// `domain_create` host call); `validate` checks it.
    ///
    /// # Errors
    /// TOML errors and unknown keys, for people.
    pub fn parse(text: &str) -> Result<DomainConfig, String> {
        let config: DomainConfig = toml::from_str(text).map_err(|e| e.message().to_string())?;
        let files: DomainFileKeys = toml::from_str(text).map_err(|e| e.message().to_string())?;
        if let Some(path) = files.components.iter().find_map(|c| c.path.as_deref()) {
            return Err(format!(
                "domain {}: a child domain's components are named by `name`; `path` ({path}) names a file of the \
                 host, which only the configuration `domos boot` reads may do",
                config.name
            ));
        }
        Ok(config)
    }

    /// The domain's limits, defaults filled in.
    pub fn limits(&self) -> DomainLimits {
        let d = DomainLimits::default();
        let size32 = |s: Option<Size>, default: u32| s.map_or(default, |s| u32::try_from(s.0).unwrap_or(u32::MAX));
        DomainLimits {
            heap: self.heap.map_or(d.heap, |s| s.0),
            max_message: size32(self.max_message, d.max_message),
            stack: size32(self.stack, d.stack),
            service_threads: self.service_threads.unwrap_or(d.service_threads),
            threads: self.threads.unwrap_or(d.threads),
            accounting: self.accounting.unwrap_or(d.accounting),
            cpu_share: self.cpu_share.unwrap_or(d.cpu_share),
        }
    }

    /// How the domain's code is generated.
    pub fn code(&self) -> CodeGen {
        let bounds = match self.translator {
            Translator::Cranelift => self.bounds_checks.unwrap_or_default(),
            Translator::Pulley => BoundsChecks::Explicit,
        };
        CodeGen { translator: self.translator, bounds, preemption: self.preemption.unwrap_or(true), metered: false }
    }

    /// Checks what can be checked without the components.
    ///
    /// # Errors
    /// A message naming the domain and the problem.
    pub fn validate(&self) -> Result<(), String> {
        let limits = self.limits();
        let name = &self.name;
        if name.is_empty() {
            return Err("a domain needs a name".into());
        }
        // Sizes are checked as written: `limits` would clamp one beyond 4 GiB.
        let raw = |size: Option<Size>| size.map(|s| s.0);
        if raw(self.heap).is_some_and(|heap| heap > MAX_HEAP) {
            return Err(format!("domain {name}: heap must be at most {} GiB", MAX_HEAP >> 30));
        }
        if raw(self.max_message).is_some_and(|m| !(64..=16 << 20).contains(&m)) {
            return Err(format!("domain {name}: max_message must be between 64 B and 16 MiB"));
        }
        if raw(self.stack).is_some_and(|s| !(4096..=16 << 20).contains(&s) || !s.is_multiple_of(16)) {
            return Err(format!("domain {name}: stack must be a multiple of 16 between 4 KiB and 16 MiB"));
        }
        if limits.threads > MAX_THREADS || limits.service_threads > MAX_SERVICE_THREADS {
            return Err(format!(
                "domain {name}: threads must be at most {MAX_THREADS} and service_threads at most {MAX_SERVICE_THREADS}"
            ));
        }
        if self.translator == Translator::Pulley {
            // An interpreted domain's heap is made at once, divided among its components, each a
            // 32-bit memory.
            let share = limits.heap / self.components.len().max(1) as u64;
            if share > u64::from(u32::MAX) {
                return Err(format!(
                    "domain {name}: an interpreted domain's heap divided among its {} components must be below 4 GiB each",
                    self.components.len()
                ));
            }
        }
        if self.components.is_empty() {
            return Err(format!("domain {name} has no components"));
        }
        if limits.cpu_share == 0 || limits.cpu_share > 1_000_000 {
            return Err(format!("domain {name}: cpu_share must be between 1 and 1000000"));
        }
        if self.translator == Translator::Pulley && self.bounds_checks == Some(BoundsChecks::GuardPages) {
            return Err(format!(
                "domain {name}: the pulley translator checks bounds explicitly, it cannot use guard pages"
            ));
        }
        if limits.service_threads == 0 || limits.threads == 0 {
            return Err(format!("domain {name}: service_threads and threads must be at least 1"));
        }
        if self.collocate && self.translator == Translator::Pulley {
            return Err(format!(
                "domain {name}: collocate needs the cranelift translator: the collocated build is made for \
                 compiled domains only"
            ));
        }
        if let SchedulerChoice::Component(SchedulerComponentConfig { slice_ms: Some(0), .. }) = self.scheduler {
            return Err(format!("domain {name}: a scheduler's slice_ms must be at least 1"));
        }
        Ok(())
    }
}

impl SystemConfig {
    /// Parses and checks a configuration.
    ///
    /// # Errors
    /// A message for people: TOML errors with their line, unknown keys, duplicate domains.
    pub fn parse(text: &str) -> Result<SystemConfig, String> {
        let config: SystemConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        if config.domains.is_empty() {
            return Err("the configuration has no [[domain]]".into());
        }
        if config.system.init_timeout_ms == 0 {
            return Err("[system] init_timeout_ms must be at least 1".into());
        }
        let mut devices = BTreeSet::new();
        for device in &config.devices {
            if device.size.0 == 0 || device.size.0 > domos_abi::MAX_MEMORY_OBJECT {
                return Err(format!("device {}: size must be between 1 B and 1 GiB", device.name));
            }
            if !devices.insert(device.name.as_str()) {
                return Err(format!("device {} is defined twice", device.name));
            }
        }
        for disk in &config.disks {
            match (&disk.image, disk.size) {
                (Some(_), None) => {}
                (None, Some(size)) if (512..=MAX_RAM_DISK).contains(&size.0) => {}
                _ => {
                    return Err(format!(
                        "disk {}: give either an image file or a RAM size between 512 B and 4 GiB",
                        disk.name
                    ));
                }
            }
            if !devices.insert(disk.name.as_str()) {
                return Err(format!("device {} is defined twice", disk.name));
            }
        }
        crate::nic::check_nics(&config.nics, &mut devices)?;
        crate::fuse::check_fuses(&config.fuses, &mut devices)?;
        let mut seen = BTreeSet::new();
        for domain in &config.domains {
            domain.validate()?;
            if !seen.insert(domain.name.as_str()) {
                return Err(format!("domain {} is defined twice", domain.name));
            }
        }
        let keys: FileKeys = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut config = config;
        for (d, domain) in keys.domains.into_iter().enumerate() {
            for (c, component) in domain.components.into_iter().enumerate() {
                if let Some(path) = component.path {
                    config.files.push(ComponentFile { domain: d, component: c, path, single: component.single });
                }
            }
        }
        Ok(config)
    }

    /// Loads the components the configuration names by their files: `load` verifies one file
    /// (with its single-threaded build, if the configuration gives one), registers it and returns
    /// it, and its manifest name becomes the component's name in the configuration. A domain
    /// interpreted by Pulley must be given a single-threaded build.
    ///
    /// # Errors
    /// What `load` reports, or a Pulley domain's component file without a single-threaded
    /// build; each names the domain.
    pub fn load_files(
        &mut self,
        mut load: impl FnMut(&ComponentFile) -> Result<Arc<Component>, String>,
    ) -> Result<(), String> {
        for file in &self.files {
            let domain = &mut self.domains[file.domain];
            let component = load(file).map_err(|e| format!("domain {}: {e}", domain.name))?;
            if domain.translator == Translator::Pulley && !component.has_single_build() {
                return Err(format!(
                    "domain {}: the pulley translator runs a component's single-threaded build, and component \
                     file {} has none (give it as `single`)",
                    domain.name, file.path
                ));
            }
            domain.components[file.component].name = component.manifest.name.clone();
        }
        Ok(())
    }

    /// The first component file not loaded yet, with its domain's name.
    pub fn unloaded_file(&self) -> Option<(&str, &ComponentFile)> {
        self.files.iter().find_map(|file| {
            let domain = &self.domains[file.domain];
            domain.components[file.component].name.is_empty().then_some((domain.name.as_str(), file))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("8 MiB"), Ok(8 << 20));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert!(parse_size("8 MB").unwrap_err().contains("unknown size unit"));
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn rejects_unknown_keys_and_duplicates() {
        let err =
            SystemConfig::parse("[[domain]]\nname = \"A\"\nhaep = 3\n[[domain.component]]\nname = \"x\"").unwrap_err();
        assert!(err.contains("haep"), "{err}");
        let twice = "[[domain]]\nname = \"A\"\n[[domain.component]]\nname = \"x\"\n[[domain]]\nname = \"A\"\n[[domain.component]]\nname = \"y\"";
        assert!(SystemConfig::parse(twice).unwrap_err().contains("defined twice"));
        assert!(SystemConfig::parse("[system]\nname = \"empty\"").unwrap_err().contains("no [[domain]]"));
        let device =
            "[[device]]\nname = \"fb\"\nsize = \"2 GiB\"\n[[domain]]\nname = \"A\"\n[[domain.component]]\nname = \"x\"";
        assert!(SystemConfig::parse(device).unwrap_err().contains("device fb: size"));
        let bad_translator = "[[domain]]\nname = \"A\"\ntranslator = \"jit\"\n[[domain.component]]\nname = \"x\"";
        assert!(SystemConfig::parse(bad_translator).unwrap_err().contains("jit"));
        let pulley_guards = "[[domain]]\nname = \"A\"\ntranslator = \"pulley\"\nbounds_checks = \"guard-pages\"\n[[domain.component]]\nname = \"x\"";
        assert!(SystemConfig::parse(pulley_guards).unwrap_err().contains("checks bounds explicitly"));
        let disk = |keys: &str| {
            format!("[[disk]]\nname = \"d\"\n{keys}[[domain]]\nname = \"A\"\n[[domain.component]]\nname = \"x\"")
        };
        assert!(SystemConfig::parse(&disk("size = \"1 MiB\"\n")).is_ok());
        assert!(SystemConfig::parse(&disk("image = \"d.img\"\n")).is_ok());
        for bad in ["", "size = \"100\"\n", "image = \"d.img\"\nsize = \"1 MiB\"\n"] {
            assert!(SystemConfig::parse(&disk(bad)).unwrap_err().contains("disk d: give either"), "{bad}");
        }
        let domain = |keys: &str| format!("[[domain]]\nname = \"A\"\n{keys}[[domain.component]]\nname = \"x\"");
        for (keys, error) in [
            ("heap = \"65 GiB\"\n", "heap must be at most 64 GiB"),
            ("stack = \"5 GiB\"\n", "stack must be a multiple of 16 between 4 KiB and 16 MiB"),
            ("stack = 4097\n", "stack must be a multiple of 16"),
            ("max_message = \"4 GiB\"\n", "max_message must be between 64 B and 16 MiB"),
            ("max_message = 4294967360\n", "max_message must be between"),
            ("threads = 1000000\n", "threads must be at most 1024"),
            ("service_threads = 257\n", "service_threads at most 256"),
            ("translator = \"pulley\"\nheap = \"8 GiB\"\n", "below 4 GiB each"),
        ] {
            let err = SystemConfig::parse(&domain(keys)).unwrap_err();
            assert!(err.contains(error), "{keys}: {err}");
        }
        assert!(SystemConfig::parse(&domain("heap = \"64 GiB\"\nthreads = 1024\nstack = \"16 MiB\"\n")).is_ok());
        let bad_bounds = "[[domain]]\nname = \"A\"\nbounds_checks = \"none\"\n[[domain.component]]\nname = \"x\"";
        assert!(SystemConfig::parse(bad_bounds).unwrap_err().contains("none"));
    }
}

#[cfg(test)]
mod files {
    use super::*;

    const TWO: &str = "[[domain]]\nname = \"A\"\n[[domain.component]]\nname = \"svc-kv\"\n\
                       [[domain.component]]\npath = \"build/x.wasm\"\nargs = \"n=1\"\n\
                       [[domain]]\nname = \"B\"\ntranslator = \"pulley\"\n\
                       [[domain.component]]\npath = \"build/y.wasm\"\nsingle = \"build/y.single.wasm\"\n";

    #[test]
    fn components_are_named_by_name_or_by_path_and_single() {
        let config = SystemConfig::parse(TWO).unwrap();
        assert_eq!(
            config.files,
            [
                ComponentFile { domain: 0, component: 1, path: "build/x.wasm".into(), single: None },
                ComponentFile {
                    domain: 1,
                    component: 0,
                    path: "build/y.wasm".into(),
                    single: Some("build/y.single.wasm".into())
                },
            ]
        );
        assert_eq!(config.domains[0].components[0].name, "svc-kv");
        assert_eq!(config.domains[0].components[1].name, "", "named when its file is loaded");
        assert_eq!(config.domains[0].components[1].args, [b"n=1"]);
        let (domain, file) = config.unloaded_file().unwrap();
        assert_eq!((domain, file.path.as_str()), ("A", "build/x.wasm"));
    }

    #[test]
    fn arguments_are_a_list_or_one_string_split_at_white_space() {
        let args = |value: &str| {
            let text = format!("[[domain]]\nname = \"A\"\n[[domain.component]]\nname = \"c\"\nargs = {value}\n");
            SystemConfig::parse(&text).map(|config| config.domains[0].components[0].args.clone())
        };
        let list = args(r#"["put", "/a b", "back\\slash", 'x"y', '\u0041', "tab\there", "", [0x2f, 0x80, 255]]"#);
        let expected: [&[u8]; 8] =
            [b"put", b"/a b", b"back\\slash", b"x\"y", b"\\u0041", b"tab\there", b"", &[0x2f, 0x80, 0xff]];
        assert_eq!(list.unwrap(), expected);
        // The string form, as every configuration wrote it before: words at white space.
        assert_eq!(
            args("\"blocks=4096  block=4096\tread_ahead=1 \"").unwrap(),
            [&b"blocks=4096"[..], b"block=4096", b"read_ahead=1"]
        );
        assert_eq!(args("\"\"").unwrap(), Vec::<Vec<u8>>::new());
        assert_eq!(args("[]").unwrap(), Vec::<Vec<u8>>::new());
        let none = SystemConfig::parse("[[domain]]\nname = \"A\"\n[[domain.component]]\nname = \"c\"\n").unwrap();
        assert!(none.domains[0].components[0].args.is_empty());
        // The encoding the component receives.
        let config = SystemConfig::parse(
            "[[domain]]\nname = \"A\"\n[[domain.component]]\nname = \"c\"\nargs = [\"a b\", \"\"]\n",
        )
        .unwrap();
        assert_eq!(config.domains[0].components[0].encoded_args(), b"\x03\0\0\0a b\0\0\0\0");
        for (value, error) in [
            ("3", "found: integer"),
            ("[1]", "`args` item 0: an argument is a string"),
            ("[\"a\", [256]]", "`args` item 1"),
            ("[[-1]]", "`args` item 0"),
            ("[{ a = 1 }]", "`args` item 0"),
        ] {
            let err = args(value).unwrap_err();
            assert!(err.contains(error), "{value}: {err}");
        }
    }

    #[test]
    fn a_component_table_names_one_source() {
        let component = |keys: &str| format!("[[domain]]\nname = \"A\"\n[[domain.component]]\n{keys}");
        for (keys, expected) in [
            ("name = \"svc-kv\"\npath = \"x.wasm\"\n", "component svc-kv is named both by `name`"),
            ("name = \"svc-kv\"\nsingle = \"x.wasm\"\n", "`single` names the single-threaded build"),
            ("args = \"\"\n", "a component needs `name` (one embedded in domos) or `path` (a .wasm file)"),
            ("path = \"\"\n", "a component's `path` is empty"),
            ("path = \"x.wasm\"\nsingle = \"\"\n", "a component's `single` is empty"),
            ("path = \"x.wasm\"\nfile = \"y\"\n", "unknown field `file`"),
        ] {
            let err = SystemConfig::parse(&component(keys)).unwrap_err();
            assert!(err.contains(expected), "{keys}: {err}");
            assert!(err.starts_with("TOML parse error at line "), "the error says where: {err}");
        }
    }

    #[test]
    fn loading_names_the_components_and_an_interpreted_domain_needs_a_single_build() {
        let mut registry = crate::ComponentRegistry::default();
        let wat = |name: &str, shared: &str| {
            wat::parse_str(format!(
                r#"(module (import "env" "memory" (memory 1 65536 {shared}))
                   (global (export "__stack_pointer") (mut i32) (i32.const 65536))
                   (func (export "domos_init") (result i32) i32.const 0)
                   (func (export "domos_thread_entry") (param i32) (result i32) i32.const 0)
                   (func (export "domos_dispatch") (param i32 i32 i32 i32 i32) (result i32) i32.const 0)
                   (func (export "domos_release") (param i32))
                   (@custom "domos:manifest" "name = \"{name}\"\nversion = \"1\""))"#
            ))
            .unwrap()
        };
        let x = registry.add("x", &wat("svc-x", "shared")).unwrap();
        let y = registry.add_pair("y", &wat("svc-y", "shared"), &wat("svc-y", "")).unwrap();
        let mut config = SystemConfig::parse(TWO).unwrap();
        config.load_files(|file| Ok(if file.path == "build/x.wasm" { x.clone() } else { y.clone() })).unwrap();
        assert_eq!(config.domains[0].components[1].name, "svc-x");
        assert_eq!(config.domains[1].components[0].name, "svc-y");
        assert!(config.unloaded_file().is_none());

        let mut config = SystemConfig::parse(TWO).unwrap();
        let err = config.load_files(|_| Ok(x.clone())).unwrap_err();
        assert!(err.starts_with("domain B: the pulley translator runs a component's single-threaded build, and component file build/y.wasm has none"), "{err}");
        let mut config = SystemConfig::parse(TWO).unwrap();
        let err = config.load_files(|file| Err(format!("cannot read {}", file.path))).unwrap_err();
        assert_eq!(err, "domain A: cannot read build/x.wasm");
    }

    /// A guest describes its child domains; it must not make the kernel read the host's files.
    #[test]
    fn a_child_domain_cannot_name_a_file() {
        let err = DomainConfig::parse("name = \"child\"\n[[component]]\npath = \"/etc/passwd\"\n").unwrap_err();
        assert!(err.contains("domain child: a child domain's components are named by `name`"), "{err}");
        assert!(DomainConfig::parse("name = \"child\"\n[[component]]\nname = \"work-sort\"\n").is_ok());
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;

    /// Mutated configurations never panic the parser (a cheap fuzz; errors are fine).
    #[test]
    fn survives_mutated_configurations() {
        let base = include_str!("../../configs/demo-separate.toml").as_bytes().to_vec();
        let mut seed = 0x5851_f42d_4c95_7f2du64;
        for _ in 0..5_000 {
            let bytes = crate::mutated(&base, &mut seed, 6, |r| {
                b"[]=\"\n #0123456789abcdefghiKMGB.,{}"[(r >> 48) as usize % 34]
            });
            if let Ok(config) = SystemConfig::parse(&String::from_utf8_lossy(&bytes)) {
                assert!(config.domains.iter().all(|d| d.validate().is_ok()), "parse validates every domain");
            }
        }
    }
}
