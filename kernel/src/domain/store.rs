//! Stores: the wasmtime state of a thread, a service thread or a scheduler of a component
//! instance, and how the kernel makes them — each with its own stack and message buffer in the
//! instance's heap, its preemption deadline and the host calls of its kind.

use std::sync::Arc;

use domos_abi::HostError;
use wasmtime::{Store, UpdateDeadline, Val};

use super::Domain;
use super::instance::{ComponentInstance, Region, ServiceThread};
use super::system::{Backend, Kernel, LinkerKind};
use crate::object::quota::Charge;

/// Most portal calls nested in one another on one thread (a thread calls a service, which calls
/// another, …). Each level runs on the calling thread's fiber with a wasm stack of its own, and
/// wasmtime gives each store it enters `MAX_WASM_STACK` below the current stack pointer, so the
/// fiber is sized for this many levels (`engine::FIBER_STACK`); a deeper call fails with
/// `QuotaExceeded` instead of running off the fiber's end.
pub const MAX_NESTING: u32 = 8;

/// How much CPU time a service call that cannot give up its kernel CPU may use after its first
/// slice before the kernel terminates the service's domain. Such a call is one entered
/// synchronously (the fast path): the first call of an instance to run past a slice, a call
/// nested in one of an ordinary service, or the kernel's own call of a fault handler. CPU time,
/// not the wall clock: a call the host stopped for a while has done nothing wrong.
pub const UNPREEMPTIBLE_CPU: std::time::Duration = std::time::Duration::from_millis(200);

/// What the portal call a service store runs is, for its epoch callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServiceCall {
    /// None: the store runs `init` or `main` of an interpreted component, or nothing.
    None,
    /// Entered synchronously: it cannot give up its kernel CPU. Once it ran past its first
    /// slice (of the wall clock), the CPU time of its OS thread then, and when it was last
    /// charged.
    Unpreemptible(Option<(u64, u64)>),
    /// Entered with `call_async` on the calling thread's fiber: it yields like a thread.
    Preemptible,
}

