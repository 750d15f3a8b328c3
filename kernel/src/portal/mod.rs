//! Portals and services: the synchronous RPC between domains.
//!
//! A portal call copies the request once, from the caller thread's message buffer into the
//! message buffer of a service thread of the callee, moves the handles it carries into the
//! callee's handle table, runs the callee's dispatch on the caller's CPU (the caller's time is
//! donated to the service, as in CPU inheritance scheduling), and copies the reply back the same
//! way. A service thread is a store of its own, so the caller thread never enters another
//! domain; when every service thread of the callee is busy the call fails with `ServiceBusy`
//! and a calling thread waits for one through `portal_wait` (the hand-off path).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use domos_abi::{HostError, MAX_MESSAGE_HANDLES, MessageLayout};

use crate::domain::instance::{MAX_RESTARTABLE_THREADS, ServiceThread};
use crate::domain::store::{MAX_NESTING, ServiceCall, StoreCtx, describe_trap};
use crate::domain::system::Kernel;
use crate::domain::{ComponentInstance, Domain, KernelObject, Region, Service};
use crate::object::guest_memory::GuestView;

mod fault;

/// Reads and checks the layout of the `len`-byte message in `region`'s buffer.
fn layout(memory: &GuestView, region: &Region, len: u32) -> Result<MessageLayout, HostError> {
    if len > region.buffer_len {
        return Err(HostError::MessageTooLarge);
    }
    let payload_len = memory.read_u32(region.buffer)?;
    let count_at =
        region.buffer.checked_add(4).and_then(|a| a.checked_add(payload_len)).ok_or(HostError::MalformedMessage)?;
    if count_at.saturating_add(4) > region.buffer + len {
        return Err(HostError::MalformedMessage);
    }
    let count = memory.read_u32(count_at)?;
    MessageLayout::check(payload_len, count, len as usize)
}

/// Copies a message from one thread's buffer to another's, moving its handles from the sender's
/// handle table to the receiver's. The message owns the handles it carries: they leave the
/// sender's table even if the receiver later refuses the message, or its table has no room for
/// all of them (it then gets none).
fn transfer(
    from: (&ComponentInstance, &Domain, &Region),
    to: (&ComponentInstance, &Domain, &Region),
    len: u32,
) -> Result<(), HostError> {
    let (src, src_domain, src_region) = from;
    let (dst, dst_domain, dst_region) = to;
    let (src_memory, dst_memory) = (GuestView::of(&src.memory), GuestView::of(&dst.memory));
    let layout = layout(&src_memory, src_region, len)?;
    if len > dst_region.buffer_len {
        return Err(HostError::MessageTooLarge);
    }
    let handles_at = src_region.buffer + layout.handles_offset() as u32;
    let mut handles = [0u32; MAX_MESSAGE_HANDLES];
    let handles = &mut handles[..layout.handle_count];
    for (i, handle) in handles.iter_mut().enumerate() {
        *handle = src_memory.read_u32(handles_at + 4 * i as u32)?;
    }
    if !handles.is_empty() {
        let objects = {
            let mut table = src_domain.handles();
            // All or nothing: check every handle before taking any. A handle listed twice would
            // pass the check and fail its second removal after the first had been taken.
            for (i, handle) in handles.iter().enumerate() {
                if handles[..i].contains(handle) {
                    return Err(HostError::MalformedMessage);
                }
                table.get(*handle)?;
            }
            handles.iter().map(|h| table.remove(*h)).collect::<Result<Vec<_>, _>>()?
        };
        let mut table = dst_domain.handles();
        // All or nothing for the receiver too: a table that cannot take every handle takes
        // none, and the message's objects are dropped with it.
        if !table.has_room_for(objects.len()) {
            return Err(HostError::QuotaExceeded);
        }
        for (slot, object) in handles.iter_mut().zip(objects) {
            *slot = table.insert(object)?;
        }
    }
    src_memory.copy_to(src_region.buffer, &dst_memory, dst_region.buffer, layout.handles_offset())?;
    let dst_handles_at = dst_region.buffer + layout.handles_offset() as u32;
    for (i, handle) in handles.iter().enumerate() {
        dst_memory.write_u32(dst_handles_at + 4 * i as u32, *handle)?;
    }
    Ok(())
}

/// The `portal_call` host call: see the module documentation.
///
/// # Errors
/// Every failure is reported to the caller; a trap in the service terminates the service's
/// domain and reports `ServiceFault`.
pub(crate) fn call(
    kernel: &Arc<Kernel>,
    caller: &StoreCtx,
    handle: u32,
    method: u32,
    len: u32,
) -> Result<u32, HostError> {
    let (target, service) = service_of(caller, handle)?;
    synchronous_or_must_wait(kernel, caller, &target)?;
    call_synchronously(kernel, caller, &target, &service, method, len)
}

/// `MustWait` for a call that [`call`] cannot make synchronously: to a service that may wait or
/// is preempted, or one the schedulers defer.
fn synchronous_or_must_wait(kernel: &Kernel, caller: &StoreCtx, target: &ComponentInstance) -> Result<(), HostError> {
    // The schedulers hear of a call that must wait in `call_waiting`.
    if target.services_wait || (target.preemptible.load(Ordering::Relaxed) && can_suspend(caller)) {
        caller.refuse_wait();
        return Err(HostError::MustWait);
    }
    ask_schedulers(kernel, caller, target)
}

/// The `portal_call_restartable` host call: [`call`], except that a service that may wait is
/// run at once too, in a synchronous service thread of its own kind, on the caller's word that
/// the method may be started again (`#[restartable]` in its interface: a method whose partial
/// run leaves nothing behind but what a whole run would). Whatever would wait inside it is
/// refused (`StoreCtx::refuse_wait`); a call refused a wait is abandoned when it returns, its
/// reply and the handles in it dropped, and the caller is answered `MustWait` and makes the
/// call again with `portal_call_waiting`. So a read served from memory costs a synchronous
/// call, and one that needs the disk a synchronous attempt more.
///
/// What only the waiting way does is answered `MustWait` at once: a call to a service that
/// ran past a slice (it is preempted, decision 0011), with objects to release first (a release
/// must not be abandoned), or with handles in its request (the retry could not send them
/// again), and a call that finds every restartable thread busy.
pub(crate) fn call_restartable(
    kernel: &Arc<Kernel>,
    caller: &StoreCtx,
    handle: u32,
    method: u32,
    len: u32,
) -> Result<u32, HostError> {
    let (target, service) = service_of(caller, handle)?;
    if !target.services_wait {
        synchronous_or_must_wait(kernel, caller, &target)?;
        return call_synchronously(kernel, caller, &target, &service, method, len);
    }
    let must_wait = target.preemptible.load(Ordering::Relaxed)
        || target.has_released()
        || layout(&GuestView::of(&caller.instance.memory), &caller.region, len)?.handle_count != 0;
    if must_wait {
        caller.refuse_wait();
        return Err(HostError::MustWait);
    }
    ask_schedulers(kernel, caller, &target)?;
    let Some(mut thread) = acquire_restartable(kernel, &service, &target) else {
        caller.refuse_wait();
        return Err(HostError::MustWait);
    };
    let traced = trace_start(kernel);
    let result = run(kernel, caller, &service, &target, &mut thread, method, len);
    if result == Err(HostError::MustWait) {
        caller.refuse_wait();
    }
    finish(kernel, &target, thread, method, traced, result)
}

