//! `drv-fuse`: the driver of a mounted FUSE connection (`[[fuse]]`, opened by name from the
//! argument `fuse=NAME`; its domain needs the `devices` grant). It answers Linux's file requests
//! with the `InodeFileSystem` it looks up under the name `InodeFileSystem`, so that ordinary
//! programs (`cp`, `tar`, `find`, `fio`) use Domos' file system through the mount. It serves no
//! portal.
//!
//! The driver owns the connection's receive ring, a memory object of `ring=N` slots (default
//! 8), each a `u32` length and one request as Linux sent it; the kernel fills slots and raises
//! the interrupt, whose bounded handler `on_request` wakes the driver's `threads=N` threads
//! (default 4). A thread takes the oldest request into its heap, gives the slot back, parses it
//! ([`protocol`], every length checked), makes the `InodeFileSystem` call and writes the reply
//! from a memory object of its own with one `fuse_reply`. So up to `threads` requests are in
//! flight; the file system decides what runs in parallel.
//!
//! FUSE's node id is the node's generation in the high 32 bits and its inode number in the low
//! ones, so a node id names a node without a table in the driver (`FORGET` costs nothing), and
//! a node removed and its inode reused answers `ESTALE`; Linux's root, node id 1, is the file
//! system's `root()`. Entries and attributes may be cached by Linux for one second.
//!
//! Writes are at most [`MAX_WRITE`] bytes (the mount's `max_write`), so that one write is one
//! portal message within the 1 MiB `max_message` of the storage configurations. When the
//! connection stops (unmounted, or the system is stopping) the threads answer what the ring
//! holds, then `main` syncs the file system and ends.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

pub mod protocol;

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use domos_interfaces::file_system::{FileKind, FsError};
use domos_interfaces::inode_file_system::{Attributes, Changes, InodeFileSystem, Node, SetTime};
use domos_sdk::sync::AtomicVariable;
use domos_sdk::{CallError, HostError, Memory, Mutex, Portal, names, println};
use protocol::{Attr, InHeader, ParseError, Reply, Request, errno, fattr};

domos_sdk::component! { init: init, main: main, interrupt: on_request }

/// The largest write Linux sends (`max_write`), and the most bytes one read asks the file system
/// for: one portal message each.
pub const MAX_WRITE: u32 = 128 * 1024;
/// Bytes of a receive slot: the length word, a write's headers (80 bytes, rounded up to a page
/// as libfuse does) and its data.
const SLOT: u32 = 4 + 4096 + MAX_WRITE;
/// The largest reply: a 1 MiB read (more than Linux asks without `FUSE_MAX_PAGES`) and its
/// header.
const MAX_REPLY: usize = (1 << 20) + 4096;
/// How long Linux may cache names and attributes, in seconds: the file system changes only
/// through this mount while it is mounted.
const VALID: u64 = 1;
/// Slots in the ring unless `ring=N` says otherwise.
const DEFAULT_RING: u32 = 8;
/// Threads unless `threads=N` says otherwise.
const DEFAULT_THREADS: u32 = 4;

/// The connection's handle.
static DEVICE: AtomicU32 = AtomicU32::new(0);
/// The handle of the variable the threads wait on: 1 once requests arrived.
static WAKE: AtomicU32 = AtomicU32::new(0);
/// How many threads the interrupt wakes.
static THREADS: AtomicU32 = AtomicU32::new(DEFAULT_THREADS);
/// The root's node, as `inode | generation << 32`.
static ROOT: AtomicU64 = AtomicU64::new(0);

/// The receive ring and how far the driver has taken it.
struct Ring {
    memory: Memory,
    slots: u32,
    taken: u64,
}

static RING: Mutex<Option<Ring>> = Mutex::new(None);

fn host(code: i64) -> Result<i64, CallError> {
    if code < 0 { Err(CallError::Host(HostError::from_code(code).unwrap_or(HostError::BadRequest))) } else { Ok(code) }
}

