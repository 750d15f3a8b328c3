//! DomainZero, the trusted kernel of Domos.
//!
//! It embeds wasmtime and offers what cannot be built outside it: domains (isolation and
//! resource control), threads and their scheduling, portals (synchronous RPC with copied
//! parameters and capabilities), memory objects and the other kernel objects, the name service,
//! and the host calls through which components reach them. It runs only what `domos-loader`
//! accepted; everything else is a WebAssembly component running in a domain.
//!
//! The modules are layers, each importing only those listed before it:
//!
//! * [`console`], [`trace`]: where console lines and the thread activity trace go;
//! * [`object`]: kernel objects that know nothing of domains: quotas, guest memory (the
//!   kernel's `unsafe` blocks are in `object::guest_memory`, the two system calls of TAP
//!   network cards in `object::tap`, and the three of the FUSE device in `object::fuse`), memory objects, atomic variables, interrupt sources,
//!   disks, network cards, handle tables;
//! * [`sched`]: threads and two-level scheduling, with scheduler components behind a trait;
//! * [`domain`]: domains, component instances and their stores, services, handles, names, the
//!   kernel's tables, termination;
//! * [`portal`]: portal calls between domains and memory faults;
//! * [`runtime`]: creating domains and threads, child domains, schedulers, booting a system;
//! * `host`: the host calls, registered from the table of `domos_abi::for_each_host_call!`.

pub mod console;
pub mod domain;
mod host;
pub mod object;
pub mod portal;
pub mod runtime;
pub mod sched;
pub mod trace;

pub use console::Console;
pub use domain::Domain;
pub use domain::system::{Kernel, KernelOptions};
pub use runtime::{BootOutcome, DomainReport};

/// Locks a mutex, ignoring poisoning: kernel state stays consistent across a panicking holder
/// because every critical section either completes or changes nothing.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Builds and boots small systems of components written in WAT, for the layers' unit tests.
#[cfg(test)]
mod test_system;
