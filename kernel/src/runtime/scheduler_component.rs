//! Scheduler components: local (domain) and global schedulers written as wasm components, as in
//! JX (section 2.8).
//!
//! A scheduler component runs in a store of its own over a heap of its own, charged to the
//! domain it schedules (a local scheduler) or to the `global-scheduler` domain (the global
//! one). The kernel's CPUs call its exports one at a time (the store sits behind a mutex) and
//! trust none of its answers:
//!
//! * every call may execute at most [`CALL_FUEL`] instructions (its code is metered with
//!   wasmtime's fuel), so a scheduler that loops is stopped by its own work, never by the host's
//!   clock: a busy machine does not fail a correct scheduler, and a domain without preemption
//!   checks does not lift the bound;
//! * every answer is checked against the kernel's run queue: a thread or domain that is not
//!   runnable is an error;
//! * a scheduler may import only [`SCHEDULER_CALLS`]: it runs while the kernel holds the run
//!   queue or the domain's scheduling lock, so it must neither block nor wake threads;
//! * a local scheduler's `domos_sched_preempted` must be proved bounded by the verifier.
//!
//! A scheduler that traps, overruns its deadline or answers garbage is dropped and the kernel's
//! built-in scheduler of the same policy takes over (`sched` says so on the console).

use domos_loader::component::Component;
use wasmtime::{Store, TypedFunc, WasmParams, WasmResults};

use crate::domain::store::{StoreCtx, describe_trap};
use crate::object::guest_memory::Heap;
use crate::sched::{GlobalPolicy, LocalPolicy};

/// Instructions one call of a scheduler may execute: about a millisecond of this machine's
/// work, a hundred times what the scheduler components of this repository need for a call.
pub const CALL_FUEL: u64 = 2_000_000;

/// The store of a scheduler component and what it is, for reports.
pub(crate) struct SchedulerStore {
    store: Store<StoreCtx>,
    instance: wasmtime::Instance,
    /// The component's name.
    pub(crate) name: String,
    /// The policy it says it implements (`fifo`, `stride`, …).
    pub(crate) policy: String,
}

impl SchedulerStore {
    /// Wraps an instantiated scheduler `component`, whose store is metered; each of its calls
    /// stops after [`CALL_FUEL`] instructions.
    pub(crate) fn new(store: Store<StoreCtx>, instance: wasmtime::Instance, component: &Component) -> Self {
        SchedulerStore {
            store,
            instance,
            name: component.manifest.name.clone(),
            policy: component.manifest.policy.clone().unwrap_or_else(|| component.manifest.name.clone()),
        }
    }

    fn export<P: WasmParams, R: WasmResults>(&mut self, name: &str) -> Result<TypedFunc<P, R>, String> {
        self.instance.get_typed_func(&mut self.store, name).map_err(|e| format!("{}: {name}: {e}", self.name))
    }

    fn optional<P: WasmParams, R: WasmResults>(&mut self, name: &str) -> Option<TypedFunc<P, R>> {
        self.instance.get_typed_func(&mut self.store, name).ok()
    }

    /// Calls `function` (named `what` in errors) under the deadline.
    fn call<P: WasmParams, R: WasmResults>(
        &mut self,
        what: &str,
        function: &TypedFunc<P, R>,
        args: P,
    ) -> Result<R, String> {
        self.store.set_fuel(CALL_FUEL).map_err(|e| format!("{what}(): {e}"))?;
        function.call(&mut self.store, args).map_err(|e| match e.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::OutOfFuel) => format!("{what}() did not return within {CALL_FUEL} instructions"),
            _ => format!("{what}() {}", describe_trap(&e)),
        })
    }
}

impl Drop for SchedulerStore {
    /// Gives the scheduler's heap back to the domain's quota: a scheduler replaced at run time
    /// leaves nothing charged behind.
    fn drop(&mut self) {
        let ctx = self.store.data();
        if let Heap::Shared(memory) = &ctx.instance.memory {
            ctx.domain.quota().uncharge(memory.data_size() as u64);
        }
    }
}

/// A local scheduler component: picks which of its domain's runnable threads runs.
pub(crate) struct LocalComponent {
    store: SchedulerStore,
    runnable: TypedFunc<(u32, i32), ()>,
    preempted: TypedFunc<(u32, i32), ()>,
    activated: TypedFunc<u32, u32>,
    interrupted: Option<TypedFunc<(u32, i32), u32>>,
    portal_call: Option<TypedFunc<u32, u32>>,
    incoming_call: Option<TypedFunc<u32, u32>>,
}

