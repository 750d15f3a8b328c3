//! The FUSE wire protocol, as Linux's uapi header `fuse_kernel.h` lays it out (protocol 7.x,
//! little-endian): parsing a request read from `/dev/fuse` with every length checked, and
//! encoding replies. Plain Rust with no host calls, so that the fuzz target
//! `fuzz/fuzz_targets/fuse_request.rs` feeds it directly.
//!
//! A request is a 40-byte `fuse_in_header` (its length, opcode, unique id, node id, caller's
//! uid, gid and pid), then an opcode's fixed argument structure, then names (NUL-terminated) or
//! data. A reply is a 16-byte `fuse_out_header` (length, negative errno or 0, the unique id),
//! then the opcode's result structure.

use alloc::vec::Vec;

/// The protocol's major version; Linux and this driver must agree on it.
pub const MAJOR: u32 = 7;
/// The minor version this driver speaks (Linux 5.4's): the layouts below are this version's.
pub const MINOR: u32 = 31;
/// The oldest minor version this driver speaks to (Linux 3.15's): from it on, requests have
/// the layouts parsed here (`fuse_write_in` of 40 bytes, `fuse_mknod_in` and `fuse_create_in`
/// of 16) and `fuse_init_out` is 64 bytes long.
pub const MIN_MINOR: u32 = 23;
/// The node id Linux gives the root directory.
pub const ROOT_ID: u64 = 1;
/// Bytes of `fuse_in_header`.
pub const IN_HEADER: usize = 40;
/// Bytes of `fuse_out_header`.
pub const OUT_HEADER: usize = 16;

/// Opcodes (`enum fuse_opcode`).
#[allow(missing_docs)]
pub mod opcode {
    pub const LOOKUP: u32 = 1;
    pub const FORGET: u32 = 2;
    pub const GETATTR: u32 = 3;
    pub const SETATTR: u32 = 4;
    pub const READLINK: u32 = 5;
    pub const SYMLINK: u32 = 6;
    pub const MKNOD: u32 = 8;
    pub const MKDIR: u32 = 9;
    pub const UNLINK: u32 = 10;
    pub const RMDIR: u32 = 11;
    pub const RENAME: u32 = 12;
    pub const LINK: u32 = 13;
    pub const OPEN: u32 = 14;
    pub const READ: u32 = 15;
    pub const WRITE: u32 = 16;
    pub const STATFS: u32 = 17;
    pub const RELEASE: u32 = 18;
    pub const FSYNC: u32 = 20;
    pub const FLUSH: u32 = 25;
    pub const INIT: u32 = 26;
    pub const OPENDIR: u32 = 27;
    pub const READDIR: u32 = 28;
    pub const RELEASEDIR: u32 = 29;
    pub const FSYNCDIR: u32 = 30;
    pub const ACCESS: u32 = 34;
    pub const CREATE: u32 = 35;
    pub const INTERRUPT: u32 = 36;
    pub const DESTROY: u32 = 38;
    pub const BATCH_FORGET: u32 = 42;
    pub const READDIRPLUS: u32 = 44;
    pub const RENAME2: u32 = 45;
}

/// `errno` values of Linux the driver answers with.
#[allow(missing_docs)]
pub mod errno {
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const EIO: i32 = 5;
    pub const EEXIST: i32 = 17;
    pub const ENOTDIR: i32 = 20;
    pub const EISDIR: i32 = 21;
    pub const EINVAL: i32 = 22;
    pub const EFBIG: i32 = 27;
    pub const ENOSPC: i32 = 28;
    pub const EROFS: i32 = 30;
    pub const EMLINK: i32 = 31;
    pub const ENAMETOOLONG: i32 = 36;
    pub const ENOSYS: i32 = 38;
    pub const ENOTEMPTY: i32 = 39;
    pub const EPROTO: i32 = 71;
    pub const EOPNOTSUPP: i32 = 95;
    pub const ESTALE: i32 = 116;
}

