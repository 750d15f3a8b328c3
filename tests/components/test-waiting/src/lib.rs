//! `test-waiting`: a service whose calls wait, declared with `services_wait` in its manifest.
//!
//! * `server` — serves `IpcBench` under the name `Sleepy`: `null` sleeps 20 ms inside the call,
//!   `add3(a, b, c)` waits on an atomic variable that a thread of this domain sets `a`
//!   milliseconds later and returns `b + c`;
//! * `client` — calls both from its main thread and prints how long each took.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::string::String;
use core::time::Duration;
use domos_interfaces::ipc_bench::IpcBench;
use domos_sdk::sync::AtomicVariable;
use domos_sdk::time::now_ns;
use domos_sdk::{CallError, Portal, names, println, thread};

domos_sdk::component! { init: init, main: main }

fn init() -> Result<(), CallError> {
    if domos_sdk::args().trim() == "server" {
        names::register("Sleepy", &Sleepy.into_portal())?;
    }
    Ok(())
}

fn main() -> Result<(), CallError> {
    if domos_sdk::args().trim() != "client" {
        return Ok(());
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

    fn measure(&self, text: String) -> Result<u32, CallError> {
        Ok(text.len() as u32)
    }
}
