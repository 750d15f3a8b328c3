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
                Some((instance, _)) if instance.services_wait => Err(HostError::NotPermitted),
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
    use crate::host::refused;

    pub(in crate::host) fn domain_wait(c: Ctx<'_>, _handle: u32) -> i64 {
        refused(&c, HostError::NotPermitted)
    }
}

#[cfg(test)]
mod tests {
    use domos_abi::HostError::*;

    use crate::test_system::{System, component, main};

    /// `(data …)` segments for `specs` from address 1024 on, 256 bytes apart, and their lengths.
    fn specs(specs: &[&str]) -> (String, Vec<usize>) {
        let data = specs
            .iter()
            .enumerate()
            .map(|(i, s)| {
                format!("(data (i32.const {}) \"{}\")", 1024 + 256 * i, s.replace('"', "\\\"").replace('\n', "\\n"))
            })
            .collect();
        (data, specs.iter().map(|s| s.len()).collect())
    }

    #[test]
    fn a_child_is_carved_from_its_parent_started_once_waited_for_inspected_and_terminated() {
        let (data, len) = specs(&[
            "name = \"Kid\"\nheap = \"1 MiB\"\n[[component]]\nname = \"kid\"\n",
            "name = \"Greedy\"\nheap = \"1 GiB\"\n[[component]]\nname = \"kid\"\n",
            "name = \"Priv\"\ngrants = [\"devices\"]\n[[component]]\nname = \"kid\"\n",
            "not toml [",
        ]);
        let body = format!(
            "{data} {}",
            main(&format!(
                "(local $kid i32) (local $m i32)
                 (local.set $kid (i32.wrap_i64 (call $domain_create (i32.const 1024) (i32.const {}) (i32.const 0))))
                 (i64.store (i32.const 0) (i64.extend_i32_u (i32.gt_s (local.get $kid) (i32.const 0))))
                 (i64.store (i32.const 8) (call $domain_create (i32.const 1280) (i32.const {}) (i32.const 0)))
                 (i64.store (i32.const 16) (call $domain_create (i32.const 1536) (i32.const {}) (i32.const 0)))
                 (i64.store (i32.const 24) (call $domain_create (i32.const 1792) (i32.const {}) (i32.const 0)))
                 (i64.store (i32.const 32) (call $domain_start (local.get $kid)))
                 (i64.store (i32.const 40) (call $domain_start (local.get $kid)))
                 (i64.store (i32.const 48) (call $domain_wait (local.get $kid)))
                 (i64.store (i32.const 56) (call $domain_inspect (local.get $kid) (i32.const 4096) (i32.const 3)))
                 (i64.store (i32.const 64) (call $domain_terminate (local.get $kid)))
                 (i64.store (i32.const 72) (call $domain_wait (local.get $kid)))
                 (local.set $m (i32.wrap_i64 (call $memory_create (i64.const 1))))
                 (i64.store (i32.const 80) (call $domain_start (local.get $m)))
                 (i64.store (i32.const 88) (call $domain_terminate (local.get $m)))
                 (i64.store (i32.const 96) (call $domain_inspect (local.get $m) (i32.const 0) (i32.const 0)))
                 (i64.store (i32.const 104) (call $domain_wait (local.get $m)))
                 (i64.store (i32.const 112) (call $domain_provide (local.get $m) (i32.const 1024) (i32.const 3) (local.get $m)))",
                len[0], len[1], len[2], len[3]
            ))
        );
        let kid = component("kid", "", &main(""));
        let system = System::boot(
            &[component("c", "", &body), kid],
            "[[domain]]\nname = \"P\"\nheap = \"8 MiB\"\ngrants = [\"domains\"]\n[[domain.component]]\nname = \"c\"\n",
        );
        let results = system.results("P", 15);
        let code = |e: domos_abi::HostError| e as i64;
        assert_eq!(
            results[..7],
            [
                1,
                code(InvalidArgument), // 1 GiB does not fit in the parent's 8 MiB
                code(InvalidArgument), // a grant the parent lacks
                code(InvalidArgument), // not TOML
                0,
                code(InvalidArgument), // started once only
                0,                     // waited until it had no threads: it was not terminated
            ]
        );
        let report = system.kernel.domains().into_iter().find(|d| d.name == "Kid").unwrap();
        assert_eq!(report.termination_reason().as_deref(), Some("terminated by domain P"));
        assert_eq!(system.heap("P", 4096, 4), b"Kid\0", "at most `cap` bytes of the report");
        assert!(results[7] > 3, "the whole report's length: {}", results[7]);
        // Terminated, then waited for: true; a memory object is no domain to any of the calls.
        assert_eq!(
            results[8..],
            [
                0,
                1,
                code(InvalidHandle),
                code(InvalidHandle),
                code(InvalidHandle),
                code(InvalidHandle),
                code(InvalidHandle)
            ]
        );
        let parent = system.domain("P");
        assert_eq!(parent.cpu_tickets(), 100, "the child's tickets came back");
        assert_eq!(parent.heap_used(), 4 * 65536, "the child's megabyte came back; the memory object's page is left");
        let refused: Vec<_> =
            system.lines().into_iter().filter(|l| l.starts_with("[P] domain_create refused: ")).collect();
        assert_eq!(refused.len(), 3, "{refused:?}");
        assert!(refused[0].ends_with("its quota cannot hold a child of 1073741824 B"), "{refused:?}");
        assert!(refused[1].ends_with("a child cannot be granted Devices, which its parent lacks"), "{refused:?}");
    }
}
