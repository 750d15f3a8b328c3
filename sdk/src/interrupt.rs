//! Interrupts: a kernel event source whose events this component handles in a dedicated thread
//! of its domain.
//!
//! The handler is the function named `interrupt:` in [`component!`](crate::component), called
//! as `handler(source, events)` with the number of events since its last run. The kernel runs it
//! only if the component's manifest lists `domos_interrupt` under `bounded`, so the verifier has
//! proved it finishes in bounded time: straight-line code and counted loops, no blocking host
//! call. It typically records what happened and wakes a driver thread with
//! `domos_sys::atomic_set_and_unblock`.

use core::time::Duration;

use crate::portal::{CallError, check};

/// Attaches a timer that fires every `period` (at least 1 ms, the kernel's tick); returns the
/// source number the handler is called with.
///
/// # Errors
/// `NotPermitted` when the component has no verified bounded `domos_interrupt`;
/// `InvalidArgument` for a period under 1 ms; `QuotaExceeded` past 16 sources in a domain.
pub fn attach_timer(period: Duration) -> Result<u32, CallError> {
    let ns = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX);
    check(domos_sys::timer_attach(ns)).map(|source| source as u32)
}

/// Closes interrupt source `source`: its handler thread ends after the events already counted.
///
/// # Errors
/// `InvalidArgument` for a source this domain never attached.
pub fn detach(source: u32) -> Result<(), CallError> {
    check(domos_sys::interrupt_detach(source)).map(|_| ())
}
