//! `app-net-load`: a UDP load for the link shares of `net-ip` (decision 0010), in one of two
//! roles chosen by its arguments.
//!
//! - `send peer=A.B.C.D port=N name=NAME` sends datagrams of `size=BYTES` (default 1,400: one frame) to
//!   the peer as fast as the stack admits them, from `after=MS` (default 0) for `for=MS` (default
//!   3,000) after it starts; with `class=WEIGHT` it sends in a child class of the one it is bound
//!   to (`Network::class`). Each datagram starts with `NAME` (up to 8 bytes), so the sink can
//!   tell the senders apart. It prints `NAME sent BYTES in MS ms (N refused)`.
//! - `sink port=N` receives datagrams on port `N` for `for=MS` (default 5,000) and prints, for
//!   every `interval=MS` (default 250), the bytes received from each sender name:
//!   `interval I: NAME BYTES NAME BYTES …` (names in the order first seen), then `sink done`.
//!
//! Every loop is bounded in time and in count.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use domos_interfaces::network::{Network, UdpSocket, parse_ipv4};
use domos_sdk::{CallError, HostError, Portal, names, println};

domos_sdk::component! { main: main }

/// Bytes of a datagram that carry the sender's name.
const TAG: usize = 8;
/// Datagrams one sender sends at most, whatever the time.
const MAX_DATAGRAMS: u64 = 10_000_000;

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let arg = |key: &str| args.split_whitespace().find_map(|w| w.strip_prefix(key));
    let number = |key: &str, default: u64| arg(key).and_then(|v| v.parse::<u64>().ok()).unwrap_or(default);
    let bad = CallError::Host(HostError::InvalidArgument);
    let net: Portal<dyn Network> = names::lookup("Network")?;
    let port = u16::try_from(number("port=", 9)).map_err(|_| bad)?;
    if args.split_whitespace().any(|w| w == "sink") {
        return sink(&net, port, number("for=", 5000), number("interval=", 250).max(1));
    }
    let peer = arg("peer=").and_then(parse_ipv4).ok_or(bad)?;
    let name = arg("name=").unwrap_or("load");
    let size = (number("size=", 1400) as usize).clamp(TAG, 16 * 1024 - 64);
    let net = match arg("class=").and_then(|w| w.parse::<u32>().ok()) {
        Some(weight) => net.class(weight)?,
        None => net,
    };
    domos_sdk::thread::sleep(core::time::Duration::from_millis(number("after=", 0)))?;
    send(&net, peer, port, name, size, number("for=", 3000))
}

/// Sends datagrams of `size` bytes tagged with `name` to `peer`:`port` for `ms` milliseconds.
fn send(net: &Portal<dyn Network>, peer: u32, port: u16, name: &str, size: usize, ms: u64) -> Result<(), CallError> {
    let udp = net.udp_bind(0)?;
    let mut datagram = vec![0u8; size];
    let tag = name.as_bytes();
    datagram[..tag.len().min(TAG)].copy_from_slice(&tag[..tag.len().min(TAG)]);
    let start = domos_sdk::time::now_ns();
    let end = start + ms * 1_000_000;
    let (mut sent, mut refused) = (0u64, 0u64);
    for _ in 0..MAX_DATAGRAMS {
        if domos_sdk::time::now_ns() >= end {
            break;
        }
        match udp.send_to(peer, port, datagram.clone()) {
            Ok(()) => sent += size as u64,
            Err(CallError::Host(HostError::QuotaExceeded)) => refused += 1,
            Err(e) => return Err(e),
        }
    }
    let took = (domos_sdk::time::now_ns() - start) / 1_000_000;
    println!("{name} sent {sent} in {took} ms ({refused} refused)");
    Ok(())
}

/// Receives on `port` for `ms` milliseconds and prints each sender's bytes per `interval` ms.
fn sink(net: &Portal<dyn Network>, port: u16, ms: u64, interval: u64) -> Result<(), CallError> {
    let udp = net.udp_bind(port)?;
    println!("sink on UDP port {port}");
    let start = domos_sdk::time::now_ns();
    let intervals = ms.div_ceil(interval) as usize;
    // Per sender name: its bytes in each interval.
    let mut senders: Vec<(String, Vec<u64>)> = Vec::new();
    for _ in 0..MAX_DATAGRAMS {
        let elapsed = (domos_sdk::time::now_ns() - start) / 1_000_000;
        if elapsed >= ms {
            break;
        }
        let Some(datagram) = udp.receive_from(50)? else {
            continue;
        };
        let at = (((domos_sdk::time::now_ns() - start) / 1_000_000 / interval) as usize).min(intervals - 1);
        let tag = &datagram.data[..datagram.data.len().min(TAG)];
        let name = String::from_utf8_lossy(tag).trim_end_matches('\0').into();
        let index = match senders.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None if senders.len() < 16 => {
                senders.push((name, vec![0; intervals]));
                senders.len() - 1
            }
            None => continue,
        };
        senders[index].1[at] += datagram.data.len() as u64;
    }
    for i in 0..intervals {
        let mut line = alloc::format!("interval {i}:");
        for (name, bytes) in &senders {
            line.push_str(&alloc::format!(" {name} {}", bytes[i]));
        }
        println!("{line}");
    }
    println!("sink done");
    Ok(())
}