fn init() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let arg = |key: &str| args.split_whitespace().find_map(|w| w.strip_prefix(key));
    let name = arg("fuse=").unwrap_or("fuse0");
    let ring = arg("ring=").and_then(|n| n.parse().ok()).unwrap_or(DEFAULT_RING).clamp(1, 64);
    let threads = arg("threads=").and_then(|n| n.parse().ok()).unwrap_or(DEFAULT_THREADS).clamp(1, 16);
    THREADS.store(threads, Ordering::Release);
    let device = host(domos_sys::fuse_open(name))? as u32;
    DEVICE.store(device, Ordering::Release);
    let memory = Memory::new(u64::from(SLOT) * u64::from(ring))?;
    let slots = host(domos_sys::fuse_attach(device, memory.handle(), SLOT))? as u32;
    WAKE.store(AtomicVariable::new(0)?.into_handle(), Ordering::Release);
    host(domos_sys::fuse_attach_interrupt(device))?;
    *RING.lock() = Some(Ring { memory, slots, taken: 0 });
    Ok(())
}

/// Requests arrived (or the connection stopped): wakes the threads. Straight-line code
/// (`bounded` in the manifest).
fn on_request(_source: u32, _events: u32) {
    domos_sys::atomic_set_and_unblock(WAKE.load(Ordering::Acquire), 1, THREADS.load(Ordering::Acquire));
}

fn main() -> Result<(), CallError> {
    let fs: Portal<dyn InodeFileSystem> = names::lookup("InodeFileSystem")?;
    let root = fs.root().map_err(|e| {
        println!("drv-fuse: no root directory: {e:?}");
        CallError::Host(HostError::NotFound)
    })?;
    ROOT.store(u64::from(root.inode) | u64::from(root.generation) << 32, Ordering::Release);
    let mut helpers = Vec::new();
    for _ in 1..THREADS.load(Ordering::Acquire) {
        helpers.push(domos_sdk::thread::spawn(|| match serve() {
            Ok(()) => 0,
            Err(e) => {
                println!("drv-fuse: a thread failed: {e}");
                1
            }
        })?);
    }
    let served = serve();
    for helper in helpers {
        let _ = helper.join();
    }
    // Whatever happened, what the file system holds goes to the disk.
    match fs.sync() {
        Ok(()) => println!("drv-fuse: unmounted; the file system is synced"),
        Err(e) => println!("drv-fuse: unmounted; sync failed: {e:?}"),
    }
    served
}

/// One thread's loop: takes requests and answers them until the connection stops.
fn serve() -> Result<(), CallError> {
    let fs: Portal<dyn InodeFileSystem> = names::lookup("InodeFileSystem")?;
    let wake = WAKE.load(Ordering::Acquire);
    let reply_memory = Memory::new(MAX_REPLY as u64)?;
    let mut request = Vec::new();
    let mut scratch = Vec::new();
    loop {
        // Cleared before looking, so that a request arriving after the look wakes the block.
        host(domos_sys::atomic_set(wake, 0))?;
        match take(&mut request)? {
            Taken::Request => {
                let reply = handle(&fs, &request, core::mem::take(&mut scratch));
                if let Some(reply) = reply {
                    reply_memory.write(0, &reply)?;
                    // NotFound: Linux gave up on the request (interrupted) or went away.
                    let _ = domos_sys::fuse_reply(
                        DEVICE.load(Ordering::Acquire),
                        reply_memory.handle(),
                        0,
                        reply.len() as u32,
                    );
                    scratch = reply;
                }
            }
            Taken::Nothing => {
                host(domos_sys::atomic_block_if_equal(wake, 0))?;
            }
            Taken::Stopped => return Ok(()),
        }
    }
}

enum Taken {
    Request,
    Nothing,
    Stopped,
}

