//! Threads and two-level scheduling (JX 2.8, decision 0006).
//!
//! A Domos thread is a wasmtime store running one call (`domos_main`, `domos_thread_entry`, or
//! `domos_init`) on a fiber, driven as a future. The kernel's CPUs are worker OS threads that
//! share one run queue holding each domain's runnable threads, and poll the thread the two
//! levels pick: the global scheduler picks a domain among those with a thread to run, the
//! domain's local scheduler one of its threads. Either level is a policy built in here (global:
//! stride scheduling over CPU tickets, or round-robin; local: round-robin, fixed priority,
//! non-preemptive FIFO) or a scheduler component (`scheduler_component.rs`), whose answers the
//! queue checks. A thread that blocks (join, yield, sleep, an atomic variable, a busy service)
//! returns control to its CPU; a timer preempts a thread at the end of its slice through
//! wasmtime's epoch interruption, and its local scheduler hears of it.

use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use crate::console::Console;
use crate::object::{BusyPoll, CPU_LOOK};
mod policy;
use crate::trace::Trace;
pub use domos_loader::scheduler::{GlobalScheduler, LocalScheduler};
pub use policy::{GlobalPolicy, LocalPolicy};

type ThreadBody = Pin<Box<dyn Future<Output = i32> + Send>>;

thread_local! {
    /// The thread the calling CPU polls (0: none).
    static CURRENT: Cell<u32> = const { Cell::new(0) };
    /// Set by the epoch callback while a CPU polls a thread: its slice ended.
    static PREEMPTED: Cell<bool> = const { Cell::new(false) };
    /// Set by the epoch callback: the thread's domain's own, shorter slice ended.
    static INTERRUPTED: Cell<bool> = const { Cell::new(false) };
    /// When the slice of the domain the calling CPU runs ends.
    static SLICE_END: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Nanoseconds of the current poll that epoch callbacks charged to the domains of the
    /// services the polled thread called: not its domain's.
    static DONATED: Cell<u64> = const { Cell::new(0) };
}

/// Called by the epoch callback of a service store at the end of a slice of a portal call:
/// charges the slice to the service's domain as it runs. The calling thread's domain is not
/// charged for it, but its stride pass still advances (the call runs with the caller's share).
pub(crate) fn charge_service(service: &ScheduledDomain, ns: u64) {
    service.cpu_ns.fetch_add(ns, Ordering::Relaxed);
    DONATED.with(|d| d.set(d.get().saturating_add(ns)));
}

/// Called by the epoch callback of a service call that can suspend its calling thread: the
/// thread stops as at the end of its slice; returns the ticks until the next check.
pub(crate) fn note_service_deadline(system_ticks: u64) -> u64 {
    PREEMPTED.with(|p| p.set(true));
    system_ticks
}

/// Called by the epoch callback of a thread's store: notes why the thread stops (the end of its
/// domain's slice, or only of its local scheduler's shorter one) and returns the ticks until
/// the next check.
pub(crate) fn note_deadline(domain: &ScheduledDomain, system_ticks: u64) -> u64 {
    let local = domain.slice_ticks.load(Ordering::Relaxed);
    let slice_left = SLICE_END.with(Cell::get).is_some_and(|end| Instant::now() < end);
    if local != 0 && slice_left {
        INTERRUPTED.with(|i| i.set(true));
    } else {
        PREEMPTED.with(|p| p.set(true));
    }
    if local != 0 { local.min(system_ticks) } else { system_ticks }
}

/// Exit codes of ended threads a domain keeps for joins that come after the end.
const MAX_EXIT_CODES: usize = 1024;

/// How many answers naming a thread that is not queued a CPU accepts from a local scheduler
/// component in a row before it passes the domain over (until the component hears of a
/// runnable thread again).
const MAX_STALE_ANSWERS: usize = 8;

/// A domain as the scheduler sees it: its threads, their exit codes, its CPU tickets and the
/// time it ran, and its local scheduling — the built-in policy, and the scheduler component
/// that replaces it while there is one. The domain (`domain::Domain`) holds it; threads point
/// to it, never to the domain.
///
/// Lock order: a domain's `component` before the run queue before the global component.
pub struct ScheduledDomain {
    /// The domain's id.
    pub id: u32,
    /// The domain's name, for the console.
    pub name: String,
    /// Nanoseconds its threads ran, including calls to services that returned within a slice,
    /// and the slices its services were charged as they ran (`charge_service`), which the
    /// calling threads' domains are not charged.
    pub cpu_ns: AtomicU64,
    /// Threads started.
    pub threads_started: AtomicU64,
    /// Its live threads.
    threads: Mutex<Vec<Arc<Thread>>>,
    /// Exit codes of its ended threads, by thread id.
    exit_codes: Mutex<BTreeMap<u32, i32>>,
    /// Threads waiting (`domain_wait`) for the domain to have no threads or to end.
    ended_waiters: Mutex<Vec<Waker>>,
    terminated: AtomicBool,
    /// CPU tickets in force (a child's are taken from its parent's).
    tickets: AtomicU64,
    /// Stride scheduling's virtual time of the domain: nanoseconds run × 2^20 / tickets.
    pass: AtomicU64,
    built_in: AtomicU8,
    component: Mutex<Option<Box<dyn LocalPolicy>>>,
    has_component: AtomicBool,
    hears_outgoing: AtomicBool,
    hears_incoming: AtomicBool,
    /// Ticks of the component's own slice (0: the system's).
    slice_ticks: AtomicU64,
}

impl ScheduledDomain {
    /// Domain `id` with `tickets`, scheduled by the built-in `policy`.
    pub(crate) fn new(id: u32, name: String, tickets: u64, policy: LocalScheduler) -> Self {
        ScheduledDomain {
            id,
            name,
            cpu_ns: AtomicU64::new(0),
            threads_started: AtomicU64::new(0),
            threads: Mutex::new(Vec::new()),
            exit_codes: Mutex::new(BTreeMap::new()),
            ended_waiters: Mutex::new(Vec::new()),
            terminated: AtomicBool::new(false),
            tickets: AtomicU64::new(tickets.max(1)),
            pass: AtomicU64::new(0),
            built_in: AtomicU8::new(policy as u8),
            component: Mutex::new(None),
            has_component: AtomicBool::new(false),
            hears_outgoing: AtomicBool::new(false),
            hears_incoming: AtomicBool::new(false),
            slice_ticks: AtomicU64::new(0),
        }
    }

    /// Whether the domain has been terminated.
    pub fn is_terminated(&self) -> bool {
        self.terminated.load(Ordering::Acquire)
    }

    /// Marks the domain terminated; true for the one caller that did it.
    pub(crate) fn mark_terminated(&self) -> bool {
        !self.terminated.swap(true, Ordering::AcqRel)
    }

    /// Its live threads.
    pub fn threads(&self) -> Vec<Arc<Thread>> {
        crate::lock(&self.threads).clone()
    }

