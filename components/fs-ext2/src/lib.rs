//! `fs-ext2`: the ext2 file system as a service.
//!
//! Serves one mounted file system through two interfaces, with the `domos-ext2` crate, over the
//! `BufferCache` it looks up under the name `BufferCache`: `FileSystem` by path (registered
//! under the name `FileSystem`), for shells and file-transfer tools, and `InodeFileSystem` by
//! node — inode number and generation — (registered under the name `InodeFileSystem`), for a
//! file server or FUSE (module `node`). Both are one service object behind one reader–writer
//! lock, so a change made through one is seen at once through the other; reads that find their
//! block map and their blocks' views kept share the lock, everything else takes it alone
//! (module `open`). A configuration renames either with
//! `register = { InodeFileSystem = "…" }`; where the name `InodeFileSystem` is taken already
//! (a second `fs-ext2` whose configuration renames only its `FileSystem`), init says so and
//! serves `FileSystem` alone. Every block the file system reads or writes goes through the
//! cache, so a call may wait for the disk inside the cache, and this component declares
//! `services_wait` (decision 0005).
//!
//! Arguments: `mkfs` makes an empty file system on the whole device before mounting it;
//! `block=1024|2048|4096` (only with `mkfs`) chooses its block size (default 1024 below 512 MiB,
//! 4096 from there, as mke2fs does); `ro` mounts read-only (nothing is written, the mount is not
//! counted); `time=SECONDS` sets the clock (seconds since 1970 at boot, from whoever starts the
//! system: `domos fs` gives the host's). A read-write mount is counted in the superblock as
//! Linux counts it, and what Linux would warn of then (the maximal mount count reached, an
//! unchecked file system) init prints as `warning: …`.
//!
//! Every read of the device — file data, inodes, directories, bitmaps — copies from read-only
//! views of the cache's memory (`BufferCache::view`), kept per cache block between calls
//! ([`CacheDevice`]), so a read of a block whose view is kept is one host call and no call to
//! the cache; a write to a block the cache holds goes in place through a kept writable view,
//! the cache told of it later in one call for many blocks. A reader streaming through more
//! blocks than views are kept (4,096) gets them copied by the cache (`BufferCache::read_into`),
//! and no view is made for them. Reads of file data — by path, by
//! node, or through an open file (`FileSystem::open` and `InodeFileSystem::open` return an
//! `OpenFile` portal) — go through module `open`, which also keeps each file's block map
//! between calls, so a record costs one copy from the cache's memory into the caller's memory
//! object. A file system that uses a read-only compatible feature the crate does not implement
//! is mounted read-only (init says so); one that cannot be mounted fails init with `cannot
//! mount: <why>`.
//!
//! Domos has no wall clock (the kernel's clock is monotonic, from boot): changes are stamped
//! with `time=` plus the seconds the kernel's clock has counted since the mount. Without
//! `time=`, the clock starts at the superblock's last write time (at least 2026-01-01, the time
//! a fresh file system is stamped with then).
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::{String, ToString};
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::fmt;
use domos_ext2::{BlockDevice, Error, FileType, IoError, MkfsOptions};
use domos_interfaces::buffer_cache::BufferCache;
use domos_interfaces::file_system::{Entry, FileKind, FileSystem, Filled, FsError, OpenFile, Stat, Usage};
use domos_interfaces::inode_file_system::{InodeFileSystem, Node};
use domos_sdk::{
    CallError, GatherList, HostError, Memory, Mutex, MutexGuard, Portal, ReadOnlyMemory, Readable, RwLock,
    RwLockReadGuard, RwLockWriteGuard, names, println,
};

mod node;
mod open;

domos_sdk::component! { init: init }

/// The most bytes one cache call carries, so that a request or reply fits the default 64 KiB
/// message with room for its encoding (`mkfs` writes 16 blocks at once).
const CACHE_CHUNK: usize = 32 * 1024;

/// The most bytes one `read` returns, whatever it asks for: the largest message a thread can
/// have (`max_message` is at most 16 MiB), so a large `len` cannot exhaust the heap.
const MAX_READ: u64 = 16 * 1024 * 1024;

/// The time `mkfs` stamps on a new file system, and the earliest clock after a mount:
/// 2026-01-01 00:00:00 UTC (Domos has no wall clock).
const FIXED_TIME: u32 = 1_767_225_600;

