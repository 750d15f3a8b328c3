//! `app-fs`: runs one command of `domos fs` against the `InodeFileSystem` service and prints
//! its result, one console line `out: LINE` per output line, ending with `ok` or `error: MESSAGE`
//! (the prefixes tell its lines from those of other components in the same domain).
//!
//! Paths are bytes, as ext2 names are: a name may hold any byte but NUL and `/` (spaces,
//! quotes, backslashes, newlines, bytes that are not UTF-8), so the component walks paths itself
//! through `InodeFileSystem`, whose names are bytes, rather than through `FileSystem`, whose
//! paths are UTF-8 strings. Names and link targets it prints are escaped as `ls -b` escapes them
//! ([`escaped`]), so that every output line is one line of text and says which bytes a name has.
//!
//! Commands (the component's arguments, one item each): `ls PATH`, `stat PATH`, `df`, `mkdir PATH`,
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
use domos_interfaces::file_system::{FileKind, FsError};
use domos_interfaces::inode_file_system::{Attributes, Changes, InodeFileSystem, Node};
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
    let words = domos_sdk::arguments();
    let fs: Portal<dyn InodeFileSystem> = names::lookup("InodeFileSystem")?;
    // Sync whatever happened: a failed command (a disk that filled up half-way) may have
    // changed the file system, whose bitmaps and counts reach the disk only at a sync.
    let outcome = fs.root().map_err(on(b"/")).and_then(|root| run(&Tree { fs: &fs, root }, &words));
    let synced = fs.sync().map_err(|e| format!("sync: {}", describe(&e)));
    match outcome.and(synced) {
        Ok(()) => println!("ok"),
        Err(message) => println!("error: {message}"),
    }
    Ok(())
}

/// `bytes` (a name, a path, a link target) as one line of text that says which bytes it has,
/// as `ls -b` (GNU `--quoting-style=escape`) writes names: a backslash, a space and the C
/// control characters as `\\`, `\ `, `\n`, `\t`, `\r`, `\a`, `\b`, `\f`, `\v`; any other
/// control character and every byte that is not part of valid UTF-8 as `\` and three octal
/// digits (`\377`); printable characters, non-ASCII ones included, as they are.
pub fn escaped(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let octal = |out: &mut String, byte: u8| out.push_str(&format!("\\{byte:03o}"));
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                ' ' => out.push_str("\\ "),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                '\x07' => out.push_str("\\a"),
                '\x08' => out.push_str("\\b"),
                '\x0c' => out.push_str("\\f"),
                '\x0b' => out.push_str("\\v"),
                c if c.is_control() => {
                    let mut utf8 = [0u8; 4];
                    for &byte in c.encode_utf8(&mut utf8).as_bytes() {
                        octal(&mut out, byte);
                    }
                }
                c => out.push(c),
            }
        }
        for &byte in chunk.invalid() {
            octal(&mut out, byte);
        }
    }
    out
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
        FsError::TooLarge => "File too large".into(),
        FsError::TooManyLinks => "Too many links".into(),
    }
}

/// Turns an error about `path` into the line to print.
fn on(path: &[u8]) -> impl Fn(FsError) -> String + '_ {
    move |e| format!("{}: {}", escaped(path), describe(&e))
}

/// The file system and its root: paths walked a name at a time.
struct Tree<'a> {
    fs: &'a Portal<dyn InodeFileSystem>,
    root: Node,
}

impl Tree<'_> {
    /// The attributes of the node at `path`, from the root, symbolic links not followed (as
    /// `FileSystem` and debugfs walk paths). A name that is missing, or a node that is not a
    /// directory where the path goes on, is blamed on the prefix of `path` at fault (`mv /a
    /// /nope/b` blames `/nope`, not `/a`).
    fn walk(&self, path: &[u8]) -> Result<Attributes, String> {
        if path.first() != Some(&b'/') {
            return Err(format!("{}: {}", escaped(path), describe(&FsError::Invalid("not an absolute path".into()))));
        }
        let mut node = self.fs.attributes(self.root).map_err(on(b"/"))?;
        // `walked` is the prefix of `path` that names `node`; `end` where the name ends.
        let (mut walked, mut end) = (&path[..1], 0);
        for name in path.split(|&byte| byte == b'/') {
            end += name.len() + 1;
            if name.is_empty() {
                continue;
            }
            if node.kind != FileKind::Directory {
                return Err(on(walked)(FsError::NotDirectory));
            }
            walked = &path[..end - 1];
            node = self.fs.lookup(node.node, name.to_vec()).map_err(on(walked))?;
        }
        Ok(node)
    }

    /// The directory that holds the last name of `path`, and that name.
    fn parent<'p>(&self, path: &'p [u8]) -> Result<(Node, &'p [u8]), String> {
        let trimmed = path.iter().rposition(|&byte| byte != b'/').map_or(&path[..0], |end| &path[..=end]);
        let slash = trimmed.iter().rposition(|&byte| byte == b'/').map_or(0, |slash| slash + 1);
        let (directory, name) = (&trimmed[..slash], &trimmed[slash..]);
        if name.is_empty() {
            return Err(on(path)(FsError::Invalid("the path has no last name".into())));
        }
        let directory = self.walk(if directory.is_empty() { path } else { directory })?;
        if directory.kind != FileKind::Directory {
            return Err(on(&trimmed[..slash.saturating_sub(1)])(FsError::NotDirectory));
        }
        Ok((directory.node, name))
    }
}

/// A listing line's letter for `kind`, as `ls -l` writes it.
fn letter(kind: FileKind) -> &'static str {
    match kind {
        FileKind::Directory => "d",
        FileKind::Symlink => "l",
        FileKind::File => "-",
        FileKind::Other => "?",
    }
}