    /// Its live thread `id`.
    pub fn thread(&self, id: u32) -> Option<Arc<Thread>> {
        crate::lock(&self.threads).iter().find(|t| t.id == id).cloned()
    }

    /// Number of live threads.
    pub fn live_threads(&self) -> usize {
        crate::lock(&self.threads).len()
    }

    /// Takes the list of live threads (at shutdown, after the CPUs stopped).
    pub(crate) fn take_threads(&self) -> Vec<Arc<Thread>> {
        std::mem::take(&mut *crate::lock(&self.threads))
    }

    /// The exit code of its ended thread `id`.
    pub fn exit_code(&self, id: u32) -> Option<i32> {
        crate::lock(&self.exit_codes).get(&id).copied()
    }

    /// Ready with `true` when the domain was terminated, `false` when it has no threads left;
    /// otherwise `waker` is woken when one of these happens.
    pub(crate) fn poll_ended(&self, waker: &Waker) -> Poll<bool> {
        if self.is_terminated() {
            return Poll::Ready(true);
        }
        let threads = crate::lock(&self.threads);
        if threads.is_empty() {
            return Poll::Ready(false);
        }
        crate::lock(&self.ended_waiters).push(waker.clone());
        Poll::Pending
    }

    /// Wakes the threads waiting for this domain to end.
    pub(crate) fn wake_ended_waiters(&self) {
        let waiters = std::mem::take(&mut *crate::lock(&self.ended_waiters));
        waiters.into_iter().for_each(Waker::wake);
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
    fn pass(&self) -> u64 {
        self.pass.load(Ordering::Acquire)
    }

    /// Charges `ns` of CPU to the pass, in proportion to the inverse of the tickets.
    fn advance(&self, ns: u64) {
        let step = ns.saturating_mul(1 << 20) / self.cpu_tickets().max(1);
        self.pass.fetch_add(step, Ordering::AcqRel);
    }

    /// Moves an idle domain's pass up to `virtual_time`.
    fn catch_up(&self, virtual_time: u64) {
        self.pass.fetch_max(virtual_time, Ordering::AcqRel);
    }

    fn built_in(&self) -> LocalScheduler {
        LocalScheduler::ALL[self.built_in.load(Ordering::Relaxed) as usize % LocalScheduler::ALL.len()]
    }

    /// The scheduler in force, for reports: `sched-fifo (component)`, or `fifo` when built in.
    pub fn describe(&self) -> String {
        match crate::lock(&self.component).as_ref() {
            Some(component) => format!("{} (component)", component.name()),
            None => self.built_in().name().to_string(),
        }
    }

    /// Ticks of the local scheduler's own slice (0: the system's).
    pub(crate) fn slice_ticks(&self) -> u64 {
        self.slice_ticks.load(Ordering::Relaxed)
    }

    /// Removes the scheduler component (at shutdown: its store holds the kernel).
    pub(crate) fn take_component(&self) -> Option<Box<dyn LocalPolicy>> {
        let mut slot = crate::lock(&self.component);
        self.install(&mut slot, None, self.built_in())
    }

    /// Whether outgoing portal calls of the domain's threads are to be told to its scheduler.
    pub(crate) fn hears_outgoing(&self) -> bool {
        self.hears_outgoing.load(Ordering::Relaxed)
    }

    /// Whether incoming portal calls are to be told to the domain's scheduler.
    pub(crate) fn hears_incoming(&self) -> bool {
        self.hears_incoming.load(Ordering::Relaxed)
    }

    fn install(
        &self,
        slot: &mut Option<Box<dyn LocalPolicy>>,
        component: Option<(Box<dyn LocalPolicy>, u64)>,
        policy: LocalScheduler,
    ) -> Option<Box<dyn LocalPolicy>> {
        self.built_in.store(policy as u8, Ordering::Relaxed);
        let (component, ticks) = component.map_or((None, 0), |(c, ticks)| (Some(c), ticks));
        self.hears_outgoing.store(component.as_ref().is_some_and(|c| c.hears_outgoing()), Ordering::Relaxed);
        self.hears_incoming.store(component.as_ref().is_some_and(|c| c.hears_incoming()), Ordering::Relaxed);
        self.slice_ticks.store(ticks, Ordering::Relaxed);
        self.has_component.store(component.is_some(), Ordering::Release);
        std::mem::replace(slot, component)
    }

    /// Drops a component that failed and puts the built-in scheduler of its policy (or
    /// round-robin) in its place; says so on `console`.
    fn fail(&self, slot: &mut Option<Box<dyn LocalPolicy>>, error: &str, console: &Console) {
        let Some(failed) = slot.as_ref() else { return };
        let policy = LocalScheduler::named(failed.policy()).unwrap_or_default();
        console.line(
            "kernel",
            &format!(
                "domain {}: scheduler {} failed: {error}; the built-in {} scheduler takes over",
                self.name,
                failed.name(),
                policy.name()
            ),
        );
        drop(self.install(slot, None, policy));
    }
}

/// A thread of a domain. It never leaves its domain.
pub struct Thread {
    /// Unique id.
    pub id: u32,
    /// Its domain.
    pub domain: Arc<ScheduledDomain>,
    /// What it runs, for reports (`app-demo main`).
    pub label: String,
    scheduler: Arc<Scheduler>,
    /// What it runs, and the waker it is polled with (made once: a waker per poll would cost
    /// two reference-count operations per switch). Emptied when it ends, which also ends the
    /// waker's reference to the thread.
    body: Mutex<Option<(ThreadBody, Waker)>>,
    queued: AtomicBool,
    exit: Mutex<Option<i32>>,
    exited: Condvar,
    joiners: Mutex<Vec<Waker>>,
    cpu_ns: AtomicU64,
    /// For the `priority` local scheduler: higher runs first.
    priority: std::sync::atomic::AtomicI32,
    /// The timer preempted it and it has not run since.
    preempted: AtomicBool,
    /// A system thread (an interrupt handler) that waits for events for as long as its domain
    /// lives: the system counts as finished without it.
    daemon: bool,
}

impl Thread {
    /// The exit code, once the thread has ended.
    pub fn exit_code(&self) -> Option<i32> {
        *crate::lock(&self.exit)
    }

