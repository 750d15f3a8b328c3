//! `app-net-load`: a UDP or TCP load for the link shares of `net-ip` (decision 0010), in one of
//! two roles chosen by its arguments.
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
//! With `tcp`, both roles use a TCP connection per sender instead: the sender connects and
//! streams `size=BYTES` (default 16 KiB) at a time, its name in the stream's first 8 bytes; the
//! sink accepts every connection, reads each on a thread of its own and counts as before.
//!
//! Every loop is bounded in time and in count.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use domos_interfaces::network::{Network, TcpListener, TcpStream, UdpSocket, parse_ipv4};
use domos_sdk::{CallError, HostError, Mutex, Portal, names, println, thread};

domos_sdk::component! { init: init, main: main }

/// Bytes of a datagram that carry the sender's name.
const TAG: usize = 8;
/// Datagrams one sender sends at most, whatever the time.
const MAX_DATAGRAMS: u64 = 10_000_000;

/// The sink's socket, bound in `init`, so that it is there before any sender's `main` connects.
static SINK: Mutex<Option<Sink>> = Mutex::new(None);

enum Sink {
    Udp(Portal<dyn UdpSocket>),
    Tcp(Portal<dyn TcpListener>),
}

/// The value of argument `key` as a number, or `default`.
fn number(args: &str, key: &str, default: u64) -> u64 {
    args.split_whitespace().find_map(|w| w.strip_prefix(key)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Whether the argument `word` is given.
fn flag(args: &str, word: &str) -> bool {
    args.split_whitespace().any(|w| w == word)
}

fn init() -> Result<(), CallError> {
    let args = domos_sdk::args();
    if !flag(&args, "sink") {
        return Ok(());
    }
    let port = u16::try_from(number(&args, "port=", 9)).map_err(|_| CallError::Host(HostError::InvalidArgument))?;
    let net: Portal<dyn Network> = names::lookup("Network")?;
    let sink = if flag(&args, "tcp") { Sink::Tcp(net.tcp_listen(port, 4)?) } else { Sink::Udp(net.udp_bind(port)?) };
    println!("sink on {} port {port}", if flag(&args, "tcp") { "TCP" } else { "UDP" });
    *SINK.lock() = Some(sink);
    Ok(())
}

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let arg = |key: &str| args.split_whitespace().find_map(|w| w.strip_prefix(key));
    let number = |key: &str, default: u64| number(&args, key, default);
    let bad = CallError::Host(HostError::InvalidArgument);
    let tcp = flag(&args, "tcp");
    if let Some(sink) = SINK.lock().take() {
        let counts = Counts::new(number("for=", 5000), number("interval=", 250).max(1));
        return match sink {
            Sink::Udp(udp) => receive(&udp, counts),
            Sink::Tcp(listener) => accept(&listener, counts),
        };
    }
    let net: Portal<dyn Network> = names::lookup("Network")?;
    let port = u16::try_from(number("port=", 9)).map_err(|_| bad)?;
    let peer = arg("peer=").and_then(parse_ipv4).ok_or(bad)?;
    let name = arg("name=").unwrap_or("load");
    let size = (number("size=", if tcp { 16 * 1024 } else { 1400 }) as usize).clamp(TAG, 16 * 1024 - 64);
    let net = match arg("class=").and_then(|w| w.parse::<u32>().ok()) {
        Some(weight) => net.class(weight)?,
        None => net,
    };
    domos_sdk::thread::sleep(core::time::Duration::from_millis(number("after=", 0)))?;
    if tcp {
        tcp_send(&net, peer, port, name, size, number("for=", 3000))
    } else {
        send(&net, peer, port, name, size, number("for=", 3000))
    }
}

/// `size` bytes that start with `name` (cut to `TAG` bytes, padded with zeros).
fn tagged(name: &str, size: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; size];
    let tag = &name.as_bytes()[..name.len().min(TAG)];
    bytes[..tag.len()].copy_from_slice(tag);
    bytes
}

/// Streams `size` bytes at a time, the first starting with `name`, to `peer`:`port` over TCP
/// for `ms` milliseconds.
fn tcp_send(
    net: &Portal<dyn Network>,
    peer: u32,
    port: u16,
    name: &str,
    size: usize,
    ms: u64,
) -> Result<(), CallError> {
    let stream = net.tcp_connect(peer, port, 3000)?.ok_or(CallError::Host(HostError::ServiceDead))?;
    let chunk = tagged(name, size);
    let start = domos_sdk::time::now_ns();
    let end = start + ms * 1_000_000;
    let mut sent = 0u64;
    for _ in 0..MAX_DATAGRAMS {
        let now = domos_sdk::time::now_ns();
        if now >= end {
            break;
        }
        let wait = ((end - now) / 1_000_000).min(100) as u32;
        sent += u64::from(stream.send(&chunk, wait)?);
    }
    stream.close()?;
    let took = (domos_sdk::time::now_ns() - start) / 1_000_000;
    println!("{name} sent {sent} in {took} ms over TCP");
    Ok(())
}

