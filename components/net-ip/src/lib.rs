//! `net-ip`: an IP stack over a `NetworkDevice`, serving `Network` (registered as `Network`).
//!
//! Arguments: `ip=A.B.C.D/PREFIX` (default `10.0.0.1/24`), `gateway=A.B.C.D` (none by default),
//! `rate=MBITS`: the link is paced at that many megabits per second of payload and shared by
//! classes (module [`shares`]); `classes=NAME:WEIGHT,…`: classes under the root, each registered
//! as `Network.NAME` for a configuration to `bind` its clients to (a client may divide its class
//! further with `Network::class`); `send_buffer=KIB`: each TCP socket's send buffer (default 64,
//! at most 1,024): a server whose replies are larger than a quarter of it (an NFS server's 64 KiB
//! READs, four in flight) wants them all to fit, or each `send` waits for the peer to acknowledge
//! the one before; `receive_buffer=KIB`: each TCP socket's receive buffer, which its window is
//! made of (default 64, at most 1,024; over 64 KiB the window is scaled, and kept from shrinking
//! by [`align_windows`]): a server whose clients have more than 64 KiB in flight (four 64 KiB NFS
//! WRITEs) wants it, or each client waits for the window between its requests; and
//! `answer-only`: the stack only answers — `tcp_connect` and `ping` are `NotPermitted`, and
//! a UDP socket sends only to the peers it last heard from (up to [`PEERS`] of them), so that
//! no component behind it can open a conversation with the link. A server's stack behind a
//! passt card wants it: passt hands what a guest sends its gateway to the host's loopback.
//! The protocols are smoltcp's (decision 0007): Ethernet, ARP, IPv4 with fragmentation and
//! reassembly (datagrams up to 16 KiB), ICMP (echo requests answered inside the stack), UDP and
//! TCP. This component adds the device, the clock, the waiting and the sockets as capabilities,
//! and the offload of the checksums of the TCP segments it sends to the card (module
//! [`checksum`]).
//!
//! One lock guards the stack, and one the card's transmit side (`Transmitter`). A poll thread
//! (`main`) runs the stack whenever the driver's receive interrupt or the stack's timer sets the
//! wake variable; the timer's bounded handler does so only when one of smoltcp's deadlines (a
//! retransmission, an ARP retry) is due or a caller waits with a timeout. Socket calls wait
//! inside the stack (`services_wait`) on a condition variable the poll thread signals after
//! every round, and run the stack themselves after queueing data, so a send leaves at once. The
//! card's frames are written outside the stack's lock: the poll thread wakes the calls its round
//! made ready before it writes the round's frames (the ACK of a request, say), and a call that
//! finds the poll thread writing leaves its frames for it to write next. TCP runs without
//! Nagle's algorithm, which would hold a small reply back, and acknowledges a request with its
//! reply: an ACK waits up to [`ACK_DELAY`] for data to ride on (decision 0007).
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use domos_abi::nic::FrameWord;
use domos_interfaces::network::{Datagram, Network, NetworkStatistics, TcpListener, TcpStream, UdpSocket, parse_ipv4};
use domos_interfaces::network_device::NetworkDevice;
use domos_sdk::sync::AtomicVariable;
use domos_sdk::{CallError, Condvar, HostError, Memory, Mutex, MutexGuard, Portal, names};
use smoltcp::iface::{Config, Interface, PollIngressSingleResult, PollResult, SocketHandle, SocketSet};
use smoltcp::phy::{self, Checksum, ChecksumCapabilities, DeviceCapabilities, Medium};
use smoltcp::socket::{icmp, tcp, udp};
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, HardwareAddress, Icmpv4Packet, Icmpv4Repr, IpAddress, IpCidr,
    IpEndpoint, IpProtocol, Ipv4Address, Ipv4Packet, TcpPacket,
};

domos_sdk::component! { init: init, main: main, interrupt: on_timer }

mod checksum;
mod shares;
use shares::{ROOT, Shares};

/// The timer's period: how late a deadline may be noticed.
const TICK_MS: u64 = 2;
/// Sockets open at most.
const MAX_SOCKETS: usize = 256;
/// Heap kept free beyond the sockets' buffers, for the frames, datagrams and messages of the
/// calls in flight: see `zeroed`.
const HEAP_HEADROOM: usize = 512 * 1024;
/// Bytes of each TCP socket's buffers unless `receive_buffer=` and `send_buffer=` say otherwise:
/// one short of 64 KiB, the largest window that needs no scaling (`receive_buffer=64` is 65,536
/// bytes, with a scale of 1).
const TCP_BUFFER: usize = 64 * 1024 - 1;
/// Most bytes a TCP socket holds outside smoltcp's receive buffer to keep its window from
/// shrinking ([`align_windows`]): up to a step's worth less one per segment received, so
/// only a peer that sends many tiny segments to a reader that does not read reaches it.
const MAX_HELD: usize = 4096;
/// How long a received segment's acknowledgement may wait for a segment of data to ride on, so
/// that a request's reply carries it: an ACK of its own costs a frame through the card per
/// request. smoltcp acknowledges at once every MSS of new data and every window that doubles.
const ACK_DELAY: Duration = Duration::from_millis(1);
/// The largest buffer `receive_buffer=` and `send_buffer=` may ask for, in KiB.
const MAX_TCP_BUFFER_KIB: usize = 1024;
/// Bytes of each TCP socket's receive buffer (`receive_buffer=`), which its window is made of.
static TCP_RECEIVE_BUFFER: AtomicUsize = AtomicUsize::new(TCP_BUFFER);
/// Bytes of each TCP socket's send buffer (`send_buffer=`).
static TCP_SEND_BUFFER: AtomicUsize = AtomicUsize::new(TCP_BUFFER);

/// The unit of a TCP receive window over 64 KiB, as smoltcp scales it: the receive buffer's
/// bit length beyond 16 bits is the scale, so a window is advertised in steps of `1 << scale`
/// bytes (1 for an unscaled one).
fn window_step() -> usize {
    let capacity = TCP_RECEIVE_BUFFER.load(Ordering::Relaxed);
    1 << (usize::BITS - capacity.leading_zeros()).saturating_sub(16)
}
/// Bytes of each UDP socket's receive and send buffers, and datagrams queued in each.
const UDP_BUFFER: usize = 64 * 1024;
const UDP_DATAGRAMS: usize = 32;
/// The largest UDP payload a client may send (an 8 KiB read and its headers fit).
const MAX_DATAGRAM: usize = 16 * 1024 - 64;
/// The most bytes one `receive` of a TCP stream returns.
const MAX_RECEIVE: usize = 32 * 1024;
/// The most bytes of Ethernet, IPv4 and TCP headers a frame begins with (each header at its
/// longest, with options).
const HEADERS_MAX: usize = 14 + 60 + 60;
/// Bytes of the word before each frame in the card's buffers.
const WORD: usize = FrameWord::BYTES as usize;
/// Slots of the buffers shared with the driver.
const DEVICE_SLOTS: u64 = 32;
/// Receive rounds of one poll (each takes up to `DEVICE_SLOTS` frames).
const RECEIVE_ROUNDS: usize = 8;
/// The first port handed out for port 0.
const EPHEMERAL: u16 = 49152;
/// Peers an answer-only UDP socket remembers (the oldest is forgotten first).
const PEERS: usize = 256;
/// How long a datagram waits for its class's turn on a paced link before `send_to` gives up
/// with `QuotaExceeded` (`send_to` takes no timeout).
const DATAGRAM_WAIT_MS: u32 = 200;
/// Bytes of datagrams each class of a paced link queues at most.
const CLASS_QUEUE: usize = 64 * 1024;
/// Datagrams one round hands a paced link at most.
const DISPATCH_ROUND: usize = 256;
/// The most bytes of a TCP stream admitted to a paced link at once.
const STREAM_QUANTUM: usize = 8 * 1024;
/// How long a stream closed on this side may wait for its peer to close before it is reset:
/// Linux's `tcp_fin_timeout` is 60 s; the table here holds `MAX_SOCKETS`, so that clients which
/// never close (or vanished) cannot hold it for long.
const CLOSE_LINGER_NS: u64 = 10_000_000_000;

