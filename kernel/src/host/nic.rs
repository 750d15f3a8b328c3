//! Emulated network cards (grant `devices`): opening one, attaching its rings and its receive
//! interrupt (or the atomic variable it notifies), sending and collecting frames (`object::nic`).

use std::sync::Arc;

use domos_abi::{Grant, HostError};

use super::interrupt::{attach_interrupt, attach_notification};
use super::{Ctx, code};
use crate::domain::KernelObject;
use crate::domain::names::MAX_NAME;
use crate::domain::store::StoreCtx;
use crate::object::guest_memory;
use crate::object::nic::{Info, Nic};

pub(super) fn nic_open(c: Ctx<'_>, ptr: u32, len: u32) -> i64 {
    let ctx = c.data();
    if !ctx.domain.grants.contains(&Grant::Devices) {
        return HostError::NotPermitted as i64;
    }
    let nic = guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME)
        .and_then(|name| ctx.kernel.nics.get(&name).ok_or(HostError::NotFound));
    code(nic.and_then(|n| ctx.domain.handles().insert(KernelObject::Nic(n))))
}

pub(super) fn nic_info(c: Ctx<'_>, handle: u32, what: u32) -> i64 {
    let info = Info::from_u32(what).ok_or(HostError::InvalidArgument);
    code(with_nic(c.data(), handle).and_then(|n| info.map(|i| n.info(i) as i64)))
}

pub(super) fn nic_attach(c: Ctx<'_>, handle: u32, rx: u32, tx: u32, slot: u32) -> i64 {
    let ctx = c.data();
    let rings = {
        let handles = ctx.domain.handles();
        handles.memory(rx).cloned().and_then(|rx| Ok((rx, handles.memory(tx).cloned()?)))
    };
    code(with_nic(ctx, handle).and_then(|n| rings.and_then(|(rx, tx)| n.attach(rx, tx, slot))))
}

pub(super) fn nic_transmit(c: Ctx<'_>, handle: u32, first: u32, count: u32) -> i64 {
    code(with_nic(c.data(), handle).and_then(|n| n.transmit(first, count)))
}

pub(super) fn nic_ready(c: Ctx<'_>, handle: u32) -> i64 {
    code(with_nic(c.data(), handle).and_then(|n| n.ready()).map(|ready| ready as i64))
}

pub(super) fn nic_release(c: Ctx<'_>, handle: u32, count: u32) -> i64 {
    code(with_nic(c.data(), handle).and_then(|n| n.release(count)).map(|()| 0))
}

pub(super) fn nic_attach_interrupt(c: Ctx<'_>, handle: u32) -> i64 {
    let ctx = c.data();
    code(with_nic(ctx, handle).and_then(|nic| attach_interrupt(ctx, |source| nic.attach_interrupt(source.clone()))))
}

pub(super) fn nic_notify(c: Ctx<'_>, handle: u32, atomic: u32, value: u32) -> i64 {
    let ctx = c.data();
    code(
        with_nic(ctx, handle)
            .and_then(|nic| attach_notification(ctx, atomic, value, |s| nic.attach_interrupt(s.clone()))),
    )
}

/// The card behind a handle of the caller's domain (which needs the `devices` grant).
fn with_nic(ctx: &StoreCtx, handle: u32) -> Result<Arc<Nic>, HostError> {
    if !ctx.domain.grants.contains(&Grant::Devices) {
        return Err(HostError::NotPermitted);
    }
    match ctx.domain.handles().get(handle)? {
        KernelObject::Nic(nic) => Ok(nic.clone()),
        _ => Err(HostError::InvalidHandle),
    }
}
