//! Raw kernel host calls for Domos guests, the global allocator over kernel-granted heap
//! regions, and safe wrappers the SDK builds on.
//!
//! This crate holds every `unsafe` of the guest side: the imports of the `domos` host module, the
//! `GlobalAlloc` implementation, the view of the per-thread message buffer, the table of
//! exported objects that incoming calls read without a lock and the storage of arguments that
//! methods borrow. Each wrapper is
//! safe to call, except the portal calls, after which the kernel writes the message buffer; the
//! kernel validates every pointer and length a guest passes.
#![no_std]

extern crate alloc;

#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code, reason = "the allocator serves wasm guests only"))]
mod alloc_impl;
mod arg_storage;
mod host;
mod mutex;
mod objects;
mod rwlock;

pub use arg_storage::ArgStorage;
pub use host::*;
pub use mutex::{Condvar, MustWait, Mutex, MutexGuard};
pub use objects::ObjectTable;
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Where the calling thread's message buffer lies: asked of the kernel once (a host call), then
/// lent out each time it is used, so that a service call that decodes its request and encodes
/// its reply asks the kernel once, not twice.
///
/// Requests are encoded into the buffer before a portal call and replies are read from it after;
/// a service thread receives its request in its own buffer. The bytes are lent as a
/// [`LentBuffer`], at most one at a time per thread, like a `RefCell`: the flag that says so
/// lies in the `BUFFER_RUNTIME_BYTES` the kernel reserves before the buffer for this thread.
///
/// It is neither `Send` nor `Sync`: it names the buffer of the thread that asked.
#[derive(Clone, Copy)]
pub struct MessageBuffer {
    packed: u64,
    this_thread: core::marker::PhantomData<*const ()>,
}

impl MessageBuffer {
    /// The calling thread's buffer.
    pub fn of_this_thread() -> MessageBuffer {
        MessageBuffer { packed: message_buffer_raw() as u64, this_thread: core::marker::PhantomData }
    }

    /// The buffer of a service thread as the kernel passes it to `domos_dispatch` (address and
    /// capacity), which saves the host call of [`of_this_thread`](Self::of_this_thread).
    ///
    /// # Safety
    /// `address` and `capacity` must be what the kernel passed to the running `domos_dispatch`
    /// of this thread.
    pub unsafe fn of_service_call(address: u32, capacity: u32) -> MessageBuffer {
        MessageBuffer {
            packed: (u64::from(capacity) << 32) | u64::from(address),
            this_thread: core::marker::PhantomData,
        }
    }

    fn address(&self) -> usize {
        (self.packed & 0xffff_ffff) as usize
    }

    /// How many bytes a message may have: the domain's `max_message`.
    pub fn capacity(&self) -> usize {
        (self.packed >> 32) as usize
    }

    /// Where the flag that says the bytes are lent lies: the first of the `BUFFER_RUNTIME_BYTES`
    /// the kernel reserves right before this thread's buffer (above its stack) for this
    /// thread's runtime, outside every region the allocator hands out, for as long as the
    /// thread lives; the kernel writes them only (zeroes) before the thread starts. Only this type and `LentBuffer::drop` touch
    /// them, on this thread (`MessageBuffer` is neither `Send` nor `Sync`), so plain accesses
    /// do not race.
    fn flag(&self) -> *mut u8 {
        (self.address() - domos_abi::BUFFER_RUNTIME_BYTES as usize) as *mut u8
    }

    fn is_lent(&self) -> bool {
        // SAFETY: see `flag`.
        unsafe { self.flag().read() != 0 }
    }

    /// The buffer's bytes until the returned value is dropped, or `None` while they are lent
    /// already (to a caller further up this thread's stack).
    pub fn lend(&self) -> Option<LentBuffer<'_>> {
        if self.is_lent() {
            return None;
        }
        let lent = self.flag();
        // SAFETY: see `flag`.
        unsafe { lent.write(1) };
        // SAFETY: `[address, address + capacity)` is this thread's buffer, which the kernel
        // reserved for it as long as it lives. The flag just set makes this the only reference
        // to it until `LentBuffer::drop` clears the flag. The kernel writes the buffer only
        // inside `portal_call`, which `MessageBuffer::portal_call` makes only while the bytes
        // are not lent, and before a service thread's dispatch, which the SDK's dispatch
        // checks finds them not lent (or traps before any code could use them).
        let bytes = unsafe { core::slice::from_raw_parts_mut(self.address() as *mut u8, self.capacity()) };
        Some(LentBuffer { bytes, lent })
    }

    /// Calls `method` on the portal `handle` with the request in the buffer's first `len` bytes;
    /// the reply replaces it. The reply length or an error code (`ServiceBusy`: see
    /// [`portal_wait`]).
    ///
    /// # Errors
    /// [`BufferLent`] while the bytes are lent: the kernel writes the reply into them.
    pub fn portal_call(&self, handle: u32, method: u32, len: u32) -> Result<i64, BufferLent> {
        if self.is_lent() {
            return Err(BufferLent);
        }
        // SAFETY: nothing refers to the buffer's bytes: they are not lent.
        Ok(unsafe { host::portal_call(handle, method, len) })
    }

    /// [`MessageBuffer::portal_call`] of a method that can be started again: run at once even by
    /// a service that may wait, and answered `MustWait` (the run abandoned) if it would wait.
    ///
    /// # Errors
    /// [`BufferLent`], as for `portal_call`.
    pub fn portal_call_restartable(&self, handle: u32, method: u32, len: u32) -> Result<i64, BufferLent> {
        if self.is_lent() {
            return Err(BufferLent);
        }
        // SAFETY: as in `portal_call`.
        Ok(unsafe { host::portal_call_restartable(handle, method, len) })
    }

    /// [`MessageBuffer::portal_call`] for a service that may wait (the kernel answered
    /// `MustWait`): the thread suspends while the service waits.
    ///
    /// # Errors
    /// [`BufferLent`], as for `portal_call`.
    pub fn portal_call_waiting(&self, handle: u32, method: u32, len: u32) -> Result<i64, BufferLent> {
        if self.is_lent() {
            return Err(BufferLent);
        }
        // SAFETY: as in `portal_call`.
        Ok(unsafe { host::portal_call_waiting(handle, method, len) })
    }
}

/// A portal call was asked for while the thread's message buffer was lent (from a `Wire`
/// implementation encoding or decoding another call's message, say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferLent;

/// The calling thread's message buffer, lent by [`MessageBuffer::lend`]; given back when
/// dropped.
pub struct LentBuffer<'a> {
    bytes: &'a mut [u8],
    lent: *mut u8,
}

impl core::ops::Deref for LentBuffer<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes
    }
}

impl core::ops::DerefMut for LentBuffer<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.bytes
    }
}

impl Drop for LentBuffer<'_> {
    fn drop(&mut self) {
        // SAFETY: the flag `MessageBuffer::lend` set, on this thread (see there).
        unsafe { self.lent.write(0) }
    }
}

#[cfg(target_arch = "wasm32")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    use core::fmt::Write;
    let mut line = alloc_impl::FixedLine::new();
    let _ = write!(line, "panic: {}", info);
    console_write(line.as_bytes());
    core::arch::wasm32::unreachable()
}

/// `memcmp` for the compiler's own use: the wasip1-threads target expects it from a C library,
/// which Domos components do not link.
///
/// # Safety
/// `len` bytes must be readable behind both pointers.
#[cfg(target_arch = "wasm32")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, len: usize) -> i32 {
    for i in 0..len {
        // SAFETY: the compiler calls `memcmp` only with `len` readable bytes behind both pointers.
        let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
    }
    0
}
