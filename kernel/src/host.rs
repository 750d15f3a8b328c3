//! The kernel's host calls (JX's fast portals of DomainZero): each runs in the caller's
//! context, on the caller's CPU.
//!
//! Two linkers exist per translator: one for thread stores, where the calls that wait (yield,
//! join, waiting for a busy service) suspend the thread, and one for service-thread stores,
//! where nothing may block and those calls return at once.

use std::sync::Arc;
use std::task::Poll;

use domos_abi::HostError;
use wasmtime::{Caller, Engine, Linker};

use crate::domain::{ComponentInstance, Domain, Region};
use crate::guest_memory::{self, GuestView};
use crate::handle::KernelObject;
use crate::kernel::Kernel;
use crate::memory::{Block, MemoryObject};
use crate::names::MAX_NAME;
use crate::portal::{self, Service};
use domos_abi::Grant;

/// The state of one store: a thread or a service thread of a component instance.
pub struct StoreCtx {
    pub(crate) kernel: Arc<Kernel>,
    pub(crate) domain: Arc<Domain>,
    pub(crate) instance: Arc<ComponentInstance>,
    pub(crate) region: Region,
    pub(crate) service: bool,
    /// The thread the store runs (0 for a service or scheduler store).
    pub(crate) thread: u32,
    /// Its domain's scheduler deferred its last portal call: `portal_call_waiting` yields once
    /// before making it.
    pub(crate) deferred: std::sync::atomic::AtomicBool,
    /// Portal calls made from this store, not yet added to the domain's statistics.
    pub(crate) calls_made: u64,
    /// Portal calls this store ran as a service thread, likewise.
    pub(crate) calls_served: u64,
}

impl StoreCtx {
    pub(crate) fn new(
        kernel: Arc<Kernel>,
        domain: Arc<Domain>,
        instance: Arc<ComponentInstance>,
        region: Region,
        service: bool,
    ) -> Self {
        StoreCtx {
            kernel,
            domain,
            instance,
            region,
            service,
            thread: 0,
            deferred: std::sync::atomic::AtomicBool::new(false),
            calls_made: 0,
            calls_served: 0,
        }
    }
}

impl Drop for StoreCtx {
    fn drop(&mut self) {
        self.domain.stats.calls_made.fetch_add(self.calls_made, std::sync::atomic::Ordering::Relaxed);
        self.domain.stats.calls_served.fetch_add(self.calls_served, std::sync::atomic::Ordering::Relaxed);
        self.instance.return_region(self.region);
    }
}

fn code(result: Result<impl Into<i64>, HostError>) -> i64 {
    match result {
        Ok(value) => value.into(),
        Err(e) => e as i64,
    }
}

type Ctx<'a> = Caller<'a, StoreCtx>;

/// The name a component uses, translated by the configuration's wiring table.
fn wired(table: &std::collections::BTreeMap<String, String>, name: String) -> String {
    table.get(&name).cloned().unwrap_or(name)
}