    /// Blocks the calling OS thread (never a kernel CPU) until the thread ends; returns its
    /// exit code.
    pub fn wait(&self) -> i32 {
        let mut exit = crate::lock(&self.exit);
        loop {
            if let Some(code) = *exit {
                return code;
            }
            exit = self.exited.wait(exit).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Like `wait`, but gives up at `deadline`: `None` when the thread has not ended by then.
    pub fn wait_until(&self, deadline: Instant) -> Option<i32> {
        let mut exit = crate::lock(&self.exit);
        loop {
            if let Some(code) = *exit {
                return Some(code);
            }
            let left = deadline.checked_duration_since(Instant::now()).filter(|left| !left.is_zero())?;
            exit = self.exited.wait_timeout(exit, left).unwrap_or_else(std::sync::PoisonError::into_inner).0;
        }
    }

    /// Nanoseconds this thread ran.
    pub fn cpu_ns(&self) -> u64 {
        self.cpu_ns.load(Ordering::Relaxed)
    }

    /// Registers `waker` to be woken when the thread ends; returns the exit code if it has.
    pub(crate) fn join_or_register(&self, waker: &Waker) -> Option<i32> {
        let exit = crate::lock(&self.exit);
        if exit.is_none() {
            crate::lock(&self.joiners).push(waker.clone());
        }
        *exit
    }

    /// Drops what the thread runs (at shutdown, after the CPUs stopped): its store holds the
    /// kernel, and a thread blocked for good would otherwise keep the kernel alive through the
    /// wakers that point at it.
    pub(crate) fn discard(&self) {
        drop(crate::lock(&self.body).take());
    }

    /// Sets the priority the local scheduler orders threads by, and tells a scheduler component
    /// if the thread waits to run (it already heard of it: the new priority replaces the old).
    pub fn set_priority(&self, priority: i32) {
        self.priority.store(priority, Ordering::Relaxed);
        let scheduling = &*self.domain;
        if scheduling.has_component.load(Ordering::Acquire) {
            let mut slot = crate::lock(&scheduling.component);
            if self.queued.load(Ordering::Acquire)
                && let Some(Err(e)) = slot.as_mut().map(|c| c.runnable(self.id, priority))
            {
                self.scheduler.fail_local(scheduling, &mut slot, &e);
            }
        }
    }

    /// Makes the thread runnable (if it is not already queued).
    pub(crate) fn wake_up(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            self.scheduler.enqueue(self.clone());
        }
    }

    fn finish(&self, code: i32) {
        *crate::lock(&self.exit) = Some(code);
        self.exited.notify_all();
        let joiners = std::mem::take(&mut *crate::lock(&self.joiners));
        joiners.into_iter().for_each(Waker::wake);
        {
            let mut codes = crate::lock(&self.domain.exit_codes);
            codes.insert(self.id, code);
            // Kept for a late join, but not without end: the oldest go first.
            while codes.len() > MAX_EXIT_CODES {
                codes.pop_first();
            }
        }
        let none_left = {
            let mut threads = crate::lock(&self.domain.threads);
            threads.retain(|t| t.id != self.id);
            threads.is_empty()
        };
        if none_left {
            self.domain.wake_ended_waiters();
        }
    }
}

impl Wake for Thread {
    fn wake(self: Arc<Self>) {
        self.wake_up();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wake_up();
    }
}

/// The runnable threads of one domain.
struct Runnable {
    domain: Arc<ScheduledDomain>,
    threads: VecDeque<Arc<Thread>>,
    /// Its scheduler component answered that it wants nothing run: the domain is passed over
    /// until the component hears of a runnable thread again.
    declined: bool,
    /// When it last joined the domains with runnable threads or was last picked (the built-in
    /// global round-robin picks the smallest).
    since: u64,
}

impl Runnable {
    fn eligible(&self) -> bool {
        !self.threads.is_empty() && !self.declined
    }
}

/// The runnable threads, by domain.
#[derive(Default)]
struct RunQueue {
    domains: BTreeMap<u32, Runnable>,
    next_since: u64,
}

/// The two-level scheduler and its CPUs: a global policy picks a domain, the domain's local
/// policy picks one of its threads. Either level is built in (Rust) or a scheduler component.
pub struct Scheduler {
    run_queue: Mutex<RunQueue>,
    /// The pass of the domain picked last: where an idle domain rejoins.
    virtual_time: AtomicU64,
    queued: AtomicUsize,
    parked: AtomicUsize,
    runnable: Condvar,
    live: AtomicUsize,
    all_done: Condvar,
    done_lock: Mutex<()>,
    stop: AtomicBool,
    /// Sleeping threads by deadline (and a sequence number, for equal deadlines).
    sleepers: Mutex<BTreeMap<(Instant, u64), Waker>>,
    next_sleeper: AtomicU64,
    /// The thread activity trace (off unless switched on).
    pub trace: Trace,
    global: AtomicU8,
    global_component: Mutex<Option<Box<dyn GlobalPolicy>>>,
    has_global_component: AtomicBool,
    slice: Duration,
    console: Arc<Console>,
}

impl Scheduler {
    /// A scheduler with no CPUs yet, picking domains by `global` and giving each a `slice`;
    /// it reports failing scheduler components on `console`.
    pub fn new(global: GlobalScheduler, slice: Duration, console: Arc<Console>) -> Arc<Scheduler> {
        Arc::new(Scheduler {
            run_queue: Mutex::new(RunQueue::default()),
            virtual_time: AtomicU64::new(0),
            queued: AtomicUsize::new(0),
            parked: AtomicUsize::new(0),
            runnable: Condvar::new(),
            live: AtomicUsize::new(0),
            all_done: Condvar::new(),
            done_lock: Mutex::new(()),
            stop: AtomicBool::new(false),
            sleepers: Mutex::new(BTreeMap::new()),
            next_sleeper: AtomicU64::new(0),
            trace: Trace::default(),
            global: AtomicU8::new(global as u8),
            global_component: Mutex::new(None),
            has_global_component: AtomicBool::new(false),
            slice,
            console,
        })
    }

    /// Starts `cpus` worker OS threads.
    ///
    /// # Errors
    /// When the OS refuses a thread.
    pub fn start_cpus(self: &Arc<Self>, cpus: usize) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
        (0..cpus.max(1))
            .map(|n| {
                let scheduler = self.clone();
                std::thread::Builder::new().name(format!("domos-cpu{n}")).spawn(move || scheduler.run_cpu(n as u32))
            })
            .collect()
    }

    /// Creates a thread running `body` and makes it runnable.
    pub(crate) fn spawn(
        self: &Arc<Self>,
        id: u32,
        domain: Arc<ScheduledDomain>,
        label: String,
        body: ThreadBody,
        daemon: bool,
    ) -> Arc<Thread> {
        let thread = Arc::new(Thread {
            id,
            domain: domain.clone(),
            label,
            scheduler: self.clone(),
            body: Mutex::new(None),
            queued: AtomicBool::new(false),
            exit: Mutex::new(None),
            exited: Condvar::new(),
            joiners: Mutex::new(Vec::new()),
            cpu_ns: AtomicU64::new(0),
            priority: std::sync::atomic::AtomicI32::new(0),
            preempted: AtomicBool::new(false),
            daemon,
        });
        *crate::lock(&thread.body) = Some((body, Waker::from(thread.clone())));
        self.trace.thread_started(domain.id, id, &thread.label);
        crate::lock(&domain.threads).push(thread.clone());
        domain.threads_started.fetch_add(1, Ordering::Relaxed);
        if !daemon {
            self.live.fetch_add(1, Ordering::AcqRel);
        }
        thread.wake_up();
        thread
    }

