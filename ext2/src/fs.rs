//! The mounted file system: superblock and group descriptors, bitmaps and allocation, inodes
//! and their block maps, file data.
//!
//! Inodes, directory blocks and file data are written through to the device at once; the
//! superblock, the group descriptors and the bitmaps are cached and written by
//! [`FileSystem::sync`] (and [`FileSystem::unmount`]).

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

use crate::device::BlockDevice;
use crate::disk::{self, RawInode, gd, get_u16, get_u32, ino, sb, set_u16, set_u32};
use crate::{Error, Result};

/// An inode number; the root directory is [`ROOT_INODE`].
pub type InodeNumber = u32;

/// The inode of the root directory.
pub const ROOT_INODE: InodeNumber = 2;

/// Most bitmap blocks kept in memory before they are written back and dropped.
const BITMAP_CACHE_LIMIT: usize = 64;

/// The kind of a file, from the type bits of its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A named pipe.
    Fifo,
    /// A socket.
    Socket,
    /// A mode (or directory entry type) that names no known kind.
    Unknown,
}

impl FileType {
    pub(crate) fn from_mode(mode: u16) -> Self {
        Self::from_dirent(disk::file_type_of_mode(mode))
    }

    pub(crate) fn from_dirent(file_type: u8) -> Self {
        match file_type {
            disk::FT_REG_FILE => FileType::Regular,
            disk::FT_DIR => FileType::Directory,
            disk::FT_SYMLINK => FileType::Symlink,
            disk::FT_CHRDEV => FileType::CharDevice,
            disk::FT_BLKDEV => FileType::BlockDevice,
            disk::FT_FIFO => FileType::Fifo,
            disk::FT_SOCK => FileType::Socket,
            _ => FileType::Unknown,
        }
    }
}

/// What `stat` reports about an inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// The inode number.
    pub inode: InodeNumber,
    /// The kind of file.
    pub file_type: FileType,
    /// The whole mode: type bits and permission bits.
    pub mode: u16,
    /// Size in bytes.
    pub size: u64,
    /// Number of directory entries naming the inode (plus `.` and the `..` of subdirectories).
    pub links: u16,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Last access, seconds since 1970 (this crate does not update it on reads).
    pub atime: u32,
    /// Last change of the data.
    pub mtime: u32,
    /// Last change of the inode.
    pub ctime: u32,
    /// Space held, in 512-byte units, indirect blocks included.
    pub blocks: u64,
    /// The generation number (for NFS file handles).
    pub generation: u32,
}

/// Attributes to change with [`FileSystem::set_attributes`]; `None` leaves a field alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attributes {
    /// Permission bits (the low 12 bits of the mode; the type cannot change).
    pub permissions: Option<u16>,
    /// Owner.
    pub uid: Option<u32>,
    /// Group.
    pub gid: Option<u32>,
    /// Last access.
    pub atime: Option<u32>,
    /// Last change of the data.
    pub mtime: Option<u32>,
}

/// What `statfs` (`df`) reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFs {
    /// Bytes per block.
    pub block_size: u32,
    /// Blocks in the file system.
    pub blocks: u32,
    /// Free blocks.
    pub free_blocks: u32,
    /// Free blocks kept for the superuser (`s_r_blocks_count`).
    pub reserved_blocks: u32,
    /// Inodes in the file system.
    pub inodes: u32,
    /// Free inodes.
    pub free_inodes: u32,
    /// Longest name.
    pub name_max: u32,
}

/// The shape of the file system, fixed at mount.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geometry {
    pub block_size: u32,
    pub blocks_count: u32,
    pub first_data_block: u32,
    pub blocks_per_group: u32,
    pub inodes_per_group: u32,
    pub inodes_count: u32,
    pub inode_size: u32,
    pub first_inode: u32,
    pub group_count: u32,
    pub gdt_blocks: u32,
    pub reserved_gdt_blocks: u32,
    pub inode_table_blocks: u32,
    pub sparse_super: bool,
    pub filetype: bool,
}

impl Geometry {
    /// Block pointers per indirect block.
    pub fn pointers_per_block(&self) -> u64 {
        u64::from(self.block_size / 4)
    }

    /// 512-byte sectors per block (the unit of `i_blocks`).
    pub fn sectors_per_block(&self) -> u32 {
        self.block_size / 512
    }

    pub fn group_first_block(&self, group: u32) -> u32 {
        self.first_data_block + group * self.blocks_per_group
    }

    /// Blocks in `group` (the last one may be short).
    pub fn group_blocks(&self, group: u32) -> u32 {
        let first = self.group_first_block(group);
        (self.blocks_count - first).min(self.blocks_per_group)
    }

    pub fn has_super(&self, group: u32) -> bool {
        !self.sparse_super || disk::sparse_group_has_super(group)
    }

    /// Blocks at the start of `group` taken by a superblock copy and the descriptor table.
    pub fn super_and_gdt_blocks(&self, group: u32) -> u32 {
        if self.has_super(group) { 1 + self.gdt_blocks + self.reserved_gdt_blocks } else { 0 }
    }

    pub fn block_offset(&self, block: u32) -> u64 {
        u64::from(block) * u64::from(self.block_size)
    }
}

/// A run of a file's bytes: where they lie on the device, or a hole ([`FileSystem::extents`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// The offset of the run in the file.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
    /// Where its bytes lie on the device; `None` for a hole, which reads as zeros.
    pub device_offset: Option<u64>,
}

/// The most blocks one device read of file data covers.
const MAX_RUN: u64 = 256;

/// The indirect blocks last read whole while mapping a file's blocks, one per level.
#[derive(Default)]
struct PointerBlocks {
    levels: [Option<(u32, Vec<u8>)>; 3],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum BitmapKind {
    Block,
    Inode,
}

#[derive(Debug)]
struct CachedBitmap {
    data: Vec<u8>,
    dirty: bool,
}

/// A mounted ext2 file system over a [`BlockDevice`].
///
/// Call [`sync`](Self::sync) (or [`unmount`](Self::unmount)) before dropping it: the free counts
/// and bitmaps are cached in memory until then.
pub struct FileSystem<D: BlockDevice> {
    pub(crate) device: D,
    superblock: Vec<u8>,
    descriptors: Vec<u8>,
    pub(crate) geometry: Geometry,
    read_only: bool,
    unsupported_ro_compat: u32,
    pub(crate) now: u32,
    next_generation: u32,
    /// See [`layout_changes`](Self::layout_changes).
    layout_changes: u64,
    metadata_dirty: bool,
    bitmaps: BTreeMap<(BitmapKind, u32), CachedBitmap>,
    /// A read-write mount whose mount time the clock has not stamped yet.
    mount_time_pending: bool,
    /// What Linux would warn of at this mount (`ext2_setup_super`).
    mount_warning: Option<&'static str>,
    /// `s_state` as the mount found it (Linux's `s_mount_state`): what the superblock says
    /// whenever everything is synced, so that a file system mounted unchecked stays unchecked.
    mount_state: u16,
    /// Whether the superblock on the device says the file system is in use (`s_state` without
    /// `VALID`): written and flushed before the first write after a mount or a sync, so that a
    /// crash before the next sync leaves a file system `e2fsck -p` checks rather than skips.
    marked_in_use: bool,
}

impl<D: BlockDevice> core::fmt::Debug for FileSystem<D> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FileSystem").field("geometry", &self.geometry).field("read_only", &self.read_only).finish()
    }
}

pub(crate) fn corrupt(what: impl Into<alloc::string::String>) -> Error {
    Error::Corrupt(what.into())
}

impl<D: BlockDevice> FileSystem<D> {
    /// Mounts the file system on `device`, read-write unless it uses a read-only compatible
    /// feature this crate does not implement.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for an inconsistent superblock or group descriptor (naming the field),
    /// [`Error::Unsupported`] for an incompatible feature, revision or block size, [`Error::Io`].
    pub fn mount(device: D) -> Result<Self> {
        Self::open(device, false)
    }

