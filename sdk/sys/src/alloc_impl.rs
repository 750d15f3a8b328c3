//! The guest heap: dlmalloc over regions the kernel grants with `heap_grow`.
//!
//! Components never execute `memory.grow` (the verifier rejects it): the kernel grows the
//! memory, charges the domain's quota exactly and hands back the new region, which need not be
//! adjacent to the previous one because thread stacks are carved from the same memory.

use core::alloc::{GlobalAlloc, Layout};

use crate::Mutex;

const PAGE: usize = 64 * 1024;

struct KernelPages;

// SAFETY: `alloc` returns fresh, zeroed, page-aligned regions the kernel reserved for the heap
// alone; the other methods decline to remap or release, which dlmalloc permits.
unsafe impl dlmalloc::Allocator for KernelPages {
    fn alloc(&self, size: usize) -> (*mut u8, usize, u32) {
        let pages = size.div_ceil(PAGE);
        let base = crate::heap_grow(pages as u32);
        if base < 0 {
            return (core::ptr::null_mut(), 0, 0);
        }
        (base as usize as *mut u8, pages * PAGE, 0)
    }
    fn remap(&self, _ptr: *mut u8, _old: usize, _new: usize, _can_move: bool) -> *mut u8 {
        core::ptr::null_mut()
    }
    fn free_part(&self, _ptr: *mut u8, _old: usize, _new: usize) -> bool {
        false
    }
    fn free(&self, _ptr: *mut u8, _size: usize) -> bool {
        false
    }
    fn can_release_part(&self, _flags: u32) -> bool {
        false
    }
    fn allocates_zeros(&self) -> bool {
        true
    }
    fn page_size(&self) -> usize {
        PAGE
    }
}

/// dlmalloc behind the lock shared by all threads of the component instance.
struct GuestHeap(Mutex<dlmalloc::Dlmalloc<KernelPages>>);

#[cfg(target_arch = "wasm32")]
#[global_allocator]
static HEAP: GuestHeap = GuestHeap(Mutex::new(dlmalloc::Dlmalloc::new_with_allocator(KernelPages)));

// SAFETY: delegates to dlmalloc under the heap lock; layouts are passed through unchanged.
unsafe impl GlobalAlloc for GuestHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract of `GlobalAlloc::alloc`.
        unsafe { self.0.lock().malloc(layout.size(), layout.align()) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract of `GlobalAlloc::alloc_zeroed`.
        unsafe { self.0.lock().calloc(layout.size(), layout.align()) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract of `GlobalAlloc::dealloc`.
        unsafe { self.0.lock().free(ptr, layout.size(), layout.align()) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded contract of `GlobalAlloc::realloc`.
        unsafe { self.0.lock().realloc(ptr, layout.size(), layout.align(), new_size) }
    }
}

/// A fixed-size line for messages written where allocating is not possible (a panic).
pub(crate) struct FixedLine {
    bytes: [u8; 256],
    len: usize,
}

impl FixedLine {
    pub(crate) fn new() -> Self {
        FixedLine { bytes: [0; 256], len: 0 }
    }
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl core::fmt::Write for FixedLine {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let take = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}