/// Whether `caller` can make an async portal call (`portal_call_waiting`): a thread, or a
/// service thread of a component that waits, which runs on its caller's fiber (unless it runs
/// restartable calls, synchronously).
fn can_suspend(caller: &StoreCtx) -> bool {
    caller.thread != 0 || (caller.instance.services_wait && !caller.restartable)
}

/// `MustWait` when a scheduler wants the calling thread to let others run first
/// ([`deferred`]); the caller remembers that they were asked, for its `portal_call_waiting`.
fn ask_schedulers(kernel: &Kernel, caller: &StoreCtx, target: &ComponentInstance) -> Result<(), HostError> {
    if caller.thread != 0 && deferred(kernel, caller, target) {
        caller.deferred.store(true, Ordering::Relaxed);
        return Err(HostError::MustWait);
    }
    Ok(())
}

/// Tells the schedulers of the caller's and the callee's domains that opted in of the call
/// (JX's portal-call notifications; otherwise the portal is invisible to them); true when
/// either wants the calling thread to let others run first.
fn deferred(kernel: &Kernel, caller: &StoreCtx, target: &ComponentInstance) -> bool {
    let scheduler = &kernel.scheduler;
    let outgoing = caller.domain.scheduling.hears_outgoing()
        && scheduler.defers_outgoing(&caller.domain.scheduling, caller.thread);
    let incoming =
        target.scheduling.hears_incoming() && scheduler.defers_incoming(&target.scheduling, caller.domain.id);
    outgoing || incoming
}

/// A portal call to a service that may wait, or that once ran past a time slice: the same as
/// [`call`], except that the service runs in an async store on the caller's fiber, so a wait
/// inside it, or the end of a slice, suspends the calling thread (which then costs no CPU, or
/// lets others run) instead of being refused, or holding the kernel CPU.
pub(crate) async fn call_waiting(
    kernel: &Arc<Kernel>,
    caller: &StoreCtx,
    handle: u32,
    method: u32,
    len: u32,
) -> Result<u32, HostError> {
    let (target, service) = service_of(caller, handle)?;
    // The schedulers hear of every call once: `call` asked them when it answered `MustWait` for
    // them (the caller's `deferred` flag); else they are asked here — `call` answers a call to a
    // service that waits before asking, and the SDK makes its later calls through that portal
    // with `portal_call_waiting` alone.
    let asked = caller.deferred.swap(false, Ordering::Relaxed);
    if asked || (caller.thread != 0 && deferred(kernel, caller, &target)) {
        crate::sched::YieldOnce::new().await;
    }
    if !target.services_wait && !target.preemptible.load(Ordering::Relaxed) {
        return call_synchronously(kernel, caller, &target, &service, method, len);
    }
    let mut thread = acquire(kernel, &service, &target)?;
    let traced = trace_start(kernel);
    let result = async {
        // Releases first: a release may itself call a portal, through this same buffer.
        kernel.begin_call(&mut thread.store, ServiceCall::Preemptible);
        thread.store.data_mut().depth = caller.depth + 1;
        for object in target.take_released() {
            let outcome = thread.release.call_async(&mut thread.store, object).await;
            outcome.map_err(|trap| fault(kernel, &target, &thread.store.data().domain.clone(), &trap))?;
        }
        let region = enter(caller, &target, &mut thread, len, service.part)?;
        let args = (service.object, method, region.buffer, len, region.buffer_len);
        let outcome = thread.dispatch.call_async(&mut thread.store, args).await;
        leave(kernel, caller, &target, &mut thread, region, outcome)
    }
    .await;
    finish(kernel, &target, thread, method, traced, result)
}

/// The instance of the service behind `handle`, and the service, which the call holds until it
/// returns: the service's last portal may be dropped meanwhile, but the component hears of the
/// release only after every call on the object has returned, so its runtime may read its table
/// of objects without a lock or a reference count (the SDK's `rt::dispatch` relies on it).
fn service_of(caller: &StoreCtx, handle: u32) -> Result<(Arc<ComponentInstance>, Arc<Service>), HostError> {
    if caller.depth >= MAX_NESTING {
        // One more level would not fit on the calling thread's fiber.
        return Err(HostError::QuotaExceeded);
    }
    let table = caller.domain.handles();
    let service = table.portal(handle)?;
    Ok((service.live_owner().ok_or(HostError::ServiceDead)?, service.clone()))
}

/// The fast path: the service runs synchronously in a service-thread store.
fn call_synchronously(
    kernel: &Arc<Kernel>,
    caller: &StoreCtx,
    target: &Arc<ComponentInstance>,
    service: &Service,
    method: u32,
    len: u32,
) -> Result<u32, HostError> {
    let mut thread = acquire(kernel, service, target)?;
    let traced = trace_start(kernel);
    let result = run(kernel, caller, service, target, &mut thread, method, len);
    finish(kernel, target, thread, method, traced, result)
}

/// When the call started, if the trace is recording.
fn trace_start(kernel: &Kernel) -> Option<u64> {
    let trace = &kernel.scheduler.trace;
    trace.is_on().then(|| trace.now())
}

/// Records the call in the trace and gives the service thread back, or drops it after a fault
/// (its store may be in any state).
fn finish(
    kernel: &Kernel,
    target: &ComponentInstance,
    mut thread: Box<ServiceThread>,
    method: u32,
    traced: Option<u64>,
    result: Result<u32, HostError>,
) -> Result<u32, HostError> {
    if let Some(start) = traced {
        kernel.scheduler.trace.called(thread.store.data().domain.id, method, start);
    }
    thread.store.data_mut().call = ServiceCall::None;
    match result {
        Err(HostError::ServiceFault) => drop(thread),
        _ => release(target, thread),
    }
    result
}

/// Copies the request into the service thread's buffer; returns the thread's region. The
/// thread runs code of component `part` of the instance.
fn enter(
    caller: &StoreCtx,
    target: &Arc<ComponentInstance>,
    thread: &mut ServiceThread,
    len: u32,
    part: u32,
) -> Result<Region, HostError> {
    let region = thread.store.data().region;
    transfer((&caller.instance, &caller.domain, &caller.region), (target, &thread.store.data().domain, &region), len)?;
    let ctx = thread.store.data_mut();
    ctx.depth = caller.depth + 1;
    ctx.part = part;
    Ok(region)
}

/// Counts the call and copies the reply back to the caller.
fn leave(
    kernel: &Arc<Kernel>,
    caller: &StoreCtx,
    target: &Arc<ComponentInstance>,
    thread: &mut ServiceThread,
    region: Region,
    outcome: wasmtime::Result<i32>,
) -> Result<u32, HostError> {
    let data = thread.store.data_mut();
    data.calls_served += 1;
    // The store is this call's alone: no atomic operation on every call's path.
    let refused = std::mem::take(data.wait_refused.get_mut());
    let reply_len = outcome.map_err(|trap| fault(kernel, target, &thread.store.data().domain.clone(), &trap))?;
    if refused {
        abandon(&thread.store.data().domain, target, &region, reply_len);
        return Err(HostError::MustWait);
    }
    if reply_len < 0 {
        return Err(HostError::from_code(reply_len.into()).unwrap_or(HostError::BadRequest));
    }
    transfer(
        (target, &thread.store.data().domain, &region),
        (&caller.instance, &caller.domain, &caller.region),
        reply_len as u32,
    )?;
    Ok(reply_len as u32)
}