/// `fuse_init_in` flags this driver takes up when Linux offers them: reads may be sent
/// asynchronously (`FUSE_ASYNC_READ`), writes may be larger than a page (`FUSE_BIG_WRITES`),
/// lookups and other directory operations may run in parallel (`FUSE_PARALLEL_DIROPS`).
pub const INIT_FLAGS: u32 = 1 << 0 | 1 << 5 | 1 << 18;

/// `fuse_setattr_in.valid` bits.
#[allow(missing_docs)]
pub mod fattr {
    pub const MODE: u32 = 1 << 0;
    pub const UID: u32 = 1 << 1;
    pub const GID: u32 = 1 << 2;
    pub const SIZE: u32 = 1 << 3;
    pub const ATIME: u32 = 1 << 4;
    pub const MTIME: u32 = 1 << 5;
    pub const ATIME_NOW: u32 = 1 << 7;
    pub const MTIME_NOW: u32 = 1 << 8;
}

/// The fixed part of every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InHeader {
    /// Bytes of the whole request.
    pub len: u32,
    /// What is asked.
    pub opcode: u32,
    /// The id the reply must carry.
    pub unique: u64,
    /// The node the request is about.
    pub nodeid: u64,
    /// The calling process's user.
    pub uid: u32,
    /// Its group.
    pub gid: u32,
}

/// `fuse_setattr_in`: what to change (`valid`) and the new values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetAttributes {
    /// `fattr` bits: which of the fields below count.
    pub valid: u32,
    /// The new size.
    pub size: u64,
    /// The new access time, seconds.
    pub atime: u64,
    /// The new modification time, seconds.
    pub mtime: u64,
    /// The new mode (permission bits count).
    pub mode: u32,
    /// The new owner.
    pub uid: u32,
    /// The new group.
    pub gid: u32,
}

/// A request, parsed; names and data borrow from the bytes read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// Protocol negotiation, the first request.
    Init {
        /// Linux's major version.
        major: u32,
        /// Linux's minor version.
        minor: u32,
        /// The most bytes Linux reads ahead.
        max_readahead: u32,
        /// What Linux offers.
        flags: u32,
    },
    /// The node `name` in the directory.
    Lookup(&'a [u8]),
    /// Linux forgets the node (no reply).
    Forget,
    /// Linux forgets nodes (no reply).
    BatchForget,
    /// The node's attributes.
    GetAttributes,
    /// Changes attributes.
    SetAttributes(SetAttributes),
    /// A symbolic link's target.
    ReadLink,
    /// Makes the symbolic link `name` pointing at `target`.
    Symlink {
        /// The new name.
        name: &'a [u8],
        /// Where it points.
        target: &'a [u8],
    },
    /// Makes a node of any type.
    MakeNode {
        /// Its type and permission bits.
        mode: u32,
        /// Its name.
        name: &'a [u8],
    },
    /// Makes a directory.
    MakeDirectory {
        /// Its permission bits.
        mode: u32,
        /// Its name.
        name: &'a [u8],
    },
    /// Removes a name that is not a directory's.
    Unlink(&'a [u8]),
    /// Removes an empty directory.
    RemoveDirectory(&'a [u8]),
    /// Renames (RENAME, and RENAME2 with its flags).
    Rename {
        /// The directory the new name goes into.
        new_directory: u64,
        /// RENAME2's flags (0 for RENAME).
        flags: u32,
        /// The name now.
        old: &'a [u8],
        /// The name then.
        new: &'a [u8],
    },
    /// Gives the node `old` a further name in the directory.
    Link {
        /// The node.
        old: u64,
        /// The new name.
        name: &'a [u8],
    },
    /// Opens a file.
    Open,
    /// Reads `size` bytes at `offset`.
    Read {
        /// Where.
        offset: u64,
        /// How many bytes at most.
        size: u32,
    },
    /// Writes `data` at `offset`.
    Write {
        /// Where.
        offset: u64,
        /// The bytes.
        data: &'a [u8],
    },
    /// Space and inodes.
    StatFs,
    /// Closes a file.
    Release,
    /// Writes a file to the disk.
    Fsync,
    /// A descriptor of a file is closed.
    Flush,
    /// Opens a directory.
    OpenDirectory,
    /// Lists a directory from `offset` (the cookie of the entry before), at most `size` bytes.
    ReadDirectory {
        /// Where the listing goes on.
        offset: u64,
        /// Bytes at most.
        size: u32,
        /// READDIRPLUS: each entry with its node's attributes.
        plus: bool,
    },
    /// Closes a directory.
    ReleaseDirectory,
    /// Writes a directory to the disk.
    FsyncDirectory,
    /// Whether the caller may access the node (`mask`: R_OK, W_OK, X_OK).
    Access,
    /// Creates and opens a regular file.
    Create {
        /// Its permission bits.
        mode: u32,
        /// Its name.
        name: &'a [u8],
    },
    /// Linux gives up waiting for a request (no reply).
    Interrupt,
    /// The file system goes away.
    Destroy,
    /// An opcode this driver does not implement.
    Unknown(u32),
}

impl Request<'_> {
    /// Whether Linux waits for no reply to this request.
    pub fn is_silent(&self) -> bool {
        matches!(self, Request::Forget | Request::BatchForget | Request::Interrupt)
    }
}

/// Why a request cannot be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Shorter than a header, or a header whose length is not the bytes read: nothing can be
    /// answered, not even the unique id is known for sure.
    Header,
    /// A request of this unique id whose arguments do not fit its length.
    Arguments(u64),
}