/// The most zeros `read_into` writes at once for a hole.
const ZEROS: u64 = 64 * 1024;

/// Devices below this size get mke2fs's "small" layout (1 KiB blocks, an inode per 4 KiB).
const SMALL_DEVICE: u64 = 512 * 1024 * 1024;

/// Byte offset of the superblock's last write time (`s_wtime`), where the crate's clock starts.
const SUPERBLOCK_WTIME: u64 = 1024 + 48;

/// The mounted file system and its clock, behind the service's lock.
type Ext2 = domos_ext2::FileSystem<CacheDevice>;

/// Why init failed; its `Debug` is what the SDK prints after `init failed: `.
enum InitError {
    /// An argument this component does not know.
    Arguments(String),
    /// The buffer cache could not be looked up or asked its size.
    Cache(CallError),
    /// `mkfs` failed.
    Mkfs(Error),
    /// The file system could not be mounted (init has said why, on a line of its own).
    Mount,
    /// The service could not be registered under the interface's name.
    Register(&'static str, CallError),
}

impl fmt::Debug for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::Arguments(why) => write!(f, "bad arguments: {why}"),
            InitError::Cache(error) => write!(f, "no buffer cache: {error}"),
            InitError::Mkfs(error) => write!(f, "mkfs: {error}"),
            InitError::Mount => f.write_str("no file system mounted"),
            InitError::Register(name, error) => write!(f, "cannot register {name}: {error}"),
        }
    }
}

/// What the arguments ask for.
struct Arguments {
    /// `Some` to make a file system first, with this block size (`None` inside: by device size).
    mkfs: Option<Option<u32>>,
    /// Mount read-only.
    read_only: bool,
    /// Seconds since 1970 at boot, when given.
    time: Option<u32>,
}

impl Arguments {
    fn parse(args: &str) -> Result<Self, InitError> {
        let mut mkfs = false;
        let mut read_only = false;
        let mut block_size = None;
        let mut time = None;
        for word in args.split_whitespace() {
            match word.split_once('=') {
                None if word == "mkfs" => mkfs = true,
                None if word == "ro" => read_only = true,
                Some(("block", value)) => match value.parse() {
                    Ok(size @ (1024 | 2048 | 4096)) => block_size = Some(size),
                    _ => return Err(InitError::Arguments(alloc::format!("block={value}: not 1024, 2048 or 4096"))),
                },
                Some(("time", value)) => match value.parse() {
                    Ok(seconds) => time = Some(seconds),
                    _ => return Err(InitError::Arguments(alloc::format!("time={value}: not seconds since 1970"))),
                },
                _ => return Err(InitError::Arguments(alloc::format!("unknown argument {word:?}"))),
            }
        }
        if block_size.is_some() && !mkfs {
            return Err(InitError::Arguments("block= needs mkfs".to_string()));
        }
        Ok(Arguments { mkfs: mkfs.then_some(block_size), read_only, time })
    }
}

/// The layout `mkfs` gives a device of `size` bytes at `time`: mke2fs's.
fn mkfs_options(size: u64, block_size: Option<u32>, time: u32) -> MkfsOptions {
    let small = size < SMALL_DEVICE;
    let mut volume_name = [0; 16];
    volume_name[..5].copy_from_slice(b"domos");
    MkfsOptions {
        block_size: block_size.unwrap_or(if small { 1024 } else { 4096 }),
        bytes_per_inode: if small { 4096 } else { 16384 },
        volume_name,
        time,
        ..MkfsOptions::default()
    }
}

