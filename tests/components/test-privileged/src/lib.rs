//! `test-privileged`: uses host calls that need grants.
//!
//! Without arguments (grant `domains`): creates a child domain running `test-hostile spin`,
//! inspects it, terminates it and inspects it again. With `device NAME` (grant `devices`):
//! writes to the emulated device `NAME`, revokes and drops its handle, and finds the device and
//! its bytes still there. With `disk-io`: writes, reads back and flushes sectors through the
//! `BlockIO` driver, and asks for sectors past the end.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use domos_sdk::{CallError, HostError, println};

domos_sdk::component! { main: main }

fn inspect(handle: u32) -> alloc::string::String {
    let mut buf = alloc::vec![0u8; 512];
    let len = domos_sys::domain_inspect(handle, &mut buf).max(0) as usize;
    buf.truncate(len.min(512));
    alloc::string::String::from_utf8_lossy(&buf).into_owned()
}

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    if args.trim() == "disk-io" {
        return disk_io();
    }
    if args.trim() == "bad-fault-handlers" {
        // Portals the kernel must not take as a child's memory-fault handler: one of another
        // interface, and a handler whose service waits (the kernel calls it synchronously).
        let spec = "name = \"child\"\nheap = \"1 MiB\"\n[[component]]\nname = \"work-sort\"\n";
        for name in ["KeyValueStore", "WaitingHandler"] {
            let portal = domos_sys::name_lookup(name, 0);
            let result = domos_sys::domain_create(spec, portal as u32);
            println!(
                "{name} as a fault handler: {}",
                HostError::from_code(result).map_or("accepted", HostError::describe)
            );
        }
        return Ok(());
    }
    if args.trim() == "shares" {
        // Two spinning children with shares 20 and 60 of this domain's 100 tickets.
        let spec = |name: &str, share: u32| {
            alloc::format!(
                "name = \"{name}\"\nheap = \"1 MiB\"\ncpu_share = {share}\n[[component]]\nname = \"test-hostile\"\nargs = \"spin\"\n"
            )
        };
        let small =
            domos_sdk::domains::Child::create::<dyn domos_interfaces::ipc_bench::IpcBench>(&spec("Small", 20), None)?;
        let large =
            domos_sdk::domains::Child::create::<dyn domos_interfaces::ipc_bench::IpcBench>(&spec("Large", 60), None)?;
        let greedy =
            domos_sdk::domains::Child::create::<dyn domos_interfaces::ipc_bench::IpcBench>(&spec("Greedy", 30), None);
        println!("a third child wanting 30 of the 20 tickets left: {:?}", greedy.err());
        small.start()?;
        large.start()?;
        small.wait()?;
        return Ok(());
    }
    if args.trim() == "children" {
        // Keep creating children until the quota, from which each is carved, refuses.
        let spec = "name = \"Spawned\"\nheap = \"1 MiB\"\n[[component]]\nname = \"test-hostile\"\nargs = \"spin\"\n";
        let mut children = alloc::vec::Vec::new();
        let refusal = loop {
            match domos_sdk::domains::Child::create::<dyn domos_interfaces::ipc_bench::IpcBench>(spec, None) {
                Ok(child) => {
                    child.start()?;
                    children.push(child);
                }
                Err(e) => break e,
            }
            if children.len() > 1000 {
                break CallError::Host(domos_sdk::HostError::InvalidArgument);
            }
        };
        println!("children created until refused: {} ({refusal})", children.len());
        for child in &children {
            child.terminate()?;
        }
        return Ok(());
    }
    if args.trim() == "churn" {
        // Create and terminate 400 children in turn: the kernel's records of them stay bounded.
        let spec = "name = \"Churned\"\nheap = \"1 MiB\"\n[[component]]\nname = \"work-sort\"\n";
        for _ in 0..400 {
            let child = domos_sdk::domains::Child::create::<dyn domos_interfaces::ipc_bench::IpcBench>(spec, None)?;
            child.terminate()?;
        }
        println!("churned 400 children");
        return Ok(());
    }
    if let Some(name) = args.trim().strip_prefix("device ") {
        let mut device = domos_sdk::Memory::device(name)?;
        device.set_u32(0, 0xfeed_f00d)?;
        // A holder's revocation takes the device from its own handles only.
        device.revoke()?;
        drop(device);
        let again = domos_sdk::Memory::device(name)?;
        println!("device {name}: {} bytes, first word {:#x}", again.len()?, again.get_u32(0)?);
        return Ok(());
    }
    let spec = "name = \"Child\"\nheap = \"1 MiB\"\n[[component]]\nname = \"test-hostile\"\nargs = \"spin\"\n";
    let child = domos_sys::domain_create(spec, 0);
    if child < 0 {
        println!("domain_create failed: {child}");
        return Ok(());
    }
    let child = child as u32;
    domos_sys::domain_start(child);
    domos_sdk::thread::yield_now();
    println!("child: {}", inspect(child));
    println!("terminate: {}", domos_sys::domain_terminate(child));
    println!("child after: {}", inspect(child));
    Ok(())
}

fn disk_io() -> Result<(), CallError> {
    use domos_interfaces::block_io::{self, BlockIO};
    let disk: domos_sdk::Portal<dyn BlockIO> = domos_sdk::names::lookup("BlockIO")?;
    let sectors = disk.sectors()?;
    println!("disk has {sectors} sectors");
    let mut out = domos_sdk::Memory::new(4096)?;
    let pattern: alloc::vec::Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    out.write(0, &pattern)?;
    block_io::write(&disk, 16, 8, out.read_only()?)?;
    block_io::flush(&disk)?;
    let back = domos_sdk::Memory::new(4096)?;
    block_io::read(&disk, 16, 8, back.subrange(0, 4096)?)?;
    let mut read = alloc::vec![0u8; 4096];
    back.read(0, &mut read)?;
    println!("read back what was written: {}", read == pattern);
    let mut firsts = alloc::vec![0u8; 512];
    let first = domos_sdk::Memory::new(512)?;
    block_io::read(&disk, 0, 1, first.subrange(0, 512)?)?;
    first.read(0, &mut firsts)?;
    println!("sector 0 starts with {:?}", &firsts[..4]);
    println!("past the end: {:?}", block_io::read(&disk, sectors, 1, domos_sdk::Memory::new(512)?).err());
    let _ = out.revoke();
    Ok(())
}
