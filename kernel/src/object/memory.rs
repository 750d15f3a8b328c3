//! Memory objects (JX's Memory, ReadOnlyMemory and DeviceMemory): ranges of kernel-owned memory
//! that domains share without copying, through handles.
//!
//! A memory object is a view — offset, length, writability — of a *block*, which is a wasmtime
//! shared memory (a thread-safe byte store, so no further unsafe code is needed: guests reach
//! it only by host calls that copy through `GuestView`). Passing a handle through a portal maps
//! the view into the receiver (Liedtke's *map*; passing and dropping one's own is *grant*).
//! Revocation (*demap*) is O(1), as in JX: every handle to the same view shares one revocation
//! cell, so revoking through any of them invalidates all of them at once, and the revoker
//! receives a fresh view of the same range. Subranges and read-only views get cells of their
//! own that also watch their parent's, so revoking a view revokes what was derived from it. A block lives while any
//! view of it does; its bytes are charged to the domain that created it until then. A device
//! block belongs to its emulated device and is never freed by its holders. A *loan* is a block
//! over part of a component's own heap, lent until the component ends it (decision 0013):
//! ending it waits for an access under way, and none starts afterwards.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use domos_abi::HostError;
use wasmtime::{Engine, MemoryType, SharedMemory};

use super::guest_memory::{GuestView, Heap, PAGE};
use super::quota::{Charge, Quota};

pub use domos_abi::MAX_MEMORY_OBJECT;

/// The storage behind memory objects.
pub struct Block {
    storage: Storage,
    /// Pages charged to `owner`, given back when the block is freed.
    charged: u64,
    owner: Option<Arc<Quota>>,
}

/// Where a block's bytes are.
enum Storage {
    /// A shared memory of its own, made for the block.
    Own(Heap),
    /// A component's heap, part of which the component lends (`memory_lend`) while one of its
    /// calls runs. The lock is held across every access, so ending the loan (taking the heap
    /// out) waits for an access under way, and no access starts afterwards; the block then
    /// no longer keeps the heap alive.
    Lent(Mutex<Option<Heap>>),
}

impl Drop for Block {
    fn drop(&mut self) {
        if let Some(owner) = &self.owner {
            owner.uncharge(self.charged);
        }
    }
}

impl Block {
    /// A zeroed block of `len` bytes charged to `owner` through `charge` (`None`: a device
    /// block, charged to no one).
    ///
    /// # Errors
    /// `InvalidArgument` for a size of 0 or over `MAX_MEMORY_OBJECT`; `QuotaExceeded`.
    pub(crate) fn new(
        engine: &Engine,
        len: u64,
        owner: Option<(&Arc<Quota>, Charge<'_>)>,
    ) -> Result<Arc<Block>, HostError> {
        if len == 0 || len > MAX_MEMORY_OBJECT {
            return Err(HostError::InvalidArgument);
        }
        let pages = len.div_ceil(PAGE);
        let charged = pages * PAGE;
        if let Some((_, charge)) = owner {
            charge(charged)?;
        }
        let owner = owner.map(|(domain, _)| domain);
        let memory = SharedMemory::new(engine, MemoryType::shared(pages as u32, pages as u32));
        match memory {
            Ok(memory) => Ok(Arc::new(Block {
                storage: Storage::Own(Heap::Shared(memory).with_huge_pages()),
                charged: if owner.is_some() { charged } else { 0 },
                owner: owner.cloned(),
            })),
            Err(_) => {
                if let Some(owner) = owner {
                    owner.uncharge(charged);
                }
                Err(HostError::QuotaExceeded)
            }
        }
    }

    /// Runs `access` on a view of the block's bytes; `Revoked` once a loan has ended.
    fn access<R>(&self, access: impl FnOnce(&GuestView) -> Result<R, HostError>) -> Result<R, HostError> {
        match &self.storage {
            Storage::Own(heap) => access(&GuestView::of(heap)),
            Storage::Lent(heap) => match &*crate::lock(heap) {
                Some(heap) => access(&GuestView::of(heap)),
                None => Err(HostError::Revoked),
            },
        }
    }

    /// Runs `access` on views of `from`'s bytes and `to`'s: one lock at a time for one block,
    /// and two lent blocks locked in address order, so that two copies in opposite directions
    /// cannot wait for each other.
    fn access_both<R>(
        from: &Block,
        to: &Block,
        access: impl FnOnce(&GuestView, &GuestView) -> Result<R, HostError>,
    ) -> Result<R, HostError> {
        if std::ptr::eq(from, to) {
            return from.access(|view| access(view, view));
        }
        if (from as *const Block) < (to as *const Block) {
            from.access(|source| to.access(|target| access(source, target)))
        } else {
            to.access(|target| from.access(|source| access(source, target)))
        }
    }

    fn loan_ended(&self) -> bool {
        matches!(&self.storage, Storage::Lent(heap) if crate::lock(heap).is_none())
    }
}

/// Most levels of subranges and read-only views derived from one another.
pub const MAX_DERIVATION_DEPTH: u32 = 16;

/// A revocation cell: set once, never cleared.
#[derive(Default)]
struct Cell {
    revoked: AtomicBool,
    parent: Option<Arc<Cell>>,
    depth: u32,
}

impl Cell {
    fn is_revoked(&self) -> bool {
        let mut cell = Some(self);
        while let Some(c) = cell {
            if c.revoked.load(Ordering::Acquire) {
                return true;
            }
            cell = c.parent.as_deref();
        }
        false
    }
}

/// A memory object: a view of a block.
#[derive(Clone)]
pub struct MemoryObject {
    block: Arc<Block>,
    offset: u64,
    len: u64,
    writable: bool,
    device: bool,
    cell: Arc<Cell>,
}

impl MemoryObject {
    /// A writable view of all of `block`.
    pub(crate) fn whole(block: Arc<Block>, len: u64, device: bool) -> MemoryObject {
        MemoryObject { block, offset: 0, len, writable: true, device, cell: Arc::default() }
    }

