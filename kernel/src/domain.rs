//! Domains: the unit of protection and resource control.
//!
//! A domain owns its component instances (each with a linear memory that the domain's threads
//! share), a memory quota enforced on every page, a handle table, its threads and the service
//! threads that run incoming portal calls. Terminating it revokes all of that at once.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::task::Waker;

use domos_abi::HostError;
use wasmtime::{Module, SharedMemory, Store, TypedFunc};

use crate::handle::HandleTable;
use crate::sched::Thread;
use domos_abi::Grant;
use domos_loader::codegen::CodeGen;
use domos_loader::component::Component;
pub use domos_loader::config::{DEFAULT_CPU_SHARE, DomainLimits};

/// Bytes in a wasm page.
pub const PAGE: u64 = 64 * 1024;

/// How a charge reaches a domain's quota (`Kernel::charge`, which may take a memory fault).
pub(crate) type Charge<'a> = &'a dyn Fn(u64) -> Result<(), HostError>;

/// Counters for the boot summary and `domain_inspect`.
///
/// Portal calls are counted per store without atomics and added here when a store ends; read
/// them through `Domain::calls_made` and `Domain::calls_served`, which add what idle service
/// threads have counted. Calls made by threads still running appear when they end.
#[derive(Default)]
pub struct DomainStats {
    /// Nanoseconds its own threads ran.
    pub cpu_ns: AtomicU64,
    /// Portal calls its services answered.
    pub calls_served: AtomicU64,
    /// Portal calls its threads made.
    pub calls_made: AtomicU64,
    /// Threads started.
    pub threads_started: AtomicU64,
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
    /// How its runnable threads are ordered: its local scheduler.
    pub scheduling: Arc<crate::sched::LocalScheduling>,
    /// Host-call classes granted beyond the basic ones.
    pub grants: Vec<Grant>,
    /// Counters.
    pub stats: DomainStats,
    heap_used: AtomicU64,
    /// The quota in force: the configured heap limit plus what the parent granted since.
    heap_limit: AtomicU64,
    /// The domain that created it, which its memory faults go to.
    pub(crate) parent: Weak<Domain>,
    child: bool,
    /// Domains it created; they end with it.
    pub(crate) children: Mutex<Vec<Arc<Domain>>>,
    /// Bytes of the parent's quota this domain holds (its limit, for a child).
    pub(crate) carved: AtomicU64,
    /// CPU tickets in force (a child's are taken from its parent's).
    tickets: AtomicU64,
    /// Stride scheduling's virtual time of the domain: nanoseconds run × 2^20 / tickets.
    pass: AtomicU64,
    /// The parent's service that decides this domain's memory faults.
    pub(crate) fault_handler: Mutex<Option<Arc<crate::portal::Service>>>,
    /// A child's own namespace: the names its parent handed down (and those it registers). A
    /// child sees only these; a domain of the boot configuration sees the system's names.
    pub(crate) private_names: Mutex<BTreeMap<String, Arc<crate::portal::Service>>>,
    /// Whether the threads of a child have been started.
    pub(crate) started: AtomicBool,
    /// Threads waiting (`domain_wait`) for this domain to have no threads or to end.
    pub(crate) ended_waiters: Mutex<Vec<std::task::Waker>>,
    terminated: AtomicBool,
    reason: Mutex<Option<String>>,
    pub(crate) handles: Mutex<HandleTable>,
    /// Emptied at termination, which releases the component memories.
    instances: Mutex<Vec<Arc<ComponentInstance>>>,
    /// The components' names, kept for reports after termination.
    components: OnceLock<Vec<String>>,
    pub(crate) threads: Mutex<Vec<Arc<Thread>>>,
    pub(crate) exit_codes: Mutex<BTreeMap<u32, i32>>,
    /// Its interrupt sources; source `n` is at index `n - 1`.
    pub(crate) interrupts: Mutex<Vec<Arc<crate::interrupt::EventSource>>>,
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
        local: crate::sched::LocalScheduler,
        grants: Vec<Grant>,
        parent: Weak<Domain>,
    ) -> Domain {
        let scheduled_name = name.clone();
        Domain {
            heap_limit: AtomicU64::new(limits.heap),
            child: parent.strong_count() > 0,
            parent,
            children: Mutex::new(Vec::new()),
            carved: AtomicU64::new(0),
            tickets: AtomicU64::new(limits.cpu_share.max(1)),
            pass: AtomicU64::new(0),
            fault_handler: Mutex::new(None),
            ended_waiters: Mutex::new(Vec::new()),
            private_names: Mutex::new(BTreeMap::new()),
            started: AtomicBool::new(false),
            id,
            name,
            limits,
            code,
            scheduling: Arc::new(crate::sched::LocalScheduling::new(local, id, scheduled_name)),
            grants,
            stats: DomainStats::default(),
            heap_used: AtomicU64::new(0),
            terminated: AtomicBool::new(false),
            reason: Mutex::new(None),
            handles: Mutex::new(HandleTable::default()),
            instances: Mutex::new(Vec::new()),
            components: OnceLock::new(),
            threads: Mutex::new(Vec::new()),
            exit_codes: Mutex::new(BTreeMap::new()),
            interrupts: Mutex::new(Vec::new()),
            waiting_callers: Mutex::new(BTreeMap::new()),
            next_waiting_caller: AtomicU64::new(0),
        }
    }

    /// Whether the domain has been terminated.
    pub fn is_terminated(&self) -> bool {
        self.terminated.load(Ordering::Acquire)
    }

    /// Marks the domain terminated; true for the one caller that did it.
    pub(crate) fn mark_terminated(&self, reason: String) -> bool {
        if self.terminated.swap(true, Ordering::AcqRel) {
            return false;
        }
        *crate::lock(&self.reason) = Some(reason);
        true
    }

    /// Why the domain was terminated, if it was.
    pub fn termination_reason(&self) -> Option<String> {
        crate::lock(&self.reason).clone()
    }

    /// Bytes of heap in use.
    pub fn heap_used(&self) -> u64 {
        self.heap_used.load(Ordering::Relaxed)
    }

    /// Charges `bytes` to the quota.
    ///
    /// # Errors
    /// `QuotaExceeded` when the limit does not allow it; nothing is charged then.
    pub(crate) fn charge(&self, bytes: u64) -> Result<(), HostError> {
        if !self.limits.accounting {
            return Ok(());
        }
        self.heap_used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.heap_limit())
            })
            .map(|_| ())
            .map_err(|_| HostError::QuotaExceeded)
    }

    /// Whether the domain is a child, which sees only the names its parent handed down.
    pub fn is_child(&self) -> bool {
        self.child
    }

    /// CPU tickets in force.
    pub fn cpu_tickets(&self) -> u64 {
        self.tickets.load(Ordering::Acquire)
    }

    /// Takes `tickets` from this domain's share (for a child); false when it has no more than that.
    pub(crate) fn take_tickets(&self, tickets: u64) -> bool {
        self.tickets
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| t.checked_sub(tickets).filter(|left| *left > 0))
            .is_ok()
    }

    /// Gives back tickets taken by a child.
    pub(crate) fn return_tickets(&self, tickets: u64) {
        self.tickets.fetch_add(tickets, Ordering::AcqRel);
    }

    /// The domain's stride-scheduling pass.
    pub(crate) fn pass(&self) -> u64 {
        self.pass.load(Ordering::Acquire)
    }

    /// Charges `ns` of CPU to the pass, in proportion to the inverse of the tickets.
    pub(crate) fn advance(&self, ns: u64) {
        let step = ns.saturating_mul(1 << 20) / self.cpu_tickets().max(1);
        self.pass.fetch_add(step, Ordering::AcqRel);
    }

    /// Moves an idle domain's pass up to `virtual_time`.
    pub(crate) fn catch_up(&self, virtual_time: u64) {
        self.pass.fetch_max(virtual_time, Ordering::AcqRel);
    }

    /// The quota in force.
    pub fn heap_limit(&self) -> u64 {
        self.heap_limit.load(Ordering::Acquire)
    }

    /// Raises the quota by `bytes` (a parent's grant after a memory fault).
    pub(crate) fn raise_limit(&self, bytes: u64) {
        self.heap_limit.fetch_add(bytes, Ordering::AcqRel);
    }

    pub(crate) fn uncharge(&self, bytes: u64) {
        if !self.limits.accounting {
            return;
        }
        self.heap_used.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// The component instances of the domain.
    pub fn instances(&self) -> Vec<Arc<ComponentInstance>> {
        crate::lock(&self.instances).clone()
    }

    pub(crate) fn set_instances(&self, instances: Vec<Arc<ComponentInstance>>) {
        let _ = self.components.set(instances.iter().map(|i| i.name().to_string()).collect());
        *crate::lock(&self.instances) = instances;
    }

    /// Takes the component instances out of the domain (at termination).
    pub(crate) fn take_instances(&self) -> Vec<Arc<ComponentInstance>> {
        std::mem::take(&mut *crate::lock(&self.instances))
    }

    /// The names of the domain's components.
    pub fn component_names(&self) -> &[String] {
        self.components.get().map_or(&[], Vec::as_slice)
    }

    /// Number of live handles.
    pub fn handle_count(&self) -> usize {
        crate::lock(&self.handles).len()
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
    fn idle_count(&self, counter: impl Fn(&crate::host::StoreCtx) -> u64) -> u64 {
        let instances = self.instances();
        instances.iter().map(|i| crate::lock(&i.idle).iter().map(|t| counter(t.store.data())).sum::<u64>()).sum()
    }

    /// Ready with `true` when the domain was terminated, `false` when it has no threads left;
    /// otherwise `waker` is woken when one of these happens.
    pub(crate) fn poll_ended(&self, waker: &std::task::Waker) -> std::task::Poll<bool> {
        if self.is_terminated() {
            return std::task::Poll::Ready(true);
        }
        let threads = crate::lock(&self.threads);
        if threads.is_empty() {
            return std::task::Poll::Ready(false);
        }
        crate::lock(&self.ended_waiters).push(waker.clone());
        std::task::Poll::Pending
    }

    /// Wakes the threads waiting for this domain to end.
    pub(crate) fn wake_ended_waiters(&self) {
        let waiters = std::mem::take(&mut *crate::lock(&self.ended_waiters));
        waiters.into_iter().for_each(std::task::Waker::wake);
    }

    /// Wakes the threads of other domains that wait inside its services (at termination).
    pub(crate) fn wake_waiting_callers(&self) {
        let waiting = std::mem::take(&mut *crate::lock(&self.waiting_callers));
        waiting.into_values().for_each(Waker::wake);
    }

    /// Number of live threads.
    pub fn live_threads(&self) -> usize {
        crate::lock(&self.threads).len()
    }
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

/// The linear memory of a component instance.
pub enum Heap {
    /// Shared by the instance's threads and service threads (compiled domains).
    Shared(SharedMemory),
    /// Owned by the instance's single store (interpreted domains, see `SingleHeap`).
    Single(SingleHeap),
}

/// The heap of an interpreted component instance: one store, memory created at its full size
/// (charged to the quota at once) so that it never moves; pages are handed out by a bump
/// pointer.
#[derive(Default)]
pub struct SingleHeap {
    base: AtomicUsize,
    len: AtomicUsize,
    next_page: AtomicU64,
}

impl SingleHeap {
    /// Records where the memory lies and how many pages its module uses from the start.
    pub(crate) fn place(&self, base: usize, len: usize, initial_pages: u64) {
        self.next_page.store(initial_pages, Ordering::Release);
        self.base.store(base, Ordering::Release);
        self.len.store(len, Ordering::Release);
    }

    /// Base and length; `(null, 0)` before `place`, so every access fails its bounds check.
    pub(crate) fn bounds(&self) -> (*mut u8, usize) {
        (self.base.load(Ordering::Acquire) as *mut u8, self.len.load(Ordering::Acquire))
    }

    fn take_pages(&self, pages: u64) -> Result<u32, HostError> {
        let total = self.len.load(Ordering::Acquire) as u64 / PAGE;
        let first = self
            .next_page
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |next| {
                next.checked_add(pages).filter(|end| *end <= total)
            })
            .map_err(|_| HostError::QuotaExceeded)?;
        u32::try_from(first * PAGE).map_err(|_| HostError::QuotaExceeded)
    }
}

/// A thread's private part of a component memory: its shadow stack, then its message buffer.
#[derive(Debug, Clone, Copy)]
pub struct Region {
    /// Lowest address.
    pub base: u32,
    /// Top of the stack (the initial `__stack_pointer`).
    pub stack_top: u32,
    /// The message buffer.
    pub buffer: u32,
    /// Its capacity: the per-call quota.
    pub buffer_len: u32,
}

/// A service thread: a store that runs incoming calls of one component instance on the
/// caller's CPU.
pub(crate) struct ServiceThread {
    pub store: Store<crate::host::StoreCtx>,
    pub instance: wasmtime::Instance,
    pub dispatch: TypedFunc<(u32, u32, u32, u32, u32), i32>,
    pub release: TypedFunc<u32, ()>,
}

impl Region {
    /// No region yet (a store whose memory is made after the store).
    pub const NONE: Region = Region { base: 0, stack_top: 0, buffer: 0, buffer_len: 0 };
}

impl Drop for ServiceThread {
    fn drop(&mut self) {
        self.store.data().instance.service_threads.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A component loaded into a domain.
pub struct ComponentInstance {
    /// The component.
    pub component: Arc<Component>,
    /// Its arguments from the configuration.
    pub args: String,
    /// Configuration wiring: the names it registers, translated.
    pub register: BTreeMap<String, String>,
    /// Configuration wiring: the names it looks up, translated.
    pub bind: BTreeMap<String, String>,
    pub(crate) memory: Heap,
    /// Its domain's local scheduling, which may want to hear of incoming calls.
    pub(crate) scheduling: Arc<crate::sched::LocalScheduling>,
    free_regions: Mutex<Vec<Region>>,
    pub(crate) module: Module,
    /// The module linked with each kind of store's host calls and this instance's heap
    /// (by `LinkerKind`), made on first use.
    pub(crate) pre_linked: [OnceLock<wasmtime::InstancePre<crate::host::StoreCtx>>; 2],
    pub(crate) idle: Mutex<Vec<ServiceThread>>,
    pub(crate) service_threads: AtomicU32,
    pub(crate) waiters: Mutex<VecDeque<Waker>>,
    pub(crate) released: Mutex<Vec<u32>>,
    pub(crate) has_released: AtomicBool,
    pub(crate) has_waiters: AtomicBool,
    alive: AtomicBool,
}

impl ComponentInstance {
    pub(crate) fn new(
        component: Arc<Component>,
        args: String,
        register: BTreeMap<String, String>,
        bind: BTreeMap<String, String>,
        module: Module,
        memory: Heap,
        scheduling: Arc<crate::sched::LocalScheduling>,
    ) -> ComponentInstance {
        ComponentInstance {
            component,
            args,
            register,
            bind,
            memory,
            scheduling,
            free_regions: Mutex::new(Vec::new()),
            module,
            pre_linked: [OnceLock::new(), OnceLock::new()],
            idle: Mutex::new(Vec::new()),
            service_threads: AtomicU32::new(0),
            waiters: Mutex::new(VecDeque::new()),
            released: Mutex::new(Vec::new()),
            has_released: AtomicBool::new(false),
            has_waiters: AtomicBool::new(false),
            alive: AtomicBool::new(true),
        }
    }

    /// The heap as an import for a new instance (compiled domains; an interpreted domain's heap
    /// belongs to its one store).
    pub(crate) fn heap_extern(&self) -> wasmtime::Result<wasmtime::Extern> {
        match &self.memory {
            Heap::Shared(shared) => Ok(shared.clone().into()),
            Heap::Single(_) => Err(wasmtime::format_err!("an interpreted instance has a single store")),
        }
    }

    /// Whether the instance runs in a single store (an interpreted domain).
    pub fn is_single(&self) -> bool {
        matches!(self.memory, Heap::Single(_))
    }

    /// The component's name.
    pub fn name(&self) -> &str {
        &self.component.manifest.name
    }

    /// Grows the memory by `pages`, charged to `domain` through `charge` (which may take a
    /// memory fault to the parent); returns the address of the new pages.
    ///
    /// # Errors
    /// `QuotaExceeded` when the quota or the memory's maximum does not allow it.
    pub(crate) fn grow(&self, domain: &Domain, pages: u64, charge: Charge<'_>) -> Result<u32, HostError> {
        let shared = match &self.memory {
            Heap::Shared(shared) => shared,
            Heap::Single(single) => return single.take_pages(pages),
        };
        let bytes = pages.checked_mul(PAGE).ok_or(HostError::QuotaExceeded)?;
        charge(bytes)?;
        match shared.grow(pages) {
            Ok(old_pages) => u32::try_from(old_pages * PAGE).map_err(|_| HostError::QuotaExceeded),
            Err(_) => {
                domain.uncharge(bytes);
                Err(HostError::QuotaExceeded)
            }
        }
    }

    /// A stack and message buffer for a new thread, reusing one of an ended thread.
    pub(crate) fn take_region(&self, domain: &Domain, charge: Charge<'_>) -> Result<Region, HostError> {
        if let Some(region) = crate::lock(&self.free_regions).pop() {
            return Ok(region);
        }
        let bytes = u64::from(domain.limits.stack) + u64::from(domain.limits.max_message);
        let base = self.grow(domain, bytes.div_ceil(PAGE), charge)?;
        let stack_top = base + domain.limits.stack;
        Ok(Region { base, stack_top, buffer: stack_top, buffer_len: domain.limits.max_message })
    }

    pub(crate) fn return_region(&self, region: Region) {
        if region.buffer_len == 0 {
            return;
        }
        crate::lock(&self.free_regions).push(region);
    }

    /// Records that the service of `object` was deactivated; the component is told before its
    /// next call.
    pub(crate) fn queue_release(&self, object: u32) {
        crate::lock(&self.released).push(object);
        self.has_released.store(true, Ordering::Release);
    }

    /// Whether the instance's domain still runs.
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Drops the idle service threads and wakes callers waiting for one (at termination).
    pub(crate) fn shut_down(&self) {
        self.alive.store(false, Ordering::Release);
        let idle = std::mem::take(&mut *crate::lock(&self.idle));
        drop(idle);
        let waiters = std::mem::take(&mut *crate::lock(&self.waiters));
        waiters.into_iter().for_each(Waker::wake);
    }
}
