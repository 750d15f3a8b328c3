//! Emulated disks (`[[disk]]` in the configuration): an image file or RAM, read and written in
//! 512-byte sectors by requests that complete asynchronously. A kernel I/O thread per disk
//! carries out the requests in order, copying between the image and memory objects, and signals
//! the completion interrupt a driver attached (`disk_attach_interrupt`); the driver's verified
//! bounded handler then collects the completions (`disk_complete`) and wakes whoever waits.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use domos_abi::HostError;

use super::interrupt::EventSource;
use super::memory::MemoryObject;
use super::{BusyPoll, DEVICE_LOOK};

/// Bytes per sector.
pub const SECTOR: u64 = 512;

/// Requests queued or unreaped per disk at most: a driver that does not collect its completions
/// is refused new requests rather than growing the kernel's memory.
pub const MAX_REQUESTS: usize = 256;

/// What a request does (the guest's code for it is its discriminant).
pub use domos_abi::DiskOperation as Operation;

struct Request {
    id: u64,
    operation: Operation,
    sector: u64,
    count: u32,
    memory: Option<MemoryObject>,
    offset: u64,
}

enum Backing {
    Image(File),
    Ram(Vec<u8>),
}

struct Queues {
    pending: VecDeque<Request>,
    /// Finished requests not yet collected: id and whether it succeeded.
    done: VecDeque<(u64, bool)>,
    /// Whether the I/O thread sleeps on `work`: a submission wakes it only then.
    asleep: bool,
}

/// One emulated disk.
pub struct Disk {
    /// Its name in the configuration.
    pub name: String,
    /// Its size in sectors.
    pub sectors: u64,
    backing: Mutex<Backing>,
    queues: Mutex<Queues>,
    work: Condvar,
    next_id: AtomicU64,
    completion: Mutex<Option<Arc<EventSource>>>,
    stopped: AtomicBool,
}

impl Disk {
    /// A disk over the image file at `path` (its size rounded down to whole sectors), or over
    /// `ram` zeroed bytes; starts its I/O thread.
    ///
    /// # Errors
    /// When the image cannot be opened read-write or is smaller than one sector.
    pub fn open(name: &str, path: Option<&str>, ram: u64) -> Result<(Arc<Disk>, std::thread::JoinHandle<()>), String> {
        let (backing, bytes) = match path {
            Some(path) => {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(path)
                    .map_err(|e| format!("disk {name}: cannot open {path}: {e}"))?;
                let len = file.metadata().map_err(|e| format!("disk {name}: {path}: {e}"))?.len();
                (Backing::Image(file), len)
            }
            None => (Backing::Ram(vec![0; usize::try_from(ram).map_err(|_| format!("disk {name}: too large"))?]), ram),
        };
        if bytes < SECTOR {
            return Err(format!("disk {name}: smaller than one sector"));
        }
        let disk = Arc::new(Disk {
            name: name.to_string(),
            sectors: bytes / SECTOR,
            backing: Mutex::new(backing),
            queues: Mutex::new(Queues { pending: VecDeque::new(), done: VecDeque::new(), asleep: false }),
            work: Condvar::new(),
            next_id: AtomicU64::new(1),
            completion: Mutex::new(None),
            stopped: AtomicBool::new(false),
        });
        let worker = disk.clone();
        let thread = std::thread::Builder::new()
            .name(format!("domos-disk-{name}"))
            .spawn(move || worker.serve())
            .map_err(|e| format!("disk {name}: {e}"))?;
        Ok((disk, thread))
    }