    /// A writable view of `[addr, addr + len)` of `heap`, a component's own heap, lent by the
    /// component until it ends the loan ([`end_loan`](Self::end_loan)). Nothing is charged: the
    /// bytes are the lender's.
    ///
    /// # Errors
    /// `InvalidArgument` for an empty range or one outside the heap; `NotPermitted` for the heap
    /// of an interpreted instance, which its one store owns.
    pub(crate) fn lent(heap: &Heap, addr: u32, len: u32) -> Result<MemoryObject, HostError> {
        let Heap::Shared(shared) = heap else {
            return Err(HostError::NotPermitted);
        };
        let (offset, len) = (u64::from(addr), u64::from(len));
        if len == 0 || offset + len > shared.data().len() as u64 {
            return Err(HostError::InvalidArgument);
        }
        let storage = Storage::Lent(Mutex::new(Some(Heap::Shared(shared.clone()))));
        let block = Arc::new(Block { storage, charged: 0, owner: None });
        Ok(MemoryObject { block, offset, len, writable: true, device: false, cell: Arc::default() })
    }

    /// Ends the loan of heap this object views: from now on every view of it answers
    /// `Revoked`. An access under way finishes first.
    ///
    /// # Errors
    /// `InvalidArgument` when the object views no loan; `Revoked` when the loan has ended.
    pub(crate) fn end_loan(&self) -> Result<(), HostError> {
        let Storage::Lent(heap) = &self.block.storage else {
            return Err(HostError::InvalidArgument);
        };
        crate::lock(heap).take().map(drop).ok_or(HostError::Revoked)
    }

    /// The view's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the view is empty (never: objects have at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether writes are allowed.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// Whether it views device memory.
    pub fn is_device(&self) -> bool {
        self.device
    }

    #[inline]
    fn check(&self, offset: u64, len: u64, write: bool) -> Result<u32, HostError> {
        if self.cell.is_revoked() || self.block.loan_ended() {
            return Err(HostError::Revoked);
        }
        if write && !self.writable {
            return Err(HostError::ReadOnly);
        }
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok((self.offset + offset) as u32),
            _ => Err(HostError::InvalidArgument),
        }
    }

    /// Copies the object's bytes at `offset` into `out` (the kernel's own buffer).
    ///
    /// # Errors
    /// `Revoked`, or `InvalidArgument` for a range outside the object.
    pub fn read_bytes(&self, offset: u64, out: &mut [u8]) -> Result<(), HostError> {
        let at = self.check(offset, out.len() as u64, false)?;
        self.block.access(|view| view.read(at, out))
    }

