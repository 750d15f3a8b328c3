//! Emulated network cards (`[[nic]]` in the configuration): a Linux TAP device, a stream socket
//! (QEMU's stream protocol, as `passt` speaks it), or one end of a pair of cards wired to each
//! other in memory. As with the disks, the kernel only moves data:
//! a driver attaches two rings held in memory objects (`nic_attach`), the kernel
//! writes each received frame into the next free receive slot and signals the card's interrupt,
//! the driver's verified bounded handler wakes whoever waits, and the driver releases slots once
//! it has taken their frames (`nic_ready`, `nic_release`). To send, the driver writes frames into
//! transmit slots and calls `nic_transmit`, which copies them out to the link before it returns,
//! so a transmit slot is free again at once: onto a stream or into the peer's ring, or, for a
//! TAP card, into a queue that the card's thread writes to Linux (see [`Outgoing`]).
//!
//! A slot is a word — the frame's length, and in a frame to send where the card is to fill in a
//! TCP or UDP checksum (`domos_abi::nic::FrameWord`) — followed by the frame (Ethernet header
//! first, no Ethernet checksum). A TAP card lets Linux take such a checksum as filled in (it
//! neither sums nor checks one for local delivery), the other cards fill it in. Frames that find
//! no free receive slot, or no rings, are dropped and counted, as a card's full receive queue
//! drops them.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use domos_abi::HostError;
use domos_abi::nic::{ChecksumAt, FrameWord};
use domos_loader::nic::{NicBackend, NicConfig};

use super::interrupt::EventSource;
use super::memory::MemoryObject;
use super::stream::{MAX_STREAM_FRAME, Stream};
use super::tap::{self, Tap};
use super::{BusyPoll, DEVICE_LOOK};
use crate::console::Console;

/// Bytes of the word at the start of a slot.
pub const SLOT_HEADER: u64 = FrameWord::BYTES;
/// Bytes of an Ethernet header: the shortest frame.
pub const ETHERNET_HEADER: u64 = 14;
/// Largest slot.
pub const MAX_SLOT: u64 = 64 * 1024;
const _: () =
    assert!(SLOT_HEADER + ETHERNET_HEADER + domos_loader::nic::MAX_MTU as u64 <= MAX_SLOT, "a slot holds any frame");
/// Most slots per ring.
pub const MAX_SLOTS: u64 = 1024;
/// Most bytes of frames queued for a TAP card's thread: two calls' worth of a stack's 32 jumbo
/// frames. Frames beyond are dropped, as a saturated link drops them.
const MAX_OUTGOING: usize = 4 << 20;
/// Most emptied frame buffers a TAP card keeps for the next frames.
const SPARE_FRAMES: usize = 64;

thread_local! {
    /// Each kernel thread's buffer for a frame on its way from a transmit slot to a stream or a
    /// pair's peer (a TAP card's frames go into its queue), kept at the longest frame sent so
    /// far: a transmission neither allocates nor zeroes.
    static FRAME: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// What `nic_info` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Info {
    /// The MTU: the largest IP packet in a frame.
    Mtu = 0,
    /// The Ethernet address, as the low 48 bits (first byte most significant).
    Mac = 1,
    /// Frames written into the receive ring.
    Received = 2,
    /// Frames dropped: on arrival (no rings, a full receive ring, a bad length) or on their way
    /// to a TAP card (its queue full).
    Dropped = 3,
    /// Frames sent.
    Sent = 4,
}

impl Info {
    /// The item numbered `what`.
    pub fn from_u32(what: u32) -> Option<Info> {
        [Info::Mtu, Info::Mac, Info::Received, Info::Dropped, Info::Sent].into_iter().find(|i| *i as u32 == what)
    }
}

enum Link {
    Tap(Tap),
    Stream(Stream),
    Pair(OnceLock<Weak<Nic>>),
}

struct Rings {
    rx: MemoryObject,
    tx: MemoryObject,
    slot: u64,
    /// Slots of each ring: the transmit ring may be another size (a client's own buffer).
    rx_slots: u64,
    tx_slots: u64,
    /// Frames written into the receive ring so far.
    head: u64,
    /// Frames the driver released so far.
    tail: u64,
}

/// Frames on their way to a TAP card: `transmit` copies them in and the card's thread writes
/// them to Linux, whose work for a frame — its TCP's, and the peer's next segments that an ACK
/// lets go — then runs on that thread and not on the kernel CPU that sent it.
#[derive(Default)]
struct Outgoing {
    frames: VecDeque<Queued>,
    /// Bytes of the frames in `frames`.
    bytes: usize,
    /// Written frames' buffers, for the next frames.
    spare: Vec<Vec<u8>>,
}

