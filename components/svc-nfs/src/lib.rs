//! `svc-nfs`: an NFSv3 and MOUNT v3 server (RFC 1813) over an `InodeFileSystem`, on the IP
//! stack's `Network` — JX's file server. Both programs answer on one port (2049 by default),
//! over UDP and over TCP (RPC record marking); `svc-rpcbind` tells clients where they are.
//!
//! Uses the portals `InodeFileSystem` (the file system, e.g. `fs-ext2`) and `Network` (e.g.
//! `net-ip`); serves none. Arguments, all optional:
//!
//! - `port=N`: the port of both programs (default 2049);
//! - `udp_threads=N`: threads receiving datagrams, each answering one call at a time (default 4);
//! - `connections=N`: the most TCP connections served at once, each with a thread of its own
//!   reading its calls and one sending its replies (default 32);
//! - `workers=N`: threads answering the READs, WRITEs and COMMITs read from TCP connections
//!   (default 8): the calls of one connection are answered side by side and their replies sent
//!   in the order they are ready (RPC matches them by xid), so one READ's reply crosses the
//!   stack while the next one's data is read;
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

use alloc::collections::{TryReserveError, VecDeque};
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use domos_interfaces::inode_file_system::InodeFileSystem;
use domos_interfaces::network::{Network, TcpListener, TcpStream, UdpSocket};
use domos_nfs::rpc::record::{self, RecordReader};
use domos_nfs::xdr::Encoder;
use domos_sdk::wire::EncodeError;
use domos_sdk::{CallError, Condvar, HostError, Mutex, Portal, names, println, thread};

use server::{Server, Transport};

domos_sdk::component! { init: init, main: main }

/// How long a wait lasts before a thread looks again (no deadline: the server runs for good).
const POLL_MS: u32 = 1000;
/// When every connection is taken, one idle at least this long is closed for a newcomer.
const EVICT_IDLE_MS: u64 = 2_000;
/// A TCP connection idle this long is closed (a client that vanished holds no thread for good).
const IDLE_MS: u64 = 300_000;
/// The most bytes handed to the stack in one send: a whole reply to the largest READ (64 KiB of
/// data and its headers), one call rather than two. Where this domain's or the stack's message
/// is smaller (`max_message`, 64 KiB unless configured), a connection halves its pieces until
/// they fit, down to [`SMALLEST_SEND_PIECE`].
const SEND_PIECE: usize = 72 * 1024;
/// The smallest piece a connection's sends are halved to before a refused send breaks it.
const SMALLEST_SEND_PIECE: usize = 4 * 1024;
/// The longest record taken from a TCP stream: a WRITE of the largest size and its header.
const MAX_RECORD: usize = Transport::Tcp.max_data() as usize + 4 * 1024;
/// The most calls of one connection read and not yet answered: a client that sends faster than
/// the workers answer waits in TCP's flow control, not in this domain's heap. Each holds a call
/// or a reply of at most [`MAX_RECORD`], so the connections hold at most 8 × 68 KiB each (17 MiB
/// for 32 of them, within the 32 MiB heap the configurations give this domain).
const MAX_UNANSWERED: u32 = 8;

struct Arguments {
    port: u16,
    udp_threads: u32,
    connections: u32,
    workers: u32,
    fsid: u32,
    export: Vec<u8>,
}

fn arguments() -> Result<Arguments, &'static str> {
    let mut a =
        Arguments { port: nfs_port(), udp_threads: 4, connections: 32, workers: 8, fsid: 1, export: b"/".to_vec() };
    for word in domos_sdk::args().split_whitespace() {
        let (key, value) = word.split_once('=').ok_or("arguments are key=value")?;
        let number = || value.parse::<u32>().map_err(|_| "a number was expected");
        match key {
            "port" => a.port = value.parse().map_err(|_| "port=N: a port number")?,
            "udp_threads" => a.udp_threads = number()?.clamp(1, 16),
            "connections" => a.connections = number()?.clamp(1, 256),
            "workers" => a.workers = number()?.clamp(1, 64),
            "fsid" => a.fsid = number()?,
            "export" if value.starts_with('/') => a.export = value.as_bytes().to_vec(),
            _ => return Err("unknown argument (port, udp_threads, connections, workers, fsid, export=/PATH)"),
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
    workers: u32,
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
        "NFSv3 and MOUNT v3 on UDP and TCP port {} ({} UDP threads, up to {} connections, {} workers), exporting {}",
        args.port,
        args.udp_threads,
        args.connections,
        args.workers,
        core::str::from_utf8(&args.export).unwrap_or("?")
    );
    *STARTED.lock() = Some(Started {
        server: Arc::new(server),
        udp,
        listener,
        udp_threads: args.udp_threads,
        connections: args.connections,
        workers: args.workers,
    });
    Ok(())
}