/// The state of one store: a thread or a service thread of a component instance.
pub struct StoreCtx {
    pub(crate) kernel: Arc<Kernel>,
    pub(crate) domain: Arc<Domain>,
    pub(crate) instance: Arc<ComponentInstance>,
    /// Which of the instance's components the store runs code of (`ComponentInstance::parts`):
    /// the one whose entry point a thread started in, or whose service a call entered.
    pub(crate) part: u32,
    pub(crate) region: Region,
    pub(crate) service: bool,
    /// The thread the store runs (0 for a service or scheduler store).
    pub(crate) thread: u32,
    /// How many portal calls deep the store's current call is: 0 in a thread, one more in each
    /// service thread a call enters. Every level takes its own wasm stack on the calling
    /// thread's fiber, which is sized for `MAX_NESTING` of them.
    pub(crate) depth: u32,
    /// Its domain's scheduler deferred its last portal call: `portal_call_waiting` yields once
    /// before making it.
    pub(crate) deferred: std::sync::atomic::AtomicBool,
    /// Portal calls made from this store, not yet added to the domain's statistics.
    pub(crate) calls_made: u64,
    /// Portal calls this store ran as a service thread, likewise.
    pub(crate) calls_served: u64,
    /// The portal call the service store runs, if any.
    pub(crate) call: ServiceCall,
    /// A service store of a component that waits, entered synchronously for restartable calls
    /// (`portal::call_restartable`): what would have to wait is refused instead.
    pub(crate) restartable: bool,
    /// The restartable call this store runs was refused a wait: it is abandoned when it returns.
    pub(crate) wait_refused: std::sync::atomic::AtomicBool,
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
            part: 0,
            region,
            service,
            thread: 0,
            depth: 0,
            deferred: std::sync::atomic::AtomicBool::new(false),
            calls_made: 0,
            calls_served: 0,
            call: ServiceCall::None,
            restartable: false,
            wait_refused: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Notes that this store was answered "that would wait" (`MustWait`, or a refused block):
    /// the restartable call it runs, if it runs one, cannot finish and is abandoned.
    pub(crate) fn refuse_wait(&self) {
        if self.restartable {
            self.wait_refused.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl StoreCtx {
    /// The component the store runs code of.
    pub(crate) fn part(&self) -> &super::instance::Part {
        self.instance.part(self.part)
    }
}

impl Drop for StoreCtx {
    fn drop(&mut self) {
        self.domain.stats.calls_made.fetch_add(self.calls_made, std::sync::atomic::Ordering::Relaxed);
        self.domain.stats.calls_served.fetch_add(self.calls_served, std::sync::atomic::Ordering::Relaxed);
        self.instance.return_region(self.region);
    }
}

/// Nanoseconds of CPU time the calling OS thread (a kernel CPU) has used.
fn thread_cpu_ns() -> u64 {
    let time = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    (time.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(time.tv_nsec as u64)
}

/// The first line of a trap or error and its wasm backtrace, for reports.
pub(crate) fn describe_trap(error: &wasmtime::Error) -> String {
    let mut text = error.root_cause().to_string();
    if let Some(trap) = error.downcast_ref::<wasmtime::Trap>() {
        text = trap.to_string();
    }
    if let Some(bt) = error.downcast_ref::<wasmtime::WasmBacktrace>() {
        let mut frames: Vec<String> =
            bt.frames().iter().take(5).filter_map(|f| f.func_name().map(|n| n.to_string())).collect();
        if frames.first().is_some_and(|f| f == domos_loader::instrument::OVERFLOW_FUNCTION) {
            text = "shadow stack overflow: the thread needed more than the domain's `stack` bytes".into();
            frames.remove(0);
        }
        if !frames.is_empty() {
            text.push_str(&format!(" (in {})", frames.join(" <- ")));
        }
    }
    text
}

impl Kernel {
    /// Arms preemption and termination checks for a store. A thread yields at the end of its
    /// slice. A service call is charged to the service's domain slice by slice as it runs; one
    /// entered with `call_async` yields the calling thread like a thread's slice end; one entered
    /// synchronously cannot, so once it has used a slice of CPU beyond its first it marks its
    /// instance preemptible (later calls go the async way), and after `UNPREEMPTIBLE_CPU` it
    /// ends the service's domain.
    pub(crate) fn set_deadline(&self, store: &mut Store<StoreCtx>) {
        let slice = self.slice_ticks();
        let slice_ns = slice.saturating_mul(super::system::TICK.as_nanos() as u64);
        let local = store.data().domain.scheduling.slice_ticks();
        store.set_epoch_deadline(if local != 0 && !store.data().service { local } else { slice });
        store.epoch_deadline_callback(move |mut ctx| {
            let data = ctx.data_mut();
            if data.domain.is_terminated() {
                wasmtime::bail!("domain terminated");
            }
            if !data.kernel.is_running() {
                wasmtime::bail!("the system is shutting down");
            }
            if !data.service {
                return Ok(UpdateDeadline::Yield(crate::sched::note_deadline(&data.domain.scheduling, slice)));
            }
            match data.call {
                ServiceCall::None => Ok(UpdateDeadline::Continue(slice)),
                ServiceCall::Preemptible => {
                    crate::sched::charge_service(&data.domain.scheduling, slice_ns);
                    Ok(UpdateDeadline::Yield(crate::sched::note_service_deadline(slice)))
                }
                ServiceCall::Unpreemptible(measured) => {
                    // A slice of wall clock has passed; what the call uses is measured from here
                    // on, in CPU time, and charged as it is used, so that a short call the host
                    // stopped is neither blamed nor charged to the service (CPU inheritance
                    // keeps it its caller's).
                    let now = thread_cpu_ns();
                    let Some((first, charged)) = measured else {
                        data.call = ServiceCall::Unpreemptible(Some((now, now)));
                        return Ok(UpdateDeadline::Continue(slice));
                    };
                    crate::sched::charge_service(&data.domain.scheduling, now.saturating_sub(charged));
                    data.call = ServiceCall::Unpreemptible(Some((first, now)));
                    let used = now.saturating_sub(first);
                    if used >= slice_ns {
                        data.instance.preemptible.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    if used >= UNPREEMPTIBLE_CPU.as_nanos() as u64 {
                        let reason = format!(
                            "a service call of {} used {} ms of CPU without giving up its kernel CPU",
                            data.instance.name(),
                            used / 1_000_000
                        );
                        data.kernel.terminate(&data.domain.clone(), reason);
                        wasmtime::bail!("domain terminated");
                    }
                    Ok(UpdateDeadline::Continue(slice))
                }
            }
        });
    }

    /// Starts a portal call in a service store: its epoch deadline a slice from now (an idle
    /// store's lies in the past), and how its callback may stop it.
    pub(crate) fn begin_call(&self, store: &mut Store<StoreCtx>, call: ServiceCall) {
        store.set_epoch_deadline(self.slice_ticks());
        store.data_mut().call = call;
    }

    /// A store for a thread or service thread of `instance`, with its own stack and buffer,
    /// charged to `domain` through `charge`.
    pub(crate) fn new_store(
        self: &Arc<Self>,
        domain: &Arc<Domain>,
        instance: &Arc<ComponentInstance>,
        service: bool,
        charge: Charge<'_>,
    ) -> Result<Store<StoreCtx>, HostError> {
        let region: Region = instance.take_region(domain, charge)?;
        let ctx = StoreCtx::new(self.clone(), domain.clone(), instance.clone(), region, service);
        // The engine the instance's module was translated for (a scheduler's is metered).
        let mut store = Store::new(instance.module.engine(), ctx);
        self.set_deadline(&mut store);
        Ok(store)
    }

    /// `instance`'s module pre-linked with `linker`'s host calls and the instance's heap, made on
    /// first use: instantiating a thread then resolves no import by name.
    pub(crate) fn instance_pre(
        backend: &Backend,
        instance: &ComponentInstance,
        linker: LinkerKind,
        store: &Store<StoreCtx>,
    ) -> wasmtime::Result<wasmtime::InstancePre<StoreCtx>> {
        let slot = &instance.pre_linked[linker as usize];
        if let Some(pre) = slot.get() {
            return Ok(pre.clone());
        }
        let pre = backend.pre_link(linker, store, &instance.module, instance.heap_extern()?)?;
        Ok(slot.get_or_init(|| pre).clone())
    }

    /// Sets the shadow stack of a fresh instance to its thread's region: the pointer to its top,
    /// the limit that the stack guard (`domos_loader::instrument`) checks to its bottom.
    pub(crate) fn set_stack(store: &mut Store<StoreCtx>, instance: &wasmtime::Instance) -> wasmtime::Result<()> {
        let region = store.data().region;
        let global = instance
            .get_global(&mut *store, "__stack_pointer")
            .ok_or_else(|| wasmtime::format_err!("no __stack_pointer export"))?;
        global.set(&mut *store, Val::I32(region.stack_top as i32))?;
        let limit = instance
            .get_global(&mut *store, domos_loader::instrument::LIMIT_GLOBAL)
            .ok_or_else(|| wasmtime::format_err!("the stack guard is missing"))?;
        limit.set(&mut *store, Val::I32(region.base as i32))
    }

    /// A new service thread for `instance` (the caller has counted it against the limit), its
    /// stack charged through `charge`.
    ///
    /// # Errors
    /// When the quota cannot hold its stack, or instantiation fails.
    /// A `restartable` one, of an instance whose services may wait, is synchronous all the same
    /// (`portal::call_restartable`).
    pub(crate) fn new_service_thread(
        self: &Arc<Self>,
        instance: &Arc<ComponentInstance>,
        domain: &Arc<Domain>,
        restartable: bool,
        charge: Charge<'_>,
    ) -> Result<Box<ServiceThread>, HostError> {
        if instance.is_single() {
            return Err(HostError::ServiceBusy);
        }
        let mut store = self.new_store(domain, instance, true, charge)?;
        store.data_mut().restartable = restartable;
        let backend = self.backend(domain.code).map_err(|_| HostError::ServiceDead)?;
        // A service that may wait runs in an async store whose host calls can suspend the
        // caller's fiber (decision 0005); the others stay synchronous, the fast path.
        let built = (|| {
            let wasm = if instance.services_wait && !restartable {
                // Its linker's waiting calls are async, which an `InstancePre` would only
                // instantiate asynchronously; this runs inside a synchronous portal call.
                let imports =
                    backend.imports(LinkerKind::Thread, &mut store, &instance.module, instance.heap_extern()?)?;
                wasmtime::Instance::new(&mut store, &instance.module, &imports)?
            } else {
                Self::instance_pre(backend, instance, LinkerKind::Service, &store)?.instantiate(&mut store)?
            };
            Self::set_stack(&mut store, &wasm)?;
            let entries = instance.shared_entries();
            let dispatch = wasm.get_typed_func(&mut store, &entries.dispatch)?;
            let release = wasm.get_typed_func(&mut store, &entries.release)?;
            Ok::<_, wasmtime::Error>((wasm, dispatch, release))
        })();
        match built {
            Ok((wasm, dispatch, release)) => Ok(Box::new(ServiceThread { store, instance: wasm, dispatch, release })),
            Err(e) => {
                self.terminate(
                    domain,
                    format!("cannot start a service thread of {}: {}", instance.name(), describe_trap(&e)),
                );
                Err(HostError::ServiceFault)
            }
        }
    }
}
