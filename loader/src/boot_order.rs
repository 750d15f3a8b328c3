//! Boot order: the domains of a configuration sorted so that the providers of an interface
//! boot before the components that require it.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::codegen::Translator;
use crate::component::{Component, ComponentRegistry};
use crate::config::{SchedulerChoice, SystemConfig};
use crate::verifier::Kind;

/// Checks that the component files of the configuration were loaded, that the schedulers a
/// system names are scheduler components of the right level, that every component of an
/// interpreted domain has a single-threaded build, and that its components form an acyclic
/// dependency graph in which every required interface is provided; returns the domains in boot
/// order (providers first).
///
/// # Errors
/// A component file not loaded, an unknown or unfit scheduler, a component an interpreted domain
/// cannot run, the missing or incompatible interface with who needs it, or the cycle.
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
    // Depth-first topological sort that reports a cycle by name.
    let mut state = vec![0u8; owner.len()];
    let mut order = Vec::new();
    fn visit(
        i: usize,
        edges: &[Vec<usize>],
        state: &mut [u8],
        order: &mut Vec<usize>,
        path: &mut Vec<usize>,
    ) -> Result<(), Vec<usize>> {
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
            visit(j, edges, state, order, path)?;
        }
        path.pop();
        state[i] = 2;
        order.push(i);
        Ok(())
    }
    for i in 0..owner.len() {
        visit(i, &edges, &mut state, &mut order, &mut Vec::new()).map_err(|cycle| {
            let names: Vec<&str> = cycle.iter().map(|&c| owner[c].1.manifest.name.as_str()).collect();
            format!("dependency cycle: {}", names.join(" -> "))
        })?;
    }
    let mut domains = Vec::new();
    for i in order {
        if !domains.contains(&owner[i].0) {
            domains.push(owner[i].0);
        }
    }
    Ok(domains)
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
