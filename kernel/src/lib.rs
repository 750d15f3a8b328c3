//! DomainZero, the trusted kernel of Domos.
//!
//! It embeds wasmtime and offers what cannot be built outside it: domains (isolation and
//! resource control), threads, portals (synchronous RPC with copied parameters and
//! capabilities), the name service, the component loader and verifier, and the built-in
//! scheduler. Everything else is a WebAssembly component running in a domain.
//!
//! Every `unsafe` block of the kernel is in `guest_memory`.

pub mod atomic;
pub mod console;
pub mod disk;
pub mod domain;
mod guest_memory;
pub mod handle;
mod host;
pub mod interrupt;
pub mod kernel;
pub mod memory;
pub mod names;
pub mod portal;
pub mod sched;
pub mod scheduler_component;
pub mod trace;
pub mod translator;

pub use console::Console;
pub use domain::Domain;
pub use kernel::{BootOutcome, DomainReport, Kernel, KernelOptions};

/// Locks a mutex, ignoring poisoning: kernel state stays consistent across a panicking holder
/// because every critical section either completes or changes nothing.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
