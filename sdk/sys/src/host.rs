//! The `domos` host module: one safe wrapper per kernel host call.
//!
//! Results follow the ABI of `domos-abi`: a negative value is a `HostError` code.

/// Declares the raw imports, one per entry of the kernel's host-call table.
macro_rules! raw_imports {
    ($($family:ident: $name:ident($($param:ident: $ty:ident),*) $(-> $result:ident)?, $grant:ident, [$($flag:ident)*], $summary:literal;)*) => {
        /// The raw host calls, generated from `domos_abi::for_each_host_call!`: guest addresses
        /// are passed as `u32`.
        #[cfg(any(target_arch = "wasm32", feature = "stand-in-kernel"))]
        mod raw {
            // The literal is `domos_abi::HOST_MODULE`, which an attribute cannot name.
            #[link(wasm_import_module = "domos")]
            unsafe extern "C" {
                $(#[doc = $summary] pub(crate) fn $name($($param: $ty),*) $(-> $result)?;)*
            }
        }
        /// On the host, where this crate's unit tests run, there is no kernel: a host call
        /// panics (unless the program defines the calls: feature `stand-in-kernel`).
        #[cfg(not(any(target_arch = "wasm32", feature = "stand-in-kernel")))]
        #[allow(clippy::missing_safety_doc, reason = "stand-ins with the imports' signatures")]
        mod raw {
            $(pub(crate) unsafe fn $name($(_: $ty),*) $(-> $result)? {
                unreachable!(concat!("host call ", stringify!($name), " outside Domos"))
            })*
        }
    };
}
domos_abi::for_each_host_call!(raw_imports);

/// Writes bytes to the system console, prefixed by the kernel with the domain's name.
pub fn console_write(bytes: &[u8]) {
    // SAFETY: the kernel only reads `bytes`, bounds-checked against this component's memory.
    unsafe { raw::console_write(bytes.as_ptr() as u32, bytes.len() as u32) }
}

/// Nanoseconds of the kernel's monotonic clock.
pub fn clock_ns() -> u64 {
    // SAFETY: no arguments; the host call has no memory effects.
    unsafe { raw::clock_ns() as u64 }
}

/// Gives up the CPU to the scheduler (a hint in a service call, which never blocks).
pub fn yield_now() {
    // SAFETY: no arguments.
    unsafe { raw::yield_now() }
}

/// Asks the kernel for `pages` more 64 KiB pages of heap, charged to the domain's quota.
/// Returns the address of the new region.
pub fn heap_grow(pages: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::heap_grow(pages) }
}

pub(crate) fn message_buffer_raw() -> i64 {
    // SAFETY: no arguments.
    unsafe { raw::message_buffer() }
}

/// Calls `method` on the portal `handle` with the request of `len` bytes in this thread's
/// message buffer; the reply replaces it. Returns the reply length or an error code;
/// `ServiceBusy` means the caller should `portal_wait` and try again.
///
/// # Safety
/// The kernel writes the reply into this thread's message buffer: no reference to its bytes
/// may be live (no [`crate::LentBuffer`] of this thread exists) during the call.
/// [`crate::MessageBuffer::portal_call`] is the safe way.
pub(crate) unsafe fn portal_call(handle: u32, method: u32, len: u32) -> i64 {
    // SAFETY: the kernel reads and writes only this thread's message buffer, bounds-checked,
    // which the caller promises nothing refers to.
    unsafe { raw::portal_call(handle, method, len) }
}

/// A portal call of a method that can be started again, run at once even by a service that may
/// wait; `MustWait` (its run abandoned) if it would have to wait.
///
/// # Safety
/// As for [`portal_call`]: no reference to this thread's message buffer may be live.
pub(crate) unsafe fn portal_call_restartable(handle: u32, method: u32, len: u32) -> i64 {
    // SAFETY: as in `portal_call`.
    unsafe { raw::portal_call_restartable(handle, method, len) }
}

/// Blocks the calling thread until the service behind `handle` can take a call.
pub fn portal_wait(handle: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::portal_wait(handle) }
}

/// Drops one of this domain's handles (a portal, a domain or a memory object).
pub fn handle_drop(handle: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::handle_drop(handle) }
}

/// A second handle to the object behind `handle`.
pub fn handle_dup(handle: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::handle_dup(handle) }
}

/// The object id, if `handle` names a service of this very component instance.
pub fn portal_local(handle: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::portal_local(handle) }
}

/// Makes the local object `object` a service implementing `interface`; returns its portal.
pub fn service_create(object: u32, interface: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::service_create(object, interface) }
}

