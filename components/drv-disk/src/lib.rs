//! `drv-disk`: the driver of an emulated disk (`[[disk]]`, opened by name from the argument
//! `disk=NAME`; its domain needs the `devices` grant). It serves `BlockIO` under the name
//! `BlockIO`: each request is handed to the kernel's disk with the caller's memory object (the
//! data is never copied through the driver) and remembered with the caller's atomic variable.
//! When requests finish, the disk's completion interrupt runs `on_completion` — a handler the
//! verifier proved bounded — which collects them and wakes each caller.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use domos_abi::{DiskCompletion, DiskOperation};
use domos_interfaces::block_io::{BlockIO, DONE, FAILED};
use domos_sdk::sync::AtomicVariable;
use domos_sdk::{CallError, HostError, Memory, ReadOnlyMemory, names};

domos_sdk::component! { init: init, interrupt: on_completion }

/// Requests in flight at most (the kernel's queue holds as many).
const SLOTS: usize = 256;

/// The disk's handle.
static DISK: AtomicU32 = AtomicU32::new(0);
/// Per slot (request id modulo `SLOTS`): the request's state, `id << 2 | tag` with tag
/// `FILED` (its caller waits) or `FINISHED_OK` / `FINISHED_FAILED` (it completed before it was
/// filed); 0 when free. Submission and the interrupt handler race for a slot by compare-and-swap,
/// so a completion is never lost whichever comes first.
static STATES: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// Per slot: the handle of the variable the request's caller waits on.
static WAITERS: [AtomicU32; SLOTS] = [const { AtomicU32::new(0) }; SLOTS];

const FILED: u64 = 1;
const FINISHED_OK: u64 = 2;
const FINISHED_FAILED: u64 = 3;

/// Wakes the caller waiting on `waiter` with the outcome and drops the driver's handle to it.
fn wake(waiter: u32, failed: bool) {
    domos_sys::atomic_set_and_unblock(waiter, if failed { FAILED } else { DONE }, 1);
    domos_sys::handle_drop(waiter);
}

fn init() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let name = args.split_whitespace().find_map(|w| w.strip_prefix("disk=")).unwrap_or("disk0");
    let disk = u32::try_from(domos_sys::disk_open(name)).map_err(|_| CallError::Host(HostError::NotFound))?;
    DISK.store(disk, Ordering::Release);
    if domos_sys::disk_attach_interrupt(disk) < 0 {
        return Err(CallError::Host(HostError::NotPermitted));
    }
    names::register("BlockIO", &Driver.into_portal())
}

/// Submits a request and files its waiter; fails the waiter at once if the disk refuses.
fn submit(
    operation: DiskOperation,
    sector: u64,
    count: u32,
    memory: u32,
    done: AtomicVariable,
) -> Result<(), CallError> {
    let id = domos_sys::disk_submit(DISK.load(Ordering::Acquire), operation, sector, count, memory, 0);
    let Ok(id) = u64::try_from(id) else {
        done.set_and_unblock(FAILED, 1)?;
        return Err(CallError::Host(HostError::from_code(id).unwrap_or(HostError::BadRequest)));
    };
    let slot = id as usize % SLOTS;
    let waiter = done.into_handle();
    WAITERS[slot].store(waiter, Ordering::Release);
    if let Err(finished) = STATES[slot].compare_exchange(0, id << 2 | FILED, Ordering::AcqRel, Ordering::Acquire) {
        // It completed before it was filed: the handler left the outcome here.
        STATES[slot].store(0, Ordering::Release);
        wake(waiter, finished & 3 == FINISHED_FAILED);
    }
    Ok(())
}

/// The completion interrupt: collects up to `SLOTS` finished requests and wakes their callers.
/// Straight-line code and counted loops only (`bounded` in the manifest).
fn on_completion(_source: u32, _events: u32) {
    let disk = DISK.load(Ordering::Acquire);
    for _ in 0..SLOTS {
        let Some(DiskCompletion { id, failed }) = domos_sys::disk_complete(disk) else { break };
        let slot = id as usize % SLOTS;
        if STATES[slot].compare_exchange(id << 2 | FILED, 0, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            wake(WAITERS[slot].swap(0, Ordering::AcqRel), failed);
        } else {
            let outcome = id << 2 | if failed { FINISHED_FAILED } else { FINISHED_OK };
            // Filed between the two exchanges: the caller waits already, wake it now.
            if STATES[slot].compare_exchange(0, outcome, Ordering::AcqRel, Ordering::Acquire).is_err()
                && STATES[slot].compare_exchange(id << 2 | FILED, 0, Ordering::AcqRel, Ordering::Acquire).is_ok()
            {
                wake(WAITERS[slot].swap(0, Ordering::AcqRel), failed);
            }
        }
    }
}

struct Driver;

impl BlockIO for Driver {
    fn sectors(&self) -> Result<u64, CallError> {
        let sectors = domos_sys::disk_info(DISK.load(Ordering::Acquire));
        u64::try_from(sectors).map_err(|_| CallError::Host(HostError::BadRequest))
    }

    fn read(&self, sector: u64, count: u32, memory: Memory, done: AtomicVariable) -> Result<(), CallError> {
        submit(DiskOperation::Read, sector, count, memory.handle(), done)
    }

    fn write(&self, sector: u64, count: u32, memory: ReadOnlyMemory, done: AtomicVariable) -> Result<(), CallError> {
        submit(DiskOperation::Write, sector, count, memory.handle(), done)
    }

    fn flush(&self, done: AtomicVariable) -> Result<(), CallError> {
        submit(DiskOperation::Flush, 0, 0, 0, done)
    }
}
