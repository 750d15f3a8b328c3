//! A mutual-exclusion lock and a condition variable for the threads of one component instance,
//! built on the kernel's AtomicVariable (JX 2.7).
//!
//! Uncontended, a lock costs one atomic exchange in the heap and no host call. A thread that
//! finds it held spins briefly, then blocks in the kernel on the mutex's wait queue, an atomic
//! variable made the first time anyone has to wait. Waiting is race-free because a thread reads
//! the queue's value *before* it announces itself and blocks only if the value is unchanged;
//! every release that may have waiters stores a fresh value and unblocks one thread. A service
//! call may not block (it runs on its caller's CPU), so there a waiter yields instead of
//! blocking, as it does if the kernel refuses the wait queue. A restartable call (decision 0017)
//! must not even spin: the holder may be a call that waits, which cannot run while it spins, so
//! its locks are taken with [`Mutex::lock_restartable`], which gives up instead.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicU32, Ordering};

use domos_abi::HostError;

/// Spins before blocking: a lock is usually released within a few hundred instructions.
pub(crate) const SPINS: u32 = 100;

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
/// Locked, and some thread may be blocked waiting.
const CONTENDED: u32 = 2;

/// A kernel wait queue made on first use: an atomic variable whose value changes at every
/// wake-up.
pub(crate) struct WaitQueue {
    handle: AtomicU32,
    /// Source of fresh values for the variable, so that no waiter mistakes a wake-up for none.
    generation: AtomicU32,
}

impl WaitQueue {
    pub(crate) const fn new() -> Self {
        WaitQueue { handle: AtomicU32::new(0), generation: AtomicU32::new(0) }
    }

    /// The variable's handle, made now if need be; `None` when the kernel refuses one.
    pub(crate) fn handle(&self) -> Option<u32> {
        let handle = self.handle.load(Ordering::Acquire);
        if handle != 0 {
            return Some(handle);
        }
        let made = u32::try_from(crate::atomic_create(0)).ok()?;
        match self.handle.compare_exchange(0, made, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Some(made),
            Err(theirs) => {
                crate::handle_drop(made);
                Some(theirs)
            }
        }
    }

    /// The value a waiter must see unchanged to block.
    pub(crate) fn current(&self, handle: u32) -> u32 {
        crate::atomic_get(handle) as u32
    }

    /// Blocks while the value is `seen`; yields where the kernel does not let this thread block,
    /// and answers `MustWait` without yielding in a restartable call, which must not wait.
    pub(crate) fn wait(&self, handle: u32, seen: u32) -> Result<(), MustWait> {
        match crate::atomic_block_if_equal(handle, seen) {
            code if code == HostError::MustWait as i64 => Err(MustWait),
            code if code < 0 => {
                crate::yield_now();
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Wakes up to `count` waiters (if a queue was ever made).
    pub(crate) fn wake(&self, count: u32) {
        let handle = self.handle.load(Ordering::Acquire);
        if handle != 0 {
            let fresh = self.generation.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
            crate::atomic_set_and_unblock(handle, fresh, count);
        }
    }
}

impl Drop for WaitQueue {
    fn drop(&mut self) {
        let handle = *self.handle.get_mut();
        if handle != 0 {
            crate::handle_drop(handle);
        }
    }
}

/// A lock protecting a `T` shared by the threads of a component instance.
pub struct Mutex<T> {
    state: AtomicU32,
    waiters: WaitQueue,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reachable through a `MutexGuard`, and at most one guard exists at a
// time (acquire/release on `state`), so sharing the mutex shares `T` only as `Send` allows.
unsafe impl<T: Send> Sync for Mutex<T> {}

impl<T> Mutex<T> {
    /// A new, unlocked mutex.
    pub const fn new(value: T) -> Self {
        Mutex { state: AtomicU32::new(UNLOCKED), waiters: WaitQueue::new(), value: UnsafeCell::new(value) }
    }

    /// Takes the lock, blocking while another thread holds it.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        if self.state.compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_err() {
            // Never `Err` unless asked to give up.
            let _ = self.lock_contended(false);
        }
        MutexGuard { mutex: self }
    }

    /// Takes the lock as [`lock`](Self::lock) does, except in a restartable call (decision
    /// 0017), where a lock that would have to be waited for ends the attempt: `Err(MustWait)`,
    /// which the method returns, and the call is made again the waiting way. Every lock that a
    /// restartable method takes and a call that waits may hold must be taken so; with `lock`
    /// such a run would spin until the kernel ends its domain.
    ///
    /// # Errors
    /// `MustWait`, only in a restartable call.
    pub fn lock_restartable(&self) -> Result<MutexGuard<'_, T>, MustWait> {
        if self.state.compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_contended(true)?;
        }
        Ok(MutexGuard { mutex: self })
    }