    /// Mounts the file system on `device` read-only.
    ///
    /// # Errors
    /// As [`mount`](Self::mount).
    pub fn mount_read_only(device: D) -> Result<Self> {
        Self::open(device, true)
    }

    fn open(mut device: D, read_only: bool) -> Result<Self> {
        let device_size = device.size();
        if device_size < disk::SUPERBLOCK_OFFSET + disk::SUPERBLOCK_SIZE as u64 {
            return Err(corrupt(format!("device of {device_size} bytes is too small for a superblock")));
        }
        let mut superblock = vec![0; disk::SUPERBLOCK_SIZE];
        device.read(disk::SUPERBLOCK_OFFSET, &mut superblock)?;
        let s = &superblock;
        let magic = get_u16(s, sb::MAGIC);
        if magic != disk::MAGIC {
            return Err(corrupt(format!("superblock: magic {magic:#06x}, not {:#06x}", disk::MAGIC)));
        }
        let revision = get_u32(s, sb::REV_LEVEL);
        if revision > 1 {
            return Err(Error::Unsupported(format!("superblock revision {revision}")));
        }
        let log_block_size = get_u32(s, sb::LOG_BLOCK_SIZE);
        if log_block_size > 2 {
            return Err(Error::Unsupported(format!("block size 1024 << {log_block_size} (only 1, 2 and 4 KiB)")));
        }
        let block_size = 1024u32 << log_block_size;
        let incompat = get_u32(s, sb::FEATURE_INCOMPAT);
        let unknown_incompat = incompat & !disk::INCOMPAT_FILETYPE;
        if unknown_incompat != 0 {
            return Err(Error::Unsupported(format!(
                "incompatible features: {}",
                disk::incompat_names(unknown_incompat)
            )));
        }
        let ro_compat = get_u32(s, sb::FEATURE_RO_COMPAT);
        let unsupported_ro_compat = ro_compat & !(disk::RO_COMPAT_SPARSE_SUPER | disk::RO_COMPAT_LARGE_FILE);
        let read_only = read_only || unsupported_ro_compat != 0;

        let blocks_count = get_u32(s, sb::BLOCKS_COUNT);
        let first_data_block = get_u32(s, sb::FIRST_DATA_BLOCK);
        let expected_first = u32::from(block_size == 1024);
        if first_data_block != expected_first {
            return Err(corrupt(format!(
                "superblock: first data block {first_data_block}, not {expected_first} for {block_size}-byte blocks"
            )));
        }
        if blocks_count <= first_data_block + 1 {
            return Err(corrupt(format!("superblock: block count {blocks_count} is too small")));
        }
        let fs_bytes = u64::from(blocks_count) * u64::from(block_size);
        if fs_bytes > device_size {
            return Err(corrupt(format!(
                "superblock: {blocks_count} blocks of {block_size} bytes exceed the device's {device_size} bytes"
            )));
        }
        let bits_per_block = block_size * 8;
        let blocks_per_group = get_u32(s, sb::BLOCKS_PER_GROUP);
        if blocks_per_group < 8 || blocks_per_group > bits_per_block || !blocks_per_group.is_multiple_of(8) {
            return Err(corrupt(format!("superblock: {blocks_per_group} blocks per group")));
        }
        let inodes_per_group = get_u32(s, sb::INODES_PER_GROUP);
        if inodes_per_group == 0 || inodes_per_group > bits_per_block {
            return Err(corrupt(format!("superblock: {inodes_per_group} inodes per group")));
        }
        let (inode_size, first_inode) = if revision == 0 {
            (disk::GOOD_OLD_INODE_SIZE, disk::GOOD_OLD_FIRST_INODE)
        } else {
            (u32::from(get_u16(s, sb::INODE_SIZE)), get_u32(s, sb::FIRST_INO))
        };
        if inode_size < disk::GOOD_OLD_INODE_SIZE || inode_size > block_size || !inode_size.is_power_of_two() {
            return Err(corrupt(format!("superblock: inode size {inode_size}")));
        }
        let group_count = (blocks_count - first_data_block).div_ceil(blocks_per_group);
        let inodes_count = get_u32(s, sb::INODES_COUNT);
        if u64::from(inodes_count) != u64::from(group_count) * u64::from(inodes_per_group) {
            return Err(corrupt(format!(
                "superblock: {inodes_count} inodes, but {group_count} groups of {inodes_per_group}"
            )));
        }
        if first_inode < disk::GOOD_OLD_FIRST_INODE || first_inode >= inodes_count {
            return Err(corrupt(format!("superblock: first inode {first_inode}")));
        }
        if get_u32(s, sb::R_BLOCKS_COUNT) > blocks_count {
            return Err(corrupt(format!("superblock: {} reserved blocks", get_u32(s, sb::R_BLOCKS_COUNT))));
        }
        let gdt_blocks = (u64::from(group_count) * disk::GROUP_DESCRIPTOR_SIZE as u64).div_ceil(u64::from(block_size));
        let reserved_gdt_blocks = if get_u32(s, sb::FEATURE_COMPAT) & disk::COMPAT_RESIZE_INODE != 0 {
            u32::from(get_u16(s, sb::RESERVED_GDT_BLOCKS))
        } else {
            0
        };
        let inode_table_blocks = (inodes_per_group * inode_size).div_ceil(block_size);
        let geometry = Geometry {
            block_size,
            blocks_count,
            first_data_block,
            blocks_per_group,
            inodes_per_group,
            inodes_count,
            inode_size,
            first_inode,
            group_count,
            gdt_blocks: u32::try_from(gdt_blocks).unwrap_or(u32::MAX),
            reserved_gdt_blocks,
            inode_table_blocks,
            sparse_super: ro_compat & disk::RO_COMPAT_SPARSE_SUPER != 0,
            filetype: incompat & disk::INCOMPAT_FILETYPE != 0,
        };
        if 1 + gdt_blocks + u64::from(reserved_gdt_blocks) >= u64::from(geometry.group_blocks(0)) {
            return Err(corrupt(format!("superblock: {gdt_blocks} group descriptor blocks do not fit in group 0")));
        }
        let mut descriptors = vec![0; group_count as usize * disk::GROUP_DESCRIPTOR_SIZE];
        device.read(geometry.block_offset(first_data_block + 1), &mut descriptors)?;
        let wtime = get_u32(s, sb::WTIME);
        let mount_state = get_u16(s, sb::STATE);
        let mut fs = FileSystem {
            device,
            superblock,
            descriptors,
            geometry,
            read_only,
            unsupported_ro_compat,
            now: wtime,
            next_generation: wtime,
            layout_changes: 0,
            metadata_dirty: false,
            bitmaps: BTreeMap::new(),
            mount_time_pending: false,
            mount_warning: None,
            mount_state,
            marked_in_use: false,
        };
        fs.check_descriptors()?;
        // Trust the per-group counts, as Linux does, over the superblock's summary.
        let (free_blocks, free_inodes) = (0..group_count).fold((0u32, 0u32), |(blocks, inodes), group| {
            (blocks.saturating_add(fs.gd_free_blocks(group)), inodes.saturating_add(fs.gd_free_inodes(group)))
        });
        if free_blocks != fs.sb_u32(sb::FREE_BLOCKS_COUNT) || free_inodes != fs.sb_u32(sb::FREE_INODES_COUNT) {
            set_u32(&mut fs.superblock, sb::FREE_BLOCKS_COUNT, free_blocks);
            set_u32(&mut fs.superblock, sb::FREE_INODES_COUNT, free_inodes);
            fs.metadata_dirty = !fs.read_only;
        }
        fs.next_generation = get_u32(&fs.superblock, sb::UUID) ^ wtime;
        let root = fs.read_inode(ROOT_INODE)?;
        if !root.is_dir() || root.links() == 0 {
            return Err(corrupt(format!("root inode {ROOT_INODE} is not a directory (mode {:#o})", root.mode())));
        }
        if !fs.read_only {
            fs.count_mount();
        }
        Ok(fs)
    }

