//! Child domains (Alta's nested processes): created paused by a running domain from one
//! `[[domain]]` table, with a heap limit and CPU tickets carved out of the parent's, and started
//! when the parent has handed them their names.

use std::sync::Arc;

use domos_abi::HostError;
use domos_loader::config::DomainConfig;

use super::Entry;
use crate::domain::system::Kernel;
use crate::domain::{Domain, Service};

impl Kernel {
    /// Creates a child of `parent`, paused, from one `[[domain]]` table given as TOML (the
    /// `domain_create` host call); `start_child` runs it. The child's heap limit and CPU tickets
    /// are carved out of the parent's and given back when the child ends; the child ends with
    /// its parent.
    ///
    /// # Errors
    /// A bad description, a parent whose quota cannot hold the child's limit, or anything
    /// `create_domain` refuses.
    pub fn create_child(
        self: &Arc<Self>,
        parent: &Arc<Domain>,
        text: &str,
        fault_handler: Option<Arc<Service>>,
    ) -> Result<Arc<Domain>, String> {
        let mut config = DomainConfig::parse(text)?;
        // A child that names no share gets half of its parent's.
        config.cpu_share.get_or_insert((parent.cpu_tickets() / 2).max(1));
        if let Some(grant) = config.grants.iter().find(|g| !parent.grants.contains(g)) {
            return Err(format!("domain {}: a child cannot be granted {grant:?}, which its parent lacks", parent.name));
        }
        if let Some(lacking) = beyond_parent(parent, &config) {
            return Err(format!("domain {}: a child cannot have {lacking}, which its parent lacks", parent.name));
        }
        let limit = config.limits().heap;
        let tickets = config.limits().cpu_share;
        if !parent.scheduling.take_tickets(tickets) {
            return Err(format!("domain {}: its CPU share cannot give a child {tickets} tickets", parent.name));
        }
        if parent.quota().charge(limit).is_err() {
            parent.scheduling.return_tickets(tickets);
            return Err(format!("domain {}: its quota cannot hold a child of {limit} B", parent.name));
        }
        let domain = match self.create_domain_under(Some(parent), &config) {
            Ok(domain) => domain,
            Err(e) => {
                parent.quota().uncharge(limit);
                parent.scheduling.return_tickets(tickets);
                return Err(e);
            }
        };
        parent.adopt(&domain, limit, fault_handler);
        if parent.is_terminated() {
            self.terminate(&domain, format!("its parent {} ended", parent.name));
            return Err(format!("domain {} ended", parent.name));
        }
        Ok(domain)
    }

    /// Starts a child made by `create_child`: each component runs `init`, then `main`.
    ///
    /// # Errors
    /// `InvalidArgument` when it was started already; the reason when a thread cannot start
    /// (the child is then terminated).
    pub fn start_child(self: &Arc<Self>, domain: &Arc<Domain>) -> Result<(), HostError> {
        if domain.is_terminated() {
            return Err(HostError::ServiceDead);
        }
        if !domain.mark_started() {
            return Err(HostError::InvalidArgument);
        }
        for (instance, part) in domain.parts() {
            if let Err(e) = self.spawn_thread(domain, &instance, part, Entry::InitThenMain) {
                let name = &instance.part(part).component.manifest.name;
                self.terminate(domain, format!("cannot start {name} init: {}", e.describe()));
                return Err(e);
            }
        }
        Ok(())
    }
}

/// The first trust setting or limit of `config` that `parent` does not have itself, for
/// people; `None` when the child asks for nothing its parent lacks. A child may be trusted less
/// and limited more than its parent, never the other way.
fn beyond_parent(parent: &Domain, config: &DomainConfig) -> Option<String> {
    let (mine, child) = (&parent.limits, config.limits());
    if mine.accounting && !child.accounting {
        return Some("accounting = false".into());
    }
    if parent.code.preemption && !config.code().preemption {
        return Some("preemption = false".into());
    }
    let limits = [
        ("threads", u64::from(child.threads), u64::from(mine.threads)),
        ("service_threads", u64::from(child.service_threads), u64::from(mine.service_threads)),
        ("max_message", u64::from(child.max_message), u64::from(mine.max_message)),
        ("stack", u64::from(child.stack), u64::from(mine.stack)),
    ];
    limits
        .into_iter()
        .find(|(_, wanted, own)| wanted > own)
        .map(|(key, wanted, own)| format!("{key} = {wanted} (its own is {own})"))
}