    /// The global policy in force, for reports: `sched-stride (component)`, or `stride` when built
    /// in.
    pub fn describe_global(&self) -> String {
        match crate::lock(&self.global_component).as_ref() {
            Some(component) => format!("{} (component)", component.name()),
            None => self.built_in_global().name().to_string(),
        }
    }

    fn built_in_global(&self) -> GlobalScheduler {
        if self.global.load(Ordering::Relaxed) == GlobalScheduler::RoundRobin as u8 {
            GlobalScheduler::RoundRobin
        } else {
            GlobalScheduler::Stride
        }
    }

    /// Makes `component` (or, with `None`, the built-in `policy`) the global scheduler and tells
    /// it which domains have runnable threads; returns the one it replaces.
    pub(crate) fn replace_global(
        &self,
        component: Option<Box<dyn GlobalPolicy>>,
        policy: GlobalScheduler,
    ) -> Option<Box<dyn GlobalPolicy>> {
        let queue = crate::lock(&self.run_queue);
        let mut slot = crate::lock(&self.global_component);
        self.global.store(policy as u8, Ordering::Relaxed);
        let old = std::mem::replace(&mut *slot, component);
        if let Some(component) = slot.as_mut() {
            let told = queue
                .domains
                .values()
                .filter(|r| r.eligible())
                .try_for_each(|r| component.runnable(r.domain.id, tickets(&r.domain)));
            if let Err(e) = told {
                self.fail_global(&mut slot, &e);
            }
        }
        self.has_global_component.store(slot.is_some(), Ordering::Release);
        old
    }

    /// Drops a global scheduler component that failed; the built-in one takes over.
    fn fail_global(&self, slot: &mut Option<Box<dyn GlobalPolicy>>, error: &str) {
        let Some(failed) = slot.take() else { return };
        let policy = GlobalScheduler::named(failed.policy()).unwrap_or_default();
        self.global.store(policy as u8, Ordering::Relaxed);
        self.has_global_component.store(false, Ordering::Release);
        self.console.line(
            "kernel",
            &format!(
                "global scheduler {} failed: {error}; the built-in {} scheduler takes over",
                failed.name(),
                policy.name()
            ),
        );
    }

    /// Makes `component` (or the built-in `policy`) the local scheduler of `domain` and tells it
    /// of the domain's runnable threads; returns the one it replaces.
    pub(crate) fn replace_local(
        &self,
        domain: &ScheduledDomain,
        component: Option<(Box<dyn LocalPolicy>, u64)>,
        policy: LocalScheduler,
    ) -> Option<Box<dyn LocalPolicy>> {
        let mut slot = crate::lock(&domain.component);
        let old = domain.install(&mut slot, component, policy);
        let mut queue = crate::lock(&self.run_queue);
        if let Some(component) = slot.as_mut() {
            let threads = queue.domains.get(&domain.id).map(|r| r.threads.iter().cloned().collect::<Vec<_>>());
            let told = threads
                .unwrap_or_default()
                .iter()
                .try_for_each(|t| component.runnable(t.id, t.priority.load(Ordering::Relaxed)));
            if let Err(e) = told {
                domain.fail(&mut slot, &e, &self.console);
            }
        }
        self.update(&mut queue, domain.id, |r| r.declined = false);
        drop(queue);
        drop(slot);
        self.kick();
        old
    }

    /// Changes the run-queue entry of domain `id` and tells a global scheduler component when
    /// the domain starts or stops having threads to run.
    fn update(&self, queue: &mut RunQueue, id: u32, change: impl FnOnce(&mut Runnable)) {
        let Some(entry) = queue.domains.get_mut(&id) else { return };
        let was = entry.eligible();
        change(entry);
        let is = entry.eligible();
        // A domain keeps its entry (and its queue's allocation) while it lives: a switch between
        // two threads of it empties and refills its queue every time.
        let gone = entry.threads.is_empty() && entry.domain.is_terminated();
        let tickets = tickets(&entry.domain);
        if is && !was {
            // A domain that was idle rejoins at the current virtual time: it cannot bank CPU.
            entry.domain.catch_up(self.virtual_time.load(Ordering::Acquire));
            entry.since = queue.next_since;
            queue.next_since += 1;
        }
        if gone {
            queue.domains.remove(&id);
        }
        if was != is {
            self.tell_global(|g| if is { g.runnable(id, tickets) } else { g.idle(id) });
        }
    }

    /// Replaces a failed local component by the built-in scheduler, which takes the threads the
    /// component passed over.
    fn fail_local(&self, scheduling: &ScheduledDomain, slot: &mut Option<Box<dyn LocalPolicy>>, error: &str) {
        scheduling.fail(slot, error, &self.console);
        self.update(&mut crate::lock(&self.run_queue), scheduling.id, |r| r.declined = false);
        self.kick();
    }

    /// Asks a domain's component whether its `thread` should let the domain's other threads
    /// run before its portal call (the opt-in `portal_call` notification).
    pub(crate) fn defers_outgoing(&self, scheduling: &ScheduledDomain, thread: u32) -> bool {
        self.defers(scheduling, |c| c.portal_call(thread))
    }

    /// Asks a domain's component whether a call from domain `caller` into one of its services
    /// should let the domain's threads run first (the opt-in `incoming_call` notification).
    pub(crate) fn defers_incoming(&self, scheduling: &ScheduledDomain, caller: u32) -> bool {
        self.defers(scheduling, |c| c.incoming_call(caller))
    }

    /// The component's answer to a portal-call notification; a failing component is replaced
    /// and the call goes ahead.
    fn defers(
        &self,
        scheduling: &ScheduledDomain,
        question: impl FnOnce(&mut Box<dyn LocalPolicy>) -> Result<bool, String>,
    ) -> bool {
        let mut slot = crate::lock(&scheduling.component);
        match slot.as_mut().map(question) {
            Some(Ok(defer)) => defer,
            Some(Err(e)) => {
                self.fail_local(scheduling, &mut slot, &e);
                false
            }
            None => false,
        }
    }

    fn tell_global(&self, notice: impl FnOnce(&mut Box<dyn GlobalPolicy>) -> Result<(), String>) {
        if !self.has_global_component.load(Ordering::Acquire) {
            return;
        }
        let mut slot = crate::lock(&self.global_component);
        if let Some(Err(e)) = slot.as_mut().map(notice) {
            self.fail_global(&mut slot, &e);
        }
    }

    /// Wakes a parked CPU, if any: there may be work.
    fn kick(&self) {
        if self.parked.load(Ordering::Acquire) > 0 {
            let _queue = crate::lock(&self.run_queue);
            self.runnable.notify_one();
        }
    }

