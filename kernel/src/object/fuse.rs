//! `/dev/fuse` as an emulated device (`[[fuse]]` in the configuration): the kernel opens a FUSE
//! connection, mounts it at a directory of the host, and from then on only moves bytes, as it
//! does for disks and network cards. A driver (`components/drv-fuse`) attaches a receive ring, a
//! memory object of its own cut into slots (`fuse_attach`); the device's receiving thread reads
//! each request Linux sends into the next free slot — a little-endian `u32` length, then the
//! request as `read(2)` returned it — and signals the device's interrupt; the driver takes
//! requests (`fuse_ready`, `fuse_release`) and writes each reply from a memory object of its own
//! with one `write(2)` (`fuse_reply`). The kernel never parses a request: a malformed one is the
//! driver's to refuse.
//!
//! Unlike a card's receive ring, a full ring loses nothing: the receiving thread waits for a
//! free slot, and Linux keeps the requests queued meanwhile.
//!
//! The device stops (no more requests are read; `fuse_ready` says so once the ring is empty)
//! when the file system is unmounted from outside or when [`Fuses::request_stop`] asks, so that
//! the driver can answer what it took and sync before the system ends. [`Fuses::stop`] unmounts
//! (`umount2` with `MNT_DETACH`) and closes the connection, which fails whatever Linux still
//! waits for with `ENOTCONN`.
//!
//! The kernel mounts with `mount(2)` of `fuse.domos`, the connection's descriptor,
//! `default_permissions` (Linux checks the mode bits, as for a disk file system) and
//! `allow_other`, which needs `CAP_SYS_ADMIN` (root). For a process without it, the `domos`
//! command has the setuid helper `fusermount3` mount the connection, as libfuse does, and hands
//! it to the kernel before the boot ([`Fuses::adopt`]). The `mount`, `umount2` and `poll` calls
//! are this file's `unsafe` code.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use domos_abi::HostError;
use domos_loader::fuse::FuseConfig;

use super::interrupt::EventSource;
use super::memory::MemoryObject;
use super::{BusyPoll, DEVICE_LOOK};

/// Bytes of the length word at the start of a slot.
pub const SLOT_HEADER: u64 = 4;
/// Smallest slot: Linux refuses a read buffer under 8 KiB (`FUSE_MIN_READ_BUFFER`).
pub const MIN_SLOT: u64 = SLOT_HEADER + 8192;
/// Largest slot: a 1 MiB write and its headers.
pub const MAX_SLOT: u64 = (1 << 20) + 8192;
/// Most slots in the ring.
pub const MAX_SLOTS: u64 = 256;
/// Longest reply: a 1 MiB read and its header.
pub const MAX_REPLY: u64 = (1 << 20) + 4096;
/// What `fuse_ready` adds to the count once the device has stopped reading requests.
pub const STOPPED: u64 = domos_abi::FUSE_STOPPED as u64;

struct Ring {
    rx: MemoryObject,
    slot: u64,
    slots: u64,
    /// Requests written into the ring so far.
    head: u64,
    /// Requests the driver released so far.
    tail: u64,
}

/// One FUSE connection, mounted.
pub struct Fuse {
    /// Its name in the configuration.
    pub name: String,
    mountpoint: CString,
    device: File,
    ring: Mutex<Option<Ring>>,
    /// The receiving thread waits here for a ring with a free slot.
    space: Condvar,
    interrupt: Mutex<Option<Arc<EventSource>>>,
    /// No more requests are read: unmounted from outside, an error of the device, or asked.
    stopped: AtomicBool,
    /// Who unmounts it; `None` once unmounted.
    mounted: Mutex<Option<Mounter>>,
}

/// What unmounts a connection mounted outside the kernel.
pub type Unmount = Box<dyn FnOnce() + Send>;

/// How a connection was mounted, and so how it is unmounted.
enum Mounter {
    /// By the kernel, with `mount(2)`.
    Kernel,
    /// Outside the kernel (by `fusermount3`, for a process without root), which unmounts too.
    Outside(Unmount),
}