fn init() -> Result<(), InitError> {
    let arguments = Arguments::parse(&domos_sdk::args())?;
    let cache: Portal<dyn BufferCache> = names::lookup("BufferCache").map_err(InitError::Cache)?;
    let cache = Arc::new(cache);
    let size = cache.size().map_err(InitError::Cache)?;
    let block = u64::from(cache.block_size().map_err(InitError::Cache)?).max(1);
    let mut device = CacheDevice::new(cache.clone(), size, block);

    if let Some(block_size) = arguments.mkfs {
        let options = mkfs_options(size, block_size, arguments.time.unwrap_or(FIXED_TIME));
        domos_ext2::mkfs(&mut device, &options).map_err(InitError::Mkfs)?;
        println!("made an ext2 file system of {size} bytes with {} B blocks", options.block_size);
    }

    let base = arguments.time.unwrap_or_else(|| {
        let mut wtime = [0; 4];
        match device.read(SUPERBLOCK_WTIME, &mut wtime) {
            Ok(()) => u32::from_le_bytes(wtime).max(FIXED_TIME),
            Err(_) => FIXED_TIME,
        }
    });
    let mounted = if arguments.read_only { Ext2::mount_read_only(device) } else { Ext2::mount(device) };
    let mut fs = match mounted {
        Ok(fs) => fs,
        Err(error) => {
            println!("cannot mount: {error}");
            return Err(InitError::Mount);
        }
    };
    // The first clock reading after a read-write mount is the mount time.
    fs.set_time(base);
    if let Some(warning) = fs.mount_warning() {
        println!("warning: {warning}");
    }
    let statfs = fs.statfs();
    match fs.unsupported_features() {
        Some(features) => {
            println!("mounted read-only: the file system uses {features}, which this crate does not implement")
        }
        None => println!(
            "mounted{}: {} blocks of {} B ({} free), {} inodes ({} free)",
            if fs.is_read_only() { " read-only" } else { "" },
            statfs.blocks,
            statfs.block_size,
            statfs.free_blocks,
            statfs.inodes,
            statfs.free_inodes
        ),
    }
    let service = Arc::new_cyclic(|me| Ext2Service {
        me: me.clone(),
        mounted: RwLock::new(Mounted {
            fs,
            base,
            mounted_at: domos_sdk::time::now_ns(),
            maps: open::FileMaps::default(),
        }),
        cache,
    });
    let by_path: Arc<dyn FileSystem> = service.clone();
    names::register("FileSystem", &Portal::new(by_path)).map_err(|error| InitError::Register("FileSystem", error))?;
    let by_node: Arc<dyn InodeFileSystem> = service;
    match names::register("InodeFileSystem", &Portal::new(by_node)) {
        Err(CallError::Host(HostError::NameTaken)) => {
            println!(
                "warning: the name InodeFileSystem is taken: serving FileSystem only (give this one another \
                 name with register = {{ InodeFileSystem = \"...\" }})"
            );
            Ok(())
        }
        result => result.map_err(|error| InitError::Register("InodeFileSystem", error)),
    }
}

/// The most views of cached blocks kept (each is a handle), and the most blocks remembered as
/// written through the cache; past it a view is dropped for each new one, the blocks remembered
/// all at once.
const MAX_VIEWS: usize = 4096;

/// A read of at least this many consecutive blocks without kept views, when keeping their views
/// would pass [`MAX_VIEWS`], streams: the cache copies them and no view is kept (a file read
/// again and again that is larger than the views kept would make and drop a view per block per
/// pass: 8 per 32 KiB NFS READ of a 64 MiB file, 16 % of the file server's CPU).
const STREAMED_BLOCKS: usize = 8;

/// The most blocks changed through writable views before the cache is told of them.
const MAX_UNREPORTED: usize = 256;

/// The buffer cache seen as the crate's byte-addressed [`BlockDevice`].
///
/// Reads copy from views of the cache's memory, one per cache block, kept between calls: a view
/// the cache revoked (it evicted the block) is asked for again. Writes to a block the cache is
/// known to hold (one read or written before) go through a writable view of it, in place, which
/// is kept in the read-only view's stead and serves reads as well (a file written and rewritten
/// is read with no call to the cache), except when a long read of blocks without views would
/// pass the views kept: the cache copies those (see [`STREAMED_BLOCKS`]); the cache is told
/// which blocks changed
/// (`BufferCache::written`) before this device's next other call to it, or when
/// [`MAX_UNREPORTED`] have changed. Other writes are
/// sent (`BufferCache::write`), so that the cache does not read from the disk a block about to
/// be written whole. Because such reads and writes do not reach the cache, its LRU sees only the
/// reports: a block read only through a kept view ages there, and when it is evicted the next
/// access asks for it again. The cache evicts only inside its own calls, and this service calls
/// it only under its lock taken alone and after its report (the reads that share the lock copy
/// from kept views and call nothing): with no other client of the cache (as in every
/// configuration of this tree), no eviction happens between a view's check and its copy, and
/// none loses a change the cache was not told of.
struct CacheDevice {
    cache: Arc<Portal<dyn BufferCache>>,
    /// The device's size, asked once at init (the crate's `size` cannot fail).
    size: u64,
    /// The cache's block size.
    block: u64,
    /// Cache block → a view of it in the cache's memory.
    views: BTreeMap<u64, View>,
    /// Where the next view to drop is looked for when [`MAX_VIEWS`] are kept: a hand that
    /// sweeps the kept blocks in order, as a clock's does.
    hand: u64,
    /// Blocks last sent whole or in part (`BufferCache::write`), which the cache holds since.
    sent: BTreeSet<u64>,
    /// Blocks changed through writable views that the cache has not been told of.
    unreported: BTreeSet<u64>,
}

