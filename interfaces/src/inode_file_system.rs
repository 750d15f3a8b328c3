//! `InodeFileSystem`: a file system by node, as a file server (NFS) or a kernel's VFS (FUSE)
//! uses one — every call names a node by its inode number and generation, never by path, so a
//! client that keeps a node's identity (an NFS file handle) reaches it again after a restart of
//! either side, and a node removed and its inode reused answers [`FsError::Stale`].
//!
//! Names are bytes, as on the disk (ext2 does not require UTF-8); a name is one path component,
//! never `.`, `..`, empty or containing `/` (such a name is `FsError::Invalid`, so a client
//! cannot leave the tree by a name).
//!
//! Times are seconds since 1970. Calls that change a directory return the attributes a client
//! needs afterwards (the new node's, or the changed file's), so that a server answers with one
//! call per request.

use alloc::vec::Vec;
use domos_sdk::{Memory, Portal, Wire, interface};

pub use crate::file_system::{FileKind, Filled, FsError, OpenFile, Usage};

/// A node's identity: its inode number and the generation the inode had when the node was
/// made. Valid across restarts until the node is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Wire)]
pub struct Node {
    /// The inode number.
    pub inode: u32,
    /// The inode's generation.
    pub generation: u32,
}

/// A node's attributes.
#[derive(Debug, Clone, PartialEq, Eq, Wire)]
pub struct Attributes {
    /// Which node.
    pub node: Node,
    /// What it is.
    pub kind: FileKind,
    /// Type and permission bits, as `stat(2)`.
    pub mode: u16,
    /// Hard links.
    pub links: u16,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes (of a symlink: its target's length).
    pub size: u64,
    /// Space held, in 512-byte units.
    pub blocks: u64,
    /// Last access.
    pub atime: u32,
    /// Last change of the data.
    pub mtime: u32,
    /// Last change of the inode.
    pub ctime: u32,
}

/// A time to set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Wire)]
pub enum SetTime {
    /// The file system's clock now.
    Now,
    /// This time, in seconds since 1970.
    To(u32),
}

/// Attributes to change; `None` leaves one alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Wire)]
pub struct Changes {
    /// Permission bits (the low 12 bits of the mode; the type cannot change).
    pub permissions: Option<u16>,
    /// Owner.
    pub uid: Option<u32>,
    /// Group.
    pub gid: Option<u32>,
    /// Size (of a regular file only; growing leaves a hole).
    pub size: Option<u64>,
    /// Last access.
    pub atime: Option<SetTime>,
    /// Last change of the data.
    pub mtime: Option<SetTime>,
}

/// What `read` returns.
#[derive(Debug, Clone, PartialEq, Eq, Wire)]
pub struct Read {
    /// The bytes (fewer than asked at the end of the file).
    pub data: Vec<u8>,
    /// Whether the read reached the end of the file.
    pub end: bool,
}

/// One directory entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Wire)]
pub struct DirectoryEntry {
    /// Its name (`.` and `..` included).
    pub name: Vec<u8>,
    /// The inode it names.
    pub inode: u32,
    /// What it is.
    pub kind: FileKind,
    /// Where the listing goes on after this entry: the `cookie` of the next `read_directory`.
    pub cookie: u64,
    /// The node's attributes, when the listing was asked `with_attributes`.
    pub attributes: Option<Attributes>,
}

/// A part of a directory's listing.
#[derive(Debug, Clone, PartialEq, Eq, Wire)]
pub struct Listing {
    /// The entries, in the directory's order.
    pub entries: Vec<DirectoryEntry>,
    /// Whether the last entry of the directory is among them.
    pub end: bool,
}

/// A file system by node.
///
/// Version 1.1 added `read_into` and `open`, 1.2 the errors `TooLarge` and `TooManyLinks`.
#[interface(version = "1.2")]
pub trait InodeFileSystem {
    /// The root directory.
    #[restartable]
    fn root(&self) -> Result<Node, FsError>;
    /// The attributes of `node`.
    #[restartable]
    fn attributes(&self, node: Node) -> Result<Attributes, FsError>;
    /// Changes attributes of `node`; its attributes afterwards.
    fn set_attributes(&self, node: Node, changes: Changes) -> Result<Attributes, FsError>;
    /// The node `name` in `directory` (`.` and `..` included, as the directory lists them).
    #[restartable]
    fn lookup(&self, directory: Node, name: Vec<u8>) -> Result<Attributes, FsError>;
    /// Up to `len` bytes of file `node` from `offset`.
    #[restartable]
    fn read(&self, node: Node, offset: u64, len: u32) -> Result<Read, FsError>;
    /// Writes `data` into file `node` at `offset`, growing it as needed; its attributes
    /// afterwards. The data is in the cache, on the disk after `sync`.
    fn write(&self, node: Node, offset: u64, data: &[u8]) -> Result<Attributes, FsError>;
    /// Creates the empty regular file `name` in `directory` with permission bits `mode`
    /// (`Exists` if the name is taken).
    fn create(&self, directory: Node, name: Vec<u8>, mode: u16) -> Result<Attributes, FsError>;
    /// Creates directory `name` in `directory` with permission bits `mode`.
    fn mkdir(&self, directory: Node, name: Vec<u8>, mode: u16) -> Result<Attributes, FsError>;
    /// Creates the symbolic link `name` in `directory`, pointing at `target`.
    fn symlink(&self, directory: Node, name: Vec<u8>, target: Vec<u8>) -> Result<Attributes, FsError>;
    /// Where the symbolic link `node` points.
    #[restartable]
    fn readlink(&self, node: Node) -> Result<Vec<u8>, FsError>;
    /// Gives `node` (not a directory) the further name `name` in `directory`; its attributes
    /// afterwards.
    fn link(&self, node: Node, directory: Node, name: Vec<u8>) -> Result<Attributes, FsError>;
    /// Removes the name `name` (not a directory's) from `directory`.
    fn remove(&self, directory: Node, name: Vec<u8>) -> Result<(), FsError>;
    /// Removes the empty directory `name` from `directory`.
    fn rmdir(&self, directory: Node, name: Vec<u8>) -> Result<(), FsError>;
    /// Renames `from_name` in `from` to `to_name` in `to`, replacing a file (or an empty
    /// directory, for a directory) there.
    fn rename(&self, from: Node, from_name: Vec<u8>, to: Node, to_name: Vec<u8>) -> Result<(), FsError>;
    /// Entries of `directory` from `cookie` (0: the first), at most `max` of them, with each
    /// node's attributes when `with_attributes`. A cookie the directory no longer has (it
    /// changed) is `Stale`.
    #[restartable]
    fn read_directory(&self, directory: Node, cookie: u64, max: u32, with_attributes: bool)
    -> Result<Listing, FsError>;
    /// Space and inodes.
    #[restartable]
    fn usage(&self) -> Result<Usage, FsError>;
    /// Writes everything to the disk.
    fn sync(&self) -> Result<(), FsError>;
    /// Up to `memory`'s length in bytes of file `node` from `offset` into `memory` (from its
    /// offset 0), copied from the cache's memory with no message; the file system keeps the
    /// node's block map between calls, so a server reading a file in pieces walks it once.
    fn read_into(&self, node: Node, offset: u64, memory: Memory) -> Result<Filled, FsError>;
    /// The regular file `node` opened: reads and writes by offset through a portal of its own.
    fn open(&self, node: Node) -> Result<Portal<dyn OpenFile>, FsError>;
}
