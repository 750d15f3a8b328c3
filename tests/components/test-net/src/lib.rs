//! `test-net`: exercises the network, chosen by its argument.
//!
//! * `frames`: raw Ethernet frames between two `NetworkDevice` drivers (`netA`, `netB`) over a
//!   pair of cards: delivery intact, woken by the receive interrupt; a checksum the card fills
//!   in; frames over the MTU, too short, too many or with a checksum outside them refused; a
//!   full receive ring drops and counts.
//! * `inject`: raw frames to the stack at 10.0.0.2 through the card `netA` (no stack of its own,
//!   it speaks as 10.0.0.1): malformed Ethernet, ARP, IPv4, ICMP, UDP and TCP, then well-formed
//!   ARP, ping, UDP and TCP requests, whose answers show that the stack kept serving.
//! * `sockets`: through the stack `Network`, opens UDP sockets and TCP listeners until the stack
//!   refuses one, then echoes a datagram through the echo service at 10.0.0.2 on a socket opened
//!   before: a stack whose heap or socket table is full refuses sockets and keeps serving.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::vec::Vec;
use domos_abi::nic::{ChecksumAt, FrameWord};
use domos_interfaces::network::{Network, UdpSocket};
use domos_interfaces::network_device::NetworkDevice;
use domos_sdk::sync::AtomicVariable;
use domos_sdk::{CallError, HostError, Memory, Portal, names, println};

