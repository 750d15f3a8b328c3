//! `InodeFileSystem`: the same mounted file system by node, for a file server (NFS) or FUSE.
//!
//! Every call first checks each node it is given: the inode number must name a file in use
//! (not out of range, not reserved, not free) whose generation is the node's, else the call is
//! `FsError::Stale` — so a forged handle, or one whose file was removed and its inode reused,
//! reaches nothing. Names of new entries are checked here, before the crate sees them, so that
//! an empty name, `.`, `..` or one with `/` or NUL is `Invalid` whatever the operation.
//!
//! A directory cookie is the byte position, in the directory's file, of the record where the
//! listing goes on (`domos_ext2::FileSystem::readdir_from`); 0 is the start. It stays valid
//! while that record does (adding and removing other entries never moves one); a cookie that
//! no longer starts a record, or lies past the end, is `Stale`.

use alloc::vec::Vec;
use domos_ext2::{Error, FileType, Metadata};
use domos_interfaces::file_system::{Filled, FsError, OpenFile, Usage};
use domos_interfaces::inode_file_system::{
    Attributes, Changes, DirectoryEntry, InodeFileSystem, Listing, Node, Read, SetTime,
};
use domos_sdk::{Memory, Portal};

use crate::{Ext2, Ext2Service, kind};

/// The most bytes of entries one `read_directory` reply carries, so that it fits the default
/// 64 KiB message of the caller (a service cannot know its caller's `max_message`; a reply
/// larger than the caller's buffer fails the call) with room for the encoding.
const MAX_LISTING_BYTES: usize = 32 * 1024;

/// The most entries one `read_directory` gathers before it counts their bytes: as many as the
/// smallest entries (one-byte names, no attributes) fill [`MAX_LISTING_BYTES`] with.
const MAX_LISTING_ENTRIES: usize = MAX_LISTING_BYTES / ENTRY_BYTES;

/// An upper bound of an encoded `DirectoryEntry`'s bytes besides its name, without attributes
/// (length prefix, inode, kind, cookie, the option's tag).
const ENTRY_BYTES: usize = 32;

/// An upper bound of the encoded `Attributes`' bytes.
const ATTRIBUTES_BYTES: usize = 64;

/// The longest name ext2 stores.
const NAME_MAX: usize = 255;

/// `name` if it may name a new entry (or an entry to remove or rename): one path component,
/// not `.` or `..`, at most 255 bytes.
fn entry_name(name: &[u8]) -> Result<&[u8], FsError> {
    let why = match name {
        [] => "an empty name",
        b"." | b".." => "'.' and '..' are not names of entries to change",
        _ if name.contains(&b'/') || name.contains(&0) => "a name may not contain '/' or NUL",
        _ if name.len() > NAME_MAX => return Err(FsError::NameTooLong),
        _ => return Ok(name),
    };
    Err(FsError::Invalid(why.into()))
}

/// `name` if it may be looked up: as [`entry_name`], but `.` and `..` too.
fn lookup_name(name: &[u8]) -> Result<&[u8], FsError> {
    match name {
        b"." | b".." => Ok(name),
        _ => entry_name(name),
    }
}

/// The metadata of the inode `node` names, or `Stale`.
fn checked(fs: &mut Ext2, node: Node) -> domos_ext2::Result<Metadata> {
    match fs.find_inode(node.inode)? {
        Some(metadata) if metadata.generation == node.generation => Ok(metadata),
        _ => Err(Error::Stale),
    }
}

/// The interface's attributes for the crate's metadata.
fn attributes(metadata: &Metadata) -> Attributes {
    Attributes {
        node: Node { inode: metadata.inode, generation: metadata.generation },
        kind: kind(metadata.file_type),
        mode: metadata.mode,
        links: metadata.links,
        uid: metadata.uid,
        gid: metadata.gid,
        size: metadata.size,
        blocks: metadata.blocks,
        atime: metadata.atime,
        mtime: metadata.mtime,
        ctime: metadata.ctime,
    }
}

/// The attributes of inode `number` (one a directory entry names).
fn attributes_of(fs: &mut Ext2, number: u32) -> domos_ext2::Result<Attributes> {
    fs.stat(number).map(|metadata| attributes(&metadata))
}

impl InodeFileSystem for Ext2Service {
    fn root(&self) -> Result<Node, FsError> {
        let metadata = self.inspect(|fs| fs.stat(domos_ext2::ROOT_INODE))?;
        Ok(Node { inode: metadata.inode, generation: metadata.generation })
    }

    fn attributes(&self, node: Node) -> Result<Attributes, FsError> {
        self.inspect(|fs| checked(fs, node).map(|metadata| attributes(&metadata)))
    }

    fn set_attributes(&self, node: Node, changes: Changes) -> Result<Attributes, FsError> {
        self.with_now(|fs, now| {
            let metadata = checked(fs, node)?;
            if changes == Changes::default() {
                return Ok(attributes(&metadata));
            }
            // The size first, as Linux's ext2_setattr: a regular file's only, and only when it
            // changes (truncate stamps the modification and change times).
            if let Some(size) = changes.size {
                match metadata.file_type {
                    FileType::Regular if size != metadata.size => fs.truncate(node.inode, size)?,
                    FileType::Regular => {}
                    FileType::Directory => return Err(Error::IsDirectory),
                    _ => return Err(Error::InvalidArgument("only a regular file has a size to set")),
                }
            }
            let time = |set: Option<SetTime>| {
                set.map(|set| match set {
                    SetTime::Now => now,
                    SetTime::To(seconds) => seconds,
                })
            };
            // Any change of attributes stamps the change time (the crate does), as Linux's does.
            let attributes = domos_ext2::Attributes {
                permissions: changes.permissions,
                uid: changes.uid,
                gid: changes.gid,
                atime: time(changes.atime),
                mtime: time(changes.mtime),
            };
            fs.set_attributes(node.inode, &attributes)?;
            attributes_of(fs, node.inode)
        })
    }

