//! The guest SDK of Domos: what a component links against.
//!
//! * [`interface`] declares a portal interface once, as a Rust trait; it generates the client
//!   proxy (an implementation of the trait for [`Portal<dyn Trait>`](Portal)) and the server
//!   dispatch, with method identifiers derived from the names.
//! * [`Portal`] is a capability to a service. A portal to an object of this very component is a
//!   plain reference; any other is a kernel handle, and calling it is a synchronous RPC whose
//!   parameters are copied into the service's domain.
//! * [`component!`] declares the component: its manifest (the crate's `component.toml`) and its
//!   `init` and `main` functions.
//! * [`local_scheduler!`] and [`global_scheduler!`] declare a scheduler component instead: its
//!   manifest and the functions the kernel calls to schedule the threads of a domain, or the
//!   domains.
//!
//! Components are `#![no_std]` with `alloc`; this crate's two unsafe operations take the
//! kernel's word at the entry points of service calls (`rt::dispatch`: the message buffer is
//! the one it names; `rt::release`: no call on the object is left); the host calls and
//! everything else unsafe live in `domos-sys`.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

pub mod console;
pub mod domains;
pub mod interrupt;
pub mod memory;
pub mod names;
mod portal;
#[doc(hidden)]
pub mod rt;
pub mod sync;
pub mod thread;
pub mod time;
pub mod wire;

