//! Component instances: a module loaded into a domain, with its heap, the regions its threads
//! use, and its pool of service threads. An instance runs one component, or every component of
//! a collocated domain from the collocated build (decision 0015), each a [`Part`] of it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Waker;

use domos_abi::{BUFFER_RUNTIME_BYTES, HostError};
use domos_loader::component::Component;
use wasmtime::{Module, Store, TypedFunc};

use super::Domain;
use super::store::StoreCtx;
use crate::object::guest_memory::{GuestView, Heap, PAGE};
use crate::object::quota::Charge;
use crate::sched::ScheduledDomain;

/// A thread's private part of a component memory: its shadow stack, then its message buffer.
#[derive(Debug, Clone, Copy)]
pub struct Region {
    /// Lowest address.
    pub base: u32,
    /// Top of the stack (the initial `__stack_pointer`), `BUFFER_RUNTIME_BYTES` below the buffer.
    pub stack_top: u32,
    /// The message buffer.
    pub buffer: u32,
    /// Its capacity: the per-call quota.
    pub buffer_len: u32,
}

/// Most services of one component instance that are live or whose release waits for the
/// instance's next call: as many as one handle table holds.
pub const MAX_PENDING_SERVICES: u32 = crate::object::handle::MAX_HANDLES as u32;

/// A service thread: a store that runs incoming calls of one component instance on the
/// caller's CPU.
pub(crate) struct ServiceThread {
    pub store: Store<StoreCtx>,
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
        let instance = &self.store.data().instance;
        instance.service_threads.fetch_sub(1, Ordering::AcqRel);
        // An interpreted instance's heap lives in this store, which is dropped after this body:
        // nothing may reach its bytes through the instance from now on.
        if let Heap::Single(single) = &instance.memory {
            single.forget();
        }
    }
}

/// Most synchronous service threads an instance whose services wait keeps for restartable
/// calls: as many such calls at once as a machine's kernel CPUs are likely to make; one more
/// goes the waiting way.
pub(crate) const MAX_RESTARTABLE_THREADS: u32 = 4;

/// The idle service threads of an instance. The one that ended the last call waits in `last`,
/// which the next call takes, and the call gives back, with one atomic operation each; others
/// wait in `pool`, behind its lock. Boxed, so that taking one out and putting it back moves a
/// pointer, not the store and its functions.
///
/// Whoever waits for a thread raises a flag and then looks here; whoever gives one back puts it
/// here and then reads the flag. Every access to `last` is sequentially consistent so that of
/// the two, one sees the other (the pool's lock orders the accesses to `pool`).
pub(crate) struct IdleThreads {
    last: AtomicPtr<ServiceThread>,
    #[expect(clippy::vec_box, reason = "a call takes a thread out and puts it back: a pointer, not the store")]
    pool: Mutex<Vec<Box<ServiceThread>>>,
}

impl IdleThreads {
    fn new() -> IdleThreads {
        IdleThreads { last: AtomicPtr::new(std::ptr::null_mut()), pool: Mutex::new(Vec::new()) }
    }

    /// An idle thread, if there is one.
    pub(crate) fn take(&self) -> Option<Box<ServiceThread>> {
        let last = self.last.swap(std::ptr::null_mut(), Ordering::SeqCst);
        if !last.is_null() {
            // SAFETY: a pointer in `last` comes from `Box::into_raw` in `put`; the swap took it
            // out, so this is its only owner.
            return Some(unsafe { Box::from_raw(last) });
        }
        crate::lock(&self.pool).pop()
    }

    /// Gives `thread` back.
    pub(crate) fn put(&self, thread: Box<ServiceThread>) {
        let raw = Box::into_raw(thread);
        if self.last.compare_exchange(std::ptr::null_mut(), raw, Ordering::SeqCst, Ordering::Relaxed).is_err() {
            // SAFETY: `raw` is the box given up just above; the exchange failed, so nobody else
            // saw it.
            crate::lock(&self.pool).push(unsafe { Box::from_raw(raw) });
        }
    }

    /// Whether no thread is idle.
    pub(crate) fn is_empty(&self) -> bool {
        self.last.load(Ordering::SeqCst).is_null() && crate::lock(&self.pool).is_empty()
    }

    /// Drops every idle thread.
    fn clear(&self) {
        drop(self.take());
        let pool = std::mem::take(&mut *crate::lock(&self.pool));
        drop(pool);
    }