/// Little-endian fields of a request, each read only within the bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.bytes.len() {
            return None;
        }
        let (taken, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(taken)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Option<u64> {
        let low = u64::from(self.u32()?);
        let high = u64::from(self.u32()?);
        Some(high << 32 | low)
    }

    /// A NUL-terminated name (without its NUL).
    fn name(&mut self) -> Option<&'a [u8]> {
        let end = self.bytes.iter().position(|&b| b == 0)?;
        let name = self.take(end)?;
        self.take(1)?;
        Some(name)
    }

    /// Skips `n` bytes of a fixed structure.
    fn skip(&mut self, n: usize) -> Option<()> {
        self.take(n).map(|_| ())
    }

    /// The bytes left, which must be none.
    fn end(&self) -> Option<()> {
        self.bytes.is_empty().then_some(())
    }
}

/// Parses one request as `read(2)` on `/dev/fuse` returned it.
///
/// # Errors
/// [`ParseError::Header`] when the header is short or its length is not `bytes.len()`;
/// [`ParseError::Arguments`] when the arguments do not fit (a short structure, a name without
/// its NUL, trailing bytes after names, a write whose size is not its data's).
pub fn parse(bytes: &[u8]) -> Result<(InHeader, Request<'_>), ParseError> {
    let mut c = Cursor { bytes };
    let header = (|| {
        let header = InHeader {
            len: c.u32()?,
            opcode: c.u32()?,
            unique: c.u64()?,
            nodeid: c.u64()?,
            uid: c.u32()?,
            gid: c.u32()?,
        };
        c.skip(8)?; // pid, total_extlen, padding
        Some(header)
    })()
    .ok_or(ParseError::Header)?;
    if header.len as usize != bytes.len() {
        return Err(ParseError::Header);
    }
    let request = arguments(header.opcode, &mut c).ok_or(ParseError::Arguments(header.unique))?;
    Ok((header, request))
}

