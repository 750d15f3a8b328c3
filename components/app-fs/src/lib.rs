//! `app-fs`: runs one command of `domos fs` against the `FileSystem` service and prints its
//! result, one console line `out: LINE` per output line, ending with `ok` or `error: MESSAGE`
//! (the prefixes tell its lines from those of other components in the same domain).
//!
//! Commands (the component's arguments): `ls PATH`, `stat PATH`, `df`, `mkdir PATH`,
//! `rm PATH`, `mv FROM TO`, `ln TARGET PATH` (a symbolic link), `readlink PATH` (where a
//! symbolic link points, as `out: TARGET`), `cat PATH` and `get PATH` (the file's bytes to
//! `domos fs`), `put PATH` (the bytes `domos fs` sends, zeros left as holes). The bytes go
//! through a pipe of device memories while the system runs, a few slots at a time, because a
//! console carries text; the domain needs the `devices` grant for `cat`, `get` and `put`.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use domos_interfaces::file_system::{FileKind, FileSystem, FsError};
use domos_sdk::{CallError, Memory, Portal, names, println};

domos_sdk::component! { main: main }

/// The most bytes one `FileSystem::write` carries: half the storage domains' largest message.
const WRITE: usize = 512 << 10;

/// A record of data in the slot.
const DATA: u32 = 0;
/// A record of zeros, nothing in the slot.
const HOLE: u32 = 1;
/// The last record: the offset is the file's size.
const END: u32 = 2;

/// This end of the pipe through which `domos fs` and `app-fs` move a file's bytes while the
/// system runs (`domos/src/fs/pipe.rs` describes it): the slots `pipe0`, `pipe1`, … (as many
/// as there are, all of one size), the host's control block `pipe-host` and ours, `pipe-guest`.
struct Pipe {
    slots: Vec<Memory>,
    /// Bytes per slot.
    slot: u64,
    host: Memory,
    guest: Memory,
    /// Records sent (getting) or taken (putting).
    count: u32,
}

impl Pipe {
    fn open() -> Result<Pipe, String> {
        let device = |name: &str| Memory::device(name).map_err(|e| format!("no device memory {name}: {e}"));
        let slots: Vec<Memory> = (0..16).map_while(|slot| Memory::device(&format!("pipe{slot}")).ok()).collect();
        let slot = slots.first().ok_or("no device memory pipe0")?.len().map_err(|e| e.to_string())?;
        Ok(Pipe { slots, slot, host: device("pipe-host")?, guest: device("pipe-guest")?, count: 0 })
    }

    /// The host's count, after checking that it has not given up.
    fn host_count(&self) -> Result<u32, String> {
        if self.host.get_u32(4).map_err(|e| e.to_string())? != 0 {
            return Err("domos fs stopped the transfer".into());
        }
        self.host.get_u32(0).map_err(|e| e.to_string())
    }

    /// Waits a little for the host, which cannot wake us.
    fn pause() -> Result<(), String> {
        domos_sdk::thread::sleep(core::time::Duration::from_micros(200)).map_err(|e| e.to_string())
    }

    /// The slot the next record goes into, once the host has taken what it held.
    fn free_slot(&mut self) -> Result<&Memory, String> {
        let slots = self.slots.len() as u32;
        while self.count.wrapping_sub(self.host_count()?) >= slots {
            Self::pause()?;
        }
        Ok(&self.slots[self.count as usize % self.slots.len()])
    }

    /// Sends the record whose data [`free_slot`](Self::free_slot)'s slot holds: `len` bytes
    /// at `offset` of the file (for a hole, nothing in the slot; for the end, `offset` is the
    /// file's size).
    fn sent(&mut self, offset: u64, len: u64, kind: u32) -> Result<(), String> {
        self.free_slot()?;
        let slot = self.count as usize % self.slots.len();
        let mut header = [0u8; 16];
        header[..8].copy_from_slice(&offset.to_le_bytes());
        header[8..12].copy_from_slice(&(len as u32).to_le_bytes());
        header[12..].copy_from_slice(&kind.to_le_bytes());
        // The header, then the count alone: the host reads the count first.
        self.guest.write(16 + 16 * slot as u64, &header).map_err(|e| e.to_string())?;
        self.count = self.count.wrapping_add(1);
        self.guest.set_u32(0, self.count).map_err(|e| e.to_string())
    }

    /// Takes the next record into `data`: its offset and kind.
    fn receive(&mut self, data: &mut Vec<u8>) -> Result<(u64, u32), String> {
        while self.host_count()? == self.count {
            Self::pause()?;
        }
        let slot = self.count as usize % self.slots.len();
        let mut header = [0u8; 16];
        self.host.read(16 + 16 * slot as u64, &mut header).map_err(|e| e.to_string())?;
        let word = |at: usize| u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]);
        let (offset, len, kind) = (u64::from(word(0)) | u64::from(word(4)) << 32, word(8), word(12));
        data.clear();
        if kind == DATA {
            if u64::from(len) > self.slot {
                return Err(format!("a record of {len} bytes in a slot of {}", self.slot));
            }
            data.resize(len as usize, 0);
            self.slots[slot].read(0, data).map_err(|e| e.to_string())?;
        }
        self.count = self.count.wrapping_add(1);
        self.guest.set_u32(0, self.count).map_err(|e| e.to_string())?;
        Ok((offset, kind))
    }
}

