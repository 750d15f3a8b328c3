//! The signals that end a serving `domos` — SIGINT (Ctrl-C), SIGTERM and SIGHUP — blocked in
//! every thread and taken by the main thread with `sigtimedwait`, so that it stops the system in
//! order (drivers answer what they hold, children such as passt are ended, the summary is
//! printed) instead of dying wherever the signal lands.

/// The stop signals, blocked.
pub struct StopSignals(libc::sigset_t);

impl StopSignals {
    /// Blocks the stop signals in this thread and in every thread it starts from now on: call it
    /// before the kernel starts its threads. (Programs it runs get an empty mask: std resets it.)
    pub fn block() -> StopSignals {
        // SAFETY: `sigset_t` is a plain bit set for which all zeros is a valid value; `sigemptyset`
        // and `sigaddset` write it through a pointer to this local, valid across each call, and
        // `pthread_sigmask` reads it while it lives; the old mask is not asked for (null).
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::sigaddset(&mut set, signal);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            StopSignals(set)
        }
    }

    /// A stop signal pending for this process, taken, if there is one.
    pub fn take(&self) -> Option<i32> {
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: the set and `zero` are valid for the call; the signal information is not asked for.
        let signal = unsafe { libc::sigtimedwait(&self.0, std::ptr::null_mut(), &zero) };
        (signal > 0).then_some(signal)
    }
}
