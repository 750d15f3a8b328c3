//! A lock that many threads of a component instance hold at once to read, or one to write: the
//! file system's reads of kept state overlap, its changes exclude them.
//!
//! It waits on the same kernel wait queue as [`Mutex`](crate::Mutex) and follows the same rules:
//! uncontended, a lock or an unlock is one atomic operation in the heap; a contended thread
//! spins briefly, then blocks in the kernel (yields in a service call, which may not block); a
//! restartable call (decision 0017) gives up with `MustWait` instead of waiting.
//!
//! A writer that has to wait is counted in the lock's state, and no new reader enters while any
//! is, so that a steady stream of overlapping reads cannot keep a writer out for ever: the
//! readers inside finish, the last one out wakes the writer, and the readers woken with it find
//! the count and wait on. Every release that may leave a waiter able to go wakes all waiters,
//! which look again: the threads of a component are few.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicU32, Ordering};

use crate::mutex::{MustWait, SPINS, WaitQueue};

/// Held by a writer.
const WRITER: u32 = 1 << 31;
/// Some thread may be blocked on the wait queue: its release wakes the waiters.
const SLEEPERS: u32 = 1 << 30;
/// One writer waiting, in the count of them: no reader enters while it is not zero.
const WAITING_WRITER: u32 = 1 << 20;
/// The bits that count the writers waiting (at most 1,023; more wait without being counted).
const WAITING_WRITERS: u32 = SLEEPERS - WAITING_WRITER;
/// The bits that count the readers holding the lock.
const READERS: u32 = WAITING_WRITER - 1;

/// Which way a thread takes the lock.
#[derive(Clone, Copy)]
enum Access {
    Read,
    /// Whether this writer is counted among the waiting ones.
    Write {
        counted: bool,
    },
}

impl Access {
    /// The state after this access takes the lock in state `state`; `None` while it must wait.
    fn taken(self, state: u32) -> Option<u32> {
        match self {
            Access::Read if state & (WRITER | WAITING_WRITERS) == 0 && state & READERS < READERS => Some(state + 1),
            Access::Write { counted } if state & (WRITER | READERS) == 0 => {
                Some((if counted { state - WAITING_WRITER } else { state }) | WRITER)
            }
            _ => None,
        }
    }

    /// The state that says this access waits, in state `state`.
    fn waiting(self, state: u32) -> u32 {
        match self {
            Access::Write { counted: false } if state & WAITING_WRITERS != WAITING_WRITERS => {
                (state + WAITING_WRITER) | SLEEPERS
            }
            _ => state | SLEEPERS,
        }
    }
}

/// A reader–writer lock protecting a `T` shared by the threads of a component instance.
pub struct RwLock<T> {
    state: AtomicU32,
    waiters: WaitQueue,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reachable through the guards: any number of read guards, which give
// `&T` (so `T` must be `Sync`), or one write guard and no read guard, which gives `&mut T` (so `T`
// must be `Send`); the state's acquire and release operations order the accesses.
unsafe impl<T: Send + Sync> Sync for RwLock<T> {}

impl<T> RwLock<T> {
    /// A new lock that nobody holds.
    pub const fn new(value: T) -> Self {
        RwLock { state: AtomicU32::new(0), waiters: WaitQueue::new(), value: UnsafeCell::new(value) }
    }

    /// Takes the lock to read, beside other readers, blocking while a writer holds it or waits.
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        // Never `Err` unless asked to give up.
        let _ = self.take(Access::Read, false);
        RwLockReadGuard { lock: self }
    }