/// Whether `data` is all zeros (block by block: a branch per byte is slow over a large hole).
fn all_zeros(data: &[u8]) -> bool {
    data.chunks(4096).all(|block| block.iter().fold(0, |any, &byte| any | byte) == 0)
}

/// The ranges of `data` (which starts at file offset `offset`) that hold something other than
/// zeros, in whole blocks of `block` bytes: what must be written, the rest staying a hole.
fn runs_of_data(data: &[u8], offset: u64, block: u64) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    while start < data.len() {
        // Up to the next block boundary of the file.
        let end = (start + (block - (offset + start as u64) % block) as usize).min(data.len());
        if !all_zeros(&data[start..end]) {
            match runs.last_mut() {
                Some(run) if run.1 == start => run.1 = end,
                _ => runs.push((start, end)),
            }
        }
        start = end;
    }
    runs
}

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    // `domos fs` separates the words with U+001F, so that paths may hold spaces; a
    // configuration written by hand separates them with white space.
    let words: Vec<&str> =
        if args.contains('\u{1f}') { args.split('\u{1f}').collect() } else { args.split_whitespace().collect() };
    let fs: Portal<dyn FileSystem> = names::lookup("FileSystem")?;
    // Sync whatever happened: a failed command (a disk that filled up half-way) may have
    // changed the file system, whose bitmaps and counts reach the disk only at a sync.
    let outcome = run(&fs, &words);
    let synced = fs.sync().map_err(on("sync"));
    match outcome.and(synced) {
        Ok(()) => println!("ok"),
        Err(message) => println!("error: {message}"),
    }
    Ok(())
}

/// The message `errno` would give, as e2tools and debugfs print it.
fn describe(error: &FsError) -> String {
    match error {
        FsError::NotFound => "No such file or directory".into(),
        FsError::Exists => "File exists".into(),
        FsError::NotDirectory => "Not a directory".into(),
        FsError::IsDirectory => "Is a directory".into(),
        FsError::NotEmpty => "Directory not empty".into(),
        FsError::NoSpace => "No space left on device".into(),
        FsError::NameTooLong => "File name too long".into(),
        FsError::ReadOnly => "Read-only file system".into(),
        FsError::Corrupt(what) => format!("File system corrupt: {what}"),
        FsError::Unsupported(what) => format!("Not supported: {what}"),
        FsError::Invalid(what) => format!("Invalid argument: {what}"),
        FsError::Io => "Input/output error".into(),
        FsError::Call(e) => format!("the file system service failed: {e}"),
        FsError::Stale => "Stale file handle".into(),
    }
}

/// Turns an error about `path` into the line to print.
fn on(path: &str) -> impl Fn(FsError) -> String + '_ {
    move |e| format!("{path}: {}", describe(&e))
}

/// How much of a path an operation needs: all of it (`ls`, `rm`, the source of `mv`), or its
/// parent directory, where it makes the last component (`mkdir`, `put`, the target of `mv`).
#[derive(Clone, Copy, PartialEq)]
enum Needs {
    Whole,
    Parent,
}

/// The first prefix of `path` that is missing, or that is not a directory where the rest of
/// the path needs one, with that error; `None` when `needs` of the path is there.
fn culprit(fs: &Portal<dyn FileSystem>, path: &str, needs: Needs) -> Option<(String, FsError)> {
    let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let walk = if needs == Needs::Whole { components.len() } else { components.len().saturating_sub(1) };
    let mut prefix = String::new();
    for (index, component) in components.iter().take(walk).enumerate() {
        prefix.push('/');
        prefix.push_str(component);
        match fs.stat(prefix.clone()) {
            Err(FsError::NotFound) => return Some((prefix, FsError::NotFound)),
            Ok(stat) if stat.kind != FileKind::Directory && index + 1 < components.len() => {
                return Some((prefix, FsError::NotDirectory));
            }
            _ => {}
        }
    }
    None
}

/// The line for `error` from an operation on `paths`: a missing path or one that is not a
/// directory is named by its first component at fault (`mv /a /nope/b` blames `/nope`, not
/// `/a`), as far as the file system can tell; other errors name `fallback`.
fn blame(fs: &Portal<dyn FileSystem>, error: FsError, paths: &[(&str, Needs)], fallback: &str) -> String {
    if matches!(error, FsError::NotFound | FsError::NotDirectory)
        && let Some((path, error)) = paths.iter().find_map(|&(path, needs)| culprit(fs, path, needs))
    {
        return format!("{path}: {}", describe(&error));
    }
    on(fallback)(error)
}

