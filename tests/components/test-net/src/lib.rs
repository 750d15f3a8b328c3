//! `test-net`: exercises the network, chosen by its argument.
//!
//! * `frames`: raw Ethernet frames between two `NetworkDevice` drivers (`netA`, `netB`) over a
//!   pair of cards: delivery intact, woken by the receive interrupt; frames over the MTU, too
//!   short or too many refused; a full receive ring drops and counts.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::vec::Vec;
use domos_interfaces::network_device::NetworkDevice;
use domos_sdk::sync::AtomicVariable;
use domos_sdk::{CallError, HostError, Memory, Portal, names, println};

domos_sdk::component! { main: main }

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    match args.split_whitespace().next().unwrap_or("") {
        "frames" => frames(),
        other => {
            println!("unknown mode {other:?}");
            Err(CallError::Host(HostError::InvalidArgument))
        }
    }
}

/// One end of a raw connection to a card's driver.
struct End {
    device: Portal<dyn NetworkDevice>,
    rx: Memory,
    tx: Memory,
    wake: AtomicVariable,
    slot: u64,
    slots: u32,
    mac: [u8; 6],
}

impl End {
    fn connect(name: &str, slots: u64) -> Result<End, CallError> {
        let device: Portal<dyn NetworkDevice> = names::lookup(name)?;
        let info = device.info()?;
        let slot = u64::from(info.slot);
        let (rx, tx) = (Memory::new(slots * slot)?, Memory::new(slots * slot)?);
        let wake = AtomicVariable::new(0)?;
        let slots = device.connect(rx.subrange(0, slots * slot)?, tx.read_only()?, wake.clone_handle()?)?;
        Ok(End { device, rx, tx, wake, slot, slots, mac: info.mac_bytes() })
    }

    /// Puts `payload` in transmit slot `i`, addressed to `to`.
    fn put(&self, i: u64, to: [u8; 6], payload: &[u8]) -> Result<(), CallError> {
        let mut frame = Vec::with_capacity(18 + payload.len());
        frame.extend_from_slice(&((14 + payload.len()) as u32).to_le_bytes());
        frame.extend_from_slice(&to);
        frame.extend_from_slice(&self.mac);
        frame.extend_from_slice(&[0x88, 0xb5]);
        frame.extend_from_slice(payload);
        self.tx.write(i * self.slot, &frame)
    }

    /// Waits for frames (woken by the driver's interrupt handler) and takes them.
    fn wait_and_receive(&self) -> Result<Vec<Vec<u8>>, CallError> {
        loop {
            self.wake.set(0)?;
            let count = self.device.receive()?;
            if count > 0 {
                let mut frames = Vec::new();
                for i in 0..u64::from(count) {
                    let len = self.rx.get_u32(i * self.slot)? as usize;
                    let mut frame = alloc::vec![0u8; len];
                    self.rx.read(i * self.slot + 4, &mut frame)?;
                    frames.push(frame);
                }
                return Ok(frames);
            }
            self.wake.block_if_equal(0)?;
        }
    }
}

fn pattern(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
}

fn frames() -> Result<(), CallError> {
    let a = End::connect("netA", 8)?;
    let b = End::connect("netB", 8)?;
    let info = a.device.info()?;
    println!("netA: mtu {} slot {} slots {}", info.mtu, info.slot, a.slots);
    let sizes = [46usize, 1000, info.mtu as usize];
    for (i, len) in sizes.iter().enumerate() {
        a.put(i as u64, b.mac, &pattern(i, *len))?;
    }
    println!("sent: {:?}", a.device.send(3));
    let mut got = Vec::new();
    while got.len() < 3 {
        got.extend(b.wait_and_receive()?);
    }
    let intact =
        got.iter().enumerate().all(|(i, f)| f[..6] == b.mac && f[6..12] == a.mac && f[14..] == pattern(i, sizes[i]));
    println!("netB received {} frames intact: {intact}", got.len());
    a.put(0, b.mac, &pattern(0, info.mtu as usize + 1))?;
    println!("a frame over the MTU: {:?}", a.device.send(1).err());
    a.tx.set_u32(0, 10)?;
    println!("a frame shorter than its header: {:?}", a.device.send(1).err());
    println!("more frames than slots: {:?}", a.device.send(a.slots + 1).err());
    // Nobody takes netB's frames now: its ring of 128 slots fills, and the rest are dropped.
    for i in 0..8 {
        a.put(i, b.mac, &pattern(i as usize, 100))?;
    }
    for _ in 0..25 {
        a.device.send(8)?;
    }
    let stats = b.device.statistics()?;
    println!("netB after 200 more frames: received {} dropped {}", stats.received, stats.dropped);
    let mut drained = 0;
    for _ in 0..100 {
        let count = b.device.receive()?;
        if count == 0 {
            break;
        }
        drained += count;
    }
    println!("netB drained {drained} frames");
    Ok(())
}