    /// `counter` summed over the idle threads. The one in `last` joins the pool for the count.
    fn sum(&self, counter: impl Fn(&StoreCtx) -> u64) -> u64 {
        let mut pool = crate::lock(&self.pool);
        let last = self.last.swap(std::ptr::null_mut(), Ordering::SeqCst);
        if !last.is_null() {
            // SAFETY: as in `take`.
            pool.push(unsafe { Box::from_raw(last) });
        }
        pool.iter().map(|t| counter(t.store.data())).sum()
    }
}

impl Drop for IdleThreads {
    fn drop(&mut self) {
        drop(self.take());
    }
}

/// One component of an instance, as its domain's configuration gives it.
pub struct Part {
    /// The component.
    pub component: Arc<Component>,
    /// Its arguments from the configuration, encoded as the `args` host call gives them.
    pub args: Vec<u8>,
    /// Configuration wiring: the names it registers, translated.
    pub register: BTreeMap<String, String>,
    /// Configuration wiring: the names it looks up, translated.
    pub bind: BTreeMap<String, String>,
}

/// The names of `parts`' components, joined by `+`: what reports call their instance.
pub(crate) fn names(parts: &[Part]) -> String {
    parts.iter().map(|p| p.component.manifest.name.as_str()).collect::<Vec<_>>().join("+")
}

/// A module loaded into a domain.
pub struct ComponentInstance {
    /// Its components: one, or all of a collocated domain's, in the configuration's order. A
    /// store runs code of one of them at a time (`StoreCtx::part`).
    pub parts: Vec<Part>,
    /// The components' names, joined by `+`, for reports.
    name: String,
    /// Whether a service of any of its components may wait (`services_wait`): its service
    /// threads are async stores then (decision 0005).
    pub(crate) services_wait: bool,
    pub(crate) memory: Heap,
    /// Its domain's local scheduling, which may want to hear of incoming calls.
    pub(crate) scheduling: Arc<ScheduledDomain>,
    free_regions: Mutex<Vec<Region>>,
    pub(crate) module: Module,
    /// The module linked with each kind of store's host calls and this instance's heap
    /// (by `LinkerKind`), made on first use.
    pub(crate) pre_linked: [OnceLock<wasmtime::InstancePre<StoreCtx>>; 2],
    /// Idle service threads.
    pub(crate) idle: IdleThreads,
    pub(crate) service_threads: AtomicU32,
    /// Idle synchronous service threads of an instance whose services wait, for restartable
    /// calls (`portal::call_restartable`), and how many there are (at most
    /// [`MAX_RESTARTABLE_THREADS`], apart from the domain's `service_threads`).
    pub(crate) restartable_idle: IdleThreads,
    pub(crate) restartable_threads: AtomicU32,
    pub(crate) waiters: Mutex<VecDeque<Waker>>,
    /// Objects whose last portal was dropped, to release before the next call it serves.
    released: Mutex<Vec<u32>>,
    has_released: AtomicBool,
    /// Services of the instance not yet released to it: live, or in `released`. Bounded by
    /// [`MAX_PENDING_SERVICES`] when a service is made, which bounds `released`, the one queue
    /// the component fills (by making services and dropping their portals) without a call to
    /// drain it.
    pending_services: AtomicU32,
    pub(crate) has_waiters: AtomicBool,
    /// A service call of this instance ran past a time slice: from then on calls to it from
    /// stores that can suspend run in async stores and are preempted like threads.
    pub(crate) preemptible: AtomicBool,
    alive: AtomicBool,
}

impl ComponentInstance {
    pub(crate) fn new(
        parts: Vec<Part>,
        module: Module,
        memory: Heap,
        scheduling: Arc<ScheduledDomain>,
    ) -> ComponentInstance {
        ComponentInstance {
            name: names(&parts),
            services_wait: parts.iter().any(|p| p.component.manifest.services_wait),
            parts,
            memory,
            scheduling,
            free_regions: Mutex::new(Vec::new()),
            module,
            pre_linked: [OnceLock::new(), OnceLock::new()],
            idle: IdleThreads::new(),
            service_threads: AtomicU32::new(0),
            restartable_idle: IdleThreads::new(),
            restartable_threads: AtomicU32::new(0),
            waiters: Mutex::new(VecDeque::new()),
            released: Mutex::new(Vec::new()),
            has_released: AtomicBool::new(false),
            pending_services: AtomicU32::new(0),
            has_waiters: AtomicBool::new(false),
            preemptible: AtomicBool::new(false),
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

    /// Its components' names, joined by `+`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The entry points of the module's shared runtime (dispatch, release): its components'
    /// act alike, on tables they share, so the first one's serve them all.
    pub(crate) fn shared_entries(&self) -> &domos_loader::component::Entries {
        &self.parts[0].component.entries
    }

    /// Component `part` of the instance: an index the kernel took from `parts` (no guest
    /// chooses one).
    pub(crate) fn part(&self, part: u32) -> &Part {
        &self.parts[part as usize]
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
                domain.quota().uncharge(bytes);
                Err(HostError::QuotaExceeded)
            }
        }
    }

