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
//! block belongs to its emulated device and is never freed by its holders.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use domos_abi::HostError;
use wasmtime::{Engine, MemoryType, SharedMemory};

use super::guest_memory::{GuestView, Heap, PAGE};
use super::quota::{Charge, Quota};

pub use domos_abi::MAX_MEMORY_OBJECT;

/// The storage behind memory objects.
pub struct Block {
    heap: Heap,
    /// Pages charged to `owner`, given back when the block is freed.
    charged: u64,
    owner: Option<Arc<Quota>>,
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
                heap: Heap::Shared(memory),
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

    fn check(&self, offset: u64, len: u64, write: bool) -> Result<u32, HostError> {
        if self.cell.is_revoked() {
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
        GuestView::of(&self.block.heap).read(at, out)
    }

    /// Copies `bytes` into the object at `offset`.
    ///
    /// # Errors
    /// `Revoked`, `ReadOnly`, or `InvalidArgument` for a range outside the object.
    pub fn write_bytes(&self, offset: u64, bytes: &[u8]) -> Result<(), HostError> {
        let at = self.check(offset, bytes.len() as u64, true)?;
        GuestView::of(&self.block.heap).write(at, bytes)
    }

    /// Copies `len` bytes at `offset` of the object to `dst` at `dst_addr` (a guest heap).
    ///
    /// # Errors
    /// `Revoked`, or `InvalidArgument` for a range outside the object or the heap.
    pub fn read_into(&self, offset: u64, dst: &GuestView, dst_addr: u32, len: u64) -> Result<(), HostError> {
        let at = self.check(offset, len, false)?;
        GuestView::of(&self.block.heap).copy_to(at, dst, dst_addr, len as usize)
    }

    /// Copies `len` bytes at `src_addr` of a guest heap into the object at `offset`.
    ///
    /// # Errors
    /// `Revoked`, `ReadOnly`, or `InvalidArgument` for a range outside the object or the heap.
    pub fn write_from(&self, offset: u64, src: &GuestView, src_addr: u32, len: u64) -> Result<(), HostError> {
        let at = self.check(offset, len, true)?;
        src.copy_to(src_addr, &GuestView::of(&self.block.heap), at, len as usize)
    }

    /// Reads the little-endian `u32` at `offset` (a typed access).
    ///
    /// # Errors
    /// `Revoked`, or `InvalidArgument` out of range.
    pub fn get_u32(&self, offset: u64) -> Result<u32, HostError> {
        let at = self.check(offset, 4, false)?;
        GuestView::of(&self.block.heap).read_u32(at)
    }

    /// Writes a little-endian `u32` at `offset` (a typed access).
    ///
    /// # Errors
    /// `Revoked`, `ReadOnly`, or `InvalidArgument` out of range.
    pub fn set_u32(&self, offset: u64, value: u32) -> Result<(), HostError> {
        let at = self.check(offset, 4, true)?;
        GuestView::of(&self.block.heap).write_u32(at, value)
    }

    /// Copies `len` bytes from `src` at `src_offset` into this object at `offset`.
    ///
    /// # Errors
    /// `Revoked`, `ReadOnly`, or `InvalidArgument` out of range.
    pub fn copy_from(&self, offset: u64, src: &MemoryObject, src_offset: u64, len: u64) -> Result<(), HostError> {
        let to = self.check(offset, len, true)?;
        let from = src.check(src_offset, len, false)?;
        GuestView::of(&src.block.heap).copy_to(from, &GuestView::of(&self.block.heap), to, len as usize)
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
