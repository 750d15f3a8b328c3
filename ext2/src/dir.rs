//! Directories: lookup by name and path, readdir, and every operation that adds or removes a
//! name (create, mkdir, symlink, link, unlink, rmdir, rename), plus readlink.
//!
//! A directory is a sequence of blocks, each a chain of entries whose `rec_len`s add up to the
//! block size exactly. Every block is checked as a whole before any entry of it is used, and a
//! walk covers at most `i_size / block_size` blocks (a hole in a directory is corruption).

use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

use crate::device::BlockDevice;
use crate::disk::{self, RawDirent, RawInode, ino};
use crate::fs::{FileSystem, FileType, InodeNumber, ROOT_INODE, corrupt};
use crate::{Error, Result};

/// One entry of a directory, as [`FileSystem::readdir`] returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The inode the entry names.
    pub inode: InodeNumber,
    /// The name (any bytes but `/` and NUL; not necessarily UTF-8).
    pub name: Vec<u8>,
    /// The kind of file, from the entry (or [`FileType::Unknown`] without the filetype feature).
    pub file_type: FileType,
}

/// An entry of a directory with where the listing goes on after it, as
/// [`FileSystem::readdir_from`] returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedEntry {
    /// The entry.
    pub entry: DirEntry,
    /// The byte position in the directory's file of the record after this entry's: the
    /// position to read on from.
    pub next: u64,
}

/// A page of a directory's entries, as [`FileSystem::readdir_from`] returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryPage {
    /// The entries, in on-disk order.
    pub entries: Vec<PlacedEntry>,
    /// Whether the directory has no entry after the last of them.
    pub end: bool,
}

/// Where a named entry lies.
#[derive(Debug, Clone, Copy)]
struct EntrySlot {
    block: u32,
    entry: RawDirent,
    previous: Option<RawDirent>,
}

fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidArgument("empty name"));
    }
    if name.len() > disk::NAME_MAX {
        return Err(Error::NameTooLong);
    }
    if name.contains(&b'/') || name.contains(&0) {
        return Err(Error::InvalidArgument("a name may not contain '/' or NUL"));
    }
    if name == b"." || name == b".." {
        return Err(Error::InvalidArgument("'.' and '..' are reserved"));
    }
    Ok(())
}

impl<D: BlockDevice> FileSystem<D> {
    /// Splits a directory block into its entries, checking the chain: every `rec_len` at least
    /// a header, a multiple of 4 and inside the block, every name inside its record, every inode
    /// number in range.
    fn parse_block(&self, directory: InodeNumber, index: u64, block: &[u8]) -> Result<Vec<RawDirent>> {
        let size = block.len();
        let mut entries = Vec::new();
        let mut offset = 0;
        while offset < size {
            let at = || format!("directory {directory} block {index} offset {offset}");
            if offset + disk::DIRENT_HEADER > size {
                return Err(corrupt(format!("{}: entry header runs past the block", at())));
            }
            let inode = disk::get_u32(block, offset);
            let rec_len = usize::from(disk::get_u16(block, offset + 4));
            let mut name_len = usize::from(disk::get_u8(block, offset + 6));
            let mut file_type = disk::get_u8(block, offset + 7);
            if !self.geometry.filetype {
                name_len |= usize::from(file_type) << 8;
                file_type = disk::FT_UNKNOWN;
            }
            if rec_len < disk::DIRENT_HEADER || rec_len % 4 != 0 {
                return Err(corrupt(format!("{}: rec_len {rec_len}", at())));
            }
            if offset + rec_len > size {
                return Err(corrupt(format!("{}: rec_len {rec_len} runs past the block end", at())));
            }
            if disk::DIRENT_HEADER + name_len > rec_len {
                return Err(corrupt(format!("{}: name_len {name_len} does not fit rec_len {rec_len}", at())));
            }
            if inode > self.geometry.inodes_count || (inode != 0 && name_len == 0) {
                return Err(corrupt(format!("{}: inode {inode} with a {name_len}-byte name", at())));
            }
            entries.push(RawDirent { offset, inode, rec_len, name_len, file_type });
            offset += rec_len;
        }
        Ok(entries)
    }

