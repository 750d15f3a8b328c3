//! DomainZero's name service: portals published under names.
//!
//! A registration holds a reference to the service, so a published service lives until it is
//! unregistered or its domain ends.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use domos_abi::HostError;

use super::{Domain, Service};

/// Most bytes in a name.
pub const MAX_NAME: usize = 256;

/// The system's names.
#[derive(Default)]
pub struct NameService {
    names: Mutex<BTreeMap<String, Arc<Service>>>,
}

impl NameService {
    /// Publishes `service` under `name`.
    ///
    /// # Errors
    /// `NameTaken` when a live service holds the name.
    pub fn register(&self, name: String, service: Arc<Service>) -> Result<(), HostError> {
        let mut names = crate::lock(&self.names);
        if names.get(&name).is_some_and(|s| s.is_alive()) {
            return Err(HostError::NameTaken);
        }
        names.insert(name, service);
        Ok(())
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
        let mut names = domain.private_names();
        if names.get(&name).is_some_and(|s| s.is_alive()) {
            return Err(HostError::NameTaken);
        }
        names.insert(name, service);
        Ok(())
    }
}
