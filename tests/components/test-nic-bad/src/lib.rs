//! `test-nic-bad`: calls the network-card host calls with forged handles, bad rings and bad
//! frames (on the card `spare0`; needs the `devices` grant) and prints each error.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use domos_sdk::{CallError, HostError, Memory, println};

domos_sdk::component! { main: bad_nic }

fn bad_nic() -> Result<(), CallError> {
    let err = |code: i64| match HostError::from_code(code) {
        Some(e) => alloc::format!("{e:?}"),
        None => alloc::format!("ok {code}"),
    };
    println!("open a card that does not exist: {}", err(domos_sys::nic_open("nope")));
    println!("a forged handle: {}", err(domos_sys::nic_info(0x7777, 0)));
    let memory = Memory::new(64 * 1024)?;
    println!("a memory object's handle: {}", err(domos_sys::nic_ready(memory.handle())));
    let nic = domos_sys::nic_open("spare0");
    let nic = u32::try_from(nic).map_err(|_| CallError::Host(HostError::NotFound))?;
    println!("an unknown info item: {}", err(domos_sys::nic_info(nic, 9)));
    println!("frames before rings: {}", err(domos_sys::nic_ready(nic)));
    let small = Memory::new(1000)?;
    println!("a ring too small: {}", err(domos_sys::nic_attach(nic, small.handle(), memory.handle(), 1536)));
    let read_only = memory.read_only()?;
    println!(
        "a read-only receive ring: {}",
        err(domos_sys::nic_attach(nic, read_only.handle(), memory.handle(), 1536))
    );
    let mut revocable = Memory::new(64 * 1024)?;
    let view = revocable.subrange(0, 64 * 1024)?;
    revocable.revoke()?;
    println!("a revoked ring: {}", err(domos_sys::nic_attach(nic, view.handle(), memory.handle(), 1536)));
    println!("a forged ring: {}", err(domos_sys::nic_attach(nic, 0x7777, memory.handle(), 1536)));
    println!("slots shorter than a frame: {}", err(domos_sys::nic_attach(nic, memory.handle(), memory.handle(), 1000)));
    let tx = Memory::new(64 * 1024)?;
    println!("good rings: {}", err(domos_sys::nic_attach(nic, memory.handle(), tx.handle(), 1536)));
    tx.set_u32(0, 2000)?;
    println!("a frame over the MTU: {}", err(domos_sys::nic_transmit(nic, 0, 1)));
    println!("more frames than the ring: {}", err(domos_sys::nic_transmit(nic, 0, 1000)));
    println!("releasing slots without frames: {}", err(domos_sys::nic_release(nic, 5)));
    let mut gone = Memory::new(64 * 1024)?;
    let tx2 = gone.subrange(0, 64 * 1024)?;
    println!("rings again: {}", err(domos_sys::nic_attach(nic, memory.handle(), tx2.handle(), 1536)));
    gone.revoke()?;
    println!("sending from a revoked ring: {}", err(domos_sys::nic_transmit(nic, 0, 1)));
    Ok(())
}
