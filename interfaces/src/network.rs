//! The IP stack's services (`net-ip`): `Network`, the stack itself, hands out sockets, each a
//! capability of its own — a [`UdpSocket`], a [`TcpListener`] that hands out a [`TcpStream`] per
//! accepted connection, or a [`TcpStream`] it connected. Dropping the last portal to a socket
//! closes it.
//!
//! Addresses are IPv4 addresses as `u32`, first byte most significant (`10.0.0.1` is
//! `0x0a00_0001`, see [`ipv4`]). Calls that wait (receive, accept, connect, ping) take a timeout
//! in milliseconds and wait inside the stack (its manifest says `services_wait`), costing the
//! caller no CPU; a timeout is `Ok(None)`, not an error.

use alloc::vec::Vec;
use domos_sdk::{CallError, Portal, Wire, interface};

/// The `u32` of the IPv4 address `a.b.c.d`.
pub const fn ipv4(a: u8, b: u8, c: u8, d: u8) -> u32 {
    u32::from_be_bytes([a, b, c, d])
}

/// Parses `a.b.c.d`.
pub fn parse_ipv4(text: &str) -> Option<u32> {
    let mut bytes = [0u8; 4];
    let mut parts = text.split('.');
    for byte in &mut bytes {
        *byte = parts.next()?.parse().ok()?;
    }
    parts.next().is_none().then(|| u32::from_be_bytes(bytes))
}

/// A datagram received, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Wire)]
pub struct Datagram {
    /// The sender's address.
    pub address: u32,
    /// The sender's port.
    pub port: u16,
    /// The payload.
    pub data: Vec<u8>,
}

/// The stack's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Wire)]
pub struct NetworkStatistics {
    /// Frames taken from the device.
    pub frames_in: u64,
    /// Frames handed to the device.
    pub frames_out: u64,
    /// Sockets open now.
    pub sockets: u32,
}

/// The IP stack, or one class of its link: every socket made through a portal sends in that
/// portal's class, and where the stack paces its link (`net-ip`'s `rate=`) the classes with data
/// waiting share it by their weights, hierarchically (H-PFQ, Bennett and Zhang; GVM, Back et al.
/// §3.3).
#[interface(version = "1.1")]
pub trait Network {
    /// The stack's own address.
    fn address(&self) -> Result<u32, CallError>;
    /// A UDP socket bound to `port` (0: a free one). `NameTaken` for a port in use.
    fn udp_bind(&self, port: u16) -> Result<Portal<dyn UdpSocket>, CallError>;
    /// A listener on TCP `port` keeping `backlog` (1 to 16) connections ready to accept.
    fn tcp_listen(&self, port: u16, backlog: u32) -> Result<Portal<dyn TcpListener>, CallError>;
    /// Connects to `address`:`port`; `None` when no connection was made within `timeout_ms`.
    fn tcp_connect(&self, address: u32, port: u16, timeout_ms: u32)
    -> Result<Option<Portal<dyn TcpStream>>, CallError>;
    /// Sends an ICMP echo request with `len` bytes of payload to `address`; the round-trip time
    /// in nanoseconds of the matching reply, or `None` after `timeout_ms`.
    fn ping(&self, address: u32, len: u32, timeout_ms: u32) -> Result<Option<u64>, CallError>;
    /// The stack's counters.
    fn statistics(&self) -> Result<NetworkStatistics, CallError>;
    /// A child class of this portal's class with `weight` (1 to 1,000) relative to its siblings:
    /// it divides this class's share, never adds to it. `QuotaExceeded` when the stack holds its
    /// most classes. Since 1.1.
    fn class(&self, weight: u32) -> Result<Portal<dyn Network>, CallError>;
}

/// A UDP socket.
#[interface(version = "1.0")]
pub trait UdpSocket {
    /// The local port.
    fn port(&self) -> Result<u16, CallError>;
    /// Sends `data` (up to 8 KiB; larger than the MTU, it is sent in IP fragments) to
    /// `address`:`port`. `QuotaExceeded` while the send buffer is full.
    fn send_to(&self, address: u32, port: u16, data: &[u8]) -> Result<(), CallError>;
    /// The next datagram, waiting up to `timeout_ms`.
    fn receive_from(&self, timeout_ms: u32) -> Result<Option<Datagram>, CallError>;
}

/// A TCP listener.
#[interface(version = "1.0")]
pub trait TcpListener {
    /// The next connection, waiting up to `timeout_ms`.
    fn accept(&self, timeout_ms: u32) -> Result<Option<Portal<dyn TcpStream>>, CallError>;
}

/// One TCP connection.
#[interface(version = "1.0")]
pub trait TcpStream {
    /// The peer's address and port.
    fn peer(&self) -> Result<(u32, u16), CallError>;
    /// Queues `data`, waiting up to `timeout_ms` for room; returns how many bytes were queued
    /// (fewer after a timeout). `ServiceDead` when the connection can no longer send.
    fn send(&self, data: &[u8], timeout_ms: u32) -> Result<u32, CallError>;
    /// Up to `max` bytes (at most 32 KiB), waiting up to `timeout_ms` for some: `None` after a
    /// timeout, an empty vector once the peer closed its side.
    fn receive(&self, max: u32, timeout_ms: u32) -> Result<Option<Vec<u8>>, CallError>;
    /// Closes the sending side once what was queued has been sent.
    fn close(&self) -> Result<(), CallError>;
}
