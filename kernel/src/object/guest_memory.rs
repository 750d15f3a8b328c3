//! Access to guests' linear memories from the kernel: every `unsafe` memory access of the
//! kernel is in this module.
//!
//! A component's heap is a wasm *shared* memory that the threads of the domain may write at any
//! time (or, in an interpreted domain, a fixed-size memory that never moves), so the kernel never
//! forms Rust references to its bytes: it copies with raw pointers after checking bounds against
//! the memory's size. A guest racing with such a copy can only garble its own message, which the
//! receiver validates like any other input.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use domos_abi::HostError;
use domos_loader::instrument;
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

impl Heap {
    /// The heap, up to its maximum, backed by huge pages where Linux can (transparent huge
    /// pages, `madvise(MADV_HUGEPAGE)`) if that maximum is at least [`HUGE_PAGE`]: a large memory
    /// object (a buffer cache's blocks) is then faulted in 2 MiB at a time, not 4 KiB, and its
    /// copies miss the TLB less; a component's heap gets huge pages as it grows, and a buffer in
    /// it is as contiguous as the blocks copied into it. Linux refusing (huge pages switched
    /// off) leaves it as it was. A single store's heap is left as it is.
    pub(crate) fn with_huge_pages(self) -> Heap {
        if let Heap::Shared(shared) = &self {
            let ty = shared.ty();
            let reach = ty.maximum().unwrap_or(ty.minimum()).saturating_mul(ty.page_size());
            let base = shared.data().as_ptr() as *mut libc::c_void;
            if let Ok(reach) = usize::try_from(reach)
                && reach >= HUGE_PAGE
            {
                // SAFETY: MADV_HUGEPAGE changes how Linux backs the range, never its contents
                // or its protection. The range starts at the memory's base (page-aligned, from
                // wasmtime) and ends at its maximum, which wasmtime reserves whole when it makes
                // a shared memory, since one never moves; the reservation stays mapped while
                // `self`, which the call borrows, lives.
                unsafe { libc::madvise(base, reach, libc::MADV_HUGEPAGE) };
            }
        }
        self
    }
}

/// A transparent huge page of x86-64 and AArch64 Linux.
const HUGE_PAGE: usize = 2 << 20;

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

    /// Forgets where the memory lies, before the store that owns it drops it: views taken from
    /// now on have no bytes.
    pub(crate) fn forget(&self) {
        self.len.store(0, Ordering::Release);
        self.base.store(0, Ordering::Release);
    }

    /// Base and length; `(null, 0)` before `place` and after `forget`, so every access fails its
    /// bounds check.
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
///
/// The view borrows the `Heap` it was taken of, so it cannot outlive it. What keeps the bytes
/// themselves alive while the `Heap` lives: a shared heap holds a reference to its wasmtime
/// shared memory, which is freed only with the last one; a single heap's memory belongs to its
/// instance's one store, whose `ServiceThread` clears the heap's bounds (`SingleHeap::forget`)
/// before the store is dropped, so a view taken afterwards has no bytes at all.
pub struct GuestView<'heap> {
    base: *mut u8,
    len: usize,
    heap: PhantomData<&'heap Heap>,
}

