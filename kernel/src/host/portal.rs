//! Portal calls, services and the waits for a busy service (`crate::portal`).

use std::sync::Arc;
use std::task::Poll;

use domos_abi::HostError;

use super::{Ctx, code};
use crate::domain::store::StoreCtx;
use crate::domain::unless_terminated;
use crate::domain::{KernelObject, Service};
use crate::portal;

pub(super) fn portal_call(c: Ctx<'_>, handle: u32, method: u32, len: u32) -> i64 {
    counted(c, |ctx| portal::call(&ctx.kernel, ctx, handle, method, len))
}

pub(super) fn portal_call_restartable(c: Ctx<'_>, handle: u32, method: u32, len: u32) -> i64 {
    counted(c, |ctx| portal::call_restartable(&ctx.kernel, ctx, handle, method, len))
}

/// The answer of `call`, counted among the calls the store made (see [`made`]).
fn counted(mut c: Ctx<'_>, call: impl FnOnce(&StoreCtx) -> Result<u32, HostError>) -> i64 {
    let result = code(call(c.data()));
    if made(result) {
        c.data_mut().calls_made += 1;
    }
    result
}

/// Whether a portal call's answer counts as a call made: not `MustWait` nor `ServiceBusy`, which
/// ask the caller to make the call again (the SDK does, the waiting way or once the service has
/// a free thread), so that a call is counted once however often it was asked for.
fn made(result: i64) -> bool {
    result != HostError::MustWait as i64 && result != HostError::ServiceBusy as i64
}

pub(super) fn portal_local(c: Ctx<'_>, handle: u32) -> i64 {
    let ctx = c.data();
    let table = ctx.domain.handles();
    code(
        table
            .portal(handle)
            .and_then(|s| if s.is_owned_by(&ctx.instance) { Ok(s.object) } else { Err(HostError::NotFound) }),
    )
}

pub(super) fn service_create(c: Ctx<'_>, object: u32, interface: u32) -> i64 {
    let ctx = c.data();
    let service = Service::new(&ctx.instance, ctx.part, &ctx.domain, object, interface);
    code(service.and_then(|service| ctx.domain.handles().insert(KernelObject::Portal(Arc::new(service)))))
}

pub(super) fn portal_call_waiting(
    mut c: Ctx<'_>,
    (handle, method, len): (u32, u32, u32),
) -> Box<dyn Future<Output = wasmtime::Result<i64>> + Send + '_> {
    Box::new(async move {
        let ctx = c.data();
        let result = code(portal::call_waiting(&ctx.kernel, ctx, handle, method, len).await);
        if made(result) {
            c.data_mut().calls_made += 1;
        }
        Ok(result)
    })
}

pub(super) fn portal_wait(
    c: Ctx<'_>,
    (handle,): (u32,),
) -> Box<dyn Future<Output = wasmtime::Result<i64>> + Send + '_> {
    Box::new(async move {
        let ctx = c.data();
        let service = ctx.domain.handles().portal(handle).cloned();
        let service = match service {
            Ok(service) => service,
            Err(e) => return Ok(e as i64),
        };
        let ready =
            unless_terminated(&ctx.domain, ctx.service, |cx| match portal::ready_or_wait(&service, cx.waker()) {
                Ok(false) => Poll::Pending,
                ready => Poll::Ready(ready),
            })
            .await?;
        Ok(code(ready.map(|_| 0i64)))
    })
}

/// The same calls in a service thread, which runs inside its caller's portal call and never
/// blocks: they answer at once.
pub(super) mod in_service {
    use domos_abi::HostError;

    use super::Ctx;
    use crate::host::refused;

    /// Runs as `portal_call` does (the SDK makes every call through a portal that was once
    /// answered `MustWait` this way, whichever thread learned it); one that must wait is refused
    /// (`MustWait` still in a thread running a restartable call, which that call's service sees
    /// as its own call abandoned, not as a failure to report).
    pub(in crate::host) fn portal_call_waiting(c: Ctx<'_>, handle: u32, method: u32, len: u32) -> i64 {
        let restartable = c.data().restartable;
        match super::portal_call(c, handle, method, len) {
            code if code == HostError::MustWait as i64 && !restartable => HostError::NotPermitted as i64,
            code => code,
        }
    }

    pub(in crate::host) fn portal_wait(c: Ctx<'_>, _handle: u32) -> i64 {
        refused(&c, HostError::ServiceBusy)
    }
}