    /// What a read-write mount does to the superblock, as Linux's `ext2_setup_super`: notes
    /// what to warn of (an unchecked file system, errors, the maximal mount count reached),
    /// gives `s_max_mnt_count` Linux's default when it is 0, and counts the mount. The
    /// superblock reaches the disk at the next [`sync`](Self::sync), with the write time, and
    /// the mount time once the clock is set.
    fn count_mount(&mut self) {
        let state = get_u16(&self.superblock, sb::STATE);
        let count = get_u16(&self.superblock, sb::MNT_COUNT);
        let max = get_u16(&self.superblock, sb::MAX_MNT_COUNT);
        self.mount_warning = if state & disk::STATE_VALID == 0 {
            Some("mounting unchecked fs, running e2fsck is recommended")
        } else if state & disk::STATE_ERROR != 0 {
            Some("mounting fs with errors, running e2fsck is recommended")
        } else if (max as i16) >= 0 && count >= max {
            Some("maximal mount count reached, running e2fsck is recommended")
        } else {
            None
        };
        if max == 0 {
            set_u16(&mut self.superblock, sb::MAX_MNT_COUNT, disk::DEFAULT_MAX_MOUNT_COUNT);
        }
        set_u16(&mut self.superblock, sb::MNT_COUNT, count.wrapping_add(1));
        set_u32(&mut self.superblock, sb::MTIME, self.now);
        self.mount_time_pending = true;
        self.metadata_dirty = true;
    }