    /// Puts `thread` in the run queue and tells its domain's scheduler component — unless the
    /// thread is the one this CPU runs and its slice just ended: then the CPU tells the
    /// component after the thread stopped (`preempted` or `interrupted`).
    fn enqueue(&self, thread: Arc<Thread>) {
        let current = CURRENT.with(Cell::get) == thread.id;
        let preempted = current && PREEMPTED.with(Cell::get);
        let stopped = preempted || (current && INTERRUPTED.with(Cell::get));
        thread.preempted.store(preempted, Ordering::Relaxed);
        // Held until the thread is queued, so that the component never answers a thread the
        // queue does not hold yet.
        let scheduling =
            (!stopped && thread.domain.has_component.load(Ordering::Acquire)).then(|| thread.domain.clone());
        let mut slot = scheduling.as_ref().map(|s| crate::lock(&s.component));
        let mut told = false;
        if let (Some(slot), Some(scheduling)) = (slot.as_mut(), &scheduling) {
            match slot.as_mut().map(|c| c.runnable(thread.id, thread.priority.load(Ordering::Relaxed))) {
                Some(Ok(())) => told = true,
                Some(Err(e)) => {
                    scheduling.fail(slot, &e, &self.console);
                    told = true;
                }
                None => {}
            }
        }
        {
            let mut queue = crate::lock(&self.run_queue);
            let id = thread.domain.id;
            queue.domains.entry(id).or_insert_with(|| Runnable {
                domain: thread.domain.clone(),
                threads: VecDeque::new(),
                declined: false,
                since: 0,
            });
            self.update(&mut queue, id, |r| {
                r.threads.push_back(thread);
                r.declined &= !told;
            });
            self.queued.fetch_add(1, Ordering::Release);
        }
        drop(slot);
        if self.parked.load(Ordering::Acquire) > 0 {
            self.runnable.notify_one();
        }
    }

    /// The next thread to run on `cpu`, and whether the CPU had to wait for it.
    fn next(&self, cpu: u32) -> Option<(Arc<Thread>, bool)> {
        // Look for work a little before parking: waking a parked OS thread costs tens of
        // microseconds, far more than the work a portal hand-off or a new thread brings. Between
        // looks the CPU offers its core to the machine's other threads (`BusyPoll`): a spin that
        // held the core starved the threads that bring the work, a TAP card's or a client's
        // (docs/BENCHMARKS.md, "Idle kernel CPUs that give way"). The clock is read only when
        // there is nothing to run: it costs as much as the rest of a switch.
        let mut waited = self.queued.load(Ordering::Acquire) == 0;
        if waited {
            let idle = BusyPoll::new(CPU_LOOK);
            while self.queued.load(Ordering::Acquire) == 0 && !self.stop.load(Ordering::Acquire) && idle.look_again() {}
        }
        let mut queue = crate::lock(&self.run_queue);
        // Stale answers in a row: each one took a thread out of the component's view.
        let mut stale = 0;
        loop {
            if self.stop.load(Ordering::Acquire) {
                return None;
            }
            let Some(domain) = self.pick_domain(&mut queue, cpu) else {
                waited = true;
                self.parked.fetch_add(1, Ordering::AcqRel);
                queue = self.runnable.wait(queue).unwrap_or_else(std::sync::PoisonError::into_inner);
                self.parked.fetch_sub(1, Ordering::AcqRel);
                continue;
            };
            self.virtual_time.fetch_max(domain.pass(), Ordering::AcqRel);
            if domain.has_component.load(Ordering::Acquire) {
                // JX's `activated()`: the component is not trusted to return soon, so the run
                // queue is not held meanwhile.
                drop(queue);
                let (picked, _component) = self.ask_local(&domain, |c| c.activated(cpu), "activated");
                queue = crate::lock(&self.run_queue);
                match picked {
                    Answer::Thread(id) => match self.take(&mut queue, domain.id, id) {
                        Some(thread) => return Some((thread, waited)),
                        // A thread the component held twice, or that ran meanwhile: ask again,
                        // a few times, before passing the domain over.
                        None if stale < MAX_STALE_ANSWERS => stale += 1,
                        None => self.update(&mut queue, domain.id, |r| r.declined = true),
                    },
                    Answer::Nothing => self.update(&mut queue, domain.id, |r| r.declined = true),
                    Answer::Failed => {}
                    Answer::NoComponent => {
                        if let Some(thread) = self.take_built_in(&mut queue, &domain) {
                            return Some((thread, waited));
                        }
                    }
                }
                continue;
            }
            if let Some(thread) = self.take_built_in(&mut queue, &domain) {
                return Some((thread, waited));
            }
        }
    }

    /// Asks `domain`'s scheduler component which thread to run and checks the answer: a thread
    /// that is not the domain's is garbage and replaces the component by the built-in one.
    ///
    /// The component stays locked, in the guard returned, until the caller has acted on the
    /// answer in the run queue. A thread made runnable meanwhile is told to the component and
    /// queued under that lock (`enqueue`), which clears the domain's `declined`: had the lock
    /// gone before the caller set `declined` for an answer of nothing, the notice could fall
    /// between the two, and the domain would be passed over with a thread the component knows
    /// of — a system that never ran that thread again (seen: one boot in about sixty of a
    /// domain under `sched-round-robin`, its init never returning).
    fn ask_local<'d>(
        &self,
        domain: &'d ScheduledDomain,
        question: impl FnOnce(&mut Box<dyn LocalPolicy>) -> Result<u32, String>,
        what: &str,
    ) -> (Answer, MutexGuard<'d, Option<Box<dyn LocalPolicy>>>) {
        let mut slot = crate::lock(&domain.component);
        let Some(component) = slot.as_mut() else { return (Answer::NoComponent, slot) };
        let error = match question(component) {
            Ok(0) => return (Answer::Nothing, slot),
            // A thread of the domain that is not queued (it ran or blocked meanwhile) is a stale
            // answer, not garbage: the queue decides.
            Ok(id) if crate::lock(&domain.threads).iter().any(|t| t.id == id) => return (Answer::Thread(id), slot),
            Ok(id) => format!("{what}() answered thread {id}, which is not a thread of the domain"),
            Err(e) => e,
        };
        self.fail_local(domain, &mut slot, &error);
        (Answer::Failed, slot)
    }

    /// Removes thread `id` of domain `domain` from the run queue.
    fn take(&self, queue: &mut RunQueue, domain: u32, id: u32) -> Option<Arc<Thread>> {
        let index = queue.domains.get(&domain)?.threads.iter().position(|t| t.id == id)?;
        let mut taken = None;
        self.update(queue, domain, |r| taken = r.threads.remove(index));
        self.queued.fetch_sub(1, Ordering::AcqRel);
        taken
    }

