//! The host calls (JX's fast portals of DomainZero): the top layer of the kernel. Each runs in
//! the caller's context, on the caller's CPU, and is registered from the one table of
//! `domos_abi::for_each_host_call!`: the implementation of a call is the function of its name in
//! the module of its family here. A call that waits is async in thread stores and answers at once
//! in service-thread stores, which never block (its family's `in_service` module).

use std::sync::Arc;

use domos_abi::{Grant, HOST_MODULE, HostError};
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
/// its immediate answer in service stores. A call of any grant but the basic one answers
/// `NotPermitted` to a domain not granted it (Tock's `SyscallFilter`): a component that imports
/// it is refused when its domain is made, but the collocated build imports what all its
/// components do.
macro_rules! register {
    ($thread:ident, $service:ident, $family:ident, $name:ident, Basic, ($($param:ident: $ty:ident),*), [waits]) => {
        $thread.func_wrap_async(HOST_MODULE, stringify!($name), $family::$name)?;
        $service.func_wrap(HOST_MODULE, stringify!($name), $family::in_service::$name)?;
    };
    ($thread:ident, $service:ident, $family:ident, $name:ident, Basic, ($($param:ident: $ty:ident),*), [$($flag:ident)*]) => {
        $thread.func_wrap(HOST_MODULE, stringify!($name), $family::$name)?;
        $service.func_wrap(HOST_MODULE, stringify!($name), $family::$name)?;
    };
    ($thread:ident, $service:ident, $family:ident, $name:ident, $grant:ident, ($($param:ident: $ty:ident),*), [waits]) => {
        $thread.func_wrap_async(
            HOST_MODULE,
            stringify!($name),
            |c: Ctx<'_>, params: ($($ty,)*)| -> Box<dyn Future<Output = wasmtime::Result<i64>> + Send + '_> {
                if !granted(&c, Grant::$grant) {
                    return Box::new(std::future::ready(Ok(HostError::NotPermitted as i64)));
                }
                $family::$name(c, params)
            },
        )?;
        $service.func_wrap(HOST_MODULE, stringify!($name), |c: Ctx<'_>, $($param: $ty),*| -> i64 {
            if !granted(&c, Grant::$grant) {
                return HostError::NotPermitted as i64;
            }
            $family::in_service::$name(c, $($param),*)
        })?;
    };
    ($thread:ident, $service:ident, $family:ident, $name:ident, $grant:ident, ($($param:ident: $ty:ident),*), [$($flag:ident)*]) => {
        for linker in [&mut $thread, &mut $service] {
            linker.func_wrap(HOST_MODULE, stringify!($name), |c: Ctx<'_>, $($param: $ty),*| -> i64 {
                if !granted(&c, Grant::$grant) {
                    return HostError::NotPermitted as i64;
                }
                $family::$name(c, $($param),*)
            })?;
        }
    };
}

/// Whether the caller's domain was granted `grant`.
fn granted(c: &Ctx<'_>, grant: Grant) -> bool {
    c.data().domain.grants.contains(&grant)
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
            $(register!(thread, service, $family, $name, $grant, ($($param: $ty),*), [$($flag)*]);)*
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

/// The answer of a call that would wait, in a service thread (its family's `in_service`):
/// `answer`, or `MustWait` in a thread that runs a restartable call, which is abandoned
/// (`StoreCtx::refuse_wait`) and which its service may end at once (the SDK's
/// `Mutex::lock_restartable` does).
fn refused(c: &Ctx<'_>, answer: HostError) -> i64 {
    let ctx = c.data();
    ctx.refuse_wait();
    if ctx.restartable { HostError::MustWait as i64 } else { answer as i64 }
}

/// The name a component uses, translated by the configuration's wiring table.
fn wired(table: &std::collections::BTreeMap<String, String>, name: String) -> String {
    table.get(&name).cloned().unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use domos_abi::{HOST_CALLS, HostError, IntType};

    use crate::test_system::{System, component, main};

    /// Hostile argument patterns, each parameter's (32-bit, 64-bit) value by its position: all
    /// ones, the sign bit, the largest positive, an address 16 bytes below 4 GiB, zero, and
    /// a small address (or handle) followed by lengths of all ones.
    const PATTERNS: [fn(usize) -> (u32, u64); 6] = [
        |_| (u32::MAX, u64::MAX),
        |_| (0x8000_0000, 1 << 63),
        |_| (0x7fff_ffff, i64::MAX as u64),
        |_| (0xffff_fff0, 0xffff_fff0),
        |_| (0, 0),
        |i| if i % 2 == 0 { (0x100, 0x100) } else { (u32::MAX, u64::MAX) },
    ];
    /// The zero pattern's place in `PATTERNS`.
    const ZERO: usize = 4;
    /// Where the test component keeps its results (inside its one page, above anything the
    /// patterns point to that fits).
    const RESULTS: u32 = 0x8000;

    #[test]
    fn every_host_call_answers_hostile_arguments_with_a_value_or_an_error() {
        let mut body = String::new();
        let mut calls = Vec::new();
        for call in HOST_CALLS {
            for (number, pattern) in PATTERNS.iter().enumerate() {
                // Zero may be a live handle or a short sleep: it is the one pattern a waiting
                // call gets only when it has no handle (thread_sleep), and a call without
                // parameters gets only once.
                let only_zero = call.params.is_empty() || call.name == "thread_sleep";
                if (only_zero || call.waits) && (number == ZERO) != only_zero {
                    continue;
                }
                let args: String = (call.params.iter().enumerate())
                    .map(|(i, (_, ty))| match ty {
                        IntType::U32 | IntType::I32 => format!("(i32.const {})", pattern(i).0 as i32),
                        IntType::U64 | IntType::I64 => format!("(i64.const {})", pattern(i).1 as i64),
                    })
                    .collect();
                let invoke = format!("(call ${} {args})", call.name);
                let slot = RESULTS + 8 * calls.len() as u32;
                body += &match call.result.map(IntType::wasm) {
                    Some(domos_abi::ValueType::I64) => format!("(i64.store (i32.const {slot}) {invoke})\n"),
                    Some(domos_abi::ValueType::I32) => {
                        format!("(i64.store (i32.const {slot}) (i64.extend_i32_s {invoke}))\n")
                    }
                    None => format!("{invoke} (i64.store (i32.const {slot}) (i64.const 0))\n"),
                };
                calls.push(format!("{} with pattern {number}", call.name));
            }
        }
        let done = RESULTS + 8 * calls.len() as u32;
        body += &format!("(i64.store (i32.const {done}) (i64.const 0x600d))");
        let system = System::boot(
            &[component("hostile", "", &main(&body))],
            "[[domain]]\nname = \"D\"\ngrants = [\"domains\", \"devices\", \"scheduling\"]\n\
             [[domain.component]]\nname = \"hostile\"\n",
        );
        assert_eq!(system.domain("D").termination_reason(), None);
        let bytes = system.heap("D", RESULTS, 8 * (calls.len() + 1));
        let results: Vec<i64> =
            bytes.chunks(8).map(|b| i64::from_le_bytes(b.try_into().expect("eight bytes"))).collect();
        assert_eq!(results[calls.len()], 0x600d, "main ran to its end");
        for (call, &result) in calls.iter().zip(&results) {
            assert!(result >= 0 || HostError::from_code(result).is_some(), "{call} answered {result}");
        }
    }
}