    /// Loads a directory inode and the number of blocks it spans.
    fn load_directory(&mut self, number: InodeNumber) -> Result<(RawInode, u64)> {
        let inode = self.load_inode(number)?;
        if !inode.is_dir() {
            return Err(Error::NotDirectory);
        }
        let block_size = u64::from(self.geometry.block_size);
        let blocks = inode.size().div_ceil(block_size);
        if blocks > u64::from(self.geometry.blocks_count) {
            return Err(corrupt(format!("directory {number}: size {} exceeds the file system", inode.size())));
        }
        Ok((inode, blocks))
    }

    /// Reads block `index` of a directory: its physical number, bytes and checked entries.
    fn directory_block(&mut self, directory: &RawInode, index: u64) -> Result<(u32, Vec<u8>, Vec<RawDirent>)> {
        let Some(block) = self.map_block(directory, index)? else {
            return Err(corrupt(format!("directory {} has a hole at block {index}", directory.number)));
        };
        let data = self.read_block(block)?;
        let entries = self.parse_block(directory.number, index, &data)?;
        Ok((block, data, entries))
    }

    fn find_entry(&mut self, directory: &RawInode, blocks: u64, name: &[u8]) -> Result<Option<EntrySlot>> {
        for index in 0..blocks {
            let (block, data, entries) = self.directory_block(directory, index)?;
            let mut previous = None;
            for entry in entries {
                if entry.inode != 0 && entry.name(&data) == name {
                    return Ok(Some(EntrySlot { block, entry, previous }));
                }
                previous = Some(entry);
            }
        }
        Ok(None)
    }

    /// The inode named `name` in directory `directory`.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::NotDirectory`], [`Error::Corrupt`], [`Error::Io`].
    pub fn lookup_in(&mut self, directory: InodeNumber, name: impl AsRef<[u8]>) -> Result<InodeNumber> {
        let (dir, blocks) = self.load_directory(directory)?;
        let slot = self.find_entry(&dir, blocks, name.as_ref())?.ok_or(Error::NotFound)?;
        Ok(slot.entry.inode)
    }

    /// The inode at `path`, from the root (a leading `/` is optional; empty components are
    /// skipped). Symbolic links are not followed.
    ///
    /// # Errors
    /// As [`lookup_in`](Self::lookup_in).
    pub fn lookup(&mut self, path: impl AsRef<[u8]>) -> Result<InodeNumber> {
        let mut inode = ROOT_INODE;
        for component in path.as_ref().split(|&byte| byte == b'/').filter(|c| !c.is_empty()) {
            inode = self.lookup_in(inode, component)?;
        }
        Ok(inode)
    }

