//! Emulated devices: device memory and disks (grant `devices`, checked once when a component
//! is placed in a domain: see `domains.rs`).

use std::sync::Arc;

use domos_abi::{DiskCompletion, HostError};

use super::interrupt::attach_interrupt;
use super::memory::insert_memory;
use super::{Ctx, code};
use crate::domain::KernelObject;
use crate::domain::names::MAX_NAME;
use crate::domain::store::StoreCtx;
use crate::object::disk::Operation;
use crate::object::guest_memory::{self};

pub(super) fn disk_open(c: Ctx<'_>, ptr: u32, len: u32) -> i64 {
    let ctx = c.data();
    let disk = guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME)
        .and_then(|name| ctx.kernel.disk(&name).ok_or(HostError::NotFound));
    code(disk.and_then(|d| ctx.domain.handles().insert(KernelObject::Disk(d))))
}

pub(super) fn disk_info(c: Ctx<'_>, handle: u32) -> i64 {
    code(with_disk(c.data(), handle).map(|d| d.sectors as i64))
}

pub(super) fn disk_submit(
    c: Ctx<'_>,
    handle: u32,
    operation: u32,
    sector: u64,
    count: u32,
    memory: u32,
    offset: u64,
) -> i64 {
    let ctx = c.data();
    let Some(operation) = Operation::from_code(operation) else {
        return HostError::InvalidArgument as i64;
    };
    let memory = match operation {
        Operation::Flush => None,
        _ => match ctx.domain.handles().memory(memory) {
            Ok(memory) => Some(memory.clone()),
            Err(e) => return e as i64,
        },
    };
    code(with_disk(ctx, handle).and_then(|d| d.submit(operation, sector, count, memory, offset)).map(|id| id as i64))
}

pub(super) fn disk_complete(c: Ctx<'_>, handle: u32) -> i64 {
    let done = with_disk(c.data(), handle).and_then(|d| d.complete().ok_or(HostError::NotFound));
    code(done.map(|(id, ok)| DiskCompletion { id, failed: !ok }.encode()))
}

pub(super) fn disk_attach_interrupt(c: Ctx<'_>, handle: u32) -> i64 {
    let ctx = c.data();
    code(with_disk(ctx, handle).and_then(|disk| attach_interrupt(ctx, |source| disk.attach(source.clone()))))
}

pub(super) fn memory_device(c: Ctx<'_>, ptr: u32, len: u32) -> i64 {
    let ctx = c.data();
    let device = guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME)
        .and_then(|name| ctx.kernel.device(&name).ok_or(HostError::NotFound));
    insert_memory(ctx, device)
}

/// The disk behind a handle of the caller's domain.
fn with_disk(ctx: &StoreCtx, handle: u32) -> Result<Arc<crate::object::disk::Disk>, HostError> {
    ctx.domain.handles().disk(handle).cloned()
}
