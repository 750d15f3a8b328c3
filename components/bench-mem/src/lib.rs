//! `bench-mem`: memory objects at work.
//!
//! Arguments pick the role:
//! * `server` — serves `MemoryInspector` under the name `MemoryInspector`;
//! * `check` — exercises memory objects against `MemoryInspector` and prints one line per
//!   property (the system tests read them);
//! * `client N` — times bulk copies of 1 MiB, typed accesses, and passing 1 MiB to
//!   `MemoryInspector` as a memory object and as a copy, printing `bench NAME NS` lines.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::vec;
use alloc::vec::Vec;
use domos_interfaces::memory_inspector::MemoryInspector;
use domos_sdk::time::now_ns;
use domos_sdk::{CallError, Memory, Mutex, Portal, ReadOnlyMemory, names, println};

domos_sdk::component! { init: init, main: main }

const MIB: usize = 1 << 20;

fn init() -> Result<(), CallError> {
    if domos_sdk::args().trim() == "server" {
        names::register("MemoryInspector", &Inspector::default().into_portal())?;
    }
    Ok(())
}

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let mut words = args.split_whitespace();
    match words.next().unwrap_or("") {
        "check" => check(),
        "client" => bench(words.next().and_then(|w| w.parse().ok()).unwrap_or(1000)),
        _ => Ok(()),
    }
}

fn check() -> Result<(), CallError> {
    let inspector: Portal<dyn MemoryInspector> = names::lookup("MemoryInspector")?;
    let mut memory = Memory::new(MIB as u64)?;
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    for chunk in 0..(MIB / pattern.len()) {
        memory.write((chunk * pattern.len()) as u64, &pattern)?;
    }
    let expected: u64 = pattern.iter().map(|b| u64::from(*b)).sum::<u64>() * (MIB / pattern.len()) as u64;
    println!("checksum in another domain matches: {}", inspector.checksum(memory.read_only()?)? == expected);

    inspector.stamp(memory.subrange(4096, 4096)?, 8, 0xabcd_1234)?;
    println!("a write by the other domain is seen here: {:#x}", memory.get_u32(4096 + 8)?);

    let view = memory.read_only()?;
    let mut byte = [0u8; 1];
    view.read(1, &mut byte)?;
    println!("read-only view reads: {}", byte[0]);
    println!("subrange bounds: {:?}", memory.subrange(MIB as u64 - 4, 8).err());
    println!("read past the end: {:?}", memory.get_u32(MIB as u64 - 2).err());

    inspector.keep(memory.subrange(0, 4096)?)?;
    println!("kept view before revocation: {:?}", inspector.peek(0));
    let stale = memory.read_only()?;
    memory.revoke()?;
    println!("kept view after revocation: {:?}", inspector.peek(0).err());
    println!("derived view after revocation: {:?}", stale.get_u32(0).err());
    println!("revoker's fresh handle: {:?}", memory.get_u32(0));
    println!("too large: {:?}", Memory::new(2 << 30).err());
    Ok(())
}

/// Runs `op` `n` times; prints nanoseconds per call.
fn time(name: &str, n: u64, mut op: impl FnMut() -> Result<(), CallError>) -> Result<(), CallError> {
    op()?;
    let start = now_ns();
    for _ in 0..n {
        op()?;
    }
    println!("bench {name} {:.2}", (now_ns() - start) as f64 / n as f64);
    Ok(())
}

fn bench(n: u64) -> Result<(), CallError> {
    let inspector: Portal<dyn MemoryInspector> = names::lookup("MemoryInspector")?;
    let memory = Memory::new(MIB as u64)?;
    let mut heap = vec![7u8; MIB];
    time("memobj_copy_1m", n, || {
        memory.write(0, &heap)?;
        memory.read(0, &mut heap)
    })?;
    let mut offset = 0u64;
    time("memobj_typed_access", n * 1000, || {
        offset = (offset + 4) % MIB as u64;
        memory.get_u32(offset).map(drop)
    })?;
    let shared = memory.read_only()?;
    time("pass_1m_memobj", n, || inspector.first_word(shared.read_only_subrange(0, MIB as u64)?).map(drop))?;
    time("pass_1m_copy", n, || inspector.first_byte(heap.clone()).map(drop))?;
    Ok(())
}

/// `MemoryInspector`, keeping at most one memory object.
#[derive(Default)]
struct Inspector {
    kept: Mutex<Option<Memory>>,
}

impl MemoryInspector for Inspector {
    fn checksum(&self, memory: ReadOnlyMemory) -> Result<u64, CallError> {
        let len = memory.len()?;
        let mut chunk = vec![0u8; 64 * 1024];
        let mut sum = 0u64;
        let mut offset = 0;
        while offset < len {
            let take = chunk.len().min((len - offset) as usize);
            memory.read(offset, &mut chunk[..take])?;
            sum += chunk[..take].iter().map(|b| u64::from(*b)).sum::<u64>();
            offset += take as u64;
        }
        Ok(sum)
    }
    fn stamp(&self, memory: Memory, offset: u64, value: u32) -> Result<(), CallError> {
        memory.set_u32(offset, value)
    }
    fn keep(&self, memory: Memory) -> Result<(), CallError> {
        *self.kept.lock() = Some(memory);
        Ok(())
    }
    fn peek(&self, offset: u64) -> Result<u32, CallError> {
        match &*self.kept.lock() {
            Some(memory) => memory.get_u32(offset),
            None => Err(CallError::Host(domos_sdk::HostError::NotFound)),
        }
    }
    fn first_word(&self, memory: ReadOnlyMemory) -> Result<u32, CallError> {
        memory.get_u32(0)
    }
    fn first_byte(&self, bytes: Vec<u8>) -> Result<u32, CallError> {
        Ok(u32::from(bytes.first().copied().unwrap_or(0)))
    }
}
