//! `app-net`: a network client over the IP stack's `Network`. Arguments: `peer=A.B.C.D`,
//! `port=N` (default 7), `tcp=BYTES` (default 1 MiB) and `rounds=N` (default 100). It sends
//! three pings, UDP echoes of 100 and 8,192 bytes (fragmented over a 1,500-byte MTU), `N` echoes
//! of 64 bytes one after the other (timed), and a TCP echo of `BYTES` (timed), checks each byte
//! for byte, and prints the results and `client done`. A part the stack refuses (an answer-only
//! stack refuses all three) is reported as `ping: …`, `udp: …` or `tcp: …`, and the next runs.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::vec::Vec;
use domos_interfaces::network::{Network, TcpStream, UdpSocket, parse_ipv4};
use domos_sdk::{CallError, HostError, Portal, names, println};

domos_sdk::component! { main: main }

fn pattern(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
}

fn tcp_pattern(i: usize) -> u8 {
    (i * 7 + i / 251) as u8
}

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let arg = |key: &str| args.split_whitespace().find_map(|w| w.strip_prefix(key));
    let bad = CallError::Host(HostError::InvalidArgument);
    let peer = arg("peer=").and_then(parse_ipv4).ok_or(bad)?;
    let port: u16 = arg("port=").and_then(|p| p.parse().ok()).unwrap_or(7);
    let total: usize = arg("tcp=").and_then(|p| p.parse().ok()).unwrap_or(1 << 20);
    let net: Portal<dyn Network> = names::lookup("Network")?;
    let report = |part: &str, result: Result<(), CallError>| {
        if let Err(e) = result {
            println!("{part}: {e}");
        }
    };
    report("ping", pings(&net, peer));
    report("udp", udp_echoes(&net, peer, port, &arg));
    report("tcp", tcp_echo(&net, peer, port, total));
    println!("client done");
    Ok(())
}

/// Three pings of `peer`.
fn pings(net: &Portal<dyn Network>, peer: u32) -> Result<(), CallError> {
    let mut answered = 0;
    for _ in 0..3 {
        if net.ping(peer, 56, 2000)?.is_some() {
            answered += 1;
        }
    }
    println!("{answered} of 3 pings answered");
    Ok(())
}

/// UDP echoes of 100 and 8,192 bytes, then `rounds=` timed echoes of 64 bytes.
fn udp_echoes<'a>(
    net: &Portal<dyn Network>,
    peer: u32,
    port: u16,
    arg: &impl Fn(&str) -> Option<&'a str>,
) -> Result<(), CallError> {
    let udp = net.udp_bind(0)?;
    let mut intact = true;
    for len in [100usize, 8192] {
        let data = pattern(len, len);
        udp.send_to(peer, port, &data)?;
        let reply = udp.receive_from(3000)?;
        let good = reply.as_ref().is_some_and(|r| r.address == peer && r.port == port && r.data == data);
        if !good {
            println!("udp echo of {len} bytes: {:?}", reply.map(|r| (r.address, r.port, r.data.len())));
        }
        intact &= good;
    }
    println!("udp echo of 100 and 8192 bytes intact: {intact}");
    // The round-trip time of small datagrams, one in flight.
    let rounds: u64 = arg("rounds=").and_then(|r| r.parse().ok()).unwrap_or(100);
    let start = domos_sdk::time::now_ns();
    let mut answered = 0u64;
    for i in 0..rounds {
        udp.send_to(peer, port, &pattern(i as usize, 64))?;
        if udp.receive_from(1000)?.is_some() {
            answered += 1;
        }
    }
    let elapsed = domos_sdk::time::now_ns() - start;
    println!("udp round trip of 64 bytes: {} us over {answered} of {rounds}", elapsed / rounds.max(1) / 1000);
    Ok(())
}

/// A TCP echo of `total` bytes, sent and received at once.
fn tcp_echo(net: &Portal<dyn Network>, peer: u32, port: u16, total: usize) -> Result<(), CallError> {
    let start = domos_sdk::time::now_ns();
    let stream = net.tcp_connect(peer, port, 3000)?.ok_or(CallError::Host(HostError::ServiceDead))?;
    let (mut sent, mut received, mut intact) = (0usize, 0usize, true);
    let deadline = start + 60_000_000_000;
    for _ in 0..10_000_000 {
        if received >= total || domos_sdk::time::now_ns() > deadline {
            break;
        }
        let mut progress = false;
        if sent < total {
            let end = (sent + 16 * 1024).min(total);
            let chunk: Vec<u8> = (sent..end).map(tcp_pattern).collect();
            let n = stream.send(&chunk, 0)? as usize;
            sent += n;
            progress = n > 0;
        }
        let wait = if progress { 0 } else { 5 };
        match stream.receive(32 * 1024, wait)? {
            Some(data) if data.is_empty() => break,
            Some(data) => {
                intact &= data.iter().enumerate().all(|(j, b)| *b == tcp_pattern(received + j));
                received += data.len();
            }
            None => {}
        }
    }
    stream.close()?;
    let ms = (domos_sdk::time::now_ns() - start) / 1_000_000;
    println!("tcp echo of {received} bytes intact: {}", intact && received == total);
    println!(
        "tcp echo took {ms} ms ({} MB/s each way)",
        (received as u64 * 1000).checked_div(ms * 1_000_000).unwrap_or(0)
    );
    Ok(())
}
