//! Mounted FUSE connections (grant `devices`): opening one, attaching its receive ring and its
//! interrupt, taking requests and writing replies (`object::fuse`).

use std::sync::Arc;

use domos_abi::{Grant, HostError};

use super::interrupt::attach_interrupt;
use super::{Ctx, code};
use crate::domain::KernelObject;
use crate::domain::names::MAX_NAME;
use crate::domain::store::StoreCtx;
use crate::object::fuse::Fuse;
use crate::object::guest_memory;

pub(super) fn fuse_open(c: Ctx<'_>, ptr: u32, len: u32) -> i64 {
    let ctx = c.data();
    if !ctx.domain.grants.contains(&Grant::Devices) {
        return HostError::NotPermitted as i64;
    }
    let fuse = guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME)
        .and_then(|name| ctx.kernel.fuses.get(&name).ok_or(HostError::NotFound));
    code(fuse.and_then(|f| ctx.domain.handles().insert(KernelObject::Fuse(f))))
}

pub(super) fn fuse_attach(c: Ctx<'_>, handle: u32, rx: u32, slot: u32) -> i64 {
    let ctx = c.data();
    let rx = ctx.domain.handles().memory(rx).cloned();
    code(with_fuse(ctx, handle).and_then(|f| rx.and_then(|rx| f.attach(rx, slot))))
}

pub(super) fn fuse_ready(c: Ctx<'_>, handle: u32) -> i64 {
    code(with_fuse(c.data(), handle).and_then(|f| f.ready()).map(|ready| ready as i64))
}

pub(super) fn fuse_release(c: Ctx<'_>, handle: u32, count: u32) -> i64 {
    code(with_fuse(c.data(), handle).and_then(|f| f.release(count)).map(|()| 0))
}

pub(super) fn fuse_reply(c: Ctx<'_>, handle: u32, memory: u32, offset: u64, len: u32) -> i64 {
    let ctx = c.data();
    let memory = ctx.domain.handles().memory(memory).cloned();
    code(with_fuse(ctx, handle).and_then(|f| memory.and_then(|m| f.reply(&m, offset, len))).map(|()| 0))
}

pub(super) fn fuse_attach_interrupt(c: Ctx<'_>, handle: u32) -> i64 {
    let ctx = c.data();
    code(with_fuse(ctx, handle).and_then(|fuse| attach_interrupt(ctx, |source| fuse.attach_interrupt(source.clone()))))
}

/// The connection behind a handle of the caller's domain (which needs the `devices` grant).
fn with_fuse(ctx: &StoreCtx, handle: u32) -> Result<Arc<Fuse>, HostError> {
    if !ctx.domain.grants.contains(&Grant::Devices) {
        return Err(HostError::NotPermitted);
    }
    match ctx.domain.handles().get(handle)? {
        KernelObject::Fuse(fuse) => Ok(fuse.clone()),
        _ => Err(HostError::InvalidHandle),
    }
}
