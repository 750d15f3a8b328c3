//! An ext2 file system for Domos, written from the ext2 on-disk format (revision 1, 1 KiB to
//! 4 KiB blocks).
//!
//! The crate is the on-disk half of a storage service: it turns a [`BlockDevice`] (a byte
//! addressed disk, later a buffer cache reached through a portal) into files and directories.
//! It is `no_std` with `alloc`, has no dependencies and no `unsafe`, so it can run inside a
//! WebAssembly component.
//!
//! - [`mkfs`] makes a file system that Linux's `e2fsck` accepts as clean.
//! - [`FileSystem::mount`] checks the superblock and the group descriptors, counts the mount in
//!   the superblock as Linux does (and says what Linux would warn of), then offers lookup,
//!   stat, read, extents (where a file's bytes lie), write, truncate, create, mkdir, unlink,
//!   rmdir, rename, link, symlink, readlink,
//!   readdir (whole, or a page from a position that stays valid while the entry there does),
//!   statfs and sync, by inode number (like an NFS server) or by path;
//!   [`FileSystem::find_inode`] tells whether a number a client kept still names a file.
//!
//! Every structure read from the disk is checked before it is used: a corrupt superblock, group
//! descriptor, inode, directory entry or block pointer gives [`Error::Corrupt`] naming what is
//! wrong, never a panic, and every walk over on-disk data is bounded by sizes checked at mount.
//!
//! What is left out: hashed directory indexes (an indexed directory is read and written as a
//! linear one, and loses its index flag when changed), extended attributes (an attribute block is
//! released with its inode but never read), journalling, extents and the other ext4 features,
//! which [`FileSystem::mount`] refuses (incompatible) or mounts read-only (read-only compatible).
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

extern crate alloc;
#[cfg(test)]
extern crate std;

mod device;
mod dir;
mod disk;
mod fs;
mod mkfs;

use alloc::string::String;
use core::fmt;

pub use device::{BlockDevice, IoError, MemoryDevice};
pub use dir::{DirEntry, DirectoryPage, PlacedEntry};
pub use fs::{Attributes, Extent, FileSystem, FileType, InodeNumber, Metadata, ROOT_INODE, StatFs};
pub use mkfs::{MkfsOptions, mkfs};

/// Why a file-system operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// No directory entry has that name.
    NotFound,
    /// A directory entry with that name already exists.
    Exists,
    /// A directory was needed (a path component, the parent of a new entry).
    NotDirectory,
    /// The operation does not apply to a directory (read, write, unlink).
    IsDirectory,
    /// The directory to remove or replace still has entries.
    NotEmpty,
    /// No free block or inode is left.
    NoSpace,
    /// A name is longer than 255 bytes, or a symbolic link's target longer than a block.
    NameTooLong,
    /// The file system is mounted read-only.
    ReadOnly,
    /// The file would grow past what its block map (or the i_blocks field) can describe.
    FileTooLarge,
    /// The inode already has the most links ext2 allows (32,000).
    TooManyLinks,
    /// An argument is not acceptable (a name with `/`, a directory moved into itself, …).
    InvalidArgument(&'static str),
    /// An on-disk structure is inconsistent; the text names the structure and the fault.
    Corrupt(String),
    /// The file system uses a feature this crate does not implement.
    Unsupported(String),
    /// The block device failed.
    Io(IoError),
    /// What the caller names is no longer there: an inode number that names no file (out of
    /// range, reserved or free) or a directory position that is no longer an entry's start.
    Stale,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotFound => f.write_str("no such file or directory"),
            Error::Exists => f.write_str("file exists"),
            Error::NotDirectory => f.write_str("not a directory"),
            Error::IsDirectory => f.write_str("is a directory"),
            Error::NotEmpty => f.write_str("directory not empty"),
            Error::NoSpace => f.write_str("no space left on device"),
            Error::NameTooLong => f.write_str("file name too long"),
            Error::ReadOnly => f.write_str("read-only file system"),
            Error::FileTooLarge => f.write_str("file too large"),
            Error::TooManyLinks => f.write_str("too many links"),
            Error::InvalidArgument(why) => write!(f, "invalid argument: {why}"),
            Error::Corrupt(what) => write!(f, "corrupt file system: {what}"),
            Error::Unsupported(what) => write!(f, "unsupported: {what}"),
            Error::Io(error) => write!(f, "device error: {error}"),
            Error::Stale => f.write_str("stale file handle"),
        }
    }
}

impl core::error::Error for Error {}

impl From<IoError> for Error {
    fn from(error: IoError) -> Self {
        Error::Io(error)
    }
}

/// The result of a file-system operation.
pub type Result<T> = core::result::Result<T, Error>;

#[cfg(test)]
mod tests;