/// Whether the stack only answers (`answer-only`).
static ANSWER_ONLY: AtomicBool = AtomicBool::new(false);

/// The handle of the variable the driver's interrupt, the timer and socket calls wake the poll
/// thread through.
static WAKE: AtomicU32 = AtomicU32::new(0);
/// When smoltcp next needs to run, in kernel-clock nanoseconds.
static DEADLINE_NS: AtomicU64 = AtomicU64::new(u64::MAX);
/// The earliest deadline of the socket calls waiting now, in kernel-clock nanoseconds
/// (`u64::MAX`: none), for the timer to wake the poll thread by. Reset by every round of the
/// poll thread, which wakes the waiters whose deadline passed; each one that waits on
/// registers its deadline again, under the stack's lock.
static WAITER_DEADLINE_NS: AtomicU64 = AtomicU64::new(u64::MAX);

static STACK: Mutex<Option<Stack>> = Mutex::new(None);
/// Signalled after every round of the stack, for the calls waiting for their class's turn on a
/// paced link (socket calls wait for their socket: `Waiting`).
static CHANGED: Condvar = Condvar::new();

fn now_ns() -> u64 {
    domos_sys::clock_ns()
}

fn now() -> Instant {
    instant(now_ns())
}

/// smoltcp's time for `ns` of [`now_ns`].
fn instant(ns: u64) -> Instant {
    Instant::from_micros((ns / 1000) as i64)
}

/// The time (ns of [`now_ns`]) `delay` after `time`: `u64::MAX` for none.
fn after(time: u64, delay: Option<Duration>) -> u64 {
    delay.map_or(u64::MAX, |delay| time.saturating_add(delay.total_micros() * 1000))
}

fn error(e: HostError) -> CallError {
    CallError::Host(e)
}

/// The card, through its driver: the receive buffer, and the frames queued for the
/// [`Transmitter`].
struct Device {
    nic: Portal<dyn NetworkDevice>,
    rx: Memory,
    slot: usize,
    slots: usize,
    mtu: usize,
    incoming: VecDeque<Vec<u8>>,
    /// Frames to send, laid out as in the transmit buffer.
    outgoing: Vec<u8>,
    queued: usize,
    frames_in: u64,
}

/// The card's transmit side, under a lock of its own. The poll thread hands a round's frames to
/// the driver — a TAP write, in which Linux takes them in and wakes whoever reads them — after it
/// has let go of the stack's lock and woken the calls the round made ready, and it keeps the
/// transmitter until no frames are left queued: a socket call that finds the transmitter taken
/// leaves its frames queued for the poll thread and goes on (a server's sender prepares its next
/// reply while the last one is written). Frames keep their order: they are queued under the
/// stack's lock and move into the transmitter only under both locks. The stack's lock is never
/// waited for while this one is held, except by the poll thread, and this one only ever tried
/// under the stack's, except by the poll thread.
struct Transmitter {
    nic: Portal<dyn NetworkDevice>,
    tx: Memory,
    slot: usize,
    /// The frames being handed over, laid out as in the transmit buffer, and their number.
    frames: Vec<u8>,
    count: usize,
}

static TRANSMITTER: Mutex<Option<Transmitter>> = Mutex::new(None);
type Sending = MutexGuard<'static, Option<Transmitter>>;
/// Frames handed to the driver.
static FRAMES_OUT: AtomicU64 = AtomicU64::new(0);

impl Transmitter {
    /// Hands the frames to the driver: one copy into the buffer, one call.
    fn send(&mut self) {
        if self.count == 0 {
            return;
        }
        let last = (self.count - 1) * self.slot;
        let word = u32::from_le_bytes([
            self.frames[last],
            self.frames[last + 1],
            self.frames[last + 2],
            self.frames[last + 3],
        ]);
        let end = last + WORD + usize::from(FrameWord::decode(word).len);
        if self.tx.write(0, &self.frames[..end]).is_ok() && self.nic.send(self.count as u32).is_ok() {
            FRAMES_OUT.fetch_add(self.count as u64, Ordering::Relaxed);
        }
        self.count = 0;
    }
}

impl Device {
    /// Takes the frames the driver has, up to `RECEIVE_ROUNDS` buffers full.
    fn fetch(&mut self) {
        for _ in 0..RECEIVE_ROUNDS {
            let Ok(count) = self.nic.receive() else {
                return;
            };
            let count = (count as usize).min(self.slots);
            if count == 0 {
                return;
            }
            // Each slot is read as far as its frame goes: a slot has room for the longest
            // frame (64 KiB on a jumbo card) and most frames are short ACKs.
            for i in 0..count {
                let at = (i * self.slot) as u64;
                let Ok(word) = self.rx.get_u32(at) else {
                    return;
                };
                // The driver is trusted no more than the wire: a length past the slot is dropped.
                let len = usize::from(FrameWord::decode(word).len);
                if len > self.slot - WORD {
                    continue;
                }
                let mut frame = vec![0u8; len];
                if self.rx.read(at + WORD as u64, &mut frame).is_err() {
                    return;
                }
                self.incoming.push_back(frame);
                self.frames_in += 1;
            }
            if count < self.slots {
                return;
            }
        }
    }

    /// Moves the queued frames into the transmitter held, whose own were sent: its buffer is
    /// free.
    fn hand_over(&mut self, sending: &mut Sending) {
        if let Some(transmitter) = sending.as_mut() {
            core::mem::swap(&mut transmitter.frames, &mut self.outgoing);
            transmitter.count = core::mem::take(&mut self.queued);
        }
    }

    /// Sends the queued frames now, unless the poll thread is sending: then it sends them after
    /// its own. Whether the queue is empty.
    fn flush(&mut self) -> bool {
        if self.queued == 0 {
            return true;
        }
        let Some(mut sending) = TRANSMITTER.try_lock() else {
            return false;
        };
        self.hand_over(&mut sending);
        if let Some(transmitter) = sending.as_mut() {
            transmitter.send();
        }
        true
    }
}

struct Rx(Vec<u8>);
struct Tx<'a>(&'a mut Device);

impl phy::RxToken for Rx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for Tx<'_> {
    /// Lets smoltcp write the frame straight into its slot of the transmit buffer.
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let device = self.0;
        let len = len.min(device.slot - WORD);
        if device.queued == device.slots && !device.flush() {
            // Queue full while the poll thread sends: the frame is dropped, as a full transmit
            // ring drops it. Only a reply made while receiving (ARP, ICMP, a TCP reset or an
            // ACK out of turn) comes here: smoltcp asks `transmit` for what it sends of its own
            // accord, and that holds it back.
            return f(&mut vec![0u8; len]);
        }
        let at = device.queued * device.slot;
        let frame = &mut device.outgoing[at + WORD..at + WORD + len];
        // smoltcp writes every byte of a payload but may skip some of the headers' (a TCP
        // header's padding after its options): no byte of an earlier frame may leak there.
        frame[..len.min(HEADERS_MAX)].fill(0);
        let result = f(frame);
        let checksum = checksum::offload_tcp(frame);
        let word = FrameWord { len: len as u16, checksum }.encode();
        device.outgoing[at..at + WORD].copy_from_slice(&word.to_le_bytes());
        device.queued += 1;
        result
    }
}

impl phy::Device for Device {
    type RxToken<'a> = Rx;
    type TxToken<'a> = Tx<'a>;

    fn receive(&mut self, _timestamp: Instant) -> Option<(Rx, Tx<'_>)> {
        let frame = self.incoming.pop_front()?;
        Some((Rx(frame), Tx(self)))
    }