/// Drops the handles of the `reply_len`-byte reply a restartable call that was refused a wait
/// left in its service thread's buffer: the message owned them, and nobody will receive it.
fn abandon(domain: &Domain, target: &ComponentInstance, region: &Region, reply_len: i32) {
    let memory = GuestView::of(&target.memory);
    let Ok(layout) = u32::try_from(reply_len).map_err(drop).and_then(|len| layout(&memory, region, len).map_err(drop))
    else {
        return;
    };
    let handles_at = region.buffer + layout.handles_offset() as u32;
    let dropped: Vec<_> = (0..layout.handle_count as u32)
        .filter_map(|i| memory.read_u32(handles_at + 4 * i).ok())
        .filter_map(|handle| domain.handles().remove(handle).ok())
        .collect();
    drop(dropped);
}

fn run(
    kernel: &Arc<Kernel>,
    caller: &StoreCtx,
    service: &Service,
    target: &Arc<ComponentInstance>,
    thread: &mut ServiceThread,
    method: u32,
    len: u32,
) -> Result<u32, HostError> {
    // Releases first: a release may itself call a portal, through this same buffer.
    kernel.begin_call(&mut thread.store, ServiceCall::Unpreemptible(None));
    thread.store.data_mut().depth = caller.depth + 1;
    for object in target.take_released() {
        thread
            .release
            .call(&mut thread.store, object)
            .map_err(|trap| fault(kernel, target, &thread.store.data().domain.clone(), &trap))?;
    }
    let region = enter(caller, target, thread, len, service.part)?;
    let args = (service.object, method, region.buffer, len, region.buffer_len);
    let outcome = thread.dispatch.call(&mut thread.store, args);
    leave(kernel, caller, target, thread, region, outcome)
}

/// Ends the domain of a service that trapped; the caller sees `ServiceFault` (or `ServiceDead`
/// when the domain was being terminated anyway).
fn fault(kernel: &Arc<Kernel>, target: &ComponentInstance, domain: &Arc<Domain>, trap: &wasmtime::Error) -> HostError {
    if domain.is_terminated() {
        return HostError::ServiceDead;
    }
    kernel.terminate(domain, format!("service thread of {} trapped: {}", target.name(), describe_trap(trap)));
    HostError::ServiceFault
}

/// An idle service thread of `target` (the instance of `service`), a new one within the limit,
/// or `ServiceBusy`.
fn acquire(
    kernel: &Arc<Kernel>,
    service: &Service,
    target: &Arc<ComponentInstance>,
) -> Result<Box<ServiceThread>, HostError> {
    if let Some(thread) = target.idle.take() {
        return Ok(thread);
    }
    if target.is_single() {
        return Err(HostError::ServiceBusy);
    }
    // The slow path: the service's domain, for its limit.
    let (_, domain) = service.owner().ok_or(HostError::ServiceDead)?;
    new_thread(kernel, target, &domain)
}

/// An idle restartable service thread of `target`, a new one within
/// `MAX_RESTARTABLE_THREADS` and the domain's quota, or none.
fn acquire_restartable(
    kernel: &Arc<Kernel>,
    service: &Service,
    target: &Arc<ComponentInstance>,
) -> Option<Box<ServiceThread>> {
    if let Some(thread) = target.restartable_idle.take() {
        return Some(thread);
    }
    if target.is_single() {
        return None;
    }
    let (_, domain) = service.owner()?;
    let counted = target
        .restartable_threads
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_RESTARTABLE_THREADS).then_some(n + 1))
        .is_ok();
    if !counted {
        return None;
    }
    let thread = kernel.new_service_thread(target, &domain, true, &|bytes| kernel.charge(&domain, bytes)).ok();
    if thread.is_none() {
        target.restartable_threads.fetch_sub(1, Ordering::AcqRel);
    }
    thread
}

/// A new service thread for `target` within its domain's limit, or `ServiceBusy`.
fn new_thread(
    kernel: &Arc<Kernel>,
    target: &Arc<ComponentInstance>,
    domain: &Arc<Domain>,
) -> Result<Box<ServiceThread>, HostError> {
    if target.service_threads.fetch_add(1, Ordering::AcqRel) >= domain.limits.service_threads {
        target.service_threads.fetch_sub(1, Ordering::AcqRel);
        return Err(HostError::ServiceBusy);
    }
    kernel.new_service_thread(target, domain, false, &|bytes| kernel.charge(domain, bytes)).inspect_err(|_| {
        target.service_threads.fetch_sub(1, Ordering::AcqRel);
    })
}

pub(crate) fn release(target: &ComponentInstance, thread: Box<ServiceThread>) {
    if thread.store.data().domain.is_terminated() {
        return;
    }
    if thread.store.data().restartable {
        // Nobody waits for one: a restartable call that finds none goes the waiting way.
        target.restartable_idle.put(thread);
        return;
    }
    target.idle.put(thread);
    if target.has_waiters.load(Ordering::SeqCst) {
        let mut waiters = crate::lock(&target.waiters);
        let waiter = waiters.pop_front();
        target.has_waiters.store(!waiters.is_empty(), Ordering::Release);
        drop(waiters);
        if let Some(waiter) = waiter {
            waiter.wake();
        }
    }
}

/// Whether a call to the service behind `service` could get a service thread now; if not,
/// `waker` is queued to be woken when one is released.
pub(crate) fn ready_or_wait(service: &Service, waker: &std::task::Waker) -> Result<bool, HostError> {
    let (target, domain) = service.owner().ok_or(HostError::ServiceDead)?;
    let mut waiters = crate::lock(&target.waiters);
    // Raise the flag before looking at the idle threads: a `release` that the look misses then
    // sees the flag (see `IdleThreads`) and wakes us once we have queued (it needs the waiters'
    // lock, which we hold until then).
    target.has_waiters.store(true, Ordering::SeqCst);
    let free = !target.idle.is_empty()
        || (!target.is_single() && target.service_threads.load(Ordering::Acquire) < domain.limits.service_threads);
    if free {
        target.has_waiters.store(!waiters.is_empty(), Ordering::Release);
    } else {
        waiters.push_back(waker.clone());
    }
    Ok(free)
}

/// The single store of an interpreted instance, or `Pending` with `waker` queued until it is
/// released.
pub(crate) fn take_or_wait(
    instance: &ComponentInstance,
    domain: &Domain,
    waker: &std::task::Waker,
) -> std::task::Poll<Result<Box<ServiceThread>, HostError>> {
    if domain.is_terminated() {
        return std::task::Poll::Ready(Err(HostError::ServiceDead));
    }
    let mut waiters = crate::lock(&instance.waiters);
    // As in `ready_or_wait`: the flag goes up before the pool is looked at.
    instance.has_waiters.store(true, Ordering::SeqCst);
    if let Some(thread) = instance.idle.take() {
        instance.has_waiters.store(!waiters.is_empty(), Ordering::Release);
        return std::task::Poll::Ready(Ok(thread));
    }
    waiters.push_back(waker.clone());
    std::task::Poll::Pending
}

