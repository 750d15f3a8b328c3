//! The runtime: creating domains and their instances, starting their threads, child domains,
//! schedulers, booting a whole system, and the reports of what ran. It uses the portal layer for
//! memory faults and the domain layer for everything else; the host calls sit on top of it.

pub mod boot;
pub mod children;
pub mod create;
pub mod report;
pub mod scheduler_component;
pub mod schedulers;
pub mod thread;

pub use boot::BootOutcome;
pub use report::DomainReport;
pub use schedulers::GLOBAL_SCHEDULER_DOMAIN;

/// Which entry point a thread runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Entry {
    Init,
    /// `init`, then `main` when `init` succeeds (domains created by a running domain).
    InitThenMain,
    Main,
    Spawned(u32),
    /// The handler thread of interrupt source `n` of the domain: runs `domos_interrupt` once per
    /// batch of events until the source is closed.
    Interrupt(u32),
}

impl Entry {
    /// The export a thread of a component with `entries` starts in: its own entry point, or
    /// the module's shared thread start; `None` for the `main` of a component without one.
    fn export(self, entries: &domos_loader::component::Entries) -> Option<&str> {
        match self {
            Entry::Init | Entry::InitThenMain => Some(&entries.init),
            Entry::Main => entries.main.as_deref(),
            Entry::Spawned(_) => Some(&entries.thread_entry),
            Entry::Interrupt(_) => Some(&entries.interrupt),
        }
    }
}