impl CacheDevice {
    fn new(cache: Arc<Portal<dyn BufferCache>>, size: u64, block: u64) -> Self {
        CacheDevice {
            cache,
            size,
            block,
            views: BTreeMap::new(),
            hand: 0,
            sent: BTreeSet::new(),
            unreported: BTreeSet::new(),
        }
    }

    fn check_range(&self, offset: u64, len: usize) -> Result<(), IoError> {
        let len = len as u64;
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(IoError::OutOfRange { offset, len }),
        }
    }

    /// Tells the cache of the blocks changed through writable views: before any other call to
    /// it, which may evict them.
    fn report(&mut self) -> Result<(), IoError> {
        if self.unreported.is_empty() {
            return Ok(());
        }
        let blocks: Vec<u64> = self.unreported.iter().copied().collect();
        let first = blocks[0] * self.block;
        // Kept until the cache has them: a failed report is made again before the next call.
        self.cache.written(blocks).map_err(|error| cache_failed("written", first, error))?;
        self.unreported.clear();
        Ok(())
    }

    /// Runs `access` on the view of cache block `block`: the kept one, or, when there is none
    /// or the cache revoked it, a new one, which is kept.
    fn with_view(&mut self, block: u64, access: impl Fn(&View) -> Result<(), CallError>) -> Result<(), IoError> {
        if let Some(view) = self.views.get(&block)
            && access(view).is_ok()
        {
            return Ok(());
        }
        self.report()?;
        let offset = block * self.block;
        let view = View::Read(self.cache.view(block).map_err(|error| cache_failed("view", offset, error))?);
        let result = access(&view).map_err(|error| cache_failed("read of a view", offset, error));
        self.keep(block, view);
        result
    }

    /// Keeps `view` of cache block `block`, in place of any other; at [`MAX_VIEWS`], the next
    /// kept view after the hand is dropped for it.
    fn keep(&mut self, block: u64, view: View) {
        if self.views.len() >= MAX_VIEWS && !self.views.contains_key(&block) {
            let next = self.views.range(self.hand..).next().or_else(|| self.views.iter().next());
            if let Some((&dropped, _)) = next {
                self.views.remove(&dropped);
                self.hand = dropped + 1;
            }
        }
        self.views.insert(block, view);
    }

    /// Writes `bytes` at `within` of cache block `block` in place, through the kept writable
    /// view or a new one; false, writing nothing, for a block the cache is not known to hold.
    fn write_in_place(&mut self, block: u64, within: u64, bytes: &[u8]) -> Result<bool, IoError> {
        let kept = matches!(self.views.get(&block), Some(View::Write(view)) if view.write(within, bytes).is_ok());
        if !kept {
            if !self.views.contains_key(&block) && !self.sent.contains(&block) {
                return Ok(false);
            }
            self.report()?;
            let offset = block * self.block;
            let view = self.cache.writable_view(block).map_err(|error| cache_failed("writable view", offset, error))?;
            view.write(within, bytes).map_err(|error| cache_failed("write of a view", offset, error))?;
            self.keep(block, View::Write(view));
        }
        self.unreported.insert(block);
        if self.unreported.len() >= MAX_UNREPORTED {
            self.report()?;
        }
        Ok(true)
    }

    /// Sends `bytes` to byte `offset` of the device (`BufferCache::write`), in pieces of at most
    /// [`CACHE_CHUNK`]; the blocks they touch are held by the cache from then on.
    fn send(&mut self, offset: u64, bytes: &[u8]) -> Result<(), IoError> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.report()?;
        let mut at = offset;
        for chunk in bytes.chunks(CACHE_CHUNK) {
            self.cache.write(at, chunk).map_err(|error| cache_failed("write", at, error))?;
            at += chunk.len() as u64;
        }
        if self.sent.len() >= MAX_VIEWS {
            self.sent.clear();
        }
        self.sent.extend(offset / self.block..(offset + bytes.len() as u64).div_ceil(self.block));
        Ok(())
    }

    /// Copies `len` bytes at byte `device` into `memory` at `at` from the kept views, up to 32
    /// blocks per host call (`Memory::gather`), as far as the blocks have views the cache has
    /// not revoked: the bytes copied. It changes nothing, so readers run it side by side.
    fn copy_kept(&self, memory: &Memory, at: u64, device: u64, len: u64) -> Result<u64, IoError> {
        let block = self.block;
        // Each reader's own list, on its stack.
        let mut gather = GatherList::new();
        let mut done = 0;
        while done < len {
            // The blocks from here on are consecutive: one walk of the kept views, in order,
            // until one is missing.
            gather.clear();
            let mut end = done;
            for (&number, view) in self.views.range(locate(block, device + done).0..) {
                let (expected, within) = locate(block, device + end);
                let n = (block - within).min(len - end);
                if end == len || number != expected || !gather.push(view, within, n) {
                    break;
                }
                end += n;
            }
            let gathered =
                memory.gather(at + done, &gather).map_err(|error| cache_failed("gather", device + done, error))?;
            done += gathered.bytes;
            // A block without a kept view, or a view the cache revoked, ends the run.
            if gathered.copied < gather.len() || gather.len() < GatherList::MAX {
                break;
            }
        }
        Ok(done)
    }

    /// Reads `buf.len()` bytes at byte `offset` from the kept views alone: false, with `buf`
    /// partly read, at a block without a kept view or one the cache revoked. It changes
    /// nothing, so readers run it side by side.
    fn read_kept(&self, offset: u64, buf: &mut [u8]) -> bool {
        let mut done = 0;
        while done < buf.len() {
            let (number, within) = locate(self.block, offset + done as u64);
            let n = ((self.block - within) as usize).min(buf.len() - done);
            match self.views.get(&number) {
                Some(view) if view.read(within, &mut buf[done..done + n]).is_ok() => done += n,
                _ => return false,
            }
        }
        true
    }

    /// Copies `len` bytes at byte `device` into `memory` at `at`: from the kept views
    /// ([`copy_kept`](Self::copy_kept)), a block without one, or whose view the cache revoked,
    /// through [`with_view`](Self::with_view), which keeps a new one.
    fn copy_into(&mut self, memory: &Memory, at: u64, device: u64, len: u64) -> Result<(), IoError> {
        let block = self.block;
        let piece = |done: u64| {
            let (number, within) = locate(block, device + done);
            (number, within, (block - within).min(len - done))
        };
        let mut done = 0;
        while done < len {
            done += self.copy_kept(memory, at + done, device + done, len - done)?;
            if done == len {
                break;
            }
            let mut unviewed = done;
            while unviewed < len && !self.views.contains_key(&piece(unviewed).0) {
                unviewed += piece(unviewed).2;
            }
            let blocks = (unviewed - done).div_ceil(block) as usize;
            if blocks >= STREAMED_BLOCKS && self.views.len() + blocks > MAX_VIEWS {
                // A reader streams through more blocks than views are kept: views made now
                // would be dropped before they are read again. The cache copies the run.
                self.copy_through_cache(memory, at + done, device + done, unviewed - done)?;
                done = unviewed;
            } else {
                let (number, within, n) = piece(done);
                self.with_view(number, |view| memory.copy_from(at + done, view, within, n))?;
                done += n;
            }
        }
        Ok(())
    }

    /// Copies `len` bytes at byte `device` into `memory` at `at` through the cache
    /// (`BufferCache::read_into`, blocks in consecutive slots in one copy), keeping no views.
    fn copy_through_cache(&mut self, memory: &Memory, at: u64, device: u64, len: u64) -> Result<(), IoError> {
        self.report()?;
        let part = memory.subrange(at, len).map_err(|error| cache_failed("subrange", device, error))?;
        self.cache.read_into(device, len, part).map_err(|error| cache_failed("read_into", device, error))
    }
}

