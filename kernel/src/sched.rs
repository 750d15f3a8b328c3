//! Threads and the built-in scheduler.
//!
//! A Domos thread is a wasmtime store running one call (`domos_main`, `domos_thread_entry`, or
//! `domos_init`) on a fiber, driven as a future. The kernel's CPUs are worker OS threads that
//! take runnable threads from one run queue and poll them. The queue is ordered by stride
//! scheduling over domains: each domain holds CPU tickets (`cpu_share`), the time its threads
//! run advances its pass by time / tickets, and the thread of the domain with the smallest pass
//! runs next, so domains get CPU in proportion to their tickets; a thread that blocks
//! (join, yield, waiting for a busy service) returns control to its CPU, and a timer preempts a
//! thread at the end of its slice through wasmtime's epoch interruption.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use crate::domain::Domain;
use crate::trace::Trace;

type ThreadBody = Pin<Box<dyn Future<Output = i32> + Send>>;

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
    /// The name used in configurations and manifests.
    pub fn name(self) -> &'static str {
        match self {
            LocalScheduler::RoundRobin => "round-robin",
            LocalScheduler::Priority => "priority",
            LocalScheduler::Fifo => "fifo",
        }
    }
}

thread_local! {
    /// Set by the preemption callback while a CPU polls a thread: the thread was preempted.
    static PREEMPTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Notes that the thread the calling CPU polls is being preempted (its slice ended).
pub(crate) fn note_preemption() {
    PREEMPTED.with(|p| p.set(true));
}

/// How long an idle CPU looks for work before it parks its OS thread.
const IDLE_SPIN: Duration = Duration::from_micros(50);

/// A thread of a domain. It never leaves its domain.
pub struct Thread {
    /// Unique id.
    pub id: u32,
    /// Its domain.
    pub domain: Arc<Domain>,
    /// What it runs, for reports (`app-demo main`).
    pub label: String,
    scheduler: Arc<Scheduler>,
    body: Mutex<Option<ThreadBody>>,
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

    /// Sets the priority the `priority` local scheduler orders threads by.
    pub fn set_priority(&self, priority: i32) {
        self.priority.store(priority, Ordering::Relaxed);
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
        crate::lock(&self.domain.exit_codes).insert(self.id, code);
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

/// The built-in scheduler (stride scheduling over domains) and its CPUs.
pub struct Scheduler {
    run_queue: Mutex<VecDeque<Arc<Thread>>>,
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
    global: GlobalScheduler,
}

impl Scheduler {
    /// A scheduler with no CPUs yet, picking domains by `global`.
    pub fn new(global: GlobalScheduler) -> Arc<Scheduler> {
        Arc::new(Scheduler {
            run_queue: Mutex::new(VecDeque::new()),
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
            global,
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
        domain: Arc<Domain>,
        label: String,
        body: ThreadBody,
        daemon: bool,
    ) -> Arc<Thread> {
        let thread = Arc::new(Thread {
            id,
            domain: domain.clone(),
            label,
            scheduler: self.clone(),
            body: Mutex::new(Some(body)),
            queued: AtomicBool::new(false),
            exit: Mutex::new(None),
            exited: Condvar::new(),
            joiners: Mutex::new(Vec::new()),
            cpu_ns: AtomicU64::new(0),
            priority: std::sync::atomic::AtomicI32::new(0),
            preempted: AtomicBool::new(false),
            daemon,
        });
        self.trace.thread_started(domain.id, id, &thread.label);
        crate::lock(&domain.threads).push(thread.clone());
        domain.stats.threads_started.fetch_add(1, Ordering::Relaxed);
        if !daemon {
            self.live.fetch_add(1, Ordering::AcqRel);
        }
        thread.wake_up();
        thread
    }

    fn enqueue(&self, thread: Arc<Thread>) {
        {
            let mut queue = crate::lock(&self.run_queue);
            // A domain that was idle rejoins at the current virtual time: it cannot bank CPU.
            thread.domain.catch_up(self.virtual_time.load(Ordering::Acquire));
            queue.push_back(thread);
            self.queued.fetch_add(1, Ordering::Release);
        }
        if self.parked.load(Ordering::Acquire) > 0 {
            self.runnable.notify_one();
        }
    }

    /// The next thread to run, and whether the CPU had to wait for it.
    fn next(&self) -> Option<(Arc<Thread>, bool)> {
        // Spin a little before parking: waking a parked OS thread costs tens of microseconds,
        // far more than the work a portal hand-off or a new thread brings. The clock is read
        // only when there is nothing to run: it costs as much as the rest of a switch.
        let mut waited = self.queued.load(Ordering::Acquire) == 0;
        if waited {
            let spin_until = Instant::now() + IDLE_SPIN;
            while self.queued.load(Ordering::Acquire) == 0
                && !self.stop.load(Ordering::Acquire)
                && Instant::now() < spin_until
            {
                for _ in 0..64 {
                    std::hint::spin_loop();
                }
            }
        }
        let mut queue = crate::lock(&self.run_queue);
        loop {
            if self.stop.load(Ordering::Acquire) {
                return None;
            }
            let pick = self.pick(&queue);
            if let Some(thread) = pick.and_then(|i| queue.remove(i)) {
                self.queued.fetch_sub(1, Ordering::AcqRel);
                self.virtual_time.fetch_max(thread.domain.pass(), Ordering::AcqRel);
                return Some((thread, waited));
            }
            waited = true;
            self.parked.fetch_add(1, Ordering::AcqRel);
            queue = self.runnable.wait(queue).unwrap_or_else(std::sync::PoisonError::into_inner);
            self.parked.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The two levels: the global policy picks a domain among those with runnable threads,
    /// the domain's local policy picks one of its threads. Queue order is arrival order.
    fn pick(&self, queue: &VecDeque<Arc<Thread>>) -> Option<usize> {
        let domain = match self.global {
            GlobalScheduler::Stride => queue.iter().min_by_key(|t| t.domain.pass())?.domain.clone(),
            GlobalScheduler::RoundRobin => queue.front()?.domain.clone(),
        };
        let mine = queue.iter().enumerate().filter(|(_, t)| Arc::ptr_eq(&t.domain, &domain));
        match domain.local {
            LocalScheduler::RoundRobin => mine.map(|(i, _)| i).next(),
            // `max_by_key` keeps the last of equals: reverse to keep the first.
            LocalScheduler::Priority => {
                mine.rev().max_by_key(|(_, t)| t.priority.load(Ordering::Relaxed)).map(|(i, _)| i)
            }
            LocalScheduler::Fifo => {
                let mut mine = mine.peekable();
                let first = mine.peek().map(|(i, _)| *i);
                mine.find(|(_, t)| t.preempted.load(Ordering::Relaxed)).map(|(i, _)| i).or(first)
            }
        }
    }

    fn run_cpu(&self, cpu: u32) {
        // One clock read per switch: the end of one poll is the start of the next, unless the
        // CPU waited for work in between.
        let mut clock = Instant::now();
        while let Some((thread, waited)) = self.next() {
            if waited {
                clock = Instant::now();
            }
            thread.queued.store(false, Ordering::Release);
            let mut body = crate::lock(&thread.body);
            let Some(future) = body.as_mut() else {
                continue;
            };
            let waker = Waker::from(thread.clone());
            let traced = self.trace.is_on().then(|| {
                Trace::set_running(thread.domain.id, thread.id);
                self.trace.now()
            });
            thread.preempted.store(false, Ordering::Relaxed);
            PREEMPTED.with(|p| p.set(false));
            let poll = future.as_mut().poll(&mut Context::from_waker(&waker));
            if PREEMPTED.with(std::cell::Cell::get) {
                thread.preempted.store(true, Ordering::Relaxed);
            }
            let end = Instant::now();
            let ran = end.duration_since(clock).as_nanos() as u64;
            clock = end;
            if let Some(start) = traced {
                self.trace.ran(thread.domain.id, thread.id, cpu, start, ran);
            }
            thread.cpu_ns.fetch_add(ran, Ordering::Relaxed);
            thread.domain.stats.cpu_ns.fetch_add(ran, Ordering::Relaxed);
            thread.domain.advance(ran);
            if let Poll::Ready(code) = poll {
                *body = None;
                drop(body);
                thread.finish(code);
                if !thread.daemon && self.live.fetch_sub(1, Ordering::AcqRel) == 1 {
                    let _guard = crate::lock(&self.done_lock);
                    self.all_done.notify_all();
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

    /// Forgets the sleeping threads (at shutdown).
    pub(crate) fn forget_sleepers(&self) {
        drop(std::mem::take(&mut *crate::lock(&self.sleepers)));
    }

    /// Stops the CPUs after their current poll.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        let _queue = crate::lock(&self.run_queue);
        self.runnable.notify_all();
    }
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