/// A call made by the kernel itself on `service` (a memory fault sent to a parent's handler):
/// `payload` is the encoded request; returns the reply's payload. Runs on the current CPU like
/// any portal call.
///
/// # Errors
/// As a portal call: the service is dead, busy or faulted, or its reply is malformed.
pub(crate) fn kernel_call(
    kernel: &Arc<Kernel>,
    service: &Service,
    method: u32,
    payload: &[u8],
) -> Result<Vec<u8>, HostError> {
    let (target, domain) = service.owner().ok_or(HostError::ServiceDead)?;
    if target.services_wait {
        // Its store is async and the kernel's call is not: such a service cannot take it.
        return Err(HostError::NotPermitted);
    }
    let mut thread = acquire(kernel, service, &target)?;
    let region = thread.store.data().region;
    // The kernel's call comes from inside a host call of any depth: the handler may not call
    // further services.
    kernel.begin_call(&mut thread.store, ServiceCall::Unpreemptible(None));
    thread.store.data_mut().depth = MAX_NESTING;
    thread.store.data_mut().part = service.part;
    let len = 8 + payload.len();
    let result = (|| {
        if len > region.buffer_len as usize {
            return Err(HostError::MessageTooLarge);
        }
        let memory = GuestView::of(&target.memory);
        memory.write_u32(region.buffer, payload.len() as u32)?;
        memory.write(region.buffer + 4, payload)?;
        memory.write_u32(region.buffer + 4 + payload.len() as u32, 0)?;
        let args = (service.object, method, region.buffer, len as u32, region.buffer_len);
        let reply_len =
            thread.dispatch.call(&mut thread.store, args).map_err(|trap| fault(kernel, &target, &domain, &trap))?;
        if reply_len < 0 {
            return Err(HostError::from_code(reply_len.into()).unwrap_or(HostError::BadRequest));
        }
        let reply = layout(&memory, &region, reply_len as u32)?;
        let mut bytes = vec![0u8; reply.payload_len];
        memory.read(region.buffer + 4, &mut bytes)?;
        Ok(bytes)
    })();
    thread.store.data_mut().call = ServiceCall::None;
    match result {
        Err(HostError::ServiceFault) => drop(thread),
        _ => release(&target, thread),
    }
    result
}

/// The `handle_dup` host call: a second handle to the same object.
pub(crate) fn dup(domain: &Domain, handle: u32) -> Result<u32, HostError> {
    let mut table = domain.handles();
    let object: KernelObject = table.get(handle)?.clone();
    table.insert(object)
}

#[cfg(test)]
mod tests {
    use domos_abi::HostError::*;
    use wasmtime::{Config, Engine, MemoryType, SharedMemory};

    use super::*;
    use crate::object::atomic::AtomicVariable;
    use crate::object::guest_memory::Heap;
    use crate::test_system::{System, component, single_component};

    /// A thread's region whose message buffer of `len` bytes is at `buffer`.
    fn region(buffer: u32, len: u32) -> Region {
        Region { base: 0, stack_top: buffer, buffer, buffer_len: len }
    }

    /// Writes `[payload_len][payload][count][handles]` at `at`; returns its length.
    fn write_message(memory: &GuestView, at: u32, payload: &[u8], handles: &[u32]) -> u32 {
        let mut bytes = (payload.len() as u32).to_le_bytes().to_vec();
        bytes.extend_from_slice(payload);
        bytes.extend_from_slice(&(handles.len() as u32).to_le_bytes());
        handles.iter().for_each(|h| bytes.extend_from_slice(&h.to_le_bytes()));
        memory.write(at, &bytes).unwrap();
        bytes.len() as u32
    }

    fn heap() -> Heap {
        let engine = Engine::new(Config::new().wasm_threads(true).shared_memory(true)).unwrap();
        Heap::Shared(SharedMemory::new(&engine, MemoryType::shared(1, 1)).unwrap())
    }

    #[test]
    fn the_layout_of_a_well_formed_message_is_read_from_its_header() {
        let heap = heap();
        let memory = GuestView::of(&heap);
        let buffer = region(4096, 64);
        let len = write_message(&memory, 4096, b"hello", &[]);
        assert_eq!(len, 13);
        assert_eq!(layout(&memory, &buffer, len), Ok(MessageLayout { payload_len: 5, handle_count: 0 }));
        let len = write_message(&memory, 4096, b"hello", &[7, 8]);
        assert_eq!(layout(&memory, &buffer, len), Ok(MessageLayout { payload_len: 5, handle_count: 2 }));
        let len = write_message(&memory, 4096, b"", &[]);
        assert_eq!(layout(&memory, &buffer, len), Ok(MessageLayout { payload_len: 0, handle_count: 0 }));
    }

    #[test]
    fn a_header_that_disagrees_with_the_length_is_malformed() {
        let heap = heap();
        let memory = GuestView::of(&heap);
        let buffer = region(4096, 128);
        let len = write_message(&memory, 4096, b"hello", &[1]);
        assert_eq!(len, 17);
        for wrong in [0, 4, 7, 8, 16, 18, 21] {
            assert_eq!(layout(&memory, &buffer, wrong), Err(MalformedMessage), "length {wrong}");
        }
        // A payload length that runs past the message, or past the end of the address space.
        for payload_len in [6, 13, 0xffff_fff0, u32::MAX] {
            memory.write_u32(4096, payload_len).unwrap();
            assert_eq!(layout(&memory, &buffer, len), Err(MalformedMessage), "payload length {payload_len:#x}");
        }
        // More handles than a message may carry, with a length to match.
        let seventeen = [1; MAX_MESSAGE_HANDLES + 1];
        let len = write_message(&memory, 4096, b"", &seventeen);
        assert_eq!(layout(&memory, &buffer, len), Err(MalformedMessage));
        let sixteen = &seventeen[..MAX_MESSAGE_HANDLES];
        let len = write_message(&memory, 4096, b"", sixteen);
        assert_eq!(layout(&memory, &buffer, len), Ok(MessageLayout { payload_len: 0, handle_count: 16 }));
    }

    #[test]
    fn a_message_longer_than_the_buffer_is_too_large_even_if_well_formed() {
        let heap = heap();
        let memory = GuestView::of(&heap);
        let len = write_message(&memory, 4096, b"hello", &[]);
        assert_eq!(layout(&memory, &region(4096, 12), len), Err(MessageTooLarge));
        assert_eq!(layout(&memory, &region(4096, 13), len), Ok(MessageLayout { payload_len: 5, handle_count: 0 }));
        // A buffer at the very end of the heap: the header cannot be read.
        assert_eq!(layout(&memory, &region(65534, 64), 13), Err(InvalidArgument));
    }

    /// Two domains A and B of one component each, created but not started.
    fn two_domains() -> System {
        System::create(
            &[component("c", "", "")],
            "[[domain]]\nname = \"A\"\n[[domain.component]]\nname = \"c\"\n\
             [[domain]]\nname = \"B\"\n[[domain.component]]\nname = \"c\"\n",
        )
    }