    fn lookup(&self, directory: Node, name: Vec<u8>) -> Result<Attributes, FsError> {
        let name = lookup_name(&name)?;
        self.inspect(|fs| {
            checked(fs, directory)?;
            let inode = fs.lookup_in(directory.inode, name)?;
            attributes_of(fs, inode)
        })
    }

    fn read(&self, node: Node, offset: u64, len: u32) -> Result<Read, FsError> {
        // Through the kept block map (module `open`): a server reading a file in pieces walks
        // its map once.
        let (data, size) = self.read_node(node, offset, len)?;
        let end = offset.saturating_add(data.len() as u64) >= size;
        Ok(Read { data, end })
    }

    fn write(&self, node: Node, offset: u64, data: &[u8]) -> Result<Attributes, FsError> {
        self.with(|fs| {
            checked(fs, node)?;
            fs.write(node.inode, offset, data)?;
            attributes_of(fs, node.inode)
        })
    }

    fn create(&self, directory: Node, name: Vec<u8>, mode: u16) -> Result<Attributes, FsError> {
        let name = entry_name(&name)?;
        self.with(|fs| {
            checked(fs, directory)?;
            let inode = fs.create(directory.inode, name, mode & 0o7777)?;
            attributes_of(fs, inode)
        })
    }

    fn mkdir(&self, directory: Node, name: Vec<u8>, mode: u16) -> Result<Attributes, FsError> {
        let name = entry_name(&name)?;
        self.with(|fs| {
            checked(fs, directory)?;
            let inode = fs.mkdir(directory.inode, name, mode & 0o7777)?;
            attributes_of(fs, inode)
        })
    }

    fn symlink(&self, directory: Node, name: Vec<u8>, target: Vec<u8>) -> Result<Attributes, FsError> {
        let name = entry_name(&name)?;
        self.with(|fs| {
            checked(fs, directory)?;
            let inode = fs.symlink(directory.inode, name, &target)?;
            attributes_of(fs, inode)
        })
    }

    fn readlink(&self, node: Node) -> Result<Vec<u8>, FsError> {
        self.with(|fs| {
            checked(fs, node)?;
            fs.readlink(node.inode)
        })
    }

    fn link(&self, node: Node, directory: Node, name: Vec<u8>) -> Result<Attributes, FsError> {
        let name = entry_name(&name)?;
        self.with(|fs| {
            checked(fs, node)?;
            checked(fs, directory)?;
            fs.link(node.inode, directory.inode, name)?;
            attributes_of(fs, node.inode)
        })
    }

    fn remove(&self, directory: Node, name: Vec<u8>) -> Result<(), FsError> {
        let name = entry_name(&name)?;
        self.with(|fs| {
            checked(fs, directory)?;
            fs.unlink(directory.inode, name)
        })
    }

    fn rmdir(&self, directory: Node, name: Vec<u8>) -> Result<(), FsError> {
        let name = entry_name(&name)?;
        self.with(|fs| {
            checked(fs, directory)?;
            fs.rmdir(directory.inode, name)
        })
    }

    fn rename(&self, from: Node, from_name: Vec<u8>, to: Node, to_name: Vec<u8>) -> Result<(), FsError> {
        let (from_name, to_name) = (entry_name(&from_name)?, entry_name(&to_name)?);
        self.with(|fs| {
            checked(fs, from)?;
            checked(fs, to)?;
            fs.rename(from.inode, from_name, to.inode, to_name)
        })
    }

    fn read_directory(
        &self,
        directory: Node,
        cookie: u64,
        max: u32,
        with_attributes: bool,
    ) -> Result<Listing, FsError> {
        self.with(|fs| {
            checked(fs, directory)?;
            let max = usize::try_from(max).unwrap_or(usize::MAX).min(MAX_LISTING_ENTRIES);
            let page = fs.readdir_from(directory.inode, cookie, max)?;
            let mut end = page.end;
            let mut bytes = 0;
            let mut entries = Vec::with_capacity(page.entries.len());
            for placed in page.entries {
                let entry = placed.entry;
                bytes += ENTRY_BYTES + entry.name.len() + if with_attributes { ATTRIBUTES_BYTES } else { 0 };
                if bytes > MAX_LISTING_BYTES {
                    end = false;
                    break;
                }
                // Without the filetype feature the entry does not say; the inode does.
                let (file_type, attributes) = match (entry.file_type, with_attributes) {
                    (_, true) => {
                        let metadata = fs.stat(entry.inode)?;
                        (metadata.file_type, Some(attributes(&metadata)))
                    }
                    (FileType::Unknown, false) => (fs.stat(entry.inode)?.file_type, None),
                    (known, false) => (known, None),
                };
                entries.push(DirectoryEntry {
                    name: entry.name,
                    inode: entry.inode,
                    kind: kind(file_type),
                    cookie: placed.next,
                    attributes,
                });
            }
            Ok(Listing { entries, end })
        })
    }

    fn usage(&self) -> Result<Usage, FsError> {
        self.usage_now()
    }

    fn sync(&self) -> Result<(), FsError> {
        self.sync_now()
    }

    fn read_into(&self, node: Node, offset: u64, memory: Memory) -> Result<Filled, FsError> {
        self.read_node_into(node, offset, &memory)
    }

    fn open(&self, node: Node) -> Result<Portal<dyn OpenFile>, FsError> {
        self.open_node(node)
    }
}