    /// What Linux would warn of when mounting this file system read-write (an unchecked file
    /// system, one with errors, or one mounted `s_max_mnt_count` times since its last check);
    /// `None` for a read-only mount.
    pub fn mount_warning(&self) -> Option<&'static str> {
        self.mount_warning
    }

    /// How many times the file system has been mounted read-write since it was last checked
    /// (`s_mnt_count`, this mount included), and the most before a check is due
    /// (`s_max_mnt_count`, negative for never).
    pub fn mount_count(&self) -> (u16, i16) {
        (get_u16(&self.superblock, sb::MNT_COUNT), get_u16(&self.superblock, sb::MAX_MNT_COUNT) as i16)
    }

    /// Checks every group descriptor: bitmaps and inode table inside their group, after its
    /// superblock copy, not overlapping; counts within the group's size.
    fn check_descriptors(&self) -> Result<()> {
        let g = self.geometry;
        for group in 0..g.group_count {
            let first = g.group_first_block(group) + g.super_and_gdt_blocks(group);
            let end = g.group_first_block(group) + g.group_blocks(group);
            let block_bitmap = self.gd_u32(group, gd::BLOCK_BITMAP);
            let inode_bitmap = self.gd_u32(group, gd::INODE_BITMAP);
            let table = self.gd_u32(group, gd::INODE_TABLE);
            let inside = |block: u32| block >= first && block < end;
            if !inside(block_bitmap) {
                return Err(corrupt(format!(
                    "group {group} descriptor: block bitmap at {block_bitmap}, outside the group's {first}..{end}"
                )));
            }
            if !inside(inode_bitmap) || inode_bitmap == block_bitmap {
                return Err(corrupt(format!(
                    "group {group} descriptor: inode bitmap at {inode_bitmap}, outside {first}..{end} or on the block bitmap"
                )));
            }
            let table_end = u64::from(table) + u64::from(g.inode_table_blocks);
            let in_table = |block: u32| block >= table && u64::from(block) < table_end;
            if !inside(table) || table_end > u64::from(end) || in_table(block_bitmap) || in_table(inode_bitmap) {
                return Err(corrupt(format!(
                    "group {group} descriptor: inode table at {table}..{table_end}, outside {first}..{end} or over a bitmap"
                )));
            }
            let free_blocks = self.gd_free_blocks(group);
            let free_inodes = self.gd_free_inodes(group);
            if free_blocks > g.group_blocks(group) || free_inodes > g.inodes_per_group {
                return Err(corrupt(format!(
                    "group {group} descriptor: {free_blocks} free blocks, {free_inodes} free inodes exceed the group"
                )));
            }
        }
        Ok(())
    }

    /// Whether the file system refuses changes.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The read-only compatible features that forced a read-only mount, by name; `None` when
    /// the crate implements every feature the file system uses.
    pub fn unsupported_features(&self) -> Option<alloc::string::String> {
        (self.unsupported_ro_compat != 0).then(|| disk::ro_compat_names(self.unsupported_ro_compat))
    }

    /// Sets the clock: the seconds since 1970 stamped on every change from now on, and on the
    /// superblock's write time at the next [`sync`](Self::sync). The crate has no clock of its
    /// own: it starts at the superblock's last write time, and the first call after a
    /// read-write mount also stamps the mount time (`s_mtime`).
    pub fn set_time(&mut self, now: u32) {
        self.now = now;
        if self.mount_time_pending {
            set_u32(&mut self.superblock, sb::MTIME, now);
            self.mount_time_pending = false;
        }
    }

    /// The block size in bytes.
    pub fn block_size(&self) -> u32 {
        self.geometry.block_size
    }

    /// The device, for inspection.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The device, for a caller that keeps state of its own in it (a cache of views).
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }

    /// Writes everything back ([`sync`](Self::sync)) and returns the device.
    ///
    /// # Errors
    /// As [`sync`](Self::sync); the device is lost then, as a failed unmount loses the disk.
    pub fn unmount(mut self) -> Result<D> {
        self.sync()?;
        Ok(self.device)
    }

    /// Writes the cached bitmaps, the group descriptors and the superblock (the primary copies
    /// and every backup), then flushes the device.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn sync(&mut self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        self.flush_bitmaps()?;
        if self.metadata_dirty {
            set_u32(&mut self.superblock, sb::WTIME, self.now);
            let g = self.geometry;
            for group in (0..g.group_count).filter(|&group| g.has_super(group)) {
                let mut copy = self.superblock.clone();
                set_u16(&mut copy, sb::BLOCK_GROUP_NR, group as u16);
                let first = g.group_first_block(group);
                let super_offset = if group == 0 { disk::SUPERBLOCK_OFFSET } else { g.block_offset(first) };
                self.write_at(super_offset, &copy)?;
                let gdt_block = if group == 0 { g.first_data_block + 1 } else { first + 1 };
                let descriptors = core::mem::take(&mut self.descriptors);
                let written = self.write_at(g.block_offset(gdt_block), &descriptors);
                self.descriptors = descriptors;
                written?;
            }
            self.metadata_dirty = false;
        }
        self.device.flush()?;
        if self.marked_in_use {
            // Everything is on the disk: the superblock may say so (the primary copy, which
            // e2fsck reads, as Linux marks it).
            set_u16(&mut self.superblock, sb::STATE, self.mount_state);
            self.device.write(disk::SUPERBLOCK_OFFSET, &self.superblock)?;
            self.device.flush()?;
            self.marked_in_use = false;
        }
        Ok(())
    }

    /// Free and total blocks and inodes (`df`).
    pub fn statfs(&self) -> StatFs {
        StatFs {
            block_size: self.geometry.block_size,
            blocks: self.geometry.blocks_count,
            free_blocks: self.sb_u32(sb::FREE_BLOCKS_COUNT),
            reserved_blocks: self.sb_u32(sb::R_BLOCKS_COUNT),
            inodes: self.geometry.inodes_count,
            free_inodes: self.sb_u32(sb::FREE_INODES_COUNT),
            name_max: disk::NAME_MAX as u32,
        }
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.read_only { Err(Error::ReadOnly) } else { Ok(()) }
    }

    // ----- superblock and group descriptor fields -----

    fn sb_u32(&self, offset: usize) -> u32 {
        get_u32(&self.superblock, offset)
    }

    fn sb_add(&mut self, offset: usize, delta: i32) {
        let value = self.sb_u32(offset).saturating_add_signed(delta);
        set_u32(&mut self.superblock, offset, value);
        self.metadata_dirty = true;
    }

    fn gd_u32(&self, group: u32, field: usize) -> u32 {
        get_u32(&self.descriptors, group as usize * disk::GROUP_DESCRIPTOR_SIZE + field)
    }

    fn gd_u16(&self, group: u32, field: usize) -> u16 {
        get_u16(&self.descriptors, group as usize * disk::GROUP_DESCRIPTOR_SIZE + field)
    }

    fn gd_add(&mut self, group: u32, field: usize, delta: i32) {
        let value = i32::from(self.gd_u16(group, field)).saturating_add(delta).clamp(0, i32::from(u16::MAX));
        set_u16(&mut self.descriptors, group as usize * disk::GROUP_DESCRIPTOR_SIZE + field, value as u16);
        self.metadata_dirty = true;
    }

    fn gd_free_blocks(&self, group: u32) -> u32 {
        u32::from(self.gd_u16(group, gd::FREE_BLOCKS_COUNT))
    }

    fn gd_free_inodes(&self, group: u32) -> u32 {
        u32::from(self.gd_u16(group, gd::FREE_INODES_COUNT))
    }

    /// Turns on the large_file feature once a file passes 2 GiB.
    fn note_file_size(&mut self, size: u64) {
        let ro_compat = self.sb_u32(sb::FEATURE_RO_COMPAT);
        if size > i32::MAX as u64 && ro_compat & disk::RO_COMPAT_LARGE_FILE == 0 {
            set_u32(&mut self.superblock, sb::FEATURE_RO_COMPAT, ro_compat | disk::RO_COMPAT_LARGE_FILE);
            self.metadata_dirty = true;
        }
    }

    // ----- blocks -----

    /// Checks that a block pointer read from `what` lies in the data area.
    pub(crate) fn check_block(&self, block: u32, what: impl FnOnce() -> alloc::string::String) -> Result<()> {
        if block < self.geometry.first_data_block || block >= self.geometry.blocks_count {
            return Err(corrupt(format!(
                "{}: block pointer {block} outside the file system ({}..{})",
                what(),
                self.geometry.first_data_block,
                self.geometry.blocks_count
            )));
        }
        Ok(())
    }

    pub(crate) fn read_block(&mut self, block: u32) -> Result<Vec<u8>> {
        let mut data = vec![0; self.geometry.block_size as usize];
        self.device.read(self.geometry.block_offset(block), &mut data)?;
        Ok(data)
    }

    pub(crate) fn write_block(&mut self, block: u32, data: &[u8]) -> Result<()> {
        self.write_at(self.geometry.block_offset(block), data)
    }

    /// Writes `data` at byte `offset` of the device, the superblock's mark that the file system
    /// is in use first (every write but that mark's own goes through here).
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.mark_in_use()?;
        self.device.write(offset, data)?;
        Ok(())
    }

    /// Makes every write so far reach the disk before any write after it. The crate orders its
    /// writes so that a crash between any two leaves an image `e2fsck -p` repairs without
    /// asking (decision 0012): a block before what points to it, a directory entry before the
    /// inode it names is written, an inode freed before its last entry goes, an entry added
    /// before the one it replaces goes, and freed blocks reused only after their release.
    pub(crate) fn barrier(&mut self) -> Result<()> {
        if self.marked_in_use {
            self.device.flush()?;
        }
        Ok(())
    }

    /// Makes the write of `block` reach the disk before any write after it: the barrier of a
    /// new block before what points to it, narrowed to that block. A full barrier there would
    /// also write back everything else changed since the last one — a file's data written so
    /// far, which ext2 does not order (a barrier for every new indirect block of a file being
    /// written stalled its writer while megabytes went to the disk).
    fn barrier_block(&mut self, block: u32) -> Result<()> {
        if self.marked_in_use {
            let offset = self.geometry.block_offset(block);
            self.device.flush_range(offset, u64::from(self.geometry.block_size))?;
        }
        Ok(())
    }

    /// Marks the superblock on the device in use, unless it says so already.
    fn mark_in_use(&mut self) -> Result<()> {
        if !self.marked_in_use {
            set_u16(&mut self.superblock, sb::STATE, self.mount_state & !disk::STATE_VALID);
            self.device.write(disk::SUPERBLOCK_OFFSET, &self.superblock)?;
            // Through a write-back cache the mark reaches the disk before what follows only so.
            self.device.flush()?;
            self.marked_in_use = true;
        }
        Ok(())
    }

    fn bitmap(&mut self, kind: BitmapKind, group: u32) -> Result<&mut CachedBitmap> {
        let key = (kind, group);
        if !self.bitmaps.contains_key(&key) {
            if self.bitmaps.len() >= BITMAP_CACHE_LIMIT {
                self.flush_bitmaps()?;
                self.bitmaps.clear();
            }
            let field = if kind == BitmapKind::Block { gd::BLOCK_BITMAP } else { gd::INODE_BITMAP };
            let data = self.read_block(self.gd_u32(group, field))?;
            self.bitmaps.insert(key, CachedBitmap { data, dirty: false });
        }
        self.bitmaps.get_mut(&key).ok_or_else(|| corrupt("bitmap cache"))
    }

    fn flush_bitmaps(&mut self) -> Result<()> {
        if self.bitmaps.values().any(|bitmap| bitmap.dirty) {
            self.mark_in_use()?;
        }
        let g = self.geometry;
        for (&(kind, group), bitmap) in self.bitmaps.iter_mut().filter(|(_, bitmap)| bitmap.dirty) {
            let field = if kind == BitmapKind::Block { gd::BLOCK_BITMAP } else { gd::INODE_BITMAP };
            let block = get_u32(&self.descriptors, group as usize * disk::GROUP_DESCRIPTOR_SIZE + field);
            self.device.write(g.block_offset(block), &bitmap.data)?;
            bitmap.dirty = false;
        }
        Ok(())
    }

    /// Whether `block` holds metadata of its group (superblock copy, descriptor table, bitmaps,
    /// inode table), which no file may own.
    fn is_group_metadata(&self, block: u32) -> bool {
        let g = self.geometry;
        if block < g.first_data_block {
            return true;
        }
        let group = (block - g.first_data_block) / g.blocks_per_group;
        let table = self.gd_u32(group, gd::INODE_TABLE);
        block - g.group_first_block(group) < g.super_and_gdt_blocks(group)
            || block == self.gd_u32(group, gd::BLOCK_BITMAP)
            || block == self.gd_u32(group, gd::INODE_BITMAP)
            || (block >= table && block - table < g.inode_table_blocks)
    }

    /// Allocates a block, near `goal` when it is free.
    pub(crate) fn allocate_block(&mut self, goal: u32) -> Result<u32> {
        let g = self.geometry;
        let goal = goal.clamp(g.first_data_block, g.blocks_count - 1);
        let start_group = (goal - g.first_data_block) / g.blocks_per_group;
        let start_bit = (goal - g.first_data_block) % g.blocks_per_group;
        for step in 0..g.group_count {
            let group = (start_group + step) % g.group_count;
            if self.gd_free_blocks(group) == 0 {
                continue;
            }
            let limit = g.group_blocks(group);
            let from = if step == 0 { start_bit.min(limit) } else { 0 };
            let bitmap = self.bitmap(BitmapKind::Block, group)?;
            let found =
                disk::find_clear_bit(&bitmap.data, from, limit).or_else(|| disk::find_clear_bit(&bitmap.data, 0, from));
            let Some(bit) = found else {
                return Err(corrupt(format!(
                    "group {group}: descriptor counts {} free blocks, the bitmap none",
                    self.gd_free_blocks(group)
                )));
            };
            let block = g.group_first_block(group) + bit;
            if self.is_group_metadata(block) {
                return Err(corrupt(format!("group {group}: block bitmap marks metadata block {block} free")));
            }
            let bitmap = self.bitmap(BitmapKind::Block, group)?;
            disk::put_bit(&mut bitmap.data, bit, true);
            bitmap.dirty = true;
            self.gd_add(group, gd::FREE_BLOCKS_COUNT, -1);
            self.sb_add(sb::FREE_BLOCKS_COUNT, -1);
            self.layout_changes += 1;
            return Ok(block);
        }
        Err(Error::NoSpace)
    }

    /// Returns a block to its group's free pool.
    pub(crate) fn free_block(&mut self, block: u32) -> Result<()> {
        let g = self.geometry;
        self.check_block(block, || "freeing".into())?;
        if self.is_group_metadata(block) {
            return Err(corrupt(format!("a file claims metadata block {block}")));
        }
        let group = (block - g.first_data_block) / g.blocks_per_group;
        let bit = (block - g.first_data_block) % g.blocks_per_group;
        let bitmap = self.bitmap(BitmapKind::Block, group)?;
        if !disk::test_bit(&bitmap.data, bit) {
            return Err(corrupt(format!("block {block} is freed twice (already clear in group {group}'s bitmap)")));
        }
        disk::put_bit(&mut bitmap.data, bit, false);
        bitmap.dirty = true;
        self.gd_add(group, gd::FREE_BLOCKS_COUNT, 1);
        self.sb_add(sb::FREE_BLOCKS_COUNT, 1);
        self.layout_changes += 1;
        Ok(())
    }

    /// Allocates an inode, in `near`'s group when it has one free.
    pub(crate) fn allocate_inode(&mut self, near: InodeNumber, directory: bool) -> Result<InodeNumber> {
        let g = self.geometry;
        let start_group = (near.max(1) - 1) / g.inodes_per_group % g.group_count;
        for step in 0..g.group_count {
            let group = (start_group + step) % g.group_count;
            if self.gd_free_inodes(group) == 0 {
                continue;
            }
            let base = group * g.inodes_per_group;
            // Inodes below s_first_ino are reserved.
            let from = g.first_inode.saturating_sub(base + 1).min(g.inodes_per_group);
            let bitmap = self.bitmap(BitmapKind::Inode, group)?;
            let Some(bit) = disk::find_clear_bit(&bitmap.data, from, g.inodes_per_group) else {
                return Err(corrupt(format!(
                    "group {group}: descriptor counts {} free inodes, the bitmap none",
                    self.gd_free_inodes(group)
                )));
            };
            disk::put_bit(&mut bitmap.data, bit, true);
            bitmap.dirty = true;
            self.gd_add(group, gd::FREE_INODES_COUNT, -1);
            if directory {
                self.gd_add(group, gd::USED_DIRS_COUNT, 1);
            }
            self.sb_add(sb::FREE_INODES_COUNT, -1);
            return Ok(base + bit + 1);
        }
        Err(Error::NoSpace)
    }

    fn free_inode(&mut self, number: InodeNumber, directory: bool) -> Result<()> {
        let g = self.geometry;
        self.check_inode_number(number)?;
        let group = (number - 1) / g.inodes_per_group;
        let bit = (number - 1) % g.inodes_per_group;
        let bitmap = self.bitmap(BitmapKind::Inode, group)?;
        if !disk::test_bit(&bitmap.data, bit) {
            return Err(corrupt(format!("inode {number} is freed twice (already clear in group {group}'s bitmap)")));
        }
        disk::put_bit(&mut bitmap.data, bit, false);
        bitmap.dirty = true;
        self.gd_add(group, gd::FREE_INODES_COUNT, 1);
        if directory {
            self.gd_add(group, gd::USED_DIRS_COUNT, -1);
        }
        self.sb_add(sb::FREE_INODES_COUNT, 1);
        Ok(())
    }

    // ----- inodes -----

    fn check_inode_number(&self, number: InodeNumber) -> Result<()> {
        if number == 0 || number > self.geometry.inodes_count {
            return Err(corrupt(format!("inode number {number} outside 1..={}", self.geometry.inodes_count)));
        }
        Ok(())
    }

    fn inode_offset(&self, number: InodeNumber) -> Result<u64> {
        self.check_inode_number(number)?;
        let g = self.geometry;
        let group = (number - 1) / g.inodes_per_group;
        let index = (number - 1) % g.inodes_per_group;
        let table = self.gd_u32(group, gd::INODE_TABLE);
        Ok(g.block_offset(table) + u64::from(index) * u64::from(g.inode_size))
    }

    /// Reads an inode, whatever its state.
    pub(crate) fn read_inode(&mut self, number: InodeNumber) -> Result<RawInode> {
        let offset = self.inode_offset(number)?;
        let mut inode = RawInode::zeroed(number, self.geometry.inode_size as usize);
        self.device.read(offset, &mut inode.raw)?;
        Ok(inode)
    }

    /// Reads an inode that a directory entry or the caller names: it must be in use, and its
    /// block map must be one this crate reads.
    pub(crate) fn load_inode(&mut self, number: InodeNumber) -> Result<RawInode> {
        let inode = self.read_inode(number)?;
        if inode.links() == 0 || inode.mode() == 0 {
            return Err(corrupt(format!("inode {number} is not in use (mode {:#o}, links 0)", inode.mode())));
        }
        check_supported(&inode)?;
        Ok(inode)
    }

    pub(crate) fn write_inode(&mut self, inode: &RawInode) -> Result<()> {
        let offset = self.inode_offset(inode.number)?;
        self.write_at(offset, &inode.raw)?;
        Ok(())
    }

    /// A fresh in-use inode, not yet written: zeroed, with `mode`, one link per `links`, the
    /// current times and a new generation.
    pub(crate) fn new_inode(&mut self, number: InodeNumber, mode: u16, links: u16) -> RawInode {
        let mut inode = RawInode::zeroed(number, self.geometry.inode_size as usize);
        inode.set_mode(mode);
        inode.set_links(links);
        for field in [ino::ATIME, ino::CTIME, ino::MTIME] {
            inode.set_time(field, self.now);
        }
        self.next_generation = self.next_generation.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        inode.set_generation(self.next_generation);
        inode
    }

    /// Whether `i_block` holds block pointers (regular files, directories, slow symlinks) rather
    /// than a symlink target or a device number.
    pub(crate) fn has_block_map(&self, inode: &RawInode) -> bool {
        match inode.kind() {
            disk::S_IFREG | disk::S_IFDIR => true,
            disk::S_IFLNK => !self.is_fast_symlink(inode),
            _ => false,
        }
    }

    /// A symlink is fast when it holds no block except an attribute block (Linux's rule).
    pub(crate) fn is_fast_symlink(&self, inode: &RawInode) -> bool {
        let attribute_sectors = if inode.file_acl() != 0 { self.geometry.sectors_per_block() } else { 0 };
        inode.is_symlink() && inode.sectors() == attribute_sectors
    }

    /// `stat`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for an inode number out of range or a free inode; [`Error::Io`].
    pub fn stat(&mut self, number: InodeNumber) -> Result<Metadata> {
        self.load_inode(number).map(|inode| metadata(&inode))
    }

    /// The metadata of inode `number` if it names a file a client may hold: in the inode table,
    /// the root or not reserved (at or above `s_first_ino`, as Linux's ext2 checks an NFS file
    /// handle), and in use (a mode and a link). `None` otherwise, which a file server answers
    /// with "stale handle"; unlike [`stat`](Self::stat), a number from outside (a forged or old
    /// handle) is not corruption.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for an inode with extents or inline data; [`Error::Io`].
    pub fn find_inode(&mut self, number: InodeNumber) -> Result<Option<Metadata>> {
        Ok(self.held_inode(number)?.map(|inode| metadata(&inode)))
    }

    /// Inode `number` if it names a file a client may hold (see [`find_inode`](Self::find_inode)),
    /// read once.
    fn held_inode(&mut self, number: InodeNumber) -> Result<Option<RawInode>> {
        let reserved = number < self.geometry.first_inode && number != ROOT_INODE;
        if number == 0 || number > self.geometry.inodes_count || reserved {
            return Ok(None);
        }
        let inode = self.read_inode(number)?;
        if inode.links() == 0 || inode.mode() == 0 {
            return Ok(None);
        }
        check_supported(&inode)?;
        Ok(Some(inode))
    }

    /// Changes permissions, owner or times (`chmod`, `chown`, `utimes`); the inode's change time
    /// becomes now.
    ///
    /// # Errors
    /// [`Error::ReadOnly`], or as [`stat`](Self::stat).
    pub fn set_attributes(&mut self, number: InodeNumber, attributes: &Attributes) -> Result<()> {
        self.check_writable()?;
        let mut inode = self.load_inode(number)?;
        if let Some(permissions) = attributes.permissions {
            inode.set_mode(inode.kind() | (permissions & 0o7777));
        }
        if let Some(uid) = attributes.uid {
            inode.set_uid(uid);
        }
        if let Some(gid) = attributes.gid {
            inode.set_gid(gid);
        }
        if let Some(atime) = attributes.atime {
            inode.set_time(ino::ATIME, atime);
        }
        if let Some(mtime) = attributes.mtime {
            inode.set_time(ino::MTIME, mtime);
        }
        inode.set_time(ino::CTIME, self.now);
        self.write_inode(&inode)
    }

    // ----- block maps -----

    /// The path to logical block `index`: the `i_block` slot, then the index in each indirect
    /// level (`depth` of them).
    fn block_path(&self, index: u64) -> Result<(usize, [u64; 3], usize)> {
        let per = self.geometry.pointers_per_block();
        let direct = disk::DIRECT_BLOCKS as u64;
        if index < direct {
            return Ok((index as usize, [0; 3], 0));
        }
        let mut rest = index - direct;
        if rest < per {
            return Ok((disk::INDIRECT, [rest, 0, 0], 1));
        }
        rest -= per;
        if rest < per * per {
            return Ok((disk::INDIRECT + 1, [rest / per, rest % per, 0], 2));
        }
        rest -= per * per;
        if rest < per * per * per {
            return Ok((disk::INDIRECT + 2, [rest / (per * per), rest / per % per, rest % per], 3));
        }
        Err(Error::FileTooLarge)
    }

    /// The largest size a file's block map can describe.
    pub(crate) fn max_file_size(&self) -> u64 {
        let per = self.geometry.pointers_per_block();
        let blocks = disk::DIRECT_BLOCKS as u64 + per + per * per + per * per * per;
        blocks * u64::from(self.geometry.block_size)
    }

    fn read_pointer(&mut self, block: u32, index: u64) -> Result<u32> {
        let mut bytes = [0; 4];
        self.device.read(self.geometry.block_offset(block) + index * 4, &mut bytes)?;
        Ok(u32::from_le_bytes(bytes))
    }

    /// The physical block holding logical block `index` of `inode`; `None` for a hole.
    pub(crate) fn map_block(&mut self, inode: &RawInode, index: u64) -> Result<Option<u32>> {
        self.map_block_with(inode, index, None)
    }

    /// [`map_block`](Self::map_block), reading indirect blocks whole into `pointers` and
    /// reusing them there (for a caller that maps many blocks and changes none), or one pointer
    /// at a time without it.
    fn map_block_with(
        &mut self,
        inode: &RawInode,
        index: u64,
        mut pointers: Option<&mut PointerBlocks>,
    ) -> Result<Option<u32>> {
        let (slot, path, depth) = self.block_path(index)?;
        let mut block = inode.block(slot);
        for level in 0..=depth {
            if block == 0 {
                return Ok(None);
            }
            self.check_block(block, || format!("inode {} logical block {index}", inode.number))?;
            if let Some(&entry) = path.get(level).filter(|_| level < depth) {
                block = match pointers.as_deref_mut() {
                    None => self.read_pointer(block, entry)?,
                    Some(cached) => {
                        let held = &mut cached.levels[level];
                        if held.as_ref().is_none_or(|(number, _)| *number != block) {
                            *held = Some((block, self.read_block(block)?));
                        }
                        held.as_ref().map_or(0, |(_, bytes)| get_u32(bytes, entry as usize * 4))
                    }
                };
            }
        }
        Ok(Some(block))
    }

    fn add_sectors(&self, inode: &mut RawInode, blocks: i64) -> Result<()> {
        let sectors = i64::from(inode.sectors()) + blocks * i64::from(self.geometry.sectors_per_block());
        inode.set_sectors(u32::try_from(sectors.max(0)).map_err(|_| Error::FileTooLarge)?);
        Ok(())
    }

    /// Allocates a block for `inode` and counts it in `i_blocks`.
    fn allocate_for(&mut self, inode: &mut RawInode, goal: u32) -> Result<u32> {
        let block = self.allocate_block(goal)?;
        if let Err(error) = self.add_sectors(inode, 1) {
            self.free_block(block)?;
            return Err(error);
        }
        Ok(block)
    }

    /// Like [`map_block`](Self::map_block), allocating the block and any missing indirect block.
    /// Returns the block and whether it is new (its contents are undefined then, unless
    /// `contents` gave them: a new block is written with them before anything points at it,
    /// as a directory's block must be, where a file's data may follow its pointer).
    pub(crate) fn map_block_allocating(
        &mut self,
        inode: &mut RawInode,
        index: u64,
        goal: u32,
        contents: Option<&[u8]>,
    ) -> Result<(u32, bool)> {
        let (slot, path, depth) = self.block_path(index)?;
        let mut block = inode.block(slot);
        let mut fresh = false;
        if block == 0 {
            block = self.allocate_for(inode, goal)?;
            if depth > 0 {
                self.fill_fresh_indirect(block)?;
            } else {
                self.fill_fresh(block, contents)?;
            }
            inode.set_block(slot, block);
            fresh = true;
        } else {
            self.check_block(block, || format!("inode {} logical block {index}", inode.number))?;
        }
        for level in 0..depth {
            let entry = path.get(level).copied().unwrap_or(0);
            let parent = block;
            block = self.read_pointer(parent, entry)?;
            fresh = block == 0;
            if fresh {
                block = self.allocate_for(inode, goal)?;
                if level + 1 < depth {
                    self.fill_fresh_indirect(block)?;
                } else {
                    self.fill_fresh(block, contents)?;
                }
                self.write_at(self.geometry.block_offset(parent) + entry * 4, &block.to_le_bytes())?;
            } else {
                self.check_block(block, || format!("inode {} logical block {index}", inode.number))?;
            }
        }
        Ok((block, fresh))
    }

    /// Writes `bytes` (zeros for an indirect block, a directory's first entries) into a block
    /// just allocated, and orders them before the pointer to it that follows; with `None` (a
    /// file's data, written by the caller) nothing.
    fn fill_fresh(&mut self, block: u32, bytes: Option<&[u8]>) -> Result<()> {
        match bytes {
            Some(bytes) => {
                self.write_block(block, bytes)?;
                self.barrier_block(block)
            }
            None => Ok(()),
        }
    }

    /// [`fill_fresh`](Self::fill_fresh) of an indirect block: zeros (made only here, as a block
    /// written again maps through indirect blocks that exist).
    fn fill_fresh_indirect(&mut self, block: u32) -> Result<()> {
        let zeros = vec![0; self.geometry.block_size as usize];
        self.fill_fresh(block, Some(&zeros))
    }

    /// Frees every block of `inode` from logical block `keep` on, indirect blocks that no longer
    /// map anything included, and updates `i_block` and `i_blocks` (the caller writes the inode).
    pub(crate) fn free_blocks_from(&mut self, inode: &mut RawInode, keep: u64) -> Result<()> {
        for slot in 0..disk::DIRECT_BLOCKS {
            let block = inode.block(slot);
            if slot as u64 >= keep && block != 0 {
                self.free_block(block)?;
                inode.set_block(slot, 0);
                self.add_sectors(inode, -1)?;
            }
        }
        let per = self.geometry.pointers_per_block();
        let mut base = disk::DIRECT_BLOCKS as u64;
        let mut span = per;
        for depth in 1..=3 {
            let slot = disk::INDIRECT + depth - 1;
            let block = inode.block(slot);
            if block != 0 && keep < base + span {
                self.check_block(block, || format!("inode {} indirect pointer {slot}", inode.number))?;
                let freed = self.free_tree(inode.number, block, depth, keep.saturating_sub(base))?;
                self.add_sectors(inode, -(freed as i64))?;
                if keep <= base {
                    inode.set_block(slot, 0);
                }
            }
            base += span;
            span *= per;
        }
        Ok(())
    }

    /// Frees the blocks under indirect block `block` (`depth` levels above the data) that map
    /// logical blocks from `keep` on (relative to the subtree), and `block` itself when `keep`
    /// is zero. Returns the number of blocks freed.
    fn free_tree(&mut self, number: InodeNumber, block: u32, depth: usize, keep: u64) -> Result<u64> {
        let per = self.geometry.pointers_per_block();
        let child_span = per.pow(depth as u32 - 1);
        let mut pointers = self.read_block(block)?;
        let mut freed = 0;
        let mut changed = false;
        for index in 0..per {
            let child = get_u32(&pointers, index as usize * 4);
            let child_base = index * child_span;
            if child == 0 || keep >= child_base + child_span {
                continue;
            }
            self.check_block(child, || format!("inode {number} indirect block {block} entry {index}"))?;
            if depth > 1 {
                freed += self.free_tree(number, child, depth - 1, keep.saturating_sub(child_base))?;
            } else {
                self.free_block(child)?;
                freed += 1;
            }
            if keep <= child_base {
                set_u32(&mut pointers, index as usize * 4, 0);
                changed = true;
            }
        }
        if keep == 0 {
            self.free_block(block)?;
            freed += 1;
        } else if changed {
            self.write_block(block, &pointers)?;
        }
        Ok(freed)
    }

    /// Frees everything an inode holds and the inode itself (its last link is gone).
    pub(crate) fn release_inode(&mut self, mut inode: RawInode) -> Result<()> {
        let directory = inode.is_dir();
        if self.has_block_map(&inode) {
            self.free_blocks_from(&mut inode, 0)?;
        }
        let attributes = inode.file_acl();
        if attributes != 0 {
            self.check_block(attributes, || format!("inode {} attribute block", inode.number))?;
            let mut block = self.read_block(attributes)?;
            let references = get_u32(&block, disk::XATTR_REFCOUNT);
            if get_u32(&block, 0) == disk::XATTR_MAGIC && references > 1 {
                set_u32(&mut block, disk::XATTR_REFCOUNT, references - 1);
                self.write_block(attributes, &block)?;
            } else {
                self.free_block(attributes)?;
            }
            inode.set_file_acl(0);
            self.add_sectors(&mut inode, -1)?;
        }
        inode.set_links(0);
        inode.set_size(0);
        self.layout_changes += 1;
        inode.set_time(ino::DTIME, self.now.max(1));
        inode.set_time(ino::CTIME, self.now);
        self.write_inode(&inode)?;
        self.free_inode(inode.number, directory)?;
        // Its blocks and its number may be given to another file: only once it is gone.
        self.barrier()
    }

    /// Gives back a just-allocated inode after a later step failed.
    pub(crate) fn abandon_inode(&mut self, number: InodeNumber, directory: bool) -> Result<()> {
        let mut inode = RawInode::zeroed(number, self.geometry.inode_size as usize);
        inode.set_time(ino::DTIME, self.now.max(1));
        self.write_inode(&inode)?;
        self.free_inode(number, directory)
    }

    // ----- file data -----

    /// Reads up to `buf.len()` bytes of a regular file from `offset`; returns how many (fewer at
    /// the end of the file). Holes read as zeros.
    ///
    /// # Errors
    /// [`Error::IsDirectory`], [`Error::InvalidArgument`] for other non-regular files,
    /// [`Error::Corrupt`] for a bad block pointer, [`Error::Io`].
    pub fn read(&mut self, number: InodeNumber, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let inode = self.load_inode(number)?;
        check_regular(&inode)?;
        let size = inode.size();
        if offset >= size {
            return Ok(0);
        }
        let len = buf.len().min(usize::try_from(size - offset).unwrap_or(usize::MAX));
        let mut pointers = PointerBlocks::default();
        let mut done = 0;
        while done < len {
            let extent = self.next_extent(&inode, offset + done as u64, (len - done) as u64, &mut pointers)?;
            let chunk = extent.len as usize;
            let out = buf.get_mut(done..done + chunk).unwrap_or(&mut []);
            match extent.device_offset {
                Some(at) => self.device.read(at, out)?,
                None => out.fill(0),
            }
            done += chunk;
        }
        Ok(len)
    }

    /// Where the bytes of a regular file from `offset` (up to `len` of them, fewer at its end)
    /// lie on the device: runs of bytes that are contiguous there, and holes, in file order.
    /// A caller that moves the bytes itself (a file server handing out the cache's blocks)
    /// reads the runs from the device and zeros for the holes.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    pub fn extents(&mut self, number: InodeNumber, offset: u64, len: u64) -> Result<Vec<Extent>> {
        let inode = self.load_inode(number)?;
        self.extents_of(&inode, offset, len)
    }

    /// [`extents`](Self::extents) and the size of regular file `number`, if it is one a client
    /// may hold (as [`find_inode`](Self::find_inode) says) and of generation `generation`:
    /// the inode read once, for a reader that keeps the map (a file server's open file).
    ///
    /// # Errors
    /// As [`extents`](Self::extents).
    pub fn find_extents(
        &mut self,
        number: InodeNumber,
        generation: u32,
        offset: u64,
        len: u64,
    ) -> Result<Option<(u64, Vec<Extent>)>> {
        match self.held_inode(number)? {
            Some(inode) if inode.generation() == generation => {
                Ok(Some((inode.size(), self.extents_of(&inode, offset, len)?)))
            }
            _ => Ok(None),
        }
    }

    fn extents_of(&mut self, inode: &RawInode, offset: u64, len: u64) -> Result<Vec<Extent>> {
        check_regular(inode)?;
        let len = len.min(inode.size().saturating_sub(offset));
        let mut pointers = PointerBlocks::default();
        let mut extents = Vec::new();
        let mut done = 0;
        while done < len {
            let extent = self.next_extent(inode, offset + done, len - done, &mut pointers)?;
            done += extent.len;
            extents.push(extent);
        }
        Ok(extents)
    }

    /// How many times since the mount a file's size or its blocks have changed (a block allocated
    /// or freed, a size set): a file's [`extents`](Self::extents) and size read while this was
    /// N are still right while it is N, so a reader may keep them (the `fs-ext2` component keeps
    /// its open files' maps this way). Other changes — names, modes, times, data written over
    /// blocks a file has — leave it.
    pub fn layout_changes(&self) -> u64 {
        self.layout_changes
    }

    /// The extent at `position` of `inode`, at most `len` bytes (and [`MAX_RUN`] blocks) long:
    /// blocks that lie one after the other on the device, or a hole. Each indirect block is
    /// read once, whole, into `pointers`: a large read costs a few device calls per run rather
    /// than two per block.
    fn next_extent(
        &mut self,
        inode: &RawInode,
        position: u64,
        len: u64,
        pointers: &mut PointerBlocks,
    ) -> Result<Extent> {
        let block_size = u64::from(self.geometry.block_size);
        let (index, within) = (position / block_size, position % block_size);
        let wanted = (within + len).div_ceil(block_size).min(MAX_RUN);
        let first = self.map_block_with(inode, index, Some(pointers))?;
        let mut run = 1;
        while run < wanted {
            if let Some(first) = first {
                // Block `index + run - 1` was just mapped: the blocks after it in its pointer
                // array are read from there, without a walk per block.
                run += self.following_in_array(
                    inode,
                    index + run - 1,
                    u64::from(first) + run - 1,
                    wanted - run,
                    pointers,
                )?;
                if run == wanted {
                    break;
                }
            }
            let next = self.map_block_with(inode, index + run, Some(pointers))?;
            let follows = match (first, next) {
                (Some(first), Some(next)) => u64::from(next) == u64::from(first) + run,
                (None, None) => true,
                _ => false,
            };
            if !follows {
                break;
            }
            run += 1;
        }
        Ok(Extent {
            offset: position,
            len: (run * block_size - within).min(len),
            device_offset: first.map(|block| self.geometry.block_offset(block) + within),
        })
    }

    /// How many of the entries after logical block `index`'s in its pointer array — the inode's
    /// direct pointers, or the indirect block that `map_block_with` left in `pointers` when it
    /// mapped `index` to `block` a moment ago — name the blocks after `block` on the device, one
    /// after the other: at most `most`.
    fn following_in_array(
        &self,
        inode: &RawInode,
        index: u64,
        block: u64,
        most: u64,
        pointers: &PointerBlocks,
    ) -> Result<u64> {
        let (slot, path, depth) = self.block_path(index)?;
        let (array, entry) = match depth {
            0 => (&inode.block_bytes()[..4 * disk::DIRECT_BLOCKS], slot),
            _ => match &pointers.levels[depth - 1] {
                Some((_, bytes)) => (bytes.as_slice(), path[depth - 1] as usize),
                None => return Ok(0),
            },
        };
        let entries = array.as_chunks::<4>().0;
        let end = entries.len().min(entry + 1 + most as usize);
        let mut count = 0;
        for raw in entries.get(entry + 1..end).unwrap_or(&[]) {
            if u64::from(u32::from_le_bytes(*raw)) != block + 1 + count {
                break;
            }
            count += 1;
        }
        // The run's blocks lie between `block` (checked) and its last: a run that goes on past the
        // end of the file system is corrupt, as any pointer there.
        if count > 0 {
            self.check_block((block + count) as u32, || {
                format!("inode {} logical block {}", inode.number, index + count)
            })?;
        }
        Ok(count)
    }

    /// Writes `data` into a regular file at `offset`, allocating blocks (and indirect blocks) as
    /// needed; a gap before `offset` stays a hole. On [`Error::NoSpace`] the file keeps what was
    /// written and its size covers it.
    ///
    /// # Errors
    /// [`Error::ReadOnly`], [`Error::IsDirectory`], [`Error::InvalidArgument`] for other
    /// non-regular files, [`Error::NoSpace`], [`Error::FileTooLarge`], [`Error::Corrupt`],
    /// [`Error::Io`].
    pub fn write(&mut self, number: InodeNumber, offset: u64, data: &[u8]) -> Result<()> {
        self.check_writable()?;
        let mut inode = self.load_inode(number)?;
        check_regular(&inode)?;
        let end = offset.checked_add(data.len() as u64).ok_or(Error::FileTooLarge)?;
        if end > self.max_file_size() {
            return Err(Error::FileTooLarge);
        }
        if data.is_empty() {
            return Ok(());
        }
        let result = self.write_data(&mut inode, offset, data);
        inode.set_time(ino::MTIME, self.now);
        inode.set_time(ino::CTIME, self.now);
        self.note_file_size(inode.size());
        self.write_inode(&inode)?;
        result
    }

    /// Writes `data` at `offset` of the file, allocating blocks as needed. Whole blocks that lie
    /// one after the other on the device are written together, in one device write (a 32 KiB
    /// write is one call to the buffer cache, not eight); a run is written before an error is
    /// returned, so that no block the inode now claims keeps a freed block's old contents.
    fn write_data(&mut self, inode: &mut RawInode, offset: u64, data: &[u8]) -> Result<()> {
        let block_size = u64::from(self.geometry.block_size);
        // New blocks go after the file's block before the write, where the last write left off
        // (the group's first block would have the allocator search past the file every time).
        let before = match (offset / block_size).checked_sub(1) {
            Some(index) => self.map_block(inode, index)?,
            None => None,
        };
        let mut goal = before.map_or_else(|| self.inode_goal(inode.number), |block| block.saturating_add(1));
        // Whole blocks mapped and not written yet: the first one, and where its bytes start.
        let mut run: Option<(u32, usize)> = None;
        let mut done = 0;
        while done < data.len() {
            let position = offset + done as u64;
            let within = position % block_size;
            let chunk = ((block_size - within) as usize).min(data.len() - done);
            let part = data.get(done..done + chunk).unwrap_or(&[]);
            let (block, fresh) = match self.map_block_allocating(inode, position / block_size, goal, None) {
                Ok(mapped) => mapped,
                Err(error) => {
                    self.write_run(run, data, done)?;
                    return Err(error);
                }
            };
            let follows = run.is_some_and(|(first, start)| {
                u64::from(first) + (done - start) as u64 / block_size == u64::from(block)
            });
            if chunk as u64 == block_size && follows {
                // The run goes on.
            } else if chunk as u64 == block_size {
                self.write_run(run, data, done)?;
                run = Some((block, done));
            } else if fresh {
                self.write_run(run.take(), data, done)?;
                let mut whole = vec![0; block_size as usize];
                disk::set_bytes(&mut whole, within as usize, part);
                self.write_block(block, &whole)?;
            } else {
                self.write_run(run.take(), data, done)?;
                self.write_at(self.geometry.block_offset(block) + within, part)?;
            }
            done += chunk;
            if position + chunk as u64 > inode.size() {
                inode.set_size(position + chunk as u64);
                self.layout_changes += 1;
            }
            goal = block.saturating_add(1);
        }
        self.write_run(run, data, done)
    }

    /// Writes a run of whole blocks of `write_data`: from `first` on, the bytes of `data` from
    /// `start` to `end`.
    fn write_run(&mut self, run: Option<(u32, usize)>, data: &[u8], end: usize) -> Result<()> {
        match run {
            Some((first, start)) => self.write_block(first, data.get(start..end).unwrap_or(&[])),
            None => Ok(()),
        }
    }

    /// The first block of the inode's group: where its data should go.
    pub(crate) fn inode_goal(&self, number: InodeNumber) -> u32 {
        let g = self.geometry;
        let group = (number.max(1) - 1) / g.inodes_per_group;
        g.group_first_block(group.min(g.group_count - 1))
    }

    /// Sets the size of a regular file: shrinking frees the blocks past the end (and zeroes the
    /// rest of the last block), growing leaves a hole.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    pub fn truncate(&mut self, number: InodeNumber, size: u64) -> Result<()> {
        self.check_writable()?;
        let mut inode = self.load_inode(number)?;
        check_regular(&inode)?;
        if size > self.max_file_size() {
            return Err(Error::FileTooLarge);
        }
        let block_size = u64::from(self.geometry.block_size);
        let shrinks = size < inode.size();
        if shrinks {
            let keep = size.div_ceil(block_size);
            self.free_blocks_from(&mut inode, keep)?;
            let within = size % block_size;
            if within != 0
                && let Some(block) = self.map_block(&inode, size / block_size)?
            {
                let zeros = vec![0; (block_size - within) as usize];
                self.write_at(self.geometry.block_offset(block) + within, &zeros)?;
            }
        }
        inode.set_size(size);
        self.layout_changes += 1;
        inode.set_time(ino::MTIME, self.now);
        inode.set_time(ino::CTIME, self.now);
        self.note_file_size(size);
        self.write_inode(&inode)?;
        // The freed blocks may be given to another file: only once this inode lets them go.
        if shrinks { self.barrier() } else { Ok(()) }
    }
}

/// An inode's [`Metadata`].
fn metadata(inode: &RawInode) -> Metadata {
    Metadata {
        inode: inode.number,
        file_type: FileType::from_mode(inode.mode()),
        mode: inode.mode(),
        size: inode.size(),
        links: inode.links(),
        uid: inode.uid(),
        gid: inode.gid(),
        atime: inode.time(ino::ATIME),
        mtime: inode.time(ino::MTIME),
        ctime: inode.time(ino::CTIME),
        blocks: u64::from(inode.sectors()),
        generation: inode.generation(),
    }
}

/// An inode whose block map this crate reads: not one with extents or inline data.
fn check_supported(inode: &RawInode) -> Result<()> {
    if inode.flags() & (disk::FLAG_EXTENTS | disk::FLAG_INLINE_DATA) != 0 {
        return Err(Error::Unsupported(format!("inode {} uses extents or inline data", inode.number)));
    }
    Ok(())
}

fn check_regular(inode: &RawInode) -> Result<()> {
    match inode.kind() {
        disk::S_IFREG => Ok(()),
        disk::S_IFDIR => Err(Error::IsDirectory),
        _ => Err(Error::InvalidArgument("not a regular file")),
    }
}
