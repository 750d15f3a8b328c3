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
    code(
        ctx.kernel
            .spawn_thread(&ctx.domain, &ctx.instance, ctx.part, crate::runtime::Entry::Spawned(arg))
            .map(|t| t.id),
    )
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
    use crate::host::refused;

    pub(in crate::host) fn yield_now(_: Ctx<'_>) {}

    pub(in crate::host) fn thread_join(c: Ctx<'_>, _thread: u32) -> i64 {
        refused(&c, HostError::NotPermitted)
    }

    pub(in crate::host) fn thread_sleep(c: Ctx<'_>, _ns: u64) -> i64 {
        refused(&c, HostError::NotPermitted)
    }
}

#[cfg(test)]
mod tests {
    use domos_abi::HostError::*;

    use crate::test_system::{System, component, main};

    /// `main` spawns a thread that blocks on an atomic variable, so that it is surely alive
    /// while `main` tries a second one against the domain's limit of two threads.
    #[test]
    fn spawned_threads_count_against_the_limit_and_join_returns_their_exit_code() {
        let body = format!(
            "(func (export \"domos_thread_entry\") (param $a i32) (result i32)
               (drop (call $atomic_block_if_equal (local.get $a) (i32.const 0)))
               (i32.add (i32.wrap_i64 (call $atomic_get (local.get $a))) (i32.const 40)))
             {}",
            main(
                "(local $a i32) (local $t i32)
                 (local.set $a (i32.wrap_i64 (call $atomic_create (i32.const 0))))
                 (local.set $t (i32.wrap_i64 (call $thread_spawn (local.get $a))))
                 (i64.store (i32.const 0) (call $thread_spawn (local.get $a)))
                 (i64.store (i32.const 8) (call $thread_priority (local.get $t) (i32.const 5)))
                 (i64.store (i32.const 16) (call $thread_priority (i32.const 999999) (i32.const 5)))
                 (drop (call $atomic_set_and_unblock (local.get $a) (i32.const 2) (i32.const 1)))
                 (i64.store (i32.const 24) (call $thread_join (local.get $t)))
                 (i64.store (i32.const 32) (call $thread_join (local.get $t)))
                 (i64.store (i32.const 40) (call $thread_join (i32.const 999999)))
                 (i64.store (i32.const 48) (call $thread_sleep (i64.const 1000000)))
                 (call $yield_now)",
            )
        );
        let system = System::boot(
            &[component("c", "", &body)],
            "[[domain]]\nname = \"D\"\nthreads = 2\n[[domain.component]]\nname = \"c\"\n",
        );
        let code = |e: domos_abi::HostError| e as i64;
        assert_eq!(
            system.results("D", 7),
            [
                code(QuotaExceeded), // main and the blocked thread are the two allowed
                0,
                code(InvalidArgument),
                42, // its exit code
                42, // still known after it ended
                code(InvalidArgument),
                0,
            ]
        );
        assert_eq!(system.domain("D").termination_reason(), None);
        assert_eq!(system.domain("D").scheduling.threads_started.load(std::sync::atomic::Ordering::Relaxed), 3);
    }
}