    fn transmit(&mut self, _timestamp: Instant) -> Option<Tx<'_>> {
        // A full queue that cannot be sent now holds smoltcp's segments back until it can.
        if self.queued == self.slots && !self.flush() {
            return None;
        }
        Some(Tx(self))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = self.mtu + 14;
        // A sent segment's checksum is left to the card (`checksum::offload_tcp`).
        caps.checksum.tcp = Checksum::Rx;
        caps
    }
}

struct Stack {
    iface: Interface,
    sockets: SocketSet<'static>,
    device: Device,
    address: Ipv4Address,
    udp_ports: BTreeSet<u16>,
    tcp_ports: BTreeSet<u16>,
    /// Per listening port: its backlog of sockets.
    listeners: BTreeMap<u16, Backlog>,
    /// Streams whose last portal was dropped, removed once closed, with when they were dropped
    /// (kernel-clock nanoseconds): one the peer never lets close is reset after `CLOSE_LINGER_NS`.
    closing: Vec<(SocketHandle, u64)>,
    next_port: u16,
    next_ident: u16,
    /// The classes of the link and its pacer.
    shares: Shares,
    /// On a paced link, each class's datagrams waiting for their turn.
    queues: Vec<VecDeque<Queued>>,
    /// When the paced link next has room for what is queued, in kernel-clock nanoseconds.
    pace_at: u64,
    /// The calls waiting, by what they wait for: a round wakes those whose socket changed.
    waiting: BTreeMap<WaitFor, Waiting>,
    /// Woken by a round, to be notified once the lock is let go (by the poll thread).
    woken: Vec<Arc<Condvar>>,
    /// Per TCP socket, received bytes taken out of smoltcp's buffer ahead of its reader, which
    /// gets them first: see `align_windows`. An entry goes with its socket when that is removed
    /// (a handle is used again for the next socket).
    held: BTreeMap<SocketHandle, Vec<u8>>,
}

/// What a socket call waits for to change.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum WaitFor {
    Udp(SocketHandle),
    Tcp(SocketHandle),
    Icmp(SocketHandle),
    /// A connection on a listening port.
    Accept(u16),
}

/// The calls waiting for one thing. An entry stays once made (its condition variable is a
/// kernel object, made at the first wait), one per socket kind and handle and per port at most.
struct Waiting {
    wake: Arc<Condvar>,
    calls: usize,
    /// The earliest deadline of those that waited since they were last woken (perhaps of one
    /// that left since: it wakes the others once, in vain).
    deadline: u64,
    /// What the socket looked like as the round began.
    before: u64,
}

/// The sockets listening on a port, some perhaps connected by now: up to `size`, of which one
/// listens while no connection is requested, and more are made as requests come
/// (`Stack::hold_back_syns`). smoltcp looks at every socket of the table in every round, so idle
/// listening sockets cost every round (a backlog of 8 made listening at once was a quarter of the
/// NFS server's rounds: docs/BENCHMARKS.md); a socket made when a request comes costs that
/// request the zeroing of its buffers.
struct Backlog {
    size: usize,
    sockets: Vec<SocketHandle>,
}

/// A datagram waiting for its class's turn on a paced link.
struct Queued {
    handle: SocketHandle,
    to: IpEndpoint,
    data: Vec<u8>,
}

impl Stack {
    /// A round run by a socket call: when it took frames that arrived — which is what makes a
    /// waiting call's socket ready —, the poll thread is woken to run a round of its own and
    /// wake the waiting calls once this call has let go of the lock; so it is when it left its
    /// frames to the poll thread, which then sends them and runs another round for whatever a
    /// full queue held back.
    fn poll(&mut self) {
        let arrived = self.round();
        let sent = self.device.flush();
        if arrived || !sent || !self.woken.is_empty() {
            domos_sys::atomic_set_and_unblock(WAKE.load(Ordering::Acquire), 1, 1);
        }
    }

    /// One round: takes the frames that arrived, runs the protocols, queues what they produced
    /// (the caller sends it), notes the waiting calls whose socket changed or whose deadline
    /// passed in `woken`, and when the next round is due. Whether frames arrived.
    ///
    /// The round reads the clock once: its protocols run at the time it began, and waiting
    /// calls whose deadline had passed by then are woken (the poll thread's round begins after
    /// the timer that woke it, so none is missed).
    fn round(&mut self) -> bool {
        let time = now_ns();
        let before = self.device.frames_in;
        self.device.fetch();
        // Only frames received change what calls waiting for datagrams, for connections to
        // accept or for echo replies look at; a round without them looks at streams alone.
        let received = !self.device.incoming.is_empty();
        let looked_at = |what: WaitFor| received || matches!(what, WaitFor::Tcp(_));
        for (&what, waiting) in self.waiting.iter_mut().filter(|(what, w)| w.calls > 0 && looked_at(**what)) {
            waiting.before = look(&self.sockets, &self.listeners, &self.held, what);
        }
        self.hold_back_syns();
        self.dispatch();
        let mut deadline = self.egress(time);
        let (sockets, held) = (&mut self.sockets, &mut self.held);
        let mut closed = false;
        self.closing.retain(|&(h, since)| {
            let socket = sockets.get_mut::<tcp::Socket>(h);
            let done = matches!(socket.state(), tcp::State::Closed | tcp::State::TimeWait);
            if done {
                sockets.remove(h);
                held.remove(&h);
                closed = true;
            } else if time.saturating_sub(since) > CLOSE_LINGER_NS {
                // A peer that keeps its end open (or vanished) holds a socket no longer.
                socket.abort();
                closed = true;
            }
            !done
        });
        if closed {
            // The deadlines changed: an aborted socket has a reset to send, a removed one's
            // timer is gone.
            deadline = self.deadline(time);
        }
        DEADLINE_NS.store(deadline.min(self.pace_at), Ordering::Release);
        for (&what, waiting) in self.waiting.iter_mut().filter(|(_, w)| w.calls > 0) {
            let changed = looked_at(what) && look(&self.sockets, &self.listeners, &self.held, what) != waiting.before;
            if time >= waiting.deadline || changed {
                if !self.woken.iter().any(|w| Arc::ptr_eq(w, &waiting.wake)) {
                    self.woken.push(waiting.wake.clone());
                }
                // Every one of them wakes, and those that wait on say their deadlines again.
                waiting.deadline = u64::MAX;
            }
        }
        self.device.frames_in != before
    }

    /// Gives the connection requests (SYNs) of this round listening sockets, making them up to
    /// each backlog's size, and drops those a listening port has no socket for, as Linux does
    /// when a listener's queue is full: smoltcp would answer them with a reset, which a client
    /// takes as a refusal, while a dropped SYN is sent again a second later and finds the room
    /// the server has made by then. A SYN again from a peer a socket is already shaking hands
    /// with passes. Listening sockets whose handshake ended without a connection (timed out)
    /// listen again first, and a backlog left with no listening socket (the table was full when
    /// one was accepted) gets one, so that no port stops listening for good. All of it only in a
    /// round that received a request: without one, no backlog is looked at.
    fn hold_back_syns(&mut self) {
        if self.listeners.is_empty() || !self.device.incoming.iter().any(|frame| connection_request(frame).is_some()) {
            return;
        }
        // The requests of each port from peers that no socket of its backlog shakes hands with.
        let mut requests: BTreeMap<u16, BTreeSet<IpEndpoint>> = BTreeMap::new();
        for (port, peer) in self.device.incoming.iter().filter_map(|frame| connection_request(frame)) {
            let Some(backlog) = self.listeners.get(&port) else { continue };
            if !shaking_hands(&self.sockets, backlog, peer) {
                requests.entry(port).or_default().insert(peer);
            }
        }
        let mut free = BTreeMap::new();
        for (&port, backlog) in &mut self.listeners {
            let mut listening = 0;
            for &handle in &backlog.sockets {
                let socket = self.sockets.get_mut::<tcp::Socket>(handle);
                if socket.state() == tcp::State::Closed {
                    let _ = socket.listen(port);
                }
                listening += usize::from(socket.state() == tcp::State::Listen);
            }
            let wanted = requests.get(&port).map_or(0, BTreeSet::len).max(1);
            while listening < wanted && backlog.sockets.len() < backlog.size {
                let Ok(handle) = listening_socket(&mut self.sockets, port) else { break };
                backlog.sockets.push(handle);
                listening += 1;
            }
            free.insert(port, listening);
        }
        let (sockets, listeners) = (&self.sockets, &self.listeners);
        self.device.incoming.retain(|frame| {
            let Some((port, peer)) = connection_request(frame) else { return true };
            let Some(backlog) = listeners.get(&port) else { return true };
            if shaking_hands(sockets, backlog, peer) {
                return true;
            }
            match free.get_mut(&port) {
                Some(room) if *room > 0 => {
                    *room -= 1;
                    true
                }
                _ => false,
            }
        });
    }

