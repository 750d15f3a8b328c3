//! `NetworkDevice`: an Ethernet card, served by its driver (`drv-nic`).
//!
//! Frames travel in memory objects, never through the portal: a client connects once with a
//! receive buffer and a transmit buffer, each cut into slots of [`DeviceInfo::slot`] bytes — a
//! word, the frame's length and in a frame to send where the card is to fill in a TCP or UDP
//! checksum (`domos_abi::nic::FrameWord`), then the frame (Ethernet header first, no Ethernet
//! checksum) — and an
//! atomic variable the driver sets to [`FRAMES`] and wakes whenever frames arrive. Then
//! [`NetworkDevice::send`] sends the frames of the first slots of the transmit buffer and
//! [`NetworkDevice::receive`] fills the first slots of the receive buffer; both carry only a
//! count.

use domos_sdk::sync::AtomicVariable;
use domos_sdk::{CallError, Memory, ReadOnlyMemory, Wire, interface};

/// The value the driver sets the client's variable to when frames arrive.
pub const FRAMES: u32 = 1;

/// What a card is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Wire)]
pub struct DeviceInfo {
    /// The Ethernet address in the low 48 bits, first byte most significant.
    pub mac: u64,
    /// The largest IP packet a frame carries.
    pub mtu: u32,
    /// Bytes per slot of the client's buffers (at least the MTU, the Ethernet header and the
    /// word before it).
    pub slot: u32,
}

impl DeviceInfo {
    /// The Ethernet address, first byte first.
    pub fn mac_bytes(&self) -> [u8; 6] {
        let b = self.mac.to_be_bytes();
        [b[2], b[3], b[4], b[5], b[6], b[7]]
    }
}

/// A card's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Wire)]
pub struct DeviceStatistics {
    /// Frames that arrived into the card's receive ring.
    pub received: u64,
    /// Frames the card dropped on arrival (its receive ring was full, or nobody listened).
    pub dropped: u64,
    /// Frames sent.
    pub sent: u64,
}

/// An Ethernet card.
#[interface(version = "1.0")]
pub trait NetworkDevice {
    /// The card's address, MTU and slot size.
    fn info(&self) -> Result<DeviceInfo, CallError>;
    /// Connects the caller, replacing an earlier client: received frames go into `rx`, frames
    /// to send are taken from `tx`, and `wake` is set to [`FRAMES`] and woken when frames
    /// arrive. Returns how many slots of each buffer the driver uses.
    fn connect(&self, rx: Memory, tx: ReadOnlyMemory, wake: AtomicVariable) -> Result<u32, CallError>;
    /// Sends the frames in the first `count` slots of the transmit buffer; returns how many.
    /// `InvalidArgument` for more slots than connected, a frame shorter than its header or a
    /// checksum to fill in outside its frame,
    /// `MessageTooLarge` for one over the MTU: frames before it were sent.
    fn send(&self, count: u32) -> Result<u32, CallError>;
    /// Moves up to as many received frames as the receive buffer has slots into its first
    /// slots, oldest first; returns how many.
    fn receive(&self) -> Result<u32, CallError>;
    /// The card's counters.
    fn statistics(&self) -> Result<DeviceStatistics, CallError>;
}