fn add_common(linker: &mut Linker<StoreCtx>) -> wasmtime::Result<()> {
    let m = domos_abi::HOST_MODULE;
    linker.func_wrap(m, "console_write", |c: Ctx<'_>, ptr: u32, len: u32| {
        let ctx = c.data();
        if let Ok(text) = guest_memory::read_str(&ctx.instance.memory, ptr, len.min(4096), 4096) {
            ctx.kernel.console.line(&ctx.domain.name, &text);
        }
    })?;
    linker.func_wrap(m, "clock_ns", |c: Ctx<'_>| c.data().kernel.clock_ns() as i64)?;
    linker.func_wrap(m, "heap_grow", |c: Ctx<'_>, pages: u32| {
        let ctx = c.data();
        code(ctx.instance.grow(&ctx.domain, u64::from(pages), &|bytes| ctx.kernel.charge(&ctx.domain, bytes)))
    })?;
    linker.func_wrap(m, "message_buffer", |c: Ctx<'_>| {
        let region = c.data().region;
        (i64::from(region.buffer_len) << 32) | i64::from(region.buffer)
    })?;
    linker.func_wrap(m, "portal_call", |mut c: Ctx<'_>, handle: u32, method: u32, len: u32| {
        let ctx = c.data();
        let result = code(portal::call(&ctx.kernel, ctx, handle, method, len));
        // A MustWait answer is not a call: the SDK makes it again with portal_call_waiting.
        if result != HostError::MustWait as i64 {
            c.data_mut().calls_made += 1;
        }
        result
    })?;
    linker.func_wrap(m, "handle_drop", |c: Ctx<'_>, handle: u32| {
        let removed = crate::lock(&c.data().domain.handles).remove(handle);
        code(removed.map(|object| {
            drop(object);
            0
        }))
    })?;
    linker.func_wrap(m, "handle_dup", |c: Ctx<'_>, handle: u32| code(portal::dup(&c.data().domain, handle)))?;
    linker.func_wrap(m, "portal_local", |c: Ctx<'_>, handle: u32| {
        let ctx = c.data();
        let table = crate::lock(&ctx.domain.handles);
        code(
            table
                .portal(handle)
                .and_then(|s| if s.is_owned_by(&ctx.instance) { Ok(s.object) } else { Err(HostError::NotFound) }),
        )
    })?;
    linker.func_wrap(m, "service_create", |c: Ctx<'_>, object: u32, interface: u32| {
        let ctx = c.data();
        let service = Arc::new(Service::new(&ctx.instance, &ctx.domain, object, interface));
        code(crate::lock(&ctx.domain.handles).insert(KernelObject::Portal(service)))
    })?;
    linker.func_wrap(m, "name_register", |c: Ctx<'_>, ptr: u32, len: u32, handle: u32| {
        let ctx = c.data();
        code(guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME).and_then(|name| {
            let service = crate::lock(&ctx.domain.handles).portal(handle)?.clone();
            ctx.kernel.register(&ctx.domain, wired(&ctx.instance.register, name), service).map(|()| 0)
        }))
    })?;
    linker.func_wrap(m, "name_lookup", |c: Ctx<'_>, ptr: u32, len: u32, interface: u32| {
        let ctx = c.data();
        code(guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME).and_then(|name| {
            let service = ctx.kernel.lookup(&ctx.domain, &wired(&ctx.instance.bind, name))?;
            // Interface 0 asks for any interface: a portal to be passed on, not called.
            if interface != 0 && service.interface != interface {
                return Err(HostError::WrongInterface);
            }
            crate::lock(&ctx.domain.handles).insert(KernelObject::Portal(service))
        }))
    })?;
    linker.func_wrap(m, "thread_spawn", |c: Ctx<'_>, arg: u32| {
        let ctx = c.data();
        if ctx.instance.is_single() {
            return HostError::NotPermitted as i64;
        }
        code(ctx.kernel.spawn_thread(&ctx.domain, &ctx.instance, crate::kernel::Entry::Spawned(arg)).map(|t| t.id))
    })?;
    linker.func_wrap(m, "args", |c: Ctx<'_>, ptr: u32, cap: u32| {
        let ctx = c.data();
        let args = ctx.instance.args.as_bytes();
        let take = args.len().min(cap as usize);
        code(guest_memory::write(&ctx.instance.memory, ptr, &args[..take]).map(|()| args.len() as i64))
    })?;
    add_memory_calls(linker)?;
    linker.func_wrap(m, "domain_create", |c: Ctx<'_>, ptr: u32, len: u32, fault_handler: u32| {
        let ctx = c.data();
        if !ctx.domain.grants.contains(&Grant::Domains) {
            return HostError::NotPermitted as i64;
        }
        let handler = match fault_handler {
            0 => Ok(None),
            handle => crate::lock(&ctx.domain.handles).portal(handle).map(|s| Some(s.clone())),
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
                    crate::lock(&ctx.domain.handles).insert(KernelObject::Domain(domain.clone())).inspect_err(|_| {
                        ctx.kernel.terminate(&domain, "its parent's handle table was full".into());
                    })
                }),
        )
    })?;
    linker.func_wrap(m, "domain_provide", |c: Ctx<'_>, child: u32, ptr: u32, len: u32, portal: u32| {
        let ctx = c.data();
        if !ctx.domain.grants.contains(&Grant::Domains) {
            return HostError::NotPermitted as i64;
        }
        code(guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME).and_then(|name| {
            let (child, service) = {
                let table = crate::lock(&ctx.domain.handles);
                let service = table.portal(portal)?.clone();
                match table.get(child)? {
                    KernelObject::Domain(d) => (d.clone(), service),
                    _ => return Err(HostError::InvalidHandle),
                }
            };
            if !std::ptr::eq(child.parent.as_ptr(), Arc::as_ptr(&ctx.domain)) {
                return Err(HostError::NotPermitted);
            }
            if child.is_terminated() {
                return Err(HostError::ServiceDead);
            }
            crate::lock(&child.private_names).insert(name, service);
            Ok(0)
        }))
    })?;
    linker.func_wrap(m, "domain_start", |c: Ctx<'_>, child: u32| {
        let ctx = c.data();
        if !ctx.domain.grants.contains(&Grant::Domains) {
            return HostError::NotPermitted as i64;
        }
        let child = match crate::lock(&ctx.domain.handles).get(child) {
            Ok(KernelObject::Domain(d)) => Ok(d.clone()),
            _ => Err(HostError::InvalidHandle),
        };
        code(child.and_then(|child| {
            if !std::ptr::eq(child.parent.as_ptr(), Arc::as_ptr(&ctx.domain)) {
                return Err(HostError::NotPermitted);
            }
            ctx.kernel.start_child(&child).map(|()| 0)
        }))
    })?;
    linker.func_wrap(m, "domain_terminate", |c: Ctx<'_>, handle: u32| {
        let ctx = c.data();
        let target = match crate::lock(&ctx.domain.handles).get(handle) {
            Ok(KernelObject::Domain(d)) => Ok(d.clone()),
            _ => Err(HostError::InvalidHandle),
        };
        code(target.map(|d| {
            ctx.kernel.terminate(&d, format!("terminated by domain {}", ctx.domain.name));
            0
        }))
    })?;
    linker.func_wrap(m, "domain_inspect", |c: Ctx<'_>, handle: u32, ptr: u32, cap: u32| {
        let ctx = c.data();
        let target = match crate::lock(&ctx.domain.handles).get(handle) {
            Ok(KernelObject::Domain(d)) => Ok(d.clone()),
            _ => Err(HostError::InvalidHandle),
        };
        code(target.and_then(|d| {
            let text = crate::kernel::DomainReport::of(&d).to_string();
            let take = text.len().min(cap as usize);
            guest_memory::write(&ctx.instance.memory, ptr, &text.as_bytes()[..take]).map(|()| text.len() as i64)
        }))
    })?;
    Ok(())
}

