//! `svc-nfs`: an NFSv3 and MOUNT v3 server (RFC 1813) over an `InodeFileSystem`, on the IP
//! stack's `Network` — JX's file server. Both programs answer on one port (2049 by default),
//! over UDP and over TCP (RPC record marking); `svc-rpcbind` tells clients where they are.
//!
//! Uses the portals `InodeFileSystem` (the file system, e.g. `fs-ext2`) and `Network` (e.g.
//! `net-ip`); serves none. Arguments, all optional:
//!
//! - `port=N`: the port of both programs (default 2049);
//! - `udp_threads=N`: threads receiving datagrams, each answering one call at a time (default 4);
//! - `connections=N`: the most TCP connections served at once, each by a thread (default 32);
//! - `fsid=N`: the file system's id in file handles and attributes (default 1);
//! - `export=PATH`: the path MOUNT exports (default `/`).
//!
//! File handles are 16 bytes: magic, fsid, inode, generation (see `handle.rs` and decision
//! 0008). Malformed calls get the RPC error the protocol has for them (GARBAGE_ARGS,
//! PROC_UNAVAIL, PROG_UNAVAIL, PROG_MISMATCH, RPC_MISMATCH, AUTH_ERROR), or are dropped when not
//! even their header decodes; no input panics the server.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

mod handle;
mod server;

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use domos_interfaces::inode_file_system::InodeFileSystem;
use domos_interfaces::network::{Network, TcpListener, TcpStream, UdpSocket};
use domos_nfs::rpc::record::{self, RecordReader};
use domos_nfs::xdr::Encoder;
use domos_sdk::{CallError, HostError, Mutex, Portal, names, println, thread};

use server::{Server, Transport};

domos_sdk::component! { init: init, main: main }

/// How long a wait lasts before a thread looks again (no deadline: the server runs for good).
const POLL_MS: u32 = 1000;
/// When every connection is taken, one idle at least this long is closed for a newcomer.
const EVICT_IDLE_MS: u64 = 2_000;
/// A TCP connection idle this long is closed (a client that vanished holds no thread for good).
const IDLE_MS: u64 = 300_000;
/// The most bytes handed to the stack in one send.
const SEND_PIECE: usize = 32 * 1024;
/// The longest record taken from a TCP stream: a WRITE of the largest size and its header.
const MAX_RECORD: usize = 36 * 1024;

struct Arguments {
    port: u16,
    udp_threads: u32,
    connections: u32,
    fsid: u32,
    export: Vec<u8>,
}

fn arguments() -> Result<Arguments, &'static str> {
    let mut a = Arguments { port: nfs_port(), udp_threads: 4, connections: 32, fsid: 1, export: b"/".to_vec() };
    for word in domos_sdk::args().split_whitespace() {
        let (key, value) = word.split_once('=').ok_or("arguments are key=value")?;
        let number = || value.parse::<u32>().map_err(|_| "a number was expected");
        match key {
            "port" => a.port = value.parse().map_err(|_| "port=N: a port number")?,
            "udp_threads" => a.udp_threads = number()?.clamp(1, 16),
            "connections" => a.connections = number()?.clamp(1, 256),
            "fsid" => a.fsid = number()?,
            "export" if value.starts_with('/') => a.export = value.as_bytes().to_vec(),
            _ => return Err("unknown argument (port, udp_threads, connections, fsid, export=/PATH)"),
        }
    }
    Ok(a)
}

const fn nfs_port() -> u16 {
    domos_nfs::nfs3::PORT
}

/// What `init` made and `main` serves: the sockets are bound in `init`, so that the system
/// is reachable once it has booted (`domos boot` says so then), and served by `main`'s threads.
struct Started {
    server: Arc<Server>,
    udp: Arc<Portal<dyn UdpSocket>>,
    listener: Portal<dyn TcpListener>,
    udp_threads: u32,
    connections: u32,
}

static STARTED: Mutex<Option<Started>> = Mutex::new(None);

fn init() -> Result<(), String> {
    let args = arguments().map_err(String::from)?;
    let fs: Portal<dyn InodeFileSystem> =
        names::lookup("InodeFileSystem").map_err(|e| format!("no InodeFileSystem: {e}"))?;
    let net: Portal<dyn Network> = names::lookup("Network").map_err(|e| format!("no Network: {e}"))?;
    // The kernel's clock in nanoseconds at this start: the boots of a system differ in it by
    // the jitter of everything before, so the write verifier changes from start to start.
    let verifier = domos_sdk::time::now_ns().wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes();
    let server = Server::new(fs, args.fsid, verifier, args.export.clone())
        .map_err(|e| format!("the file system has no root: {e:?}"))?;
    let bind = |e: CallError| format!("port {}: {e}", args.port);
    let udp = Arc::new(net.udp_bind(args.port).map_err(bind)?);
    let listener = net.tcp_listen(args.port, 8).map_err(bind)?;
    println!(
        "NFSv3 and MOUNT v3 on UDP and TCP port {} ({} UDP threads, up to {} connections), exporting {}",
        args.port,
        args.udp_threads,
        args.connections,
        core::str::from_utf8(&args.export).unwrap_or("?")
    );
    *STARTED.lock() = Some(Started {
        server: Arc::new(server),
        udp,
        listener,
        udp_threads: args.udp_threads,
        connections: args.connections,
    });
    Ok(())
}

