//! Threads of this domain. They share the component's heap; a portal call blocks only the
//! calling thread.

use alloc::boxed::Box;

use crate::portal::{CallError, check};

/// A started thread, to wait for.
#[derive(Debug)]
pub struct JoinHandle {
    id: u32,
}

/// Starts a thread of this domain running `body`; its return value is the exit code.
///
/// # Errors
/// When the domain may not have more threads or its memory quota cannot hold the stack.
pub fn spawn(body: impl FnOnce() -> i32 + Send + 'static) -> Result<JoinHandle, CallError> {
    let parked = crate::rt::park_thread_body(Box::new(body));
    match check(domos_sys::thread_spawn(parked)) {
        Ok(id) => Ok(JoinHandle { id: id as u32 }),
        Err(e) => {
            crate::rt::unpark_thread_body(parked);
            Err(e)
        }
    }
}

impl JoinHandle {
    /// Waits for the thread to end and returns its exit code (a trapped thread ends its domain).
    ///
    /// # Errors
    /// When called from a service call, which may not block.
    pub fn join(self) -> Result<i32, CallError> {
        check(domos_sys::thread_join(self.id)).map(|code| code as u32 as i32)
    }

    /// Sets the thread's priority, which the domain's local scheduler uses if it is `priority`
    /// (higher runs first; 0 by default).
    ///
    /// # Errors
    /// `InvalidArgument` when the thread has ended.
    pub fn set_priority(&self, priority: i32) -> Result<(), CallError> {
        check(domos_sys::thread_priority(self.id, priority)).map(|_| ())
    }

    /// The kernel's thread id.
    pub fn id(&self) -> u32 {
        self.id
    }
}

/// Lets other threads run.
pub fn yield_now() {
    domos_sys::yield_now();
}

/// Suspends this thread for at least `duration` (the kernel's timer has a 1 ms resolution);
/// the CPU runs other threads meanwhile.
///
/// # Errors
/// `NotPermitted` in a service call, which may not block.
pub fn sleep(duration: core::time::Duration) -> Result<(), CallError> {
    let ns = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
    check(domos_sys::thread_sleep(ns)).map(|_| ())
}

/// Which scheduler [`replace_scheduler`] replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedulerLevel {
    /// This domain's local scheduler, which picks among its threads.
    Own = 0,
    /// The global scheduler, which picks domains.
    Global = 1,
}

/// Replaces a scheduler at run time (JX 2.8) by a built-in policy (`"round-robin"`,
/// `"priority"`, `"fifo"`; `"stride"` for the global one) or by the scheduler component called
/// `name`. A local scheduler component is interrupted every `slice_ms` within the domain's slice
/// when `slice_ms` is not 0. The domain needs the `scheduling` grant; the kernel's console says
/// why a replacement was refused.
///
/// # Errors
/// `InvalidArgument` when the scheduler is unknown or unfit, or the domain's components require
/// another policy.
pub fn replace_scheduler(level: SchedulerLevel, name: &str, slice_ms: u32) -> Result<(), CallError> {
    check(domos_sys::scheduler_replace(level as u32, slice_ms, name)).map(|_| ())
}