/// Registers the portal `handle` under `name` (translated by the configuration's wiring).
pub fn name_register(name: &str, handle: u32) -> i64 {
    // SAFETY: the kernel only reads `name`, bounds-checked.
    unsafe { raw::name_register(name.as_ptr() as u32, name.len() as u32, handle) }
}

/// Looks up `name` (translated by the configuration's wiring), checking the interface.
pub fn name_lookup(name: &str, interface: u32) -> i64 {
    // SAFETY: the kernel only reads `name`, bounds-checked.
    unsafe { raw::name_lookup(name.as_ptr() as u32, name.len() as u32, interface) }
}

/// Starts a thread of this domain that runs `domos_thread_entry(arg)`.
pub fn thread_spawn(arg: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::thread_spawn(arg) }
}

/// Waits for a thread of this domain to end; returns its exit code.
pub fn thread_join(thread: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::thread_join(thread) }
}

/// Suspends the calling thread for at least `ns` nanoseconds (the kernel timer's 1 ms
/// resolution); `NotPermitted` in a service call.
pub fn thread_sleep(ns: u64) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::thread_sleep(ns) }
}

/// `atomic_create`: a new atomic variable holding `value`; its handle.
pub fn atomic_create(value: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::atomic_create(value) }
}

/// `atomic_get`.
pub fn atomic_get(handle: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::atomic_get(handle) }
}

/// `atomic_set`.
pub fn atomic_set(handle: u32, value: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::atomic_set(handle, value) }
}

/// `atomic_set_and_unblock`: sets the value and wakes up to `count` blocked threads.
pub fn atomic_set_and_unblock(handle: u32, value: u32, count: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::atomic_set_and_unblock(handle, value, count) }
}

/// `atomic_block_if_equal`: 1 when woken, 0 when the value differed; `NotPermitted` in a service
/// call, which may not block.
pub fn atomic_block_if_equal(handle: u32, expected: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::atomic_block_if_equal(handle, expected) }
}

/// Opens the emulated disk `name` (grant `devices`); returns its handle.
pub fn disk_open(name: &str) -> i64 {
    // SAFETY: the kernel reads `name.len()` bytes at `name`, bounds-checked.
    unsafe { raw::disk_open(name.as_ptr() as u32, name.len() as u32) }
}

/// The disk's size in 512-byte sectors.
pub fn disk_info(handle: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::disk_info(handle) }
}

/// Queues `operation` on `count` sectors from `sector` and memory object `memory` from `offset`;
/// returns its id.
pub fn disk_submit(
    handle: u32,
    operation: domos_abi::DiskOperation,
    sector: u64,
    count: u32,
    memory: u32,
    offset: u64,
) -> i64 {
    // SAFETY: no pointers are passed; the memory is a handle the kernel checks.
    unsafe { raw::disk_submit(handle, operation as u32, sector, count, memory, offset) }
}

/// The next finished request, or `None` when none is (or the handle is no disk of this domain).
pub fn disk_complete(handle: u32) -> Option<domos_abi::DiskCompletion> {
    // SAFETY: no pointers are passed.
    domos_abi::DiskCompletion::decode(unsafe { raw::disk_complete(handle) })
}

/// Makes the disk's completions an interrupt handled by this component's `domos_interrupt`.
pub fn disk_attach_interrupt(handle: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::disk_attach_interrupt(handle) }
}

/// Opens the emulated network card `name` (grant `devices`); returns its handle.
pub fn nic_open(name: &str) -> i64 {
    // SAFETY: the kernel reads `name.len()` bytes at `name`, bounds-checked.
    unsafe { raw::nic_open(name.as_ptr() as u32, name.len() as u32) }
}

/// A card's MTU (`what` 0), MAC in the low 48 bits (1), frames received (2), dropped (3), sent (4).
pub fn nic_info(handle: u32, what: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::nic_info(handle, what) }
}

/// Attaches the receive ring `rx` and transmit ring `tx` (memory objects) cut into slots of
/// `slot` bytes; returns the slots per ring.
pub fn nic_attach(handle: u32, rx: u32, tx: u32, slot: u32) -> i64 {
    // SAFETY: no pointers are passed; the rings are handles the kernel checks.
    unsafe { raw::nic_attach(handle, rx, tx, slot) }
}

/// Sends the frames of `count` transmit slots from slot `first` on; returns how many.
pub fn nic_transmit(handle: u32, first: u32, count: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::nic_transmit(handle, first, count) }
}

/// How many receive slots hold frames, from the oldest unreleased one on.
pub fn nic_ready(handle: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::nic_ready(handle) }
}

/// Gives the `count` oldest receive slots back to the card.
pub fn nic_release(handle: u32, count: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::nic_release(handle, count) }
}