fn main() -> Result<(), String> {
    let Started { server, udp, listener, udp_threads, connections: max_connections } =
        STARTED.lock().take().ok_or("init did not start the server")?;
    for _ in 0..udp_threads {
        let udp = udp.clone();
        let server = server.clone();
        thread::spawn(move || {
            let mut reply = Encoder::new();
            loop {
                match udp.receive_from(POLL_MS) {
                    Ok(Some(datagram)) => {
                        reply.clear();
                        if server.serve(&datagram.data, Transport::Udp, datagram.address, &mut reply) {
                            let _ = udp.send_to(datagram.address, datagram.port, reply.as_bytes().to_vec());
                        }
                    }
                    Ok(None) => {}
                    Err(_) => return 1,
                }
            }
        })
        .map_err(|e| format!("no thread: {e}"))?;
    }
    let connections = Arc::new(Mutex::new(Vec::<Arc<Connection>>::new()));
    loop {
        let stream = match listener.accept(POLL_MS) {
            Ok(Some(stream)) => stream,
            Ok(None) => continue,
            // The stack's socket table is full (clients that hold connections open): the
            // server goes on serving those it has, and accepts again once there is room.
            Err(CallError::Host(HostError::QuotaExceeded)) => {
                let _ = thread::sleep(core::time::Duration::from_millis(u64::from(POLL_MS) / 10));
                continue;
            }
            Err(e) => return Err(format!("accept: {e}")),
        };
        let now = domos_sdk::time::now_ns();
        {
            let mut open = connections.lock();
            open.retain(|c| !c.ended.load(Ordering::Relaxed));
            if open.len() >= max_connections as usize {
                // Full: the connection idle longest makes room, if one has been idle a while
                // (clients that opened connections and vanished must not lock others out);
                // else the newcomer is closed and may come back.
                let oldest = open.iter().filter(|c| !c.closing.load(Ordering::Relaxed)).min_by_key(|c| c.last());
                match oldest {
                    Some(c) if now.saturating_sub(c.last()) >= EVICT_IDLE_MS * 1_000_000 => {
                        c.closing.store(true, Ordering::Relaxed)
                    }
                    _ => {
                        let _ = stream.close();
                        continue;
                    }
                }
            }
        }
        let connection = Arc::new(Connection::new(now));
        connections.lock().push(connection.clone());
        let server = server.clone();
        let ended = connection.clone();
        let spawned = thread::spawn(move || {
            let result = serve_connection(&server, &stream, &connection);
            let _ = stream.close();
            drop(stream);
            connection.ended.store(true, Ordering::Relaxed);
            result.map_or(1, |()| 0)
        });
        if spawned.is_err() {
            ended.ended.store(true, Ordering::Relaxed);
        }
    }
}

/// What the acceptor knows of a TCP connection being served.
struct Connection {
    /// The kernel clock's nanoseconds at its last call, in two halves (the acceptor reads them
    /// without a lock; a torn read only misjudges which connection is idle longest).
    last_high: AtomicU32,
    last_low: AtomicU32,
    /// Set by the acceptor: close at the next look.
    closing: AtomicBool,
    /// Set by the connection's thread when it has ended.
    ended: AtomicBool,
}

impl Connection {
    fn new(now: u64) -> Connection {
        let c = Connection {
            last_high: AtomicU32::new(0),
            last_low: AtomicU32::new(0),
            closing: AtomicBool::new(false),
            ended: AtomicBool::new(false),
        };
        c.touch(now);
        c
    }

    fn touch(&self, now: u64) {
        self.last_high.store((now >> 32) as u32, Ordering::Relaxed);
        self.last_low.store(now as u32, Ordering::Relaxed);
    }

    fn last(&self) -> u64 {
        (u64::from(self.last_high.load(Ordering::Relaxed)) << 32) | u64::from(self.last_low.load(Ordering::Relaxed))
    }
}

/// Answers the calls of one TCP connection in order until the peer closes it, sends a record
/// too long, or stays idle for [`IDLE_MS`].
fn serve_connection(server: &Server, stream: &Portal<dyn TcpStream>, connection: &Connection) -> Result<(), CallError> {
    let (peer, _) = stream.peer()?;
    let mut reader = RecordReader::new(MAX_RECORD);
    let mut reply = Encoder::new();
    let mut replies = Vec::new();
    let mut last = domos_sdk::time::now_ns();
    loop {
        if connection.closing.load(Ordering::Relaxed) {
            return Ok(());
        }
        match stream.receive(32 * 1024, POLL_MS)? {
            Some(data) if data.is_empty() => return Ok(()),
            Some(data) => {
                last = domos_sdk::time::now_ns();
                connection.touch(last);
                reader.push(&data);
                // Every call that arrived together is answered, and the replies go back in one
                // send: with several calls in flight that saves the stack a call per reply.
                replies.clear();
                loop {
                    let request = match reader.next_record() {
                        Ok(Some(request)) => request,
                        Ok(None) => break,
                        Err(record::RecordError::TooLong) => return Ok(()),
                    };
                    reply.clear();
                    reply.u32(0); // the record mark, written once the length is known
                    if server.serve(&request, Transport::Tcp, peer, &mut reply) {
                        let len = reply.len() - 4;
                        reply.patch_u32(0, u32::from_be_bytes(record::header(len)));
                        replies.extend_from_slice(reply.as_bytes());
                    }
                }
                if !replies.is_empty() {
                    send_all(stream, &replies)?;
                }
            }
            None if domos_sdk::time::now_ns().saturating_sub(last) > IDLE_MS * 1_000_000 => return Ok(()),
            None => {}
        }
    }
}

/// Sends `bytes` in pieces of at most [`SEND_PIECE`], each a message well within the stack's and
/// this domain's message limit.
fn send_all(stream: &Portal<dyn TcpStream>, bytes: &[u8]) -> Result<(), CallError> {
    let mut sent = 0;
    while sent < bytes.len() {
        let end = bytes.len().min(sent + SEND_PIECE);
        let queued = stream.send(bytes[sent..end].to_vec(), POLL_MS)? as usize;
        sent += queued;
    }
    Ok(())
}
