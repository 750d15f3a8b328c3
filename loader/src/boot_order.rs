//! Boot order: the domains of a configuration sorted so that the providers of an interface
//! boot before the components that require it.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::codegen::Translator;
use crate::component::{Component, ComponentRegistry};
use crate::config::{SchedulerChoice, SystemConfig};
use crate::manifest::InterfaceVersion;
use crate::verifier::Kind;

/// Checks that the component files of the configuration were loaded, that the schedulers a
/// system names are scheduler components of the right level, that every component of an
/// interpreted domain has a single-threaded build and every component of a collocated one is in
/// the collocated build, and that its components form an acyclic
/// dependency graph in which every required interface is provided; returns the domains in boot
/// order (providers first: every component's requirements are provided in its own domain or in
/// one that boots before it).
///
/// # Errors
/// A component file not loaded, an unknown or unfit scheduler, a component an interpreted or a
/// collocated domain cannot run, the missing or incompatible interface with who needs it, or the cycle: of
/// components, or of domains that each hold a component requiring what the next provides.
pub fn boot_order(config: &SystemConfig, components: &ComponentRegistry) -> Result<Vec<usize>, String> {
    if let Some((domain, file)) = config.unloaded_file() {
        return Err(format!(
            "domain {domain}: component file {} is not loaded (`domos boot FILE` and `domos check FILE` load the \
             files a configuration names)",
            file.path
        ));
    }
    if let SchedulerChoice::Component(global) = &config.system.scheduler {
        crate::scheduler::find(components, &global.component, Kind::GlobalScheduler)?;
    }
    for domain in &config.domains {
        if let SchedulerChoice::Component(local) = &domain.scheduler {
            crate::scheduler::find(components, &local.component, Kind::LocalScheduler)
                .map_err(|e| format!("domain {}: {e}", domain.name))?;
        }
    }
    published_names(config, components)?;
    let mut owner: Vec<(usize, Arc<Component>)> = Vec::new();
    for (d, domain) in config.domains.iter().enumerate() {
        for c in &domain.components {
            let component = components.get(&c.name).ok_or_else(|| {
                let known: Vec<_> = components.names().collect();
                format!("domain {}: unknown component {} (known: {})", domain.name, c.name, known.join(", "))
            })?;
            if domain.translator == Translator::Pulley && !component.has_single_build() {
                return Err(format!(
                    "domain {}: component {} has no single-threaded build, which the pulley translator runs",
                    domain.name, c.name
                ));
            }
            if domain.collocate {
                components.collocated_for(&c.name).map_err(|e| format!("domain {}: {e}", domain.name))?;
            }
            owner.push((d, component.clone()));
        }
    }
    // Edges: component index -> the components providing what it requires.
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); owner.len()];
    for (i, (_, component)) in owner.iter().enumerate() {
        for wanted in &component.manifest.requires {
            let providers: Vec<usize> = (0..owner.len())
                .filter(|&j| owner[j].1.manifest.provides.iter().any(|p| p.satisfies(wanted)))
                .collect();
            if providers.is_empty() {
                let near: Vec<String> = owner
                    .iter()
                    .flat_map(|(_, c)| {
                        c.manifest
                            .provides
                            .iter()
                            .filter(|p| p.name == wanted.name)
                            .map(move |p| format!("{} provides {p}", c.manifest.name))
                    })
                    .collect();
                let hint =
                    if near.is_empty() { String::new() } else { format!(" (incompatible: {})", near.join(", ")) };
                return Err(format!(
                    "component {} requires {wanted}, which no component of this system provides{hint}",
                    component.manifest.name
                ));
            }
            edges[i].extend(providers.into_iter().filter(|&j| j != i));
        }
    }
    // Depth-first search that reports a cycle of components by name.
    let mut state = vec![0u8; owner.len()];
    fn visit(i: usize, edges: &[Vec<usize>], state: &mut [u8], path: &mut Vec<usize>) -> Result<(), Vec<usize>> {
        match state[i] {
            2 => return Ok(()),
            1 => {
                let start = path.iter().position(|&p| p == i).unwrap_or(0);
                let mut cycle = path[start..].to_vec();
                cycle.push(i);
                return Err(cycle);
            }
            _ => {}
        }
        state[i] = 1;
        path.push(i);
        for &j in &edges[i] {
            visit(j, edges, state, path)?;
        }
        path.pop();
        state[i] = 2;
        Ok(())
    }
    for i in 0..owner.len() {
        visit(i, &edges, &mut state, &mut Vec::new()).map_err(|cycle| {
            let names: Vec<&str> = cycle.iter().map(|&c| owner[c].1.manifest.name.as_str()).collect();
            format!("dependency cycle: {}", names.join(" -> "))
        })?;
    }
    domain_order(config, &owner)
}

