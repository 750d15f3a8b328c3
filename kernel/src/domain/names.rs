//! DomainZero's name service: portals published under names.
//!
//! A registration holds a reference to the service, so a published service lives until it is
//! unregistered or its domain ends.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use domos_abi::HostError;

use super::{ComponentInstance, Domain, Service};

/// Most bytes in a name.
pub const MAX_NAME: usize = 256;

/// Most names one domain may publish (in the system's names, or in a child's own): the kernel
/// memory a domain's names take is bounded by this times `MAX_NAME`.
pub const MAX_NAMES_PER_DOMAIN: usize = 256;

/// The system's names.
#[derive(Default)]
pub struct NameService {
    names: Mutex<BTreeMap<String, Arc<Service>>>,
    /// Names the configuration assigned: each to the component (its domain's id and its name)
    /// that publishes it for the components that require it (`domos_loader::published_names`).
    reserved: Mutex<BTreeMap<String, (u32, String)>>,
}

impl NameService {
    /// Reserves `name` for services of component `component` in domain `domain`: no other
    /// component can publish under it, before or after.
    pub(crate) fn reserve(&self, name: String, domain: u32, component: String) {
        crate::lock(&self.reserved).insert(name, (domain, component));
    }

    /// Publishes `service` under `name`.
    ///
    /// # Errors
    /// `NotPermitted` when the configuration reserved the name for another component;
    /// `NameTaken` when a live service holds the name; `QuotaExceeded` when the service's domain
    /// publishes `MAX_NAMES_PER_DOMAIN` names already.
    pub fn register(&self, name: String, service: Arc<Service>) -> Result<(), HostError> {
        if let Some((domain, component)) = crate::lock(&self.reserved).get(&name) {
            let publisher = service.owner().map(|(instance, _)| instance);
            let made_by =
                |instance: &Arc<ComponentInstance>| instance.part(service.part).component.manifest.name == *component;
            if service.domain_id() != *domain || !publisher.is_some_and(|i| made_by(&i)) {
                return Err(HostError::NotPermitted);
            }
        }
        let mut names = crate::lock(&self.names);
        insert(&mut names, name, service)
    }

    /// The service published under `name`.
    ///
    /// # Errors
    /// `NotFound`, or `ServiceDead` when its domain has ended.
    pub fn lookup(&self, name: &str) -> Result<Arc<Service>, HostError> {
        let service = crate::lock(&self.names).get(name).cloned().ok_or(HostError::NotFound)?;
        if !service.is_alive() {
            return Err(HostError::ServiceDead);
        }
        Ok(service)
    }

    /// Removes the names of the domain `domain`; returns the services for dropping outside the lock.
    pub fn remove_domain(&self, domain: u32) -> Vec<Arc<Service>> {
        let mut names = crate::lock(&self.names);
        let gone: Vec<String> = names.iter().filter(|(_, s)| s.domain_id() == domain).map(|(n, _)| n.clone()).collect();
        gone.iter().filter_map(|n| names.remove(n)).collect()
    }

    /// Removes every name (at shutdown); returns the services for dropping outside the lock.
    pub fn remove_all(&self) -> Vec<Arc<Service>> {
        std::mem::take(&mut *crate::lock(&self.names)).into_values().collect()
    }

    /// Resolves `name` for `domain`: a child sees only the names its parent handed down (and
    /// its own); a domain of the boot configuration sees the system's names.
    ///
    /// # Errors
    /// `NotFound`, or `ServiceDead` when the service's domain has ended.
    pub(crate) fn lookup_for(&self, domain: &Domain, name: &str) -> Result<Arc<Service>, HostError> {
        if !domain.is_child() {
            return self.lookup(name);
        }
        let service = domain.private_names().get(name).cloned().ok_or(HostError::NotFound)?;
        if !service.is_alive() {
            return Err(HostError::ServiceDead);
        }
        Ok(service)
    }

    /// Publishes `service` under `name` for `domain`: in the system's names, or a child's own.
    ///
    /// # Errors
    /// `NameTaken`.
    pub(crate) fn register_for(&self, domain: &Domain, name: String, service: Arc<Service>) -> Result<(), HostError> {
        if !domain.is_child() {
            return self.register(name, service);
        }
        insert(&mut domain.private_names(), name, service)
    }
}

/// Publishes `service` under `name` in `names`, unless a live service holds the name or the
/// service's domain has published `MAX_NAMES_PER_DOMAIN` names there.
fn insert(names: &mut BTreeMap<String, Arc<Service>>, name: String, service: Arc<Service>) -> Result<(), HostError> {
    if names.get(&name).is_some_and(|s| s.is_alive()) {
        return Err(HostError::NameTaken);
    }
    let published = names.values().filter(|s| s.domain_id() == service.domain_id()).count();
    if published >= MAX_NAMES_PER_DOMAIN && !names.contains_key(&name) {
        return Err(HostError::QuotaExceeded);
    }
    names.insert(name, service);
    Ok(())
}
