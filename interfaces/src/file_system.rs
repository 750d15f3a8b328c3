//! `FileSystem`: a file system by path, as a shell or a file-transfer tool uses one.

use alloc::string::String;
use alloc::vec::Vec;
use domos_sdk::{CallError, Memory, Portal, Wire, interface};

/// What a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Wire)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// Anything else (a device node, a pipe, a socket).
    Other,
}

/// A file's attributes.
#[derive(Debug, Clone, PartialEq, Eq, Wire)]
pub struct Stat {
    /// Inode number.
    pub inode: u32,
    /// What it is.
    pub kind: FileKind,
    /// Type and permission bits, as `stat(2)`.
    pub mode: u16,
    /// Size in bytes.
    pub size: u64,
    /// Hard links.
    pub links: u16,
    /// Owner and group.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Last modification, seconds since 1970.
    pub mtime: u32,
    /// Space held, in 512-byte units.
    pub blocks: u64,
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq, Wire)]
pub struct Entry {
    /// Its name.
    pub name: String,
    /// The inode it names.
    pub inode: u32,
    /// What it is.
    pub kind: FileKind,
}

/// Space and inodes, as `df` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Wire)]
pub struct Usage {
    /// Bytes per block.
    pub block_size: u32,
    /// Blocks in all.
    pub blocks: u64,
    /// Blocks free.
    pub free_blocks: u64,
    /// Inodes in all.
    pub inodes: u64,
    /// Inodes free.
    pub free_inodes: u64,
}

/// Why an operation failed, in the words of `errno`.
#[derive(Debug, Clone, PartialEq, Eq, Wire)]
pub enum FsError {
    /// No such file or directory.
    NotFound,
    /// The name exists already.
    Exists,
    /// A path component is not a directory.
    NotDirectory,
    /// The operation needs a file, not a directory.
    IsDirectory,
    /// The directory is not empty.
    NotEmpty,
    /// No space (or no inode) left.
    NoSpace,
    /// A name longer than 255 bytes.
    NameTooLong,
    /// The file system is mounted read-only (a feature it does not know, or damage).
    ReadOnly,
    /// The disk's structures are damaged; what is wrong.
    Corrupt(String),
    /// A feature this file system does not support.
    Unsupported(String),
    /// A bad argument; which.
    Invalid(String),
    /// The disk failed.
    Io,
    /// The portal call failed.
    Call(CallError),
    /// The node is gone: removed, its inode perhaps reused (`InodeFileSystem`), or a directory
    /// cookie from before the directory changed.
    Stale,
    /// The file would grow past the largest size the file system allows (`EFBIG`).
    TooLarge,
    /// The node has as many hard links as the file system allows (`EMLINK`).
    TooManyLinks,
}

impl From<CallError> for FsError {
    fn from(e: CallError) -> Self {
        FsError::Call(e)
    }
}

/// What `read_into` put into the memory object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Wire)]
pub struct Filled {
    /// Bytes read (fewer than asked at the end of the file).
    pub bytes: u64,
    /// Whether all of them lie in holes of the file (so are zeros).
    pub hole: bool,
}

/// An ext2 file system (or any other) by path. Paths are absolute (`/dir/file`).
///
/// Version 1.1 added `read_into`, 1.2 `open`, 1.3 the errors `TooLarge` and `TooManyLinks`.
#[interface(version = "1.3")]
pub trait FileSystem {
    /// The attributes of `path` (not following a final symlink).
    #[restartable]
    fn stat(&self, path: String) -> Result<Stat, FsError>;
    /// The entries of directory `path`, `.` and `..` included.
    #[restartable]
    fn list(&self, path: String) -> Result<Vec<Entry>, FsError>;
    /// Up to `len` bytes of file `path` from `offset` (fewer at its end).
    #[restartable]
    fn read(&self, path: String, offset: u64, len: u32) -> Result<Vec<u8>, FsError>;
    /// Up to `memory`'s length in bytes of file `path` from `offset` into `memory` (from its
    /// offset 0), without a copy through a message: a large read costs no message and no
    /// heap of either side.
    fn read_into(&self, path: String, offset: u64, memory: Memory) -> Result<Filled, FsError>;
    /// Writes `data` into file `path` at `offset`, growing it as needed.
    fn write(&self, path: String, offset: u64, data: &[u8]) -> Result<(), FsError>;
    /// Creates the empty regular file `path` (mode 0644).
    fn create(&self, path: String) -> Result<(), FsError>;
    /// Sets the size of file `path`.
    fn truncate(&self, path: String, size: u64) -> Result<(), FsError>;
    /// Creates directory `path` (mode 0755).
    fn mkdir(&self, path: String) -> Result<(), FsError>;
    /// Removes file or symlink `path`, or the empty directory `path`.
    fn remove(&self, path: String) -> Result<(), FsError>;
    /// Renames `from` to `to`, replacing a file (or an empty directory, for a directory) there.
    fn rename(&self, from: String, to: String) -> Result<(), FsError>;
    /// Creates the symbolic link `path` pointing at `target`.
    fn symlink(&self, path: String, target: String) -> Result<(), FsError>;
    /// Where the symbolic link `path` points.
    #[restartable]
    fn readlink(&self, path: String) -> Result<String, FsError>;
    /// Space and inodes.
    #[restartable]
    fn usage(&self) -> Result<Usage, FsError>;
    /// Writes everything to the disk.
    fn sync(&self) -> Result<(), FsError>;
    /// Opens the regular file `path`: a portal to the open file, which reads and writes it by
    /// offset with no path lookup per call (the path is looked up once, here). The open file
    /// names the file's inode, not its path: renaming the file keeps it; removing it makes its
    /// calls `Stale` once the inode is reused or freed.
    #[restartable]
    fn open(&self, path: String) -> Result<Portal<dyn OpenFile>, FsError>;
}

/// An open regular file (JX's file as a capability): reads and writes by offset, its block map
/// kept by the file system between calls.
///
/// Version 1.1 added `attach` and `read_attached`, 1.2 the errors `TooLarge` and `TooManyLinks`.
#[interface(version = "1.2")]
pub trait OpenFile {
    /// The file's size in bytes.
    #[restartable]
    fn size(&self) -> Result<u64, FsError>;
    /// Up to `len` bytes from `offset` (fewer at the end of the file).
    fn read(&self, offset: u64, len: u32) -> Result<Vec<u8>, FsError>;
    /// Up to `memory`'s length in bytes from `offset` into `memory` (from its offset 0), each
    /// cached block copied from the cache's memory into `memory` once, with no message.
    fn read_into(&self, offset: u64, memory: Memory) -> Result<Filled, FsError>;
    /// Writes `data` at `offset`, growing the file as needed.
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), FsError>;
    /// Keeps `memory` (writable) as this open file's buffer for `read_attached`, in place of
    /// one attached before: a reader of many records hands its buffer over once, not per call.
    fn attach(&self, memory: Memory) -> Result<(), FsError>;
    /// Up to `len` bytes (at most the attached buffer's length) from `offset` into the attached
    /// buffer (from its offset 0), as `read_into` does; `Invalid` before `attach`.
    #[restartable]
    fn read_attached(&self, offset: u64, len: u32) -> Result<Filled, FsError>;
}