/// The domains in an order in which what each component requires is provided by a component of
/// its own domain or of a domain that boots before it; among the domains that can boot next, the
/// first in the configuration does. The kernel runs all of a domain's `init`s before the next
/// domain's, so ordering the components is not enough: a domain whose first component needs
/// nothing may hold another that needs a domain listed after it.
///
/// # Errors
/// Domains that need each other (each holds a component that requires what only the other
/// provides), named with who requires what.
fn domain_order(config: &SystemConfig, owner: &[(usize, Arc<Component>)]) -> Result<Vec<usize>, String> {
    let count = config.domains.len();
    let provides = |d: usize, wanted: &InterfaceVersion| {
        owner.iter().any(|(o, c)| *o == d && c.manifest.provides.iter().any(|p| p.satisfies(wanted)))
    };
    // Each domain's requirements that it does not provide itself, with the component requiring each.
    let needs: Vec<Vec<(&str, &InterfaceVersion)>> = (0..count)
        .map(|d| {
            owner
                .iter()
                .filter(|(o, _)| *o == d)
                .flat_map(|(_, c)| c.manifest.requires.iter().map(|wanted| (c.manifest.name.as_str(), wanted)))
                .filter(|(_, wanted)| !provides(d, wanted))
                .collect()
        })
        .collect();
    let mut booted = vec![false; count];
    let mut order = Vec::with_capacity(count);
    while order.len() < count {
        // What domain `d` still waits for: a requirement no booted domain provides, and a domain
        // that provides it.
        let waits_for = |d: usize| {
            needs[d]
                .iter()
                .find(|(_, wanted)| !(0..count).any(|e| booted[e] && provides(e, wanted)))
                .map(|&(component, wanted)| (component, wanted, (0..count).find(|&e| e != d && provides(e, wanted))))
        };
        match (0..count).find(|&d| !booted[d] && waits_for(d).is_none()) {
            Some(d) => {
                booted[d] = true;
                order.push(d);
            }
            None => {
                // Every domain left waits for another one left: follow the waits round a cycle.
                let mut path: Vec<(usize, String)> = Vec::new();
                let mut d = (0..count).find(|&d| !booted[d]).unwrap_or(0);
                while !path.iter().any(|(p, _)| *p == d) {
                    let Some((component, wanted, Some(next))) = waits_for(d) else {
                        break;
                    };
                    path.push((d, format!("{} ({component} requires {wanted})", config.domains[d].name)));
                    d = next;
                }
                let start = path.iter().position(|(p, _)| *p == d).unwrap_or(0);
                let mut cycle: Vec<&str> = path[start..].iter().map(|(_, step)| step.as_str()).collect();
                cycle.push(&config.domains[d].name);
                return Err(format!(
                    "dependency cycle between domains, whose components boot together: {}",
                    cycle.join(" -> ")
                ));
            }
        }
    }
    Ok(order)
}

