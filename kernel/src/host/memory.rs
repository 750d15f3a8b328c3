//! Memory objects: creating, copying in and out, views, revocation (`crate::object::memory`).

use domos_abi::HostError;

use super::{Ctx, code};
use crate::domain::KernelObject;
use crate::domain::store::StoreCtx;
use crate::object::guest_memory::GuestView;
use crate::object::memory::{Block, MemoryObject};

pub(super) fn memory_create(c: Ctx<'_>, len: u64) -> i64 {
    let ctx = c.data();
    let charge = |bytes| ctx.kernel.charge(&ctx.domain, bytes);
    let block = Block::new(ctx.kernel.memory_engine(), len, Some((ctx.domain.quota(), &charge)));
    insert_memory(ctx, block.map(|b| MemoryObject::whole(b, len, false)))
}

pub(super) fn memory_info(c: Ctx<'_>, handle: u32) -> i64 {
    code(with_memory_locked(c.data(), handle, |mem| {
        Ok(((mem.len() as i64) << 2) | (i64::from(mem.is_device()) << 1) | i64::from(mem.is_writable()))
    }))
}

pub(super) fn memory_read(c: Ctx<'_>, handle: u32, offset: u64, dst: u32, len: u32) -> i64 {
    let ctx = c.data();
    code(with_memory(ctx, handle, |mem| {
        mem.read_into(offset, &GuestView::of(&ctx.instance.memory), dst, u64::from(len)).map(|()| 0)
    }))
}

pub(super) fn memory_write(c: Ctx<'_>, handle: u32, offset: u64, src: u32, len: u32) -> i64 {
    let ctx = c.data();
    code(with_memory(ctx, handle, |mem| {
        mem.write_from(offset, &GuestView::of(&ctx.instance.memory), src, u64::from(len)).map(|()| 0)
    }))
}

pub(super) fn memory_get_u32(c: Ctx<'_>, handle: u32, offset: u64) -> i64 {
    code(with_memory_locked(c.data(), handle, |mem| mem.get_u32(offset).map(i64::from)))
}

pub(super) fn memory_set_u32(c: Ctx<'_>, handle: u32, offset: u64, value: u32) -> i64 {
    code(with_memory_locked(c.data(), handle, |mem| mem.set_u32(offset, value).map(|()| 0)))
}

pub(super) fn memory_copy(c: Ctx<'_>, dst: u32, dst_offset: u64, src: u32, src_offset: u64, len: u64) -> i64 {
    let ctx = c.data();
    let source = ctx.domain.handles().memory(src).cloned();
    code(source.and_then(|source| {
        with_memory(ctx, dst, |mem| mem.copy_from(dst_offset, &source, src_offset, len).map(|()| 0))
    }))
}

pub(super) fn memory_subrange(c: Ctx<'_>, handle: u32, offset: u64, len: u64) -> i64 {
    let ctx = c.data();
    insert_memory(ctx, with_memory(ctx, handle, |mem| mem.subrange(offset, len)))
}

pub(super) fn memory_read_only(c: Ctx<'_>, handle: u32) -> i64 {
    let ctx = c.data();
    insert_memory(ctx, with_memory(ctx, handle, MemoryObject::read_only))
}

pub(super) fn memory_revoke(c: Ctx<'_>, handle: u32) -> i64 {
    let ctx = c.data();
    // Revoke only when the fresh handle is sure to fit, or the caller would lose all access.
    let mut table = ctx.domain.handles();
    let fresh =
        table.memory(handle).and_then(|m| if table.has_room() { m.revoke() } else { Err(HostError::QuotaExceeded) });
    code(fresh.and_then(|m| table.insert(KernelObject::Memory(m))))
}

/// Looks up a memory object of the calling domain and applies `op` to it outside the handle
/// table's lock (for operations that may take long: bulk copies).
fn with_memory<R>(
    ctx: &StoreCtx,
    handle: u32,
    op: impl FnOnce(&MemoryObject) -> Result<R, HostError>,
) -> Result<R, HostError> {
    let memory = ctx.domain.handles().memory(handle)?.clone();
    op(&memory)
}

/// Applies a short `op` (a typed access) to a memory object under the handle table's lock,
/// which saves cloning the object's references.
fn with_memory_locked<R>(
    ctx: &StoreCtx,
    handle: u32,
    op: impl FnOnce(&MemoryObject) -> Result<R, HostError>,
) -> Result<R, HostError> {
    op(ctx.domain.handles().memory(handle)?)
}

/// Stores a new memory object in the calling domain's handle table.
pub(super) fn insert_memory(ctx: &StoreCtx, memory: Result<MemoryObject, HostError>) -> i64 {
    code(memory.and_then(|m| ctx.domain.handles().insert(KernelObject::Memory(m))))
}
