//! A mutual-exclusion lock for the threads of one component instance.
//!
//! Uncontended it costs one atomic exchange; contended it spins briefly and then yields the CPU
//! to the kernel scheduler, so a waiting thread never stalls a kernel CPU for long.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, Ordering};

/// A lock protecting a `T` shared by the threads of a component instance.
pub struct Mutex<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reachable through a `MutexGuard`, and at most one guard exists at a
// time (acquire/release on `locked`), so sharing the mutex shares `T` only as `Send` allows.
unsafe impl<T: Send> Sync for Mutex<T> {}

impl<T> Mutex<T> {
    /// A new, unlocked mutex.
    pub const fn new(value: T) -> Self {
        Mutex { locked: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    /// Takes the lock, yielding to the scheduler while another thread holds it.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        let mut spins = 0u32;
        while self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            spins = spins.wrapping_add(1);
            if spins % 64 == 0 {
                crate::yield_now();
            }
            core::hint::spin_loop();
        }
        MutexGuard { mutex: self }
    }
}

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
        self.mutex.locked.store(false, Ordering::Release);
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}