fn run(tree: &Tree<'_>, words: &[Vec<u8>]) -> Result<(), String> {
    let fs = tree.fs;
    let words: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
    match words.as_slice() {
        [b"ls", path] => {
            let directory = tree.walk(path)?;
            let mut entries = Vec::new();
            let mut cookie = 0;
            loop {
                let listing = fs.read_directory(directory.node, cookie, 1024, false).map_err(on(path))?;
                cookie = listing.entries.last().map_or(cookie, |entry| entry.cookie);
                let empty = listing.entries.is_empty();
                entries.extend(listing.entries);
                if listing.end || empty {
                    break;
                }
            }
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            for entry in entries {
                println!("out: {} {:>8} {}", letter(entry.kind), entry.inode, escaped(&entry.name));
            }
        }
        [b"stat", path] => {
            let s = tree.walk(path)?;
            println!(
                "out: inode {} kind {:?} mode {:o} size {} links {} uid {} gid {} mtime {} blocks {}",
                s.node.inode, s.kind, s.mode, s.size, s.links, s.uid, s.gid, s.mtime, s.blocks
            );
        }
        [b"df"] => {
            let u = fs.usage().map_err(on(b"/"))?;
            println!(
                "out: block size {} blocks {} free {} inodes {} free {}",
                u.block_size, u.blocks, u.free_blocks, u.inodes, u.free_inodes
            );
        }
        [b"mkdir", path] => {
            let (directory, name) = tree.parent(path)?;
            fs.mkdir(directory, name.to_vec(), 0o755).map_err(on(path))?;
        }
        [b"rm", path] => {
            tree.walk(path)?;
            let (directory, name) = tree.parent(path)?;
            match fs.remove(directory, name.to_vec()) {
                Err(FsError::IsDirectory) => fs.rmdir(directory, name.to_vec()),
                result => result,
            }
            .map_err(on(path))?;
        }
        [b"mv", from, to] => {
            tree.walk(from)?;
            let (from_directory, from_name) = tree.parent(from)?;
            let (to_directory, to_name) = tree.parent(to)?;
            fs.rename(from_directory, from_name.to_vec(), to_directory, to_name.to_vec()).map_err(|e| {
                // What is wrong with the target (a directory in the way) is the target's fault.
                let blamed =
                    if matches!(e, FsError::IsDirectory | FsError::NotEmpty | FsError::Exists) { to } else { from };
                on(blamed)(e)
            })?;
        }
        [b"ln", target, path] => {
            let (directory, name) = tree.parent(path)?;
            fs.symlink(directory, name.to_vec(), target.to_vec()).map_err(on(path))?;
        }
        [b"readlink", path] => {
            let link = tree.walk(path)?;
            let target = fs.readlink(link.node).map_err(on(path))?;
            println!("out: {}", escaped(&target));
        }
        [b"cat" | b"get", path] => {
            let file = tree.walk(path)?;
            if file.kind == FileKind::Directory {
                return Err(on(path)(FsError::IsDirectory));
            }
            let mut pipe = Pipe::open()?;
            let mut offset = 0;
            while offset < file.size {
                // The file system has the cache copy the bytes into the pipe's slot: no
                // message, no heap.
                let want = (file.size - offset).min(pipe.slot);
                let slot = pipe.free_slot()?.subrange(0, want).map_err(|e| e.to_string())?;
                let filled = fs.read_into(file.node, offset, slot).map_err(on(path))?;
                if filled.bytes == 0 {
                    break;
                }
                // A hole travels as a length alone.
                pipe.sent(offset, filled.bytes, if filled.hole { HOLE } else { DATA })?;
                offset += filled.bytes;
            }
            pipe.sent(offset, 0, END)?;
        }
        [b"put", path] => {
            let mut pipe = Pipe::open()?;
            let (directory, name) = tree.parent(path)?;
            let size = |size| Changes { size: Some(size), ..Changes::default() };
            let file = match fs.create(directory, name.to_vec(), 0o644) {
                Ok(file) => file.node,
                Err(FsError::Exists) => {
                    let file = fs.lookup(directory, name.to_vec()).map_err(on(path))?.node;
                    fs.set_attributes(file, size(0)).map_err(on(path))?;
                    file
                }
                Err(e) => return Err(on(path)(e)),
            };
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
                                let run = &data[piece..(piece + WRITE).min(end)];
                                fs.write(file, offset + piece as u64, run).map_err(on(path))?;
                            }
                        }
                    }
                    HOLE => {}
                    _ => {
                        fs.set_attributes(file, size(offset)).map_err(on(path))?;
                        break;
                    }
                }
            }
        }
        _ => {
            let words: Vec<String> = words.iter().map(|word| escaped(word)).collect();
            return Err(format!("unknown command: {}", words.join(" ")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::escaped;

    #[test]
    fn names_are_escaped_as_ls_b_escapes_them() {
        assert_eq!(escaped(b"plain-name.txt"), "plain-name.txt");
        assert_eq!(escaped(b"a b"), "a\\ b");
        assert_eq!(escaped(b"back\\slash"), "back\\\\slash");
        assert_eq!(escaped(b"x\"y'z"), "x\"y'z");
        assert_eq!(escaped(b"\\u0041"), "\\\\u0041");
        assert_eq!(escaped(b"new\nline\ttab\x01"), "new\\nline\\ttab\\001");
        assert_eq!(escaped(&[b'a', 0x80, 0xff]), "a\\200\\377");
        assert_eq!(escaped("é\u{85}".as_bytes()), "é\\302\\205");
    }
}