    /// Runs the protocols at `time` (ns of [`now_ns`]) and sends what they produced, finishing
    /// any fragmented datagram; when the protocols want to run next ([`Stack::deadline`]).
    fn egress(&mut self, time: u64) -> u64 {
        self.run_protocols(time);
        // smoltcp keeps one datagram being fragmented and sends one more fragment of it per
        // round; a second datagram over the MTU would overwrite the rest. Finish it now, so that
        // whenever the lock is free no fragments wait (16 rounds cover the largest datagram).
        // The last look at every socket's deadline is the answer, not made again by the caller.
        for _ in 0..16 {
            let delay = self.iface.poll_delay(instant(time), &self.sockets);
            if delay != Some(Duration::ZERO) {
                return after(time, delay);
            }
            self.run_protocols(time);
        }
        self.deadline(time)
    }

    /// When the protocols want to run next, seen at `time` (ns of [`now_ns`]; `u64::MAX`: not
    /// until a frame arrives or a call comes), from every socket's deadline.
    fn deadline(&mut self, time: u64) -> u64 {
        after(time, self.iface.poll_delay(instant(time), &self.sockets))
    }

    /// smoltcp's `poll` at `time` — the frames that arrived, then what the sockets send — with
    /// the receive windows aligned before each half that sends (`align_windows`; with no frames
    /// to take in, the first sends nothing).
    fn run_protocols(&mut self, time: u64) {
        let time = instant(time);
        self.iface.poll_maintenance(time);
        if !self.device.incoming.is_empty() {
            self.align_windows();
        }
        while !matches!(
            self.iface.poll_ingress_single(time, &mut self.device, &mut self.sockets),
            PollIngressSingleResult::None
        ) {}
        self.align_windows();
        while !matches!(self.iface.poll_egress(time, &mut self.device, &mut self.sockets), PollResult::None) {}
    }

    /// [`align_windows`] with this stack's sockets.
    fn align_windows(&mut self) {
        align_windows(&mut self.sockets, &mut self.held, window_step());
    }

    /// On a paced link, hands the sockets the queued datagrams whose turn has come, one at a
    /// time (each sent whole before the next: see `round`), and notes in `pace_at` when to look
    /// again. A class whose turn it is with nothing queued has a TCP sender waiting in `admit`,
    /// which takes the turn itself; the waiting calls are woken for it.
    fn dispatch(&mut self) {
        self.pace_at = u64::MAX;
        if !self.shares.paced() {
            return;
        }
        for _ in 0..DISPATCH_ROUND {
            let now = now_ns();
            match self.shares.next(now) {
                Ok(class) => {
                    let Some(datagram) = self.queues[class].pop_front() else {
                        CHANGED.notify_all();
                        return;
                    };
                    self.shares.set_queued(class, datagram.data.len(), false);
                    self.shares.charge(class, datagram.data.len(), now);
                    let socket = self.sockets.get_mut::<udp::Socket>(datagram.handle);
                    // Room was checked when it was queued against the class's bound, which is
                    // within the socket's buffer; a datagram that does not fit now is dropped,
                    // as a full queue of a card drops.
                    let _ = socket.send_slice(&datagram.data, datagram.to);
                    self.egress(now);
                }
                Err(Some(at)) => {
                    self.pace_at = at;
                    DEADLINE_NS.fetch_min(at, Ordering::AcqRel);
                    return;
                }
                Err(None) => return,
            }
        }
        self.pace_at = now_ns();
    }

    /// A class under `parent` with `weight`, and its queue.
    fn add_class(&mut self, parent: usize, weight: u32) -> Option<usize> {
        let class = self.shares.add(parent, weight)?;
        self.queues.push(VecDeque::new());
        Some(class)
    }

    /// A free port: `port` itself, or for 0 the next free ephemeral one.
    fn port(&mut self, port: u16, used: impl Fn(&Stack, u16) -> bool) -> Result<u16, CallError> {
        if port != 0 {
            return if used(self, port) { Err(error(HostError::NameTaken)) } else { Ok(port) };
        }
        for _ in 0..(u16::MAX - EPHEMERAL) {
            let candidate = self.next_port;
            self.next_port = if self.next_port == u16::MAX { EPHEMERAL } else { self.next_port + 1 };
            if !used(self, candidate) {
                return Ok(candidate);
            }
        }
        Err(error(HostError::QuotaExceeded))
    }
}

/// `len` zeroed bytes for a socket's buffer or a call's, if the heap holds them and
/// `HEAP_HEADROOM` more (`QuotaExceeded` if not): a flood of sockets is refused once the heap is
/// nearly full rather than the stack trapped on a later allocation (a failed allocation ends a
/// component). The headroom is reserved with the bytes in one block and handed back at once.
fn zeroed(len: usize) -> Result<Vec<u8>, CallError> {
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len + HEAP_HEADROOM).map_err(|_| error(HostError::QuotaExceeded))?;
    bytes.resize(len, 0);
    bytes.shrink_to_fit();
    Ok(bytes)
}

/// `QuotaExceeded` when the table holds `MAX_SOCKETS`.
fn has_room(sockets: &SocketSet<'static>) -> Result<(), CallError> {
    if sockets.iter().count() >= MAX_SOCKETS { Err(error(HostError::QuotaExceeded)) } else { Ok(()) }
}

/// A TCP socket set up as every one of the stack's, if the table has room.
fn tcp_socket(sockets: &mut SocketSet<'static>) -> Result<SocketHandle, CallError> {
    has_room(sockets)?;
    let (receive, send) = (TCP_RECEIVE_BUFFER.load(Ordering::Relaxed), TCP_SEND_BUFFER.load(Ordering::Relaxed));
    let mut socket = tcp::Socket::new(tcp::SocketBuffer::new(zeroed(receive)?), tcp::SocketBuffer::new(zeroed(send)?));
    socket.set_nagle_enabled(false);
    socket.set_ack_delay(Some(ACK_DELAY));
    socket.set_timeout(Some(Duration::from_secs(60)));
    Ok(sockets.add(socket))
}

fn listening_socket(sockets: &mut SocketSet<'static>, port: u16) -> Result<SocketHandle, CallError> {
    let handle = tcp_socket(sockets)?;
    if sockets.get_mut::<tcp::Socket>(handle).listen(port).is_err() {
        sockets.remove(handle);
        return Err(error(HostError::InvalidArgument));
    }
    Ok(handle)
}

