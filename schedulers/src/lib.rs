//! The data structures of Domos's scheduler components (`components/sched-*`): fixed-capacity
//! sets kept in atomics, so that a component can hold them in plain `static`s without `unsafe`
//! and without allocating.
//!
//! A scheduler component runs while kernel locks are held and may import no host call but
//! `clock_ns` and `console_write`, so it cannot allocate; and the kernel proves its
//! `domos_sched_preempted` finishes in bounded time (`kernel/src/bounded.rs`), which forbids
//! unbounded loops and panicking paths. Hence:
//!
//! * [`ThreadSet`]: a local scheduler's runnable threads. Inserting is O(1) straight-line code
//!   (a stack of free slots), fit for `preempted`; [`ThreadSet::pick_by`] scans all slots for
//!   the entry with the least key the policy chooses, for `activated`.
//! * [`RecentPriorities`]: the priorities of the threads a local scheduler picked last, so it
//!   knows the priority of the running thread when it is asked about a portal call.
//! * [`DomainSet`]: a global scheduler's domains, runnable ones and remembered idle ones, each
//!   with a key the policy orders them by (a stride pass, a round-robin stamp).
//!
//! On them are built the policies of the shipped schedulers, so that they are tested here on
//! the host and each component only exports one of them: [`local::RoundRobin`],
//! [`local::Fifo`] and [`local::FixedPriority`] for domains, [`global::Stride`] and
//! [`global::RoundRobin`] over domains.
//!
//! The atomics are used with `Relaxed` ordering: the kernel never overlaps two calls into one
//! scheduler store, so they only make the statics shareable, not the calls concurrent. Slot
//! indices are masked with `CAPACITY - 1` (a power of two), which lets the compiler drop every
//! bounds check, so no path reaches the panic machinery.
//!
//! When a set is full the newcomer is dropped and the insertion reports `false`: the kernel
//! notices a scheduler that loses threads or domains (it stops returning them) and falls back
//! to its built-in scheduler, which is better than failing the call.
#![no_std]
#![forbid(unsafe_code)]

mod domains;
pub mod global;
pub mod local;
mod priorities;
mod threads;

pub use domains::{Domain, DomainSet, Previous};
pub use priorities::RecentPriorities;
pub use threads::{Entry, ThreadSet};

/// How many runnable threads a [`ThreadSet`], and how many domains a [`DomainSet`], can hold.
pub const CAPACITY: usize = 256;

/// Masks a slot index into `0..CAPACITY`.
const MASK: usize = CAPACITY - 1;

const _: () = assert!(CAPACITY.is_power_of_two(), "slot indices are masked, not bounds-checked");
