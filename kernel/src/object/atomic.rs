//! AtomicVariable (JX 2.7): a kernel word that threads can block on.
//!
//! A thread blocks only if the variable still holds the value it expects, atomically with
//! queueing itself, so a `set_and_unblock` between its last look and its blocking is never
//! lost. Everything else an SDK needs to wait — mutexes, condition variables, joins on events —
//! is built from these four operations in the guest (`sdk/src/sync.rs`).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// The kernel object. The value is read and set without the queue's lock (a `get` is the
/// commonest call, and a lock is two locked operations); it changes under the lock only where a
/// waiter must see the change and the queue at once: in `set_and_unblock`, so that a thread that
/// found the old value under the lock is in the queue it empties.
#[derive(Default)]
pub struct AtomicVariable {
    value: AtomicU32,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Blocked threads in arrival order, each with the ticket its wait holds.
    waiters: VecDeque<(u64, Waker)>,
    next_ticket: u64,
}

impl AtomicVariable {
    /// A variable holding `value`.
    pub fn new(value: u32) -> AtomicVariable {
        AtomicVariable { value: AtomicU32::new(value), state: Mutex::default() }
    }

    /// The value.
    pub fn get(&self) -> u32 {
        self.value.load(Ordering::Acquire)
    }

    /// Sets the value without waking anyone (a waiter that looks afterwards sees it; one that
    /// blocked before stays blocked, as if it had come first).
    pub fn set(&self, value: u32) {
        self.value.store(value, Ordering::Release);
    }

    /// Sets the value and wakes up to `count` blocked threads, oldest first; returns how many.
    pub fn set_and_unblock(&self, value: u32, count: u32) -> u32 {
        let mut state = crate::lock(&self.state);
        self.value.store(value, Ordering::Release);
        if count == 1 {
            // The common hand-off: no list to allocate.
            let woken = state.waiters.pop_front();
            drop(state);
            return woken.map_or(0, |(_, waker)| {
                waker.wake();
                1
            });
        }
        let n = (count as usize).min(state.waiters.len());
        let woken: Vec<Waker> = state.waiters.drain(..n).map(|(_, waker)| waker).collect();
        drop(state);
        woken.into_iter().for_each(Waker::wake);
        n as u32
    }

    /// Waits while the value is `expected`: completes with `true` once woken by
    /// `set_and_unblock`, or at once with `false` if the value differs. The wait holds the
    /// reference it is given (the caller's own, not a further one).
    pub fn block_if_equal(self: Arc<Self>, expected: u32) -> BlockIfEqual {
        BlockIfEqual { variable: self, expected, ticket: None }
    }

    /// Threads blocked now.
    pub fn waiters(&self) -> usize {
        crate::lock(&self.state).waiters.len()
    }
}

/// The wait of [`AtomicVariable::block_if_equal`]. Dropping it (its thread was terminated)
/// leaves the queue, so a later unblock goes to a thread that still waits.
pub struct BlockIfEqual {
    variable: Arc<AtomicVariable>,
    expected: u32,
    ticket: Option<u64>,
}

impl Future for BlockIfEqual {
    type Output = bool;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let this = &mut *self;
        // A value that differs already ends the wait without the lock.
        if this.ticket.is_none() && this.variable.get() != this.expected {
            return Poll::Ready(false);
        }
        let mut state = crate::lock(&this.variable.state);
        match this.ticket {
            None if this.variable.get() != this.expected => Poll::Ready(false),
            None => {
                let ticket = state.next_ticket;
                state.next_ticket += 1;
                state.waiters.push_back((ticket, cx.waker().clone()));
                this.ticket = Some(ticket);
                Poll::Pending
            }
            Some(ticket) => match state.waiters.iter_mut().find(|(t, _)| *t == ticket) {
                Some((_, waker)) => {
                    waker.clone_from(cx.waker());
                    Poll::Pending
                }
                None => {
                    this.ticket = None;
                    Poll::Ready(true)
                }
            },
        }
    }
}

impl Drop for BlockIfEqual {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket {
            crate::lock(&self.variable.state).waiters.retain(|(t, _)| *t != ticket);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll(wait: &mut BlockIfEqual, count: &Arc<Count>) -> Poll<bool> {
        Pin::new(wait).poll(&mut Context::from_waker(&Waker::from(count.clone())))
    }

    #[test]
    fn blocks_only_on_the_expected_value_and_wakes_in_order() {
        let var = Arc::new(AtomicVariable::new(7));
        let (a, b) = (Arc::new(Count(AtomicUsize::new(0))), Arc::new(Count(AtomicUsize::new(0))));
        assert_eq!(poll(&mut var.clone().block_if_equal(8), &a), Poll::Ready(false));
        let (mut first, mut second) = (var.clone().block_if_equal(7), var.clone().block_if_equal(7));
        assert_eq!(poll(&mut first, &a), Poll::Pending);
        assert_eq!(poll(&mut second, &b), Poll::Pending);
        assert_eq!(var.set_and_unblock(9, 1), 1);
        assert_eq!((a.0.load(Ordering::SeqCst), b.0.load(Ordering::SeqCst)), (1, 0), "oldest first");
        assert_eq!(poll(&mut first, &a), Poll::Ready(true));
        assert_eq!(poll(&mut second, &b), Poll::Pending, "still queued: a spurious poll does not end the wait");
        assert_eq!(var.get(), 9);
    }

    #[test]
    fn a_dropped_wait_leaves_the_queue() {
        let var = Arc::new(AtomicVariable::new(0));
        let (a, b) = (Arc::new(Count(AtomicUsize::new(0))), Arc::new(Count(AtomicUsize::new(0))));
        let mut gone = var.clone().block_if_equal(0);
        let mut stays = var.clone().block_if_equal(0);
        assert_eq!(poll(&mut gone, &a), Poll::Pending);
        assert_eq!(poll(&mut stays, &b), Poll::Pending);
        drop(gone);
        assert_eq!(var.waiters(), 1);
        assert_eq!(var.set_and_unblock(1, 1), 1);
        assert_eq!(b.0.load(Ordering::SeqCst), 1, "the unblock reached the thread that still waits");
        var.set(5);
        assert_eq!(var.set_and_unblock(6, u32::MAX), 0);
    }
}