    /// The thread the built-in local policy of `domain` picks, removed from the queue. Inlined
    /// into `run_cpu` (through `next`) by request: left to itself the compiler called it once
    /// `run_cpu` took the services' charges, +13 instructions per thread switch (callgrind).
    #[inline(always)]
    fn take_built_in(&self, queue: &mut RunQueue, domain: &ScheduledDomain) -> Option<Arc<Thread>> {
        let threads = &queue.domains.get(&domain.id)?.threads;
        let index = match domain.built_in() {
            LocalScheduler::RoundRobin => 0,
            // `max_by_key` keeps the last of equals: reverse to keep the first.
            LocalScheduler::Priority => {
                threads.iter().enumerate().rev().max_by_key(|(_, t)| t.priority.load(Ordering::Relaxed))?.0
            }
            LocalScheduler::Fifo => threads.iter().position(|t| t.preempted.load(Ordering::Relaxed)).unwrap_or(0),
        };
        let id = threads.get(index)?.id;
        self.take(queue, domain.id, id)
    }

    /// The global level: the domain that runs next, among those with threads to run.
    fn pick_domain(&self, queue: &mut RunQueue, cpu: u32) -> Option<Arc<ScheduledDomain>> {
        if !queue.domains.values().any(Runnable::eligible) {
            return None;
        }
        if self.has_global_component.load(Ordering::Acquire) {
            let mut slot = crate::lock(&self.global_component);
            if let Some(component) = slot.as_mut() {
                let error = match component.pick(cpu) {
                    Ok(id) => match queue.domains.get_mut(&id).filter(|r| r.eligible()) {
                        Some(entry) => {
                            entry.since = queue.next_since;
                            queue.next_since += 1;
                            return Some(entry.domain.clone());
                        }
                        None => format!("pick() answered domain {id}, which has no thread to run"),
                    },
                    Err(e) => e,
                };
                self.fail_global(&mut slot, &error);
            }
        }
        let eligible = queue.domains.values_mut().filter(|r| r.eligible());
        let entry = match self.built_in_global() {
            GlobalScheduler::Stride => eligible.min_by_key(|r| r.domain.pass()),
            GlobalScheduler::RoundRobin => eligible.min_by_key(|r| r.since),
        }?;
        entry.since = queue.next_since;
        queue.next_since += 1;
        Some(entry.domain.clone())
    }

    /// After `thread` stopped at the end of its slice: tells its domain's component, which did
    /// not hear of it when it was queued.
    fn preempted(&self, thread: &Thread) {
        let domain = &thread.domain;
        let mut slot = crate::lock(&domain.component);
        let Some(component) = slot.as_mut() else { return };
        match component.preempted(thread.id, thread.priority.load(Ordering::Relaxed)) {
            Ok(()) => self.update(&mut crate::lock(&self.run_queue), domain.id, |r| r.declined = false),
            Err(e) => self.fail_local(domain, &mut slot, &e),
        }
        drop(slot);
        self.kick();
    }

    /// After `thread` stopped at the end of its local scheduler's slice, within its domain's:
    /// the thread of the same domain the component picks to run next, on the same CPU.
    fn interrupted(&self, thread: &Thread) -> Option<Arc<Thread>> {
        let domain = &thread.domain;
        let priority = thread.priority.load(Ordering::Relaxed);
        let (answer, _component) = self.ask_local(domain, |c| c.interrupted(thread.id, priority), "interrupted");
        let mut queue = crate::lock(&self.run_queue);
        match answer {
            // A stale answer: the CPU asks the two levels afresh.
            Answer::Thread(id) => self.take(&mut queue, domain.id, id),
            Answer::Nothing => {
                self.update(&mut queue, domain.id, |r| r.declined = true);
                None
            }
            Answer::Failed | Answer::NoComponent => None,
        }
    }

    fn run_cpu(&self, cpu: u32) {
        // One clock read per switch: the end of one poll is the start of the next, unless the
        // CPU waited for work in between.
        let mut clock = Instant::now();
        let mut same_domain: Option<Arc<Thread>> = None;
        loop {
            let thread = match same_domain.take() {
                Some(thread) => thread,
                None => {
                    let Some((thread, waited)) = self.next(cpu) else { break };
                    if waited {
                        clock = Instant::now();
                    }
                    SLICE_END.with(|end| end.set(Some(clock + self.slice)));
                    thread
                }
            };
            thread.queued.store(false, Ordering::Release);
            let mut body = crate::lock(&thread.body);
            let Some((future, waker)) = body.as_mut() else {
                continue;
            };
            let traced = self.trace.is_on().then(|| {
                Trace::set_running(thread.domain.id, thread.id);
                self.trace.now()
            });
            thread.preempted.store(false, Ordering::Relaxed);
            CURRENT.with(|c| c.set(thread.id));
            let poll = future.as_mut().poll(&mut Context::from_waker(waker));
            CURRENT.with(|c| c.set(0));
            let preempted = PREEMPTED.with(|p| p.replace(false));
            let interrupted = INTERRUPTED.with(|i| i.replace(false));
            let end = Instant::now();
            let ran = end.duration_since(clock).as_nanos() as u64;
            clock = end;
            if let Some(start) = traced {
                self.trace.ran(thread.domain.id, thread.id, cpu, start, ran);
            }
            // Only the CPU that holds the body writes it: no read-modify-write needed.
            thread.cpu_ns.store(thread.cpu_ns.load(Ordering::Relaxed) + ran, Ordering::Relaxed);
            let donated = DONATED.with(|d| d.replace(0)).min(ran);
            thread.domain.cpu_ns.fetch_add(ran - donated, Ordering::Relaxed);
            thread.domain.advance(ran);
            self.tell_global(|g| g.ran(thread.domain.id, ran));
            match poll {
                Poll::Ready(code) => {
                    *body = None;
                    drop(body);
                    thread.finish(code);
                    if !thread.daemon && self.live.fetch_sub(1, Ordering::AcqRel) == 1 {
                        let _guard = crate::lock(&self.done_lock);
                        self.all_done.notify_all();
                    }
                }
                Poll::Pending => {
                    drop(body);
                    if interrupted {
                        same_domain = self.interrupted(&thread);
                    } else if preempted {
                        self.preempted(&thread);
                    }
                }
            }
        }
    }

    /// Threads that have not ended.
    pub fn live_threads(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    /// Waits until no thread is alive or `timeout` passes; true when all ended.
    pub fn wait_idle(&self, timeout: Option<Duration>) -> bool {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut guard = crate::lock(&self.done_lock);
        while self.live.load(Ordering::Acquire) != 0 {
            let wait = match deadline {
                Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                    Some(left) => left.min(Duration::from_millis(50)),
                    None => return false,
                },
                None => Duration::from_millis(50),
            };
            guard = self.all_done.wait_timeout(guard, wait).unwrap_or_else(std::sync::PoisonError::into_inner).0;
        }
        true
    }

    /// A wait until `deadline`, woken by [`Scheduler::wake_sleepers`] (the kernel's timer, so
    /// with the timer's 1 ms resolution).
    pub(crate) fn sleep(self: &Arc<Self>, deadline: Instant) -> Sleep {
        Sleep { scheduler: self.clone(), deadline, key: None }
    }

