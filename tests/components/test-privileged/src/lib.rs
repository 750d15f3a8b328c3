//! `test-privileged`: uses the domain-management host calls, which need the `domains` grant.
//!
//! Creates a child domain running `test-hostile spin`, inspects it, terminates it and inspects
//! it again.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use domos_sdk::{CallError, println};

domos_sdk::component! { init: init, main: main }

fn init() -> Result<(), CallError> {
    Ok(())
}

fn inspect(handle: u32) -> alloc::string::String {
    let mut buf = alloc::vec![0u8; 512];
    let len = domos_sys::domain_inspect(handle, &mut buf).max(0) as usize;
    buf.truncate(len.min(512));
    alloc::string::String::from_utf8_lossy(&buf).into_owned()
}

fn main() -> Result<(), CallError> {
    let spec = "name = \"Child\"\nheap = \"1 MiB\"\n[[component]]\nname = \"test-hostile\"\nargs = \"spin\"\n";
    let child = domos_sys::domain_create(spec);
    if child < 0 {
        println!("domain_create failed: {child}");
        return Ok(());
    }
    let child = child as u32;
    domos_sdk::thread::yield_now();
    println!("child: {}", inspect(child));
    println!("terminate: {}", domos_sys::domain_terminate(child));
    println!("child after: {}", inspect(child));
    Ok(())
}