fn init() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let arg = |key: &str| args.split_whitespace().find_map(|w| w.strip_prefix(key));
    let bad = error(HostError::InvalidArgument);
    let rate = match arg("rate=") {
        Some(mbits) => mbits.parse::<u64>().ok().filter(|m| (1..=100_000).contains(m)).ok_or(bad)? * 125_000,
        None => 0,
    };
    for (key, buffer) in [("receive_buffer=", &TCP_RECEIVE_BUFFER), ("send_buffer=", &TCP_SEND_BUFFER)] {
        if let Some(kib) = arg(key) {
            let kib = kib.parse::<usize>().ok().filter(|k| (1..=MAX_TCP_BUFFER_KIB).contains(k)).ok_or(bad)?;
            buffer.store(kib * 1024, Ordering::Relaxed);
        }
    }
    let mut classes = Vec::new();
    for class in arg("classes=").unwrap_or("").split(',').filter(|c| !c.is_empty()) {
        let (name, weight) = class.split_once(':').ok_or(bad)?;
        classes.push((name, weight.parse::<u32>().map_err(|_| bad)?));
    }
    let (address, prefix) = match arg("ip=") {
        Some(text) => {
            let (ip, prefix) = text.split_once('/').unwrap_or((text, "24"));
            let ip = parse_ipv4(ip).ok_or(error(HostError::InvalidArgument))?;
            (ip, prefix.parse::<u8>().ok().filter(|p| *p <= 32).ok_or(error(HostError::InvalidArgument))?)
        }
        None => (domos_interfaces::network::ipv4(10, 0, 0, 1), 24),
    };
    let nic: Portal<dyn NetworkDevice> = names::lookup("NetworkDevice")?;
    let info = nic.info()?;
    let slot = u64::from(info.slot);
    let rx = Memory::new(DEVICE_SLOTS * slot)?;
    let tx = Memory::new(DEVICE_SLOTS * slot)?;
    let wake = AtomicVariable::new(0)?;
    let slots = nic.connect(rx.subrange(0, DEVICE_SLOTS * slot)?, tx.read_only()?, wake.clone_handle()?)? as usize;
    WAKE.store(wake.into_handle(), Ordering::Release);
    *TRANSMITTER.lock() = Some(Transmitter {
        nic: names::lookup("NetworkDevice")?,
        tx,
        slot: info.slot as usize,
        frames: vec![0; slots * info.slot as usize],
        count: 0,
    });
    let mut device = Device {
        nic,
        rx,
        slot: info.slot as usize,
        slots,
        mtu: info.mtu as usize,
        incoming: VecDeque::new(),
        outgoing: vec![0; slots * info.slot as usize],
        queued: 0,
        frames_in: 0,
    };
    let mac = info.mac_bytes();
    let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress(mac)));
    config.random_seed = now_ns() ^ u64::from(address);
    let mut iface = Interface::new(config, &mut device, now());
    let address = Ipv4Address::from(address);
    iface.update_ip_addrs(|addrs| {
        let _ = addrs.push(IpCidr::new(IpAddress::Ipv4(address), prefix));
    });
    ANSWER_ONLY.store(args.split_whitespace().any(|w| w == "answer-only"), Ordering::Relaxed);
    if let Some(gateway) = arg("gateway=").and_then(parse_ipv4) {
        let _ = iface.routes_mut().add_default_ipv4_route(Ipv4Address::from(gateway));
    }
    *STACK.lock() = Some(Stack {
        iface,
        sockets: SocketSet::new(Vec::new()),
        device,
        address,
        udp_ports: BTreeSet::new(),
        tcp_ports: BTreeSet::new(),
        listeners: BTreeMap::new(),
        closing: Vec::new(),
        next_port: EPHEMERAL,
        next_ident: 1,
        shares: Shares::new(rate),
        queues: vec![VecDeque::new()],
        pace_at: u64::MAX,
        waiting: BTreeMap::new(),
        woken: Vec::new(),
        held: BTreeMap::new(),
    });
    domos_sdk::interrupt::attach_timer(core::time::Duration::from_millis(TICK_MS))?;
    for (name, weight) in classes {
        let class = STACK.lock().as_mut().and_then(|s| s.add_class(ROOT, weight)).ok_or(bad)?;
        names::register(&alloc::format!("Network.{name}"), &Net { class }.into_portal())?;
    }
    names::register("Network", &Net { class: ROOT }.into_portal())
}

/// The stack's timer: wakes the poll thread when smoltcp has a deadline due or a waiting
/// caller's timeout has passed (not on every tick while someone waits: a server's threads
/// waiting in `receive_from` and `accept` would be woken 500 times a second each).
/// Straight-line code (`bounded` in the manifest).
fn on_timer(_source: u32, _events: u32) {
    let now = domos_sys::clock_ns();
    if now >= WAITER_DEADLINE_NS.load(Ordering::Acquire) || now >= DEADLINE_NS.load(Ordering::Acquire) {
        domos_sys::atomic_set_and_unblock(WAKE.load(Ordering::Acquire), 1, 1);
    }
}

/// The poll thread: a round of the stack whenever something woke it.
fn main() -> Result<(), CallError> {
    let wake = WAKE.load(Ordering::Acquire);
    loop {
        domos_sys::atomic_set(wake, 0);
        let mut woken = Vec::new();
        let mut sending = None;
        let mut paced = false;
        if let Some(stack) = STACK.lock().as_mut() {
            stack.round();
            paced = stack.shares.paced();
            if stack.device.queued > 0 {
                // Free: only this thread holds it without the stack's lock.
                let mut transmitter = TRANSMITTER.lock();
                stack.device.hand_over(&mut transmitter);
                sending = Some(transmitter);
            }
            woken = core::mem::take(&mut stack.woken);
            // Under the lock: every waiting call is either waiting now, and registered its
            // deadline in `waiting` (which this round looked at), or registers it after this.
            let earliest = stack.waiting.values().filter(|w| w.calls > 0).map(|w| w.deadline).min();
            WAITER_DEADLINE_NS.store(earliest.unwrap_or(u64::MAX), Ordering::Release);
        }
        // After the lock is let go, so that the calls woken do not wait for it at once.
        for wake in woken {
            wake.notify_all();
        }
        if paced {
            CHANGED.notify_all();
        }
        if let Some(sending) = sending {
            send_all(sending);
        }
        if domos_sys::atomic_block_if_equal(wake, 0) < 0 {
            return Err(error(HostError::NotPermitted));
        }
    }
}

type Guard = MutexGuard<'static, Option<Stack>>;

/// The poll thread's sending: the frames in the transmitter, then those the socket calls queued
/// meanwhile, until none are left. The transmitter is let go under the stack's lock, so that a
/// socket call that found it taken has queued its frames before the last look.
fn send_all(mut sending: Sending) {
    loop {
        if let Some(transmitter) = sending.as_mut() {
            transmitter.send();
        }
        let mut guard = STACK.lock();
        let Some(stack) = guard.as_mut() else { return };
        if stack.device.queued == 0 {
            drop(sending);
            return;
        }
        stack.device.hand_over(&mut sending);
    }
}

fn lock() -> Result<Guard, CallError> {
    let guard = STACK.lock();
    if guard.is_none() {
        return Err(error(HostError::NotFound));
    }
    Ok(guard)
}

fn stack(guard: &mut Guard) -> &mut Stack {
    // `lock` checked that the stack is there, and nothing takes it away.
    guard.as_mut().unwrap_or_else(|| unreachable!())
}

/// Waits for the next round of the stack (a paced link's turns are given out in rounds), or
/// gives up at `deadline`: `None` then.
fn wait_for_round(guard: Guard, deadline: u64) -> Option<Guard> {
    if now_ns() >= deadline {
        return None;
    }
    WAITER_DEADLINE_NS.fetch_min(deadline, Ordering::AcqRel);
    Some(CHANGED.wait(guard))
}

/// Waits until a round of the stack changes `what` or `deadline` passes; `None` if it had.
fn wait(mut guard: Guard, what: WaitFor, deadline: u64) -> Option<Guard> {
    if now_ns() >= deadline {
        return None;
    }
    let s = stack(&mut guard);
    let waiting = s.waiting.entry(what).or_insert_with(|| Waiting {
        wake: Arc::new(Condvar::new()),
        calls: 0,
        deadline: u64::MAX,
        before: 0,
    });
    waiting.calls += 1;
    waiting.deadline = waiting.deadline.min(deadline);
    let wake = waiting.wake.clone();
    WAITER_DEADLINE_NS.fetch_min(deadline, Ordering::AcqRel);
    let mut guard = wake.wait(guard);
    if let Some(waiting) = stack(&mut guard).waiting.get_mut(&what) {
        waiting.calls -= 1;
        if waiting.calls == 0 {
            waiting.deadline = u64::MAX;
        }
    }
    Some(guard)
}