    fn atomic(domain: &Domain, value: u32) -> u32 {
        domain.handles().insert(KernelObject::Atomic(Arc::new(AtomicVariable::new(value)))).unwrap()
    }

    fn value(domain: &Domain, handle: u32) -> Result<u32, HostError> {
        domain.handles().atomic(handle).map(|v| v.get())
    }

    #[test]
    fn a_message_is_copied_once_and_its_handles_move_to_the_receiver() {
        let system = two_domains();
        let (a, b) = (system.domain("A"), system.domain("B"));
        let (a_instance, b_instance) = (&a.instances()[0], &b.instances()[0]);
        let (a_memory, b_memory) = (GuestView::of(&a_instance.memory), GuestView::of(&b_instance.memory));
        let (first, second) = (atomic(a, 11), atomic(a, 22));
        let len = write_message(&a_memory, 4096, b"ping!", &[first, second]);
        let (from, to) = (region(4096, 256), region(8192, 256));
        assert_eq!(transfer((a_instance, a, &from), (b_instance, b, &to), len), Ok(()));

        assert_eq!((value(a, first), value(a, second)), (Err(InvalidHandle), Err(InvalidHandle)), "moved out");
        assert_eq!(a.handle_count(), 0);
        let mut received = [0u8; 25];
        b_memory.read(8192, &mut received).unwrap();
        assert_eq!(received[..13], [5, 0, 0, 0, b'p', b'i', b'n', b'g', b'!', 2, 0, 0, 0]);
        assert_eq!(received[21..], [0; 4], "nothing written past the message");
        let handle = |i: usize| u32::from_le_bytes(received[13 + 4 * i..17 + 4 * i].try_into().unwrap());
        assert_eq!((value(b, handle(0)), value(b, handle(1))), (Ok(11), Ok(22)), "B's own handles, in order");
        assert_eq!(b.handle_count(), 2);
    }

    #[test]
    fn a_message_with_an_invalid_handle_fails_and_moves_nothing() {
        let system = two_domains();
        let (a, b) = (system.domain("A"), system.domain("B"));
        let (a_instance, b_instance) = (&a.instances()[0], &b.instances()[0]);
        let a_memory = GuestView::of(&a_instance.memory);
        let kept = atomic(a, 11);
        let (from, to) = (region(4096, 256), region(8192, 256));
        for forged in [0, kept + 1, kept ^ (1 << 16), u32::MAX] {
            let len = write_message(&a_memory, 4096, b"x", &[kept, forged]);
            assert_eq!(transfer((a_instance, a, &from), (b_instance, b, &to), len), Err(InvalidHandle));
            assert_eq!(value(a, kept), Ok(11), "the valid handle stays with the sender");
            assert_eq!(b.handle_count(), 0);
            assert_eq!(system.heap("B", 8192, 16), [0; 16], "nothing copied");
        }
    }

    /// A handle can move once: a message that carries it twice is refused as a whole, and the
    /// sender keeps it.
    #[test]
    fn a_message_carrying_a_handle_twice_fails_and_moves_nothing() {
        let system = two_domains();
        let (a, b) = (system.domain("A"), system.domain("B"));
        let (a_instance, b_instance) = (&a.instances()[0], &b.instances()[0]);
        let (kept, other) = (atomic(a, 11), atomic(a, 22));
        let len = write_message(&GuestView::of(&a_instance.memory), 4096, b"", &[other, kept, kept]);
        assert_eq!(
            transfer((a_instance, a, &region(4096, 64)), (b_instance, b, &region(8192, 64)), len),
            Err(MalformedMessage)
        );
        assert_eq!((value(a, kept), value(a, other)), (Ok(11), Ok(22)), "the sender keeps both");
        assert_eq!(b.handle_count(), 0);
    }

    /// When the receiver's table fills up midway the message fails as a whole: the receiver
    /// keeps none of the handles (it would never learn their numbers), and the objects, which
    /// the message owned, are dropped.
    #[test]
    fn a_receiver_without_room_for_every_handle_gets_none() {
        let system = two_domains();
        let (a, b) = (system.domain("A"), system.domain("B"));
        let (a_instance, b_instance) = (&a.instances()[0], &b.instances()[0]);
        let variables = [Arc::new(AtomicVariable::new(1)), Arc::new(AtomicVariable::new(2))];
        let handles = variables.clone().map(|v| a.handles().insert(KernelObject::Atomic(v)).unwrap());
        for _ in 0..crate::object::handle::MAX_HANDLES - 1 {
            atomic(b, 0);
        }
        let len = write_message(&GuestView::of(&a_instance.memory), 4096, b"", &handles);
        let (from, to) = (region(4096, 64), region(8192, 64));
        assert_eq!(transfer((a_instance, a, &from), (b_instance, b, &to), len), Err(QuotaExceeded));
        assert_eq!(b.handle_count(), crate::object::handle::MAX_HANDLES - 1, "the receiver's table is as it was");
        assert_eq!(variables.each_ref().map(Arc::strong_count), [1, 1], "no kernel table holds them any more");
        assert_eq!(a.handle_count(), 0, "the message took them from the sender");
    }

    #[test]
    fn the_receivers_buffer_bounds_the_message_before_anything_moves() {
        let system = two_domains();
        let (a, b) = (system.domain("A"), system.domain("B"));
        let (a_instance, b_instance) = (&a.instances()[0], &b.instances()[0]);
        let handles = [atomic(a, 1), atomic(a, 2)];
        let len = write_message(&GuestView::of(&a_instance.memory), 4096, b"hello", &handles);
        assert_eq!(len, 21);
        let from = region(4096, 256);
        let small = region(8192, 20);
        assert_eq!(transfer((a_instance, a, &from), (b_instance, b, &small), len), Err(MessageTooLarge));
        assert_eq!((value(a, handles[0]), value(a, handles[1])), (Ok(1), Ok(2)));
        assert_eq!(
            transfer((a_instance, a, &region(4096, 20)), (b_instance, b, &region(8192, 256)), len),
            Err(MessageTooLarge)
        );
        assert_eq!(a.handle_count(), 2);
        assert_eq!(b.handle_count(), 0);
        let exact = region(8192, 21);
        assert_eq!(transfer((a_instance, a, &from), (b_instance, b, &exact), len), Ok(()));
        assert_eq!(b.handle_count(), 2);
    }

    /// Two components of one domain: the handles stay in its table, under new numbers.
    #[test]
    fn within_one_domain_handles_are_renumbered() {
        let system = System::create(
            &[component("c", "", ""), component("d", "", "")],
            "[[domain]]\nname = \"A\"\n[[domain.component]]\nname = \"c\"\n[[domain.component]]\nname = \"d\"\n",
        );
        let a = system.domain("A");
        let instances = a.instances();
        let handle = atomic(a, 5);
        let len = write_message(&GuestView::of(&instances[0].memory), 4096, b"", &[handle]);
        assert_eq!(transfer((&instances[0], a, &region(4096, 64)), (&instances[1], a, &region(4096, 64)), len), Ok(()));
        let moved = GuestView::of(&instances[1].memory).read_u32(4096 + 8).unwrap();
        assert_ne!(moved, handle);
        assert_eq!((value(a, handle), value(a, moved)), (Err(InvalidHandle), Ok(5)));
        assert_eq!(a.handle_count(), 1);
    }

