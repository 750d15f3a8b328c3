//! `test-waiting`: a service whose calls wait, declared with `services_wait` in its manifest.
//!
//! * `server` — serves `IpcBench` under the name `Sleepy`: `null` sleeps 20 ms inside the call,
//!   `add3(a, b, c)` waits on an atomic variable that a thread of this domain sets `a`
//!   milliseconds later and returns `b + c`;
//! * `client` — calls both from its main thread and prints how long each took;
//! * `server` also takes `HELD` in its main thread, then serves the same object under the name
//!   `Locked` and sleeps for an hour: `measure` takes that lock first, so a call to it waits in
//!   the kernel for as long as the server's domain lives;
//! * `client-locked` — waits for `Locked` to be registered, calls `measure` and prints how the
//!   call ended;
//! * `fault-handler` — serves a `MemoryFaultHandler` that waits, under the name `WaitingHandler`:
//!   the kernel, which calls fault handlers synchronously, must refuse it.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::string::String;
use core::time::Duration;
use domos_interfaces::ipc_bench::IpcBench;
use domos_interfaces::memory_fault_handler::MemoryFaultHandler;
use domos_sdk::sync::AtomicVariable;
use domos_sdk::time::now_ns;
use domos_sdk::{CallError, Mutex, Portal, names, println, thread};

domos_sdk::component! { init: init, main: main }

fn init() -> Result<(), CallError> {
    match domos_sdk::args().trim() {
        "server" => names::register("Sleepy", &Sleepy.into_portal())?,
        "fault-handler" => names::register("WaitingHandler", &WaitingHandler.into_portal())?,
        _ => {}
    }
    Ok(())
}

/// A memory-fault handler that sleeps before it answers.
struct WaitingHandler;

impl MemoryFaultHandler for WaitingHandler {
    fn out_of_memory(&self, _child: u32, short_by: u64) -> Result<u64, CallError> {
        thread::sleep(Duration::from_millis(1))?;
        Ok(short_by)
    }
}

/// Held by the server's main thread; `measure` waits for it.
static HELD: Mutex<()> = Mutex::new(());

fn main() -> Result<(), CallError> {
    match domos_sdk::args().trim() {
        "server" => {
            let _held = HELD.lock();
            println!("holding the lock");
            names::register("Locked", &Sleepy.into_portal())?;
            return thread::sleep(Duration::from_secs(3600));
        }
        "client-locked" => {
            let mut locked = names::lookup::<dyn IpcBench>("Locked");
            for _ in 0..1000 {
                if locked.is_ok() {
                    break;
                }
                thread::sleep(Duration::from_millis(1))?;
                locked = names::lookup("Locked");
            }
            let sleepy = locked?;
            println!("calling a service that waits for a lock");
            let result = sleepy.measure("locked");
            println!("locked call: {}", result.map_or_else(|e| alloc::format!("{e}"), |n| alloc::format!("{n}")));
            return Ok(());
        }
        "client" => {}
        _ => return Ok(()),
    }
    let sleepy: Portal<dyn IpcBench> = names::lookup("Sleepy")?;
    let start = now_ns();
    let slept = sleepy.null();
    println!("a call that sleeps 20 ms: {slept:?} after {} ms", (now_ns() - start) / 1_000_000);
    let start = now_ns();
    let sum = sleepy.add3(10, 2, 3);
    println!("a call that waits for an event 10 ms later: {sum:?} after {} ms", (now_ns() - start) / 1_000_000);
    Ok(())
}

struct Sleepy;

impl IpcBench for Sleepy {
    fn null(&self) -> Result<(), CallError> {
        thread::sleep(Duration::from_millis(20))
    }

    fn add3(&self, a: u32, b: u32, c: u32) -> Result<u32, CallError> {
        let event = AtomicVariable::new(0)?;
        let setter = event.clone_handle()?;
        thread::spawn(move || {
            let _ = thread::sleep(Duration::from_millis(u64::from(a)));
            i32::from(setter.set_and_unblock(1, 1).is_err())
        })?;
        while event.get()? == 0 {
            event.block_if_equal(0)?;
        }
        Ok(b + c)
    }

    fn measure(&self, text: &str) -> Result<u32, CallError> {
        let _held = HELD.lock();
        Ok(text.len() as u32)
    }
}
