//! Terminating a domain: its names, services, handles, threads and memory are released at once,
//! its children end with it, and every thread waiting on it wakes with an error.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Domain;
use super::system::Kernel;
use crate::sched::{LocalScheduler, Thread};

impl Kernel {
    /// Ends `domain`: its names, services, handles, threads and memory are released at once;
    /// callers blocked on it get errors. Safe to call more than once.
    pub fn terminate(&self, domain: &Arc<Domain>, reason: String) {
        if !domain.mark_terminated(reason.clone()) {
            return;
        }
        self.console.line("kernel", &format!("domain {} terminated: {reason}", domain.name));
        self.forget_ended_domains();
        let children = std::mem::take(&mut *crate::lock(&domain.children));
        for child in &children {
            self.terminate(child, format!("its parent {} ended", domain.name));
        }
        if let Some(parent) = domain.parent.upgrade() {
            parent.quota().uncharge(domain.carved.swap(0, Ordering::AcqRel));
            parent.scheduling.return_tickets(domain.limits.cpu_share);
            crate::lock(&parent.children).retain(|c| c.id != domain.id);
        }
        drop(crate::lock(&domain.fault_handler).take());
        drop(self.scheduler.replace_local(&domain.scheduling, None, LocalScheduler::default()));
        drop(std::mem::take(&mut *crate::lock(&domain.private_names)));
        drop(self.names.remove_domain(domain.id));
        let handles = domain.handles().take_all();
        drop(handles);
        for instance in domain.take_instances() {
            instance.shut_down();
        }
        domain.scheduling.threads().iter().for_each(Thread::wake_up);
        domain.wake_waiting_callers();
        std::mem::take(&mut *domain.interrupts()).iter().for_each(|source| source.close());
        domain.scheduling.wake_ended_waiters();
    }

    /// `Ok(())` while `domain` runs; a trap once it has been terminated.
    pub(crate) fn check_alive(&self, domain: &Domain) -> wasmtime::Result<()> {
        if domain.is_terminated() { Err(wasmtime::format_err!("domain terminated")) } else { Ok(()) }
    }
}