/// Opens `/dev/fuse` and mounts it at `mountpoint` with `mount(2)`, which takes `CAP_SYS_ADMIN`:
/// `default_permissions` (Linux checks the mode bits, as for a disk file system) and
/// `allow_other`, owned by this process's user.
///
/// # Errors
/// What failed, for people: opening the device, or the mount.
fn mount_directly(mountpoint: &CString) -> Result<File, String> {
    let device = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .map_err(|e| format!("cannot open /dev/fuse: {e}"))?;
    // The owner of the mount: this process's (the metadata of /proc/self is ours).
    let me = std::fs::metadata("/proc/self").map_err(|e| format!("/proc/self: {e}"))?;
    let options = format!(
        "fd={},rootmode=40000,user_id={},group_id={},default_permissions,allow_other",
        device.as_raw_fd(),
        me.uid(),
        me.gid()
    );
    let data = CString::new(options).map_err(|_| "the mount options hold a NUL".to_string())?;
    let (source, fstype) = (c"domos", c"fuse.domos");
    // SAFETY: every pointer is a NUL-terminated string that lives across the call (`data` a
    // local `CString`, the others static, `mountpoint` borrowed); `mount` only reads them.
    let result = unsafe {
        libc::mount(
            source.as_ptr(),
            mountpoint.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            data.as_ptr().cast(),
        )
    };
    if result != 0 {
        let error = std::io::Error::last_os_error();
        let hint = if error.raw_os_error() == Some(libc::EPERM) { " (mount(2) needs CAP_SYS_ADMIN)" } else { "" };
        return Err(format!("mount(2): {error}{hint}"));
    }
    Ok(device)
}

impl Fuse {
    /// The connection of the configuration: `adopted` when given, mounted outside the kernel,
    /// else `/dev/fuse` opened and mounted at the configuration's mount point here.
    fn open(config: &FuseConfig, adopted: Option<(File, Unmount)>) -> Result<Fuse, String> {
        let mountpoint = CString::new(config.mountpoint.as_bytes())
            .map_err(|_| format!("fuse {}: the mount point holds a NUL", config.name))?;
        // Not a look at an adopted connection's directory: Linux would ask the driver, which
        // does not run yet.
        let (device, mounter) = match adopted {
            Some((device, unmount)) => (device, Mounter::Outside(unmount)),
            None => {
                let target = std::fs::metadata(&config.mountpoint)
                    .map_err(|e| format!("fuse {}: {}: {e}", config.name, config.mountpoint))?;
                if !target.is_dir() {
                    return Err(format!("fuse {}: {} is not a directory", config.name, config.mountpoint));
                }
                let device = mount_directly(&mountpoint)
                    .map_err(|why| format!("fuse {}: cannot mount at {}: {why}", config.name, config.mountpoint))?;
                (device, Mounter::Kernel)
            }
        };
        Ok(Fuse {
            name: config.name.clone(),
            mountpoint,
            device,
            ring: Mutex::new(None),
            space: Condvar::new(),
            interrupt: Mutex::new(None),
            stopped: AtomicBool::new(false),
            mounted: Mutex::new(Some(mounter)),
        })
    }

    /// Attaches the receive ring `rx`, cut into slots of `slot` bytes (replacing an earlier one;
    /// requests in it that were not released are lost, so a driver attaches once); returns the
    /// number of slots.
    ///
    /// # Errors
    /// `InvalidArgument` for a slot under [`MIN_SLOT`] or over [`MAX_SLOT`] or not a multiple of
    /// 4, or a ring too small for one slot; `ReadOnly` for a read-only ring; `Revoked` for a
    /// revoked one.
    pub fn attach(&self, rx: MemoryObject, slot: u32) -> Result<u32, HostError> {
        let slot = u64::from(slot);
        if !(MIN_SLOT..=MAX_SLOT).contains(&slot) || !slot.is_multiple_of(4) {
            return Err(HostError::InvalidArgument);
        }
        rx.read_bytes(0, &mut [])?;
        if !rx.is_writable() {
            return Err(HostError::ReadOnly);
        }
        let slots = (rx.len() / slot).min(MAX_SLOTS);
        if slots == 0 {
            return Err(HostError::InvalidArgument);
        }
        *crate::lock(&self.ring) = Some(Ring { rx, slot, slots, head: 0, tail: 0 });
        self.space.notify_all();
        Ok(slots as u32)
    }