    /// Wakes the threads whose sleep ended by `now`.
    pub(crate) fn wake_sleepers(&self, now: Instant) {
        let due: Vec<Waker> = {
            let mut sleepers = crate::lock(&self.sleepers);
            let later = sleepers.split_off(&(now, u64::MAX));
            std::mem::replace(&mut *sleepers, later).into_values().collect()
        };
        due.into_iter().for_each(Waker::wake);
    }

    /// Forgets the sleeping threads and the run queue's domains (at shutdown).
    pub(crate) fn forget_threads(&self) {
        drop(std::mem::take(&mut crate::lock(&self.run_queue).domains));
        drop(std::mem::take(&mut *crate::lock(&self.sleepers)));
    }

    /// Stops the CPUs after their current poll and drops the global scheduler component.
    pub fn stop(&self) {
        drop(crate::lock(&self.global_component).take());
        self.has_global_component.store(false, Ordering::Release);
        self.stop.store(true, Ordering::Release);
        let _queue = crate::lock(&self.run_queue);
        self.runnable.notify_all();
    }
}

/// What a local scheduler component answered, checked.
enum Answer {
    /// A thread of the domain (which may have left the queue meanwhile).
    Thread(u32),
    /// Nothing to run now.
    Nothing,
    /// It failed and was replaced by the built-in scheduler.
    Failed,
    /// The domain has no component any more.
    NoComponent,
}

/// A domain's CPU tickets as a global scheduler component sees them.
fn tickets(domain: &ScheduledDomain) -> u32 {
    u32::try_from(domain.cpu_tickets()).unwrap_or(u32::MAX)
}

/// A thread's sleep. Dropping it (the thread was terminated) removes it from the sleepers.
pub(crate) struct Sleep {
    scheduler: Arc<Scheduler>,
    deadline: Instant,
    key: Option<(Instant, u64)>,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        let key = match self.key {
            Some(key) => key,
            None => {
                let key = (self.deadline, self.scheduler.next_sleeper.fetch_add(1, Ordering::Relaxed));
                self.key = Some(key);
                key
            }
        };
        crate::lock(&self.scheduler.sleepers).insert(key, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            crate::lock(&self.scheduler.sleepers).remove(&key);
        }
    }
}

/// A future that is pending once, after asking to be polled again: a yield to the scheduler.
pub(crate) struct YieldOnce(bool);