impl<'heap> GuestView<'heap> {
    /// The current base and length of `memory`. Neither kind of heap ever shrinks or moves
    /// (shared memories by wasm's rules, single heaps because they are made at their full
    /// size), so the view stays valid while `memory` lives; growth only adds bytes it omits.
    pub fn of(memory: &'heap Heap) -> GuestView<'heap> {
        let (base, len) = match memory {
            Heap::Shared(shared) => {
                let data = shared.data();
                (data.as_ptr() as *mut u8, data.len())
            }
            Heap::Single(single) => single.bounds(),
        };
        GuestView { base, len, heap: PhantomData }
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
        // SAFETY: `start + out.len() <= self.len`, the heap never shrinks or moves, and its bytes
        // live at least as long as the borrowed `Heap` (see the type's documentation), so the
        // range is mapped now. No reference to guest bytes is made.
        unsafe { copy(self.base.add(start), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Copies `bytes` to `addr`.
    ///
    /// # Errors
    /// `InvalidArgument` when the range is outside the memory.
    pub fn write(&self, addr: u32, bytes: &[u8]) -> Result<(), HostError> {
        let start = self.checked(addr, bytes.len())?;
        // SAFETY: as in `read`, the checked range is mapped and no reference to it exists.
        unsafe { copy(bytes.as_ptr(), self.base.add(start), bytes.len()) };
        Ok(())
    }

    /// Copies `len` bytes at `src_addr` to `dst` at `dst_addr`: the one copy of a portal
    /// message from the caller's heap into the callee's.
    ///
    /// # Errors
    /// `InvalidArgument` when either range is outside its memory.
    #[inline]
    pub fn copy_to(&self, src_addr: u32, dst: &GuestView, dst_addr: u32, len: usize) -> Result<(), HostError> {
        let from = self.checked(src_addr, len)?;
        let to = dst.checked(dst_addr, len)?;
        // SAFETY: both ranges are checked against their views; `copy` allows a same-memory copy
        // to overlap.
        unsafe { copy(self.base.add(from), dst.base.add(to), len) };
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

/// Copies `len` bytes from `src` to `dst`, as `std::ptr::copy` does: inline for short copies
/// (a message's header words become a load and a store), [`copy_long`] for the others.
///
/// # Safety
/// As for `std::ptr::copy`: both ranges valid for `len` bytes.
#[inline(always)]
unsafe fn copy(src: *const u8, dst: *mut u8, len: usize) {
    if len <= COPY_PIECE {
        // SAFETY: the caller's promise.
        unsafe { std::ptr::copy(src, dst, len) }
    } else {
        // SAFETY: the caller's promise.
        unsafe { copy_long(src, dst, len) }
    }
}

/// Bytes of a piece of [`copy_long`], and the longest copy made in one piece.
const COPY_PIECE: usize = instrument::COPY_PIECE as usize;

/// A copy longer than [`COPY_PIECE`]. glibc copies large blocks with `rep movsb`, which this
/// machine's processors run up to 38 times slower when the target lies just after the source
/// modulo 4 KiB (a page-aligned cache block read into a buffer that starts 16 bytes into its
/// page): such copies go in pieces, as the loader makes components' own copies go
/// ([`instrument::copies_in_pieces`]).
///
/// # Safety
/// As for `std::ptr::copy`: both ranges valid for `len` bytes.
unsafe fn copy_long(src: *const u8, dst: *mut u8, len: usize) {
    if !instrument::copies_in_pieces(src as usize, dst as usize, len) {
        // SAFETY: the caller's promise.
        unsafe { std::ptr::copy(src, dst, len) };
        return;
    }
    for start in (0..len).step_by(COPY_PIECE) {
        let n = COPY_PIECE.min(len - start);
        // SAFETY: `start + n <= len`, inside both ranges, which do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.add(start), dst.add(start), n) };
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

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::{Config, Engine, MemoryType};

    /// A one-page shared memory, like a compiled component's heap.
    fn shared_heap() -> Heap {
        let engine = Engine::new(Config::new().wasm_threads(true).shared_memory(true)).unwrap();
        Heap::Shared(SharedMemory::new(&engine, MemoryType::shared(1, 1)).unwrap())
    }

    fn bytes(heap: &Heap, addr: u32, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        GuestView::of(heap).read(addr, &mut out).unwrap();
        out
    }

    #[test]
    fn reads_and_writes_reach_the_last_byte_and_no_further() {
        let heap = shared_heap();
        let view = GuestView::of(&heap);
        assert_eq!(view.write(65532, &[1, 2, 3, 4]), Ok(()));
        assert_eq!(bytes(&heap, 65532, 4), [1, 2, 3, 4]);
        // One byte over the end: refused as a whole, nothing written.
        assert_eq!(view.write(65533, &[9, 9, 9, 9]), Err(HostError::InvalidArgument));
        assert_eq!(bytes(&heap, 65532, 4), [1, 2, 3, 4]);
        let mut out = [7u8; 4];
        assert_eq!(view.read(65533, &mut out), Err(HostError::InvalidArgument));
        assert_eq!(out, [7; 4], "a refused read leaves the buffer alone");
        // Empty ranges: at the end is inside, past it is not.
        assert_eq!(view.read(65536, &mut []), Ok(()));
        assert_eq!(view.read(65537, &mut []), Err(HostError::InvalidArgument));
    }

    #[test]
    fn addresses_near_the_top_of_the_address_space_are_refused() {
        let heap = shared_heap();
        let view = GuestView::of(&heap);
        for addr in [u32::MAX, u32::MAX - 3, 0x8000_0000, 65536] {
            assert_eq!(view.write(addr, &[0xaa; 4]), Err(HostError::InvalidArgument), "{addr:#x}");
            assert_eq!(view.read_u32(addr), Err(HostError::InvalidArgument), "{addr:#x}");
            assert_eq!(view.write_u32(addr, 1), Err(HostError::InvalidArgument), "{addr:#x}");
        }
        assert!(bytes(&heap, 0, 65536).iter().all(|b| *b == 0), "nothing was written anywhere");
    }

    /// `addr + len` overflowing `usize` must not wrap around to a small, in-range end.
    #[test]
    fn a_length_that_overflows_is_refused_before_any_copy() {
        let heap = shared_heap();
        let other = shared_heap();
        let (view, dst) = (GuestView::of(&heap), GuestView::of(&other));
        view.write(0, &[5; 16]).unwrap();
        assert_eq!(view.copy_to(1, &dst, 0, usize::MAX), Err(HostError::InvalidArgument));
        assert_eq!(view.copy_to(0, &dst, 1, usize::MAX), Err(HostError::InvalidArgument));
        assert_eq!(view.copy_to(0, &dst, 0, usize::MAX), Err(HostError::InvalidArgument));
        assert_eq!(view.copy_to(0, &dst, 0, 65537), Err(HostError::InvalidArgument));
        assert!(bytes(&other, 0, 65536).iter().all(|b| *b == 0));
    }

    #[test]
    fn copies_check_both_ranges_and_a_copy_within_one_memory_may_overlap() {
        let (heap, other) = (shared_heap(), shared_heap());
        let (view, dst) = (GuestView::of(&heap), GuestView::of(&other));
        view.write(100, b"portal message").unwrap();
        assert_eq!(view.copy_to(100, &dst, 65530, 14), Err(HostError::InvalidArgument), "destination too short");
        assert!(bytes(&other, 65530, 6).iter().all(|b| *b == 0));
        assert_eq!(view.copy_to(100, &dst, 0, 14), Ok(()));
        assert_eq!(bytes(&other, 0, 14), b"portal message");
        // Overlapping source and destination in one memory: a memmove, not a garbled copy.
        view.copy_to(100, &view, 103, 14).unwrap();
        assert_eq!(bytes(&heap, 100, 17), b"porportal message");
        view.copy_to(103, &view, 100, 14).unwrap();
        assert_eq!(&bytes(&heap, 100, 14), b"portal message");
    }

    #[test]
    fn words_are_little_endian() {
        let heap = shared_heap();
        let view = GuestView::of(&heap);
        view.write_u32(8, 0x0102_0304).unwrap();
        assert_eq!(bytes(&heap, 8, 4), [4, 3, 2, 1]);
        assert_eq!(view.read_u32(8), Ok(0x0102_0304));
        write(&heap, 12, &[0xff, 0, 0, 0x80]).unwrap();
        assert_eq!(view.read_u32(12), Ok(0x8000_00ff));
    }

    #[test]
    fn strings_are_limited_checked_and_must_be_utf8() {
        let heap = shared_heap();
        write(&heap, 0, "grüße".as_bytes()).unwrap();
        assert_eq!(read_str(&heap, 0, 7, 7), Ok("grüße".to_string()), "exactly the limit");
        assert_eq!(read_str(&heap, 0, 7, 6), Err(HostError::InvalidArgument), "one byte over the limit");
        assert_eq!(read_str(&heap, 0, 3, 7), Err(HostError::MalformedMessage), "cut inside ü");
        assert_eq!(read_str(&heap, 65530, 7, 256), Err(HostError::InvalidArgument), "past the end");
        assert_eq!(read_str(&heap, u32::MAX, 2, 256), Err(HostError::InvalidArgument));
        // The limit is checked before the length is used to allocate.
        assert_eq!(read_str(&heap, 0, u32::MAX, 256), Err(HostError::InvalidArgument));
        assert_eq!(read_str(&heap, 0, 0, 0), Ok(String::new()));
    }

    #[test]
    fn a_single_heap_refuses_everything_until_placed_then_hands_out_its_pages() {
        let unplaced = Heap::Single(SingleHeap::default());
        let view = GuestView::of(&unplaced);
        assert_eq!(view.read_u32(0), Err(HostError::InvalidArgument));
        assert_eq!(view.write(0, &[1]), Err(HostError::InvalidArgument));
        assert_eq!(read_str(&unplaced, 0, 1, 10), Err(HostError::InvalidArgument));
        let Heap::Single(single) = &unplaced else { unreachable!() };
        assert_eq!(single.take_pages(1), Err(HostError::QuotaExceeded), "no pages before place");

        // Placed over a real four-page memory whose module uses the first page.
        let engine = Engine::default();
        let mut store = wasmtime::Store::new(&engine, ());
        let memory = wasmtime::Memory::new(&mut store, MemoryType::new(4, Some(4))).unwrap();
        let heap = Heap::Single(SingleHeap::default());
        let Heap::Single(single) = &heap else { unreachable!() };
        single.place(memory.data_ptr(&store) as usize, memory.data_size(&store), 1);
        let view = GuestView::of(&heap);
        view.write_u32(4 * 65536 - 4, 0xdead_beef).unwrap();
        assert_eq!(memory.data(&store)[4 * 65536 - 4..], [0xef, 0xbe, 0xad, 0xde]);
        assert_eq!(view.read_u32(4 * 65536 - 3), Err(HostError::InvalidArgument));
        assert_eq!(single.take_pages(2), Ok(65536), "the pages after the module's own");
        assert_eq!(single.take_pages(2), Err(HostError::QuotaExceeded), "only one page is left");
        assert_eq!(single.take_pages(u64::MAX), Err(HostError::QuotaExceeded), "no overflow");
        assert_eq!(single.take_pages(1), Ok(3 * 65536));
        assert_eq!(single.take_pages(1), Err(HostError::QuotaExceeded));

        // Before its store drops the memory, the heap forgets it: no view reaches those bytes.
        single.forget();
        assert_eq!(GuestView::of(&heap).read_u32(0), Err(HostError::InvalidArgument));
        assert_eq!(GuestView::of(&heap).write(0, &[1]), Err(HostError::InvalidArgument));
        drop(store);
        assert_eq!(read_str(&heap, 0, 1, 10), Err(HostError::InvalidArgument));
    }
}
