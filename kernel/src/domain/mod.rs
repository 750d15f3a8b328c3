//! Domains, the unit of protection and resource control, with what they hold: component
//! instances and their stores, the handle table and its kernel objects, services, and the
//! kernel's tables of all of them.
//!
//! A domain owns its component instances (each with a linear memory that the domain's threads
//! share), a memory quota enforced on every page, a handle table, its threads (kept for the
//! scheduler in its `sched::ScheduledDomain`) and the service threads that run incoming portal
//! calls. Terminating it revokes all of that at once (`terminate`).
//!
//! * [`instance`]: component instances, thread regions, service threads;
//! * [`store`]: the state of a wasmtime store (a thread, a service thread or a scheduler) and
//!   how stores are made;
//! * [`engine`]: one wasmtime engine per code generation;
//! * [`service`]: services, the objects portals lead to;
//! * [`handles`]: what a domain's handles name;
//! * [`names`]: the name service;
//! * [`system`]: the kernel's tables (domains, engines, devices) and its CPUs' lifetime;
//! * [`terminate`]: ending a domain.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::task::{Poll, Waker};

use domos_abi::Grant;
use domos_loader::codegen::CodeGen;
pub use domos_loader::config::{DEFAULT_CPU_SHARE, DomainLimits};

use crate::object::handle::HandleTable;
use crate::object::interrupt::EventSource;
use crate::object::quota::Quota;
use crate::sched::{LocalScheduler, ScheduledDomain};

pub mod engine;
pub mod handles;
pub mod instance;
pub mod names;
pub mod service;
pub mod store;
pub mod system;
pub mod terminate;

pub use handles::KernelObject;
pub use instance::{ComponentInstance, MAX_PENDING_SERVICES, Region};
pub use service::Service;

/// Portal-call counters for the boot summary and `domain_inspect`.
///
/// Portal calls are counted per store without atomics and added here when a store ends; read
/// them through `Domain::calls_made` and `Domain::calls_served`, which add what idle service
/// threads have counted. Calls made by threads still running appear when they end.
#[derive(Default)]
pub struct DomainStats {
    /// Portal calls its services answered.
    pub calls_served: AtomicU64,
    /// Portal calls its threads made (an answer asking for the call again, `MustWait` or
    /// `ServiceBusy`, is not one: the call is counted when it is made).
    pub calls_made: AtomicU64,
}

/// A domain.
pub struct Domain {
    /// Unique id.
    pub id: u32,
    /// Name from the configuration.
    pub name: String,
    /// Limits.
    pub limits: DomainLimits,
    /// How its components are translated.
    pub code: CodeGen,
    /// Its threads, CPU share and local scheduler, as the scheduler sees them.
    pub scheduling: Arc<ScheduledDomain>,
    /// Host-call classes granted beyond the basic ones.
    pub grants: Vec<Grant>,
    /// Counters.
    pub stats: DomainStats,
    /// Its memory quota, shared with the memory objects charged to it.
    quota: Arc<Quota>,
    /// The domain that created it, which its memory faults go to.
    parent: Weak<Domain>,
    /// Whether it was created by another domain (its parent may have ended since).
    child: bool,
    /// Domains it created; they end with it.
    children: Mutex<Vec<Arc<Domain>>>,
    /// Bytes of the parent's quota this domain holds (its limit, for a child).
    carved: AtomicU64,
    /// The parent's service that decides this domain's memory faults.
    fault_handler: Mutex<Option<Arc<Service>>>,
    /// A child's own namespace: the names its parent handed down (and those it registers). A
    /// child sees only these; a domain of the boot configuration sees the system's names.
    private_names: Mutex<BTreeMap<String, Arc<Service>>>,
    /// Whether the threads of a child have been started.
    started: AtomicBool,
    reason: Mutex<Option<String>>,
    handles: Mutex<HandleTable<KernelObject>>,
    /// Emptied at termination, which releases the component memories.
    instances: Mutex<Vec<Arc<ComponentInstance>>>,
    /// The components' names, kept for reports after termination.
    components: OnceLock<Vec<String>>,
    /// Its interrupt sources; source `n` is at index `n - 1`.
    interrupts: Mutex<Vec<Arc<EventSource>>>,
    /// Threads of other domains waiting inside its services, by registration.
    waiting_callers: Mutex<BTreeMap<u64, Waker>>,
    next_waiting_caller: AtomicU64,
}

