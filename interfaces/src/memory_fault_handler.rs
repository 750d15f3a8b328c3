//! `MemoryFaultHandler`: where a child domain's memory faults go.

use domos_sdk::{CallError, interface};

/// Decides a child domain's memory faults (Alta's memlimit sandbox).
#[interface(version = "1.0")]
pub trait MemoryFaultHandler {
    /// Child domain `child` (its kernel id) needs `short_by` more bytes than its limit. Returns
    /// the bytes granted from the parent's own quota (at least `short_by`), or 0 to let the child
    /// be terminated.
    fn out_of_memory(&self, child: u32, short_by: u64) -> Result<u64, CallError>;
}