/// Sends datagrams of `size` bytes tagged with `name` to `peer`:`port` for `ms` milliseconds.
fn send(net: &Portal<dyn Network>, peer: u32, port: u16, name: &str, size: usize, ms: u64) -> Result<(), CallError> {
    let udp = net.udp_bind(0)?;
    let datagram = tagged(name, size);
    let start = domos_sdk::time::now_ns();
    let end = start + ms * 1_000_000;
    let (mut sent, mut refused) = (0u64, 0u64);
    for _ in 0..MAX_DATAGRAMS {
        if domos_sdk::time::now_ns() >= end {
            break;
        }
        match udp.send_to(peer, port, &datagram) {
            Ok(()) => sent += size as u64,
            Err(CallError::Host(HostError::QuotaExceeded)) => refused += 1,
            Err(e) => return Err(e),
        }
    }
    let took = (domos_sdk::time::now_ns() - start) / 1_000_000;
    println!("{name} sent {sent} in {took} ms ({refused} refused)");
    Ok(())
}

/// Bytes received per sender name and interval, from the sink's start.
struct Counts {
    start: u64,
    ms: u64,
    interval: u64,
    /// Per sender name (16 at most, in the order first seen): its bytes in each interval.
    senders: Mutex<Vec<(String, Vec<u64>)>>,
}

impl Counts {
    fn new(ms: u64, interval: u64) -> Arc<Counts> {
        Arc::new(Counts { start: domos_sdk::time::now_ns(), ms, interval, senders: Mutex::new(Vec::new()) })
    }

    /// Milliseconds since the sink started.
    fn elapsed(&self) -> u64 {
        (domos_sdk::time::now_ns() - self.start) / 1_000_000
    }

    fn intervals(&self) -> usize {
        self.ms.div_ceil(self.interval) as usize
    }

    /// Counts `bytes` for the sender whose tag is `tag`, in the interval of now.
    fn add(&self, tag: &[u8], bytes: u64) {
        let at = ((self.elapsed() / self.interval) as usize).min(self.intervals() - 1);
        let name: String = String::from_utf8_lossy(&tag[..tag.len().min(TAG)]).trim_end_matches('\0').into();
        let mut senders = self.senders.lock();
        let index = match senders.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None if senders.len() < 16 => {
                senders.push((name, vec![0; self.intervals()]));
                senders.len() - 1
            }
            None => return,
        };
        senders[index].1[at] += bytes;
    }

    fn print(&self) {
        let senders = self.senders.lock();
        for i in 0..self.intervals() {
            let mut line = alloc::format!("interval {i}:");
            for (name, bytes) in senders.iter() {
                line.push_str(&alloc::format!(" {name} {}", bytes[i]));
            }
            println!("{line}");
        }
        println!("sink done");
    }
}

/// Receives datagrams on `udp` until the counts' time is up and prints each sender's bytes
/// per interval.
fn receive(udp: &Portal<dyn UdpSocket>, counts: Arc<Counts>) -> Result<(), CallError> {
    for _ in 0..MAX_DATAGRAMS {
        if counts.elapsed() >= counts.ms {
            break;
        }
        if let Some(datagram) = udp.receive_from(50)? {
            counts.add(&datagram.data, datagram.data.len() as u64);
        }
    }
    counts.print();
    Ok(())
}

/// Accepts TCP connections on `listener` until the counts' time is up, reads each on a thread of
/// its own (its sender's name in its first `TAG` bytes), and prints each sender's bytes per
/// interval.
fn accept(listener: &Portal<dyn TcpListener>, counts: Arc<Counts>) -> Result<(), CallError> {
    let mut readers = Vec::new();
    for _ in 0..MAX_DATAGRAMS {
        if counts.elapsed() >= counts.ms {
            break;
        }
        if let Some(stream) = listener.accept(50)? {
            let counts = counts.clone();
            readers.push(thread::spawn(move || read_stream(&stream, &counts).map_or(1, |()| 0))?);
        }
    }
    for reader in readers {
        reader.join()?;
    }
    counts.print();
    Ok(())
}

/// Counts what `stream` brings until its sender closes it or the counts' time is up.
fn read_stream(stream: &Portal<dyn TcpStream>, counts: &Counts) -> Result<(), CallError> {
    let mut tag = Vec::new();
    for _ in 0..MAX_DATAGRAMS {
        if counts.elapsed() >= counts.ms {
            break;
        }
        match stream.receive(64 * 1024, 50)? {
            Some(data) if data.is_empty() => break,
            Some(data) => {
                if tag.len() < TAG {
                    tag.extend_from_slice(&data[..data.len().min(TAG - tag.len())]);
                }
                counts.add(&tag, data.len() as u64);
            }
            None => {}
        }
    }
    stream.close()
}