impl Domain {
    pub(crate) fn new(
        id: u32,
        name: String,
        limits: DomainLimits,
        code: CodeGen,
        local: LocalScheduler,
        grants: Vec<Grant>,
        parent: Weak<Domain>,
    ) -> Domain {
        Domain {
            quota: Arc::new(Quota::new(limits.heap, limits.accounting)),
            scheduling: Arc::new(ScheduledDomain::new(id, name.clone(), limits.cpu_share, local)),
            child: parent.strong_count() > 0,
            parent,
            children: Mutex::new(Vec::new()),
            carved: AtomicU64::new(0),
            fault_handler: Mutex::new(None),
            private_names: Mutex::new(BTreeMap::new()),
            started: AtomicBool::new(false),
            id,
            name,
            limits,
            code,
            grants,
            stats: DomainStats::default(),
            reason: Mutex::new(None),
            handles: Mutex::new(HandleTable::default()),
            instances: Mutex::new(Vec::new()),
            components: OnceLock::new(),
            interrupts: Mutex::new(Vec::new()),
            waiting_callers: Mutex::new(BTreeMap::new()),
            next_waiting_caller: AtomicU64::new(0),
        }
    }

    /// Whether the domain has been terminated.
    pub fn is_terminated(&self) -> bool {
        self.scheduling.is_terminated()
    }

    /// Marks the domain terminated; true for the one caller that did it.
    fn mark_terminated(&self, reason: String) -> bool {
        if !self.scheduling.mark_terminated() {
            return false;
        }
        *crate::lock(&self.reason) = Some(reason);
        true
    }

    /// Ends a domain whose creation failed: nothing of it runs yet. Returns `reason`.
    pub(crate) fn fail_creation(&self, reason: String) -> String {
        self.mark_terminated(reason.clone());
        reason
    }

    /// Why the domain was terminated, if it was.
    pub fn termination_reason(&self) -> Option<String> {
        crate::lock(&self.reason).clone()
    }

    /// Its memory quota.
    pub fn quota(&self) -> &Arc<Quota> {
        &self.quota
    }

    /// Bytes of heap in use.
    pub fn heap_used(&self) -> u64 {
        self.quota.used()
    }

    /// The quota in force.
    pub fn heap_limit(&self) -> u64 {
        self.quota.limit()
    }

    /// Whether the domain is a child, which sees only the names its parent handed down.
    pub fn is_child(&self) -> bool {
        self.child
    }

    /// The domain that created it, while it lives (`domos ps` names it).
    pub fn parent(&self) -> Option<Arc<Domain>> {
        self.parent.upgrade()
    }

    /// Whether `parent` created it.
    pub(crate) fn is_child_of(&self, parent: &Arc<Domain>) -> bool {
        std::ptr::eq(self.parent.as_ptr(), Arc::as_ptr(parent))
    }

    /// Records a child created by this domain, holding `carved` bytes of its quota, whose
    /// memory faults go to `fault_handler`.
    pub(crate) fn adopt(&self, child: &Arc<Domain>, carved: u64, fault_handler: Option<Arc<Service>>) {
        child.carved.store(carved, Ordering::Release);
        *crate::lock(&child.fault_handler) = fault_handler;
        crate::lock(&self.children).push(child.clone());
    }

    /// The service that decides this domain's memory faults, if its parent registered one.
    pub(crate) fn fault_handler(&self) -> Option<Arc<Service>> {
        crate::lock(&self.fault_handler).clone()
    }

    /// Raises the limit of a child by `bytes` its parent granted after a memory fault.
    pub(crate) fn grant(&self, bytes: u64) {
        self.carved.fetch_add(bytes, Ordering::AcqRel);
        self.quota.raise_limit(bytes);
    }

    /// Marks a child started; false when it was started before.
    pub(crate) fn mark_started(&self) -> bool {
        !self.started.swap(true, Ordering::AcqRel)
    }

    /// The names its parent handed down to a child.
    pub(crate) fn private_names(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Service>>> {
        crate::lock(&self.private_names)
    }

    /// Its handle table.
    pub(crate) fn handles(&self) -> std::sync::MutexGuard<'_, HandleTable<KernelObject>> {
        crate::lock(&self.handles)
    }