/// Looks up a memory object of the calling domain and applies `op` to it outside the handle
/// table's lock (for operations that may take long: bulk copies).
fn with_memory<R>(
    ctx: &StoreCtx,
    handle: u32,
    op: impl FnOnce(&MemoryObject) -> Result<R, HostError>,
) -> Result<R, HostError> {
    let memory = crate::lock(&ctx.domain.handles).memory(handle)?.clone();
    op(&memory)
}

/// Applies a short `op` (a typed access) to a memory object under the handle table's lock,
/// which saves cloning the object's references.
fn with_memory_locked<R>(
    ctx: &StoreCtx,
    handle: u32,
    op: impl FnOnce(&MemoryObject) -> Result<R, HostError>,
) -> Result<R, HostError> {
    op(crate::lock(&ctx.domain.handles).memory(handle)?)
}

/// Stores a new memory object in the calling domain's handle table.
fn insert_memory(ctx: &StoreCtx, memory: Result<MemoryObject, HostError>) -> i64 {
    code(memory.and_then(|m| crate::lock(&ctx.domain.handles).insert(KernelObject::Memory(m))))
}

/// The memory-object host calls (see `crate::memory`).
fn add_memory_calls(linker: &mut Linker<StoreCtx>) -> wasmtime::Result<()> {
    let m = domos_abi::HOST_MODULE;
    linker.func_wrap(m, "atomic_create", |c: Ctx<'_>, value: u32| {
        let variable = Arc::new(crate::atomic::AtomicVariable::new(value));
        code(crate::lock(&c.data().domain.handles).insert(KernelObject::Atomic(variable)))
    })?;
    linker.func_wrap(m, "atomic_get", |c: Ctx<'_>, handle: u32| {
        code(crate::lock(&c.data().domain.handles).atomic(handle).map(|v| v.get()))
    })?;
    linker.func_wrap(m, "atomic_set", |c: Ctx<'_>, handle: u32, value: u32| {
        code(crate::lock(&c.data().domain.handles).atomic(handle).map(|v| {
            v.set(value);
            0
        }))
    })?;
    linker.func_wrap(m, "atomic_set_and_unblock", |c: Ctx<'_>, handle: u32, value: u32, count: u32| {
        let variable = crate::lock(&c.data().domain.handles).atomic(handle).cloned();
        code(variable.map(|v| v.set_and_unblock(value, count)))
    })?;
    linker.func_wrap(m, "thread_priority", |c: Ctx<'_>, thread: u32, priority: i32| {
        let threads = crate::lock(&c.data().domain.threads);
        code(
            threads
                .iter()
                .find(|t| t.id == thread)
                .map(|t| t.set_priority(priority))
                .map(|()| 0)
                .ok_or(HostError::InvalidArgument),
        )
    })?;
    linker.func_wrap(m, "scheduler_replace", |c: Ctx<'_>, target: u32, slice_ms: u32, ptr: u32, len: u32| {
        let ctx = c.data();
        let name = match guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME) {
            Ok(name) => name,
            Err(e) => return e as i64,
        };
        match replace_scheduler(ctx, target, slice_ms, name) {
            Ok(()) => 0,
            Err(e) => {
                ctx.kernel
                    .console
                    .line("kernel", &format!("domain {}: scheduler_replace refused: {e}", ctx.domain.name));
                HostError::InvalidArgument as i64
            }
        }
    })?;
    linker.func_wrap(m, "timer_attach", |c: Ctx<'_>, period_ns: u64| code(attach_timer(c.data(), period_ns)))?;
    linker.func_wrap(m, "interrupt_detach", |c: Ctx<'_>, source: u32| {
        let ctx = c.data();
        let index = (source as usize).checked_sub(1);
        let found = index.and_then(|i| crate::lock(&ctx.domain.interrupts).get(i).cloned());
        code(found.map(|s| s.close()).map(|()| 0).ok_or(HostError::InvalidArgument))
    })?;
    linker.func_wrap(m, "memory_create", |c: Ctx<'_>, len: u64| {
        let ctx = c.data();
        let charge = |bytes| ctx.kernel.charge(&ctx.domain, bytes);
        let block = Block::new(ctx.kernel.memory_engine(), len, Some((&ctx.domain, &charge)));
        insert_memory(ctx, block.map(|b| MemoryObject::whole(b, len, false)))
    })?;
    linker.func_wrap(m, "memory_info", |c: Ctx<'_>, handle: u32| {
        code(with_memory_locked(c.data(), handle, |mem| {
            Ok(((mem.len() as i64) << 2) | (i64::from(mem.is_device()) << 1) | i64::from(mem.is_writable()))
        }))
    })?;
    linker.func_wrap(m, "memory_read", |c: Ctx<'_>, handle: u32, offset: u64, dst: u32, len: u32| {
        let ctx = c.data();
        code(with_memory(ctx, handle, |mem| {
            mem.read_into(offset, &GuestView::of(&ctx.instance.memory), dst, u64::from(len)).map(|()| 0)
        }))
    })?;
    linker.func_wrap(m, "memory_write", |c: Ctx<'_>, handle: u32, offset: u64, src: u32, len: u32| {
        let ctx = c.data();
        code(with_memory(ctx, handle, |mem| {
            mem.write_from(offset, &GuestView::of(&ctx.instance.memory), src, u64::from(len)).map(|()| 0)
        }))
    })?;
    linker.func_wrap(m, "memory_get_u32", |c: Ctx<'_>, handle: u32, offset: u64| {
        code(with_memory_locked(c.data(), handle, |mem| mem.get_u32(offset).map(i64::from)))
    })?;
    linker.func_wrap(m, "memory_set_u32", |c: Ctx<'_>, handle: u32, offset: u64, value: u32| {
        code(with_memory_locked(c.data(), handle, |mem| mem.set_u32(offset, value).map(|()| 0)))
    })?;
    linker.func_wrap(
        m,
        "memory_copy",
        |c: Ctx<'_>, dst: u32, dst_offset: u64, src: u32, src_offset: u64, len: u64| {
            let ctx = c.data();
            let source = crate::lock(&ctx.domain.handles).memory(src).cloned();
            code(source.and_then(|source| {
                with_memory(ctx, dst, |mem| mem.copy_from(dst_offset, &source, src_offset, len).map(|()| 0))
            }))
        },
    )?;
    linker.func_wrap(m, "memory_subrange", |c: Ctx<'_>, handle: u32, offset: u64, len: u64| {
        let ctx = c.data();
        insert_memory(ctx, with_memory(ctx, handle, |mem| mem.subrange(offset, len)))
    })?;
    linker.func_wrap(m, "memory_read_only", |c: Ctx<'_>, handle: u32| {
        let ctx = c.data();
        insert_memory(ctx, with_memory(ctx, handle, MemoryObject::read_only))
    })?;
    linker.func_wrap(m, "memory_revoke", |c: Ctx<'_>, handle: u32| {
        let ctx = c.data();
        // Revoke only when the fresh handle is sure to fit, or the caller would lose all access.
        let mut table = crate::lock(&ctx.domain.handles);
        let fresh = table
            .memory(handle)
            .and_then(|m| if table.has_room() { m.revoke() } else { Err(HostError::QuotaExceeded) });
        code(fresh.and_then(|m| table.insert(KernelObject::Memory(m))))
    })?;
    linker.func_wrap(m, "disk_open", |c: Ctx<'_>, ptr: u32, len: u32| {
        let ctx = c.data();
        if !ctx.domain.grants.contains(&Grant::Devices) {
            return HostError::NotPermitted as i64;
        }
        let disk = crate::guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME)
            .and_then(|name| ctx.kernel.disk(&name).ok_or(HostError::NotFound));
        code(disk.and_then(|d| crate::lock(&ctx.domain.handles).insert(KernelObject::Disk(d))))
    })?;
    linker.func_wrap(m, "disk_info", |c: Ctx<'_>, handle: u32| {
        code(with_disk(c.data(), handle).map(|d| d.sectors as i64))
    })?;
    linker.func_wrap(
        m,
        "disk_submit",
        |c: Ctx<'_>, handle: u32, operation: u32, sector: u64, count: u32, memory: u32, offset: u64| {
            let ctx = c.data();
            let operation = match operation {
                0 => crate::disk::Operation::Read,
                1 => crate::disk::Operation::Write,
                2 => crate::disk::Operation::Flush,
                _ => return HostError::InvalidArgument as i64,
            };
            let memory = match operation {
                crate::disk::Operation::Flush => None,
                _ => match crate::lock(&ctx.domain.handles).memory(memory) {
                    Ok(memory) => Some(memory.clone()),
                    Err(e) => return e as i64,
                },
            };
            code(
                with_disk(ctx, handle)
                    .and_then(|d| d.submit(operation, sector, count, memory, offset))
                    .map(|id| id as i64),
            )
        },
    )?;
    linker.func_wrap(m, "disk_complete", |c: Ctx<'_>, handle: u32| {
        let done = with_disk(c.data(), handle).and_then(|d| d.complete().ok_or(HostError::NotFound));
        code(done.map(|(id, ok)| ((id << 1) | u64::from(!ok)) as i64))
    })?;
    linker.func_wrap(m, "disk_attach_interrupt", |c: Ctx<'_>, handle: u32| {
        let ctx = c.data();
        code(with_disk(ctx, handle).and_then(|disk| attach_interrupt(ctx, |source| disk.attach(source.clone()))))
    })?;
    linker.func_wrap(m, "memory_device", |c: Ctx<'_>, ptr: u32, len: u32| {
        let ctx = c.data();
        if !ctx.domain.grants.contains(&Grant::Devices) {
            return HostError::NotPermitted as i64;
        }
        let device = crate::guest_memory::read_str(&ctx.instance.memory, ptr, len, MAX_NAME)
            .and_then(|name| ctx.kernel.device(&name).ok_or(HostError::NotFound));
        insert_memory(ctx, device)
    })?;
    Ok(())
}

