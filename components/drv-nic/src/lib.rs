//! `drv-nic`: the driver of an emulated network card (`[[nic]]`, opened by name from the
//! argument `nic=NAME`; its domain needs the `devices` grant). It serves `NetworkDevice` under
//! the name `NetworkDevice`.
//!
//! The driver owns the card's receive ring, a memory object of `ring=N` slots (default 128)
//! that the kernel fills with received frames. Its one client (the IP stack) connects with
//! buffers of its own: received frames move from the ring into the client's by `memory_copy`,
//! which copies inside the kernel, never through this component's heap or a portal message;
//! the client's transmit buffer becomes the card's transmit ring, which the kernel sends from,
//! so a frame the client wrote leaves with no copy on the way. The rings are attached to the
//! card when the client connects (again for a new client): until then the card drops frames.
//! When frames arrive, the kernel wakes the client through the atomic variable it connected
//! with (`nic_notify`: set to [`FRAMES`], one waiter woken), with no handler thread of this
//! driver in between — all a handler here did, at the cost of a thread's run per frame.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use core::sync::atomic::{AtomicU32, Ordering};
use domos_abi::nic::FrameWord;
use domos_interfaces::network_device::{DeviceInfo, DeviceStatistics, FRAMES, NetworkDevice};
use domos_sdk::sync::AtomicVariable;
use domos_sdk::{CallError, HostError, Memory, Mutex, ReadOnlyMemory, names};

domos_sdk::component! { init: init }

/// Slots per ring unless `ring=N` says otherwise.
const DEFAULT_RING: u32 = 128;
/// Bytes of the word before each frame (its length, and a checksum for the card to fill in).
const HEADER: u32 = FrameWord::BYTES as u32;
/// Bytes of an Ethernet header.
const ETHERNET: u32 = 14;

/// The card's handle.
static NIC: AtomicU32 = AtomicU32::new(0);

struct Rings {
    /// The receive ring, as attached to the card, and as the driver reads it.
    ring: Memory,
    rx: ReadOnlyMemory,
    slot: u32,
    slots: u32,
    /// Receive slots taken since the rings were attached (the oldest unreleased slot is
    /// `taken % slots`).
    taken: u64,
    mtu: u32,
    mac: u64,
    client: Option<Client>,
}

struct Client {
    rx: Memory,
    /// Also the card's transmit ring; held so that it lives as long as the connection.
    _tx: ReadOnlyMemory,
    slots: u32,
    /// The interrupt source that notifies the client's variable, detached when another connects.
    notification: u32,
}

static RINGS: Mutex<Option<Rings>> = Mutex::new(None);

fn host(code: i64) -> Result<i64, CallError> {
    if code < 0 { Err(CallError::Host(HostError::from_code(code).unwrap_or(HostError::BadRequest))) } else { Ok(code) }
}

fn init() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let arg = |key: &str| args.split_whitespace().find_map(|w| w.strip_prefix(key));
    let name = arg("nic=").unwrap_or("nic0");
    let ring = arg("ring=").and_then(|n| n.parse().ok()).unwrap_or(DEFAULT_RING).clamp(2, 1024);
    let nic = host(domos_sys::nic_open(name))? as u32;
    NIC.store(nic, Ordering::Release);
    let mtu = host(domos_sys::nic_info(nic, 0))? as u32;
    let mac = host(domos_sys::nic_info(nic, 1))? as u64;
    let slot = (HEADER + ETHERNET + mtu).next_multiple_of(64);
    let ring = Memory::new(u64::from(slot) * u64::from(ring))?;
    let rx = ring.read_only()?;
    *RINGS.lock() = Some(Rings { ring, rx, slot, slots: 0, taken: 0, mtu, mac, client: None });
    names::register("NetworkDevice", &Driver.into_portal())
}

struct Driver;

fn with_rings<T>(f: impl FnOnce(&mut Rings) -> Result<T, CallError>) -> Result<T, CallError> {
    let mut rings = RINGS.lock();
    f(rings.as_mut().ok_or(CallError::Host(HostError::NotFound))?)
}

impl NetworkDevice for Driver {
    fn info(&self) -> Result<DeviceInfo, CallError> {
        with_rings(|r| Ok(DeviceInfo { mac: r.mac, mtu: r.mtu, slot: r.slot }))
    }

    fn connect(&self, rx: Memory, tx: ReadOnlyMemory, wake: AtomicVariable) -> Result<u32, CallError> {
        with_rings(|r| {
            let slot = u64::from(r.slot);
            if rx.len()? < slot {
                return Err(CallError::Host(HostError::InvalidArgument));
            }
            // The kernel checks the transmit buffer (a slot at least), counts each ring's slots
            // and returns the receive ring's.
            let nic = NIC.load(Ordering::Acquire);
            let ring = host(domos_sys::nic_attach(nic, r.ring.handle(), tx.handle(), r.slot))? as u32;
            let slots = (rx.len()? / slot).min(u64::from(ring)) as u32;
            if let Some(old) = r.client.take() {
                domos_sys::interrupt_detach(old.notification);
            }
            // The kernel holds the variable from here on; `wake`'s handle goes when it drops.
            let notification = host(domos_sys::nic_notify(nic, wake.handle(), FRAMES))? as u32;
            (r.slots, r.taken) = (ring, 0);
            r.client = Some(Client { rx, _tx: tx, slots, notification });
            Ok(slots)
        })
    }

    fn send(&self, count: u32) -> Result<u32, CallError> {
        with_rings(|r| {
            let client = r.client.as_ref().ok_or(CallError::Host(HostError::NotFound))?;
            if count > client.slots {
                return Err(CallError::Host(HostError::InvalidArgument));
            }
            // The frames are in the client's buffer, the card's transmit ring, and the kernel
            // checks each one's word. Transmission copies them out before it returns:
            // the buffer is the client's again for the next call.
            host(domos_sys::nic_transmit(NIC.load(Ordering::Acquire), 0, count)).map(|sent| sent as u32)
        })
    }

    fn receive(&self) -> Result<u32, CallError> {
        with_rings(|r| {
            let client = r.client.as_ref().ok_or(CallError::Host(HostError::NotFound))?;
            let nic = NIC.load(Ordering::Acquire);
            let ready = host(domos_sys::nic_ready(nic))? as u64;
            let count = ready.min(u64::from(client.slots));
            let slot = u64::from(r.slot);
            for i in 0..count {
                let at = (r.taken + i) % u64::from(r.slots) * slot;
                let len = u64::from(FrameWord::decode(r.rx.get_u32(at)?).len);
                client.rx.copy_from(i * slot, &r.rx, at, (len + u64::from(HEADER)).min(slot))?;
            }
            if count > 0 {
                host(domos_sys::nic_release(nic, count as u32))?;
            }
            r.taken += count;
            Ok(count as u32)
        })
    }

    fn statistics(&self) -> Result<DeviceStatistics, CallError> {
        let nic = NIC.load(Ordering::Acquire);
        let info = |what| host(domos_sys::nic_info(nic, what)).map(|v| v as u64);
        Ok(DeviceStatistics { received: info(2)?, dropped: info(3)?, sent: info(4)? })
    }
}