/// A kept view of a cache block: read-only as the cache first gives it, writable once the
/// device has written the block in place.
enum View {
    Read(ReadOnlyMemory),
    Write(Memory),
}

impl View {
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), CallError> {
        match self {
            View::Read(view) => view.read(offset, out),
            View::Write(view) => view.read(offset, out),
        }
    }
}

impl Readable for View {
    fn memory_handle(&self) -> u32 {
        match self {
            View::Read(view) => view.memory_handle(),
            View::Write(view) => view.memory_handle(),
        }
    }
}

/// The cache block of byte `position` of the device, and the byte within it: by a shift and a
/// mask for the usual block of a power of two (a division takes tens of cycles, and a read
/// makes two per block).
#[inline]
fn locate(block: u64, position: u64) -> (u64, u64) {
    if block.is_power_of_two() {
        (position >> block.trailing_zeros(), position & (block - 1))
    } else {
        (position / block, position % block)
    }
}

/// `mutex`, locked. In a restartable call a lock held by a call that waits ends the attempt,
/// which the kernel makes again the waiting way (decision 0017).
fn lock<T>(mutex: &Mutex<T>) -> Result<MutexGuard<'_, T>, FsError> {
    mutex.lock_restartable().map_err(|refused| FsError::Call(refused.into()))
}