/// The linker of thread stores: waiting calls suspend the thread.
pub(crate) fn thread_linker(engine: &Engine) -> wasmtime::Result<Linker<StoreCtx>> {
    let mut linker = Linker::new(engine);
    add_common(&mut linker)?;
    let m = domos_abi::HOST_MODULE;
    linker.func_wrap_async(m, "yield_now", |c: Ctx<'_>, (): ()| {
        Box::new(async move {
            crate::sched::YieldOnce::new().await;
            c.data().kernel.check_alive(&c.data().domain)
        })
    })?;
    linker.func_wrap_async(m, "thread_join", |c: Ctx<'_>, (thread,): (u32,)| {
        Box::new(async move {
            let ctx = c.data();
            let target = crate::lock(&ctx.domain.threads).iter().find(|t| t.id == thread).cloned();
            let Some(target) = target else {
                // Ended already (its exit code is gone with it) or not of this domain.
                return Ok(ctx
                    .kernel
                    .exit_code(&ctx.domain, thread)
                    .map_or(HostError::InvalidArgument as i64, |c| i64::from(c as u32)));
            };
            let code = unless_terminated(&ctx.domain, ctx.service, |cx| {
                target.join_or_register(cx.waker()).map_or(Poll::Pending, Poll::Ready)
            })
            .await?;
            Ok(i64::from(code as u32))
        })
    })?;
    linker.func_wrap_async(m, "portal_call_waiting", |mut c: Ctx<'_>, (handle, method, len): (u32, u32, u32)| {
        Box::new(async move {
            let ctx = c.data();
            if ctx.deferred.swap(false, std::sync::atomic::Ordering::Relaxed) {
                // Its domain's scheduler (or the callee's) asked it to let others run first.
                crate::sched::YieldOnce::new().await;
            }
            let result = code(portal::call_waiting(&ctx.kernel, ctx, handle, method, len).await);
            c.data_mut().calls_made += 1;
            Ok(result)
        })
    })?;
    linker.func_wrap_async(m, "thread_sleep", |c: Ctx<'_>, (ns,): (u64,)| {
        Box::new(async move {
            let ctx = c.data();
            let deadline = std::time::Instant::now() + std::time::Duration::from_nanos(ns);
            let mut sleep = std::pin::pin!(ctx.kernel.scheduler.sleep(deadline));
            unless_terminated(&ctx.domain, ctx.service, |cx| sleep.as_mut().poll(cx)).await?;
            Ok(0i64)
        })
    })?;
    linker.func_wrap_async(m, "atomic_block_if_equal", |c: Ctx<'_>, (handle, expected): (u32, u32)| {
        Box::new(async move {
            let ctx = c.data();
            let variable = match crate::lock(&ctx.domain.handles).atomic(handle) {
                Ok(variable) => variable.clone(),
                Err(e) => return Ok(e as i64),
            };
            let mut wait = std::pin::pin!(variable.block_if_equal(expected));
            let blocked = unless_terminated(&ctx.domain, ctx.service, |cx| wait.as_mut().poll(cx)).await?;
            Ok(i64::from(blocked))
        })
    })?;
    linker.func_wrap_async(m, "domain_wait", |c: Ctx<'_>, (handle,): (u32,)| {
        Box::new(async move {
            let ctx = c.data();
            if !ctx.domain.grants.contains(&Grant::Domains) {
                return Ok(HostError::NotPermitted as i64);
            }
            let target = match crate::lock(&ctx.domain.handles).get(handle) {
                Ok(KernelObject::Domain(d)) => d.clone(),
                _ => return Ok(HostError::InvalidHandle as i64),
            };
            let terminated = unless_terminated(&ctx.domain, ctx.service, |cx| target.poll_ended(cx.waker())).await?;
            Ok(i64::from(terminated))
        })
    })?;
    linker.func_wrap_async(m, "portal_wait", |c: Ctx<'_>, (handle,): (u32,)| {
        Box::new(async move {
            let ctx = c.data();
            let service = crate::lock(&ctx.domain.handles).portal(handle).cloned();
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
    })?;
    Ok(linker)
}