fn run(fs: &Portal<dyn FileSystem>, words: &[&str]) -> Result<(), String> {
    match words {
        ["ls", path] => {
            let mut entries = fs.list(path.to_string()).map_err(|e| blame(fs, e, &[(path, Needs::Whole)], path))?;
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            for entry in entries {
                let kind = match entry.kind {
                    FileKind::Directory => "d",
                    FileKind::Symlink => "l",
                    FileKind::File => "-",
                    FileKind::Other => "?",
                };
                println!("out: {kind} {:>8} {}", entry.inode, entry.name);
            }
        }
        ["stat", path] => {
            let s = fs.stat(path.to_string()).map_err(|e| blame(fs, e, &[(path, Needs::Whole)], path))?;
            println!(
                "out: inode {} kind {:?} mode {:o} size {} links {} uid {} gid {} mtime {} blocks {}",
                s.inode, s.kind, s.mode, s.size, s.links, s.uid, s.gid, s.mtime, s.blocks
            );
        }
        ["df"] => {
            let u = fs.usage().map_err(on("/"))?;
            println!(
                "out: block size {} blocks {} free {} inodes {} free {}",
                u.block_size, u.blocks, u.free_blocks, u.inodes, u.free_inodes
            );
        }
        ["mkdir", path] => fs.mkdir(path.to_string()).map_err(|e| blame(fs, e, &[(path, Needs::Parent)], path))?,
        ["rm", path] => fs.remove(path.to_string()).map_err(|e| blame(fs, e, &[(path, Needs::Whole)], path))?,
        ["mv", from, to] => fs.rename(from.to_string(), to.to_string()).map_err(|e| {
            // What is wrong with the target (a directory in the way) is the target's fault.
            let fallback =
                if matches!(e, FsError::IsDirectory | FsError::NotEmpty | FsError::Exists) { to } else { from };
            blame(fs, e, &[(from, Needs::Whole), (to, Needs::Parent)], fallback)
        })?,
        ["ln", target, path] => fs
            .symlink(path.to_string(), target.to_string())
            .map_err(|e| blame(fs, e, &[(path, Needs::Parent)], path))?,
        ["readlink", path] => {
            let target = fs.readlink(path.to_string()).map_err(|e| blame(fs, e, &[(path, Needs::Whole)], path))?;
            println!("out: {target}");
        }
        ["cat" | "get", path] => {
            let stat = fs.stat(path.to_string()).map_err(|e| blame(fs, e, &[(path, Needs::Whole)], path))?;
            if stat.kind == FileKind::Directory {
                return Err(format!("{path}: {}", describe(&FsError::IsDirectory)));
            }
            let mut pipe = Pipe::open()?;
            let mut offset = 0;
            while offset < stat.size {
                // The file system has the cache copy the bytes into the pipe's slot: no
                // message, no heap.
                let want = (stat.size - offset).min(pipe.slot);
                let slot = pipe.free_slot()?.subrange(0, want).map_err(|e| e.to_string())?;
                let filled = fs.read_into(path.to_string(), offset, slot).map_err(on(path))?;
                if filled.bytes == 0 {
                    break;
                }
                // A hole travels as a length alone.
                pipe.sent(offset, filled.bytes, if filled.hole { HOLE } else { DATA })?;
                offset += filled.bytes;
            }
            pipe.sent(offset, 0, END)?;
        }
        ["put", path] => {
            let mut pipe = Pipe::open()?;
            match fs.create(path.to_string()) {
                Ok(()) | Err(FsError::Exists) => fs.truncate(path.to_string(), 0).map_err(on(path))?,
                Err(e) => return Err(blame(fs, e, &[(path, Needs::Parent)], path)),
            }
            let block = u64::from(fs.usage().map_err(on(path))?.block_size.max(1));
            let mut data = Vec::new();
            loop {
                let (offset, kind) = pipe.receive(&mut data)?;
                match kind {
                    // Blocks of zeros stay holes, as debugfs's write leaves them: a sparse file
                    // takes only the blocks it uses, even when it is larger than the image.
                    DATA => {
                        for (start, end) in runs_of_data(&data, offset, block) {
                            // In pieces that fit a message with room to spare.
                            for piece in (start..end).step_by(WRITE) {
                                let run = data[piece..(piece + WRITE).min(end)].to_vec();
                                fs.write(path.to_string(), offset + piece as u64, run).map_err(on(path))?;
                            }
                        }
                    }
                    HOLE => {}
                    _ => {
                        fs.truncate(path.to_string(), offset).map_err(on(path))?;
                        break;
                    }
                }
            }
        }
        _ => return Err(format!("unknown command: {}", words.join(" "))),
    }
    Ok(())
}