impl YieldOnce {
    pub(crate) fn new() -> Self {
        YieldOnce(false)
    }
}

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Log = Arc<Mutex<Vec<&'static str>>>;

    fn scheduler(global: GlobalScheduler) -> Arc<Scheduler> {
        Scheduler::new(global, Duration::from_millis(10), Arc::new(Console::capture()))
    }

    fn domain(id: u32, tickets: u64, policy: LocalScheduler) -> Arc<ScheduledDomain> {
        Arc::new(ScheduledDomain::new(id, format!("D{id}"), tickets, policy))
    }

    /// How one poll of a test thread ends, before its last one, which returns.
    #[derive(Clone, Copy)]
    enum Stop {
        /// It asks to run again (`yield`).
        Yield,
        /// Its slice ended: the epoch callback's mark, then the same wake.
        Preempted,
    }

    /// A thread body that logs `name` at each poll and ends the polls as `stops` say, then
    /// returns `code`.
    fn body(name: &'static str, domain: &Arc<ScheduledDomain>, stops: Vec<Stop>, code: i32, log: &Log) -> ThreadBody {
        let (domain, log) = (domain.clone(), log.clone());
        let mut stops = stops.into_iter();
        Box::pin(std::future::poll_fn(move |cx| {
            crate::lock(&log).push(name);
            match stops.next() {
                Some(stop) => {
                    if let Stop::Preempted = stop {
                        note_deadline(&domain, 10);
                    }
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                None => Poll::Ready(code),
            }
        }))
    }

    /// Runs the queued threads on one CPU until all have ended.
    fn run(scheduler: &Arc<Scheduler>) {
        let cpus = scheduler.start_cpus(1).unwrap();
        assert!(scheduler.wait_idle(Some(Duration::from_secs(60))), "the threads ended");
        scheduler.stop();
        cpus.into_iter().for_each(|cpu| cpu.join().unwrap());
    }

    /// The order in which one domain under `policy` runs threads A, B, C (spawned in that order,
    /// with these priorities and stops), two polls each.
    fn order(policy: LocalScheduler, threads: [(i32, Stop); 3]) -> Vec<&'static str> {
        let scheduler = scheduler(GlobalScheduler::Stride);
        let domain = domain(1, 100, policy);
        let log = Log::default();
        for ((name, (priority, stop)), id) in ["A", "B", "C"].into_iter().zip(threads).zip(1..) {
            let thread =
                scheduler.spawn(id, domain.clone(), name.into(), body(name, &domain, vec![stop], 0, &log), false);
            thread.set_priority(priority);
        }
        run(&scheduler);
        crate::lock(&log).clone()
    }

    #[test]
    fn round_robin_sends_a_yielding_or_preempted_thread_to_the_back() {
        let threads = [(0, Stop::Preempted), (0, Stop::Yield), (0, Stop::Yield)];
        assert_eq!(order(LocalScheduler::RoundRobin, threads), ["A", "B", "C", "A", "B", "C"]);
    }

    #[test]
    fn fifo_resumes_a_preempted_thread_first_but_not_one_that_yielded() {
        let threads = [(0, Stop::Preempted), (0, Stop::Yield), (0, Stop::Yield)];
        assert_eq!(order(LocalScheduler::Fifo, threads), ["A", "A", "B", "C", "B", "C"]);
    }

    #[test]
    fn priority_runs_the_highest_first_and_takes_turns_among_equals() {
        let threads = [(0, Stop::Yield), (5, Stop::Yield), (5, Stop::Preempted)];
        assert_eq!(order(LocalScheduler::Priority, threads), ["B", "C", "B", "C", "A", "A"]);
        let threads = [(-1, Stop::Yield), (0, Stop::Yield), (7, Stop::Yield)];
        assert_eq!(order(LocalScheduler::Priority, threads), ["C", "C", "B", "B", "A", "A"]);
    }

    #[test]
    fn ended_threads_leave_their_exit_codes_and_daemons_do_not_keep_the_system_busy() {
        let scheduler = scheduler(GlobalScheduler::Stride);
        let domain = domain(1, 100, LocalScheduler::RoundRobin);
        let log = Log::default();
        let first =
            scheduler.spawn(1, domain.clone(), "a".into(), body("a", &domain, vec![Stop::Yield], 7, &log), false);
        scheduler.spawn(2, domain.clone(), "b".into(), body("b", &domain, vec![], -3, &log), false);
        // A daemon (an interrupt handler) that waits for good.
        scheduler.spawn(3, domain.clone(), "daemon".into(), Box::pin(std::future::pending()), true);
        assert_eq!(scheduler.live_threads(), 2, "the daemon is not counted");
        run(&scheduler);
        assert_eq!((first.exit_code(), first.wait()), (Some(7), 7));
        assert_eq!((domain.exit_code(1), domain.exit_code(2), domain.exit_code(3)), (Some(7), Some(-3), None));
        assert_eq!(domain.live_threads(), 1, "only the daemon is left");
        assert_eq!(domain.threads_started.load(Ordering::Relaxed), 3);
        assert_eq!(scheduler.live_threads(), 0);
    }

    /// Plays the global level without running anything: each turn the scheduler picks a thread
    /// as a CPU would, charges its domain `ns` of CPU, and makes the thread runnable again.
    /// Returns how many turns each domain (by id − 1) got.
    fn turns(scheduler: &Scheduler, threads: &[Arc<Thread>], count: usize, ns: u64) -> Vec<usize> {
        let mut turns = vec![0; threads.len()];
        for _ in 0..count {
            let (thread, _) = scheduler.next(0).unwrap();
            thread.queued.store(false, Ordering::Release);
            turns[thread.domain.id as usize - 1] += 1;
            thread.domain.advance(ns);
            thread.wake_up();
        }
        turns
    }

    fn idle_thread(scheduler: &Arc<Scheduler>, id: u32, domain: &Arc<ScheduledDomain>) -> Arc<Thread> {
        scheduler.spawn(id, domain.clone(), String::new(), Box::pin(std::future::pending()), false)
    }

    #[test]
    fn stride_gives_domains_turns_in_proportion_to_their_tickets() {
        let scheduler = scheduler(GlobalScheduler::Stride);
        let (a, b) = (domain(1, 3, LocalScheduler::RoundRobin), domain(2, 1, LocalScheduler::RoundRobin));
        let threads = [idle_thread(&scheduler, 1, &a), idle_thread(&scheduler, 2, &b)];
        // Every turn costs 3 ms: A's pass grows by one unit a turn, B's by three.
        assert_eq!(turns(&scheduler, &threads, 400, 3_000_000), [300, 100]);
        assert_eq!(a.pass(), 300 * (3_000_000 << 20) / 3);
        assert_eq!(b.pass(), 100 * (3_000_000 << 20));
    }

    #[test]
    fn global_round_robin_ignores_tickets() {
        let scheduler = scheduler(GlobalScheduler::RoundRobin);
        let (a, b) = (domain(1, 3, LocalScheduler::RoundRobin), domain(2, 1, LocalScheduler::RoundRobin));
        let threads = [idle_thread(&scheduler, 1, &a), idle_thread(&scheduler, 2, &b)];
        assert_eq!(turns(&scheduler, &threads, 400, 3_000_000), [200, 200]);
    }

    /// A domain that had nothing to run rejoins at the current virtual time: it cannot bank
    /// the CPU it did not use and then hold the CPU for a long run of turns.
    #[test]
    fn stride_lets_no_idle_domain_bank_cpu() {
        let scheduler = scheduler(GlobalScheduler::Stride);
        let (a, b) = (domain(1, 3, LocalScheduler::RoundRobin), domain(2, 1, LocalScheduler::RoundRobin));
        let a_thread = idle_thread(&scheduler, 1, &a);
        assert_eq!(turns(&scheduler, std::slice::from_ref(&a_thread), 100, 3_000_000), [100]);
        let threads = [a_thread, idle_thread(&scheduler, 2, &b)];
        assert_eq!(b.pass(), 99 * (1_000_000 << 20), "B starts where A was last picked");
        assert_eq!(turns(&scheduler, &threads, 40, 3_000_000), [30, 10]);
    }

    #[test]
    fn tickets_are_at_least_one_and_a_parent_keeps_one() {
        assert_eq!(domain(1, 0, LocalScheduler::RoundRobin).cpu_tickets(), 1, "no division by zero");
        let parent = domain(1, 100, LocalScheduler::RoundRobin);
        assert!(!parent.take_tickets(100), "the parent must keep a ticket");
        assert!(!parent.take_tickets(u64::MAX));
        assert_eq!(parent.cpu_tickets(), 100, "a refused take takes nothing");
        assert!(parent.take_tickets(99));
        assert_eq!(parent.cpu_tickets(), 1);
        parent.return_tickets(99);
        assert_eq!(parent.cpu_tickets(), 100);
    }

    /// Live, on one CPU, two domains with tickets 3 and 1 spin in turns of about 20 µs. Wall
    /// time varies on a loaded machine, so the test checks the two facts that make stride
    /// scheduling proportional, whatever each turn cost: whenever a domain runs, its pass is the
    /// smaller; and each pass is the domain's CPU time × 2^20 / its tickets.
    #[test]
    fn stride_on_a_cpu_always_runs_the_domain_furthest_behind_its_share() {
        let scheduler = scheduler(GlobalScheduler::Stride);
        let domains = [domain(1, 3, LocalScheduler::RoundRobin), domain(2, 1, LocalScheduler::RoundRobin)];
        let polls = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let seen = Arc::new(Mutex::new(Vec::new()));
        for (index, domain) in domains.iter().enumerate() {
            let (domains, polls, seen) = (domains.clone(), polls.clone(), seen.clone());
            let body = std::future::poll_fn(move |cx| {
                let total = polls.iter().map(|p| p.load(Ordering::Relaxed)).sum::<u64>();
                if total >= 400 {
                    return Poll::Ready(0);
                }
                crate::lock(&seen).push((index, domains[0].pass(), domains[1].pass()));
                let until = Instant::now() + Duration::from_micros(20);
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
                polls[index].fetch_add(1, Ordering::Relaxed);
                cx.waker().wake_by_ref();
                Poll::Pending
            });
            scheduler.spawn(index as u32 + 1, domain.clone(), String::new(), Box::pin(body), false);
        }
        run(&scheduler);
        let seen = crate::lock(&seen).clone();
        assert_eq!(seen.len(), 400);
        for (turn, &(index, pass_a, pass_b)) in seen.iter().enumerate() {
            let (mine, other) = if index == 0 { (pass_a, pass_b) } else { (pass_b, pass_a) };
            assert!(mine <= other, "turn {turn}: domain {} ran with pass {mine} > {other}", index + 1);
        }
        let (a, b) = (&domains[0], &domains[1]);
        let cpu = |d: &ScheduledDomain| u128::from(d.cpu_ns.load(Ordering::Relaxed)) << 20;
        // Each turn's charge is rounded down once: A's pass is short of its share by < 1 a turn.
        let polls_a = u128::from(polls[0].load(Ordering::Relaxed)) + 1;
        assert!(u128::from(a.pass()) <= cpu(a) / 3 && u128::from(a.pass()) + polls_a >= cpu(a) / 3);
        assert_eq!(u128::from(b.pass()), cpu(b));
        assert!(polls[0].load(Ordering::Relaxed) > 0 && polls[1].load(Ordering::Relaxed) > 0, "both ran");
    }
}
