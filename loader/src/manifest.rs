//! Component manifests: the TOML text a component carries in its `domos:manifest` section.
//!
//! ```toml
//! name = "svc-kv"
//! version = "1.0.0"
//! description = "…"
//! provides = ["KeyValueStore@1.0", "Table@1.0"]
//! requires = []
//! scheduler = "any"
//! bounded = []
//! ```
//!
//! A scheduler component also names the policy it implements (`policy = "fifo"`), which is
//! what components that require a local scheduler are matched against.

use serde::Deserialize;
use std::fmt;

/// What a component says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The component's name, by which configurations refer to it.
    pub name: String,
    /// The component's own version.
    pub version: String,
    /// One line for people.
    pub description: String,
    /// Interfaces whose services the component publishes.
    pub provides: Vec<InterfaceVersion>,
    /// Interfaces the component looks up at start; some component of the system must provide each.
    pub requires: Vec<InterfaceVersion>,
    /// The scheduling environment it needs (`any`, or a local scheduler's name).
    pub scheduler: String,
    /// Exported functions the component promises finish in bounded time (a scheduler's
    /// `preempted`, an interrupt handler); the loader checks each (see `bounded`).
    pub bounded: Vec<String>,
    /// For a scheduler component: the policy it implements (`round-robin`, `priority`, `fifo`,
    /// `stride`, or a name of its own).
    pub policy: Option<String>,
    /// Whether its services may wait (block on an atomic variable, sleep, join) inside a call:
    /// such services run in async stores on the caller's fiber (decision 0005).
    pub services_wait: bool,
}

/// `Name@MAJOR.MINOR`: an interface and its version.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct InterfaceVersion {
    /// The interface's name.
    pub name: String,
    /// Incompatible changes raise the major version.
    pub major: u32,
    /// Compatible additions raise the minor version.
    pub minor: u32,
}

impl InterfaceVersion {
    /// Whether a provider of `self` satisfies a requirement of `wanted`: the same major version,
    /// at least the minor version.
    pub fn satisfies(&self, wanted: &InterfaceVersion) -> bool {
        self.name == wanted.name && self.major == wanted.major && self.minor >= wanted.minor
    }

    fn parse(text: &str) -> Result<InterfaceVersion, String> {
        let bad = || format!("`{text}` is not of the form Name@MAJOR.MINOR");
        let (name, version) = text.split_once('@').ok_or_else(bad)?;
        let (major, minor) = version.split_once('.').ok_or_else(bad)?;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(bad());
        }
        Ok(InterfaceVersion {
            name: name.to_string(),
            major: major.parse().map_err(|_| bad())?,
            minor: minor.parse().map_err(|_| bad())?,
        })
    }
}

impl fmt::Display for InterfaceVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}.{}", self.name, self.major, self.minor)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    name: String,
    version: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    provides: Vec<String>,
    #[serde(default)]
    requires: Vec<String>,
    #[serde(default = "any_scheduler")]
    scheduler: String,
    #[serde(default)]
    bounded: Vec<String>,
    #[serde(default)]
    services_wait: bool,
    #[serde(default)]
    policy: Option<String>,
}

fn any_scheduler() -> String {
    "any".to_string()
}

impl Manifest {
    /// Parses manifest text.
    ///
    /// # Errors
    /// A message naming the malformed key or interface.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let raw: RawManifest = toml::from_str(text).map_err(|e| e.message().to_string())?;
        if raw.name.is_empty() || !raw.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(format!("component name `{}` must be letters, digits, `-` or `_`", raw.name));
        }
        let parse_all =
            |list: &[String]| list.iter().map(|s| InterfaceVersion::parse(s)).collect::<Result<Vec<_>, _>>();
        Ok(Manifest {
            provides: parse_all(&raw.provides)?,
            requires: parse_all(&raw.requires)?,
            name: raw.name,
            version: raw.version,
            description: raw.description,
            scheduler: raw.scheduler,
            bounded: raw.bounded,
            services_wait: raw.services_wait,
            policy: raw.policy,
        })
    }
}