    /// Copies `bytes` into the object at `offset`.
    ///
    /// # Errors
    /// `Revoked`, `ReadOnly`, or `InvalidArgument` for a range outside the object.
    pub fn write_bytes(&self, offset: u64, bytes: &[u8]) -> Result<(), HostError> {
        let at = self.check(offset, bytes.len() as u64, true)?;
        self.block.access(|view| view.write(at, bytes))
    }

    /// Copies `len` bytes at `offset` of the object to `dst` at `dst_addr` (a guest heap).
    ///
    /// # Errors
    /// `Revoked`, or `InvalidArgument` for a range outside the object or the heap.
    pub fn read_into(&self, offset: u64, dst: &GuestView, dst_addr: u32, len: u64) -> Result<(), HostError> {
        let at = self.check(offset, len, false)?;
        self.block.access(|view| view.copy_to(at, dst, dst_addr, len as usize))
    }

    /// Copies `len` bytes at `src_addr` of a guest heap into the object at `offset`.
    ///
    /// # Errors
    /// `Revoked`, `ReadOnly`, or `InvalidArgument` for a range outside the object or the heap.
    pub fn write_from(&self, offset: u64, src: &GuestView, src_addr: u32, len: u64) -> Result<(), HostError> {
        let at = self.check(offset, len, true)?;
        self.block.access(|view| src.copy_to(src_addr, view, at, len as usize))
    }

    /// Reads the little-endian `u32` at `offset` (a typed access).
    ///
    /// # Errors
    /// `Revoked`, or `InvalidArgument` out of range.
    pub fn get_u32(&self, offset: u64) -> Result<u32, HostError> {
        let at = self.check(offset, 4, false)?;
        self.block.access(|view| view.read_u32(at))
    }

    /// Writes a little-endian `u32` at `offset` (a typed access).
    ///
    /// # Errors
    /// `Revoked`, `ReadOnly`, or `InvalidArgument` out of range.
    pub fn set_u32(&self, offset: u64, value: u32) -> Result<(), HostError> {
        let at = self.check(offset, 4, true)?;
        self.block.access(|view| view.write_u32(at, value))
    }

    /// Copies `len` bytes from `src` at `src_offset` into this object at `offset`.
    ///
    /// # Errors
    /// `Revoked`, `ReadOnly`, or `InvalidArgument` out of range.
    pub fn copy_from(&self, offset: u64, src: &MemoryObject, src_offset: u64, len: u64) -> Result<(), HostError> {
        let to = self.check(offset, len, true)?;
        let from = src.check(src_offset, len, false)?;
        Block::access_both(&src.block, &self.block, |source, target| source.copy_to(from, target, to, len as usize))
    }

    /// Copies `pieces` (a source, an offset in it, a length) one after another to `offset`,
    /// until one fails; returns how many it copied. The target is checked and reached once for
    /// all pieces whose sources are blocks of their own (a cache's views: no lock each); a
    /// piece from a loan goes the way of [`copy_from`](Self::copy_from), which locks two loans
    /// in address order.
    pub fn gather_from<'a>(
        &self,
        offset: u64,
        pieces: impl IntoIterator<Item = (&'a MemoryObject, u64, u64)>,
    ) -> usize {
        let mut pieces = pieces.into_iter().peekable();
        let (mut at, mut copied) = (offset, 0);
        if self.check(offset, 0, true).is_err() {
            return 0;
        }
        let mut failed = false;
        // An `Err` here is a loan that ended: the pieces left fail below.
        let _ = self.block.access(|target| {
            while let Some(&(source, src_offset, len)) = pieces.peek() {
                let Storage::Own(heap) = &source.block.storage else { break };
                let to = at.checked_add(len).filter(|&end| end <= self.len).map(|_| (self.offset + at) as u32);
                let from = source.check(src_offset, len, false).ok();
                let done = to
                    .zip(from)
                    .is_some_and(|(to, from)| GuestView::of(heap).copy_to(from, target, to, len as usize).is_ok());
                if !done {
                    failed = true;
                    break;
                }
                pieces.next();
                (at, copied) = (at + len, copied + 1);
            }
            Ok(())
        });
        if failed {
            return copied;
        }
        for (source, src_offset, len) in pieces {
            if self.copy_from(at, source, src_offset, len).is_err() {
                break;
            }
            (at, copied) = (at + len, copied + 1);
        }
        copied
    }