    /// Makes `source` the interrupt that says requests arrived (replacing an earlier one).
    pub fn attach_interrupt(&self, source: Arc<EventSource>) {
        *crate::lock(&self.interrupt) = Some(source);
    }

    /// Requests waiting in the ring, from the oldest unreleased slot on, plus [`STOPPED`] once
    /// the device reads no more.
    ///
    /// # Errors
    /// `NotFound` before a ring is attached.
    pub fn ready(&self) -> Result<u64, HostError> {
        let ring = crate::lock(&self.ring);
        let waiting = ring.as_ref().map(|r| r.head - r.tail).ok_or(HostError::NotFound)?;
        Ok(waiting | if self.stopped.load(Ordering::Acquire) { STOPPED } else { 0 })
    }

    /// Gives the `count` oldest slots back to the device.
    ///
    /// # Errors
    /// `NotFound` before a ring is attached; `InvalidArgument` for more slots than hold requests.
    pub fn release(&self, count: u32) -> Result<(), HostError> {
        let mut ring = crate::lock(&self.ring);
        let ring = ring.as_mut().ok_or(HostError::NotFound)?;
        if u64::from(count) > ring.head - ring.tail {
            return Err(HostError::InvalidArgument);
        }
        ring.tail += u64::from(count);
        self.space.notify_all();
        Ok(())
    }

    /// Writes the reply of `len` bytes at `offset` of `memory` to the device, in one `write(2)`.
    ///
    /// # Errors
    /// `MessageTooLarge` over [`MAX_REPLY`]; what reading the memory object reports; `NotFound`
    /// when Linux no longer waits for the request (it was interrupted, or the connection is
    /// gone); `InvalidArgument` when Linux refuses the reply as malformed.
    pub fn reply(&self, memory: &MemoryObject, offset: u64, len: u32) -> Result<(), HostError> {
        if u64::from(len) > MAX_REPLY {
            return Err(HostError::MessageTooLarge);
        }
        let mut reply = vec![0u8; len as usize];
        memory.read_bytes(offset, &mut reply)?;
        match (&self.device).write(&reply) {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENODEV | libc::ENOTCONN)) => {
                Err(HostError::NotFound)
            }
            Err(_) => Err(HostError::InvalidArgument),
        }
    }

    /// Stops reading requests and tells the driver.
    fn request_stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.space.notify_all();
        self.signal();
    }

    fn signal(&self) {
        if let Some(source) = crate::lock(&self.interrupt).as_ref() {
            source.signal();
        }
    }

    /// Unmounts (lazily: processes still inside the mount see it fail) once, ignoring a mount
    /// that is gone already.
    fn unmount(&self) {
        match crate::lock(&self.mounted).take() {
            Some(Mounter::Kernel) => {
                // SAFETY: the mount point is a NUL-terminated string owned by `self`, alive
                // across the call, which only reads it.
                let _ = unsafe { libc::umount2(self.mountpoint.as_ptr(), libc::MNT_DETACH) };
            }
            Some(Mounter::Outside(unmount)) => unmount(),
            None => {}
        }
    }

    /// Waits up to `timeout_ms` for a request to read: whether one is there (or the device
    /// reports an error, which the read then says).
    fn wait_readable(&self, timeout_ms: i32) -> bool {
        let mut fd = libc::pollfd { fd: self.device.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: `fd` is one valid `pollfd` that lives across the call, and the count is 1;
        // the descriptor is `self.device`'s, open as long as `self`.
        let result = unsafe { libc::poll(&mut fd, 1, timeout_ms) };
        result > 0
    }

    /// The receiving thread: requests from Linux into the ring until the device stops. Shortly
    /// after a request it keeps looking for the next one ([`BusyPoll`]) before it sleeps.
    fn receive(&self) {
        let mut buffer = Vec::new();
        let mut busy = BusyPoll::new(DEVICE_LOOK);
        while !self.stopped.load(Ordering::Acquire) {
            // A free slot first: a request read must have somewhere to go.
            let slot = {
                let mut ring = crate::lock(&self.ring);
                loop {
                    if self.stopped.load(Ordering::Acquire) {
                        return;
                    }
                    match ring.as_ref() {
                        Some(r) if r.head - r.tail < r.slots => break r.slot,
                        _ => {
                            ring = self
                                .space
                                .wait_timeout(ring, Duration::from_millis(100))
                                .map_or_else(|e| e.into_inner().0, |(guard, _)| guard);
                        }
                    }
                }
            };
            buffer.resize((slot - SLOT_HEADER) as usize, 0);
            // Nothing there yet: look again shortly, or sleep until something comes.
            if !self.wait_readable(0) && (busy.look_again() || !self.wait_readable(100)) {
                continue;
            }
            let len = match (&self.device).read(&mut buffer) {
                Ok(len) => {
                    busy.worked();
                    len
                }
                // Interrupted before it was read, or nothing there after all: try again.
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EINTR | libc::EAGAIN)) => continue,
                // ENODEV: unmounted. Anything else (a buffer Linux finds too small for the
                // max_write the driver chose) would repeat forever: stop too.
                Err(_) => {
                    self.request_stop();
                    return;
                }
            };
            let stored = {
                let mut ring = crate::lock(&self.ring);
                match ring.as_mut() {
                    // The ring the slot was free in (a driver attaching a new one meanwhile
                    // loses this request, as it loses the old ring's).
                    Some(r) if r.slot == slot && r.head - r.tail < r.slots => {
                        let at = r.head % r.slots * r.slot;
                        let written = r.rx.write_bytes(at, &(len as u32).to_le_bytes()).is_ok()
                            && r.rx.write_bytes(at + SLOT_HEADER, &buffer[..len]).is_ok();
                        if written {
                            r.head += 1;
                        }
                        written
                    }
                    _ => false,
                }
            };
            if stored {
                self.signal();
            }
        }
    }
}