    /// The directory holding the last component of `path`, and that component.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a path without a last component (`/`), or as
    /// [`lookup`](Self::lookup).
    pub fn lookup_parent<'p, P: AsRef<[u8]> + ?Sized>(&mut self, path: &'p P) -> Result<(InodeNumber, &'p [u8])> {
        let path = path.as_ref();
        let trimmed = path.iter().rposition(|&byte| byte != b'/').map_or(&path[..0], |end| &path[..=end]);
        let (parent, name) = match trimmed.iter().rposition(|&byte| byte == b'/') {
            Some(slash) => (&trimmed[..slash], &trimmed[slash + 1..]),
            None => (&trimmed[..0], trimmed),
        };
        if name.is_empty() {
            return Err(Error::InvalidArgument("the path has no last component"));
        }
        Ok((self.lookup(parent)?, name))
    }

    /// The entries of a directory, `.` and `..` included, in on-disk order.
    ///
    /// # Errors
    /// [`Error::NotDirectory`], [`Error::Corrupt`], [`Error::Io`].
    pub fn readdir(&mut self, directory: InodeNumber) -> Result<Vec<DirEntry>> {
        let (dir, blocks) = self.load_directory(directory)?;
        let mut out = Vec::new();
        for index in 0..blocks {
            let (_, data, entries) = self.directory_block(&dir, index)?;
            for entry in entries.iter().filter(|entry| entry.inode != 0) {
                out.push(DirEntry {
                    inode: entry.inode,
                    name: entry.name(&data).to_vec(),
                    file_type: FileType::from_dirent(entry.file_type),
                });
            }
        }
        Ok(out)
    }

    /// At most `max` entries of a directory from byte `position` of the directory's file (0: the
    /// first entry), in on-disk order, each with the position of the entry after it — where the
    /// next page starts. A position stays valid while the record there does: adding entries
    /// never moves one, and removing an entry merges its record into the one before (the first
    /// of a block is only marked unused), so only the position of a removed entry can go (it
    /// becomes [`Error::Stale`]; at a block's start, the listing goes on from the next entry).
    ///
    /// # Errors
    /// [`Error::Stale`] for a position past the directory's end or not at the start of a record;
    /// [`Error::NotDirectory`], [`Error::Corrupt`], [`Error::Io`].
    pub fn readdir_from(&mut self, directory: InodeNumber, position: u64, max: usize) -> Result<DirectoryPage> {
        let (dir, blocks) = self.load_directory(directory)?;
        let block_size = u64::from(self.geometry.block_size);
        if position > blocks * block_size {
            return Err(Error::Stale);
        }
        let mut entries = Vec::new();
        let mut within = (position % block_size) as usize;
        for index in position / block_size..blocks {
            let (_, data, raw) = self.directory_block(&dir, index)?;
            if within != 0 && !raw.iter().any(|entry| entry.offset == within) {
                return Err(Error::Stale);
            }
            for entry in raw.iter().filter(|entry| entry.offset >= within && entry.inode != 0) {
                if entries.len() >= max {
                    return Ok(DirectoryPage { entries, end: false });
                }
                entries.push(PlacedEntry {
                    entry: DirEntry {
                        inode: entry.inode,
                        name: entry.name(&data).to_vec(),
                        file_type: FileType::from_dirent(entry.file_type),
                    },
                    next: index * block_size + (entry.offset + entry.rec_len) as u64,
                });
            }
            within = 0;
        }
        Ok(DirectoryPage { entries, end: true })
    }

    fn is_empty_directory(&mut self, directory: &RawInode) -> Result<bool> {
        let blocks = directory.size().div_ceil(u64::from(self.geometry.block_size));
        for index in 0..blocks.min(u64::from(self.geometry.blocks_count)) {
            let (_, data, entries) = self.directory_block(directory, index)?;
            let dots = |entry: &RawDirent| matches!(entry.name(&data), b"." | b"..");
            if entries.iter().any(|entry| entry.inode != 0 && !dots(entry)) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn dirent_type(&self, mode: u16) -> u8 {
        if self.geometry.filetype { disk::file_type_of_mode(mode) } else { disk::FT_UNKNOWN }
    }

    /// Adds `name → inode` to a directory: into the first record with room, else into a new
    /// block. The directory inode is written either way (its times, size and block count).
    fn add_entry(&mut self, directory: InodeNumber, name: &[u8], inode: InodeNumber, mode: u16) -> Result<()> {
        let (mut dir, blocks) = self.load_directory(directory)?;
        let file_type = self.dirent_type(mode);
        let needed = disk::dirent_len(name.len());
        dir.set_time(ino::MTIME, self.now);
        dir.set_time(ino::CTIME, self.now);
        // Linear insertion breaks a hashed index; drop the index flag as ext2 does.
        dir.set_flags(dir.flags() & !disk::FLAG_INDEX);
        for index in 0..blocks {
            let (block, mut data, entries) = self.directory_block(&dir, index)?;
            if let Some(entry) = entries.iter().find(|entry| entry.rec_len - entry.used_len() >= needed) {
                let used = entry.used_len();
                if used > 0 {
                    disk::set_u16(&mut data, entry.offset + 4, used as u16);
                }
                disk::put_dirent(&mut data, entry.offset + used, inode, entry.rec_len - used, name, file_type);
                self.write_block(block, &data)?;
                return self.write_inode(&dir);
            }
        }
        let block_size = self.geometry.block_size as usize;
        let goal = self.map_block(&dir, blocks.saturating_sub(1))?.map_or(self.inode_goal(directory), |b| b + 1);
        let mut data = vec![0; block_size];
        disk::put_dirent(&mut data, 0, inode, block_size, name, file_type);
        // Written (and ordered) before the directory points at it.
        let added = self.map_block_allocating(&mut dir, blocks, goal, Some(&data));
        let result = added.and_then(|(block, fresh)| {
            if !fresh {
                self.write_block(block, &data)?;
            }
            dir.set_size((blocks + 1) * block_size as u64);
            Ok(())
        });
        self.write_inode(&dir)?;
        result
    }

    /// Removes the entry `name` from a directory (merging its record into the previous one) and
    /// returns the inode it named.
    fn remove_entry(&mut self, directory: InodeNumber, name: &[u8]) -> Result<InodeNumber> {
        let (mut dir, blocks) = self.load_directory(directory)?;
        let slot = self.find_entry(&dir, blocks, name)?.ok_or(Error::NotFound)?;
        let mut data = self.read_block(slot.block)?;
        match slot.previous {
            Some(previous) => {
                let merged = previous.rec_len + slot.entry.rec_len;
                disk::set_u16(&mut data, previous.offset + 4, merged as u16);
            }
            None => disk::set_u32(&mut data, slot.entry.offset, 0),
        }
        self.write_block(slot.block, &data)?;
        dir.set_time(ino::MTIME, self.now);
        dir.set_time(ino::CTIME, self.now);
        self.write_inode(&dir)?;
        Ok(slot.entry.inode)
    }

    /// Points the existing entry `name` at another inode.
    fn replace_entry(&mut self, directory: InodeNumber, name: &[u8], inode: InodeNumber, mode: u16) -> Result<()> {
        let (mut dir, blocks) = self.load_directory(directory)?;
        let slot = self.find_entry(&dir, blocks, name)?.ok_or(Error::NotFound)?;
        let mut data = self.read_block(slot.block)?;
        disk::set_u32(&mut data, slot.entry.offset, inode);
        disk::set_u8(&mut data, slot.entry.offset + 7, self.dirent_type(mode));
        self.write_block(slot.block, &data)?;
        dir.set_time(ino::MTIME, self.now);
        dir.set_time(ino::CTIME, self.now);
        self.write_inode(&dir)
    }

    /// Adds `delta` to an inode's link count and stamps its change time; returns the inode.
    fn change_links(&mut self, number: InodeNumber, delta: i32) -> Result<RawInode> {
        let mut inode = self.load_inode(number)?;
        let links = i32::from(inode.links()) + delta;
        if links < 0 {
            return Err(corrupt(format!("inode {number}: link count {} is too small", inode.links())));
        }
        if links > i32::from(disk::LINK_MAX) {
            return Err(Error::TooManyLinks);
        }
        inode.set_links(links as u16);
        inode.set_time(ino::CTIME, self.now);
        self.write_inode(&inode)?;
        Ok(inode)
    }

    /// Drops one link of a non-directory; frees it with the last.
    fn drop_link(&mut self, number: InodeNumber) -> Result<()> {
        let inode = self.change_links(number, -1)?;
        if inode.links() == 0 { self.release_inode(inode) } else { Ok(()) }
    }

    /// Checks that `name` can be added to `directory`: a valid name, a directory, no such entry.
    fn check_new_entry(&mut self, directory: InodeNumber, name: &[u8]) -> Result<RawInode> {
        self.check_writable()?;
        check_name(name)?;
        let (dir, blocks) = self.load_directory(directory)?;
        if self.find_entry(&dir, blocks, name)?.is_some() {
            return Err(Error::Exists);
        }
        Ok(dir)
    }

    /// Links a freshly allocated inode into `directory` and writes it, giving everything back if
    /// the entry cannot be added. The entry and the inode's blocks reach the disk first: a crash
    /// in between leaves an entry naming an unused inode, which `e2fsck -p` clears, where an
    /// inode that no entry names would stop it.
    fn link_new_inode(&mut self, directory: InodeNumber, name: &[u8], inode: RawInode) -> Result<InodeNumber> {
        let number = inode.number;
        if let Err(error) = self.add_entry(directory, name, number, inode.mode()) {
            let mut inode = inode;
            if self.has_block_map(&inode) {
                self.free_blocks_from(&mut inode, 0)?;
            }
            self.abandon_inode(number, inode.is_dir())?;
            return Err(error);
        }
        self.barrier()?;
        self.write_inode(&inode)?;
        Ok(number)
    }

    /// Creates an empty regular file `name` in `directory` with `permissions` (low 12 bits).
    ///
    /// # Errors
    /// [`Error::Exists`], [`Error::NotDirectory`], [`Error::NameTooLong`],
    /// [`Error::InvalidArgument`] for a name with `/` or NUL, `.` or `..`, [`Error::NoSpace`],
    /// [`Error::ReadOnly`], [`Error::Corrupt`], [`Error::Io`].
    pub fn create(&mut self, directory: InodeNumber, name: impl AsRef<[u8]>, permissions: u16) -> Result<InodeNumber> {
        let name = name.as_ref();
        self.check_new_entry(directory, name)?;
        let number = self.allocate_inode(directory, false)?;
        let inode = self.new_inode(number, disk::S_IFREG | (permissions & 0o7777), 1);
        self.link_new_inode(directory, name, inode)
    }

    /// Creates directory `name` in `directory`, with `.` and `..`.
    ///
    /// # Errors
    /// As [`create`](Self::create), and [`Error::TooManyLinks`] when the parent has 32,000.
    pub fn mkdir(&mut self, directory: InodeNumber, name: impl AsRef<[u8]>, permissions: u16) -> Result<InodeNumber> {
        let name = name.as_ref();
        let parent = self.check_new_entry(directory, name)?;
        if parent.links() >= disk::LINK_MAX {
            return Err(Error::TooManyLinks);
        }
        let number = self.allocate_inode(directory, true)?;
        let mut inode = self.new_inode(number, disk::S_IFDIR | (permissions & 0o7777), 2);
        let block_size = self.geometry.block_size as usize;
        let goal = self.inode_goal(number);
        let block = match self.map_block_allocating(&mut inode, 0, goal, None) {
            Ok((block, _)) => block,
            Err(error) => {
                self.abandon_inode(number, true)?;
                return Err(error);
            }
        };
        let mut data = vec![0; block_size];
        let dir_type = self.dirent_type(disk::S_IFDIR);
        disk::put_dirent(&mut data, 0, number, 12, b".", dir_type);
        disk::put_dirent(&mut data, 12, directory, block_size - 12, b"..", dir_type);
        self.write_block(block, &data)?;
        inode.set_size(block_size as u64);
        self.link_new_inode(directory, name, inode)?;
        self.change_links(directory, 1)?;
        Ok(number)
    }

    /// Creates symbolic link `name` in `directory` pointing at `target`: in the inode when
    /// shorter than 60 bytes (a fast symlink), else in one block.
    ///
    /// # Errors
    /// As [`create`](Self::create); [`Error::NameTooLong`] for a target of a block or more,
    /// [`Error::InvalidArgument`] for an empty target or one with NUL.
    pub fn symlink(
        &mut self,
        directory: InodeNumber,
        name: impl AsRef<[u8]>,
        target: impl AsRef<[u8]>,
    ) -> Result<InodeNumber> {
        let (name, target) = (name.as_ref(), target.as_ref());
        if target.is_empty() || target.contains(&0) {
            return Err(Error::InvalidArgument("a link target must be non-empty and free of NUL"));
        }
        if target.len() >= self.geometry.block_size as usize {
            return Err(Error::NameTooLong);
        }
        self.check_new_entry(directory, name)?;
        let number = self.allocate_inode(directory, false)?;
        let mut inode = self.new_inode(number, disk::S_IFLNK | 0o777, 1);
        inode.set_size(target.len() as u64);
        if target.len() < disk::FAST_SYMLINK_MAX {
            disk::set_bytes(inode.block_bytes_mut(), 0, target);
        } else {
            let goal = self.inode_goal(number);
            let block = match self.map_block_allocating(&mut inode, 0, goal, None) {
                Ok((block, _)) => block,
                Err(error) => {
                    self.abandon_inode(number, false)?;
                    return Err(error);
                }
            };
            let mut data = vec![0; self.geometry.block_size as usize];
            disk::set_bytes(&mut data, 0, target);
            self.write_block(block, &data)?;
        }
        self.link_new_inode(directory, name, inode)
    }

    /// The target of a symbolic link.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the inode is not a symbolic link, [`Error::Corrupt`] for
    /// a size that does not fit where the target is stored, [`Error::Io`].
    pub fn readlink(&mut self, number: InodeNumber) -> Result<Vec<u8>> {
        let inode = self.load_inode(number)?;
        if !inode.is_symlink() {
            return Err(Error::InvalidArgument("not a symbolic link"));
        }
        let size = inode.size();
        if self.is_fast_symlink(&inode) {
            let bytes = inode.block_bytes();
            return bytes
                .get(..size as usize)
                .filter(|_| size < disk::FAST_SYMLINK_MAX as u64)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| corrupt(format!("symlink {number}: size {size} does not fit in the inode")));
        }
        if size == 0 || size >= u64::from(self.geometry.block_size) {
            return Err(corrupt(format!("symlink {number}: size {size} does not fit in one block")));
        }
        let block = self.map_block(&inode, 0)?.ok_or_else(|| corrupt(format!("symlink {number} has no block")))?;
        let data = self.read_block(block)?;
        Ok(data.get(..size as usize).unwrap_or(&[]).to_vec())
    }

    /// Adds a hard link `name` in `directory` to the non-directory `inode`.
    ///
    /// # Errors
    /// As [`create`](Self::create); [`Error::IsDirectory`] for a directory,
    /// [`Error::TooManyLinks`].
    pub fn link(&mut self, inode: InodeNumber, directory: InodeNumber, name: impl AsRef<[u8]>) -> Result<()> {
        let name = name.as_ref();
        self.check_new_entry(directory, name)?;
        let target = self.load_inode(inode)?;
        if target.is_dir() {
            return Err(Error::IsDirectory);
        }
        if target.links() >= disk::LINK_MAX {
            return Err(Error::TooManyLinks);
        }
        self.add_entry(directory, name, inode, target.mode())?;
        self.change_links(inode, 1)?;
        Ok(())
    }

    /// Removes the non-directory entry `name`; the file goes with its last link.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::IsDirectory`], [`Error::InvalidArgument`] for `.` and `..`,
    /// [`Error::ReadOnly`], [`Error::Corrupt`], [`Error::Io`].
    pub fn unlink(&mut self, directory: InodeNumber, name: impl AsRef<[u8]>) -> Result<()> {
        self.check_writable()?;
        let name = name.as_ref();
        if name == b"." || name == b".." {
            return Err(Error::IsDirectory);
        }
        let target = self.lookup_in(directory, name)?;
        if self.load_inode(target)?.is_dir() {
            return Err(Error::IsDirectory);
        }
        // The link goes before the entry (`release_inode` orders a freed inode before what
        // follows): a crash in between leaves an entry naming a freed inode, or a count one
        // short, both of which `e2fsck -p` repairs.
        self.drop_link(target)?;
        self.remove_entry(directory, name).map(drop)
    }

    /// Removes the empty directory `name`.
    ///
    /// # Errors
    /// [`Error::NotEmpty`] (also for `..`), [`Error::NotDirectory`], [`Error::NotFound`],
    /// [`Error::InvalidArgument`] for `.`, [`Error::ReadOnly`], [`Error::Corrupt`], [`Error::Io`].
    pub fn rmdir(&mut self, directory: InodeNumber, name: impl AsRef<[u8]>) -> Result<()> {
        self.check_writable()?;
        let name = name.as_ref();
        match name {
            b"." => return Err(Error::InvalidArgument("cannot remove '.'")),
            b".." => return Err(Error::NotEmpty),
            _ => {}
        }
        let target = self.lookup_in(directory, name)?;
        let inode = self.load_inode(target)?;
        if !inode.is_dir() {
            return Err(Error::NotDirectory);
        }
        if !self.is_empty_directory(&inode)? {
            return Err(Error::NotEmpty);
        }
        // Freed before its entry goes, as in `unlink`.
        self.release_inode(inode)?;
        self.remove_entry(directory, name)?;
        self.change_links(directory, -1).map(drop)
    }

    /// Renames `from_name` in `from_directory` to `to_name` in `to_directory`, replacing a
    /// file there (or an empty directory, when a directory moves). Moving a directory updates
    /// its `..` and both parents' link counts.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::IsDirectory`] (a file onto a directory),
    /// [`Error::NotDirectory`] (a directory onto a file), [`Error::NotEmpty`],
    /// [`Error::InvalidArgument`] for `.`/`..` or a directory moved under itself,
    /// [`Error::TooManyLinks`], [`Error::NoSpace`], [`Error::ReadOnly`], [`Error::Corrupt`],
    /// [`Error::Io`].
    pub fn rename(
        &mut self,
        from_directory: InodeNumber,
        from_name: impl AsRef<[u8]>,
        to_directory: InodeNumber,
        to_name: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.check_writable()?;
        let (from_name, to_name) = (from_name.as_ref(), to_name.as_ref());
        check_name(from_name)?;
        check_name(to_name)?;
        let moving = self.lookup_in(from_directory, from_name)?;
        let moving_inode = self.load_inode(moving)?;
        let is_dir = moving_inode.is_dir();
        let (to_dir, to_blocks) = self.load_directory(to_directory)?;
        let moves_up_or_down = is_dir && from_directory != to_directory;
        if moves_up_or_down {
            self.check_not_ancestor(moving, to_directory)?;
        }
        let existing = self.find_entry(&to_dir, to_blocks, to_name)?.map(|slot| slot.entry.inode);
        match existing {
            Some(replaced) if replaced == moving => return Ok(()),
            Some(replaced) => {
                let replaced_inode = self.load_inode(replaced)?;
                match (is_dir, replaced_inode.is_dir()) {
                    (true, false) => return Err(Error::NotDirectory),
                    (false, true) => return Err(Error::IsDirectory),
                    (true, true) if !self.is_empty_directory(&replaced_inode)? => return Err(Error::NotEmpty),
                    _ => {}
                }
                // The replaced file's link goes before its entry, as in `unlink`.
                if replaced_inode.is_dir() {
                    self.release_inode(replaced_inode)?;
                    self.change_links(to_directory, -1)?;
                } else {
                    self.drop_link(replaced)?;
                }
                self.replace_entry(to_directory, to_name, moving, moving_inode.mode())?;
            }
            None => {
                if moves_up_or_down && to_dir.links() >= disk::LINK_MAX {
                    return Err(Error::TooManyLinks);
                }
                self.add_entry(to_directory, to_name, moving, moving_inode.mode())?;
            }
        }
        // The new entry before the old one goes: a crash in between leaves two entries and a
        // count one short (`e2fsck -p` counts again), never a file without a name.
        self.barrier()?;
        self.remove_entry(from_directory, from_name)?;
        if moves_up_or_down {
            self.set_parent_entry(moving, to_directory)?;
            self.change_links(from_directory, -1)?;
            self.change_links(to_directory, 1)?;
        }
        self.change_links(moving, 0)?;
        Ok(())
    }

    /// Refuses to move directory `moving` into `destination` when `destination` lies under it
    /// (or is it), walking `..` up to the root.
    fn check_not_ancestor(&mut self, moving: InodeNumber, destination: InodeNumber) -> Result<()> {
        let mut current = destination;
        for _ in 0..self.geometry.inodes_count {
            if current == moving {
                return Err(Error::InvalidArgument("cannot move a directory under itself"));
            }
            if current == ROOT_INODE {
                return Ok(());
            }
            current = self.lookup_in(current, b"..")?;
        }
        Err(corrupt(format!("directory {destination}: the '..' chain never reaches the root")))
    }

    /// Points the `..` entry of directory `directory` at `parent`.
    fn set_parent_entry(&mut self, directory: InodeNumber, parent: InodeNumber) -> Result<()> {
        let (dir, _) = self.load_directory(directory)?;
        let (block, mut data, entries) = self.directory_block(&dir, 0)?;
        let dotdot = entries
            .get(1)
            .filter(|entry| entry.name(&data) == b"..")
            .ok_or_else(|| corrupt(format!("directory {directory}: second entry is not '..'")))?;
        disk::set_u32(&mut data, dotdot.offset, parent);
        self.write_block(block, &data)
    }
}