/// A fingerprint of what the calls waiting for `what` look at: it differs after a round that
/// changed it (for a listening port, how many of its connections are ready to be accepted).
fn look(
    sockets: &SocketSet<'static>,
    listeners: &BTreeMap<u16, Backlog>,
    held: &BTreeMap<SocketHandle, Vec<u8>>,
    what: WaitFor,
) -> u64 {
    let tcp = |handle: SocketHandle| {
        let socket = sockets.get::<tcp::Socket>(handle);
        let received = socket.recv_queue() + held.get(&handle).map_or(0, Vec::len);
        (socket.state() as u64) << 48 ^ (received as u64) << 24 ^ socket.send_queue() as u64
    };
    match what {
        WaitFor::Udp(handle) => {
            let socket = sockets.get::<udp::Socket>(handle);
            u64::from(socket.can_recv()) << 32 ^ socket.recv_queue() as u64
        }
        WaitFor::Tcp(handle) => tcp(handle),
        WaitFor::Icmp(handle) => sockets.get::<icmp::Socket>(handle).recv_queue() as u64,
        WaitFor::Accept(port) => listeners.get(&port).map_or(0, |backlog| {
            backlog.sockets.iter().filter(|&&h| ready(sockets.get::<tcp::Socket>(h))).count() as u64
        }),
    }
}

/// Keeps the bytes in each connected TCP socket's receive buffer a multiple of its window's
/// `step` (`window_step`) by moving the rest into `held`, where its reader finds them first
/// ([`take_received`]). smoltcp advertises its free space rounded down to a step, so a segment
/// of any other length would move the window's right edge left — a shrinking window, which a
/// sender need not expect: smoltcp drops the bytes the peer sent under the old edge, and
/// smoltcp 0.14 as that peer then idles its retransmission timer with them unacknowledged, and
/// the stream stalls for good (decision 0007). With whole steps received, the free space keeps
/// its remainder (a buffer of whole KiB is a whole number of steps) and the edge only moves
/// right. Entries of sockets that no longer hold a connection are dropped (those of sockets
/// removed from the table went with them).
fn align_windows(sockets: &mut SocketSet<'static>, held: &mut BTreeMap<SocketHandle, Vec<u8>>, step: usize) {
    if step == 1 {
        return;
    }
    held.retain(|&handle, _| connected(sockets.get::<tcp::Socket>(handle)));
    for (handle, socket) in sockets.iter_mut() {
        let smoltcp::socket::Socket::Tcp(socket) = socket else { continue };
        if !connected(socket) {
            continue;
        }
        let extra = socket.recv_queue() % step;
        if extra == 0 {
            continue;
        }
        let bytes = held.entry(handle).or_default();
        if bytes.len() + extra <= MAX_HELD {
            // Twice at most: the first piece may end where smoltcp's ring wraps around.
            let mut left = extra;
            while let Ok(taken @ 1..) = socket.recv(|data| {
                let taken = left.min(data.len());
                bytes.extend_from_slice(&data[..taken]);
                (taken, taken)
            }) {
                left -= taken;
            }
        }
        if bytes.is_empty() {
            held.remove(&handle);
        }
    }
}

/// Whether a TCP socket holds a connection, whose receive window `align_windows` keeps.
fn connected(socket: &tcp::Socket) -> bool {
    !matches!(socket.state(), tcp::State::Closed | tcp::State::Listen | tcp::State::SynSent | tcp::State::SynReceived)
}

/// Moves the bytes received on the TCP socket `handle` into `buffer`, those `align_windows`
/// held first; how many.
fn take_received(
    sockets: &mut SocketSet<'static>,
    held: &mut BTreeMap<SocketHandle, Vec<u8>>,
    handle: SocketHandle,
    buffer: &mut [u8],
) -> usize {
    let mut len = 0;
    if let Some(bytes) = held.get_mut(&handle) {
        len = bytes.len().min(buffer.len());
        buffer[..len].copy_from_slice(&bytes[..len]);
        bytes.drain(..len);
        if bytes.is_empty() {
            held.remove(&handle);
        }
    }
    len + sockets.get_mut::<tcp::Socket>(handle).recv_slice(&mut buffer[len..]).unwrap_or(0)
}

/// Whether a socket of `backlog` is shaking hands with (or connected to) `peer`.
fn shaking_hands(sockets: &SocketSet<'static>, backlog: &Backlog, peer: IpEndpoint) -> bool {
    backlog.sockets.iter().any(|&h| sockets.get::<tcp::Socket>(h).remote_endpoint() == Some(peer))
}

/// Whether a backlog socket holds a connection to accept.
fn ready(socket: &tcp::Socket) -> bool {
    !matches!(socket.state(), tcp::State::Listen | tcp::State::SynReceived | tcp::State::Closed)
}

/// The port and peer of a frame that asks to open a TCP connection (SYN without ACK).
fn connection_request(frame: &[u8]) -> Option<(u16, IpEndpoint)> {
    let ethernet = EthernetFrame::new_checked(frame).ok()?;
    if ethernet.ethertype() != EthernetProtocol::Ipv4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(ethernet.payload()).ok()?;
    if ip.next_header() != IpProtocol::Tcp || ip.frag_offset() != 0 || ip.more_frags() {
        return None;
    }
    let segment = TcpPacket::new_checked(ip.payload()).ok()?;
    (segment.syn() && !segment.ack())
        .then(|| (segment.dst_port(), IpEndpoint::new(IpAddress::Ipv4(ip.src_addr()), segment.src_port())))
}

fn deadline(timeout_ms: u32) -> u64 {
    now_ns().saturating_add(u64::from(timeout_ms) * 1_000_000)
}

fn endpoint(address: u32, port: u16) -> IpEndpoint {
    IpEndpoint::new(IpAddress::Ipv4(Ipv4Address::from(address)), port)
}

/// The stack seen through one class of its link.
struct Net {
    class: usize,
}

impl Network for Net {
    fn address(&self) -> Result<u32, CallError> {
        Ok(u32::from(stack(&mut lock()?).address))
    }