    /// Takes the lock to write, alone, blocking while anyone holds it.
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        let _ = self.take(Access::Write { counted: false }, false);
        RwLockWriteGuard { lock: self }
    }

    /// Takes the lock as [`read`](Self::read) does, except in a restartable call, where a lock
    /// that would have to be waited for ends the attempt (see `Mutex::lock_restartable`).
    ///
    /// # Errors
    /// `MustWait`, only in a restartable call.
    pub fn read_restartable(&self) -> Result<RwLockReadGuard<'_, T>, MustWait> {
        self.take(Access::Read, true)?;
        Ok(RwLockReadGuard { lock: self })
    }

    /// Takes the lock as [`write`](Self::write) does, except in a restartable call, where a lock
    /// that would have to be waited for ends the attempt.
    ///
    /// # Errors
    /// `MustWait`, only in a restartable call.
    pub fn write_restartable(&self) -> Result<RwLockWriteGuard<'_, T>, MustWait> {
        self.take(Access::Write { counted: false }, true)?;
        Ok(RwLockWriteGuard { lock: self })
    }

    /// Takes the lock if `access` need not wait for it: true when taken.
    fn try_take(&self, access: Access) -> bool {
        let mut state = self.state.load(Ordering::Relaxed);
        while let Some(taken) = access.taken(state) {
            match self.state.compare_exchange_weak(state, taken, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
        false
    }

    /// Takes the lock for `access`, waiting as long as need be; gives up with `MustWait` only if
    /// `give_up` and the thread runs a restartable call.
    #[inline]
    fn take(&self, access: Access, give_up: bool) -> Result<(), MustWait> {
        if self.try_take(access) { Ok(()) } else { self.take_contended(access, give_up) }
    }

    /// [`take`](Self::take), for a lock that was held a moment ago.
    #[inline(never)]
    fn take_contended(&self, mut access: Access, give_up: bool) -> Result<(), MustWait> {
        for _ in 0..SPINS {
            core::hint::spin_loop();
            if self.try_take(access) {
                return Ok(());
            }
        }
        loop {
            let Some(queue) = self.waiters.handle() else {
                // No wait queue to be had: poll, giving the CPU away between tries.
                if self.try_take(access) {
                    return Ok(());
                }
                crate::yield_now();
                continue;
            };
            // The queue's value is read before the thread says it waits: a release after that
            // changes it, and the wait below does not block.
            let seen = self.waiters.current(queue);
            let state = self.state.load(Ordering::Relaxed);
            let (next, took) = match access.taken(state) {
                Some(taken) => (taken, true),
                None => (access.waiting(state), false),
            };
            if self.state.compare_exchange(state, next, Ordering::AcqRel, Ordering::Relaxed).is_err() {
                continue;
            }
            if took {
                return Ok(());
            }
            if let Access::Write { counted: false } = access {
                access = Access::Write { counted: next & WAITING_WRITERS != state & WAITING_WRITERS };
            }
            if let Err(refused) = self.waiters.wait(queue, seen) {
                if give_up {
                    if let Access::Write { counted: true } = access {
                        self.uncount_writer();
                    }
                    return Err(refused);
                }
                crate::yield_now();
            }
        }
    }

    /// Takes a writer that gives up out of the count of waiting ones, and wakes the waiters:
    /// readers may wait for the count alone.
    fn uncount_writer(&self) {
        if self.state.fetch_sub(WAITING_WRITER, Ordering::AcqRel) & SLEEPERS != 0 {
            self.wake_sleepers();
        }
    }

    /// Clears the sleepers' mark and wakes every waiter. A thread that marks itself after the
    /// clearing read the queue's value before, so the wake-up that follows reaches it too.
    fn wake_sleepers(&self) {
        self.state.fetch_and(!SLEEPERS, Ordering::AcqRel);
        self.waiters.wake(u32::MAX);
    }

    fn read_unlock(&self) {
        // The last reader out wakes the waiters: a waiting writer, or readers that a writer's
        // turn kept waiting.
        let before = self.state.fetch_sub(1, Ordering::Release);
        if before & READERS == 1 && before & SLEEPERS != 0 {
            self.wake_sleepers();
        }
    }

    fn write_unlock(&self) {
        // The waiting writers stay counted: readers woken now wait on for them.
        if self.state.fetch_and(!(WRITER | SLEEPERS), Ordering::Release) & SLEEPERS != 0 {
            self.waiters.wake(u32::MAX);
        }
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> Self {
        RwLock::new(T::default())
    }
}

/// Shared access to the value of an [`RwLock`] taken to read; lets go when dropped.
pub struct RwLockReadGuard<'a, T> {
    lock: &'a RwLock<T>,
}

impl<T> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: while this guard lives the lock counts it as a reader, so no write guard exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> Drop for RwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.read_unlock();
    }
}

/// Access to the value of an [`RwLock`] taken to write; lets go when dropped.
pub struct RwLockWriteGuard<'a, T> {
    lock: &'a RwLock<T>,
}

impl<T> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one of either kind while it lives (the writer's bit).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard is the only one of either kind while it lives, and it is borrowed
        // mutably.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.write_unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRITE: Access = Access::Write { counted: false };

    #[test]
    fn readers_share_and_a_writer_excludes_them() {
        assert_eq!(Access::Read.taken(0), Some(1));
        assert_eq!(Access::Read.taken(3), Some(4));
        assert_eq!(WRITE.taken(0), Some(WRITER));
        assert_eq!(WRITE.taken(2), None);
        assert_eq!(Access::Read.taken(WRITER), None);
        assert_eq!(WRITE.taken(WRITER), None);
        assert_eq!(Access::Read.taken(READERS), None, "the count of readers does not overflow");
    }

    #[test]
    fn a_waiting_writer_is_counted_stops_new_readers_and_leaves_the_count_when_it_enters() {
        let waiting = WRITE.waiting(2);
        assert_eq!(waiting, 2 + WAITING_WRITER + SLEEPERS);
        assert_eq!(Access::Write { counted: true }.waiting(waiting), waiting, "counted once");
        assert_eq!(Access::Read.taken(waiting), None);
        // The readers left: the counted writer enters, and a second waiting writer stays counted.
        let free = SLEEPERS + 2 * WAITING_WRITER;
        assert_eq!(Access::Write { counted: true }.taken(free), Some(SLEEPERS + WAITING_WRITER + WRITER));
        let full = WAITING_WRITERS | 1;
        assert_eq!(WRITE.waiting(full), full | SLEEPERS, "the count of writers does not overflow");
    }

    #[test]
    fn uncontended_guards_give_the_value_and_let_go() {
        let lock = RwLock::new(5);
        {
            let (first, second) = (lock.read(), lock.read());
            assert_eq!(*first + *second, 10);
            assert_eq!(lock.state.load(Ordering::Relaxed), 2);
        }
        *lock.write() += 1;
        assert_eq!(*lock.read(), 6);
        assert_eq!(lock.state.load(Ordering::Relaxed), 0);
    }
}