impl LocalComponent {
    /// Looks up the exports of an instantiated local scheduler.
    ///
    /// # Errors
    /// When a required export is missing.
    pub(crate) fn new(mut store: SchedulerStore) -> Result<Self, String> {
        Ok(LocalComponent {
            runnable: store.export("domos_sched_runnable")?,
            preempted: store.export("domos_sched_preempted")?,
            activated: store.export("domos_sched_activated")?,
            interrupted: store.optional("domos_sched_interrupted"),
            portal_call: store.optional("domos_sched_portal_call"),
            incoming_call: store.optional("domos_sched_incoming_call"),
            store,
        })
    }

    /// Whether it can be interrupted within its domain's slice.
    pub(crate) fn has_interrupted(&self) -> bool {
        self.interrupted.is_some()
    }
}

impl LocalPolicy for LocalComponent {
    fn name(&self) -> &str {
        &self.store.name
    }

    fn policy(&self) -> &str {
        &self.store.policy
    }

    /// Whether it opted into hearing of its threads' outgoing portal calls.
    fn hears_outgoing(&self) -> bool {
        self.portal_call.is_some()
    }

    /// Whether it opted into hearing of incoming portal calls.
    fn hears_incoming(&self) -> bool {
        self.incoming_call.is_some()
    }

    /// `thread` became runnable.
    fn runnable(&mut self, thread: u32, priority: i32) -> Result<(), String> {
        self.store.call("runnable", &self.runnable, (thread, priority))
    }

    /// The timer ended `thread`'s slice; it is runnable.
    fn preempted(&mut self, thread: u32, priority: i32) -> Result<(), String> {
        self.store.call("preempted", &self.preempted, (thread, priority))
    }

    /// The thread to run on `cpu` now; 0 for none.
    fn activated(&mut self, cpu: u32) -> Result<u32, String> {
        self.store.call("activated", &self.activated, cpu)
    }

    /// `thread` was interrupted within its domain's slice; the thread to run next.
    fn interrupted(&mut self, thread: u32, priority: i32) -> Result<u32, String> {
        match &self.interrupted {
            Some(f) => self.store.call("interrupted", f, (thread, priority)),
            None => Err("interrupted() is not exported".into()),
        }
    }

    /// `thread` is about to call a portal: whether it should let others run first.
    fn portal_call(&mut self, thread: u32) -> Result<bool, String> {
        match &self.portal_call {
            Some(f) => self.store.call("portal_call", f, thread).map(|answer| answer != 0),
            None => Ok(false),
        }
    }

    /// A call from `caller_domain` is about to run one of the domain's services: whether the
    /// caller should let the domain's threads run first.
    fn incoming_call(&mut self, caller_domain: u32) -> Result<bool, String> {
        match &self.incoming_call {
            Some(f) => self.store.call("incoming_call", f, caller_domain).map(|answer| answer != 0),
            None => Ok(false),
        }
    }
}

/// A global scheduler component: picks which domain runs on a free CPU.
pub(crate) struct GlobalComponent {
    store: SchedulerStore,
    runnable: TypedFunc<(u32, u32), ()>,
    idle: TypedFunc<u32, ()>,
    pick: TypedFunc<u32, u32>,
    ran: TypedFunc<(u32, u64), ()>,
}

impl GlobalComponent {
    /// Looks up the exports of an instantiated global scheduler.
    ///
    /// # Errors
    /// When an export is missing.
    pub(crate) fn new(mut store: SchedulerStore) -> Result<Self, String> {
        Ok(GlobalComponent {
            runnable: store.export("domos_global_runnable")?,
            idle: store.export("domos_global_idle")?,
            pick: store.export("domos_global_pick")?,
            ran: store.export("domos_global_ran")?,
            store,
        })
    }
}

impl GlobalPolicy for GlobalComponent {
    /// The component's name.
    fn name(&self) -> &str {
        &self.store.name
    }

    /// The policy it implements.
    fn policy(&self) -> &str {
        &self.store.policy
    }

    /// `domain`, with `tickets`, has runnable threads.
    fn runnable(&mut self, domain: u32, tickets: u32) -> Result<(), String> {
        self.store.call("runnable", &self.runnable, (domain, tickets))
    }

    /// `domain` has no runnable thread any more.
    fn idle(&mut self, domain: u32) -> Result<(), String> {
        self.store.call("idle", &self.idle, domain)
    }

    /// The domain to run on `cpu`.
    fn pick(&mut self, cpu: u32) -> Result<u32, String> {
        self.store.call("pick", &self.pick, cpu)
    }

    /// A thread of `domain` ran `ns` nanoseconds.
    fn ran(&mut self, domain: u32, ns: u64) -> Result<(), String> {
        self.store.call("ran", &self.ran, (domain, ns))
    }
}
