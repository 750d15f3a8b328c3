//! DomainZero, the trusted kernel of Domos.
//!
//! It embeds wasmtime and offers what cannot be built outside it: domains (isolation and
//! resource control), threads, portals (synchronous RPC with copied parameters and
//! capabilities), the name service, the component loader and verifier, and the built-in
//! scheduler. Everything else is a WebAssembly component running in a domain.
//!
//! Every `unsafe` block of the kernel is in `guest_memory`.

pub mod atomic;
pub mod bounded;
pub mod component;
pub mod config;
pub mod console;
pub mod disk;
pub mod domain;
mod guest_memory;
pub mod handle;
mod host;
pub mod interrupt;
pub mod kernel;
pub mod manifest;
pub mod memory;
pub mod names;
pub mod portal;
pub mod sched;
pub mod scheduler_component;
pub mod stack_guard;
pub mod trace;
pub mod translator;
pub mod verifier;

pub use component::{Component, ComponentRegistry};
pub use config::SystemConfig;
pub use console::Console;
pub use domain::Domain;
pub use kernel::{BootOutcome, DomainReport, Kernel, KernelOptions};

/// Locks a mutex, ignoring poisoning: kernel state stays consistent across a panicking holder
/// because every critical section either completes or changes nothing.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// For the parsers' fuzz tests: a copy of `base` with between 1 and `most` bytes replaced, at
/// places and by values (`value(random)`) drawn from the xorshift state `seed`.
#[cfg(test)]
pub(crate) fn mutated(base: &[u8], seed: &mut u64, most: u64, value: impl Fn(u64) -> u8) -> Vec<u8> {
    let mut bytes = base.to_vec();
    for _ in 0..(*seed % most + 1) {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let at = (*seed as usize) % bytes.len();
        bytes[at] = value(*seed);
    }
    bytes
}