/// The arguments of `opcode`.
fn arguments<'a>(opcode: u32, c: &mut Cursor<'a>) -> Option<Request<'a>> {
    use opcode::*;
    let request = match opcode {
        INIT => {
            let (major, minor, max_readahead, flags) = (c.u32()?, c.u32()?, c.u32()?, c.u32()?);
            // Newer versions append fields (flags2, unused words) that are not read.
            return Some(Request::Init { major, minor, max_readahead, flags });
        }
        LOOKUP => Request::Lookup(c.name()?),
        FORGET => {
            c.u64()?;
            Request::Forget
        }
        BATCH_FORGET => {
            let count = c.u32()? as usize;
            c.skip(4)?;
            c.skip(count.checked_mul(16)?)?;
            Request::BatchForget
        }
        GETATTR => {
            c.skip(16)?; // getattr_flags, dummy, fh
            Request::GetAttributes
        }
        SETATTR => {
            let valid = c.u32()?;
            c.skip(4 + 8)?; // padding, fh
            let size = c.u64()?;
            c.skip(8)?; // lock_owner
            let (atime, mtime) = (c.u64()?, c.u64()?);
            c.skip(8 + 12)?; // ctime, atimensec, mtimensec, ctimensec
            let mode = c.u32()?;
            c.skip(4)?;
            let (uid, gid) = (c.u32()?, c.u32()?);
            c.skip(4)?;
            Request::SetAttributes(SetAttributes { valid, size, atime, mtime, mode, uid, gid })
        }
        READLINK => Request::ReadLink,
        SYMLINK => Request::Symlink { name: c.name()?, target: c.name()? },
        MKNOD => {
            let mode = c.u32()?;
            c.skip(12)?; // rdev, umask, padding
            Request::MakeNode { mode, name: c.name()? }
        }
        MKDIR => {
            let mode = c.u32()?;
            c.skip(4)?; // umask
            Request::MakeDirectory { mode, name: c.name()? }
        }
        UNLINK => Request::Unlink(c.name()?),
        RMDIR => Request::RemoveDirectory(c.name()?),
        RENAME | RENAME2 => {
            let new_directory = c.u64()?;
            let flags = if opcode == RENAME2 {
                let flags = c.u32()?;
                c.skip(4)?;
                flags
            } else {
                0
            };
            Request::Rename { new_directory, flags, old: c.name()?, new: c.name()? }
        }
        LINK => Request::Link { old: c.u64()?, name: c.name()? },
        OPEN | OPENDIR => {
            c.skip(8)?; // flags, open_flags
            if opcode == OPEN { Request::Open } else { Request::OpenDirectory }
        }
        READ | READDIR | READDIRPLUS => {
            c.skip(8)?; // fh
            let offset = c.u64()?;
            let size = c.u32()?;
            c.skip(4 + 8 + 8)?; // read_flags, lock_owner, flags, padding
            match opcode {
                READ => Request::Read { offset, size },
                _ => Request::ReadDirectory { offset, size, plus: opcode == READDIRPLUS },
            }
        }
        WRITE => {
            c.skip(8)?; // fh
            let offset = c.u64()?;
            let size = c.u32()? as usize;
            c.skip(4 + 8 + 8)?; // write_flags, lock_owner, flags, padding
            let data = c.take(size)?;
            Request::Write { offset, data }
        }
        STATFS => Request::StatFs,
        RELEASE | RELEASEDIR => {
            c.skip(24)?; // fh, flags, release_flags, lock_owner
            if opcode == RELEASE { Request::Release } else { Request::ReleaseDirectory }
        }
        FSYNC | FSYNCDIR => {
            c.skip(16)?; // fh, fsync_flags, padding
            if opcode == FSYNC { Request::Fsync } else { Request::FsyncDirectory }
        }
        FLUSH => {
            c.skip(24)?; // fh, unused, padding, lock_owner
            Request::Flush
        }
        ACCESS => {
            c.skip(8)?; // mask, padding
            Request::Access
        }
        CREATE => {
            c.skip(4)?; // flags
            let mode = c.u32()?;
            c.skip(8)?; // umask, open_flags
            Request::Create { mode, name: c.name()? }
        }
        INTERRUPT => {
            c.u64()?;
            Request::Interrupt
        }
        DESTROY => Request::Destroy,
        // Arguments of unknown requests are not looked at: the answer is ENOSYS.
        other => return Some(Request::Unknown(other)),
    };
    c.end()?;
    Some(request)
}