    /// Echo's methods: 1 echoes the request; 2 traps; 3 answers UnknownMethod; 4 a code that is
    /// no error; 5 a reply four bytes longer than its header says; 6 writes the object's id into
    /// the first word of the payload and echoes.
    const ECHO: &str = r#"
        (data (i32.const 1024) "echo")
        (func (export "domos_init") (result i32)
          (drop (call $name_register (i32.const 1024) (i32.const 4)
            (i32.wrap_i64 (call $service_create (i32.const 7) (i32.const 0x1234)))))
          i32.const 0)
        (func (export "domos_dispatch") (param $object i32) (param $method i32) (param $buffer i32) (param $len i32)
              (param $capacity i32) (result i32)
          (if (i32.eq (local.get $method) (i32.const 2)) (then unreachable))
          (if (i32.eq (local.get $method) (i32.const 3)) (then (return (i32.const -12))))
          (if (i32.eq (local.get $method) (i32.const 4)) (then (return (i32.const -1000))))
          (if (i32.eq (local.get $method) (i32.const 5)) (then (return (i32.add (local.get $len) (i32.const 4)))))
          (if (i32.eq (local.get $method) (i32.const 6))
            (then (i32.store offset=4 (local.get $buffer) (local.get $object))))
          (local.get $len))"#;

    /// The client sends "ping" with a memory object, then calls each method.
    const CLIENT: &str = r#"
        (data (i32.const 1024) "echo")
        (func (export "domos_main") (result i32)
          (local $portal i32) (local $buffer i32) (local $memory i32)
          (local.set $portal (i32.wrap_i64 (call $name_lookup (i32.const 1024) (i32.const 4) (i32.const 0x1234))))
          (local.set $buffer (i32.wrap_i64 (call $message_buffer)))
          (local.set $memory (i32.wrap_i64 (call $memory_create (i64.const 8))))
          (drop (call $memory_set_u32 (local.get $memory) (i64.const 0) (i32.const 0xabcd)))
          (i32.store (local.get $buffer) (i32.const 4))
          (i32.store offset=4 (local.get $buffer) (i32.const 0x676e6970))
          (i32.store offset=8 (local.get $buffer) (i32.const 1))
          (i32.store offset=12 (local.get $buffer) (local.get $memory))
          (i64.store (i32.const 0) (call $portal_call (local.get $portal) (i32.const 1) (i32.const 16)))
          (i64.store (i32.const 8) (call $memory_get_u32 (local.get $memory) (i64.const 0)))
          (i64.store (i32.const 16) (call $memory_get_u32 (i32.load offset=12 (local.get $buffer)) (i64.const 0)))
          (i64.store (i32.const 24) (i64.extend_i32_u (i32.load offset=4 (local.get $buffer))))
          (i32.store offset=8 (local.get $buffer) (i32.const 0))
          (i64.store (i32.const 32) (call $portal_call (local.get $portal) (i32.const 6) (i32.const 12)))
          (i64.store (i32.const 40) (i64.extend_i32_u (i32.load offset=4 (local.get $buffer))))
          (i64.store (i32.const 48) (call $portal_call (local.get $portal) (i32.const 3) (i32.const 12)))
          (i64.store (i32.const 56) (call $portal_call (local.get $portal) (i32.const 4) (i32.const 12)))
          (i64.store (i32.const 64) (call $portal_call (local.get $portal) (i32.const 5) (i32.const 12)))
          (i64.store (i32.const 72) (call $portal_call (local.get $portal) (i32.const 1) (i32.const 13)))
          (i64.store (i32.const 80) (call $portal_call (local.get $portal) (i32.const 1) (i32.const 0x10000000)))
          (i64.store (i32.const 88) (call $portal_call (i32.const 0x7fff0001) (i32.const 1) (i32.const 12)))
          (i64.store (i32.const 96) (call $portal_call (i32.load offset=12 (local.get $buffer)) (i32.const 1) (i32.const 12)))
          (i64.store (i32.const 104) (call $portal_call (local.get $portal) (i32.const 2) (i32.const 12)))
          (i64.store (i32.const 112) (call $portal_call (local.get $portal) (i32.const 1) (i32.const 12)))
          i32.const 0)"#;

    /// Makes a service and drops its portal until the kernel refuses, then calls its own
    /// service, which delivers the queued releases, and makes one more.
    const CHURN: &str = r#"
        (func (export "domos_main") (result i32)
          (local $portal i32) (local $made i32) (local $result i64) (local $buffer i32)
          (local.set $portal (i32.wrap_i64 (call $service_create (i32.const 1) (i32.const 0x1234))))
          (block $refused
            (loop $again
              (local.set $result (call $service_create (i32.const 2) (i32.const 0x1234)))
              (br_if $refused (i64.lt_s (local.get $result) (i64.const 0)))
              (drop (call $handle_drop (i32.wrap_i64 (local.get $result))))
              (local.set $made (i32.add (local.get $made) (i32.const 1)))
              (br_if $again (i32.lt_u (local.get $made) (i32.const 100000)))))
          (i64.store (i32.const 0) (i64.extend_i32_u (local.get $made)))
          (i64.store (i32.const 8) (local.get $result))
          (local.set $buffer (i32.wrap_i64 (call $message_buffer)))
          (i64.store (local.get $buffer) (i64.const 0))
          (i64.store (i32.const 16) (call $portal_call (local.get $portal) (i32.const 1) (i32.const 8)))
          (i64.store (i32.const 24) (call $service_create (i32.const 3) (i32.const 0x1234)))
          i32.const 0)
        (func (export "domos_dispatch") (param i32 i32 i32) (param $len i32) (param i32) (result i32)
          (local.get $len))"#;

    #[test]
    fn releases_waiting_for_a_call_are_bounded_and_delivered_by_the_next() {
        let system = System::boot(
            &[component("churn", "", CHURN)],
            "[[domain]]\nname = \"D\"\n[[domain.component]]\nname = \"churn\"\n",
        );
        let [made, refused, called, again] = system.results("D", 4)[..] else { panic!("four results") };
        let pending = i64::from(crate::domain::MAX_PENDING_SERVICES);
        assert_eq!(made, pending - 1, "the live one and the dropped ones count until released");
        assert_eq!(refused, HostError::QuotaExceeded as i64);
        assert_eq!(called, 8);
        assert!(again >= 0, "a service again once the call delivered the releases: {again}");
    }