/// A frame in a TAP card's queue: the first `len` bytes of `buffer`. A buffer keeps the length
/// of the longest frame it held, so that the next frames put into it are copied in, not
/// zeroed first (a small frame's buffer grown to a jumbo one's was 3 % of a READ's kernel CPU).
struct Queued {
    buffer: Vec<u8>,
    len: usize,
}

/// One emulated network card.
pub struct Nic {
    /// Its name in the configuration.
    pub name: String,
    /// Its Ethernet address.
    pub mac: [u8; 6],
    /// The largest IP packet a frame carries.
    pub mtu: u32,
    link: Link,
    rings: Mutex<Option<Rings>>,
    /// Held by a frame's arrival while it is copied into its receive slot, and by `attach`.
    delivering: Mutex<()>,
    interrupt: Mutex<Option<Arc<EventSource>>>,
    received: AtomicU64,
    dropped: AtomicU64,
    sent: AtomicU64,
    /// A TAP card's frames to send, and whether its thread sleeps (then `transmit` wakes it).
    outgoing: Mutex<Outgoing>,
    sleeping: AtomicBool,
    stopped: AtomicBool,
    /// Where the card reports a dropped stream connection.
    console: Arc<Console>,
}

impl Nic {
    fn new(name: &str, mac: [u8; 6], mtu: u32, link: Link, console: Arc<Console>) -> Nic {
        Nic {
            name: name.to_string(),
            mac,
            mtu,
            link,
            rings: Mutex::new(None),
            delivering: Mutex::new(()),
            interrupt: Mutex::new(None),
            received: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            outgoing: Mutex::new(Outgoing::default()),
            sleeping: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            console,
        }
    }

    /// The longest frame: the MTU and the Ethernet header.
    pub fn max_frame(&self) -> u64 {
        u64::from(self.mtu) + ETHERNET_HEADER
    }

    /// The item `what` of [`Info`].
    pub fn info(&self, what: Info) -> u64 {
        match what {
            Info::Mtu => u64::from(self.mtu),
            Info::Mac => self.mac.iter().fold(0, |v, b| v << 8 | u64::from(*b)),
            Info::Received => self.received.load(Ordering::Relaxed),
            Info::Dropped => self.dropped.load(Ordering::Relaxed),
            Info::Sent => self.sent.load(Ordering::Relaxed),
        }
    }

    /// Attaches the receive ring `rx` and the transmit ring `tx`, each cut into slots of `slot`
    /// bytes (replacing any earlier rings, whose frames are forgotten); returns the number of
    /// receive slots. Each ring has as many slots as fit, at most [`MAX_SLOTS`].
    ///
    /// # Errors
    /// `InvalidArgument` for a slot that cannot hold the longest frame or is over [`MAX_SLOT`]
    /// or not a multiple of 4, or a ring too small for one slot; `ReadOnly` for a read-only
    /// receive ring; `Revoked` for a revoked ring.
    pub fn attach(&self, rx: MemoryObject, tx: MemoryObject, slot: u32) -> Result<u32, HostError> {
        let slot = u64::from(slot);
        if slot < SLOT_HEADER + self.max_frame() || slot > MAX_SLOT || !slot.is_multiple_of(4) {
            return Err(HostError::InvalidArgument);
        }
        rx.read_bytes(0, &mut [])?;
        tx.read_bytes(0, &mut [])?;
        if !rx.is_writable() {
            return Err(HostError::ReadOnly);
        }
        let (rx_slots, tx_slots) = ((rx.len() / slot).min(MAX_SLOTS), (tx.len() / slot).min(MAX_SLOTS));
        if rx_slots == 0 || tx_slots == 0 {
            return Err(HostError::InvalidArgument);
        }
        let _no_arrival = crate::lock(&self.delivering);
        *crate::lock(&self.rings) = Some(Rings { rx, tx, slot, rx_slots, tx_slots, head: 0, tail: 0 });
        Ok(rx_slots as u32)
    }

    /// Makes `source` the receive interrupt (replacing any earlier one).
    pub fn attach_interrupt(&self, source: Arc<EventSource>) {
        *crate::lock(&self.interrupt) = Some(source);
    }

