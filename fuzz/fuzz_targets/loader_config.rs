//! Configuration text: `SystemConfig::parse` (a system's TOML file, which `domos boot` and `domos
//! check` read) followed by `boot_order` against the real components, and
//! `DomainConfig::parse` (one `[[domain]]` table, which a guest with the `domains` grant hands
//! the kernel in `domain_create`). Every input is given to both parsers.
//!
//! The components are the built ones under `target/guest/` (both builds of each, as `domos`
//! embeds them), loaded once; `DOMOS_GUEST_DIR` names another guest build directory. Without
//! them `boot_order` runs against an empty registry.
//!
//! Checks, beyond no panic:
//! * an accepted system has a domain, unique domain names, and unique device and disk names;
//!   every domain validates and its limits and code generation are within the documented
//!   ranges; every device and disk has a size in range (or an image);
//! * a boot order is a permutation of the domains in which every component's required interfaces
//!   are provided by a component of a domain that boots no later, and the schedulers named are
//!   scheduler components of the right level;
//! * a domain table that parses and validates has limits within the same ranges.
#![no_main]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::LazyLock;

use domos_loader::codegen::{BoundsChecks, Translator};
use domos_loader::config::{DomainConfig, MAX_HEAP, MAX_SERVICE_THREADS, MAX_THREADS, SchedulerChoice};
use domos_loader::verifier::Kind;
use domos_loader::{ComponentRegistry, SystemConfig, boot_order};
use libfuzzer_sys::fuzz_target;

/// Both builds of every component of the guest build directory.
static REGISTRY: LazyLock<ComponentRegistry> = LazyLock::new(|| {
    let guest = std::env::var_os("DOMOS_GUEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/guest")));
    let threaded = guest.join("wasm32-wasip1-threads/guest");
    let mut registry = ComponentRegistry::default();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&threaded)
        .map(|dir| dir.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "wasm")) {
        let single = guest.join("wasm32-unknown-unknown/guest").join(path.file_name().expect("a file"));
        let (Ok(threaded), Ok(single)) = (std::fs::read(path), std::fs::read(&single)) else {
            continue;
        };
        registry.add_pair(&path.display().to_string(), &threaded, &single).expect("the built components load");
    }
    eprintln!("loader_config: {} components from {}", registry.names().count(), guest.display());
    registry
});

/// What every domain the loader accepts keeps to.
fn check_domain(domain: &DomainConfig) {
    let limits = domain.limits();
    let name = &domain.name;
    assert!(!name.is_empty());
    assert!(!domain.components.is_empty(), "domain {name} has no components");
    assert!(limits.heap <= MAX_HEAP, "domain {name}: heap {}", limits.heap);
    assert!((64..=16 << 20).contains(&limits.max_message), "domain {name}: max_message {}", limits.max_message);
    assert!(
        (4096..=16 << 20).contains(&limits.stack) && limits.stack % 16 == 0,
        "domain {name}: stack {}",
        limits.stack
    );
    assert!((1..=MAX_THREADS).contains(&limits.threads), "domain {name}: threads {}", limits.threads);
    assert!(
        (1..=MAX_SERVICE_THREADS).contains(&limits.service_threads),
        "domain {name}: service_threads {}",
        limits.service_threads
    );
    assert!((1..=1_000_000).contains(&limits.cpu_share), "domain {name}: cpu_share {}", limits.cpu_share);
    let code = domain.code();
    assert_eq!(code.translator, domain.translator);
    if code.translator == Translator::Pulley {
        assert_eq!(code.bounds, BoundsChecks::Explicit, "domain {name}: pulley checks bounds explicitly");
        let share = limits.heap / domain.components.len() as u64;
        assert!(share <= u64::from(u32::MAX), "domain {name}: an interpreted heap of {share} B per component");
    }
    if let SchedulerChoice::Component(scheduler) = &domain.scheduler {
        assert_ne!(scheduler.slice_ms, Some(0), "domain {name}: a scheduler slice of 0 ms");
    }
}

fn check_system(config: &SystemConfig) {
    assert!(!config.domains.is_empty());
    assert!(config.system.init_timeout_ms >= 1);
    let mut names = BTreeSet::new();
    for domain in &config.domains {
        check_domain(domain);
        assert!(names.insert(domain.name.as_str()), "domain {} twice", domain.name);
    }
    let mut devices = BTreeSet::new();
    for device in &config.devices {
        assert!((1..=domos_abi::MAX_MEMORY_OBJECT).contains(&device.size.0), "device {}", device.name);
        assert!(devices.insert(device.name.as_str()), "device {} twice", device.name);
    }
    for disk in &config.disks {
        match (&disk.image, disk.size) {
            (Some(_), None) => {}
            (None, Some(size)) => assert!((512..=4 << 30).contains(&size.0), "disk {}", disk.name),
            _ => panic!("disk {}: an image and a size, or neither", disk.name),
        }
        assert!(devices.insert(disk.name.as_str()), "device {} twice", disk.name);
    }
}

fn check_boot_order(config: &SystemConfig, registry: &ComponentRegistry) {
    let Ok(order) = boot_order(config, registry) else {
        return;
    };
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..config.domains.len()).collect::<Vec<_>>(), "not a permutation: {order:?}");
    if let SchedulerChoice::Component(global) = &config.system.scheduler {
        assert_eq!(registry.get(&global.component).expect("a known scheduler").kind, Kind::GlobalScheduler);
    }
    let mut booted = Vec::new();
    for &d in &order {
        let domain = &config.domains[d];
        if let SchedulerChoice::Component(local) = &domain.scheduler {
            assert_eq!(registry.get(&local.component).expect("a known scheduler").kind, Kind::LocalScheduler);
        }
        booted.push(d);
        for c in &domain.components {
            let component = registry.get(&c.name).expect("boot_order knows every component");
            for wanted in &component.manifest.requires {
                let provided = booted.iter().flat_map(|&e| &config.domains[e].components).any(|p| {
                    registry.get(&p.name).is_some_and(|p| p.manifest.provides.iter().any(|p| p.satisfies(wanted)))
                });
                assert!(
                    provided,
                    "domain {} boots at {} of {order:?}, but no domain booted so far provides {wanted}, which its {} requires",
                    domain.name,
                    booted.len() - 1,
                    c.name
                );
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(config) = SystemConfig::parse(text) {
        check_system(&config);
        check_boot_order(&config, &REGISTRY);
    }
    if let Ok(domain) = DomainConfig::parse(text)
        && domain.validate().is_ok()
    {
        check_domain(&domain);
    }
});