fn main() -> Result<(), String> {
    let Started { server, udp, listener, udp_threads, connections: max_connections, workers } =
        STARTED.lock().take().ok_or("init did not start the server")?;
    for _ in 0..workers {
        let server = server.clone();
        thread::spawn(move || answer_calls(&server)).map_err(|e| format!("no thread: {e}"))?;
    }
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
                            let _ = udp.send_to(datagram.address, datagram.port, reply.as_bytes());
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
        let ended = connection.clone();
        let server = server.clone();
        let spawned = thread::spawn(move || {
            let result = serve_connection(&server, stream, connection.clone());
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

/// Serves one TCP connection with two threads of its own: this one reads its calls, answers
/// the small ones and hands READs, WRITEs and COMMITs to the workers; a sender sends the
/// workers' replies. The connection ends when the peer closes it, sends a record too long,
/// stays idle for [`IDLE_MS`], the acceptor closes it, or a reply cannot be sent; then the
/// replies of the calls read are sent and it is closed.
fn serve_connection(
    server: &Server,
    stream: Portal<dyn TcpStream>,
    connection: Arc<Connection>,
) -> Result<(), CallError> {
    let (peer, _) = stream.peer()?;
    let session = Arc::new(Session {
        stream,
        peer,
        connection,
        state: Mutex::new(SessionState {
            unanswered: 0,
            records: Vec::new(),
            replies: 0,
            sending: false,
            reading_done: false,
            sender_done: false,
        }),
        to_send: Condvar::new(),
        answered: Condvar::new(),
        broken: AtomicBool::new(false),
        send_piece: AtomicUsize::new(SEND_PIECE),
    });
    let sender = session.clone();
    if let Err(e) = thread::spawn(move || {
        sender.send_replies();
        0
    }) {
        let _ = session.stream.close();
        return Err(e);
    }
    let result = read_calls(server, &session);
    session.end_reading();
    let _ = session.stream.close();
    result
}

fn read_calls(server: &Server, session: &Arc<Session>) -> Result<(), CallError> {
    let connection = &session.connection;
    let mut reader = RecordReader::new(MAX_RECORD);
    let mut reply = Encoder::new();
    let mut calls = Vec::new();
    let mut batch = Vec::new();
    let mut last = domos_sdk::time::now_ns();
    loop {
        if connection.closing.load(Ordering::Relaxed) || session.broken.load(Ordering::Relaxed) {
            return Ok(());
        }
        match session.stream.receive(32 * 1024, POLL_MS)? {
            Some(data) if data.is_empty() => return Ok(()),
            Some(data) => {
                last = domos_sdk::time::now_ns();
                connection.touch(last);
                reader.push(&data);
                let too_long = loop {
                    match reader.next_record() {
                        Ok(Some(request)) => calls.push(request.to_vec()),
                        Ok(None) => break false,
                        Err(record::RecordError::TooLong) => break true,
                    }
                };
                // READs, WRITEs and COMMITs go to the workers, so that one call's file data
                // crosses the stack while the next one's is read from the cache or the disk;
                // the rest take a few microseconds each and are answered here, their replies
                // sent together. So is a lone call on a connection with nothing outstanding:
                // a client with one call in flight pays no hand-over to a worker.
                let lone = calls.len() == 1 && session.state.lock().unanswered == 0;
                for request in calls.extract_if(.., |call| !lone && moves_file_data(call)) {
                    session.wait_for_room();
                    JOBS.lock().push_back(Job { session: session.clone(), request });
                    JOB_READY.notify_one();
                }
                if !calls.is_empty() {
                    batch.clear();
                    let mut replies = 0;
                    for request in calls.drain(..) {
                        if answer(server, session.peer, &request, &mut reply) {
                            batch.extend_from_slice(reply.as_bytes());
                            replies += 1;
                        }
                    }
                    session.send_own(&batch, replies);
                }
                if too_long {
                    return Ok(());
                }
            }
            None if domos_sdk::time::now_ns().saturating_sub(last) > IDLE_MS * 1_000_000 => return Ok(()),
            None => {}
        }
    }
}

/// A TCP connection being served: its reader, the workers answering its calls, its sender.
struct Session {
    stream: Portal<dyn TcpStream>,
    peer: u32,
    connection: Arc<Connection>,
    state: Mutex<SessionState>,
    /// Signalled for the sender: replies to send, a call answered, or the reader done.
    to_send: Condvar,
    /// Signalled for the reader: a call answered (room for another), or the sender done.
    answered: Condvar,
    /// A send failed, or made no progress while the connection was ending: replies are
    /// dropped from then on.
    broken: AtomicBool,
    /// The most bytes handed to the stack in one send: [`SEND_PIECE`], halved while a send is
    /// refused as larger than a message.
    send_piece: AtomicUsize,
}

struct SessionState {
    /// Calls read whose replies are not sent (or dropped) yet.
    unanswered: u32,
    /// Reply records made and not sent yet, in order, and how many replies they hold: a large
    /// record (a READ's) in the vector it was made in, small ones gathered into one vector so
    /// that they leave in one send.
    records: Vec<Vec<u8>>,
    replies: u32,
    /// The sender, or the reader with its own replies, is sending.
    sending: bool,
    /// The reader reads no more calls: the sender ends once every call read is answered.
    reading_done: bool,
    sender_done: bool,
}

impl Session {
    /// Waits until another call may be handed to the workers, and counts it: a client that
    /// sends faster than the workers answer waits in TCP's flow control, not in this heap.
    fn wait_for_room(&self) {
        let mut state = self.state.lock();
        while state.unanswered >= MAX_UNANSWERED {
            state = self.answered.wait(state);
        }
        state.unanswered += 1;
    }

    /// The reader's own replies (`replies` records, marks included): sent by the reader itself
    /// when nothing else is waiting to leave, so that one call in flight costs no hand-over;
    /// otherwise queued behind the workers' replies for the sender.
    fn send_own(&self, records: &[u8], replies: u32) {
        if replies == 0 {
            return;
        }
        let mut state = self.state.lock();
        state.unanswered += replies;
        if state.sending || state.replies > 0 {
            // The sender is sending, or was woken for the replies queued before these.
            self.push(&mut state, Record::Copied(records), replies);
            return;
        }
        state.sending = true;
        drop(state);
        self.send(records);
        let mut state = self.state.lock();
        state.sending = false;
        state.unanswered -= replies;
        if state.replies > 0 {
            // Queued meanwhile: the sender, woken for them, found this thread sending.
            self.to_send.notify_one();
        }
    }

    /// A worker's reply to one of this connection's calls (`None`: the call gets none).
    fn queue(&self, record: Option<&mut Encoder>) {
        let mut state = self.state.lock();
        match record {
            Some(record) => {
                self.push(&mut state, Record::Made(record), 1);
                // A sending thread takes these along when it is done.
                if !state.sending {
                    self.to_send.notify_one();
                }
            }
            None => {
                self.count_answered(&mut state, 1);
                if state.reading_done {
                    self.to_send.notify_one();
                }
            }
        }
    }

    /// Queues `replies` records for the sender; when the heap has no room for them they are
    /// dropped and the connection broken (the client calls again on a new one), and the other
    /// connections go on.
    fn push(&self, state: &mut SessionState, records: Record, replies: u32) {
        if records.queue(&mut state.records).is_ok() {
            state.replies += replies;
        } else {
            self.broken.store(true, Ordering::Relaxed);
            self.count_answered(state, replies);
        }
    }

    /// `calls` are answered: room for the reader, if it waits for some or for the end.
    fn count_answered(&self, state: &mut SessionState, calls: u32) {
        if state.unanswered >= MAX_UNANSWERED || state.reading_done {
            self.answered.notify_one();
        }
        state.unanswered -= calls;
    }

    /// The sender's thread: sends the queued replies, those ready together in one batch,
    /// until the reader is done and every call it read is answered.
    fn send_replies(&self) {
        let mut state = self.state.lock();
        loop {
            if state.replies > 0 && !state.sending {
                // Taken, not swapped with a kept buffer: an idle connection holds no heap.
                let records = core::mem::take(&mut state.records);
                let replies = core::mem::take(&mut state.replies);
                state.sending = true;
                drop(state);
                for record in records {
                    self.send(&record);
                }
                state = self.state.lock();
                state.sending = false;
                self.count_answered(&mut state, replies);
            } else if state.reading_done && state.unanswered == 0 {
                state.sender_done = true;
                self.answered.notify_one();
                return;
            } else {
                state = self.to_send.wait(state);
            }
        }
    }

    /// The reader reads no more: waits until the sender has sent (or dropped) every reply.
    fn end_reading(&self) {
        let mut state = self.state.lock();
        state.reading_done = true;
        self.to_send.notify_one();
        while !state.sender_done {
            state = self.answered.wait(state);
        }
    }

    /// Sends `bytes` in pieces of at most the connection's `send_piece`, halved while the
    /// stack's or this domain's message limit refuses them. Another failed send breaks the
    /// connection, and so does a peer that takes nothing for [`POLL_MS`] once the connection
    /// is ending (a client that stopped reading holds this connection's threads, never the
    /// workers, and not for good).
    fn send(&self, bytes: &[u8]) {
        let mut sent = 0;
        while sent < bytes.len() && !self.broken.load(Ordering::Relaxed) {
            let piece = self.send_piece.load(Ordering::Relaxed);
            let end = bytes.len().min(sent + piece);
            match self.stream.send(&bytes[sent..end], POLL_MS) {
                Ok(0) if self.connection.closing.load(Ordering::Relaxed) || self.state.lock().reading_done => {
                    self.broken.store(true, Ordering::Relaxed)
                }
                Ok(queued) => sent += queued as usize,
                Err(CallError::Encode(EncodeError::TooLarge) | CallError::Host(HostError::MessageTooLarge))
                    if piece > SMALLEST_SEND_PIECE =>
                {
                    self.send_piece.store(piece / 2, Ordering::Relaxed)
                }
                Err(_) => self.broken.store(true, Ordering::Relaxed),
            }
        }
    }
}

/// Reply records for a session's queue.
enum Record<'a> {
    /// A worker's reply: taken from it into the queue when large, so that a READ's data is not
    /// copied again.
    Made(&'a mut Encoder),
    /// The reader's replies, in its own buffer.
    Copied(&'a [u8]),
}

impl Record<'_> {
    /// Records shorter than this are copied into the vector gathering small ones.
    const GATHERED: usize = 4096;

    /// Appends the records to `queue`; `Err` when the heap has no room for them.
    fn queue(self, queue: &mut Vec<Vec<u8>>) -> Result<(), TryReserveError> {
        queue.try_reserve(1)?;
        let bytes = match self {
            Record::Made(reply) if reply.len() >= Self::GATHERED => {
                queue.push(core::mem::take(reply).into_vec());
                return Ok(());
            }
            Record::Made(reply) => reply.as_bytes(),
            Record::Copied(records) => records,
        };
        match queue.last_mut().filter(|last| last.len() < Self::GATHERED) {
            Some(gathering) => gathering.try_reserve(bytes.len())?,
            None => {
                let mut gathering = Vec::new();
                gathering.try_reserve(bytes.len().max(Self::GATHERED))?;
                queue.push(gathering);
            }
        }
        if let Some(gathering) = queue.last_mut() {
            gathering.extend_from_slice(bytes);
        }
        Ok(())
    }
}

/// A call read from a TCP connection, waiting for a worker.
struct Job {
    session: Arc<Session>,
    request: Vec<u8>,
}

static JOBS: Mutex<VecDeque<Job>> = Mutex::new(VecDeque::new());
/// Signalled when a job is queued.
static JOB_READY: Condvar = Condvar::new();

/// A worker: answers calls read from any TCP connection, for good. It never sends: a client
/// that stops reading cannot hold it.
fn answer_calls(server: &Server) -> i32 {
    let mut reply = Encoder::new();
    loop {
        let job = {
            let mut jobs = JOBS.lock();
            loop {
                match jobs.pop_front() {
                    Some(job) => break job,
                    None => jobs = JOB_READY.wait(jobs),
                }
            }
        };
        let replied = answer(server, job.session.peer, &job.request, &mut reply);
        job.session.queue(replied.then_some(&mut reply));
    }
}

/// Answers one call from `peer` over TCP, leaving the reply's record (mark included) in `reply`;
/// `false`: the call gets no reply.
fn answer(server: &Server, peer: u32, request: &[u8], reply: &mut Encoder) -> bool {
    reply.clear();
    reply.u32(0); // the record mark, written once the length is known
    if !server.serve(request, Transport::Tcp, peer, reply) {
        return false;
    }
    let len = reply.len() - 4;
    reply.patch_u32(0, u32::from_be_bytes(record::header(len)));
    true
}

/// Whether `call` is an NFS READ, WRITE or COMMIT: one that moves file data or waits for the
/// disk. Read from the fixed start of an RPC call (xid, message type, RPC version, program,
/// version, procedure); anything shorter is not.
fn moves_file_data(call: &[u8]) -> bool {
    let word = |at: usize| call.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    use domos_nfs::nfs3::{PROGRAM, procedure as p};
    word(12) == Some(PROGRAM) && matches!(word(20), Some(p::READ | p::WRITE | p::COMMIT))
}