/// Takes the oldest request out of the ring into `into` and gives its slot back.
fn take(into: &mut Vec<u8>) -> Result<Taken, CallError> {
    let mut ring = RING.lock();
    let ring = ring.as_mut().ok_or(CallError::Host(HostError::NotFound))?;
    let device = DEVICE.load(Ordering::Acquire);
    let ready = host(domos_sys::fuse_ready(device))?;
    if ready & !domos_abi::FUSE_STOPPED == 0 {
        return Ok(if ready & domos_abi::FUSE_STOPPED != 0 { Taken::Stopped } else { Taken::Nothing });
    }
    let at = ring.taken % u64::from(ring.slots) * u64::from(SLOT);
    // The kernel wrote the length; a wrong one is cut to the slot, and the parser refuses it.
    let len = ring.memory.get_u32(at)?.min(SLOT - 4);
    into.resize(len as usize, 0);
    ring.memory.read(at + 4, into)?;
    host(domos_sys::fuse_release(device, 1))?;
    ring.taken += 1;
    Ok(Taken::Request)
}

/// The errno of a file-system error.
fn errno_of(error: &FsError) -> i32 {
    match error {
        FsError::NotFound => errno::ENOENT,
        FsError::Exists => errno::EEXIST,
        FsError::NotDirectory => errno::ENOTDIR,
        FsError::IsDirectory => errno::EISDIR,
        FsError::NotEmpty => errno::ENOTEMPTY,
        FsError::NoSpace => errno::ENOSPC,
        FsError::NameTooLong => errno::ENAMETOOLONG,
        FsError::ReadOnly => errno::EROFS,
        FsError::Unsupported(_) => errno::EOPNOTSUPP,
        FsError::Invalid(_) => errno::EINVAL,
        FsError::Stale => errno::ESTALE,
        FsError::TooLarge => errno::EFBIG,
        FsError::TooManyLinks => errno::EMLINK,
        FsError::Corrupt(_) | FsError::Io | FsError::Call(_) => errno::EIO,
    }
}

/// The node a node id names.
fn node(nodeid: u64) -> Node {
    let id = if nodeid == protocol::ROOT_ID { ROOT.load(Ordering::Acquire) } else { nodeid };
    Node { inode: id as u32, generation: (id >> 32) as u32 }
}

/// The node id of a node.
fn nodeid(node: Node) -> u64 {
    let id = u64::from(node.inode) | u64::from(node.generation) << 32;
    if id == ROOT.load(Ordering::Acquire) { protocol::ROOT_ID } else { id }
}

fn attr(a: &Attributes) -> Attr {
    Attr {
        ino: u64::from(a.node.inode),
        size: a.size,
        blocks: a.blocks,
        atime: u64::from(a.atime),
        mtime: u64::from(a.mtime),
        ctime: u64::from(a.ctime),
        mode: u32::from(a.mode),
        nlink: u32::from(a.links),
        uid: a.uid,
        gid: a.gid,
    }
}

/// A `fuse_entry_out` reply for `a`.
fn entry(reply: &mut Reply, a: &Attributes) {
    reply.entry(nodeid(a.node), u64::from(a.node.generation), VALID, &attr(a));
}

/// The reply to one request read from the device, or `None` for a request Linux expects no
/// reply to (or one too broken to answer).
pub fn handle(fs: &dyn InodeFileSystem, bytes: &[u8], buffer: Vec<u8>) -> Option<Vec<u8>> {
    match protocol::parse(bytes) {
        Ok((header, request)) if request.is_silent() => {
            let _ = (header, request);
            None
        }
        Ok((header, request)) => Some(match answer(fs, &header, request, Reply::ok(header.unique, buffer)) {
            Ok(reply) => reply.finish(),
            Err(errno) => Reply::error(header.unique, errno, Vec::new()),
        }),
        Err(ParseError::Arguments(unique)) => Some(Reply::error(unique, errno::EINVAL, buffer)),
        Err(ParseError::Header) => None,
    }
}