    /// Received frames waiting in the receive ring, from the oldest unreleased slot on.
    ///
    /// # Errors
    /// `NotFound` before rings are attached.
    pub fn ready(&self) -> Result<u64, HostError> {
        let rings = crate::lock(&self.rings);
        rings.as_ref().map(|r| r.head - r.tail).ok_or(HostError::NotFound)
    }

    /// Gives the `count` oldest receive slots back to the card.
    ///
    /// # Errors
    /// `NotFound` before rings are attached; `InvalidArgument` for more slots than hold frames.
    pub fn release(&self, count: u32) -> Result<(), HostError> {
        let mut rings = crate::lock(&self.rings);
        let rings = rings.as_mut().ok_or(HostError::NotFound)?;
        if u64::from(count) > rings.head - rings.tail {
            return Err(HostError::InvalidArgument);
        }
        rings.tail += u64::from(count);
        Ok(())
    }

    /// Sends the frames of the `count` transmit slots from slot `first` on (wrapping around the
    /// ring; to a TAP card: into its queue, waking its thread if it sleeps); returns how many
    /// were sent. A frame the link refuses (a TAP interface that is down, a stream whose
    /// connection was dropped) is sent nowhere and counted as sent, as a cable without a peer
    /// would; one that finds a TAP card's queue full is counted as dropped.
    ///
    /// # Errors
    /// `NotFound` before rings are attached; `InvalidArgument` for a first slot outside the ring,
    /// more frames than slots, a frame shorter than an Ethernet header or a checksum to fill in
    /// outside its frame; `MessageTooLarge` for a
    /// frame over the MTU; `Revoked` for a revoked ring. Frames before the bad one were sent.
    pub fn transmit(&self, first: u32, count: u32) -> Result<u32, HostError> {
        let (tx, slot, slots) = {
            let rings = crate::lock(&self.rings);
            let rings = rings.as_ref().ok_or(HostError::NotFound)?;
            (rings.tx.clone(), rings.slot, rings.tx_slots)
        };
        if u64::from(first) >= slots || u64::from(count) > slots {
            return Err(HostError::InvalidArgument);
        }
        // The kernel thread's frame buffer, taken for this call (a transmission that
        // re-entered this one would find it empty and make its own).
        let mut buffer = FRAME.take();
        buffer.resize(self.max_frame() as usize, 0);
        let sent = (0..u64::from(count))
            .try_for_each(|i| self.send_slot(&tx, (u64::from(first) + i) % slots * slot, &mut buffer));
        FRAME.set(buffer);
        if let Link::Tap(tap) = &self.link
            && self.sleeping.swap(false, Ordering::SeqCst)
        {
            tap.wake();
        }
        sent.map(|()| count)
    }

