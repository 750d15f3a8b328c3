//! The host's end of the pipe through which `domos fs` and `app-fs` move a file's bytes while
//! the system runs, in bounded memory whatever the file's size.
//!
//! A console carries text, so the bytes travel in device memories, which the host reads and
//! writes from its side ([`Kernel::fill_device`], [`Kernel::device_bytes`]) and `app-fs` through
//! `Memory::device`:
//! - `pipe0` … `pipeN-1`: the slots, [`SLOT`] bytes each, holding one record's data;
//! - `pipe-host`, written only by the host, and `pipe-guest`, written only by `app-fs`: at offset
//!   0 the count of records the writer has sent (or, receiving, taken); at offset 4 a flag, 1
//!   when the writer gave up; from offset 16, one 16-byte record header per slot: the file
//!   offset (`u64`), the data's length (`u32`) and the kind (`u32`: [`DATA`], [`HOLE`] or
//!   [`END`]). All little-endian.
//!
//! The sender waits while every slot is full (sent − taken = N), fills slot `sent mod N`, writes
//! the header, then the count: the count is always written last and alone, and read first and
//! alone, so a reader that sees it sees the header and the data (each side's stores reach the
//! other in program order, as x86-64 guarantees). Neither side can wake the other, so both
//! poll: the host from every [`POLL`] to every [`POLL_MAX`], `app-fs` with the kernel's 1 ms sleep.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use domos_kernel::Kernel;

/// Slots in the pipe.
pub const SLOTS: usize = 8;
/// Bytes per slot (`app-fs` has the file system copy a slot's worth of a file into it at once,
/// and writes one in pieces that fit a message).
pub const SLOT: usize = 1 << 20;
/// A record of data in the slot.
pub const DATA: u32 = 0;
/// A record of `len` zero bytes, with nothing in the slot (a hole, read or written as such).
pub const HOLE: u32 = 1;
/// The last record: the file's size is its offset.
pub const END: u32 = 2;
/// Bytes of a control device: the count, the flag, padding, and the headers.
const CONTROL: usize = 16 + 16 * SLOTS;
/// How long the host sleeps when the other side has not moved: at first, and at most (it
/// doubles while nothing moves, so that a quick answer is seen quickly and a long wait, such as
/// the boot's, costs few wake-ups).
const POLL: Duration = Duration::from_micros(10);
const POLL_MAX: Duration = Duration::from_millis(1);

/// One record: where in the file, how many bytes, and what kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// The offset in the file ([`END`]: the file's size).
    pub offset: u64,
    /// Bytes of data ([`DATA`]) or of zeros ([`HOLE`]).
    pub len: u32,
    /// [`DATA`], [`HOLE`] or [`END`].
    pub kind: u32,
}

/// The host's end of the pipe, over the devices it made in a kernel that has not booted yet.
pub struct Pipe<'k> {
    kernel: &'k Kernel,
    /// What the host last wrote into `pipe-host`.
    control: [u8; CONTROL],
    /// Records sent (putting) or taken (getting).
    count: u32,
}

impl<'k> Pipe<'k> {
    /// Adds the pipe's devices to `kernel`, before it boots.
    ///
    /// # Errors
    /// A device the kernel refused.
    pub fn create(kernel: &'k Kernel) -> Result<Pipe<'k>, String> {
        for slot in 0..SLOTS {
            kernel.add_device(&format!("pipe{slot}"), SLOT as u64)?;
        }
        kernel.add_device("pipe-host", CONTROL as u64)?;
        kernel.add_device("pipe-guest", CONTROL as u64)?;
        Ok(Pipe { kernel, control: [0; CONTROL], count: 0 })
    }

    /// `app-fs`'s count: records it sent (getting) or took (putting).
    fn guest_count(&self) -> Result<u32, String> {
        let bytes = self.kernel.device_bytes("pipe-guest", 4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// Waits until `ready` holds of `app-fs`'s count; `false` when the system finished first.
    fn wait(&self, finished: &AtomicBool, ready: impl Fn(u32) -> bool) -> Result<bool, String> {
        let mut poll = POLL;
        loop {
            // Read the flag before the count: a count that is not ready after the system
            // finished will never be.
            let over = finished.load(Ordering::Acquire);
            if ready(self.guest_count()?) {
                return Ok(true);
            }
            if over {
                return Ok(false);
            }
            std::thread::sleep(poll);
            poll = (poll * 2).min(POLL_MAX);
        }
    }

    /// Sends `record` with `data` (its bytes, for [`DATA`]), waiting for a free slot; `false`
    /// when the system finished before it took the record.
    ///
    /// # Errors
    /// A device access the kernel refused.
    pub fn send(&mut self, finished: &AtomicBool, record: Record, data: &[u8]) -> Result<bool, String> {
        let sent = self.count;
        if !self.wait(finished, |taken| sent.wrapping_sub(taken) < SLOTS as u32)? {
            return Ok(false);
        }
        let slot = sent as usize % SLOTS;
        if record.kind == DATA {
            self.kernel.fill_device(&format!("pipe{slot}"), data)?;
        }
        let header = &mut self.control[16 + 16 * slot..][..16];
        header[..8].copy_from_slice(&record.offset.to_le_bytes());
        header[8..12].copy_from_slice(&record.len.to_le_bytes());
        header[12..].copy_from_slice(&record.kind.to_le_bytes());
        // The header (under the old count), then the count alone.
        self.kernel.fill_device("pipe-host", &self.control)?;
        self.count = sent.wrapping_add(1);
        self.control[..4].copy_from_slice(&self.count.to_le_bytes());
        self.kernel.fill_device("pipe-host", &self.count.to_le_bytes())?;
        Ok(true)
    }

    /// The next record `app-fs` sent, with its data; `None` when the system finished without
    /// sending more.
    ///
    /// # Errors
    /// A device access the kernel refused, or a malformed record.
    pub fn receive(&mut self, finished: &AtomicBool) -> Result<Option<(Record, Vec<u8>)>, String> {
        let taken = self.count;
        if !self.wait(finished, |sent| sent != taken)? {
            return Ok(None);
        }
        let slot = taken as usize % SLOTS;
        let control = self.kernel.device_bytes("pipe-guest", CONTROL as u64)?;
        let header = &control[16 + 16 * slot..][..16];
        let word = |at: usize| u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]);
        let record = Record { offset: u64::from(word(0)) | u64::from(word(4)) << 32, len: word(8), kind: word(12) };
        let data = match record.kind {
            DATA if record.len as usize <= SLOT => {
                self.kernel.device_bytes(&format!("pipe{slot}"), u64::from(record.len))?
            }
            HOLE | END => Vec::new(),
            _ => return Err(format!("app-fs sent a malformed record: {record:?}")),
        };
        self.count = taken.wrapping_add(1);
        self.control[..4].copy_from_slice(&self.count.to_le_bytes());
        self.kernel.fill_device("pipe-host", &self.count.to_le_bytes())?;
        Ok(Some((record, data)))
    }

    /// Tells `app-fs` that the host gave up (the reader of standard output went away, the
    /// local file failed): it stops instead of waiting for the host.
    pub fn abort(&mut self) {
        self.control[4] = 1;
        let _ = self.kernel.fill_device("pipe-host", &self.control[..8]);
    }
}