    fn udp_bind(&self, port: u16) -> Result<Portal<dyn UdpSocket>, CallError> {
        let mut guard = lock()?;
        let s = stack(&mut guard);
        has_room(&s.sockets)?;
        let port = s.port(port, |s, p| s.udp_ports.contains(&p))?;
        let buffer = || -> Result<_, CallError> {
            Ok(udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; UDP_DATAGRAMS], zeroed(UDP_BUFFER)?))
        };
        let mut socket = udp::Socket::new(buffer()?, buffer()?);
        socket.bind(port).map_err(|_| error(HostError::InvalidArgument))?;
        let handle = s.sockets.add(socket);
        s.udp_ports.insert(port);
        Ok(Portal::new(Arc::new(Udp { handle, port, class: self.class, peers: Mutex::new(VecDeque::new()) })))
    }

    fn tcp_listen(&self, port: u16, backlog: u32) -> Result<Portal<dyn TcpListener>, CallError> {
        if port == 0 || !(1..=16).contains(&backlog) {
            return Err(error(HostError::InvalidArgument));
        }
        let mut guard = lock()?;
        let s = stack(&mut guard);
        if s.listeners.contains_key(&port) {
            return Err(error(HostError::NameTaken));
        }
        // One socket listens; more are made as connections are requested (`Backlog`).
        let listening = listening_socket(&mut s.sockets, port)?;
        s.listeners.insert(port, Backlog { size: backlog as usize, sockets: vec![listening] });
        s.tcp_ports.insert(port);
        Ok(Portal::new(Arc::new(Listener { port, class: self.class })))
    }

    fn tcp_connect(
        &self,
        address: u32,
        port: u16,
        timeout_ms: u32,
    ) -> Result<Option<Portal<dyn TcpStream>>, CallError> {
        refuse_if_answer_only()?;
        let until = deadline(timeout_ms);
        let mut guard = lock()?;
        let s = stack(&mut guard);
        let local = s.port(0, |s, p| s.tcp_ports.contains(&p))?;
        let handle = tcp_socket(&mut s.sockets)?;
        let connected =
            s.sockets.get_mut::<tcp::Socket>(handle).connect(s.iface.context(), endpoint(address, port), local);
        if connected.is_err() {
            s.sockets.remove(handle);
            return Err(error(HostError::InvalidArgument));
        }
        s.poll();
        loop {
            let s = stack(&mut guard);
            match s.sockets.get::<tcp::Socket>(handle).state() {
                tcp::State::Established => {
                    return Ok(Some(Portal::new(Arc::new(Stream { handle, class: self.class }))));
                }
                tcp::State::Closed => break,
                _ => {}
            }
            match wait(guard, WaitFor::Tcp(handle), until) {
                Some(next) => guard = next,
                None => {
                    let mut guard = STACK.lock();
                    if let Some(s) = guard.as_mut() {
                        s.sockets.get_mut::<tcp::Socket>(handle).abort();
                        s.closing.push((handle, now_ns()));
                    }
                    return Ok(None);
                }
            }
        }
        let s = stack(&mut guard);
        s.sockets.remove(handle);
        s.held.remove(&handle);
        Ok(None)
    }

    fn ping(&self, address: u32, len: u32, timeout_ms: u32) -> Result<Option<u64>, CallError> {
        refuse_if_answer_only()?;
        let len = (len as usize).min(1400);
        let until = deadline(timeout_ms);
        let mut guard = lock()?;
        let s = stack(&mut guard);
        has_room(&s.sockets)?;
        let ident = s.next_ident;
        s.next_ident = s.next_ident.wrapping_add(1).max(1);
        let buffer = || icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; 4], vec![0; 4096]);
        let mut socket = icmp::Socket::new(buffer(), buffer());
        socket.bind(icmp::Endpoint::Ident(ident)).map_err(|_| error(HostError::InvalidArgument))?;
        let handle = s.sockets.add(socket);
        let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let request = Icmpv4Repr::EchoRequest { ident, seq_no: 1, data: &payload };
        let sent_at = now_ns();
        let to = IpAddress::Ipv4(Ipv4Address::from(address));
        let queued = match s.sockets.get_mut::<icmp::Socket>(handle).send(request.buffer_len(), to) {
            Ok(buffer) => {
                request.emit(&mut Icmpv4Packet::new_unchecked(buffer), &ChecksumCapabilities::default());
                true
            }
            Err(_) => false,
        };
        let mut answer = None;
        if queued {
            s.poll();
            loop {
                let s = stack(&mut guard);
                let socket = s.sockets.get_mut::<icmp::Socket>(handle);
                let mut replied = false;
                while let Ok((data, _from)) = socket.recv() {
                    let reply = Icmpv4Packet::new_checked(data)
                        .ok()
                        .and_then(|p| Icmpv4Repr::parse(&p, &ChecksumCapabilities::default()).ok().map(|r| (r, p)));
                    if let Some((Icmpv4Repr::EchoReply { ident: i, seq_no: 1, data }, _)) = reply
                        && i == ident
                        && data == &payload[..]
                    {
                        replied = true;
                    }
                }
                if replied {
                    answer = Some(now_ns() - sent_at);
                    break;
                }
                match wait(guard, WaitFor::Icmp(handle), until) {
                    Some(next) => guard = next,
                    None => {
                        guard = STACK.lock();
                        break;
                    }
                }
            }
        }
        stack(&mut guard).sockets.remove(handle);
        Ok(answer)
    }

    fn statistics(&self) -> Result<NetworkStatistics, CallError> {
        let mut guard = lock()?;
        let s = stack(&mut guard);
        Ok(NetworkStatistics {
            frames_in: s.device.frames_in,
            frames_out: FRAMES_OUT.load(Ordering::Relaxed),
            sockets: s.sockets.iter().count() as u32,
        })
    }

    fn class(&self, weight: u32) -> Result<Portal<dyn Network>, CallError> {
        let mut guard = lock()?;
        let s = stack(&mut guard);
        let class = match s.add_class(self.class, weight) {
            Some(class) => class,
            None if (1..=shares::MAX_WEIGHT).contains(&weight) => return Err(error(HostError::QuotaExceeded)),
            None => return Err(error(HostError::InvalidArgument)),
        };
        Ok(Net { class }.into_portal())
    }
}

/// Waits until `class` may send `len` more bytes of a stream on the link (at once on a link not
/// paced), or until `until`: whether it may, with the stack's lock held again either way.
fn admit(mut guard: Guard, class: usize, len: usize, until: u64) -> (Guard, bool) {
    if !stack(&mut guard).shares.paced() {
        return (guard, true);
    }
    stack(&mut guard).shares.set_waiting(class, true, now_ns());
    let admitted = loop {
        let s = stack(&mut guard);
        s.dispatch();
        let now = now_ns();
        let again = match s.shares.next(now) {
            Ok(next) if next == class => {
                s.shares.charge(class, len, now);
                break true;
            }
            _ if now >= until => break false,
            // Another stream's class: `dispatch` woke its sender.
            Ok(_) => now + TICK_MS * 1_000_000,
            Err(at) => at.unwrap_or(until),
        };
        // The timer wakes the poll thread, and it every waiting call, once `again` passes.
        WAITER_DEADLINE_NS.fetch_min(again.min(until), Ordering::AcqRel);
        guard = CHANGED.wait(guard);
    };
    let s = stack(&mut guard);
    s.shares.set_waiting(class, false, now_ns());
    (guard, admitted)
}

/// `NotPermitted` in an answer-only stack: what opens a conversation.
fn refuse_if_answer_only() -> Result<(), CallError> {
    if ANSWER_ONLY.load(Ordering::Relaxed) { Err(error(HostError::NotPermitted)) } else { Ok(()) }
}

struct Udp {
    handle: SocketHandle,
    port: u16,
    /// The class of the link it sends in.
    class: usize,
    /// In an answer-only stack, the peers this socket last received from, newest last: the only
    /// ones it may send to.
    peers: Mutex<VecDeque<(u32, u16)>>,
}

impl UdpSocket for Udp {
    fn port(&self) -> Result<u16, CallError> {
        Ok(self.port)
    }

    fn send_to(&self, address: u32, port: u16, data: &[u8]) -> Result<(), CallError> {
        if data.len() > MAX_DATAGRAM || port == 0 {
            return Err(error(HostError::InvalidArgument));
        }
        if ANSWER_ONLY.load(Ordering::Relaxed) && !self.peers.lock().contains(&(address, port)) {
            return Err(error(HostError::NotPermitted));
        }
        let mut guard = lock()?;
        if stack(&mut guard).shares.paced() {
            // The datagram waits in its class's queue for its turn; the sender waits only for
            // room in the queue.
            let until = deadline(DATAGRAM_WAIT_MS);
            loop {
                let s = stack(&mut guard);
                let queued = s.shares.queued(self.class);
                if queued == 0 || queued + data.len() <= CLASS_QUEUE {
                    s.shares.set_queued(self.class, data.len(), true);
                    let datagram = Queued { handle: self.handle, to: endpoint(address, port), data: data.to_vec() };
                    s.queues[self.class].push_back(datagram);
                    s.dispatch();
                    s.device.flush();
                    return Ok(());
                }
                match wait_for_round(guard, until) {
                    Some(next) => guard = next,
                    None => return Err(error(HostError::QuotaExceeded)),
                }
            }
        }
        let s = stack(&mut guard);
        let sent = s.sockets.get_mut::<udp::Socket>(self.handle).send_slice(data, endpoint(address, port));
        match sent {
            Ok(()) => {
                s.poll();
                Ok(())
            }
            Err(udp::SendError::BufferFull) => Err(error(HostError::QuotaExceeded)),
            Err(udp::SendError::Unaddressable) => Err(error(HostError::InvalidArgument)),
        }
    }