    /// Sends the frame of the transmit slot at `at`: into a TAP card's queue, to the other links
    /// through `buffer` (the longest frame fits).
    fn send_slot(&self, tx: &MemoryObject, at: u64, buffer: &mut [u8]) -> Result<(), HostError> {
        let word = FrameWord::decode(tx.get_u32(at)?);
        let len = u64::from(word.len);
        if len < ETHERNET_HEADER {
            return Err(HostError::InvalidArgument);
        }
        if len > self.max_frame() {
            return Err(HostError::MessageTooLarge);
        }
        if word.checksum.is_some_and(|at| !at.fits(len as usize)) {
            return Err(HostError::InvalidArgument);
        }
        let frame = &mut buffer[..len as usize];
        match &self.link {
            Link::Tap(_) => return self.queue(tx, at + SLOT_HEADER, len as usize, word.checksum),
            Link::Stream(stream) => {
                tx.read_bytes(at + SLOT_HEADER, frame)?;
                if let Some(at) = word.checksum {
                    at.fill(frame);
                }
                if let Err(why) = stream.write_frame(frame) {
                    self.report(&why);
                }
            }
            Link::Pair(peer) => {
                tx.read_bytes(at + SLOT_HEADER, frame)?;
                if let Some(at) = word.checksum {
                    at.fill(frame);
                }
                if let Some(peer) = peer.get().and_then(Weak::upgrade) {
                    peer.deliver(frame);
                }
            }
        }
        self.sent.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Copies the frame of `len` bytes at `at` of `tx` into the queue for the card's thread,
    /// after its virtio-net header (with the checksum to fill in, if any), or drops it when the
    /// queue is full. The copy runs outside the queue's lock, which the card's thread takes on
    /// every look: held across a jumbo frame's copy, it put that thread to sleep on it.
    fn queue(&self, tx: &MemoryObject, at: u64, len: usize, checksum: Option<ChecksumAt>) -> Result<(), HostError> {
        let size = tap::VNET_HEADER + len;
        let mut frame = {
            let mut outgoing = crate::lock(&self.outgoing);
            if outgoing.bytes + size > MAX_OUTGOING {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            // The frame's room is counted now, so that copies under way cannot overfill the queue.
            outgoing.bytes += size;
            outgoing.spare.pop().unwrap_or_default()
        };
        if frame.len() < size {
            frame.resize(size, 0);
        }
        frame[..tap::VNET_HEADER].copy_from_slice(&tap::vnet_header(checksum));
        let copied = tx.read_bytes(at, &mut frame[tap::VNET_HEADER..size]);
        let mut outgoing = crate::lock(&self.outgoing);
        match copied {
            Ok(()) => outgoing.frames.push_back(Queued { buffer: frame, len: size }),
            Err(_) => {
                outgoing.bytes -= size;
                outgoing.spare.push(frame);
            }
        }
        copied
    }

    /// Writes the queued frames to Linux, in order, through `sending` (empty between calls);
    /// whether there were any.
    fn write_queued(&self, tap: &Tap, sending: &mut VecDeque<Queued>) -> bool {
        std::mem::swap(&mut crate::lock(&self.outgoing).frames, sending);
        if sending.is_empty() {
            return false;
        }
        let mut bytes = 0;
        for frame in sending.iter() {
            // A write the interface refuses (it is down) is a frame lost on the cable.
            let _ = tap.write(&frame.buffer[..frame.len]);
            bytes += frame.len;
        }
        self.sent.fetch_add(sending.len() as u64, Ordering::Relaxed);
        let mut outgoing = crate::lock(&self.outgoing);
        outgoing.bytes -= bytes;
        let room = SPARE_FRAMES.saturating_sub(outgoing.spare.len());
        // The drain empties `sending` whole; the buffers past `room` are freed.
        outgoing.spare.extend(sending.drain(..).take(room).map(|frame| frame.buffer));
        true
    }

    /// A frame arrives from the link: into the next free receive slot, and the interrupt fires;
    /// dropped when there is none.
    fn deliver(&self, frame: &[u8]) {
        let len = frame.len() as u64;
        // One arrival at a time, and no attach meanwhile: the slot at `head` stays this frame's
        // while it is copied outside `rings`, which the kernel CPU takes on every transmit and
        // release (held across a jumbo frame's copy, it made that CPU wait on it).
        let delivering = crate::lock(&self.delivering);
        let slot = match crate::lock(&self.rings).as_ref() {
            Some(r) if r.head - r.tail < r.rx_slots && (ETHERNET_HEADER..=self.max_frame()).contains(&len) => {
                Some((r.rx.clone(), r.head % r.rx_slots * r.slot))
            }
            _ => None,
        };
        let stored = slot.is_some_and(|(rx, at)| {
            // The driver reads no slot at or past `head`: the length may go in first.
            let word = FrameWord { len: len as u16, checksum: None }.encode();
            rx.write_bytes(at, &word.to_le_bytes()).is_ok() && rx.write_bytes(at + SLOT_HEADER, frame).is_ok()
        });
        if stored && let Some(r) = crate::lock(&self.rings).as_mut() {
            r.head += 1;
        }
        drop(delivering);
        if !stored {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.received.fetch_add(1, Ordering::Relaxed);
        if let Some(source) = crate::lock(&self.interrupt).as_ref() {
            source.signal();
        }
    }

    /// Says on the console why the card's link failed (once: later failures say nothing).
    fn report(&self, why: &str) {
        if !why.is_empty() {
            self.console.line("kernel", &format!("nic {}: {why}", self.name));
        }
    }

    /// The thread of a TAP card (both ways) or a stream card (receiving).
    fn run(&self) {
        match &self.link {
            Link::Tap(tap) => self.serve_tap(tap),
            Link::Stream(stream) => self.receive_from_stream(stream),
            Link::Pair(_) => {}
        }
    }

    /// Frames from a stream socket into the ring until stopped or the connection is dropped.
    fn receive_from_stream(&self, stream: &Stream) {
        let mut buffer = vec![0u8; MAX_STREAM_FRAME];
        loop {
            match stream.read_frame(&mut buffer, &self.stopped) {
                Ok(Some(len)) => self.deliver(&buffer[..len]),
                Ok(None) => return,
                Err(_) if self.stopped.load(Ordering::Acquire) => return,
                Err(why) => return self.report(&why),
            }
        }
    }

    /// A TAP card's thread, until stopped: writes the frames `transmit` queued to Linux and
    /// reads Linux's into the ring. Shortly after a frame either way it keeps looking
    /// ([`BusyPoll`]); then it sleeps in `poll` until a frame comes from Linux or `transmit`
    /// wakes it.
    fn serve_tap(&self, tap: &Tap) {
        let mut buffer = vec![0u8; tap::VNET_HEADER + 65536];
        let mut sending = VecDeque::new();
        let mut busy = BusyPoll::new(DEVICE_LOOK);
        while !self.stopped.load(Ordering::Acquire) {
            let sent = self.write_queued(tap, &mut sending);
            let received = match tap.read(&mut buffer) {
                Ok(frame) => {
                    self.deliver(frame);
                    true
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(10));
                    false
                }
            };
            if sent || received {
                busy.worked();
            } else if !busy.look_again() {
                // Asleep before the last look at the queue: a frame queued after it finds the
                // flag set and wakes the wait.
                self.sleeping.store(true, Ordering::SeqCst);
                if crate::lock(&self.outgoing).frames.is_empty() && tap.wait(100).is_err() {
                    std::thread::sleep(Duration::from_millis(100));
                }
                self.sleeping.store(false, Ordering::SeqCst);
            }
        }
    }
}

/// The kernel's network cards by name, with the threads of TAP and stream cards.
#[derive(Default)]
pub struct Nics {
    nics: Mutex<BTreeMap<String, Arc<Nic>>>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Nics {
    /// Opens the cards of a configuration (which `domos_loader` checked): TAP devices are opened
    /// and stream sockets connected, each with a thread; pairs are wired to each other.
    /// Failures of a link later are reported on `console`.
    ///
    /// # Errors
    /// A TAP device that cannot be opened (no `/dev/net/tun`, not root), a stream socket that
    /// cannot be connected, a `passt` card whose passt nobody started, or a thread that cannot be
    /// started.
    pub fn open(&self, configs: &[NicConfig], console: &Arc<Console>) -> Result<(), String> {
        let mut opened = Vec::new();
        for config in configs {
            let mac = config.mac()?;
            let link = match config.backend() {
                NicBackend::Tap(ifname) => {
                    Link::Tap(Tap::open(&ifname).map_err(|e| format!("nic {}: {e}", config.name))?)
                }
                NicBackend::Stream(path) => {
                    Link::Stream(Stream::connect(&path).map_err(|e| format!("nic {}: {e}", config.name))?)
                }
                NicBackend::Passt => {
                    return Err(format!(
                        "nic {}: a passt card needs its passt, which `domos boot` starts (a program that boots \
                         through the library calls domos::passt::start first)",
                        config.name
                    ));
                }
                NicBackend::Pair(_) => Link::Pair(OnceLock::new()),
            };
            let nic = Nic::new(&config.name, mac, config.mtu, link, console.clone());
            opened.push((Arc::new(nic), config.backend()));
        }
        for (nic, backend) in &opened {
            if let (Link::Pair(peer), NicBackend::Pair(other)) = (&nic.link, backend)
                && let Some((other, _)) = opened.iter().find(|(o, _)| &o.name == other)
            {
                let _ = peer.set(Arc::downgrade(other));
            }
            if let Link::Tap(_) | Link::Stream(_) = nic.link {
                let receiver = nic.clone();
                let thread = std::thread::Builder::new()
                    .name(format!("domos-nic-{}", nic.name))
                    .spawn(move || receiver.run())
                    .map_err(|e| format!("nic {}: {e}", nic.name))?;
                crate::lock(&self.threads).push(thread);
            }
        }
        let mut nics = crate::lock(&self.nics);
        for (nic, _) in opened {
            nics.insert(nic.name.clone(), nic);
        }
        Ok(())
    }

    /// The card `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Nic>> {
        crate::lock(&self.nics).get(name).cloned()
    }

    /// Stops the cards' threads and forgets the cards (closing TAP devices and stream
    /// sockets).
    pub fn stop(&self) {
        let nics = std::mem::take(&mut *crate::lock(&self.nics));
        for nic in nics.values() {
            nic.stopped.store(true, Ordering::Release);
            match &nic.link {
                Link::Stream(stream) => stream.close(),
                Link::Tap(tap) => tap.wake(),
                Link::Pair(_) => {}
            }
        }
        for thread in std::mem::take(&mut *crate::lock(&self.threads)) {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::memory::Block;

    fn memory(len: u64) -> MemoryObject {
        let engine = crate::domain::engine::engine(domos_loader::codegen::CodeGen::default()).unwrap();
        MemoryObject::whole(Block::new(&engine, len, None).unwrap(), len, false)
    }

    fn pair() -> Nics {
        let toml = "[[nic]]\nname = \"a\"\npair = \"b\"\n[[nic]]\nname = \"b\"\npair = \"a\"\n\
                    [[domain]]\nname = \"A\"\n[[domain.component]]\nname = \"x\"";
        let config = domos_loader::SystemConfig::parse(toml).unwrap();
        let nics = Nics::default();
        nics.open(&config.nics, &Arc::new(Console::capture())).unwrap();
        nics
    }

    #[test]
    fn frames_cross_a_pair_through_the_rings_and_bad_ones_are_refused() {
        let nics = pair();
        let (a, b) = (nics.get("a").unwrap(), nics.get("b").unwrap());
        let slot = 1536u32;
        let (a_rx, a_tx, b_rx, b_tx) = (memory(4 * 1536), memory(4 * 1536), memory(2 * 1536), memory(2 * 1536));
        assert_eq!(a.attach(a_rx.clone(), a_tx.clone(), slot), Ok(4));
        assert_eq!(b.transmit(0, 1), Err(HostError::NotFound), "no rings yet");
        assert_eq!(b.attach(b_rx.clone(), b_tx.clone(), slot), Ok(2));
        let source = Arc::new(EventSource::default());
        b.attach_interrupt(source.clone());
        for (i, fill) in [1u8, 2, 3].into_iter().enumerate() {
            let frame = vec![fill; 60 + i];
            a_tx.write_bytes(i as u64 * 1536, &(frame.len() as u32).to_le_bytes()).unwrap();
            a_tx.write_bytes(i as u64 * 1536 + 4, &frame).unwrap();
        }
        assert_eq!(a.transmit(0, 3), Ok(3));
        assert_eq!(b.ready(), Ok(2), "two slots: the third frame was dropped");
        assert_eq!((b.info(Info::Received), b.info(Info::Dropped), a.info(Info::Sent)), (2, 1, 3));
        let mut slot1 = [0u8; 65];
        b_rx.read_bytes(1536, &mut slot1).unwrap();
        assert_eq!(u32::from_le_bytes(slot1[..4].try_into().unwrap()), 61);
        assert!(slot1[4..].iter().all(|&x| x == 2));
        assert_eq!(b.release(3), Err(HostError::InvalidArgument), "only two hold frames");
        assert_eq!(b.release(2), Ok(()));
        assert_eq!(b.ready(), Ok(0));
        // Bad frames and rings.
        a_tx.write_bytes(0, &1515u32.to_le_bytes()).unwrap();
        assert_eq!(a.transmit(0, 1), Err(HostError::MessageTooLarge), "over the MTU");
        a_tx.write_bytes(0, &13u32.to_le_bytes()).unwrap();
        assert_eq!(a.transmit(0, 1), Err(HostError::InvalidArgument), "shorter than a header");
        assert_eq!(a.transmit(4, 1), Err(HostError::InvalidArgument), "no slot 4");
        assert_eq!(a.transmit(0, 5), Err(HostError::InvalidArgument), "more than the ring");
        assert_eq!(a.attach(memory(1000), memory(4096), slot), Err(HostError::InvalidArgument), "too small");
        assert_eq!(a.attach(memory(4096), memory(1000), slot), Err(HostError::InvalidArgument), "too small");
        // Rings of two sizes (a driver sends from its client's buffer): each counts its own.
        assert_eq!(a.attach(memory(4 * 1536), a_tx.subrange(0, 1536).unwrap(), slot), Ok(4));
        assert_eq!(a.transmit(0, 2), Err(HostError::InvalidArgument), "one transmit slot");
        assert_eq!(a.attach(a_rx.clone(), a_tx.clone(), 1500), Err(HostError::InvalidArgument), "slot < frame");
        assert_eq!(a.attach(a_rx.read_only().unwrap(), a_tx.clone(), slot), Err(HostError::ReadOnly));
        let revoked = memory(4096);
        let _fresh = revoked.revoke().unwrap();
        assert_eq!(a.attach(revoked, a_tx, slot), Err(HostError::Revoked));
        nics.stop();
    }
}
