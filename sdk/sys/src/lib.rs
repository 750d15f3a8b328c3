//! Raw kernel host calls for Domos guests, the global allocator over kernel-granted heap
//! regions, and safe wrappers the SDK builds on.
//!
//! This crate holds every `unsafe` of the guest side: the imports of the `domos` host module, the
//! `GlobalAlloc` implementation and the view of the per-thread message buffer. Each wrapper is
//! safe to call; the kernel validates every pointer and length a guest passes.
#![no_std]

mod alloc_impl;
mod host;
mod mutex;

pub use host::*;
pub use mutex::{Condvar, Mutex, MutexGuard};

/// The message buffer the kernel reserved for the calling thread in this component's memory.
///
/// Requests are encoded into it before a portal call and replies are read from it after; a
/// service thread receives its request in its own buffer.
pub fn message_buffer() -> &'static mut [u8] {
    MessageBuffer::of_this_thread().bytes()
}

/// Where the calling thread's message buffer lies: asked of the kernel once (a host call), then
/// turned into the buffer each time it is used, so that a service call that decodes its request
/// and encodes its reply asks the kernel once, not twice.
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

    /// The buffer's bytes.
    pub fn bytes(&self) -> &'static mut [u8] {
        let addr = (self.packed & 0xffff_ffff) as usize;
        let cap = (self.packed >> 32) as usize;
        // SAFETY: `packed` came from the kernel's answer to this thread (the type is neither
        // `Send` nor `Sync`), and the kernel reserves `[addr, addr + cap)` for this thread alone
        // when it creates the thread, outside every region the allocator hands out, for as long
        // as the thread lives. The SDK uses it only between entering and leaving one call, and
        // makes a new slice at each use, so no two live references to it exist on this thread.
        unsafe { core::slice::from_raw_parts_mut(addr as *mut u8, cap) }
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
#[cfg(target_arch = "wasm32")]
#[unsafe(no_mangle)]
pub extern "C" fn memcmp(a: *const u8, b: *const u8, len: usize) -> i32 {
    for i in 0..len {
        // SAFETY: the compiler calls `memcmp` only with `len` readable bytes behind both pointers.
        let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
    }
    0
}
