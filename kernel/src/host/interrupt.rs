//! Interrupt sources: periodic timers and the handler threads of bounded `domos_interrupt`.

use std::sync::Arc;

use domos_abi::HostError;

use super::{Ctx, code};
use crate::domain::store::StoreCtx;

pub(super) fn timer_attach(c: Ctx<'_>, period_ns: u64) -> i64 {
    code(attach_timer(c.data(), period_ns))
}

pub(super) fn interrupt_detach(c: Ctx<'_>, source: u32) -> i64 {
    let ctx = c.data();
    let index = (source as usize).checked_sub(1);
    let found = index.and_then(|i| ctx.domain.interrupts().get(i).cloned());
    code(found.map(|s| s.close()).map(|()| 0).ok_or(HostError::InvalidArgument))
}

/// Shortest timer period: the kernel's tick.
const MIN_TIMER_PERIOD_NS: u64 = 1_000_000;

/// The interrupts a domain may attach: the handler threads it may have.
const MAX_INTERRUPTS: usize = 16;

/// `timer_attach`: a periodic timer whose events the component's bounded `domos_interrupt`
/// handles in a new thread of its domain; returns the source number.
fn attach_timer(ctx: &StoreCtx, period_ns: u64) -> Result<u32, HostError> {
    if period_ns < MIN_TIMER_PERIOD_NS {
        return Err(HostError::InvalidArgument);
    }
    attach_interrupt(ctx, |source| ctx.kernel.timers.add(source, std::time::Duration::from_nanos(period_ns)))
}

/// A new interrupt source of the caller's domain with its handler thread, connected to its
/// cause by `connect`; returns the source number.
pub(super) fn attach_interrupt(
    ctx: &StoreCtx,
    connect: impl FnOnce(&Arc<crate::object::interrupt::EventSource>),
) -> Result<u32, HostError> {
    if ctx.instance.is_single() || !ctx.instance.component.bounded.iter().any(|(e, _)| e == "domos_interrupt") {
        // Only a handler the verifier proved bounded may run on an interrupt.
        return Err(HostError::NotPermitted);
    }
    let source = Arc::new(crate::object::interrupt::EventSource::default());
    let number = {
        let mut interrupts = ctx.domain.interrupts();
        if interrupts.len() >= MAX_INTERRUPTS {
            return Err(HostError::QuotaExceeded);
        }
        interrupts.push(source.clone());
        interrupts.len() as u32
    };
    if let Err(e) = ctx.kernel.spawn_thread(&ctx.domain, &ctx.instance, crate::runtime::Entry::Interrupt(number)) {
        source.close();
        return Err(e);
    }
    connect(&source);
    Ok(number)
}