/// Makes the card's received frames an interrupt handled by this component's `domos_interrupt`.
pub fn nic_attach_interrupt(handle: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::nic_attach_interrupt(handle) }
}

/// Makes the card's received frames set atomic variable `atomic` to `value` and wake one of its
/// waiters, with no handler thread; returns the interrupt source's number.
pub fn nic_notify(handle: u32, atomic: u32, value: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::nic_notify(handle, atomic, value) }
}

/// `portal_call` for a service that may wait (the kernel answered `MustWait`): the thread
/// suspends while the service waits.
///
/// # Safety
/// As for [`portal_call`]: no reference to this thread's message buffer may be live.
pub(crate) unsafe fn portal_call_waiting(handle: u32, method: u32, len: u32) -> i64 {
    // SAFETY: as in `portal_call`.
    unsafe { raw::portal_call_waiting(handle, method, len) }
}

/// Sets the priority of a thread of this domain for the `priority` local scheduler.
pub fn thread_priority(thread: u32, priority: i32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::thread_priority(thread, priority) }
}

/// Replaces this domain's local scheduler (`target` 0) or the global one (1) by the built-in
/// policy or the scheduler component called `name`, a local one interrupted every `slice_ms`
/// when not 0 (grant `scheduling`).
pub fn scheduler_replace(target: u32, slice_ms: u32, name: &str) -> i64 {
    // SAFETY: the kernel reads `name.len()` bytes at `name`, which the borrow keeps alive.
    unsafe { raw::scheduler_replace(target, slice_ms, name.as_ptr() as u32, name.len() as u32) }
}

/// Attaches a periodic timer interrupt handled by this component's `domos_interrupt` export in
/// a new thread; returns the source number.
pub fn timer_attach(period_ns: u64) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::timer_attach(period_ns) }
}

/// Closes interrupt source `source`; its handler thread ends.
pub fn interrupt_detach(source: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::interrupt_detach(source) }
}

