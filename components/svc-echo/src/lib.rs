//! `svc-echo`: a UDP and TCP echo service (RFC 862) over the IP stack's `Network`. Arguments:
//! `port=N` (default 7) and `for=SECONDS`, how long it serves (default: as long as the system
//! runs). Datagrams are answered by one thread; each TCP connection gets a thread of its own
//! that sends back what it receives until the peer closes. It binds its ports in `init`, so that
//! every component's `main` finds it serving.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use domos_interfaces::network::{Network, TcpListener, TcpStream, UdpSocket};
use domos_sdk::{CallError, Mutex, Portal, names, println, thread};

domos_sdk::component! { init: init, main: main }

/// How long a wait lasts before the service looks at the time again.
const POLL_MS: u32 = 500;

/// The two sockets the echo service answers on.
type Sockets = (Portal<dyn UdpSocket>, Portal<dyn TcpListener>);

/// The sockets `init` bound, for `main`.
static BOUND: Mutex<Option<Sockets>> = Mutex::new(None);

/// The value of argument `key` (`port=`, `for=`).
fn arg(key: &str) -> Option<u64> {
    domos_sdk::args().split_whitespace().find_map(|w| w.strip_prefix(key)).and_then(|v| v.parse::<u64>().ok())
}

fn init() -> Result<(), CallError> {
    let port = arg("port=").map_or(7, |p| p as u16);
    let net: Portal<dyn Network> = names::lookup("Network")?;
    let udp = net.udp_bind(port)?;
    let listener = net.tcp_listen(port, 4)?;
    *BOUND.lock() = Some((udp, listener));
    println!("echo on UDP and TCP port {port}");
    Ok(())
}

fn main() -> Result<(), CallError> {
    let until = match arg("for=") {
        Some(seconds) => domos_sdk::time::now_ns().saturating_add(seconds * 1_000_000_000),
        None => u64::MAX,
    };
    let serving = move || domos_sdk::time::now_ns() < until;
    let Some((udp, listener)) = BOUND.lock().take() else { return Ok(()) };
    thread::spawn(move || {
        while serving() {
            match udp.receive_from(POLL_MS) {
                Ok(Some(datagram)) => {
                    let _ = udp.send_to(datagram.address, datagram.port, &datagram.data);
                }
                Ok(None) => {}
                Err(_) => return 1,
            }
        }
        0
    })?;
    while serving() {
        if let Some(stream) = listener.accept(POLL_MS)? {
            thread::spawn(move || match echo(&stream, serving) {
                Ok(()) => 0,
                Err(e) => {
                    println!("a TCP echo ended: {e:?}");
                    1
                }
            })?;
        }
    }
    Ok(())
}

/// Sends back everything `stream` receives until the peer closes its side.
fn echo(stream: &Portal<dyn TcpStream>, serving: impl Fn() -> bool) -> Result<(), CallError> {
    while serving() {
        match stream.receive(32 * 1024, POLL_MS)? {
            Some(data) if data.is_empty() => break,
            Some(data) => {
                let mut sent = 0;
                while sent < data.len() && serving() {
                    sent += stream.send(&data[sent..], POLL_MS)? as usize;
                }
            }
            None => {}
        }
    }
    stream.close()
}
