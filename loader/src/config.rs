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
//! args = "max_tables=16"
//! register = { KeyValueStore = "kv" }
//! ```

use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

use domos_abi::Grant;

use crate::codegen::{BoundsChecks, CodeGen, Translator};
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
    /// How the global scheduler picks a domain: built in, `stride` (default) or `round-robin`,
    /// or a scheduler component, `{ component = "sched-stride" }`.
    #[serde(default)]
    pub scheduler: SchedulerChoice<GlobalScheduler>,
}

fn default_slice() -> u64 {
    10
}

impl Default for SystemSection {
    fn default() -> Self {
        SystemSection { name: String::new(), cpus: 0, slice_ms: default_slice(), scheduler: SchedulerChoice::default() }
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
#[serde(deny_unknown_fields)]
pub struct ComponentConfig {
    /// The component's name (from its manifest).
    pub name: String,
    /// Its arguments, one string.
    #[serde(default)]
    pub args: String,
    /// Names it registers → the names the system publishes them under.
    #[serde(default)]
    pub register: BTreeMap<String, String>,
    /// Names it looks up → the system names they resolve to.
    #[serde(default)]
    pub bind: BTreeMap<String, String>,
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
        toml::from_str(text).map_err(|e| e.message().to_string())
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
        CodeGen { translator: self.translator, bounds, preemption: self.preemption.unwrap_or(true) }
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
        if self.components.is_empty() {
            return Err(format!("domain {name} has no components"));
        }
        if limits.max_message < 64 || limits.max_message > 16 << 20 {
            return Err(format!("domain {name}: max_message must be between 64 B and 16 MiB"));
        }
        if limits.stack < 4096 || !limits.stack.is_multiple_of(16) {
            return Err(format!("domain {name}: stack must be a multiple of 16 and at least 4 KiB"));
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
        let mut seen = BTreeSet::new();
        for domain in &config.domains {
            domain.validate()?;
            if !seen.insert(domain.name.as_str()) {
                return Err(format!("domain {} is defined twice", domain.name));
            }
        }
        Ok(config)
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
        let bad_bounds = "[[domain]]\nname = \"A\"\nbounds_checks = \"none\"\n[[domain.component]]\nname = \"x\"";
        assert!(SystemConfig::parse(bad_bounds).unwrap_err().contains("none"));
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