    /// Queues a request; returns its id. Reads and writes cover `count` sectors from `sector`
    /// and the bytes of `memory` from `offset`.
    ///
    /// # Errors
    /// `InvalidArgument` for sectors beyond the disk, no memory object for a read or write, or
    /// one too small; `ReadOnly` for a read into a read-only view; `QuotaExceeded` when
    /// [`MAX_REQUESTS`] are queued or uncollected.
    pub fn submit(
        &self,
        operation: Operation,
        sector: u64,
        count: u32,
        memory: Option<MemoryObject>,
        offset: u64,
    ) -> Result<u64, HostError> {
        if operation != Operation::Flush {
            let end = sector.checked_add(u64::from(count)).ok_or(HostError::InvalidArgument)?;
            let memory = memory.as_ref().ok_or(HostError::InvalidArgument)?;
            let bytes = u64::from(count) * SECTOR;
            if end > self.sectors || offset.checked_add(bytes).is_none_or(|e| e > memory.len()) {
                return Err(HostError::InvalidArgument);
            }
            if operation == Operation::Read && !memory.is_writable() {
                return Err(HostError::ReadOnly);
            }
        }
        let mut queues = crate::lock(&self.queues);
        if queues.pending.len() + queues.done.len() >= MAX_REQUESTS {
            return Err(HostError::QuotaExceeded);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        queues.pending.push_back(Request { id, operation, sector, count, memory, offset });
        if queues.asleep {
            self.work.notify_one();
        }
        Ok(id)
    }

    /// The next finished request: its id and whether it succeeded.
    pub fn complete(&self) -> Option<(u64, bool)> {
        crate::lock(&self.queues).done.pop_front()
    }

    /// Makes `source` the completion interrupt (replacing any earlier one).
    pub fn attach(&self, source: Arc<EventSource>) {
        *crate::lock(&self.completion) = Some(source);
    }

    /// Ends the I/O thread after the requests already queued.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        let _queues = crate::lock(&self.queues);
        self.work.notify_all();
    }

    /// The I/O thread: carries out the requests in turn. Shortly after one it keeps looking for
    /// the next ([`BusyPoll`]) before it sleeps.
    fn serve(&self) {
        let mut busy = BusyPoll::new(DEVICE_LOOK);
        loop {
            let request = {
                let mut queues = crate::lock(&self.queues);
                loop {
                    if let Some(request) = queues.pending.pop_front() {
                        break request;
                    }
                    if self.stopped.load(Ordering::Acquire) {
                        return;
                    }
                    drop(queues);
                    let again = busy.look_again();
                    queues = crate::lock(&self.queues);
                    // A request or a stop that came while the lock was let go finds no sleeper
                    // to wake: look at both again, under the lock, before sleeping.
                    if again || !queues.pending.is_empty() || self.stopped.load(Ordering::Acquire) {
                        continue;
                    }
                    queues.asleep = true;
                    queues = self.work.wait(queues).unwrap_or_else(std::sync::PoisonError::into_inner);
                    queues.asleep = false;
                }
            };
            let ok = self.carry_out(&request).is_ok();
            busy.worked();
            crate::lock(&self.queues).done.push_back((request.id, ok));
            if let Some(source) = crate::lock(&self.completion).as_ref() {
                source.signal();
            }
        }
    }

    fn carry_out(&self, request: &Request) -> Result<(), HostError> {
        let mut backing = crate::lock(&self.backing);
        let at = request.sector * SECTOR;
        let len = usize::try_from(u64::from(request.count) * SECTOR).map_err(|_| HostError::InvalidArgument)?;
        let mut bytes = vec![0u8; len];
        let range = at as usize..at as usize + len;
        let io = |_| HostError::BadRequest;
        match (request.operation, &mut *backing, &request.memory) {
            (Operation::Flush, Backing::Image(file), _) => file.sync_data().map_err(io),
            (Operation::Flush, Backing::Ram(_), _) => Ok(()),
            (Operation::Read, backing, Some(memory)) => {
                match backing {
                    Backing::Image(file) => file.read_exact_at(&mut bytes, at).map_err(io)?,
                    Backing::Ram(ram) => bytes.copy_from_slice(ram.get(range).ok_or(HostError::InvalidArgument)?),
                }
                memory.write_bytes(request.offset, &bytes)
            }
            (Operation::Write, backing, Some(memory)) => {
                memory.read_bytes(request.offset, &mut bytes)?;
                match backing {
                    Backing::Image(file) => file.write_all_at(&bytes, at).map_err(io),
                    Backing::Ram(ram) => {
                        ram.get_mut(range).ok_or(HostError::InvalidArgument)?.copy_from_slice(&bytes);
                        Ok(())
                    }
                }
            }
            (_, _, None) => Err(HostError::InvalidArgument),
        }
    }
}