/// Gives the node `made` to the user and group of the process that made it, as a local file
/// system does (the file system makes nodes as root); its attributes afterwards.
fn owned(fs: &dyn InodeFileSystem, header: &InHeader, made: Attributes) -> Result<Attributes, i32> {
    if (made.uid, made.gid) == (header.uid, header.gid) {
        return Ok(made);
    }
    let changes = Changes { uid: Some(header.uid), gid: Some(header.gid), ..Changes::default() };
    fs.set_attributes(made.node, changes).map_err(|e| errno_of(&e))
}

/// Carries out a request; the reply's body is appended to `reply`, or an errno returned.
fn answer(fs: &dyn InodeFileSystem, header: &InHeader, request: Request<'_>, mut reply: Reply) -> Result<Reply, i32> {
    let failed = |e: FsError| errno_of(&e);
    let this = node(header.nodeid);
    match request {
        Request::Init { major, minor, max_readahead, flags } => {
            if major != protocol::MAJOR || minor < protocol::MIN_MINOR {
                println!("drv-fuse: Linux speaks FUSE {major}.{minor}; this driver needs 7.{}", protocol::MIN_MINOR);
                return Err(errno::EPROTO);
            }
            reply
                .u32(protocol::MAJOR)
                .u32(minor.min(protocol::MINOR))
                .u32(max_readahead)
                .u32(flags & protocol::INIT_FLAGS)
                .u32(16 | 12 << 16) // max_background, congestion_threshold (u16 each)
                .u32(MAX_WRITE)
                .u32(1_000_000_000) // time_gran: whole seconds
                .u32(MAX_WRITE / 4096) // max_pages, map_alignment
                .bytes(&[0; 32]); // flags2, max_stack_depth, unused
        }
        Request::Lookup(name) => entry(&mut reply, &fs.lookup(this, name.to_vec()).map_err(failed)?),
        Request::GetAttributes => {
            reply.attr_out(VALID, &attr(&fs.attributes(this).map_err(failed)?));
        }
        Request::SetAttributes(s) => {
            let time = |now: u32, set: u32, at: u64| match (s.valid & now != 0, s.valid & set != 0) {
                (true, _) => Some(SetTime::Now),
                (false, true) => Some(SetTime::To(u32::try_from(at).unwrap_or(u32::MAX))),
                (false, false) => None,
            };
            let changes = Changes {
                permissions: (s.valid & fattr::MODE != 0).then_some((s.mode & 0o7777) as u16),
                uid: (s.valid & fattr::UID != 0).then_some(s.uid),
                gid: (s.valid & fattr::GID != 0).then_some(s.gid),
                size: (s.valid & fattr::SIZE != 0).then_some(s.size),
                atime: time(fattr::ATIME_NOW, fattr::ATIME, s.atime),
                mtime: time(fattr::MTIME_NOW, fattr::MTIME, s.mtime),
            };
            reply.attr_out(VALID, &attr(&fs.set_attributes(this, changes).map_err(failed)?));
        }
        Request::ReadLink => {
            reply.bytes(&fs.readlink(this).map_err(failed)?);
        }
        Request::Symlink { name, target } => {
            let made = fs.symlink(this, name.to_vec(), target.to_vec()).map_err(failed)?;
            entry(&mut reply, &owned(fs, header, made)?);
        }
        Request::MakeNode { mode, name } => {
            // Only regular files: ext2 here keeps no device numbers, pipes or sockets.
            if mode & 0o170000 != 0o100000 {
                return Err(errno::EPERM);
            }
            let made = fs.create(this, name.to_vec(), (mode & 0o7777) as u16).map_err(failed)?;
            entry(&mut reply, &owned(fs, header, made)?);
        }
        Request::MakeDirectory { mode, name } => {
            let made = fs.mkdir(this, name.to_vec(), (mode & 0o7777) as u16).map_err(failed)?;
            entry(&mut reply, &owned(fs, header, made)?);
        }
        Request::Unlink(name) => fs.remove(this, name.to_vec()).map_err(failed)?,
        Request::RemoveDirectory(name) => fs.rmdir(this, name.to_vec()).map_err(failed)?,
        Request::Rename { new_directory, flags, old, new } => {
            // RENAME_NOREPLACE, RENAME_EXCHANGE and RENAME_WHITEOUT are not offered.
            if flags != 0 {
                return Err(errno::EINVAL);
            }
            fs.rename(this, old.to_vec(), node(new_directory), new.to_vec()).map_err(failed)?;
        }
        Request::Link { old, name } => {
            entry(&mut reply, &fs.link(node(old), this, name.to_vec()).map_err(failed)?);
        }
        Request::Open | Request::OpenDirectory => {
            reply.u64(0).u32(0).u32(0); // fh, open_flags, padding
        }
        Request::Read { offset, size } => {
            let size = (size as usize).min(MAX_REPLY - protocol::OUT_HEADER);
            let mut at = offset;
            // One file-system read is one message: larger reads go in parts.
            while reply.len() - protocol::OUT_HEADER < size {
                let want = (size - (reply.len() - protocol::OUT_HEADER)).min(MAX_WRITE as usize) as u32;
                let read = fs.read(this, at, want).map_err(failed)?;
                reply.bytes(&read.data);
                at += read.data.len() as u64;
                if read.end || read.data.is_empty() {
                    break;
                }
            }
        }
        Request::Write { offset, data } => {
            if data.len() > MAX_WRITE as usize {
                return Err(errno::EINVAL);
            }
            fs.write(this, offset, data).map_err(failed)?;
            reply.u32(data.len() as u32).u32(0);
        }
        Request::StatFs => {
            let usage = fs.usage().map_err(failed)?;
            reply.u64(usage.blocks).u64(usage.free_blocks).u64(usage.free_blocks);
            reply.u64(usage.inodes).u64(usage.free_inodes);
            reply.u32(usage.block_size).u32(255).u32(usage.block_size).u32(0).bytes(&[0; 24]);
        }
        Request::Release | Request::ReleaseDirectory | Request::Flush | Request::Access => {}
        Request::Fsync | Request::FsyncDirectory | Request::Destroy => fs.sync().map_err(failed)?,
        Request::ReadDirectory { offset, size, plus } => {
            let limit = (size as usize).min(MAX_REPLY - protocol::OUT_HEADER);
            // About as many entries as the smallest fill the space; the rest are asked again.
            let max = (limit / if plus { 160 } else { 32 }).clamp(1, 512) as u32;
            let listing = fs.read_directory(this, offset, max, plus).map_err(failed)?;
            for e in &listing.entries {
                let kind = match e.kind {
                    FileKind::File => 8,
                    FileKind::Directory => 4,
                    FileKind::Symlink => 10,
                    FileKind::Other => 0,
                };
                let with = match (&e.attributes, plus) {
                    // Linux takes a reference to each node of a READDIRPLUS entry except `.`
                    // and `..`, for which the entry's node id 0 says "no entry".
                    (Some(a), true) if e.name != b"." && e.name != b".." => {
                        Some((nodeid(a.node), u64::from(a.node.generation), attr(a)))
                    }
                    (_, true) => Some((0, 0, Attr::default())),
                    _ => None,
                };
                let with = with.as_ref().map(|(n, g, a)| (*n, *g, a));
                if !protocol::push_dirent(&mut reply, limit, with, u64::from(e.inode), e.cookie, kind, &e.name) {
                    break;
                }
            }
        }
        Request::Create { mode, name } => {
            let made = fs.create(this, name.to_vec(), (mode & 0o7777) as u16).map_err(failed)?;
            entry(&mut reply, &owned(fs, header, made)?);
            reply.u64(0).u32(0).u32(0); // fuse_open_out
        }
        Request::Forget | Request::BatchForget | Request::Interrupt => {}
        Request::Unknown(_) => return Err(errno::ENOSYS),
    }
    Ok(reply)
}