/// The crate's error for a failed cache call, after saying on the console what failed.
fn cache_failed(what: &str, offset: u64, error: CallError) -> IoError {
    // `MustWait` ends a restartable call that would wait: it is made again, nothing failed.
    if !matches!(error, CallError::Host(HostError::MustWait)) {
        println!("buffer cache {what} at offset {offset} failed: {error}");
    }
    IoError::Device { offset }
}

impl BlockDevice for CacheDevice {
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        self.check_range(offset, buf.len())?;
        let mut done = 0;
        while done < buf.len() {
            let position = offset + done as u64;
            let (number, within) = locate(self.block, position);
            let n = ((self.block - within) as usize).min(buf.len() - done);
            let part = core::cell::RefCell::new(&mut buf[done..done + n]);
            self.with_view(number, |view| view.read(within, &mut part.borrow_mut()))?;
            done += n;
        }
        Ok(())
    }

    fn write(&mut self, offset: u64, buf: &[u8]) -> Result<(), IoError> {
        self.check_range(offset, buf.len())?;
        // Blocks written in place break the run of bytes still to be sent in one call.
        let (mut done, mut unsent) = (0, 0);
        while done < buf.len() {
            let position = offset + done as u64;
            let (number, within) = locate(self.block, position);
            let n = ((self.block - within) as usize).min(buf.len() - done);
            if self.write_in_place(number, within, &buf[done..done + n])? {
                self.send(offset + unsent as u64, &buf[unsent..done])?;
                unsent = done + n;
            }
            done += n;
        }
        self.send(offset + unsent as u64, &buf[unsent..])
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn flush(&mut self) -> Result<(), IoError> {
        self.report()?;
        self.cache.sync().map_err(|error| cache_failed("sync", 0, error))
    }

    fn flush_range(&mut self, offset: u64, len: u64) -> Result<(), IoError> {
        self.report()?;
        self.cache.sync_range(offset, len).map_err(|error| cache_failed("sync_range", offset, error))
    }
}

/// The mounted file system, with what its clock is computed from.
struct Mounted {
    fs: Ext2,
    /// Seconds since 1970 at the mount.
    base: u32,
    /// The kernel's monotonic clock at the mount, in nanoseconds.
    mounted_at: u64,
    /// Files' block maps, kept between reads (module `open`).
    maps: open::FileMaps,
}

/// The file-system service, by path (`FileSystem`, here) and by node (`InodeFileSystem`, in
/// module `node`).
struct Ext2Service {
    /// Itself, for the open files it hands out (each holds the service).
    me: Weak<Ext2Service>,
    /// Taken to read by the reads that find everything they need kept (module `open`), and to
    /// write by everything else.
    mounted: RwLock<Mounted>,
    cache: Arc<Portal<dyn BufferCache>>,
}

impl Ext2Service {
    /// Runs `operation` on the mounted file system, its clock set to now.
    fn with<T>(&self, operation: impl FnOnce(&mut Ext2) -> domos_ext2::Result<T>) -> Result<T, FsError> {
        self.with_now(|fs, _| operation(fs))
    }

    /// Runs `operation`, which changes nothing, on the mounted file system, without setting its
    /// clock.
    fn inspect<T>(&self, operation: impl FnOnce(&mut Ext2) -> domos_ext2::Result<T>) -> Result<T, FsError> {
        operation(&mut self.mounted()?.fs).map_err(fs_error)
    }

