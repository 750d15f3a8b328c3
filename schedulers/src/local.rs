//! The local (domain) scheduling policies of the shipped scheduler components.
//!
//! Each is a `static`-friendly value whose methods are the local scheduler ABI
//! (`domos_sdk::local_scheduler!`): `runnable` and `preempted` tell it of a runnable thread,
//! `activated` returns one to run (0 for none) and removes it, `interrupted` is `preempted`
//! then `activated`. `preempted` is straight-line code, as the kernel's bounded check requires.
//! A thread that does not fit (more than [`CAPACITY`](crate::CAPACITY) runnable) is dropped;
//! see the crate documentation.

use core::cmp::Reverse;

use crate::{RecentPriorities, ThreadSet};

/// A line of threads in the order they became runnable, the front one running next; where a
/// preempted or interrupted thread goes is the policy's choice.
pub struct Line<const PREEMPTED_FIRST: bool> {
    threads: ThreadSet,
}

/// Round-robin: threads run in the order they became runnable; a preempted or interrupted
/// thread goes to the back.
pub type RoundRobin = Line<false>;

/// First in, first out, without preemption inside the domain: a preempted or interrupted
/// thread resumes before any other thread of the domain; a thread that yields or is woken goes
/// to the back.
pub type Fifo = Line<true>;

impl<const PREEMPTED_FIRST: bool> Default for Line<PREEMPTED_FIRST> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const PREEMPTED_FIRST: bool> Line<PREEMPTED_FIRST> {
    /// A scheduler with no runnable thread, usable as a `static`.
    pub const fn new() -> Self {
        Line { threads: ThreadSet::new() }
    }

    /// `thread` became runnable (started, woken or yielded): it goes to the back. Told again
    /// while it waits, its priority changed: it keeps its place.
    pub fn runnable(&self, thread: u32, priority: i32) {
        if !self.threads.update(thread, priority) {
            self.threads.push_back(thread, priority);
        }
    }

    /// `thread`'s slice ended although it did not give up the CPU: it goes to the front under
    /// FIFO, to the back under round-robin.
    pub fn preempted(&self, thread: u32, priority: i32) {
        if PREEMPTED_FIRST {
            self.threads.push_front(thread, priority);
        } else {
            self.threads.push_back(thread, priority);
        }
    }

    /// The thread at the front, removed; 0 when none is runnable.
    pub fn activated(&self, _cpu: u32) -> u32 {
        self.threads.pick_by(|entry| entry.sequence).map_or(0, |entry| entry.thread)
    }

    /// `thread` was interrupted within the domain's slice: it goes where a preempted thread
    /// goes, and the thread at the front runs next (itself, under FIFO).
    pub fn interrupted(&self, thread: u32, priority: i32) -> u32 {
        self.preempted(thread, priority);
        self.activated(0)
    }
}

/// Fixed priority: the runnable thread of highest priority runs, first come first served
/// among equals.
///
/// It also answers the two opt-in notifications: before a portal call it lets the domain's
/// runnable threads of higher priority than the caller run first, and it holds back incoming
/// calls while a thread of priority above 0 is runnable.
pub struct FixedPriority {
    threads: ThreadSet,
    /// The priorities of the threads it returned, to know the caller's in
    /// [`portal_call`](Self::portal_call).
    picked: RecentPriorities,
}

impl Default for FixedPriority {
    fn default() -> Self {
        Self::new()
    }
}

impl FixedPriority {
    /// A scheduler with no runnable thread, usable as a `static`.
    pub const fn new() -> FixedPriority {
        FixedPriority { threads: ThreadSet::new(), picked: RecentPriorities::new() }
    }

    /// `thread` became runnable (started, woken or yielded). Told again while it waits, its
    /// priority changed.
    pub fn runnable(&self, thread: u32, priority: i32) {
        if !self.threads.update(thread, priority) {
            self.threads.push_back(thread, priority);
        }
    }

    /// `thread`'s slice ended: it waits behind the threads of its priority.
    pub fn preempted(&self, thread: u32, priority: i32) {
        self.threads.push_back(thread, priority);
    }