    /// A view of `[offset, offset + len)`, revoked with this one.
    ///
    /// # Errors
    /// `Revoked`; `InvalidArgument` out of range, for an empty range, or past
    /// `MAX_DERIVATION_DEPTH`.
    pub fn subrange(&self, offset: u64, len: u64) -> Result<MemoryObject, HostError> {
        self.check(offset, len, false)?;
        if len == 0 {
            return Err(HostError::InvalidArgument);
        }
        Ok(MemoryObject { offset: self.offset + offset, len, cell: self.child_cell()?, ..self.clone() })
    }

    /// A read-only view of the same range, revoked with this one; it can never become writable.
    ///
    /// # Errors
    /// `Revoked`; `InvalidArgument` past `MAX_DERIVATION_DEPTH`.
    pub fn read_only(&self) -> Result<MemoryObject, HostError> {
        self.check(0, 0, false)?;
        Ok(MemoryObject { writable: false, cell: self.child_cell()?, ..self.clone() })
    }

    /// Revokes this view and everything derived from it; returns a fresh view of the same range.
    ///
    /// # Errors
    /// `Revoked` when it was revoked already.
    pub fn revoke(&self) -> Result<MemoryObject, HostError> {
        // One revoker wins: the swap, not the check, decides.
        if self.cell.is_revoked() || self.cell.revoked.swap(true, Ordering::AcqRel) {
            return Err(HostError::Revoked);
        }
        let fresh = Cell { revoked: AtomicBool::new(false), parent: self.cell.parent.clone(), depth: self.cell.depth };
        Ok(MemoryObject { cell: Arc::new(fresh), ..self.clone() })
    }

    /// A view of the same range with a cell of its own, watching this one's: what a holder of
    /// device memory receives, so its revocation cannot take the device from anyone else.
    pub(crate) fn handed_out(&self) -> Result<MemoryObject, HostError> {
        Ok(MemoryObject { cell: self.child_cell()?, ..self.clone() })
    }

