//! The kernel clock.

/// Nanoseconds of the kernel's monotonic clock.
pub fn now_ns() -> u64 {
    domos_sys::clock_ns()
}
