//! The host calls (JX's fast portals of DomainZero): the top layer of the kernel. Each runs in
//! the caller's context, on the caller's CPU, and is registered from the one table of
//! `domos_abi::for_each_host_call!`: the implementation of a call is the function of its name in
//! the module of its family here. A call that waits is async in thread stores and answers at once
//! in service-thread stores, which never block (its family's `in_service` module).

use std::sync::Arc;

use domos_abi::{HOST_MODULE, HostError};
use domos_loader::component::ComponentRegistry;
use wasmtime::{Caller, Engine, Linker};

use crate::console::Console;
use crate::domain::store::StoreCtx;
use crate::domain::system::{Kernel, KernelOptions};

mod atomic;
mod console;
mod device;
mod domains;
mod fuse;
mod handle;
mod heap;
mod interrupt;
mod memory;
mod names;
mod nic;
mod portal;
mod scheduling;
mod thread;

/// Registers one host call in both linkers: a call that waits is async in thread stores and has
/// its immediate answer in service stores.
macro_rules! register {
    ($thread:ident, $service:ident, $family:ident, $name:ident, [waits]) => {
        $thread.func_wrap_async(HOST_MODULE, stringify!($name), $family::$name)?;
        $service.func_wrap(HOST_MODULE, stringify!($name), $family::in_service::$name)?;
    };
    ($thread:ident, $service:ident, $family:ident, $name:ident, [$($flag:ident)*]) => {
        $thread.func_wrap(HOST_MODULE, stringify!($name), $family::$name)?;
        $service.func_wrap(HOST_MODULE, stringify!($name), $family::$name)?;
    };
}

/// Defines `link` over the table of host calls.
macro_rules! link {
    ($($family:ident: $name:ident($($param:ident: $ty:ident),*) $(-> $result:ident)?, $grant:ident, [$($flag:ident)*], $summary:literal;)*) => {
        /// The linkers of `engine` with every host call of the table: for thread stores and for
        /// service-thread stores (`domain::system::LinkHostCalls`).
        ///
        /// # Errors
        /// When wasmtime refuses a definition.
        pub(crate) fn link(engine: &Engine) -> wasmtime::Result<[Linker<StoreCtx>; 2]> {
            let mut thread = Linker::new(engine);
            let mut service = Linker::new(engine);
            $(register!(thread, service, $family, $name, [$($flag)*]);)*
            Ok([thread, service])
        }
    };
}

domos_abi::for_each_host_call!(link);

impl Kernel {
    /// Starts a kernel with the host calls of the table: engines, CPUs and the preemption timer.
    ///
    /// # Errors
    /// When wasmtime or the OS refuse.
    pub fn start(
        options: &KernelOptions,
        components: ComponentRegistry,
        console: Console,
    ) -> wasmtime::Result<Arc<Kernel>> {
        Kernel::start_with(options, components, console, link)
    }
}

fn code(result: Result<impl Into<i64>, HostError>) -> i64 {
    match result {
        Ok(value) => value.into(),
        Err(e) => e as i64,
    }
}

type Ctx<'a> = Caller<'a, StoreCtx>;

/// The name a component uses, translated by the configuration's wiring table.
fn wired(table: &std::collections::BTreeMap<String, String>, name: String) -> String {
    table.get(&name).cloned().unwrap_or(name)
}
