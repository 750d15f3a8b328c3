//! Replacing schedulers at run time (grant `scheduling`).

use domos_abi::HostError;

use super::Ctx;
use crate::domain::names::MAX_NAME;
use crate::domain::store::StoreCtx;
use crate::object::guest_memory::{self};

pub(super) fn scheduler_replace(c: Ctx<'_>, target: u32, slice_ms: u32, ptr: u32, len: u32) -> i64 {
    let ctx = c.data();
    let name = match guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME) {
        Ok(name) => name,
        Err(e) => return e as i64,
    };
    match replace_scheduler(ctx, target, slice_ms, name) {
        Ok(()) => 0,
        Err(e) => {
            ctx.kernel.console.line("kernel", &format!("domain {}: scheduler_replace refused: {e}", ctx.domain.name));
            HostError::InvalidArgument as i64
        }
    }
}

/// Which scheduler `scheduler_replace` replaces.
const OWN_SCHEDULER: u32 = 0;
const GLOBAL_SCHEDULER: u32 = 1;

/// `scheduler_replace`: the caller's domain's local scheduler (`target` 0) or the global one
/// (1) becomes the built-in policy or the scheduler component called `name`, a local one
/// interrupted every `slice_ms` when not 0.
fn replace_scheduler(ctx: &StoreCtx, target: u32, slice_ms: u32, name: String) -> Result<(), String> {
    use domos_loader::config::{SchedulerChoice, SchedulerComponentConfig};
    fn component<B>(name: String, slice_ms: u32) -> SchedulerChoice<B> {
        let slice_ms = (slice_ms != 0).then_some(u64::from(slice_ms));
        SchedulerChoice::Component(SchedulerComponentConfig { component: name, slice_ms })
    }
    match target {
        OWN_SCHEDULER => {
            let choice = match crate::sched::LocalScheduler::named(&name) {
                Some(policy) if slice_ms == 0 => SchedulerChoice::BuiltIn(policy),
                _ => component(name, slice_ms),
            };
            ctx.kernel.set_local_scheduler(&ctx.domain, &choice)
        }
        GLOBAL_SCHEDULER => {
            let choice = match crate::sched::GlobalScheduler::named(&name) {
                Some(policy) if slice_ms == 0 => SchedulerChoice::BuiltIn(policy),
                _ => component(name, slice_ms),
            };
            ctx.kernel.set_global_scheduler(&choice)
        }
        other => Err(format!("no scheduler {other}: 0 is the domain's own, 1 the global one")),
    }
}