    /// The mounted file system, locked for this thread alone (restartable, as [`lock`]).
    fn mounted(&self) -> Result<RwLockWriteGuard<'_, Mounted>, FsError> {
        self.mounted.write_restartable().map_err(|refused| FsError::Call(refused.into()))
    }

    /// The mounted file system, locked for reading beside other readers (restartable).
    fn mounted_shared(&self) -> Result<RwLockReadGuard<'_, Mounted>, FsError> {
        self.mounted.read_restartable().map_err(|refused| FsError::Call(refused.into()))
    }

    /// The node `path` names, for the reads that go on by node.
    fn node_of(&self, path: &str) -> Result<Node, FsError> {
        self.inspect(|fs| {
            let inode = fs.lookup(path)?;
            Ok(Node { inode, generation: fs.stat(inode)?.generation })
        })
    }

    /// [`with`](Self::with), telling `operation` the clock's time too (seconds since 1970).
    fn with_now<T>(&self, operation: impl FnOnce(&mut Ext2, u32) -> domos_ext2::Result<T>) -> Result<T, FsError> {
        let mut mounted = self.mounted()?;
        let elapsed = domos_sdk::time::now_ns().saturating_sub(mounted.mounted_at) / 1_000_000_000;
        let now = mounted.base.saturating_add(u32::try_from(elapsed).unwrap_or(u32::MAX));
        mounted.fs.set_time(now);
        operation(&mut mounted.fs, now).map_err(fs_error)
    }

    /// Space and inodes, for either interface.
    fn usage_now(&self) -> Result<Usage, FsError> {
        let statfs = self.with(|fs| Ok(fs.statfs()))?;
        Ok(Usage {
            block_size: statfs.block_size,
            blocks: statfs.blocks.into(),
            free_blocks: statfs.free_blocks.into(),
            inodes: statfs.inodes.into(),
            free_inodes: statfs.free_inodes.into(),
        })
    }

    /// Writes everything to the disk, for either interface.
    fn sync_now(&self) -> Result<(), FsError> {
        // A read-write sync ends by flushing the device, which is the cache's own sync; a
        // read-only mount writes nothing, so the cache is synced here (it may hold others' writes).
        let read_only = self.with(|fs| fs.sync().map(|()| fs.is_read_only()))?;
        if read_only {
            self.cache.sync().map_err(|error| {
                println!("buffer cache sync failed: {error}");
                FsError::Io
            })?;
        }
        Ok(())
    }
}

/// The interface's error for the crate's.
fn fs_error(error: Error) -> FsError {
    match error {
        Error::NotFound => FsError::NotFound,
        Error::Exists => FsError::Exists,
        Error::NotDirectory => FsError::NotDirectory,
        Error::IsDirectory => FsError::IsDirectory,
        Error::NotEmpty => FsError::NotEmpty,
        Error::NoSpace => FsError::NoSpace,
        Error::NameTooLong => FsError::NameTooLong,
        Error::ReadOnly => FsError::ReadOnly,
        Error::Corrupt(what) => FsError::Corrupt(what),
        Error::Unsupported(what) => FsError::Unsupported(what),
        Error::Io(_) => FsError::Io,
        Error::InvalidArgument(why) => FsError::Invalid(why.to_string()),
        Error::Stale => FsError::Stale,
        Error::FileTooLarge => FsError::TooLarge,
        Error::TooManyLinks => FsError::TooManyLinks,
    }
}

/// The interface's kind for the crate's file type.
fn kind(file_type: FileType) -> FileKind {
    match file_type {
        FileType::Regular => FileKind::File,
        FileType::Directory => FileKind::Directory,
        FileType::Symlink => FileKind::Symlink,
        FileType::CharDevice | FileType::BlockDevice | FileType::Fifo | FileType::Socket | FileType::Unknown => {
            FileKind::Other
        }
    }
}

/// `path` if it is absolute (the interface's paths are).
fn absolute(path: &str) -> Result<&str, FsError> {
    if path.starts_with('/') { Ok(path) } else { Err(FsError::Invalid(alloc::format!("{path:?} is not absolute"))) }
}