    #[test]
    fn a_portal_call_copies_the_request_and_the_reply_and_reports_what_the_service_did() {
        // The echo service publishes the interface its manifest provides, `Echo@1`.
        let id = domos_abi::fnv1a(b"Echo@1").to_string();
        let (echo, client) = (ECHO.replace("0x1234", &id), CLIENT.replace("0x1234", &id));
        let system = System::boot(
            &[component("echo", "provides = [\"Echo@1.0\"]", &echo), component("client", "", &client)],
            "[[domain]]\nname = \"Echo\"\n[[domain.component]]\nname = \"echo\"\n\
             [[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"client\"\n",
        );
        let code = |e: HostError| e as i64;
        assert_eq!(
            system.results("Client", 15),
            [
                16,                  // the reply: the request echoed
                code(InvalidHandle), // the memory object went to Echo and came back under a new handle,
                0xabcd,              // which reads it
                0x676e_6970,         // "ping"
                12,
                7, // the service saw its object
                code(UnknownMethod),
                code(BadRequest),       // a negative reply that is no error code
                code(MalformedMessage), // a reply whose header disagrees with its length
                code(MalformedMessage), // likewise the request
                code(MessageTooLarge),  // more than the caller's buffer holds
                code(InvalidHandle),    // a forged portal
                code(InvalidHandle),    // a memory object is no portal
                code(ServiceFault),     // the service trapped,
                code(ServiceDead),      // and its domain is gone
            ]
        );
        let reason = system.domain("Echo").termination_reason().unwrap_or_default();
        assert!(reason.starts_with("service thread of echo trapped: "), "{reason}");
        assert_eq!(system.domain("Client").termination_reason(), None, "the caller survives");
        assert_eq!(system.domain("Echo").calls_served(), 6, "calls that reached the service, the trap included");
        assert_eq!(system.domain("Client").calls_made(), 11, "every call counts, refused ones too");
    }

    /// Spin's method 1 runs 150 ms, many slices, and returns; every other method never returns.
    const SPIN: &str = r#"
        (data (i32.const 1024) "spin")
        (func (export "domos_init") (result i32)
          (drop (call $name_register (i32.const 1024) (i32.const 4)
            (i32.wrap_i64 (call $service_create (i32.const 1) (i32.const 0x1234)))))
          i32.const 0)
        (func (export "domos_dispatch") (param $object i32) (param $method i32) (param $buffer i32) (param $len i32)
              (param $capacity i32) (result i32)
          (local $until i64)
          (if (i32.eq (local.get $method) (i32.const 1))
            (then
              (local.set $until (i64.add (call $clock_ns) (i64.const 150000000)))
              (loop $run (br_if $run (i64.lt_s (call $clock_ns) (local.get $until))))
              (return (local.get $len))))
          (loop $forever (br $forever))
          unreachable)"#;

    /// The client's `main` makes FIRST (a call of method 1, or nothing), then starts two threads
    /// that each call method 2 and store its result at 8 × their argument. A call answered
    /// `MustWait` is made again as `portal_call_waiting`, as the SDK does.
    const SPIN_CLIENT: &str = r#"
        (data (i32.const 1024) "spin")
        (func $call (param $method i32) (result i64)
          (local $portal i32) (local $buffer i32) (local $result i64)
          (local.set $portal (i32.wrap_i64 (call $name_lookup (i32.const 1024) (i32.const 4) (i32.const 0x1234))))
          (local.set $buffer (i32.wrap_i64 (call $message_buffer)))
          (i64.store (local.get $buffer) (i64.const 0))
          (local.set $result (call $portal_call (local.get $portal) (local.get $method) (i32.const 8)))
          (if (i64.eq (local.get $result) (i64.const -17))
            (then (local.set $result (call $portal_call_waiting (local.get $portal) (local.get $method) (i32.const 8)))))
          (local.get $result))
        (func (export "domos_main") (result i32)
          FIRST
          (drop (call $thread_spawn (i32.const 1)))
          (drop (call $thread_spawn (i32.const 2)))
          i32.const 0)
        (func (export "domos_thread_entry") (param $n i32) (result i32)
          (i64.store (i32.shl (local.get $n) (i32.const 3)) (call $call (i32.const 2)))
          i32.const 0)"#;

    /// Counts at address 0 for as long as it runs.
    const BUSY: &str = r#"
        (func (export "domos_main") (result i32)
          (loop $count (i64.store (i32.const 0) (i64.add (i64.load (i32.const 0)) (i64.const 1))) (br $count))
          unreachable)"#;

    /// The spinner, its client and a busy domain on two CPUs; `first` is the client's first call;
    /// `spinner` is the settings of the spinner's domain.
    fn spinning(first: &str, spinner: &str) -> System {
        let id = domos_abi::fnv1a(b"Spin@1").to_string();
        let (spin, client) = (SPIN.replace("0x1234", &id), SPIN_CLIENT.replace("0x1234", &id).replace("FIRST", first));
        let provides = "provides = [\"Spin@1.0\"]";
        System::running(
            &[
                (component("spin", provides, &spin), Some(single_component("spin", provides, &spin))),
                (component("client", "", &client), None),
                (component("busy", "", BUSY), None),
            ],
            &format!(
                "[[domain]]\nname = \"Spinner\"\n{spinner}\n[[domain.component]]\nname = \"spin\"\n\
                 [[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"client\"\n\
                 [[domain]]\nname = \"Busy\"\n[[domain.component]]\nname = \"busy\"\n"
            ),
            2,
            std::time::Duration::from_millis(300),
        )
    }

    /// Waits up to 10 s for `done`.
    fn eventually(done: impl Fn() -> bool) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !done() {
            if std::time::Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        true
    }

    /// Issue 12, hole 4: as many calls as there are kernel CPUs into a service that never returns
    /// no longer hold the CPUs. The service once ran past a slice, so the calls run in async
    /// stores, are preempted at the end of each slice like threads, and charge the service's
    /// domain as they run; terminating it ends them.
    fn preempted_and_charged(spinner: &str, calls: usize) {
        let system = spinning("(i64.store (i32.const 0) (call $call (i32.const 1)))", spinner);
        let lines = || system.lines();
        let first = || system.results("Client", 1)[0];
        assert!(eventually(|| first() == 8), "the first call ran past a slice and returned: {:?}", lines());
        let (spinner, busy) = (system.domain("Spinner"), || system.results("Busy", 1)[0]);
        let (counted, charged) = (busy(), spinner.cpu_ns());
        std::thread::sleep(std::time::Duration::from_millis(300));
        let refused = ServiceBusy as i64;
        let running = system.results("Client", 3)[1..].iter().filter(|&&r| r == 0).count();
        assert_eq!(running, calls, "calls still running: {:?} {:?}", system.results("Client", 3), lines());
        assert!(busy() > counted, "another domain's thread ran meanwhile: {:?}", lines());
        let more = spinner.cpu_ns() - charged;
        assert!(more >= 10_000_000, "the spinner was charged {more} ns in 300 ms of {calls} calls: {:?}", lines());

        system.kernel.terminate(spinner, "stopped by the test".into());
        let dead = ServiceDead as i64;
        let ended = || system.results("Client", 3)[1..].iter().all(|&r| r == dead || r == refused);
        assert!(eventually(ended), "{:?} {:?}", system.results("Client", 3), lines());
        assert_eq!(spinner.termination_reason().as_deref(), Some("stopped by the test"));
        assert_eq!(system.domain("Client").termination_reason(), None);
        system.kernel.terminate(system.domain("Busy"), "stopped by the test".into());
        assert!(system.kernel.scheduler.wait_idle(Some(std::time::Duration::from_secs(10))), "{:?}", lines());
    }

    #[test]
    fn calls_into_a_spinning_service_are_preempted_and_charged_to_it_as_they_run() {
        preempted_and_charged("", 2);
    }