/// Copies this component's configured arguments into `buf`; returns their full length.
pub fn args(buf: &mut [u8]) -> i64 {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`, bounds-checked.
    unsafe { raw::args(buf.as_mut_ptr() as u32, buf.len() as u32) }
}

/// Creates a memory object of `len` zeroed bytes, charged to this domain; returns its handle.
pub fn memory_create(len: u64) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::memory_create(len) }
}

/// `(length << 2) | (device << 1) | writable` of a memory object.
pub fn memory_info(handle: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::memory_info(handle) }
}

/// Copies `out.len()` bytes at `offset` of a memory object into `out`.
pub fn memory_read(handle: u32, offset: u64, out: &mut [u8]) -> i64 {
    // SAFETY: the kernel writes at most `out.len()` bytes into `out`, bounds-checked.
    unsafe { raw::memory_read(handle, offset, out.as_mut_ptr() as u32, out.len() as u32) }
}

/// Copies `bytes` into a memory object at `offset`.
pub fn memory_write(handle: u32, offset: u64, bytes: &[u8]) -> i64 {
    // SAFETY: the kernel only reads `bytes`, bounds-checked.
    unsafe { raw::memory_write(handle, offset, bytes.as_ptr() as u32, bytes.len() as u32) }
}

/// The `u32` at `offset` of a memory object.
pub fn memory_get_u32(handle: u32, offset: u64) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::memory_get_u32(handle, offset) }
}

/// Writes the `u32` at `offset` of a memory object.
pub fn memory_set_u32(handle: u32, offset: u64, value: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::memory_set_u32(handle, offset, value) }
}

/// Copies `len` bytes between memory objects.
pub fn memory_copy(dst: u32, dst_offset: u64, src: u32, src_offset: u64, len: u64) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::memory_copy(dst, dst_offset, src, src_offset, len) }
}

/// Copies the pieces listed in `pieces` (`count` of them, `domos_abi::GatherPiece` encoded)
/// one after another into `dst` at `dst_offset`; how many it copied.
pub fn memory_gather(dst: u32, dst_offset: u64, pieces: &[u8], count: u32) -> i64 {
    // SAFETY: the kernel only reads `pieces`, bounds-checked.
    unsafe { raw::memory_gather(dst, dst_offset, pieces.as_ptr() as u32, count) }
}

/// A view of part of a memory object.
pub fn memory_subrange(handle: u32, offset: u64, len: u64) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::memory_subrange(handle, offset, len) }
}

/// A read-only view of a memory object.
pub fn memory_read_only(handle: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::memory_read_only(handle) }
}

/// Revokes every handle to a memory object; returns a fresh handle to the same range.
pub fn memory_revoke(handle: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::memory_revoke(handle) }
}

/// Lends `buffer`, part of this component's heap, as a writable memory object while `body`
/// runs with its handle, and ends the loan before returning: from then on every view of it is
/// revoked, and a copy another domain was making into it has finished. `buffer` is borrowed
/// for the whole loan, so no code of this component reads or writes it meanwhile. Returns
/// `body`'s result, or the error code of the loan. The handle is dropped at the end.
///
/// # Panics
/// Traps when the loan cannot be ended (`body` dropped the handle): returning would let others
/// write into `buffer` while it is borrowed again.
pub fn memory_lend<R>(buffer: &mut [u8], body: impl FnOnce(u32) -> R) -> Result<R, i64> {
    // SAFETY: the kernel makes a view of `[buffer, buffer + len)`, bounds-checked against this
    // component's heap, that other domains may write while the loan lasts; `buffer` stays
    // mutably borrowed by this function until the loan has ended (below), so no reference to
    // its bytes is used meanwhile.
    let handle = unsafe { raw::memory_lend(buffer.as_mut_ptr() as u32, buffer.len() as u32) };
    if handle < 0 {
        return Err(handle);
    }
    let result = body(handle as u32);
    // SAFETY: no pointers are passed.
    if unsafe { raw::memory_end_lend(handle as u32) } < 0 {
        panic!("a loan of heap could not be ended");
    }
    handle_drop(handle as u32);
    Ok(result)
}

/// The memory of the emulated device `name` (needs the `devices` grant).
pub fn memory_device(name: &str) -> i64 {
    // SAFETY: the kernel only reads `name`, bounds-checked.
    unsafe { raw::memory_device(name.as_ptr() as u32, name.len() as u32) }
}

/// Creates a child domain from a TOML description, its memory faults going to the portal
/// `fault_handler` (0: none); returns a domain handle (privileged).
pub fn domain_create(spec: &str, fault_handler: u32) -> i64 {
    // SAFETY: the kernel only reads `spec`, bounds-checked.
    unsafe { raw::domain_create(spec.as_ptr() as u32, spec.len() as u32, fault_handler) }
}

/// Hands the portal `portal` down to the child `child` under `name` (privileged).
pub fn domain_provide(child: u32, name: &str, portal: u32) -> i64 {
    // SAFETY: the kernel only reads `name`, bounds-checked.
    unsafe { raw::domain_provide(child, name.as_ptr() as u32, name.len() as u32, portal) }
}

/// Starts a child created by `domain_create` (privileged).
pub fn domain_start(child: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::domain_start(child) }
}

/// Waits until the domain has no threads left (0) or was terminated (1) (privileged).
pub fn domain_wait(handle: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::domain_wait(handle) }
}

/// Terminates the domain behind `handle` (privileged).
pub fn domain_terminate(handle: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::domain_terminate(handle) }
}

/// Writes a one-line TOML summary of the domain into `buf`; returns its full length (privileged).
pub fn domain_inspect(handle: u32, buf: &mut [u8]) -> i64 {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`, bounds-checked.
    unsafe { raw::domain_inspect(handle, buf.as_mut_ptr() as u32, buf.len() as u32) }
}

/// Opens the mounted FUSE connection `name` (grant `devices`); returns its handle.
pub fn fuse_open(name: &str) -> i64 {
    // SAFETY: the kernel reads `name.len()` bytes at `name`, bounds-checked.
    unsafe { raw::fuse_open(name.as_ptr() as u32, name.len() as u32) }
}

/// Attaches the receive ring `rx` (a memory object) cut into slots of `slot` bytes; returns the
/// number of slots.
pub fn fuse_attach(handle: u32, rx: u32, slot: u32) -> i64 {
    // SAFETY: no pointers are passed; the ring is a handle the kernel checks.
    unsafe { raw::fuse_attach(handle, rx, slot) }
}

/// How many slots hold requests, plus `domos_abi::FUSE_STOPPED` once no more are read.
pub fn fuse_ready(handle: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::fuse_ready(handle) }
}

/// Gives the `count` oldest receive slots back to the connection.
pub fn fuse_release(handle: u32, count: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::fuse_release(handle, count) }
}

/// Writes `len` bytes of the memory object `memory` from `offset` as one reply.
pub fn fuse_reply(handle: u32, memory: u32, offset: u64, len: u32) -> i64 {
    // SAFETY: no pointers are passed; the memory is a handle the kernel checks.
    unsafe { raw::fuse_reply(handle, memory, offset, len) }
}

/// Makes the connection's arriving requests an interrupt handled by this component's
/// `domos_interrupt`.
pub fn fuse_attach_interrupt(handle: u32) -> i64 {
    // SAFETY: no pointers are passed.
    unsafe { raw::fuse_attach_interrupt(handle) }
}
