//! Frames, as a network card could deliver them, to the IP stack: smoltcp's interface configured
//! as `net-ip` configures it (its capabilities, its address, a TCP listener on 2049, a UDP
//! socket bound to 111), polled after each frame, and what it answers passed through `net-ip`'s
//! offload of the checksums of the TCP segments it sends (`components/net-ip/src/checksum.rs`,
//! compiled here for the host) and the card's filling in (`domos_abi::nic`). The input is a run
//! of frames, each after a two-byte length. Beyond "no panic": a TCP checksum so filled in, into
//! an answer or into the fuzzed frame itself, holds by RFC 1071's sum taken the plain way, two
//! bytes at a time (smoltcp's own verification answers `true` to everything when built for
//! fuzzing, and skips its checks of received sums).
#![no_main]

#[path = "../../components/net-ip/src/checksum.rs"]
mod checksum;

use libfuzzer_sys::fuzz_target;
use smoltcp::iface::{Config, Interface, SocketSet};
use smoltcp::phy::{self, Checksum, DeviceCapabilities, Medium};
use smoltcp::socket::{tcp, udp};
use smoltcp::time::Instant;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, HardwareAddress, IpAddress, IpCidr, IpProtocol, Ipv4Address,
    Ipv4Packet, TcpPacket,
};

const ADDRESS: Ipv4Address = Ipv4Address::new(10, 99, 1, 2);
const MAC: [u8; 6] = [0x02, 0, 0, 0, 0x99, 0x02];

/// A card that hands over one frame and drops what the stack sends.
struct Card {
    frame: Option<Vec<u8>>,
}

struct Rx(Vec<u8>);
struct Tx;

impl phy::RxToken for Rx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for Tx {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut frame = vec![0; len];
        let result = f(&mut frame);
        fill(&mut frame);
        if let Some(verified) = verifies(&frame) {
            assert!(verified, "a sent segment's checksum as filled in verifies");
        }
        result
    }
}

impl phy::Device for Card {
    type RxToken<'a> = Rx;
    type TxToken<'a> = Tx;

    fn receive(&mut self, _: Instant) -> Option<(Rx, Tx)> {
        self.frame.take().map(|frame| (Rx(frame), Tx))
    }

    fn transmit(&mut self, _: Instant) -> Option<Tx> {
        Some(Tx)
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = 1514;
        caps.checksum.tcp = Checksum::Rx;
        caps
    }
}

/// What `net-ip` and a card do to a frame sent: the stack leaves a TCP segment's pseudo-header
/// sum in its checksum field and asks the card to fill the checksum in.
fn fill(frame: &mut [u8]) {
    if let Some(at) = checksum::offload_tcp(frame) {
        at.fill(frame);
    }
}

/// Whether `frame`'s TCP checksum holds by RFC 1071's sum of 16-bit words, when it is an
/// unfragmented IPv4 TCP segment that smoltcp parses.
fn verifies(frame: &[u8]) -> Option<bool> {
    let ethernet = EthernetFrame::new_checked(frame).ok()?;
    if ethernet.ethertype() != EthernetProtocol::Ipv4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(ethernet.payload()).ok()?;
    if ip.version() != 4 || ip.next_header() != IpProtocol::Tcp || ip.more_frags() || ip.frag_offset() != 0 {
        return None;
    }
    let segment = TcpPacket::new_checked(ip.payload()).ok()?.into_inner();
    let mut pseudo = Vec::with_capacity(12);
    pseudo.extend_from_slice(&ip.src_addr().octets());
    pseudo.extend_from_slice(&ip.dst_addr().octets());
    pseudo.extend_from_slice(&[0, 6]);
    pseudo.extend_from_slice(&(segment.len() as u16).to_be_bytes());
    let mut sum: u32 = 0;
    for bytes in [&pseudo[..], segment] {
        for pair in bytes.chunks(2) {
            sum += u32::from(u16::from_be_bytes([pair[0], pair.get(1).copied().unwrap_or(0)]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    Some(sum == 0xffff)
}

fuzz_target!(|data: &[u8]| {
    let mut card = Card { frame: None };
    let mut iface = Interface::new(Config::new(HardwareAddress::Ethernet(EthernetAddress(MAC))), &mut card, Instant::ZERO);
    iface.update_ip_addrs(|addrs| {
        let _ = addrs.push(IpCidr::new(IpAddress::Ipv4(ADDRESS), 24));
    });
    let mut sockets = SocketSet::new(Vec::new());
    let mut listener = tcp::Socket::new(tcp::SocketBuffer::new(vec![0; 4096]), tcp::SocketBuffer::new(vec![0; 4096]));
    listener.listen(2049).expect("a listener");
    sockets.add(listener);
    let mut udp = udp::Socket::new(
        udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 4], vec![0; 4096]),
        udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 4], vec![0; 4096]),
    );
    udp.bind(111).expect("a bound socket");
    sockets.add(udp);

    let mut rest = data;
    let mut millis = 0;
    while let [high, low, after @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*high, *low])).min(after.len());
        let (frame, next) = after.split_at(len);
        rest = next;
        let mut filled = frame.to_vec();
        fill(&mut filled);
        if let Some(verified) = verifies(&filled) {
            assert!(verified, "a checksum filled in verifies");
        }
        card.frame = Some(frame.to_vec());
        millis += 10;
        iface.poll(Instant::from_millis(millis), &mut card, &mut sockets);
    }
});
