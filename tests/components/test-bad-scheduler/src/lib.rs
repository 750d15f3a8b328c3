//! `test-bad-scheduler`: a round-robin local scheduler that misbehaves on purpose, so that the
//! system tests can check the kernel contains a broken scheduler.
//!
//! It schedules like `sched-round-robin`, except when the thread it would return from
//! `activated` or `interrupted` was last reported runnable with one of these priorities:
//! * [`LOOP`] (101): it loops forever, which the kernel must stop after about 2 ms;
//! * [`TRAP`] (102): it traps;
//! * [`BOGUS`] (103): it returns [`BOGUS_THREAD`], a thread the kernel never reported, and
//!   loses the real one.
//!
//! `preempted` is well behaved and bounded. It serves and uses no portal.
#![no_std]
#![deny(unsafe_code)]

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use domos_schedulers::ThreadSet;

domos_sdk::local_scheduler! { policy: POLICY, interrupted }

/// The priority that makes `activated` loop forever.
const LOOP: i32 = 101;
/// The priority that makes `activated` trap.
const TRAP: i32 = 102;
/// The priority that makes `activated` return [`BOGUS_THREAD`].
const BOGUS: i32 = 103;
/// The thread id returned for a thread of priority [`BOGUS`].
const BOGUS_THREAD: u32 = 0xdead_beef;

static POLICY: Misbehaving = Misbehaving { threads: ThreadSet::new() };
static SPINS: AtomicU32 = AtomicU32::new(0);

/// Round-robin, except for the threads of the priorities above.
struct Misbehaving {
    threads: ThreadSet,
}

impl Misbehaving {
    fn runnable(&self, thread: u32, priority: i32) {
        if !self.threads.update(thread, priority) {
            self.threads.push_back(thread, priority);
        }
    }

    fn preempted(&self, thread: u32, priority: i32) {
        self.threads.push_back(thread, priority);
    }

    fn activated(&self, _cpu: u32) -> u32 {
        let Some(entry) = self.threads.pick_by(|entry| entry.sequence) else { return 0 };
        match entry.priority {
            LOOP => loop {
                SPINS.fetch_add(1, Relaxed);
            },
            TRAP => core::arch::wasm32::unreachable(),
            BOGUS => BOGUS_THREAD,
            _ => entry.thread,
        }
    }

    fn interrupted(&self, thread: u32, priority: i32) -> u32 {
        self.preempted(thread, priority);
        self.activated(0)
    }
}
