//! Threads of the calling domain: spawning, joining, sleeping, yielding, priorities.

use std::task::Poll;

use domos_abi::HostError;

use super::{Ctx, code};
use crate::domain::unless_terminated;

pub(super) fn thread_spawn(c: Ctx<'_>, arg: u32) -> i64 {
    let ctx = c.data();
    if ctx.instance.is_single() {
        return HostError::NotPermitted as i64;
    }
    code(ctx.kernel.spawn_thread(&ctx.domain, &ctx.instance, crate::runtime::Entry::Spawned(arg)).map(|t| t.id))
}

pub(super) fn thread_priority(c: Ctx<'_>, thread: u32, priority: i32) -> i64 {
    let target = c.data().domain.scheduling.thread(thread);
    code(target.map(|t| t.set_priority(priority)).map(|()| 0).ok_or(HostError::InvalidArgument))
}

pub(super) fn yield_now(c: Ctx<'_>, (): ()) -> Box<dyn Future<Output = wasmtime::Result<()>> + Send + '_> {
    Box::new(async move {
        crate::sched::YieldOnce::new().await;
        c.data().kernel.check_alive(&c.data().domain)
    })
}

pub(super) fn thread_join(
    c: Ctx<'_>,
    (thread,): (u32,),
) -> Box<dyn Future<Output = wasmtime::Result<i64>> + Send + '_> {
    Box::new(async move {
        let ctx = c.data();
        let target = ctx.domain.scheduling.thread(thread);
        let Some(target) = target else {
            // Ended already (its exit code is gone with it) or not of this domain.
            return Ok(ctx
                .domain
                .scheduling
                .exit_code(thread)
                .map_or(HostError::InvalidArgument as i64, |c| i64::from(c as u32)));
        };
        let code = unless_terminated(&ctx.domain, ctx.service, |cx| {
            target.join_or_register(cx.waker()).map_or(Poll::Pending, Poll::Ready)
        })
        .await?;
        Ok(i64::from(code as u32))
    })
}

pub(super) fn thread_sleep(c: Ctx<'_>, (ns,): (u64,)) -> Box<dyn Future<Output = wasmtime::Result<i64>> + Send + '_> {
    Box::new(async move {
        let ctx = c.data();
        let deadline = std::time::Instant::now() + std::time::Duration::from_nanos(ns);
        let mut sleep = std::pin::pin!(ctx.kernel.scheduler.sleep(deadline));
        unless_terminated(&ctx.domain, ctx.service, |cx| sleep.as_mut().poll(cx)).await?;
        Ok(0i64)
    })
}

/// The same calls in a service thread, which runs inside its caller's portal call and never
/// blocks: they answer at once.
pub(super) mod in_service {
    use domos_abi::HostError;

    use super::Ctx;

    pub(in crate::host) fn yield_now(_: Ctx<'_>) {}

    pub(in crate::host) fn thread_join(_: Ctx<'_>, _thread: u32) -> i64 {
        HostError::NotPermitted as i64
    }

    pub(in crate::host) fn thread_sleep(_: Ctx<'_>, _ns: u64) -> i64 {
        HostError::NotPermitted as i64
    }
}