    fn receive_from(&self, timeout_ms: u32) -> Result<Option<Datagram>, CallError> {
        let until = deadline(timeout_ms);
        let mut guard = lock()?;
        loop {
            let s = stack(&mut guard);
            if let Ok((data, meta)) = s.sockets.get_mut::<udp::Socket>(self.handle).recv() {
                let address = match meta.endpoint.addr {
                    IpAddress::Ipv4(a) => u32::from(a),
                };
                let port = meta.endpoint.port;
                if ANSWER_ONLY.load(Ordering::Relaxed) {
                    let mut peers = self.peers.lock();
                    if let Some(known) = peers.iter().position(|&peer| peer == (address, port)) {
                        peers.remove(known);
                    } else if peers.len() == PEERS {
                        peers.pop_front();
                    }
                    peers.push_back((address, port));
                }
                return Ok(Some(Datagram { address, port, data: data.to_vec() }));
            }
            match wait(guard, WaitFor::Udp(self.handle), until) {
                Some(next) => guard = next,
                None => return Ok(None),
            }
        }
    }
}

impl Drop for Udp {
    fn drop(&mut self) {
        if let Some(s) = STACK.lock().as_mut() {
            // What it queued on a paced link goes with it.
            let handle = self.handle;
            let mut dropped = 0;
            s.queues[self.class].retain(|d| {
                let mine = d.handle == handle;
                dropped += if mine { d.data.len() } else { 0 };
                !mine
            });
            s.shares.set_queued(self.class, dropped, false);
            s.sockets.remove(self.handle);
            s.udp_ports.remove(&self.port);
        }
    }
}

struct Listener {
    port: u16,
    /// The class of the link the connections it accepts send in.
    class: usize,
}

impl TcpListener for Listener {
    fn accept(&self, timeout_ms: u32) -> Result<Option<Portal<dyn TcpStream>>, CallError> {
        let until = deadline(timeout_ms);
        let mut guard = lock()?;
        loop {
            let s = stack(&mut guard);
            let Some(backlog) = s.listeners.get_mut(&self.port) else { return Err(error(HostError::ServiceDead)) };
            if let Some(i) = backlog.sockets.iter().position(|&h| ready(s.sockets.get::<tcp::Socket>(h))) {
                // The port goes on listening: a fresh socket listens when none of the backlog
                // does, or, while the table is full, the next round with a request makes one
                // (`hold_back_syns`).
                let handle = backlog.sockets.swap_remove(i);
                let listens = |h: &SocketHandle| s.sockets.get::<tcp::Socket>(*h).state() == tcp::State::Listen;
                if !backlog.sockets.iter().any(listens)
                    && let Ok(fresh) = listening_socket(&mut s.sockets, self.port)
                {
                    backlog.sockets.push(fresh);
                }
                return Ok(Some(Portal::new(Arc::new(Stream { handle, class: self.class }))));
            }
            match wait(guard, WaitFor::Accept(self.port), until) {
                Some(next) => guard = next,
                None => return Ok(None),
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(s) = STACK.lock().as_mut() {
            for handle in s.listeners.remove(&self.port).map(|b| b.sockets).unwrap_or_default() {
                s.sockets.remove(handle);
                s.held.remove(&handle);
            }
            s.tcp_ports.remove(&self.port);
        }
    }
}

struct Stream {
    handle: SocketHandle,
    /// The class of the link it sends in.
    class: usize,
}

impl TcpStream for Stream {
    fn peer(&self) -> Result<(u32, u16), CallError> {
        let mut guard = lock()?;
        let socket = stack(&mut guard).sockets.get::<tcp::Socket>(self.handle);
        let peer = socket.remote_endpoint().ok_or(error(HostError::ServiceDead))?;
        let IpAddress::Ipv4(address) = peer.addr;
        Ok((u32::from(address), peer.port))
    }

    fn send(&self, data: &[u8], timeout_ms: u32) -> Result<u32, CallError> {
        let until = deadline(timeout_ms);
        let mut sent = 0;
        let mut guard = lock()?;
        loop {
            let s = stack(&mut guard);
            let socket = s.sockets.get_mut::<tcp::Socket>(self.handle);
            if !socket.may_send() {
                return if sent > 0 { Ok(sent as u32) } else { Err(error(HostError::ServiceDead)) };
            }
            let room = socket.send_capacity() - socket.send_queue();
            if !s.shares.paced() {
                sent += socket.send_slice(&data[sent..]).unwrap_or(0);
            } else if room > 0 {
                // On a paced link the bytes enter the send buffer as the class's turns come.
                let len = (data.len() - sent).min(room).min(STREAM_QUANTUM);
                let admitted;
                (guard, admitted) = admit(guard, self.class, len, until);
                if admitted {
                    let s = stack(&mut guard);
                    let socket = s.sockets.get_mut::<tcp::Socket>(self.handle);
                    sent += socket.send_slice(&data[sent..sent + len]).unwrap_or(0);
                    s.poll();
                    if sent < data.len() {
                        continue;
                    }
                }
            }
            let s = stack(&mut guard);
            s.poll();
            if sent == data.len() {
                return Ok(sent as u32);
            }
            // The round just run may have taken the acknowledgements that make room. A wait
            // hears only of the rounds after it, and when nothing is left in flight no later
            // round changes this socket: the call would sleep until its deadline (READ replies
            // of the NFS server stalled for its 1 s timeout). So look again first.
            let socket = s.sockets.get::<tcp::Socket>(self.handle);
            if socket.send_queue() < socket.send_capacity() && now_ns() < until {
                continue;
            }
            match wait(guard, WaitFor::Tcp(self.handle), until) {
                Some(next) => guard = next,
                None => return Ok(sent as u32),
            }
        }
    }

    fn receive(&self, max: u32, timeout_ms: u32) -> Result<Option<Vec<u8>>, CallError> {
        let until = deadline(timeout_ms);
        let mut guard = lock()?;
        loop {
            let s = stack(&mut guard);
            let socket = s.sockets.get::<tcp::Socket>(self.handle);
            let available = socket.recv_queue() + s.held.get(&self.handle).map_or(0, Vec::len);
            if available > 0 {
                // As long as what is there, not as `max`: a request of 100 bytes came in a zeroed
                // buffer of 32 KiB.
                let crowded = socket.recv_queue() > socket.recv_capacity() / 2;
                let mut buffer = zeroed(available.min(max as usize).min(MAX_RECEIVE))?;
                let len = take_received(&mut s.sockets, &mut s.held, self.handle, &mut buffer);
                buffer.truncate(len);
                // The window opened. smoltcp tells the peer of it on its own only once it has
                // doubled, which is only possible where the buffer was over half full: then a
                // round now tells it. Otherwise the window last told is a quarter of the buffer
                // or more, on which the peer goes on sending (and every segment sent tells the
                // window as it is then): a round here was a third of the stack's time in an NFS
                // request over TCP (docs/BENCHMARKS.md).
                if crowded {
                    s.poll();
                }
                return Ok(Some(buffer));
            }
            if !socket.may_recv() {
                return Ok(Some(Vec::new()));
            }
            match wait(guard, WaitFor::Tcp(self.handle), until) {
                Some(next) => guard = next,
                None => return Ok(None),
            }
        }
    }

    fn close(&self) -> Result<(), CallError> {
        let mut guard = lock()?;
        let s = stack(&mut guard);
        s.sockets.get_mut::<tcp::Socket>(self.handle).close();
        s.poll();
        Ok(())
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Some(s) = STACK.lock().as_mut() {
            s.sockets.get_mut::<tcp::Socket>(self.handle).close();
            s.closing.push((self.handle, now_ns()));
        }
        // Not a round of its own: this runs in `domos_release`, before a call whose request
        // waits in the same message buffer that a call to the driver would overwrite.
        domos_sys::atomic_set_and_unblock(WAKE.load(Ordering::Acquire), 1, 1);
    }
}

#[cfg(test)]
mod tests;
