//! Child domains (grant `domains`): creation, names, start, wait, termination, reports.
//!
//! Authority is decided in two places only. Whether a domain may make these calls at all is its
//! `domains` grant, checked once when a component is placed in a domain (a component cannot
//! import a call its domain was not granted, and wasm cannot call what it did not import).
//! Which domain a call may act on is decided by [`own_child`]: only the domain's parent, as in
//! Alta's nested processes — a domain handle passed on to another domain gives that domain no
//! power over it.

use std::sync::Arc;

use domos_abi::{HostError, memory_fault};

use super::{Ctx, code};
use crate::domain::names::MAX_NAME;
use crate::domain::unless_terminated;
use crate::domain::{Domain, KernelObject};
use crate::object::guest_memory::{self};

/// The domain behind `handle`, if it is a child of the caller's domain.
///
/// # Errors
/// `InvalidHandle` for a handle that names no domain; `NotPermitted` for another's child.
fn own_child(ctx: &crate::domain::store::StoreCtx, handle: u32) -> Result<Arc<Domain>, HostError> {
    let domain = ctx.domain.handles().domain(handle)?.clone();
    if !domain.is_child_of(&ctx.domain) {
        return Err(HostError::NotPermitted);
    }
    Ok(domain)
}

pub(super) fn domain_create(c: Ctx<'_>, ptr: u32, len: u32, fault_handler: u32) -> i64 {
    let ctx = c.data();
    let handler = match fault_handler {
        0 => Ok(None),
        handle => ctx.domain.handles().portal(handle).cloned().and_then(|service| {
            // The kernel calls it synchronously, with the handler interface's message.
            if service.interface != memory_fault::INTERFACE {
                return Err(HostError::WrongInterface);
            }
            match service.owner() {
                Some((instance, _)) if instance.component.manifest.services_wait => Err(HostError::NotPermitted),
                _ => Ok(Some(service)),
            }
        }),
    };
    code(
        handler
            .and_then(|handler| {
                guest_memory::read_str(&ctx.instance.memory, ptr, len, 64 * 1024).map(|spec| (handler, spec))
            })
            .and_then(|(handler, spec)| {
                let domain = ctx.kernel.create_child(&ctx.domain, &spec, handler).map_err(|e| {
                    ctx.kernel.console.line(&ctx.domain.name, &format!("domain_create refused: {e}"));
                    HostError::InvalidArgument
                })?;
                ctx.domain.handles().insert(KernelObject::Domain(domain.clone())).inspect_err(|_| {
                    ctx.kernel.terminate(&domain, "its parent's handle table was full".into());
                })
            }),
    )
}

pub(super) fn domain_provide(c: Ctx<'_>, child: u32, ptr: u32, len: u32, portal: u32) -> i64 {
    let ctx = c.data();
    code(guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME).and_then(|name| {
        let service = ctx.domain.handles().portal(portal)?.clone();
        let child = own_child(ctx, child)?;
        if child.is_terminated() {
            return Err(HostError::ServiceDead);
        }
        child.private_names().insert(name, service);
        Ok(0)
    }))
}

pub(super) fn domain_start(c: Ctx<'_>, child: u32) -> i64 {
    let ctx = c.data();
    code(own_child(ctx, child).and_then(|child| ctx.kernel.start_child(&child).map(|()| 0)))
}

pub(super) fn domain_terminate(c: Ctx<'_>, handle: u32) -> i64 {
    let ctx = c.data();
    code(own_child(ctx, handle).map(|d| {
        ctx.kernel.terminate(&d, format!("terminated by domain {}", ctx.domain.name));
        0
    }))
}

pub(super) fn domain_inspect(c: Ctx<'_>, handle: u32, ptr: u32, cap: u32) -> i64 {
    let ctx = c.data();
    code(own_child(ctx, handle).and_then(|d| {
        let text = crate::runtime::DomainReport::of(&d).to_string();
        let take = text.len().min(cap as usize);
        guest_memory::write(&ctx.instance.memory, ptr, &text.as_bytes()[..take]).map(|()| text.len() as i64)
    }))
}

pub(super) fn domain_wait(
    c: Ctx<'_>,
    (handle,): (u32,),
) -> Box<dyn Future<Output = wasmtime::Result<i64>> + Send + '_> {
    Box::new(async move {
        let ctx = c.data();
        let target = match own_child(ctx, handle) {
            Ok(target) => target,
            Err(e) => return Ok(e as i64),
        };
        let terminated =
            unless_terminated(&ctx.domain, ctx.service, |cx| target.scheduling.poll_ended(cx.waker())).await?;
        Ok(i64::from(terminated))
    })
}

/// The same calls in a service thread, which runs inside its caller's portal call and never
/// blocks: they answer at once.
pub(super) mod in_service {
    use domos_abi::HostError;

    use super::Ctx;

    pub(in crate::host) fn domain_wait(_: Ctx<'_>, _handle: u32) -> i64 {
        HostError::NotPermitted as i64
    }
}