/// The disk behind a handle of the caller's domain (which needs the `devices` grant).
fn with_disk(ctx: &StoreCtx, handle: u32) -> Result<Arc<crate::disk::Disk>, HostError> {
    if !ctx.domain.grants.contains(&Grant::Devices) {
        return Err(HostError::NotPermitted);
    }
    match crate::lock(&ctx.domain.handles).get(handle)? {
        KernelObject::Disk(disk) => Ok(disk.clone()),
        _ => Err(HostError::InvalidHandle),
    }
}

/// Shortest timer period: the kernel's tick.
const MIN_TIMER_PERIOD_NS: u64 = 1_000_000;

/// The interrupts a domain may attach: the handler threads it may have.
const MAX_INTERRUPTS: usize = 16;

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
fn attach_interrupt(
    ctx: &StoreCtx,
    connect: impl FnOnce(&Arc<crate::interrupt::EventSource>),
) -> Result<u32, HostError> {
    if ctx.instance.is_single() || !ctx.instance.component.bounded.iter().any(|(e, _)| e == "domos_interrupt") {
        // Only a handler the verifier proved bounded may run on an interrupt.
        return Err(HostError::NotPermitted);
    }
    let source = Arc::new(crate::interrupt::EventSource::default());
    let number = {
        let mut interrupts = crate::lock(&ctx.domain.interrupts);
        if interrupts.len() >= MAX_INTERRUPTS {
            return Err(HostError::QuotaExceeded);
        }
        interrupts.push(source.clone());
        interrupts.len() as u32
    };
    if let Err(e) = ctx.kernel.spawn_thread(&ctx.domain, &ctx.instance, crate::kernel::Entry::Interrupt(number)) {
        source.close();
        return Err(e);
    }
    connect(&source);
    Ok(number)
}