    /// Takes the lock if no thread holds it; `None` at once if one does.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| MutexGuard { mutex: self })
    }

    /// Takes a lock that was held a moment ago; gives up with `MustWait` only if `give_up` and
    /// the thread runs a restartable call.
    fn lock_contended(&self, give_up: bool) -> Result<(), MustWait> {
        for _ in 0..SPINS {
            core::hint::spin_loop();
            if self.state.load(Ordering::Relaxed) == UNLOCKED
                && self.state.compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                return Ok(());
            }
        }
        loop {
            let Some(queue) = self.waiters.handle() else {
                // No wait queue to be had: poll, giving the CPU away between tries.
                if self.state.swap(CONTENDED, Ordering::Acquire) == UNLOCKED {
                    return Ok(());
                }
                crate::yield_now();
                continue;
            };
            let seen = self.waiters.current(queue);
            if self.state.swap(CONTENDED, Ordering::Acquire) == UNLOCKED {
                return Ok(());
            }
            // Giving up leaves the state CONTENDED: the holder's release wakes a waiter, if any.
            if let Err(refused) = self.waiters.wait(queue, seen) {
                if give_up {
                    return Err(refused);
                }
                crate::yield_now();
            }
        }
    }

    fn unlock(&self) {
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            self.waiters.wake(1);
        }
    }
}

/// What [`Mutex::lock_restartable`] answers in a restartable call that would have to wait for
/// the lock: the call is abandoned and made again the waiting way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MustWait;

/// Access to the value of a locked `Mutex`; unlocks when dropped.
pub struct MutexGuard<'a, T> {
    mutex: &'a Mutex<T>,
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (the lock is held).
        unsafe { &*self.mutex.value.get() }
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard is the only one (the lock is held), and it is borrowed mutably.
        unsafe { &mut *self.mutex.value.get() }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.mutex.unlock();
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

/// A condition variable: threads wait on it with a locked [`Mutex`] and are woken by
/// `notify_one` or `notify_all`. Wake-ups may be spurious; wait in a loop over the condition.
pub struct Condvar {
    waiters: WaitQueue,
}

impl Condvar {
    /// A condition variable no thread waits on.
    pub const fn new() -> Self {
        Condvar { waiters: WaitQueue::new() }
    }

    /// Unlocks `guard`'s mutex, waits for a notification, and locks it again.
    pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        let mutex = guard.mutex;
        match self.waiters.handle() {
            Some(queue) => {
                let seen = self.waiters.current(queue);
                drop(guard);
                // A restartable call does not wait on a condition; it finds it unchanged, as
                // after a spurious wake-up.
                let _ = self.waiters.wait(queue, seen);
            }
            None => {
                drop(guard);
                crate::yield_now();
            }
        }
        mutex.lock()
    }

    /// Wakes one waiting thread.
    pub fn notify_one(&self) {
        self.waiters.wake(1);
    }

    /// Wakes every waiting thread.
    pub fn notify_all(&self) {
        self.waiters.wake(u32::MAX);
    }
}

impl Default for Condvar {
    fn default() -> Self {
        Condvar::new()
    }
}
