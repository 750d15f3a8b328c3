//! Services: the objects of component instances that portals lead to.

use std::sync::{Arc, Weak};

use domos_abi::HostError;

use super::{ComponentInstance, Domain};

/// A service: an object of a component instance that other domains reach through portals.
///
/// It is deactivated when its last portal is dropped (the component is then told to release
/// the object) or when its domain ends.
pub struct Service {
    owner: Weak<ComponentInstance>,
    domain: Weak<Domain>,
    domain_id: u32,
    /// The object id inside the component instance.
    pub object: u32,
    /// The component of the instance that made the service, whose code its calls run.
    pub(crate) part: u32,
    /// The interface id the object implements.
    pub interface: u32,
}

impl Service {
    /// A service of `owner`'s `object`, made by component `part` of it, counted against what
    /// `owner` may have pending.
    ///
    /// # Errors
    /// `QuotaExceeded` (see [`ComponentInstance::admit_service`]).
    pub(crate) fn new(
        owner: &Arc<ComponentInstance>,
        part: u32,
        domain: &Arc<Domain>,
        object: u32,
        interface: u32,
    ) -> Result<Service, HostError> {
        owner.admit_service()?;
        Ok(Service {
            owner: Arc::downgrade(owner),
            domain: Arc::downgrade(domain),
            domain_id: domain.id,
            object,
            part,
            interface,
        })
    }

    /// Whether the service's domain is still running.
    pub fn is_alive(&self) -> bool {
        self.domain.upgrade().is_some_and(|d| !d.is_terminated())
    }

    /// The id of the service's domain.
    pub fn domain_id(&self) -> u32 {
        self.domain_id
    }

    /// Whether the service is an object of `instance`.
    pub(crate) fn is_owned_by(&self, instance: &Arc<ComponentInstance>) -> bool {
        std::ptr::eq(self.owner.as_ptr(), Arc::as_ptr(instance))
    }

    pub(crate) fn owner(&self) -> Option<(Arc<ComponentInstance>, Arc<Domain>)> {
        let domain = self.domain.upgrade().filter(|d| !d.is_terminated())?;
        Some((self.owner.upgrade()?, domain))
    }

    /// The component instance serving this service, while its domain runs (the hot path: one
    /// reference count, no domain look-up).
    pub(crate) fn live_owner(&self) -> Option<Arc<ComponentInstance>> {
        self.owner.upgrade().filter(|i| i.is_alive())
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.upgrade() {
            owner.queue_release(self.object);
        }
    }
}
