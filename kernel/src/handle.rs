//! Handle tables: a domain's capabilities.
//!
//! A handle is an index into its domain's table plus a generation, so a guessed, forged or
//! stale handle (one whose slot was freed and reused) is recognised and refused. Handles are
//! positive `i32`s: `generation << 16 | (slot + 1)`.

use std::sync::Arc;

use domos_abi::HostError;

use crate::domain::Domain;
use crate::portal::Service;

/// Most handles a domain may hold at once.
pub const MAX_HANDLES: usize = 0xffff;

/// A kernel object a handle can name.
#[derive(Clone)]
pub enum KernelObject {
    /// A portal to a service.
    Portal(Arc<Service>),
    /// A domain (for domain management).
    Domain(Arc<Domain>),
    /// A memory object.
    Memory(crate::memory::MemoryObject),
    /// An atomic variable threads can block on.
    Atomic(Arc<crate::atomic::AtomicVariable>),
    /// An emulated disk, for its driver.
    Disk(Arc<crate::disk::Disk>),
}

struct Slot {
    generation: u16,
    object: Option<KernelObject>,
}

/// One domain's capabilities.
#[derive(Default)]
pub struct HandleTable {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

impl HandleTable {
    /// Stores `object`; returns its new handle.
    ///
    /// # Errors
    /// `QuotaExceeded` when the table is full.
    pub fn insert(&mut self, object: KernelObject) -> Result<u32, HostError> {
        let index = match self.free.pop() {
            Some(index) => index,
            None if self.slots.len() < MAX_HANDLES => {
                self.slots.push(Slot { generation: 0, object: None });
                (self.slots.len() - 1) as u32
            }
            None => return Err(HostError::QuotaExceeded),
        };
        let slot = &mut self.slots[index as usize];
        slot.generation = (slot.generation + 1) & 0x7fff;
        slot.object = Some(object);
        Ok((u32::from(slot.generation) << 16) | (index + 1))
    }

    fn slot(&self, handle: u32) -> Option<(usize, &KernelObject)> {
        let index = (handle & 0xffff).checked_sub(1)? as usize;
        let slot = self.slots.get(index)?;
        if u32::from(slot.generation) != handle >> 16 {
            return None;
        }
        Some((index, slot.object.as_ref()?))
    }

    /// The object behind `handle`.
    ///
    /// # Errors
    /// `InvalidHandle` when the handle was not issued by this table or was dropped.
    pub fn get(&self, handle: u32) -> Result<&KernelObject, HostError> {
        self.slot(handle).map(|(_, object)| object).ok_or(HostError::InvalidHandle)
    }

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
    pub fn memory(&self, handle: u32) -> Result<&crate::memory::MemoryObject, HostError> {
        match self.get(handle)? {
            KernelObject::Memory(memory) => Ok(memory),
            _ => Err(HostError::InvalidHandle),
        }
    }

    /// The atomic variable behind a handle.
    ///
    /// # Errors
    /// `InvalidHandle` for a bad handle or one that names no atomic variable.
    pub fn atomic(&self, handle: u32) -> Result<&Arc<crate::atomic::AtomicVariable>, HostError> {
        match self.get(handle)? {
            KernelObject::Atomic(variable) => Ok(variable),
            _ => Err(HostError::InvalidHandle),
        }
    }

    /// Removes `handle`; returns its object so the caller can drop it outside any lock.
    ///
    /// # Errors
    /// `InvalidHandle` for a bad handle.
    pub fn remove(&mut self, handle: u32) -> Result<KernelObject, HostError> {
        let (index, _) = self.slot(handle).ok_or(HostError::InvalidHandle)?;
        let object = self.slots[index].object.take().ok_or(HostError::InvalidHandle)?;
        self.free.push(index as u32);
        Ok(object)
    }

    /// Whether one more handle fits.
    pub fn has_room(&self) -> bool {
        !self.free.is_empty() || self.slots.len() < MAX_HANDLES
    }

    /// Number of live handles.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Empties the table; returns the objects so they are dropped outside any lock.
    pub fn take_all(&mut self) -> Vec<KernelObject> {
        self.free.clear();
        self.slots.drain(..).filter_map(|s| s.object).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::DomainLimits;
    use domos_loader::codegen::CodeGen;

    fn object() -> KernelObject {
        KernelObject::Domain(Arc::new(Domain::new(
            1,
            "D".into(),
            DomainLimits::default(),
            CodeGen::default(),
            crate::sched::LocalScheduler::default(),
            Vec::new(),
            std::sync::Weak::new(),
        )))
    }

    #[test]
    fn forged_and_stale_handles_are_refused() {
        let mut table = HandleTable::default();
        let first = table.insert(object()).unwrap();
        assert!(table.get(first).is_ok());
        for forged in [0, first + 1, first ^ (1 << 16), 0xdead_beef, u32::MAX] {
            assert!(matches!(table.get(forged), Err(HostError::InvalidHandle)), "{forged:#x}");
        }
        table.remove(first).unwrap();
        let second = table.insert(object()).unwrap();
        assert_eq!(second & 0xffff, first & 0xffff, "the slot is reused");
        assert!(table.get(first).is_err(), "but the stale handle stays invalid");
        assert!(matches!(table.portal(second), Err(HostError::InvalidHandle)), "a domain handle is no portal");
        assert_eq!(table.len(), 1);
    }
}