    /// The runnable thread of highest priority (the earliest among equals), removed; 0 when
    /// none is runnable.
    pub fn activated(&self, _cpu: u32) -> u32 {
        let Some(entry) = self.threads.pick_by(|entry| (Reverse(entry.priority), entry.sequence)) else {
            return 0;
        };
        self.picked.record(entry.thread, entry.priority);
        entry.thread
    }

    /// `thread` was interrupted within the domain's slice: it is runnable again, and the
    /// runnable thread of highest priority runs next.
    pub fn interrupted(&self, thread: u32, priority: i32) -> u32 {
        self.preempted(thread, priority);
        self.activated(0)
    }

    /// Whether the running `thread` should let the domain's other threads run before its
    /// portal call: when one of higher priority is runnable. A thread whose priority it does
    /// not remember (one it did not pick recently) proceeds.
    pub fn portal_call(&self, thread: u32) -> bool {
        !self.threads.is_empty()
            && self.picked.get(thread).is_some_and(|priority| self.threads.any(|entry| entry.priority > priority))
    }

    /// Whether a call into the domain should wait for the domain's own threads: when one of
    /// priority above 0 is runnable.
    pub fn incoming_call(&self, _caller_domain: u32) -> bool {
        !self.threads.is_empty() && self.threads.any(|entry| entry.priority > 0)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    fn drain(activated: impl Fn() -> u32) -> Vec<u32> {
        core::iter::from_fn(|| Some(activated()).filter(|&thread| thread != 0)).collect()
    }

    #[test]
    fn round_robin_sends_the_preempted_to_the_back() {
        let policy = RoundRobin::new();
        assert_eq!(policy.activated(0), 0);
        for thread in [1, 2, 3] {
            policy.runnable(thread, 0);
        }
        assert_eq!(policy.activated(0), 1);
        policy.preempted(1, 0);
        assert_eq!(policy.activated(0), 2);
        assert_eq!(policy.interrupted(2, 0), 3);
        policy.runnable(4, 9);
        assert_eq!(drain(|| policy.activated(0)), [1, 2, 4]);
    }

    #[test]
    fn fifo_resumes_the_preempted_first() {
        let policy = Fifo::new();
        for thread in [1, 2, 3] {
            policy.runnable(thread, 0);
        }
        assert_eq!(policy.activated(0), 1);
        policy.preempted(1, 0);
        assert_eq!(policy.activated(0), 1);
        assert_eq!(policy.interrupted(1, 0), 1, "an interrupted thread continues");
        policy.runnable(1, 0);
        assert_eq!(drain(|| policy.activated(0)), [2, 3, 1]);
    }

    #[test]
    fn fixed_priority_runs_the_highest_first_come_among_equals() {
        let policy = FixedPriority::new();
        for (thread, priority) in [(1, 0), (2, 5), (3, 0), (4, 5), (5, -3)] {
            policy.runnable(thread, priority);
        }
        assert_eq!(policy.activated(0), 2);
        policy.preempted(2, 5);
        assert_eq!(policy.activated(0), 4);
        assert_eq!(policy.interrupted(4, 5), 2);
        assert_eq!(drain(|| policy.activated(0)), [4, 1, 3, 5]);
    }

    #[test]
    fn fixed_priority_answers_the_notifications() {
        let policy = FixedPriority::new();
        policy.runnable(1, 1);
        policy.runnable(2, 0);
        assert!(policy.incoming_call(7), "a thread of priority 1 is runnable");
        assert_eq!(policy.activated(0), 1);
        assert!(!policy.portal_call(1), "nothing above priority 1 waits");
        assert!(!policy.incoming_call(7), "only priority 0 waits");
        policy.runnable(3, 4);
        assert!(policy.portal_call(1), "thread 3 (priority 4) waits");
        assert!(!policy.portal_call(99), "an unknown caller proceeds");
        assert_eq!(policy.activated(0), 3);
        assert!(!policy.portal_call(3));
    }
}
