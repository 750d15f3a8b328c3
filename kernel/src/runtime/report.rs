//! Reports for people: one line per domain.

use std::fmt;
use std::sync::atomic::Ordering;

use crate::domain::Domain;

/// One domain's line of the boot summary.
pub struct DomainReport<'a>(&'a Domain);

impl<'a> DomainReport<'a> {
    /// The report of `domain`.
    pub fn of(domain: &'a Domain) -> Self {
        DomainReport(domain)
    }
}

impl fmt::Display for DomainReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        let components = d.component_names();
        let ms = |ns: u64| ns as f64 / 1e6;
        write!(
            f,
            "{:<10} {:<28} heap {:>6} KiB of {:>6} KiB  cpu {:>8.3} ms  calls served {:>7}  made {:>7}  threads {}  scheduler {}  {}",
            d.name,
            components.join(","),
            d.heap_used() / 1024,
            d.heap_limit() / 1024,
            ms(d.cpu_ns()),
            d.calls_served(),
            d.calls_made(),
            d.scheduling.threads_started.load(Ordering::Relaxed),
            d.scheduling.describe(),
            d.termination_reason().map_or_else(|| "running".to_string(), |r| format!("terminated: {r}")),
        )
    }
}
