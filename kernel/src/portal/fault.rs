//! Memory faults (Alta): a child domain over its quota asks its parent, through a portal call
//! to the handler the parent registered, for more memory. Every charge a guest causes comes
//! here.

use std::sync::Arc;

use domos_abi::{HostError, memory_fault};

use crate::domain::Domain;
use crate::domain::system::Kernel;

impl Kernel {
    /// Charges `bytes` to `domain`'s quota; a child over its limit takes a memory fault to its
    /// parent first. Every charge a guest causes (heap, thread regions, memory objects) comes here.
    ///
    /// # Errors
    /// `QuotaExceeded` when the quota does not allow it and no parent granted more.
    pub(crate) fn charge(self: &Arc<Self>, domain: &Arc<Domain>, bytes: u64) -> Result<(), HostError> {
        if domain.quota().charge(bytes).is_ok() {
            return Ok(());
        }
        let short_by = (domain.heap_used() + bytes).saturating_sub(domain.heap_limit());
        if short_by > 0 && self.memory_fault(domain, short_by) {
            domain.quota().charge(bytes)
        } else {
            Err(HostError::QuotaExceeded)
        }
    }

    /// A memory fault of `domain`, short of `short_by` bytes of quota: asks the fault handler
    /// its parent registered. The parent grants bytes from its own quota (the child's limit
    /// rises) or refuses, which ends the child. Returns whether the child may retry.
    pub(crate) fn memory_fault(self: &Arc<Self>, domain: &Arc<Domain>, short_by: u64) -> bool {
        let (Some(handler), Some(parent)) = (domain.fault_handler(), domain.parent()) else { return false };
        let request = memory_fault::request(domain.id, short_by);
        let granted = super::kernel_call(self, &handler, memory_fault::OUT_OF_MEMORY, &request)
            .map_or(0, |r| memory_fault::granted(&r));
        if granted >= short_by && parent.quota().charge(granted).is_ok() {
            domain.grant(granted);
            return true;
        }
        self.terminate(
            domain,
            format!("memory fault: {short_by} B over its limit, and its parent {} did not grant them", parent.name),
        );
        false
    }
}
