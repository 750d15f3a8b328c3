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
//!
//! Components are `#![no_std]` with `alloc`; this crate has no unsafe code (the host calls
//! live in `domos-sys`).
#![no_std]
#![forbid(unsafe_code)]

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
pub use domos_sys::{Condvar, Mutex, MutexGuard};
pub use memory::{Memory, ReadOnlyMemory};
pub use portal::{CallError, Interface, Portal};

/// The configured arguments of this component instance (the `args` key in the system
/// configuration), as one string.
pub fn args() -> alloc::string::String {
    let mut buf = alloc::vec![0u8; 256];
    loop {
        let len = domos_sys::args(&mut buf);
        let Ok(len) = usize::try_from(len) else {
            return alloc::string::String::new();
        };
        if len <= buf.len() {
            buf.truncate(len);
            return alloc::string::String::from_utf8_lossy(&buf).into_owned();
        }
        buf.resize(len, 0);
    }
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
#[macro_export]
macro_rules! component {
    (main: $main:path $(, interrupt: $interrupt:path)? $(,)?) => {
        $crate::component! { init: $crate::rt::no_init, main: $main $(, interrupt: $interrupt)? }
    };
    (init: $init:path $(, main: $main:path)? $(, interrupt: $interrupt:path)? $(,)?) => {
        #[allow(unsafe_code, reason = "a custom section and unmangled entry points are how a wasm component is described to the kernel")]
        const _: () = {
            const MANIFEST: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/component.toml"));
            #[unsafe(link_section = "domos:manifest")]
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

            #[unsafe(no_mangle)]
            extern "C" fn domos_init() -> i32 {
                $crate::rt::run_entry("init", $init)
            }
            $(
            #[unsafe(no_mangle)]
            extern "C" fn domos_main() -> i32 {
                $crate::rt::run_entry("main", $main)
            }
            )?
            #[unsafe(no_mangle)]
            extern "C" fn domos_thread_entry(closure: u32) -> i32 {
                $crate::rt::thread_entry(closure)
            }
            #[unsafe(no_mangle)]
            extern "C" fn domos_dispatch(object: u32, method: u32, buffer: u32, len: u32, capacity: u32) -> i32 {
                $crate::rt::dispatch(object, method, buffer, len, capacity)
            }
            #[unsafe(no_mangle)]
            extern "C" fn domos_release(object: u32) {
                $crate::rt::release(object)
            }
            $(
            #[unsafe(no_mangle)]
            extern "C" fn domos_interrupt(source: u32, events: u32) {
                $interrupt(source, events)
            }
            )?
        };
    };
}