/// The names by which a configuration's components find the services they require, each with
/// the one component that publishes it, as `(domain index, component index)`: a component
/// requiring interface `I` looks up `I`'s name as its `bind` translates it; a component providing
/// `I` publishes it under `I`'s name as its `register` translates it. The kernel reserves these
/// names for their publishers, so no other component can take one first (`name_register`).
///
/// # Errors
/// A name that two components publish for a requirement: the requirer would get whichever
/// registered first. The message names both and how to wire them apart.
pub fn published_names(
    config: &SystemConfig,
    components: &ComponentRegistry,
) -> Result<BTreeMap<String, (usize, usize)>, String> {
    let translated =
        |table: &BTreeMap<String, String>, name: &str| table.get(name).cloned().unwrap_or(name.to_string());
    let placed = || {
        config.domains.iter().enumerate().flat_map(|(d, domain)| {
            domain
                .components
                .iter()
                .enumerate()
                .filter_map(move |(c, spec)| components.get(&spec.name).map(|component| (d, c, spec, component)))
        })
    };
    let mut published = BTreeMap::new();
    for (_, _, requirer, component) in placed() {
        for wanted in &component.manifest.requires {
            let name = translated(&requirer.bind, &wanted.name);
            let publishers: Vec<_> = placed()
                .filter(|(_, _, spec, provider)| {
                    provider
                        .manifest
                        .provides
                        .iter()
                        .any(|p| p.satisfies(wanted) && translated(&spec.register, &p.name) == name)
                })
                .collect();
            match publishers[..] {
                [(d, c, ..)] => {
                    published.insert(name, (d, c));
                }
                [(d1, _, first, _), (d2, _, second, _), ..] => {
                    return Err(format!(
                        "component {} requires {wanted} under the name {name}, which both {} (domain {}) and {} (domain {}) \
                         publish; give one of them another name with register = {{ {} = \"...\" }}",
                        requirer.name,
                        first.name,
                        config.domains[d1].name,
                        second.name,
                        config.domains[d2].name,
                        wanted.name
                    ));
                }
                [] => {}
            }
        }
    }
    Ok(published)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registry of minimal components: (name, provides, requires).
    fn registry(components: &[(&str, &str, &str)]) -> ComponentRegistry {
        let mut registry = ComponentRegistry::default();
        for (name, provides, requires) in components {
            let manifest =
                format!("name = \"{name}\"\nversion = \"1\"\nprovides = [{provides}]\nrequires = [{requires}]")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
            let module = wat::parse_str(format!(
                r#"(module
                  (import "env" "memory" (memory 1 65536 shared))
                  (global (export "__stack_pointer") (mut i32) (i32.const 65536))
                  (func (export "domos_init") (result i32) i32.const 0)
                  (func (export "domos_thread_entry") (param i32) (result i32) i32.const 0)
                  (func (export "domos_dispatch") (param i32 i32 i32 i32 i32) (result i32) i32.const 0)
                  (func (export "domos_release") (param i32))
                  (@custom "domos:manifest" "{manifest}"))"#
            ))
            .unwrap();
            registry.add(name, &module).unwrap();
        }
        registry
    }

    /// A configuration of one domain per list, named A, B, …
    fn config(domains: &[&[&str]]) -> SystemConfig {
        let mut text = String::new();
        for (d, components) in domains.iter().enumerate() {
            text.push_str(&format!("[[domain]]\nname = \"{}\"\n", char::from(b'A' + d as u8)));
            for c in *components {
                text.push_str(&format!("[[domain.component]]\nname = \"{c}\"\n"));
            }
        }
        SystemConfig::parse(&text).unwrap()
    }

    /// Found in writing the `loader_config` fuzz target's check of the order: a domain's place
    /// was that of its first component, so A, whose `app` needs B's `lib`, booted first because
    /// its `tool` needs nothing (and `domos check` passed a system whose `init`s then failed).
    #[test]
    fn a_collocated_domain_runs_only_components_of_the_collocated_build() {
        let registry = registry(&[("a", "", ""), ("b", "", "")]);
        let mut collocated = config(&[&["a", "b"]]);
        collocated.domains[0].collocate = true;
        let err = boot_order(&collocated, &registry).unwrap_err();
        assert_eq!(
            err,
            "domain A: component a is not in the collocated build, which links the components built into domos \
             from components/ (collocate = false runs it on its own)"
        );
        let mut broken = registry.clone();
        broken.add_collocated("junk", b"\0asm");
        let err = boot_order(&collocated, &broken).unwrap_err();
        assert!(err.starts_with("domain A: collocated build junk: "), "{err}");
        assert_eq!(boot_order(&config(&[&["a", "b"]]), &broken), Ok(vec![0]), "only collocated domains need it");
    }

    #[test]
    fn a_domain_boots_after_what_any_of_its_components_needs() {
        let components = registry(&[("tool", "", ""), ("app", "", "\"L@1.0\""), ("lib", "\"L@1.0\"", "")]);
        assert_eq!(boot_order(&config(&[&["tool", "app"], &["lib"]]), &components), Ok(vec![1, 0]));
        // What a domain provides itself it need not wait for; otherwise the configuration's order.
        assert_eq!(boot_order(&config(&[&["app", "lib"], &["tool"]]), &components), Ok(vec![0, 1]));
        assert_eq!(boot_order(&config(&[&["tool"], &["lib"], &["app"]]), &components), Ok(vec![0, 1, 2]));
    }

    /// Domains that need each other cannot boot one after the other, though their components
    /// could: the disk driver's domain holds the file system, which needs the cache, which needs
    /// the driver.
    #[test]
    fn domains_that_need_each_other_are_named() {
        let components = registry(&[
            ("drv", "\"BlockIO@1.0\"", ""),
            ("cache", "\"Cache@1.0\"", "\"BlockIO@1.0\""),
            ("fs", "", "\"Cache@1.0\""),
        ]);
        let error = boot_order(&config(&[&["drv", "fs"], &["cache"]]), &components).unwrap_err();
        assert_eq!(
            error,
            "dependency cycle between domains, whose components boot together: A (fs requires Cache@1.0) -> B (cache \
             requires BlockIO@1.0) -> A"
        );
        assert_eq!(boot_order(&config(&[&["fs"], &["drv"], &["cache"]]), &components), Ok(vec![1, 2, 0]));
    }
}