/// The kernel's FUSE connections by name, with their receiving threads.
#[derive(Default)]
pub struct Fuses {
    fuses: Mutex<BTreeMap<String, Arc<Fuse>>>,
    /// Connections mounted outside the kernel, by name, until the boot opens them.
    adopted: Mutex<BTreeMap<String, (File, Unmount)>>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Fuses {
    /// Opens and mounts the connections of a configuration (which `domos_loader` checked), each
    /// with a receiving thread.
    ///
    /// # Errors
    /// No `/dev/fuse`, a mount point that is no directory, a mount refused (not root), or a
    /// thread that cannot be started; connections mounted before the error are unmounted.
    pub fn open(&self, configs: &[FuseConfig]) -> Result<(), String> {
        for config in configs {
            let adopted = crate::lock(&self.adopted).remove(&config.name);
            let fuse = Arc::new(Fuse::open(config, adopted).inspect_err(|_| self.stop())?);
            crate::lock(&self.fuses).insert(fuse.name.clone(), fuse.clone());
            let receiver = fuse.clone();
            let thread = std::thread::Builder::new()
                .name(format!("domos-fuse-{}", fuse.name))
                .spawn(move || receiver.receive())
                .map_err(|e| format!("fuse {}: {e}", fuse.name))
                .inspect_err(|_| self.stop())?;
            crate::lock(&self.threads).push(thread);
        }
        Ok(())
    }

    /// Takes `device`, a FUSE connection mounted outside the kernel, as the `[[fuse]]` named
    /// `name` of the next boot, which then does not mount it; `unmount` is called where the
    /// kernel would unmount it (and dropped uncalled when no boot opens it).
    pub fn adopt(&self, name: &str, device: File, unmount: Unmount) {
        crate::lock(&self.adopted).insert(name.to_string(), (device, unmount));
    }

    /// The connection `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Fuse>> {
        crate::lock(&self.fuses).get(name).cloned()
    }

    /// Asks every connection to stop reading requests and tells its driver, which answers what
    /// it took, syncs and ends; the mounts stay until [`Fuses::stop`].
    pub fn request_stop(&self) {
        crate::lock(&self.fuses).values().for_each(|fuse| fuse.request_stop());
    }

    /// Stops the receiving threads, unmounts and closes every connection.
    pub fn stop(&self) {
        drop(std::mem::take(&mut *crate::lock(&self.adopted)));
        let fuses = std::mem::take(&mut *crate::lock(&self.fuses));
        fuses.values().for_each(|fuse| fuse.request_stop());
        for thread in std::mem::take(&mut *crate::lock(&self.threads)) {
            let _ = thread.join();
        }
        fuses.values().for_each(|fuse| fuse.unmount());
    }
}
