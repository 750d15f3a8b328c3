//! Access to guests' linear memories from the kernel: every `unsafe` memory access of the
//! kernel is in this module.
//!
//! A component's heap is a wasm *shared* memory that the threads of the domain may write at any
//! time (or, in an interpreted domain, a fixed-size memory that never moves), so the kernel never
//! forms Rust references to its bytes: it copies with raw pointers after checking bounds against
//! the memory's size. A guest racing with such a copy can only garble its own message, which the
//! receiver validates like any other input.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use domos_abi::HostError;
use wasmtime::SharedMemory;

/// Bytes in a wasm page.
pub const PAGE: u64 = 64 * 1024;

/// The linear memory of a component instance.
pub enum Heap {
    /// Shared by the instance's threads and service threads (compiled domains).
    Shared(SharedMemory),
    /// Owned by the instance's single store (interpreted domains, see `SingleHeap`).
    Single(SingleHeap),
}

/// The heap of an interpreted component instance: one store, memory created at its full size
/// (charged to the quota at once) so that it never moves; pages are handed out by a bump
/// pointer.
#[derive(Default)]
pub struct SingleHeap {
    base: AtomicUsize,
    len: AtomicUsize,
    next_page: AtomicU64,
}

impl SingleHeap {
    /// Records where the memory lies and how many pages its module uses from the start.
    pub(crate) fn place(&self, base: usize, len: usize, initial_pages: u64) {
        self.next_page.store(initial_pages, Ordering::Release);
        self.base.store(base, Ordering::Release);
        self.len.store(len, Ordering::Release);
    }

    /// Base and length; `(null, 0)` before `place`, so every access fails its bounds check.
    pub(crate) fn bounds(&self) -> (*mut u8, usize) {
        (self.base.load(Ordering::Acquire) as *mut u8, self.len.load(Ordering::Acquire))
    }

    pub(crate) fn take_pages(&self, pages: u64) -> Result<u32, HostError> {
        let total = self.len.load(Ordering::Acquire) as u64 / PAGE;
        let first = self
            .next_page
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |next| {
                next.checked_add(pages).filter(|end| *end <= total)
            })
            .map_err(|_| HostError::QuotaExceeded)?;
        u32::try_from(first * PAGE).map_err(|_| HostError::QuotaExceeded)
    }
}

/// A snapshot of where a heap lies: taken once, it serves every access of one operation (a
/// portal transfer reads a header, copies a payload and writes handles through one view).
pub struct GuestView {
    base: *mut u8,
    len: usize,
}

impl GuestView {
    /// The current base and length of `memory`. Neither kind of heap ever shrinks or moves
    /// (shared memories by wasm's rules, single heaps because they are made at their full
    /// size), so the view stays valid while `memory` lives; growth only adds bytes it omits.
    pub fn of(memory: &Heap) -> GuestView {
        let (base, len) = match memory {
            Heap::Shared(shared) => {
                let data = shared.data();
                (data.as_ptr() as *mut u8, data.len())
            }
            Heap::Single(single) => single.bounds(),
        };
        GuestView { base, len }
    }

    /// The offset of `[addr, addr + len)` if it lies inside the view.
    fn checked(&self, addr: u32, len: usize) -> Result<usize, HostError> {
        let start = addr as usize;
        match start.checked_add(len) {
            Some(end) if end <= self.len => Ok(start),
            _ => Err(HostError::InvalidArgument),
        }
    }

    /// Copies `out.len()` bytes at `addr` into `out`.
    ///
    /// # Errors
    /// `InvalidArgument` when the range is outside the memory.
    pub fn read(&self, addr: u32, out: &mut [u8]) -> Result<(), HostError> {
        let start = self.checked(addr, out.len())?;
        // SAFETY: `start + out.len() <= self.len`, and the heap never shrinks or moves (see `of`),
        // so the range is mapped. No reference to guest bytes is made.
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(start), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Copies `bytes` to `addr`.
    ///
    /// # Errors
    /// `InvalidArgument` when the range is outside the memory.
    pub fn write(&self, addr: u32, bytes: &[u8]) -> Result<(), HostError> {
        let start = self.checked(addr, bytes.len())?;
        // SAFETY: as in `read`, the checked range is mapped and no reference to it exists.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(start), bytes.len()) };
        Ok(())
    }

    /// Copies `len` bytes at `src_addr` to `dst` at `dst_addr`: the one copy of a portal
    /// message from the caller's heap into the callee's.
    ///
    /// # Errors
    /// `InvalidArgument` when either range is outside its memory.
    pub fn copy_to(&self, src_addr: u32, dst: &GuestView, dst_addr: u32, len: usize) -> Result<(), HostError> {
        let from = self.checked(src_addr, len)?;
        let to = dst.checked(dst_addr, len)?;
        // SAFETY: both ranges are checked against their views; `copy` (memmove) is used because a
        // same-memory copy may overlap.
        unsafe { std::ptr::copy(self.base.add(from), dst.base.add(to), len) };
        Ok(())
    }

    /// The little-endian `u32` at `addr`.
    ///
    /// # Errors
    /// `InvalidArgument` when it lies outside the memory.
    pub fn read_u32(&self, addr: u32) -> Result<u32, HostError> {
        let mut bytes = [0u8; 4];
        self.read(addr, &mut bytes)?;
        Ok(u32::from_le_bytes(bytes))
    }

    /// Writes a little-endian `u32` at `addr`.
    ///
    /// # Errors
    /// `InvalidArgument` when it lies outside the memory.
    pub fn write_u32(&self, addr: u32, value: u32) -> Result<(), HostError> {
        self.write(addr, &value.to_le_bytes())
    }
}

/// Copies `bytes` into `memory` at `addr`.
///
/// # Errors
/// `InvalidArgument` when the range is outside the memory.
pub fn write(memory: &Heap, addr: u32, bytes: &[u8]) -> Result<(), HostError> {
    GuestView::of(memory).write(addr, bytes)
}

/// Reads a UTF-8 string of at most `max` bytes.
///
/// # Errors
/// `InvalidArgument` for a range outside the memory or a string over `max`;
/// `MalformedMessage` for bad UTF-8.
pub fn read_str(memory: &Heap, addr: u32, len: u32, max: usize) -> Result<String, HostError> {
    if len as usize > max {
        return Err(HostError::InvalidArgument);
    }
    let mut bytes = vec![0u8; len as usize];
    GuestView::of(memory).read(addr, &mut bytes)?;
    String::from_utf8(bytes).map_err(|_| HostError::MalformedMessage)
}