    /// Its interrupt sources; source `n` is at index `n - 1`.
    pub(crate) fn interrupts(&self) -> std::sync::MutexGuard<'_, Vec<Arc<EventSource>>> {
        crate::lock(&self.interrupts)
    }

    /// CPU tickets in force.
    pub fn cpu_tickets(&self) -> u64 {
        self.scheduling.cpu_tickets()
    }

    /// The component instances of the domain.
    pub fn instances(&self) -> Vec<Arc<ComponentInstance>> {
        crate::lock(&self.instances).clone()
    }

    /// Every component of the domain, in the configuration's order: each with its instance and
    /// its place among the instance's parts.
    pub(crate) fn parts(&self) -> Vec<(Arc<ComponentInstance>, u32)> {
        let instances = self.instances();
        instances.into_iter().flat_map(|i| (0..i.parts.len() as u32).map(move |part| (i.clone(), part))).collect()
    }

    pub(crate) fn set_instances(&self, instances: Vec<Arc<ComponentInstance>>) {
        let names = instances.iter().flat_map(|i| &i.parts).map(|p| p.component.manifest.name.clone()).collect();
        let _ = self.components.set(names);
        *crate::lock(&self.instances) = instances;
    }

    /// Takes the component instances out of the domain (at termination and shutdown).
    pub(crate) fn take_instances(&self) -> Vec<Arc<ComponentInstance>> {
        std::mem::take(&mut *crate::lock(&self.instances))
    }

    /// The names of the domain's components.
    pub fn component_names(&self) -> &[String] {
        self.components.get().map_or(&[], Vec::as_slice)
    }

    /// Number of live handles.
    pub fn handle_count(&self) -> usize {
        self.handles().len()
    }

    /// Live handles by the kind of object they name ([`KernelObject::kind`]).
    pub fn handle_kinds(&self) -> BTreeMap<&'static str, usize> {
        let mut kinds = BTreeMap::new();
        self.handles().objects().for_each(|object| *kinds.entry(object.kind()).or_default() += 1);
        kinds
    }

    /// Portal calls this domain's services answered.
    pub fn calls_served(&self) -> u64 {
        self.stats.calls_served.load(Ordering::Relaxed) + self.idle_count(|ctx| ctx.calls_served)
    }

    /// Portal calls this domain's threads and service threads made.
    pub fn calls_made(&self) -> u64 {
        self.stats.calls_made.load(Ordering::Relaxed) + self.idle_count(|ctx| ctx.calls_made)
    }

    /// A counter summed over the idle service threads, which have not yet added it to `stats`.
    fn idle_count(&self, counter: impl Fn(&store::StoreCtx) -> u64) -> u64 {
        self.instances().iter().map(|i| i.idle_count(&counter)).sum()
    }

    /// Nanoseconds its threads ran, including the services they called.
    pub fn cpu_ns(&self) -> u64 {
        self.scheduling.cpu_ns.load(Ordering::Relaxed)
    }

    /// Number of live threads.
    pub fn live_threads(&self) -> usize {
        self.scheduling.live_threads()
    }

    /// Wakes the threads of other domains that wait inside its services (at termination).
    fn wake_waiting_callers(&self) {
        let waiting = std::mem::take(&mut *crate::lock(&self.waiting_callers));
        waiting.into_values().for_each(Waker::wake);
    }
}

/// Waits until `ready` is, unless the caller's domain is terminated meanwhile: then the host
/// call traps, which ends the thread (every waiting host call of a thread store works so).
///
/// In a service store (`in_service`, a service that waits, decision 0005) the waiting thread is
/// the caller's, of another domain, which terminating this domain does not wake by itself: its
/// waker is registered with the domain while it waits, so that the call fails instead of
/// waiting for good.
pub(crate) async fn unless_terminated<T>(
    domain: &Domain,
    in_service: bool,
    mut ready: impl FnMut(&mut std::task::Context<'_>) -> Poll<T>,
) -> wasmtime::Result<T> {
    let mut caller = CallerWait::new(domain);
    std::future::poll_fn(|cx| {
        if in_service {
            // Before the check: a termination after it finds the waker registered.
            caller.register(cx.waker());
        }
        if domain.is_terminated() { Poll::Ready(None) } else { ready(cx).map(Some) }
    })
    .await
    .ok_or_else(|| wasmtime::format_err!("domain terminated"))
}

/// A caller's thread waiting inside a service of `domain`, registered so that terminating the
/// domain wakes it; the registration ends with the wait.
pub(crate) struct CallerWait<'a> {
    domain: &'a Domain,
    key: Option<u64>,
}

impl<'a> CallerWait<'a> {
    pub(crate) fn new(domain: &'a Domain) -> Self {
        CallerWait { domain, key: None }
    }

    /// Registers (or renews) the waiting thread's `waker`.
    pub(crate) fn register(&mut self, waker: &Waker) {
        let key = *self.key.get_or_insert_with(|| self.domain.next_waiting_caller.fetch_add(1, Ordering::Relaxed));
        crate::lock(&self.domain.waiting_callers).insert(key, waker.clone());
    }
}

impl Drop for CallerWait<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            crate::lock(&self.domain.waiting_callers).remove(&key);
        }
    }
}