/// Waits until `ready` is, unless the caller's domain is terminated meanwhile: then the host
/// call traps, which ends the thread (every waiting host call of a thread store works so).
///
/// In a service store (`in_service`, a service that waits, decision 0005) the waiting thread is
/// the caller's, of another domain, which terminating this domain does not wake by itself: its
/// waker is registered with the domain while it waits, so that the call fails instead of
/// waiting for good.
pub(crate) async fn unless_terminated<T>(
    domain: &Domain,
    in_service: bool,
    mut ready: impl FnMut(&mut std::task::Context<'_>) -> Poll<T>,
) -> wasmtime::Result<T> {
    let mut caller = crate::domain::CallerWait::new(domain);
    std::future::poll_fn(|cx| {
        if in_service {
            // Before the check: a termination after it finds the waker registered.
            caller.register(cx.waker());
        }
        if domain.is_terminated() { Poll::Ready(None) } else { ready(cx).map(Some) }
    })
    .await
    .ok_or_else(|| wasmtime::format_err!("domain terminated"))
}

/// The linker of service-thread stores: nothing blocks.
pub(crate) fn service_linker(engine: &Engine) -> wasmtime::Result<Linker<StoreCtx>> {
    let mut linker = Linker::new(engine);
    add_common(&mut linker)?;
    let m = domos_abi::HOST_MODULE;
    linker.func_wrap(m, "yield_now", |_: Ctx<'_>| {})?;
    linker.func_wrap(m, "thread_join", |_: Ctx<'_>, _thread: u32| HostError::NotPermitted as i64)?;
    linker.func_wrap(m, "thread_sleep", |_: Ctx<'_>, _ns: u64| HostError::NotPermitted as i64)?;
    // A service that does not wait cannot call one that does: it has no fiber to suspend.
    linker
        .func_wrap(m, "portal_call_waiting", |_: Ctx<'_>, _h: u32, _m: u32, _l: u32| HostError::NotPermitted as i64)?;
    linker.func_wrap(m, "atomic_block_if_equal", |_: Ctx<'_>, _handle: u32, _expected: u32| {
        HostError::NotPermitted as i64
    })?;
    linker.func_wrap(m, "portal_wait", |_: Ctx<'_>, _handle: u32| HostError::ServiceBusy as i64)?;
    linker.func_wrap(m, "domain_wait", |_: Ctx<'_>, _handle: u32| HostError::NotPermitted as i64)?;
    Ok(linker)
}
