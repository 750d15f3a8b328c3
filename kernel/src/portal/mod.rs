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

use crate::domain::instance::ServiceThread;
use crate::domain::store::{StoreCtx, describe_trap};
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
/// sender's table even if the receiver later refuses the message.
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
    let (target, object) = service_of(caller, handle)?;
    if caller.thread != 0 && deferred(kernel, caller, &target) {
        caller.deferred.store(true, Ordering::Relaxed);
        return Err(HostError::MustWait);
    }
    if target.component.manifest.services_wait {
        return Err(HostError::MustWait);
    }
    call_synchronously(kernel, caller, handle, &target, object, method, len)
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

/// A portal call to a service that may wait: the same as [`call`], except that the service runs
/// in an async store on the caller's fiber, so a wait inside it suspends the calling thread
/// (which then costs no CPU) instead of being refused.
pub(crate) async fn call_waiting(
    kernel: &Arc<Kernel>,
    caller: &StoreCtx,
    handle: u32,
    method: u32,
    len: u32,
) -> Result<u32, HostError> {
    let (target, object) = service_of(caller, handle)?;
    if !target.component.manifest.services_wait {
        return call_synchronously(kernel, caller, handle, &target, object, method, len);
    }
    let mut thread = acquire(kernel, caller, handle, &target)?;
    let traced = trace_start(kernel);
    let result = async {
        let region = enter(caller, &target, &mut thread, len)?;
        for object in released(&target) {
            let outcome = thread.release.call_async(&mut thread.store, object).await;
            outcome.map_err(|trap| fault(kernel, &target, &thread.store.data().domain.clone(), &trap))?;
        }
        let args = (object, method, region.buffer, len, region.buffer_len);
        let outcome = thread.dispatch.call_async(&mut thread.store, args).await;
        leave(kernel, caller, &target, &mut thread, region, outcome)
    }
    .await;
    finish(kernel, &target, thread, method, traced, result)
}

/// The instance and object of the service behind `handle`. What a call needs is read under the
/// table's lock; cloning the service itself would cost two more atomic operations per call.
fn service_of(caller: &StoreCtx, handle: u32) -> Result<(Arc<ComponentInstance>, u32), HostError> {
    let table = caller.domain.handles();
    let service = table.portal(handle)?;
    Ok((service.live_owner().ok_or(HostError::ServiceDead)?, service.object))
}

/// The fast path: the service runs synchronously in a service-thread store.
fn call_synchronously(
    kernel: &Arc<Kernel>,
    caller: &StoreCtx,
    handle: u32,
    target: &Arc<ComponentInstance>,
    object: u32,
    method: u32,
    len: u32,
) -> Result<u32, HostError> {
    let mut thread = acquire(kernel, caller, handle, target)?;
    let traced = trace_start(kernel);
    let result = run(kernel, caller, object, target, &mut thread, method, len);
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
    thread: ServiceThread,
    method: u32,
    traced: Option<u64>,
    result: Result<u32, HostError>,
) -> Result<u32, HostError> {
    if let Some(start) = traced {
        kernel.scheduler.trace.called(thread.store.data().domain.id, method, start);
    }
    match result {
        Err(HostError::ServiceFault) => drop(thread),
        _ => release(target, thread),
    }
    result
}

/// Copies the request into the service thread's buffer; returns the thread's region.
fn enter(
    caller: &StoreCtx,
    target: &Arc<ComponentInstance>,
    thread: &mut ServiceThread,
    len: u32,
) -> Result<Region, HostError> {
    let region = thread.store.data().region;
    transfer((&caller.instance, &caller.domain, &caller.region), (target, &thread.store.data().domain, &region), len)?;
    Ok(region)
}

/// Objects whose last portal was dropped since the instance last served, to release first.
fn released(target: &ComponentInstance) -> Vec<u32> {
    if target.has_released.load(Ordering::Acquire) && target.has_released.swap(false, Ordering::AcqRel) {
        std::mem::take(&mut *crate::lock(&target.released))
    } else {
        Vec::new()
    }
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
    thread.store.data_mut().calls_served += 1;
    let reply_len = outcome.map_err(|trap| fault(kernel, target, &thread.store.data().domain.clone(), &trap))?;
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

fn run(
    kernel: &Arc<Kernel>,
    caller: &StoreCtx,
    object: u32,
    target: &Arc<ComponentInstance>,
    thread: &mut ServiceThread,
    method: u32,
    len: u32,
) -> Result<u32, HostError> {
    let region = enter(caller, target, thread, len)?;
    for object in released(target) {
        thread
            .release
            .call(&mut thread.store, object)
            .map_err(|trap| fault(kernel, target, &thread.store.data().domain.clone(), &trap))?;
    }
    let args = (object, method, region.buffer, len, region.buffer_len);
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

/// An idle service thread of `target`, a new one within the limit, or `ServiceBusy`.
fn acquire(
    kernel: &Arc<Kernel>,
    caller: &StoreCtx,
    handle: u32,
    target: &Arc<ComponentInstance>,
) -> Result<ServiceThread, HostError> {
    if let Some(thread) = crate::lock(&target.idle).pop() {
        return Ok(thread);
    }
    if target.is_single() {
        return Err(HostError::ServiceBusy);
    }
    // The slow path: look the service up again for its domain.
    let (_, domain) = caller.domain.handles().portal(handle)?.owner().ok_or(HostError::ServiceDead)?;
    new_thread(kernel, target, &domain)
}

/// A new service thread for `target` within its domain's limit, or `ServiceBusy`.
fn new_thread(
    kernel: &Arc<Kernel>,
    target: &Arc<ComponentInstance>,
    domain: &Arc<Domain>,
) -> Result<ServiceThread, HostError> {
    if target.service_threads.fetch_add(1, Ordering::AcqRel) >= domain.limits.service_threads {
        target.service_threads.fetch_sub(1, Ordering::AcqRel);
        return Err(HostError::ServiceBusy);
    }
    kernel.new_service_thread(target, domain, &|bytes| kernel.charge(domain, bytes)).inspect_err(|_| {
        target.service_threads.fetch_sub(1, Ordering::AcqRel);
    })
}

pub(crate) fn release(target: &ComponentInstance, thread: ServiceThread) {
    if thread.store.data().domain.is_terminated() {
        return;
    }
    crate::lock(&target.idle).push(thread);
    if target.has_waiters.load(Ordering::Acquire) {
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
    // Raise the flag before looking at the pool: a `release` that the look misses then sees the
    // flag (the pool's lock orders the two) and wakes us once we have queued (it needs the
    // waiters' lock, which we hold until then).
    target.has_waiters.store(true, Ordering::Release);
    let free = !crate::lock(&target.idle).is_empty()
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
) -> std::task::Poll<Result<ServiceThread, HostError>> {
    if domain.is_terminated() {
        return std::task::Poll::Ready(Err(HostError::ServiceDead));
    }
    let mut waiters = crate::lock(&instance.waiters);
    // As in `ready_or_wait`: the flag goes up before the pool is looked at.
    instance.has_waiters.store(true, Ordering::Release);
    if let Some(thread) = crate::lock(&instance.idle).pop() {
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
    if target.component.manifest.services_wait {
        // Its store is async and the kernel's call is not: such a service cannot take it.
        return Err(HostError::NotPermitted);
    }
    let mut thread = match crate::lock(&target.idle).pop() {
        Some(thread) => thread,
        None if target.is_single() => return Err(HostError::ServiceBusy),
        None => new_thread(kernel, &target, &domain)?,
    };
    let region = thread.store.data().region;
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