    /// A stack, the thread runtime's bytes above it (`BUFFER_RUNTIME_BYTES`) and a message buffer
    /// for a new thread, reusing those of an ended thread.
    pub(crate) fn take_region(&self, domain: &Domain, charge: Charge<'_>) -> Result<Region, HostError> {
        if let Some(region) = crate::lock(&self.free_regions).pop() {
            // The ended thread may have left its runtime's bytes saying the buffer is lent.
            let runtime = [0; BUFFER_RUNTIME_BYTES as usize];
            if crate::object::guest_memory::write(&self.memory, region.stack_top, &runtime).is_ok() {
                return Ok(region);
            }
        }
        let bytes = u64::from(domain.limits.stack) + u64::from(domain.limits.max_message);
        let base = self.grow(domain, bytes.div_ceil(PAGE), charge)?;
        let buffer = base + domain.limits.stack;
        // The configuration keeps `stack` a multiple of 16 and at least 4 KiB.
        let stack_top = buffer - BUFFER_RUNTIME_BYTES;
        Ok(Region { base, stack_top, buffer, buffer_len: domain.limits.max_message })
    }

    pub(crate) fn return_region(&self, region: Region) {
        if region.buffer_len == 0 {
            return;
        }
        crate::lock(&self.free_regions).push(region);
    }

    /// Counts a service about to be made of one of the instance's objects.
    ///
    /// # Errors
    /// `QuotaExceeded` when [`MAX_PENDING_SERVICES`] are not yet released to the instance.
    pub(crate) fn admit_service(&self) -> Result<(), HostError> {
        self.pending_services
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_PENDING_SERVICES).then_some(n + 1))
            .map(drop)
            .map_err(|_| HostError::QuotaExceeded)
    }

    /// Records that the service of `object` was deactivated; the component is told before its
    /// next call.
    pub(crate) fn queue_release(&self, object: u32) {
        crate::lock(&self.released).push(object);
        self.has_released.store(true, Ordering::Release);
    }

    /// Objects whose last portal was dropped since the instance last served, to release first;
    /// they no longer count against [`MAX_PENDING_SERVICES`].
    #[inline]
    pub(crate) fn take_released(&self) -> Vec<u32> {
        if !self.has_released.load(Ordering::Acquire) {
            return Vec::new();
        }
        self.take_released_queue()
    }

    /// The queue behind [`take_released`](Self::take_released), once its flag said there is one.
    fn take_released_queue(&self) -> Vec<u32> {
        if !self.has_released.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        let released = std::mem::take(&mut *crate::lock(&self.released));
        self.pending_services.fetch_sub(released.len() as u32, Ordering::AcqRel);
        released
    }

    /// Whether the instance's domain still runs.
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// A counter summed over the idle service threads, which have not yet added it to their
    /// domain's statistics.
    pub(crate) fn idle_count(&self, counter: impl Fn(&StoreCtx) -> u64) -> u64 {
        self.idle.sum(&counter) + self.restartable_idle.sum(&counter)
    }

    /// Whether objects wait to be released: the next call runs their releases first.
    pub(crate) fn has_released(&self) -> bool {
        self.has_released.load(Ordering::Acquire)
    }

    /// Drops the idle service threads and wakes callers waiting for one (at termination).
    pub(crate) fn shut_down(&self) {
        self.alive.store(false, Ordering::Release);
        self.idle.clear();
        self.restartable_idle.clear();
        let waiters = std::mem::take(&mut *crate::lock(&self.waiters));
        waiters.into_iter().for_each(Waker::wake);
        self.release_start_waits();
    }

    /// Makes every wait of the start function return, now and later: a thread instantiating
    /// while the domain ends would otherwise keep its kernel CPU for good, where no epoch check
    /// reaches it. The value waited for is changed (a later wait sees another value and returns
    /// at once), then the waiters are notified. Only the kernel writes there after termination.
    fn release_start_waits(&self) {
        let Heap::Shared(memory) = &self.memory else { return };
        let view = GuestView::of(&self.memory);
        for wait in &self.parts[0].component.code.start_waits {
            let other = wait.expected.wrapping_add(1);
            let written = if wait.wide {
                view.write(wait.address, &other.to_le_bytes())
            } else {
                view.write(wait.address, &(other as u32).to_le_bytes())
            };
            if written.is_ok() {
                let _ = memory.atomic_notify(u64::from(wait.address), u32::MAX);
            }
        }
    }
}
