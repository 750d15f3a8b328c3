//! What a domain's handles name: the kernel objects a capability can be.

use std::sync::Arc;

use domos_abi::HostError;

use super::{Domain, Service};
use crate::object::atomic::AtomicVariable;
use crate::object::disk::Disk;
use crate::object::handle::HandleTable;
use crate::object::memory::MemoryObject;

/// A kernel object a handle can name.
#[derive(Clone)]
pub enum KernelObject {
    /// A portal to a service.
    Portal(Arc<Service>),
    /// A domain (for domain management).
    Domain(Arc<Domain>),
    /// A memory object.
    Memory(MemoryObject),
    /// An atomic variable threads can block on.
    Atomic(Arc<AtomicVariable>),
    /// An emulated disk, for its driver.
    Disk(Arc<Disk>),
    /// An emulated network card, for its driver.
    Nic(Arc<crate::object::nic::Nic>),
    /// A mounted FUSE connection, for its driver.
    Fuse(Arc<crate::object::fuse::Fuse>),
}

impl KernelObject {
    /// What it is: `portal`, `domain`, `memory`, `atomic`, `disk`, `nic` or `fuse`.
    pub fn kind(&self) -> &'static str {
        match self {
            KernelObject::Portal(_) => "portal",
            KernelObject::Domain(_) => "domain",
            KernelObject::Memory(_) => "memory",
            KernelObject::Atomic(_) => "atomic",
            KernelObject::Disk(_) => "disk",
            KernelObject::Nic(_) => "nic",
            KernelObject::Fuse(_) => "fuse",
        }
    }
}

/// Typed look-ups in a domain's handle table: a handle of another kind is `InvalidHandle`.
impl HandleTable<KernelObject> {
    /// The service behind a portal handle.
    ///
    /// # Errors
    /// `InvalidHandle` for a bad handle or one that names no portal.
    pub fn portal(&self, handle: u32) -> Result<&Arc<Service>, HostError> {
        match self.get(handle)? {
            KernelObject::Portal(service) => Ok(service),
            _ => Err(HostError::InvalidHandle),
        }
    }

    /// The memory object behind a handle.
    ///
    /// # Errors
    /// `InvalidHandle` for a bad handle or one that names no memory object.
    pub fn memory(&self, handle: u32) -> Result<&MemoryObject, HostError> {
        match self.get(handle)? {
            KernelObject::Memory(memory) => Ok(memory),
            _ => Err(HostError::InvalidHandle),
        }
    }

    /// The atomic variable behind a handle.
    ///
    /// # Errors
    /// `InvalidHandle` for a bad handle or one that names no atomic variable.
    pub fn atomic(&self, handle: u32) -> Result<&Arc<AtomicVariable>, HostError> {
        match self.get(handle)? {
            KernelObject::Atomic(variable) => Ok(variable),
            _ => Err(HostError::InvalidHandle),
        }
    }

    /// The emulated disk behind a handle.
    ///
    /// # Errors
    /// `InvalidHandle` for a bad handle or one that names no disk.
    pub fn disk(&self, handle: u32) -> Result<&Arc<Disk>, HostError> {
        match self.get(handle)? {
            KernelObject::Disk(disk) => Ok(disk),
            _ => Err(HostError::InvalidHandle),
        }
    }

    /// The domain behind a handle.
    ///
    /// # Errors
    /// `InvalidHandle` for a bad handle or one that names no domain.
    pub fn domain(&self, handle: u32) -> Result<&Arc<Domain>, HostError> {
        match self.get(handle)? {
            KernelObject::Domain(domain) => Ok(domain),
            _ => Err(HostError::InvalidHandle),
        }
    }
}