domos_sdk::component! { main: main }

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    match args.split_whitespace().next().unwrap_or("") {
        "frames" => frames(),
        "inject" => inject(),
        "sockets" => sockets(),
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

    /// Sends one raw frame (Ethernet header included).
    fn send_raw(&self, frame: &[u8]) -> Result<u32, CallError> {
        self.tx.set_u32(0, frame.len() as u32)?;
        self.tx.write(4, frame)?;
        self.device.send(1)
    }

    /// Whether a frame `wanted` accepts arrives within about two seconds.
    fn expect(&self, wanted: impl Fn(&[u8]) -> bool) -> Result<bool, CallError> {
        for _ in 0..200 {
            let count = self.device.receive()?;
            for i in 0..u64::from(count) {
                let len = self.rx.get_u32(i * self.slot)? as usize;
                let mut frame = alloc::vec![0u8; len.min(self.slot as usize - 4)];
                self.rx.read(i * self.slot + 4, &mut frame)?;
                if wanted(&frame) {
                    return Ok(true);
                }
            }
            if count == 0 {
                domos_sdk::thread::sleep(core::time::Duration::from_millis(10))?;
            }
        }
        Ok(false)
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
    for _ in 0..100 {
        if got.len() >= 3 {
            break;
        }
        got.extend(b.wait_and_receive()?);
    }
    let intact =
        got.iter().enumerate().all(|(i, f)| f[..6] == b.mac && f[6..12] == a.mac && f[14..] == pattern(i, sizes[i]));
    println!("netB received {} frames intact: {intact}", got.len());
    // A frame that asks the card to fill in a checksum over its bytes from 34 on, in the field 16
    // bytes further, which holds a pseudo-header's sum: the sum of the bytes the peer gets, with
    // the pseudo-header's, is all ones (`checksum` gives the pseudo-header's sum back).
    let payload = pattern(5, 300);
    let pseudo = u16::from_be_bytes([payload[34 + 16 - 14], payload[34 + 17 - 14]]);
    a.put(0, b.mac, &payload)?;
    let at = ChecksumAt { start: 34, offset: 16 };
    a.tx.set_u32(0, FrameWord { len: 14 + 300, checksum: Some(at) }.encode())?;
    a.device.send(1)?;
    let filled = b.wait_and_receive()?;
    println!("a checksum the card filled in: {:?}", filled.first().map(|f| checksum(&f[34..]) == pseudo));
    a.tx.set_u32(0, FrameWord { len: 14 + 30, checksum: Some(at) }.encode())?;
    println!("a checksum outside its frame: {:?}", a.device.send(1).err());
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

/// The Internet checksum of `bytes`.
fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

const ME: [u8; 4] = [10, 0, 0, 1];
const STACK_IP: [u8; 4] = [10, 0, 0, 2];

/// An IPv4 packet from `ME` to the stack: header (checksummed) and payload.
fn ipv4(protocol: u8, id: u16, fragment: u16, payload: &[u8]) -> Vec<u8> {
    let mut header = [0u8; 20];
    header[0] = 0x45;
    header[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
    header[4..6].copy_from_slice(&id.to_be_bytes());
    header[6..8].copy_from_slice(&fragment.to_be_bytes());
    header[8] = 64;
    header[9] = protocol;
    header[12..16].copy_from_slice(&ME);
    header[16..20].copy_from_slice(&STACK_IP);
    let sum = checksum(&header);
    header[10..12].copy_from_slice(&sum.to_be_bytes());
    let mut packet = header.to_vec();
    packet.extend_from_slice(payload);
    packet
}

/// A UDP or TCP pseudo-header checksum over `segment` (whose checksum field is zero).
fn transport_checksum(protocol: u8, segment: &[u8]) -> u16 {
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&ME);
    pseudo.extend_from_slice(&STACK_IP);
    pseudo.extend_from_slice(&[0, protocol]);
    pseudo.extend_from_slice(&(segment.len() as u16).to_be_bytes());
    pseudo.extend_from_slice(segment);
    checksum(&pseudo)
}

fn udp(source: u16, port: u16, data: &[u8]) -> Vec<u8> {
    let mut segment = Vec::new();
    segment.extend_from_slice(&source.to_be_bytes());
    segment.extend_from_slice(&port.to_be_bytes());
    segment.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
    segment.extend_from_slice(&[0, 0]);
    segment.extend_from_slice(data);
    let sum = transport_checksum(17, &segment);
    segment[6..8].copy_from_slice(&sum.to_be_bytes());
    segment
}

/// A TCP SYN from `source` to `port`, with a data offset of `offset` words.
fn tcp_syn(source: u16, port: u16, offset: u8) -> Vec<u8> {
    let mut segment = alloc::vec![0u8; 20];
    segment[0..2].copy_from_slice(&source.to_be_bytes());
    segment[2..4].copy_from_slice(&port.to_be_bytes());
    segment[4..8].copy_from_slice(&1000u32.to_be_bytes());
    segment[12] = offset << 4;
    segment[13] = 0x02;
    segment[14..16].copy_from_slice(&8192u16.to_be_bytes());
    let sum = transport_checksum(6, &segment);
    segment[16..18].copy_from_slice(&sum.to_be_bytes());
    segment
}

fn icmp_echo(id: u16, data: &[u8]) -> Vec<u8> {
    let mut message = alloc::vec![8, 0, 0, 0];
    message.extend_from_slice(&id.to_be_bytes());
    message.extend_from_slice(&1u16.to_be_bytes());
    message.extend_from_slice(data);
    let sum = checksum(&message);
    message[2..4].copy_from_slice(&sum.to_be_bytes());
    message
}

fn inject() -> Result<(), CallError> {
    let wire = End::connect("netA", 4)?;
    let stack_mac: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
    let frame = |to: [u8; 6], ethertype: u16, payload: &[u8]| {
        let mut frame = Vec::new();
        frame.extend_from_slice(&to);
        frame.extend_from_slice(&wire.mac);
        frame.extend_from_slice(&ethertype.to_be_bytes());
        frame.extend_from_slice(payload);
        frame
    };
    let ip = |packet: Vec<u8>| frame(stack_mac, 0x0800, &packet);
    // ARP: who has 10.0.0.2? The answer also teaches the stack where 10.0.0.1 is.
    let mut arp = alloc::vec![0, 1, 8, 0, 6, 4, 0, 1];
    arp.extend_from_slice(&wire.mac);
    arp.extend_from_slice(&ME);
    arp.extend_from_slice(&[0; 6]);
    arp.extend_from_slice(&STACK_IP);
    wire.send_raw(&frame([0xff; 6], 0x0806, &arp))?;
    let arp_reply =
        wire.expect(|f| f.len() >= 42 && f[12..14] == [8, 6] && f[20..22] == [0, 2] && f[28..32] == STACK_IP)?;
    println!("ARP answered: {arp_reply}");
    let mut bad: Vec<Vec<u8>> = Vec::new();
    bad.push(frame(stack_mac, 0x0800, &[]));
    bad.push(frame(stack_mac, 0x0800, &[0x45, 0, 0, 20, 1, 2]));
    let mut long_header = ipv4(17, 1, 0, &udp(1, 7, b"x"));
    long_header[0] = 0x4f;
    bad.push(frame(stack_mac, 0x0800, &long_header));
    let mut too_long = ipv4(17, 2, 0, &udp(1, 7, b"x"));
    too_long[2..4].copy_from_slice(&9000u16.to_be_bytes());
    bad.push(frame(stack_mac, 0x0800, &too_long));
    let mut bad_sum = ipv4(17, 3, 0, &udp(1, 7, b"x"));
    bad_sum[10] ^= 0xff;
    bad.push(frame(stack_mac, 0x0800, &bad_sum));
    let mut version6 = ipv4(17, 4, 0, &udp(1, 7, b"x"));
    version6[0] = 0x65;
    bad.push(frame(stack_mac, 0x0800, &version6));
    let mut udp_long = udp(40000, 7, b"length lies");
    udp_long[4..6].copy_from_slice(&4000u16.to_be_bytes());
    bad.push(ip(ipv4(17, 5, 0, &udp_long)));
    let mut udp_short = udp(40000, 7, b"length lies");
    udp_short[4..6].copy_from_slice(&3u16.to_be_bytes());
    bad.push(ip(ipv4(17, 6, 0, &udp_short)));
    let mut udp_sum = udp(40000, 7, b"bad checksum");
    udp_sum[6] ^= 0x55;
    bad.push(ip(ipv4(17, 7, 0, &udp_sum)));
    bad.push(ip(ipv4(6, 8, 0, &tcp_syn(40001, 7, 15))));
    bad.push(ip(ipv4(6, 9, 0, &tcp_syn(40002, 7, 2))));
    bad.push(ip(ipv4(6, 10, 0, &[0x9c, 0x41, 0, 7, 0])));
    bad.push(ip(ipv4(17, 11, 0x1fff, &[0u8; 64])));
    bad.push(ip(ipv4(17, 12, 0x2000, &udp(40003, 7, &[1u8; 200]))));
    bad.push(ip(ipv4(17, 12, 0x2005, &[2u8; 300])));
    bad.push(ip(ipv4(17, 12, 0x2002, &[3u8; 300])));
    let mut icmp_sum = icmp_echo(0x99, b"bad");
    icmp_sum[2] ^= 0xff;
    bad.push(ip(ipv4(1, 13, 0, &icmp_sum)));
    bad.push(ip(ipv4(1, 14, 0, &[8])));
    let mut arp_bad = arp.clone();
    arp_bad[4] = 200;
    bad.push(frame([0xff; 6], 0x0806, &arp_bad));
    bad.push(frame([0xff; 6], 0x0806, &arp[..10]));
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for i in 0..20 {
        let len = 14 + (seed % 600) as usize;
        let mut junk: Vec<u8> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        junk[..6].copy_from_slice(&stack_mac);
        junk[12..14].copy_from_slice(if i % 2 == 0 { &[8, 0] } else { &[8, 6] });
        bad.push(junk);
    }
    let mut refused = 0;
    for frame in &bad {
        if wire.send_raw(frame).is_err() {
            refused += 1;
        }
    }
    println!("sent {} malformed frames ({refused} refused by the driver)", bad.len() - refused);
    let echo = icmp_echo(0x4242, b"still there?");
    wire.send_raw(&ip(ipv4(1, 20, 0, &echo)))?;
    let pong = wire.expect(|f| {
        f.len() >= 54 && f[23] == 1 && f[34] == 0 && f[38..40] == [0x42, 0x42] && f.ends_with(b"still there?")
    })?;
    println!("ping answered after the malformed frames: {pong}");
    wire.send_raw(&ip(ipv4(17, 21, 0, &udp(40004, 7, b"echo me"))))?;
    let echoed =
        wire.expect(|f| f.len() >= 49 && f[23] == 17 && f[36..38] == [0x9c, 0x44] && f.ends_with(b"echo me"))?;
    println!("udp echo answered after the malformed frames: {echoed}");
    wire.send_raw(&ip(ipv4(6, 22, 0, &tcp_syn(40005, 7, 5))))?;
    let syn_ack = wire.expect(|f| f.len() >= 54 && f[23] == 6 && f[36..38] == [0x9c, 0x45] && f[47] & 0x12 == 0x12)?;
    println!("tcp syn answered with syn-ack after the malformed frames: {syn_ack}");
    println!("inject done");
    Ok(())
}

fn sockets() -> Result<(), CallError> {
    let net: Portal<dyn Network> = names::lookup("Network")?;
    let first = net.udp_bind(0)?;
    let (mut udp, mut tcp) = (Vec::new(), Vec::new());
    let refused = loop {
        // Every third socket a listener with a backlog of four (one listening socket of the
        // stack's until connections are requested).
        let opened = if udp.len() % 3 == 2 && tcp.len() < udp.len() / 3 {
            net.tcp_listen(2000 + tcp.len() as u16, 4).map(|l| tcp.push(l))
        } else {
            net.udp_bind(0).map(|s| udp.push(s))
        };
        if let Err(e) = opened {
            break e;
        }
        if udp.len() + tcp.len() > 1000 {
            println!("no socket refused after 1000");
            return Err(CallError::Host(HostError::InvalidArgument));
        }
    };
    println!("refused after {} UDP sockets and {} listeners: {refused:?}", udp.len(), tcp.len());
    let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
    first.send_to(domos_interfaces::network::ipv4(10, 0, 0, 2), 7, &data)?;
    let echoed = first.receive_from(5000)?.is_some_and(|d| d.data == data);
    println!("udp echo with the stack full: {echoed}");
    drop((udp, tcp));
    let again = net.udp_bind(0).is_ok() && net.tcp_listen(2000, 4).is_ok();
    println!("sockets open again once let go: {again}");
    println!("sockets done");
    Ok(())
}