pub use domos_abi::HostError;
pub use domos_sdk_macros::{Wire, interface};
pub use domos_sys::{Condvar, MustWait, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use memory::{GatherList, Gathered, Memory, ReadOnlyMemory, Readable};
pub use portal::{CallError, Interface, Portal, Restartable};

/// The configured arguments of this component instance (the `args` key of its
/// `[[domain.component]]`), as they were given: a list of byte strings, which may hold white
/// space and bytes that are not UTF-8. The `args` host call carries them encoded
/// ([`domos_abi::ARGUMENTS_DOC`]).
pub fn arguments() -> alloc::vec::Vec<alloc::vec::Vec<u8>> {
    let mut buf = alloc::vec![0u8; 256];
    loop {
        let len = domos_sys::args(&mut buf);
        let Ok(len) = usize::try_from(len) else {
            return alloc::vec::Vec::new();
        };
        if len <= buf.len() {
            buf.truncate(len);
            return domos_abi::decode_arguments(&buf).map(<[u8]>::to_vec).collect();
        }
        buf.resize(len, 0);
    }
}

/// The configured arguments as one string, for components that read `key=value` words: the
/// items of [`arguments`] joined by spaces (bytes that are not UTF-8 become U+FFFD). A component
/// that takes names or paths, which may hold spaces, reads [`arguments`] instead.
pub fn args() -> alloc::string::String {
    let items: alloc::vec::Vec<alloc::string::String> =
        arguments().iter().map(|item| alloc::string::String::from_utf8_lossy(item).into_owned()).collect();
    items.join(" ")
}

/// Declares a component: embeds the crate's `component.toml` as its manifest and generates the
/// entry points the kernel calls.
///
/// ```ignore
/// domos_sdk::component! { init: init, main: main }
/// ```
/// `init` runs once when the domain boots, before any `main`, and typically registers services;
/// `main` is the body of the component's first thread. Either may be left out (a service needs
/// no `main`, a client often no `init`). Both are `fn() -> Result<(), E>` with `E: Debug`.
///
/// The entry points carry the component's name (`domos_init:fs-ext2`, the crate's name, which
/// must be its manifest's), so that a module may link several components: the collocated build
/// that domains with `collocate = true` run (decision 0015). Dispatch, release and thread start
/// work on tables the module's components share (the SDK is linked into it once), so any
/// component's serve them all.
#[macro_export]
macro_rules! component {
    (main: $main:path $(, interrupt: $interrupt:path)? $(,)?) => {
        $crate::component! { init: $crate::rt::no_init, main: $main $(, interrupt: $interrupt)? }
    };
    (init: $init:path $(, main: $main:path)? $(, interrupt: $interrupt:path)? $(,)?) => {
        #[allow(unsafe_code, reason = "a custom section and exported entry points are how a wasm component is described to the kernel")]
        const _: () = {
            $crate::__manifest!();

            #[unsafe(export_name = concat!("domos_init:", env!("CARGO_PKG_NAME")))]
            extern "C" fn domos_init() -> i32 {
                $crate::rt::run_entry(concat!(env!("CARGO_PKG_NAME"), " init"), $init)
            }
            $(
            #[unsafe(export_name = concat!("domos_main:", env!("CARGO_PKG_NAME")))]
            extern "C" fn domos_main() -> i32 {
                $crate::rt::run_entry(concat!(env!("CARGO_PKG_NAME"), " main"), $main)
            }
            )?
            #[unsafe(export_name = concat!("domos_thread_entry:", env!("CARGO_PKG_NAME")))]
            extern "C" fn domos_thread_entry(closure: u32) -> i32 {
                $crate::rt::thread_entry(closure)
            }
            #[unsafe(export_name = concat!("domos_dispatch:", env!("CARGO_PKG_NAME")))]
            extern "C" fn domos_dispatch(object: u32, method: u32, buffer: u32, len: u32, capacity: u32) -> i32 {
                // SAFETY: the kernel alone calls this entry point, as `rt::dispatch` asks.
                unsafe { $crate::rt::dispatch(object, method, buffer, len, capacity) }
            }
            #[unsafe(export_name = concat!("domos_release:", env!("CARGO_PKG_NAME")))]
            extern "C" fn domos_release(object: u32) {
                // SAFETY: the kernel alone calls this entry point, as `rt::release` asks.
                unsafe { $crate::rt::release(object) }
            }
            $(
            #[unsafe(export_name = concat!("domos_interrupt:", env!("CARGO_PKG_NAME")))]
            extern "C" fn domos_interrupt(source: u32, events: u32) {
                $interrupt(source, events)
            }
            )?
        };
    };
}

/// Embeds the crate's `component.toml` in the module's `domos:manifest:NAME` custom section
/// (`NAME` the crate's name), where the kernel reads the manifest; a module that links several
/// components has one such section for each. Used by the declaring macros, inside an item that
/// allows `unsafe_code` (the `link_section` attribute is unsafe).
#[doc(hidden)]
#[macro_export]
macro_rules! __manifest {
    () => {
        const MANIFEST: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/component.toml"));
        #[unsafe(link_section = concat!("domos:manifest:", env!("CARGO_PKG_NAME")))]
        #[used]
        static DOMOS_MANIFEST: [u8; MANIFEST.len()] = {
            let mut bytes = [0u8; MANIFEST.len()];
            let mut i = 0;
            while i < MANIFEST.len() {
                bytes[i] = MANIFEST[i];
                i += 1;
            }
            bytes
        };
    };
}

/// Declares a local (domain) scheduler component: embeds the crate's `component.toml` as its
/// manifest and exports the functions the kernel calls to schedule the threads of a domain
/// (JX's domain scheduler), each calling the method of the same name on `policy`, a `static`.
///
/// ```ignore
/// static POLICY: FixedPriority = FixedPriority::new();
/// domos_sdk::local_scheduler! { policy: POLICY, interrupted, portal_call, incoming_call }
/// ```
/// Required methods:
/// * `runnable(&self, thread: u32, priority: i32)`: a thread of the domain became runnable
///   (started, woken, yielded); the scheduler must remember it. Told again of a thread it holds,
///   the thread's priority changed.
/// * `preempted(&self, thread: u32, priority: i32)`: the timer ended the thread's slice; it is
///   runnable again. The manifest must list it as `bounded = ["domos_sched_preempted"]`: the
///   kernel proves at load time that it finishes in bounded time (straight-line code,
///   constant-bound loops, no panicking path, no allocation).
/// * `activated(&self, cpu: u32) -> u32`: the thread to run now on `cpu`, one the scheduler was
///   told is runnable and has not returned since (returning it removes it), or 0 for none.
///
/// Optional ones, exported only when named after the policy (the scheduler opts in):
/// * `interrupted(&self, thread: u32, priority: i32) -> u32`: the thread was interrupted within
///   the domain's slice (the domain's scheduler has a `slice_ms`); it is runnable again. Returns
///   the thread to run next, as `activated`.
/// * `portal_call(&self, thread: u32) -> bool`: the running thread is about to make an outgoing
///   portal call; true to let the domain's other runnable threads run first.
/// * `incoming_call(&self, caller_domain: u32) -> bool`: a call into one of the domain's
///   services is about to run; true to make the caller yield once first.
///
/// Thread ids are nonzero. The kernel never overlaps two calls into the scheduler, and replaces
/// a scheduler whose call runs longer than about 2 ms by a built-in one. A scheduler runs while
/// kernel locks are held: it may import no host call but `clock_ns` and `console_write`, so it
/// cannot allocate and keeps its state in fixed-size statics. Unlike [`component!`], this
/// exports no `domos_init`, `domos_dispatch` or other entry point of an ordinary component.
#[macro_export]
macro_rules! local_scheduler {
    (policy: $policy:path $(, $optional:ident)* $(,)?) => {
        #[allow(unsafe_code, reason = "a custom section and unmangled entry points are how a wasm component is described to the kernel")]
        const _: () = {
            $crate::__manifest!();

            #[unsafe(no_mangle)]
            extern "C" fn domos_sched_runnable(thread: u32, priority: i32) {
                $policy.runnable(thread, priority)
            }
            #[unsafe(no_mangle)]
            extern "C" fn domos_sched_preempted(thread: u32, priority: i32) {
                $policy.preempted(thread, priority)
            }
            #[unsafe(no_mangle)]
            extern "C" fn domos_sched_activated(cpu: u32) -> u32 {
                $policy.activated(cpu)
            }
            $( $crate::local_scheduler!(@optional $policy, $optional); )*
        };
    };
    (@optional $policy:path, interrupted) => {
        #[unsafe(no_mangle)]
        extern "C" fn domos_sched_interrupted(thread: u32, priority: i32) -> u32 {
            $policy.interrupted(thread, priority)
        }
    };
    (@optional $policy:path, portal_call) => {
        #[unsafe(no_mangle)]
        extern "C" fn domos_sched_portal_call(thread: u32) -> u32 {
            u32::from($policy.portal_call(thread))
        }
    };
    (@optional $policy:path, incoming_call) => {
        #[unsafe(no_mangle)]
        extern "C" fn domos_sched_incoming_call(caller_domain: u32) -> u32 {
            u32::from($policy.incoming_call(caller_domain))
        }
    };
}

/// Declares a global scheduler component: embeds the crate's `component.toml` as its manifest
/// and exports the functions the kernel calls to choose which domain runs next, each calling the
/// method of the same name on `policy`, a `static`.
///
/// ```ignore
/// static POLICY: Stride = Stride::new();
/// domos_sdk::global_scheduler! { policy: POLICY }
/// ```
/// * `runnable(&self, domain: u32, tickets: u32)`: the domain now has runnable threads;
///   `tickets` is its CPU share.
/// * `idle(&self, domain: u32)`: the domain has no runnable thread any more.
/// * `pick(&self, cpu: u32) -> u32`: the domain to run next on `cpu`, one currently runnable
///   (told runnable and not idle since). Picking leaves it runnable; the kernel says `idle`
///   when it is.
/// * `ran(&self, domain: u32, ns: u64)`: a thread of the domain ran `ns` nanoseconds (after
///   every run, for accounting).
///
/// Domain ids are nonzero. The constraints of [`local_scheduler!`] apply: calls never overlap,
/// a call may not take longer than about 2 ms, no host call but `clock_ns` and `console_write`,
/// no allocation.
#[macro_export]
macro_rules! global_scheduler {
    (policy: $policy:path $(,)?) => {
        #[allow(
            unsafe_code,
            reason = "a custom section and unmangled entry points are how a wasm component is described to the kernel"
        )]
        const _: () = {
            $crate::__manifest!();

            #[unsafe(no_mangle)]
            extern "C" fn domos_global_runnable(domain: u32, tickets: u32) {
                $policy.runnable(domain, tickets)
            }
            #[unsafe(no_mangle)]
            extern "C" fn domos_global_idle(domain: u32) {
                $policy.idle(domain)
            }
            #[unsafe(no_mangle)]
            extern "C" fn domos_global_pick(cpu: u32) -> u32 {
                $policy.pick(cpu)
            }
            #[unsafe(no_mangle)]
            extern "C" fn domos_global_ran(domain: u32, ns: u64) {
                $policy.ran(domain, ns)
            }
        };
    };
}
