//! Memory faults (Alta): a child domain over its quota asks its parent, through a portal call
//! to the handler the parent registered, for more memory. Every charge a guest causes comes
//! here.

use std::sync::Arc;

use domos_abi::HostError;

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
        let mut request = domain.id.to_le_bytes().to_vec();
        request.extend_from_slice(&short_by.to_le_bytes());
        let reply = super::kernel_call(self, &handler, domos_abi::fnv1a(b"out_of_memory"), &request);
        // The reply is the `Result<u64, CallError>` of `MemoryFaultHandler::out_of_memory`.
        let granted = match reply.as_deref() {
            Ok([0, rest @ ..]) if rest.len() == 8 => rest.iter().rev().fold(0u64, |acc, b| acc << 8 | u64::from(*b)),
            _ => 0,
        };
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