    /// The same with the spinner interpreted: its one store runs one call at a time, in an
    /// async store once it has run past a slice; the second caller finds it busy (and does not
    /// wait for it).
    #[test]
    fn calls_into_a_spinning_interpreted_service_are_preempted_too() {
        preempted_and_charged("translator = \"pulley\"", 1);
    }

    /// A service that spins in its first calls holds the CPUs of its callers only for a slice and
    /// `UNPREEMPTIBLE_CPU`: its calls are charged to it as they run, then its domain ends.
    #[test]
    fn a_service_that_spins_in_its_first_calls_is_charged_and_ended() {
        let system = spinning("", "");
        let lines = || system.lines();
        let dead = ServiceDead as i64;
        assert!(eventually(|| system.results("Client", 3)[1..] == [dead, dead]), "{:?}", lines());
        let spinner = system.domain("Spinner");
        let reason = spinner.termination_reason().unwrap_or_default();
        assert!(reason.contains("without giving up its kernel CPU"), "{reason}");
        let charged = spinner.cpu_ns();
        let limit = crate::domain::store::UNPREEMPTIBLE_CPU.as_nanos() as u64;
        assert!(charged >= limit, "the spinner was charged {charged} ns: {:?}", lines());
        let counted = system.results("Busy", 1)[0];
        assert!(eventually(|| system.results("Busy", 1)[0] > counted), "the busy domain runs on: {:?}", lines());
        system.kernel.terminate(system.domain("Busy"), "stopped by the test".into());
        assert!(system.kernel.scheduler.wait_idle(Some(std::time::Duration::from_secs(10))), "{:?}", lines());
    }

    /// A service that waits (`services_wait`). Every call adds one to the count at address 0;
    /// method 1 answers at once, method 2 blocks on a variable that differs from what it
    /// expects (which returns at once in a store that can wait, and is refused in one that
    /// cannot), method 3 does the same with a memory object in its reply.
    const RESTARTABLE: &str = r#"
        (data (i32.const 1024) "restart")
        (func (export "domos_init") (result i32)
          (i32.store (i32.const 2048) (i32.wrap_i64 (call $atomic_create (i32.const 0))))
          (drop (call $name_register (i32.const 1024) (i32.const 7)
            (i32.wrap_i64 (call $service_create (i32.const 1) (i32.const 0x1234)))))
          i32.const 0)
        (func (export "domos_dispatch") (param $object i32) (param $method i32) (param $buffer i32) (param $len i32)
              (param $capacity i32) (result i32)
          (local $reply i32)
          (i64.store (i32.const 0) (i64.add (i64.load (i32.const 0)) (i64.const 1)))
          (local.set $reply (local.get $len))
          (if (i32.eq (local.get $method) (i32.const 3))
            (then
              (i32.store (local.get $buffer) (i32.const 0))
              (i32.store offset=4 (local.get $buffer) (i32.const 1))
              (i32.store offset=8 (local.get $buffer) (i32.wrap_i64 (call $memory_create (i64.const 8))))
              (local.set $reply (i32.const 12))))
          (if (i32.ge_u (local.get $method) (i32.const 2))
            (then (drop (call $atomic_block_if_equal (i32.load (i32.const 2048)) (i32.const 1)))))
          (local.get $reply))"#;

    /// Calls method M restartably, then (after `MustWait`) the waiting way, storing both answers
    /// at AT; then a request that carries a memory object, likewise, and reads the object.
    const RESTARTING_CLIENT: &str = r#"
        (data (i32.const 1024) "restart")
        (func $call (param $method i32) (param $at i32) (param $len i32)
          (local $portal i32) (local $buffer i32) (local $result i64)
          (local.set $portal (i32.wrap_i64 (call $name_lookup (i32.const 1024) (i32.const 7) (i32.const 0x1234))))
          (local.set $buffer (i32.wrap_i64 (call $message_buffer)))
          (local.set $result (call $portal_call_restartable (local.get $portal) (local.get $method) (local.get $len)))
          (i64.store (local.get $at) (local.get $result))
          (if (i64.eq (local.get $result) (i64.const MUST_WAIT))
            (then (local.set $result (call $portal_call_waiting (local.get $portal) (local.get $method) (local.get $len)))))
          (i64.store offset=8 (local.get $at) (local.get $result)))
        (func (export "domos_main") (result i32)
          (local $buffer i32) (local $memory i32)
          (local.set $buffer (i32.wrap_i64 (call $message_buffer)))
          (i64.store (local.get $buffer) (i64.const 0))
          (call $call (i32.const 1) (i32.const 0) (i32.const 8))
          (i64.store (local.get $buffer) (i64.const 0))
          (call $call (i32.const 2) (i32.const 16) (i32.const 8))
          (i64.store (local.get $buffer) (i64.const 0))
          (call $call (i32.const 3) (i32.const 32) (i32.const 8))
          (local.set $memory (i32.wrap_i64 (call $memory_create (i64.const 8))))
          (i32.store (local.get $buffer) (i32.const 0))
          (i32.store offset=4 (local.get $buffer) (i32.const 1))
          (i32.store offset=8 (local.get $buffer) (local.get $memory))
          (i64.store (i32.const 48) (call $portal_call_restartable
            (i32.wrap_i64 (call $name_lookup (i32.const 1024) (i32.const 7) (i32.const 0x1234))) (i32.const 1) (i32.const 12)))
          (i64.store (i32.const 56) (call $memory_get_u32 (local.get $memory) (i64.const 0)))
          i32.const 0)"#;

    #[test]
    fn a_restartable_call_runs_at_once_and_again_the_waiting_way_only_if_it_would_wait() {
        let id = domos_abi::fnv1a(b"Echo@1").to_string();
        let must_wait = (MustWait as i64).to_string();
        let (service, client) = (
            RESTARTABLE.replace("0x1234", &id),
            RESTARTING_CLIENT.replace("0x1234", &id).replace("MUST_WAIT", &must_wait),
        );
        let system = System::boot(
            &[
                component("restart", "provides = [\"Echo@1.0\"]\nservices_wait = true", &service),
                component("client", "", &client),
            ],
            "[[domain]]\nname = \"Service\"\n[[domain.component]]\nname = \"restart\"\n\
             [[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"client\"\n",
        );
        let must_wait = MustWait as i64;
        assert_eq!(
            system.results("Client", 8),
            [
                8, 8, // method 1 ran at once, synchronously
                must_wait, 8, // method 2 would wait: abandoned, then made the waiting way
                must_wait, 12,        // method 3 likewise, its second reply the one delivered
                must_wait, // a request with a handle is not run restartably,
                0,         // and the handle stays the caller's
            ]
        );
        assert_eq!(system.results("Service", 1), [5], "runs begun: 1 + 2 + 2");
        // The service holds its portal and its variable; the memory object of the abandoned
        // reply was dropped with it, the delivered one moved to the client.
        assert_eq!(system.domain("Service").handle_count(), 2);
        assert_eq!(
            system.domain("Client").handle_count(),
            6,
            "four portals looked up, the object it made, the one it got"
        );
        assert_eq!(system.domain("Service").termination_reason(), None);
    }
}
