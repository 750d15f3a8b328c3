//! Schedulers as a configuration names them: the kernel's built-in policies, and the checks a
//! scheduler component passes before it is installed (decision 0006).

use std::sync::Arc;

use crate::component::{Component, ComponentRegistry};
use crate::verifier::Kind;

/// How the global scheduler picks the domain that runs next on a free CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GlobalScheduler {
    /// Proportional share (GVM): the domain furthest behind its CPU tickets.
    #[default]
    Stride,
    /// The domain of the thread that has waited longest, whatever its tickets.
    RoundRobin,
}

/// How a domain's local scheduler picks which of its runnable threads runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LocalScheduler {
    /// In the order threads became runnable; a preempted thread goes to the back.
    #[default]
    RoundRobin,
    /// The runnable thread of highest priority (`thread_priority`), round-robin among equals.
    Priority,
    /// Non-preemptive first-in first-out: a thread the timer preempted resumes before any other
    /// thread of its domain runs, so the domain's threads switch only where they block or yield
    /// (JX's file system and buffer cache rely on this).
    Fifo,
}

impl LocalScheduler {
    /// Every built-in local policy.
    pub const ALL: [LocalScheduler; 3] = [LocalScheduler::RoundRobin, LocalScheduler::Priority, LocalScheduler::Fifo];

    /// The name used in configurations and manifests.
    pub fn name(self) -> &'static str {
        match self {
            LocalScheduler::RoundRobin => "round-robin",
            LocalScheduler::Priority => "priority",
            LocalScheduler::Fifo => "fifo",
        }
    }

    /// The built-in policy called `name`.
    pub fn named(name: &str) -> Option<LocalScheduler> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl GlobalScheduler {
    /// The name used in configurations.
    pub fn name(self) -> &'static str {
        match self {
            GlobalScheduler::Stride => "stride",
            GlobalScheduler::RoundRobin => "round-robin",
        }
    }

    /// The built-in policy called `name`.
    pub fn named(name: &str) -> Option<GlobalScheduler> {
        [GlobalScheduler::Stride, GlobalScheduler::RoundRobin].into_iter().find(|s| s.name() == name)
    }
}

/// Host calls a scheduler component may import.
pub const SCHEDULER_CALLS: &[&str] = &["clock_ns", "console_write"];

/// The registered component `name`, if it can be installed as a scheduler of `kind`.
///
/// # Errors
/// An unknown component (naming the known schedulers of that kind), or one that [`check`]
/// refuses.
pub fn find(registry: &ComponentRegistry, name: &str, kind: Kind) -> Result<Arc<Component>, String> {
    let component = registry.get(name).ok_or_else(|| {
        let known: Vec<_> = registry.names().filter(|n| registry.get(n).is_some_and(|c| c.kind == kind)).collect();
        format!("unknown scheduler component {name} (known: {})", known.join(", "))
    })?;
    check(component, kind)?;
    Ok(component.clone())
}

/// Checks that `component` can be installed as a scheduler of `kind`.
///
/// # Errors
/// A message naming the component and what is wrong.
fn check(component: &Component, kind: Kind) -> Result<(), String> {
    let name = &component.manifest.name;
    if component.kind != kind {
        let what = |k: Kind| if k == Kind::LocalScheduler { "a local scheduler" } else { "a global scheduler" };
        return Err(if component.kind == Kind::Ordinary {
            format!("component {name} is not a scheduler")
        } else {
            format!("component {name} is {}, not {}", what(component.kind), what(kind))
        });
    }
    if let Some(call) = component.host_calls().iter().find(|c| !SCHEDULER_CALLS.contains(&c.as_str())) {
        return Err(format!(
            "scheduler {name} imports {call}; a scheduler may import only {} (it runs while kernel locks are held)",
            SCHEDULER_CALLS.join(", ")
        ));
    }
    if kind == Kind::LocalScheduler && !component.bounded.iter().any(|(e, _)| e == "domos_sched_preempted") {
        return Err(format!(
            "scheduler {name} does not list domos_sched_preempted as bounded in its manifest; the kernel calls it \
             on every preemption and needs it proved to finish"
        ));
    }
    Ok(())
}
