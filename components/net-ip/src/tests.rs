//! The receive window with a scale: two smoltcp interfaces on an in-memory wire, the server's
//! sockets run as `Stack::run_protocols` runs them.

use super::*;
use smoltcp::phy::{RxToken, TxToken};

/// One end of the wire: frames that arrived, frames sent.
#[derive(Default)]
struct Wire {
    arrived: VecDeque<Vec<u8>>,
    sent: VecDeque<Vec<u8>>,
}

struct Arrived(Vec<u8>);
struct Send<'a>(&'a mut VecDeque<Vec<u8>>);

impl RxToken for Arrived {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl TxToken for Send<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut frame = vec![0; len];
        let result = f(&mut frame);
        self.0.push_back(frame);
        result
    }
}

impl phy::Device for Wire {
    type RxToken<'a> = Arrived;
    type TxToken<'a> = Send<'a>;

    fn receive(&mut self, _timestamp: Instant) -> Option<(Arrived, Send<'_>)> {
        let frame = self.arrived.pop_front()?;
        Some((Arrived(frame), Send(&mut self.sent)))
    }

    fn transmit(&mut self, _timestamp: Instant) -> Option<Send<'_>> {
        Some(Send(&mut self.sent))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = 1514;
        caps
    }
}

fn host(last: u8) -> (Interface, Wire) {
    let mut wire = Wire::default();
    let mac = HardwareAddress::Ethernet(EthernetAddress([2, 0, 0, 0, 0, last]));
    let mut iface = Interface::new(Config::new(mac), &mut wire, Instant::from_millis(0));
    iface.update_ip_addrs(|addrs| {
        let _ = addrs.push(IpCidr::new(IpAddress::v4(10, 0, 0, last), 24));
    });
    (iface, wire)
}

/// The right edge (acknowledged sequence number plus window) of a TCP segment the server sent,
/// unless it is a SYN (whose window is not scaled).
fn right_edge(frame: &[u8], scale: u32) -> Option<u32> {
    let ip = frame.get(14..)?;
    let tcp = ip.get(usize::from(ip[0] & 0x0f) * 4..)?;
    if ip[9] != 6 || tcp[13] & 0x02 != 0 {
        return None;
    }
    let ack = u32::from_be_bytes([tcp[8], tcp[9], tcp[10], tcp[11]]);
    Some(ack.wrapping_add(u32::from(u16::from_be_bytes([tcp[14], tcp[15]])) << scale))
}

/// A client sends 600 KiB in segments of 1,001 bytes, as fast as the window lets it, to a server
/// with a 256 KiB receive buffer (a window scale of 3) that reads 19,999 bytes every tenth step:
/// whether the server's window's right edge ever moved left, and the bytes it read.
fn stream(align: bool) -> (bool, Vec<u8>) {
    const BUFFER: usize = 256 * 1024;
    let data: Vec<u8> = (0..600_000u32).map(|i| (i * 7 + i / 1001) as u8).collect();
    let (mut client_iface, mut client_wire) = host(1);
    let (mut server_iface, mut server_wire) = host(2);
    let mut client_sockets = SocketSet::new(Vec::new());
    let mut server_sockets = SocketSet::new(Vec::new());
    let mut server = tcp::Socket::new(tcp::SocketBuffer::new(vec![0; BUFFER]), tcp::SocketBuffer::new(vec![0; 4096]));
    server.listen(7).expect("listen");
    let server = server_sockets.add(server);
    let mut client =
        tcp::Socket::new(tcp::SocketBuffer::new(vec![0; 4096]), tcp::SocketBuffer::new(vec![0; 64 * 1024]));
    client.set_nagle_enabled(false);
    client.connect(client_iface.context(), (IpAddress::v4(10, 0, 0, 2), 7), 49152).expect("connect");
    let client = client_sockets.add(client);
    let step = 1 << (usize::BITS - BUFFER.leading_zeros() - 16);
    let mut held = BTreeMap::new();
    let (mut sent, mut received, mut shrank, mut edge) = (0, Vec::new(), false, None::<u32>);
    for tick in 0..20_000i64 {
        let time = Instant::from_micros(tick * 100);
        let socket = client_sockets.get_mut::<tcp::Socket>(client);
        while socket.can_send() && sent < data.len() {
            sent += socket.send_slice(&data[sent..(sent + 1001).min(data.len())]).expect("send");
        }
        client_iface.poll(time, &mut client_wire, &mut client_sockets);
        server_wire.arrived.extend(client_wire.sent.drain(..));
        server_iface.poll_maintenance(time);
        if align {
            align_windows(&mut server_sockets, &mut held, step);
        }
        while !matches!(
            server_iface.poll_ingress_single(time, &mut server_wire, &mut server_sockets),
            PollIngressSingleResult::None
        ) {}
        if align {
            align_windows(&mut server_sockets, &mut held, step);
        }
        while !matches!(server_iface.poll_egress(time, &mut server_wire, &mut server_sockets), PollResult::None) {}
        for frame in server_wire.sent.drain(..) {
            if let Some(next) = right_edge(&frame, 3) {
                shrank |= edge.is_some_and(|last| (next.wrapping_sub(last) as i32) < 0);
                edge = Some(next);
            }
            client_wire.arrived.push_back(frame);
        }
        if tick % 10 == 0 {
            let mut buffer = vec![0; 19_999];
            let len = take_received(&mut server_sockets, &mut held, server, &mut buffer);
            received.extend_from_slice(&buffer[..len]);
        }
        if received.len() == data.len() {
            break;
        }
    }
    assert!(held.is_empty(), "the reader took every byte held");
    (shrank, received)
}

#[test]
fn a_scaled_receive_window_never_shrinks() {
    let data: Vec<u8> = (0..600_000u32).map(|i| (i * 7 + i / 1001) as u8).collect();
    let (shrank, received) = stream(true);
    assert!(!shrank, "the window's right edge moved left");
    assert!(received == data, "{} of {} bytes, in order", received.len(), data.len());
    // The same stream without the alignment: smoltcp's own rounding moves the edge left.
    let (shrank, _) = stream(false);
    assert!(shrank, "without alignment the edge moves left (or this test shows nothing)");
}
