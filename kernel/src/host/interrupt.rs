//! Interrupt sources: periodic timers and the handler threads of bounded `domos_interrupt`, or
//! atomic variables that a device's events notify.

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

/// The interrupts a domain may attach: the handler threads (and notified variables) it may have.
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
    if ctx.instance.is_single() || !ctx.part().component.bounded.iter().any(|(e, _)| e == "domos_interrupt") {
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
    if let Err(e) =
        ctx.kernel.spawn_thread(&ctx.domain, &ctx.instance, ctx.part, crate::runtime::Entry::Interrupt(number))
    {
        source.close();
        return Err(e);
    }
    connect(&source);
    Ok(number)
}

/// A new interrupt source of the caller's domain that notifies the atomic variable behind
/// handle `atomic` (set to `value`, one waiter woken) and has no handler thread, connected to its
/// cause by `connect`; returns the source number. Like every source of the domain it counts
/// against the domain's interrupts, `interrupt_detach` closes it, and so does the domain's end;
/// the number of one detached is given to the next (a driver binds a new variable per client).
pub(super) fn attach_notification(
    ctx: &StoreCtx,
    atomic: u32,
    value: u32,
    connect: impl FnOnce(&Arc<crate::object::interrupt::EventSource>),
) -> Result<u32, HostError> {
    let variable = ctx.domain.handles().atomic(atomic)?.clone();
    let source = Arc::new(crate::object::interrupt::EventSource::notifying(variable, value));
    let number = {
        let mut interrupts = ctx.domain.interrupts();
        let index = match interrupts.iter().position(|s| s.spent_notification()) {
            Some(spent) => {
                interrupts[spent] = source.clone();
                spent
            }
            None if interrupts.len() >= MAX_INTERRUPTS => return Err(HostError::QuotaExceeded),
            None => {
                interrupts.push(source.clone());
                interrupts.len() - 1
            }
        };
        index as u32 + 1
    };
    connect(&source);
    Ok(number)
}

#[cfg(test)]
mod tests {
    use domos_abi::HostError::*;

    use crate::test_system::{System, component, main};

    #[test]
    fn timers_need_a_period_of_a_tick_and_a_bounded_handler() {
        let body = main(
            "(i64.store (i32.const 0) (call $timer_attach (i64.const 999999)))
             (i64.store (i32.const 8) (call $timer_attach (i64.const 1000000)))
             (i64.store (i32.const 16) (call $interrupt_detach (i32.const 0)))
             (i64.store (i32.const 24) (call $interrupt_detach (i32.const 1)))",
        );
        let system = System::boot(
            &[component("c", "", &body)],
            "[[domain]]\nname = \"D\"\n[[domain.component]]\nname = \"c\"\n",
        );
        let code = |e: domos_abi::HostError| e as i64;
        // Shorter than the kernel's tick; no `domos_interrupt` proved bounded; no source 0 or 1.
        assert_eq!(
            system.results("D", 4),
            [code(InvalidArgument), code(NotPermitted), code(InvalidArgument), code(InvalidArgument)]
        );
        assert_eq!(system.domain("D").live_threads(), 0, "no handler thread was started");
    }

    #[test]
    fn a_bounded_handler_gets_a_thread_of_its_own_and_detaching_ends_it() {
        let body = format!(
            "(func (export \"domos_interrupt\") (param i32 i32)
               (i32.store (i32.const 100) (i32.add (i32.load (i32.const 100)) (i32.const 1))))
             {}",
            main(
                "(local $source i32)
                 (local.set $source (i32.wrap_i64 (call $timer_attach (i64.const 1000000))))
                 (i64.store (i32.const 0) (i64.extend_i32_u (local.get $source)))
                 (block $fired (loop $wait
                   (br_if $fired (i32.ge_u (i32.load (i32.const 100)) (i32.const 2)))
                   (drop (call $thread_sleep (i64.const 1000000)))
                   (br $wait)))
                 (i64.store (i32.const 8) (call $interrupt_detach (local.get $source)))",
            )
        );
        let system = System::boot(
            &[component("c", "bounded = [\"domos_interrupt\"]", &body)],
            "[[domain]]\nname = \"D\"\n[[domain.component]]\nname = \"c\"\n",
        );
        assert_eq!(system.results("D", 2), [1, 0], "source 1, detached");
        assert!(u32::from_le_bytes(system.heap("D", 100, 4).try_into().unwrap()) >= 2, "the handler ran");
        assert_eq!(system.domain("D").termination_reason(), None);
        // The handler is a daemon thread, which the boot does not wait for: give it time to end.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while system.domain("D").live_threads() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(system.domain("D").live_threads(), 0, "the handler thread ended with its source");
    }
}
