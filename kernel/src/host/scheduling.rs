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

#[cfg(test)]
mod tests {
    use crate::test_system::{System, component, main};

    #[test]
    fn a_domain_replaces_its_own_scheduler_by_a_built_in_one_and_bad_requests_are_refused() {
        let body = format!(
            r#"(data (i32.const 1024) "priority") (data (i32.const 1040) "lottery") {}"#,
            main(
                "(i64.store (i32.const 0) (call $scheduler_replace (i32.const 0) (i32.const 0) (i32.const 1024) (i32.const 8)))
                 (i64.store (i32.const 8) (call $scheduler_replace (i32.const 0) (i32.const 0) (i32.const 1040) (i32.const 7)))
                 (i64.store (i32.const 16) (call $scheduler_replace (i32.const 7) (i32.const 0) (i32.const 1024) (i32.const 8)))
                 (i64.store (i32.const 24)
                   (call $scheduler_replace (i32.const 0) (i32.const 0) (i32.const 0xfffffff0) (i32.const 8)))",
            )
        );
        let system = System::boot(
            &[component("c", "", &body)],
            "[[domain]]\nname = \"D\"\ngrants = [\"scheduling\"]\n[[domain.component]]\nname = \"c\"\n",
        );
        let invalid = domos_abi::HostError::InvalidArgument as i64;
        assert_eq!(system.results("D", 4), [0, invalid, invalid, invalid]);
        assert_eq!(system.domain("D").scheduling.describe(), "priority", "the refused requests changed nothing");
        let refusals: Vec<_> = system.lines().into_iter().filter(|l| l.contains("scheduler_replace refused")).collect();
        assert_eq!(
            refusals,
            [
                "[kernel] domain D: scheduler_replace refused: unknown scheduler component lottery (known: )",
                "[kernel] domain D: scheduler_replace refused: no scheduler 7: 0 is the domain's own, 1 the global one",
            ],
            "a name outside the heap is refused before anything is said"
        );
    }
}