/// A node's attributes in `fuse_attr`'s terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Attr {
    /// Inode number (what `stat` shows).
    pub ino: u64,
    /// Bytes.
    pub size: u64,
    /// 512-byte units held.
    pub blocks: u64,
    /// Last access, seconds.
    pub atime: u64,
    /// Last change of the data.
    pub mtime: u64,
    /// Last change of the inode.
    pub ctime: u64,
    /// Type and permission bits.
    pub mode: u32,
    /// Hard links.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

/// A reply being encoded: the header, then fields; [`Reply::finish`] writes the length.
pub struct Reply {
    bytes: Vec<u8>,
}

impl Reply {
    /// A successful reply to request `unique`, into `bytes` (cleared; its capacity is kept).
    pub fn ok(unique: u64, mut bytes: Vec<u8>) -> Reply {
        bytes.clear();
        bytes.extend_from_slice(&[0; 8]);
        bytes.extend_from_slice(&unique.to_le_bytes());
        Reply { bytes }
    }

    /// A failed reply: `errno` (positive) and nothing else.
    pub fn error(unique: u64, errno: i32, bytes: Vec<u8>) -> Vec<u8> {
        let mut reply = Reply::ok(unique, bytes);
        reply.bytes[4..8].copy_from_slice(&(-errno).to_le_bytes());
        reply.finish()
    }

    /// Appends a `u32`.
    pub fn u32(&mut self, value: u32) -> &mut Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// Appends a `u64`.
    pub fn u64(&mut self, value: u64) -> &mut Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// Appends bytes.
    pub fn bytes(&mut self, bytes: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(bytes);
        self
    }

    /// Bytes so far, header included.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether only the header is there (never: a reply has its header).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Appends a `fuse_attr` (88 bytes).
    pub fn attr(&mut self, a: &Attr) -> &mut Self {
        self.u64(a.ino).u64(a.size).u64(a.blocks).u64(a.atime).u64(a.mtime).u64(a.ctime);
        self.u32(0).u32(0).u32(0); // nanoseconds: ext2 keeps seconds
        self.u32(a.mode).u32(a.nlink).u32(a.uid).u32(a.gid).u32(0).u32(4096).u32(0) // rdev, blksize, flags
    }

    /// Appends a `fuse_entry_out` (128 bytes): the node, its generation, how long Linux may
    /// cache the name and the attributes (seconds), and the attributes.
    pub fn entry(&mut self, nodeid: u64, generation: u64, valid: u64, a: &Attr) -> &mut Self {
        self.u64(nodeid).u64(generation).u64(valid).u64(valid).u32(0).u32(0).attr(a)
    }

    /// Appends a `fuse_attr_out` (104 bytes).
    pub fn attr_out(&mut self, valid: u64, a: &Attr) -> &mut Self {
        self.u64(valid).u32(0).u32(0).attr(a)
    }

    /// The bytes, with the length in the header.
    pub fn finish(mut self) -> Vec<u8> {
        let len = self.bytes.len() as u32;
        self.bytes[0..4].copy_from_slice(&len.to_le_bytes());
        self.bytes
    }
}

/// The `d_type` of a directory entry for a mode's type bits.
pub fn dirent_type(mode: u32) -> u32 {
    (mode >> 12) & 0xf
}