/// Text from on-disk bytes (names, link targets), which ext2 does not require to be UTF-8.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl FileSystem for Ext2Service {
    fn stat(&self, path: String) -> Result<Stat, FsError> {
        let path = absolute(&path)?;
        let metadata = self.inspect(|fs| {
            let inode = fs.lookup(path)?;
            fs.stat(inode)
        })?;
        Ok(Stat {
            inode: metadata.inode,
            kind: kind(metadata.file_type),
            mode: metadata.mode,
            size: metadata.size,
            links: metadata.links,
            uid: metadata.uid,
            gid: metadata.gid,
            mtime: metadata.mtime,
            blocks: metadata.blocks,
        })
    }

    fn list(&self, path: String) -> Result<Vec<Entry>, FsError> {
        let path = absolute(&path)?;
        self.inspect(|fs| {
            let directory = fs.lookup(path)?;
            let entries = fs.readdir(directory)?;
            let mut out = Vec::with_capacity(entries.len());
            for entry in entries {
                // Without the filetype feature the entry does not say; the inode does.
                let file_type = match entry.file_type {
                    FileType::Unknown => fs.stat(entry.inode)?.file_type,
                    known => known,
                };
                out.push(Entry { name: text(&entry.name), inode: entry.inode, kind: kind(file_type) });
            }
            Ok(out)
        })
    }

    fn read(&self, path: String, offset: u64, len: u32) -> Result<Vec<u8>, FsError> {
        let node = self.node_of(absolute(&path)?)?;
        self.read_node(node, offset, len).map(|(data, _)| data)
    }

    fn read_into(&self, path: String, offset: u64, memory: Memory) -> Result<Filled, FsError> {
        let node = self.node_of(absolute(&path)?)?;
        self.read_node_into(node, offset, &memory)
    }

    fn write(&self, path: String, offset: u64, data: &[u8]) -> Result<(), FsError> {
        let path = absolute(&path)?;
        self.with(|fs| {
            let inode = fs.lookup(path)?;
            fs.write(inode, offset, data)
        })
    }

    fn create(&self, path: String) -> Result<(), FsError> {
        let path = absolute(&path)?;
        self.with(|fs| {
            let (directory, name) = fs.lookup_parent(path)?;
            fs.create(directory, name, 0o644).map(drop)
        })
    }

    fn truncate(&self, path: String, size: u64) -> Result<(), FsError> {
        let path = absolute(&path)?;
        self.with(|fs| {
            let inode = fs.lookup(path)?;
            fs.truncate(inode, size)
        })
    }

    fn mkdir(&self, path: String) -> Result<(), FsError> {
        let path = absolute(&path)?;
        self.with(|fs| {
            let (directory, name) = fs.lookup_parent(path)?;
            fs.mkdir(directory, name, 0o755).map(drop)
        })
    }

    fn remove(&self, path: String) -> Result<(), FsError> {
        let path = absolute(&path)?;
        self.with(|fs| {
            let (directory, name) = fs.lookup_parent(path)?;
            match fs.unlink(directory, name) {
                Err(Error::IsDirectory) => fs.rmdir(directory, name),
                result => result,
            }
        })
    }

    fn rename(&self, from: String, to: String) -> Result<(), FsError> {
        let (from, to) = (absolute(&from)?, absolute(&to)?);
        self.with(|fs| {
            let (from_directory, from_name) = fs.lookup_parent(from)?;
            let (to_directory, to_name) = fs.lookup_parent(to)?;
            fs.rename(from_directory, from_name, to_directory, to_name)
        })
    }

    fn symlink(&self, path: String, target: String) -> Result<(), FsError> {
        let path = absolute(&path)?;
        self.with(|fs| {
            let (directory, name) = fs.lookup_parent(path)?;
            fs.symlink(directory, name, &target).map(drop)
        })
    }

    fn readlink(&self, path: String) -> Result<String, FsError> {
        let path = absolute(&path)?;
        self.inspect(|fs| {
            let inode = fs.lookup(path)?;
            fs.readlink(inode)
        })
        .map(|target| text(&target))
    }

    fn usage(&self) -> Result<Usage, FsError> {
        self.usage_now()
    }

    fn sync(&self) -> Result<(), FsError> {
        self.sync_now()
    }

    fn open(&self, path: String) -> Result<Portal<dyn OpenFile>, FsError> {
        let node = self.node_of(absolute(&path)?)?;
        self.open_node(node)
    }
}
