//! GETATTR (or NULL) calls as fast as the server answers them, with N in flight, over UDP or
//! TCP: a quick measure of an NFSv3 server's request rate (JX's "rate" benchmark). Mounts `/`
//! through MOUNT on the same port first (no portmapper).
//!
//! ```sh
//! cargo run --release -p domos-nfs --example getattr_rate -- 10.99.1.2 udp 1 5 [null]
//! ```
//!
//! Arguments: the server's address, `udp` or `tcp`, calls in flight, seconds, and `null` to
//! send NULL instead of GETATTR. Prints calls per second.

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use domos_nfs::mount::{self, DirPath, MountResult};
use domos_nfs::nfs3::{self, GetattrArgs, GetattrRes, Res};
use domos_nfs::rpc::{self, Message, OpaqueAuth, ReplyStatus, record};
use domos_nfs::xdr::{Decoder, Encoder, Xdr};

const PORT: u16 = 2049;

fn call(xid: u32, program: u32, version: u32, procedure: u32, args: &[u8]) -> Vec<u8> {
    let mut e = Encoder::new();
    rpc::encode_call(&mut e, xid, program, version, procedure, &OpaqueAuth::NONE);
    let mut message = e.into_vec();
    message.extend_from_slice(args);
    message
}

/// The xid and results of a successful reply.
fn reply(bytes: &[u8]) -> Option<(u32, &[u8])> {
    let mut d = Decoder::new(bytes);
    match Message::decode(&mut d) {
        Ok(Message::Reply(r)) if r.status == ReplyStatus::Success => Some((r.xid, d.rest())),
        _ => None,
    }
}

enum Link {
    Udp(UdpSocket),
    Tcp(TcpStream, record::RecordReader),
}

impl Link {
    fn send(&mut self, message: &[u8]) {
        match self {
            Link::Udp(s) => {
                s.send(message).expect("send");
            }
            Link::Tcp(s, _) => s.write_all(&record::frame(message)).expect("send"),
        }
    }

    fn receive(&mut self) -> Vec<u8> {
        match self {
            Link::Udp(s) => {
                let mut buf = vec![0; 65536];
                let len = s.recv(&mut buf).expect("a reply within the timeout");
                buf.truncate(len);
                buf
            }
            Link::Tcp(s, reader) => loop {
                if let Some(r) = reader.next_record().expect("records") {
                    return r;
                }
                let mut buf = [0; 65536];
                let len = s.read(&mut buf).expect("a reply within the timeout");
                assert!(len > 0, "the server closed the connection");
                reader.push(&buf[..len]);
            },
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let server = args.get(1).map_or("10.99.1.2", String::as_str);
    let tcp = args.get(2).is_some_and(|p| p == "tcp");
    let in_flight: u32 = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(1);
    let seconds: u64 = args.get(4).and_then(|n| n.parse().ok()).unwrap_or(5);
    let null = args.get(5).is_some_and(|p| p == "null");
    let mut link = if tcp {
        let s = TcpStream::connect((server, PORT)).expect("connect");
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        Link::Tcp(s, record::RecordReader::new(1 << 20))
    } else {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        s.connect((server, PORT)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        Link::Udp(s)
    };
    link.send(&call(1, mount::PROGRAM, mount::VERSION, mount::procedure::MNT, &DirPath(b"/".to_vec()).to_xdr()));
    let answer = link.receive();
    let Some((1, results)) = reply(&answer) else { panic!("MNT failed") };
    let Ok(MountResult::Ok { handle, .. }) = MountResult::from_xdr(results) else { panic!("MNT refused") };
    let args = GetattrArgs { object: handle }.to_xdr();
    let procedure = if null { nfs3::procedure::NULL } else { nfs3::procedure::GETATTR };
    let message = |xid| call(xid, nfs3::PROGRAM, nfs3::VERSION, procedure, if null { &[] } else { &args });
    let mut xid = 100;
    for _ in 0..in_flight {
        xid += 1;
        link.send(&message(xid));
    }
    let start = Instant::now();
    let mut done = 0u64;
    while start.elapsed() < Duration::from_secs(seconds) {
        let answer = link.receive();
        let (_, results) = reply(&answer).expect("a successful reply");
        if !null {
            assert!(matches!(GetattrRes::from_xdr(results), Ok(Res::Ok(_))), "GETATTR succeeds");
        }
        done += 1;
        xid += 1;
        link.send(&message(xid));
    }
    let rate = done as f64 / start.elapsed().as_secs_f64();
    let what = if null { "NULL" } else { "GETATTR" };
    let protocol = if tcp { "tcp" } else { "udp" };
    println!("{what} over {protocol}, {in_flight} in flight: {rate:.0} calls/s");
}