    fn child_cell(&self) -> Result<Arc<Cell>, HostError> {
        let depth = self.cell.depth + 1;
        if depth > MAX_DERIVATION_DEPTH {
            return Err(HostError::InvalidArgument);
        }
        Ok(Arc::new(Cell { revoked: AtomicBool::new(false), parent: Some(self.cell.clone()), depth }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::Config;

    fn engine() -> Engine {
        Engine::new(Config::new().wasm_threads(true).shared_memory(true)).unwrap()
    }

    /// A writable object of `len` bytes charged to `quota`.
    fn object(engine: &Engine, quota: &Arc<Quota>, len: u64) -> MemoryObject {
        let block = Block::new(engine, len, Some((quota, &|bytes| quota.charge(bytes)))).unwrap();
        MemoryObject::whole(block, len, false)
    }

    #[test]
    fn blocks_charge_whole_pages_and_give_them_back_when_the_last_view_goes() {
        let engine = engine();
        let quota = Arc::new(Quota::new(4 * PAGE, true));
        let one = object(&engine, &quota, 1);
        assert_eq!(quota.used(), PAGE, "one byte costs a page");
        let two = object(&engine, &quota, PAGE + 1);
        assert_eq!(quota.used(), 3 * PAGE);
        let view = two.subrange(PAGE, 1).unwrap();
        drop(two);
        assert_eq!(quota.used(), 3 * PAGE, "a derived view keeps the block");
        view.write_bytes(0, &[42]).unwrap();
        drop(view);
        assert_eq!(quota.used(), PAGE);
        drop(one);
        assert_eq!(quota.used(), 0);
    }

    #[test]
    fn sizes_and_quotas_are_checked_before_anything_is_charged() {
        let engine = engine();
        let quota = Arc::new(Quota::new(2 * PAGE, true));
        let charge = |bytes| quota.charge(bytes);
        for len in [0, MAX_MEMORY_OBJECT + 1, u64::MAX] {
            let made = Block::new(&engine, len, Some((&quota, &charge)));
            assert_eq!(made.err(), Some(HostError::InvalidArgument), "{len}");
        }
        let made = Block::new(&engine, 2 * PAGE + 1, Some((&quota, &charge)));
        assert_eq!(made.err(), Some(HostError::QuotaExceeded), "three pages do not fit in two");
        assert_eq!(quota.used(), 0);
        let made = Block::new(&engine, 2 * PAGE, Some((&quota, &charge)));
        assert!(made.is_ok(), "exactly the quota fits");
    }

    #[test]
    fn a_device_block_is_charged_to_no_one() {
        let engine = engine();
        let device = MemoryObject::whole(Block::new(&engine, 3, None).unwrap(), 3, true);
        assert!(device.is_device() && device.is_writable());
        device.write_bytes(0, &[1, 2, 3]).unwrap();
        let handed = device.handed_out().unwrap();
        assert!(handed.is_device());
        // A holder revoking its own view does not take the device from the others.
        handed.revoke().unwrap();
        assert_eq!(handed.get_u32(0), Err(HostError::Revoked));
        let mut out = [0u8; 3];
        assert_eq!(device.read_bytes(0, &mut out), Ok(()));
        assert_eq!(out, [1, 2, 3]);
        assert!(device.handed_out().unwrap().read_bytes(0, &mut out).is_ok(), "the next holder gets a live view");
    }

    #[test]
    fn accesses_stay_inside_the_object_not_the_page() {
        let engine = engine();
        let quota = Arc::new(Quota::new(PAGE, true));
        let memory = object(&engine, &quota, 100);
        assert_eq!(memory.len(), 100);
        assert_eq!(memory.set_u32(96, 7), Ok(()));
        assert_eq!(memory.set_u32(97, 7), Err(HostError::InvalidArgument), "the block has a page, the object 100 B");
        assert_eq!(memory.get_u32(100), Err(HostError::InvalidArgument));
        assert_eq!(memory.get_u32(u64::MAX - 1), Err(HostError::InvalidArgument), "offset + 4 overflows");
        assert_eq!(memory.read_bytes(1, &mut [0; 100]), Err(HostError::InvalidArgument));
        assert_eq!(memory.write_bytes(100, &[]), Ok(()), "an empty range at the end");
        assert_eq!(memory.get_u32(96), Ok(7));
    }

    #[test]
    fn a_subrange_is_a_window_on_its_parent_and_cannot_reach_past_it() {
        let engine = engine();
        let quota = Arc::new(Quota::new(PAGE, true));
        let memory = object(&engine, &quota, 100);
        let window = memory.subrange(40, 20).unwrap();
        assert_eq!(window.len(), 20);
        window.set_u32(0, 0xabcd_1234).unwrap();
        assert_eq!(memory.get_u32(40), Ok(0xabcd_1234), "the window's offset 0 is the parent's 40");
        memory.set_u32(56, 99).unwrap();
        assert_eq!(window.get_u32(16), Ok(99));
        assert_eq!(window.get_u32(17), Err(HostError::InvalidArgument), "the parent's bytes after the window");
        assert_eq!(window.subrange(10, 11).err(), Some(HostError::InvalidArgument));
        let inner = window.subrange(10, 10).unwrap();
        inner.write_bytes(0, &[1; 10]).unwrap();
        let mut out = [0u8; 12];
        memory.read_bytes(49, &mut out).unwrap();
        assert_eq!(out, [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0], "the inner window is the parent's [50, 60)");
        assert_eq!(memory.subrange(100, 1).err(), Some(HostError::InvalidArgument));
        assert_eq!(memory.subrange(u64::MAX, 2).err(), Some(HostError::InvalidArgument), "no overflow");
        assert_eq!(memory.subrange(50, 0).err(), Some(HostError::InvalidArgument), "empty");
    }

    #[test]
    fn a_read_only_view_refuses_every_write_and_so_does_all_derived_from_it() {
        let engine = engine();
        let quota = Arc::new(Quota::new(PAGE, true));
        let memory = object(&engine, &quota, 64);
        memory.set_u32(8, 5).unwrap();
        let read_only = memory.read_only().unwrap();
        assert!(!read_only.is_writable());
        assert_eq!(read_only.get_u32(8), Ok(5));
        assert_eq!(read_only.set_u32(8, 6), Err(HostError::ReadOnly));
        assert_eq!(read_only.write_bytes(0, &[1]), Err(HostError::ReadOnly));
        assert_eq!(read_only.copy_from(0, &memory, 0, 4), Err(HostError::ReadOnly));
        let sub = read_only.subrange(8, 8).unwrap();
        assert!(!sub.is_writable(), "a subrange of a read-only view is read-only");
        assert_eq!(sub.set_u32(0, 6), Err(HostError::ReadOnly));
        let fresh = read_only.revoke().unwrap();
        assert_eq!(fresh.set_u32(8, 6), Err(HostError::ReadOnly), "revoking does not make it writable");
        assert_eq!(memory.get_u32(8), Ok(5), "nothing was written");
        // Copying out of a read-only view is allowed.
        memory.copy_from(0, &fresh.subrange(8, 8).unwrap(), 0, 4).unwrap();
        assert_eq!(memory.get_u32(0), Ok(5));
    }

    #[test]
    fn revoking_a_view_revokes_its_copies_and_what_was_derived_but_not_its_parent() {
        let engine = engine();
        let quota = Arc::new(Quota::new(PAGE, true));
        let memory = object(&engine, &quota, 64);
        memory.set_u32(0, 1).unwrap();
        let copy = memory.clone(); // another handle to the same view
        let window = memory.subrange(0, 32).unwrap();
        let window_copy = window.clone();
        let inner = window.subrange(0, 8).unwrap();
        let read_only = inner.read_only().unwrap();

        let fresh_window = window.revoke().unwrap();
        for revoked in [&window, &window_copy, &inner, &read_only] {
            assert_eq!(revoked.get_u32(0), Err(HostError::Revoked));
            assert_eq!(revoked.read_only().err(), Some(HostError::Revoked));
            assert_eq!(revoked.subrange(0, 4).err(), Some(HostError::Revoked));
        }
        assert_eq!(window.revoke().err(), Some(HostError::Revoked), "only once");
        assert_eq!(inner.revoke().err(), Some(HostError::Revoked), "nor through a derived view");
        assert_eq!(memory.get_u32(0), Ok(1), "the parent is untouched");
        assert_eq!(copy.get_u32(0), Ok(1));
        assert_eq!(fresh_window.get_u32(0), Ok(1), "the revoker keeps the range");
        assert_eq!(fresh_window.len(), 32);

        // The fresh view still hangs from the parent: revoking the parent takes it too.
        let fresh_memory = copy.revoke().unwrap();
        assert_eq!(memory.get_u32(0), Err(HostError::Revoked), "a copy's revocation is the view's");
        assert_eq!(fresh_window.get_u32(0), Err(HostError::Revoked));
        assert_eq!(fresh_memory.get_u32(0), Ok(1));
    }

    #[test]
    fn derivation_is_limited_in_depth_and_revocation_does_not_reset_it() {
        let engine = engine();
        let quota = Arc::new(Quota::new(PAGE, true));
        let mut view = object(&engine, &quota, 64);
        for level in 1..=MAX_DERIVATION_DEPTH {
            view = if level % 2 == 0 { view.read_only() } else { view.subrange(0, 64) }.unwrap();
        }
        assert_eq!(view.subrange(0, 1).err(), Some(HostError::InvalidArgument));
        assert_eq!(view.read_only().err(), Some(HostError::InvalidArgument));
        assert_eq!(view.handed_out().err(), Some(HostError::InvalidArgument));
        let fresh = view.revoke().unwrap();
        assert_eq!(fresh.subrange(0, 1).err(), Some(HostError::InvalidArgument), "a fresh view keeps its depth");
        assert_eq!(fresh.get_u32(0), Ok(0), "but is usable");
    }

    #[test]
    fn copies_between_objects_check_both_ends() {
        let engine = engine();
        let quota = Arc::new(Quota::new(2 * PAGE, true));
        let (a, b) = (object(&engine, &quota, 16), object(&engine, &quota, 8));
        a.write_bytes(0, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]).unwrap();
        assert_eq!(b.copy_from(0, &a, 8, 8), Ok(()));
        let mut out = [0u8; 8];
        b.read_bytes(0, &mut out).unwrap();
        assert_eq!(out, [9, 10, 11, 12, 13, 14, 15, 16]);
        assert_eq!(b.copy_from(1, &a, 0, 8), Err(HostError::InvalidArgument), "destination too short");
        assert_eq!(b.copy_from(0, &a, 9, 8), Err(HostError::InvalidArgument), "source too short");
        // Within one object, overlapping.
        a.copy_from(2, &a, 0, 8).unwrap();
        let mut out = [0u8; 10];
        a.read_bytes(0, &mut out).unwrap();
        assert_eq!(out, [1, 2, 1, 2, 3, 4, 5, 6, 7, 8]);
        let source = a.subrange(0, 8).unwrap();
        a.revoke().unwrap();
        assert_eq!(b.copy_from(0, &source, 0, 4), Err(HostError::Revoked), "from a revoked source");
        b.read_bytes(0, &mut out[..8]).unwrap();
        assert_eq!(out[..8], [9, 10, 11, 12, 13, 14, 15, 16], "nothing was copied");
    }

    #[test]
    fn guest_copies_are_checked_against_the_object_and_the_heap() {
        let engine = engine();
        let quota = Arc::new(Quota::new(PAGE, true));
        let memory = object(&engine, &quota, 16);
        let heap = Heap::Shared(SharedMemory::new(&engine, MemoryType::shared(1, 1)).unwrap());
        let guest = GuestView::of(&heap);
        guest.write(100, b"0123456789abcdef").unwrap();
        assert_eq!(memory.write_from(0, &guest, 100, 16), Ok(()));
        assert_eq!(memory.write_from(1, &guest, 100, 16), Err(HostError::InvalidArgument));
        assert_eq!(memory.write_from(0, &guest, 65530, 16), Err(HostError::InvalidArgument), "heap too short");
        assert_eq!(memory.read_into(8, &guest, 0, 8), Ok(()));
        let mut out = [0u8; 8];
        guest.read(0, &mut out).unwrap();
        assert_eq!(&out, b"89abcdef");
        assert_eq!(memory.read_into(0, &guest, 65535, 2), Err(HostError::InvalidArgument));
        assert_eq!(memory.read_only().unwrap().write_from(0, &guest, 0, 1), Err(HostError::ReadOnly));
        assert_eq!(memory.get_u32(0), Ok(u32::from_le_bytes(*b"0123")));
    }

    #[test]
    fn ending_a_loan_waits_for_the_copy_under_way_and_stops_every_later_one() {
        let engine = engine();
        let heap = Heap::Shared(SharedMemory::new(&engine, MemoryType::shared(1, 1)).unwrap());
        let lent = MemoryObject::lent(&heap, 4096, 8192).unwrap();
        let view = lent.subrange(0, 8192).unwrap();
        let writes = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let writer = {
            let writes = writes.clone();
            std::thread::spawn(move || {
                // Alternating bytes: a write that landed after the end would change the heap.
                for byte in (0u8..=1).cycle() {
                    match view.write_bytes(0, &[byte; 8192]) {
                        Ok(()) => writes.fetch_add(1, Ordering::Relaxed),
                        Err(e) => return e,
                    };
                }
                unreachable!("cycle() never ends")
            })
        };
        while writes.load(Ordering::Relaxed) < 100 {
            std::thread::yield_now();
        }
        assert_eq!(lent.end_loan(), Ok(()));
        let snapshot = |bytes: &mut [u8]| GuestView::of(&heap).read(4096, bytes).unwrap();
        let (mut before, mut after) = (vec![0u8; 8192], vec![0u8; 8192]);
        snapshot(&mut before);
        assert_eq!(writer.join().unwrap(), HostError::Revoked);
        snapshot(&mut after);
        assert!(before == after, "a write landed after the loan ended");
        assert!(before.iter().all(|&b| b == before[0]), "a write was cut in two");
        assert_eq!(lent.end_loan(), Err(HostError::Revoked));
        let own = MemoryObject::whole(Block::new(&engine, 1, None).unwrap(), 1, false);
        assert_eq!(own.end_loan(), Err(HostError::InvalidArgument), "only a loan ends");
        let single = Heap::Single(super::super::guest_memory::SingleHeap::default());
        assert_eq!(MemoryObject::lent(&single, 0, 1).err(), Some(HostError::NotPermitted));
        assert_eq!(MemoryObject::lent(&heap, 65535, 2).err(), Some(HostError::InvalidArgument));
    }
}
