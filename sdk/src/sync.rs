//! Waiting for other threads: [`Mutex`](crate::Mutex) and [`Condvar`](crate::Condvar) for
//! data shared by the threads of a component, and [`AtomicVariable`], the kernel primitive they
//! are built on (JX 2.7), for drivers and anything else that waits for an event.

use crate::portal::{CallError, check};
use crate::wire::{DecodeError, Decoder, EncodeError, Encoder, Wire};

/// A kernel word threads can block on: a thread blocks only while the value is what it
/// expects, so no `set_and_unblock` is lost between looking and blocking.
#[derive(Debug)]
pub struct AtomicVariable {
    handle: u32,
}

impl AtomicVariable {
    /// A variable holding `value`.
    ///
    /// # Errors
    /// `QuotaExceeded` when the domain's handle table is full.
    pub fn new(value: u32) -> Result<Self, CallError> {
        check(domos_sys::atomic_create(value)).map(|handle| AtomicVariable { handle: handle as u32 })
    }

    /// The value.
    ///
    /// # Errors
    /// Only for a variable the kernel no longer knows (it never happens to a live one).
    pub fn get(&self) -> Result<u32, CallError> {
        check(domos_sys::atomic_get(self.handle)).map(|value| value as u32)
    }

    /// Sets the value without waking anyone.
    ///
    /// # Errors
    /// As [`AtomicVariable::get`].
    pub fn set(&self, value: u32) -> Result<(), CallError> {
        check(domos_sys::atomic_set(self.handle, value)).map(|_| ())
    }

    /// Sets the value and wakes up to `count` blocked threads, oldest first; returns how many.
    ///
    /// # Errors
    /// As [`AtomicVariable::get`].
    pub fn set_and_unblock(&self, value: u32, count: u32) -> Result<u32, CallError> {
        check(domos_sys::atomic_set_and_unblock(self.handle, value, count)).map(|woken| woken as u32)
    }

    /// A second handle to the same variable (to pass in a call while keeping this one).
    ///
    /// # Errors
    /// `QuotaExceeded` when the domain's handle table is full.
    pub fn clone_handle(&self) -> Result<AtomicVariable, CallError> {
        check(domos_sys::handle_dup(self.handle)).map(|handle| AtomicVariable { handle: handle as u32 })
    }

    /// Gives up ownership of the handle (for an interrupt handler to drop when it is done).
    pub fn into_handle(self) -> u32 {
        let handle = self.handle;
        core::mem::forget(self);
        handle
    }

    /// The kernel handle, for an interrupt handler, which wakes waiters with
    /// `domos_sys::atomic_set_and_unblock` (the SDK's wrappers are not proved bounded).
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// Blocks this thread while the value is `expected`: `true` once woken by
    /// `set_and_unblock`, `false` at once if the value differs.
    ///
    /// # Errors
    /// `NotPermitted` in a service call, which may not block.
    pub fn block_if_equal(&self, expected: u32) -> Result<bool, CallError> {
        check(domos_sys::atomic_block_if_equal(self.handle, expected)).map(|woken| woken == 1)
    }
}

/// An atomic variable passed in a portal call is shared: both sides hold a handle to it (the
/// way a caller hands a driver the variable it will be woken through).
impl Wire for AtomicVariable {
    fn encode(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError> {
        e.handle(self.handle)
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let variable = AtomicVariable { handle: d.handle()? };
        variable.get().map_err(|_| DecodeError::Invalid)?;
        Ok(variable)
    }
}

impl Drop for AtomicVariable {
    fn drop(&mut self) {
        domos_sys::handle_drop(self.handle);
    }
}