impl Manifest {
    /// The keys whose values differ between `self` and `other`, each with both values.
    pub fn differences(&self, other: &Manifest) -> Vec<(&'static str, String, String)> {
        let list =
            |v: &[InterfaceVersion]| format!("[{}]", v.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "));
        let pairs = [
            ("name", self.name.clone(), other.name.clone()),
            ("version", self.version.clone(), other.version.clone()),
            ("description", self.description.clone(), other.description.clone()),
            ("provides", list(&self.provides), list(&other.provides)),
            ("requires", list(&self.requires), list(&other.requires)),
            ("scheduler", self.scheduler.clone(), other.scheduler.clone()),
            ("bounded", format!("{:?}", self.bounded), format!("{:?}", other.bounded)),
            ("policy", format!("{:?}", self.policy), format!("{:?}", other.policy)),
            ("services_wait", self.services_wait.to_string(), other.services_wait.to_string()),
        ];
        pairs.into_iter().filter(|(_, a, b)| a != b).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_name_each_key() {
        let a = Manifest::parse("name = \"a\"\nversion = \"1\"\nprovides = [\"X@1.0\"]").unwrap();
        let b = Manifest::parse("name = \"b\"\nversion = \"1\"\nprovides = [\"X@1.1\"]").unwrap();
        let pair = |key, a: &str, b: &str| (key, a.to_string(), b.to_string());
        assert_eq!(a.differences(&b), [pair("name", "a", "b"), pair("provides", "[X@1.0]", "[X@1.1]")]);
        assert!(a.differences(&a.clone()).is_empty());
    }

    #[test]
    fn parses_a_manifest() {
        let m = Manifest::parse("name = \"a\"\nversion = \"1.0.0\"\nprovides = [\"X@1.2\"]\nrequires = [\"Y@2.0\"]")
            .unwrap();
        assert_eq!(m.provides[0].to_string(), "X@1.2");
        assert_eq!(m.requires[0].major, 2);
        assert_eq!(m.scheduler, "any");
        assert!(m.bounded.is_empty());
        let m = Manifest::parse("name = \"a\"\nversion = \"1\"\nbounded = [\"preempted\", \"tick\"]").unwrap();
        assert_eq!(m.bounded, ["preempted", "tick"]);
    }

    #[test]
    fn rejects_malformed_interfaces_and_keys() {
        assert!(
            Manifest::parse("name = \"a\"\nversion = \"1\"\nprovides = [\"X\"]")
                .unwrap_err()
                .contains("Name@MAJOR.MINOR")
        );
        assert!(Manifest::parse("name = \"a\"\nversion = \"1\"\nprovides = [\"X@one.0\"]").is_err());
        assert!(Manifest::parse("name = \"a\"\nversion = \"1\"\ncolour = 3").unwrap_err().contains("colour"));
        assert!(Manifest::parse("name = \"a b\"\nversion = \"1\"").is_err());
    }

    #[test]
    fn versions_are_compatible_within_a_major() {
        let have = InterfaceVersion::parse("X@1.3").unwrap();
        assert!(have.satisfies(&InterfaceVersion::parse("X@1.2").unwrap()));
        assert!(!have.satisfies(&InterfaceVersion::parse("X@1.4").unwrap()));
        assert!(!have.satisfies(&InterfaceVersion::parse("X@2.0").unwrap()));
    }

    /// Arbitrary bytes never panic the parser (a cheap fuzz over mutated manifests).
    #[test]
    fn survives_mutated_manifests() {
        let base = b"name = \"svc\"\nversion = \"1.0.0\"\nprovides = [\"A@1.0\"]\nrequires = [\"B@2.1\"]\n".to_vec();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            let bytes = crate::mutated(&base, &mut seed, 4, |r| (r >> 32) as u8);
            let _ = Manifest::parse(&String::from_utf8_lossy(&bytes));
        }
    }
}