/// Appends a `fuse_dirent` (for READDIRPLUS a `fuse_direntplus`, with `entry`'s node,
/// generation and attributes first) to `reply` if it fits within `limit` bytes of body; whether
/// it did.
pub fn push_dirent(
    reply: &mut Reply,
    limit: usize,
    entry: Option<(u64, u64, &Attr)>,
    ino: u64,
    cookie: u64,
    kind: u32,
    name: &[u8],
) -> bool {
    let plus = if entry.is_some() { 128 } else { 0 };
    let size = plus + (24 + name.len()).next_multiple_of(8);
    if reply.len() - OUT_HEADER + size > limit {
        return false;
    }
    if let Some((nodeid, generation, attr)) = entry {
        reply.entry(nodeid, generation, 1, attr);
    }
    reply.u64(ino).u64(cookie).u32(name.len() as u32).u32(kind).bytes(name);
    let padding = (24 + name.len()).next_multiple_of(8) - (24 + name.len());
    reply.bytes(&[0; 8][..padding]);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn request(opcode: u32, arguments: &[u8]) -> Vec<u8> {
        let mut bytes = vec![0u8; IN_HEADER];
        bytes.extend_from_slice(arguments);
        let len = bytes.len() as u32;
        bytes[0..4].copy_from_slice(&len.to_le_bytes());
        bytes[4..8].copy_from_slice(&opcode.to_le_bytes());
        bytes[8..16].copy_from_slice(&7u64.to_le_bytes());
        bytes[16..24].copy_from_slice(&ROOT_ID.to_le_bytes());
        bytes
    }

    #[test]
    fn requests_parse_and_bad_lengths_are_refused() {
        let lookup = request(opcode::LOOKUP, b"name\0");
        assert_eq!(parse(&lookup).unwrap().1, Request::Lookup(b"name"));
        assert_eq!(parse(&request(opcode::LOOKUP, b"name")), Err(ParseError::Arguments(7)), "no NUL");
        assert_eq!(parse(&request(opcode::LOOKUP, b"a\0b")), Err(ParseError::Arguments(7)), "trailing bytes");
        assert_eq!(parse(&lookup[..lookup.len() - 1]), Err(ParseError::Header), "length is not the bytes'");
        assert_eq!(parse(&lookup[..20]), Err(ParseError::Header));
        let mut write = vec![0u8; 40];
        write[8..16].copy_from_slice(&4096u64.to_le_bytes());
        write[16..20].copy_from_slice(&3u32.to_le_bytes());
        write.extend_from_slice(b"abc");
        assert_eq!(parse(&request(opcode::WRITE, &write)).unwrap().1, Request::Write { offset: 4096, data: b"abc" });
        write[16..20].copy_from_slice(&4u32.to_le_bytes());
        assert!(parse(&request(opcode::WRITE, &write)).is_err(), "a size over the data");
        write[16..20].copy_from_slice(&2u32.to_le_bytes());
        assert!(parse(&request(opcode::WRITE, &write)).is_err(), "a size under the data");
        let mut forget = vec![0u8; 8];
        forget[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse(&request(opcode::BATCH_FORGET, &forget)).is_err(), "a count over the bytes");
        let rename = [&[5u8, 0, 0, 0, 0, 0, 0, 0][..], b"a\0b\0"].concat();
        assert_eq!(
            parse(&request(opcode::RENAME, &rename)).unwrap().1,
            Request::Rename { new_directory: 5, flags: 0, old: b"a", new: b"b" }
        );
        assert_eq!(parse(&request(99, b"whatever")).unwrap().1, Request::Unknown(99));
    }

    #[test]
    fn replies_carry_their_length_and_dirents_are_aligned() {
        let reply = Reply::error(9, errno::ENOENT, Vec::new());
        assert_eq!(reply.len(), OUT_HEADER);
        assert_eq!(i32::from_le_bytes(reply[4..8].try_into().unwrap()), -2);
        let mut entry = Reply::ok(9, Vec::new());
        entry.entry(2, 1, 1, &Attr::default());
        assert_eq!(entry.finish().len(), OUT_HEADER + 128);
        let mut list = Reply::ok(9, Vec::new());
        assert!(push_dirent(&mut list, 64, None, 2, 1, 4, b"abc"));
        assert_eq!(list.len(), OUT_HEADER + 32);
        assert!(!push_dirent(&mut list, 64, None, 2, 1, 4, b"a-longer-name-than-fits"));
        assert!(push_dirent(&mut list, 64, None, 2, 1, 4, b"a"));
        assert_eq!(list.len(), OUT_HEADER + 64);
    }
}
