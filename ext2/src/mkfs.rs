//! Making a file system: the layout `mke2fs -t ext2 -O ^resize_inode,^dir_index,^ext_attr`
//! produces (revision 1, sparse superblock copies, large_file, optionally filetype), with the
//! root directory and `lost+found`.

use alloc::vec;
use alloc::vec::Vec;

use crate::device::BlockDevice;
use crate::disk::{self, RawInode, gd, ino, sb, set_u16, set_u32};
use crate::fs::ROOT_INODE;
use crate::{Error, Result};

/// How [`mkfs`] lays out a file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MkfsOptions {
    /// Bytes per block: 1024, 2048 or 4096.
    pub block_size: u32,
    /// One inode per this many bytes of device (mke2fs's inode ratio), 1024 or more.
    pub bytes_per_inode: u32,
    /// Bytes per inode record: 128 or 256.
    pub inode_size: u16,
    /// Percentage of blocks reserved for the superuser.
    pub reserved_percent: u8,
    /// Record file types in directory entries (the filetype feature).
    pub filetype: bool,
    /// The volume label (up to 16 bytes).
    pub volume_name: [u8; 16],
    /// The file system's UUID; all zeros picks one from `time` and the size.
    pub uuid: [u8; 16],
    /// Creation time, seconds since 1970.
    pub time: u32,
}

impl Default for MkfsOptions {
    fn default() -> Self {
        MkfsOptions {
            block_size: 4096,
            bytes_per_inode: 16384,
            inode_size: 256,
            reserved_percent: 5,
            filetype: true,
            volume_name: [0; 16],
            uuid: [0; 16],
            time: 0,
        }
    }
}

/// The inode of `lost+found`, the first non-reserved one.
const LOST_AND_FOUND_INODE: u32 = disk::GOOD_OLD_FIRST_INODE;

/// Makes an empty ext2 file system on the whole of `device`.
///
/// # Errors
/// [`Error::InvalidArgument`] for a block size, inode size or ratio out of range, or a device too
/// small for one group's metadata; [`Error::Io`].
pub fn mkfs<D: BlockDevice + ?Sized>(device: &mut D, options: &MkfsOptions) -> Result<()> {
    let block_size = options.block_size;
    if !matches!(block_size, 1024 | 2048 | 4096) {
        return Err(Error::InvalidArgument("block size must be 1024, 2048 or 4096"));
    }
    let inode_size = u32::from(options.inode_size);
    if !matches!(inode_size, 128 | 256) {
        return Err(Error::InvalidArgument("inode size must be 128 or 256"));
    }
    if options.bytes_per_inode < 1024 || options.reserved_percent > 50 {
        return Err(Error::InvalidArgument("bytes per inode below 1024 or more than 50% reserved"));
    }
    let first_data_block = u32::from(block_size == 1024);
    let blocks_per_group = block_size * 8;
    // lost+found gets 16 KiB (at least two blocks), as mke2fs gives it.
    let lost_found_blocks = (16 * 1024 / block_size).clamp(2, disk::DIRECT_BLOCKS as u32);
    let mut blocks_count = u32::try_from(device.size() / u64::from(block_size)).unwrap_or(u32::MAX);
    let layout = loop {
        if blocks_count < first_data_block + 16 {
            return Err(Error::InvalidArgument("the device is too small for a file system"));
        }
        let layout = Layout::new(blocks_count, block_size, first_data_block, blocks_per_group, inode_size, options);
        let last = layout.group_count - 1;
        let last_blocks = layout.group_blocks(last);
        // Drop a last group too small to hold its metadata and some data, as mke2fs does.
        if layout.group_count > 1 && last_blocks < layout.overhead(last) + 50 {
            blocks_count -= last_blocks;
            continue;
        }
        if layout.group_blocks(0) < layout.overhead(0) + 1 + lost_found_blocks + 16 {
            return Err(Error::InvalidArgument("the device is too small for a file system"));
        }
        break layout;
    };

    let block_size_usize = block_size as usize;
    let zeros = vec![0u8; block_size_usize * 16];
    let mut descriptors = vec![0u8; layout.group_count as usize * disk::GROUP_DESCRIPTOR_SIZE];
    let mut free_blocks_total = 0u32;
    let root_block = layout.data_start(0);
    let lost_found_first = root_block + 1;
    for group in 0..layout.group_count {
        let first = layout.group_first_block(group);
        let blocks = layout.group_blocks(group);
        let block_bitmap = first + layout.super_and_gdt(group);
        let inode_bitmap = block_bitmap + 1;
        let inode_table = inode_bitmap + 1;
        let mut used = layout.overhead(group);
        if group == 0 {
            used += 1 + lost_found_blocks;
        }
        let mut bitmap = vec![0u8; block_size_usize];
        for bit in (0..used).chain(blocks..block_size * 8) {
            disk::put_bit(&mut bitmap, bit, true);
        }
        write_at(device, u64::from(block_bitmap) * u64::from(block_size), &bitmap)?;
        let mut bitmap = vec![0u8; block_size_usize];
        let reserved_inodes = if group == 0 { LOST_AND_FOUND_INODE } else { 0 };
        for bit in (0..reserved_inodes).chain(layout.inodes_per_group..block_size * 8) {
            disk::put_bit(&mut bitmap, bit, true);
        }
        write_at(device, u64::from(inode_bitmap) * u64::from(block_size), &bitmap)?;
        let mut table_block = 0;
        while table_block < layout.inode_table_blocks {
            let count = (layout.inode_table_blocks - table_block).min(16);
            let offset = u64::from(inode_table + table_block) * u64::from(block_size);
            write_at(device, offset, zeros.get(..count as usize * block_size_usize).unwrap_or(&[]))?;
            table_block += count;
        }
        let descriptor =
            &mut descriptors[group as usize * disk::GROUP_DESCRIPTOR_SIZE..][..disk::GROUP_DESCRIPTOR_SIZE];
        set_u32(descriptor, gd::BLOCK_BITMAP, block_bitmap);
        set_u32(descriptor, gd::INODE_BITMAP, inode_bitmap);
        set_u32(descriptor, gd::INODE_TABLE, inode_table);
        set_u16(descriptor, gd::FREE_BLOCKS_COUNT, (blocks - used) as u16);
        set_u16(descriptor, gd::FREE_INODES_COUNT, (layout.inodes_per_group - reserved_inodes) as u16);
        set_u16(descriptor, gd::USED_DIRS_COUNT, if group == 0 { 2 } else { 0 });
        free_blocks_total += blocks - used;
    }

    // The root directory and lost+found.
    let file_type = if options.filetype { disk::FT_DIR } else { disk::FT_UNKNOWN };
    let mut root = vec![0u8; block_size_usize];
    disk::put_dirent(&mut root, 0, ROOT_INODE, 12, b".", file_type);
    disk::put_dirent(&mut root, 12, ROOT_INODE, 12, b"..", file_type);
    disk::put_dirent(&mut root, 24, LOST_AND_FOUND_INODE, block_size_usize - 24, b"lost+found", file_type);
    write_at(device, u64::from(root_block) * u64::from(block_size), &root)?;
    for index in 0..lost_found_blocks {
        let mut data = vec![0u8; block_size_usize];
        if index == 0 {
            disk::put_dirent(&mut data, 0, LOST_AND_FOUND_INODE, 12, b".", file_type);
            disk::put_dirent(&mut data, 12, ROOT_INODE, block_size_usize - 12, b"..", file_type);
        } else {
            disk::put_dirent(&mut data, 0, 0, block_size_usize, b"", 0);
        }
        write_at(device, u64::from(lost_found_first + index) * u64::from(block_size), &data)?;
    }
    let inode_offset = |number: u32| {
        let table = disk::get_u32(&descriptors, gd::INODE_TABLE);
        u64::from(table) * u64::from(block_size) + u64::from(number - 1) * u64::from(inode_size)
    };
    let directory_inode = |number: u32, mode: u16, links: u16, blocks: &[u32]| {
        let mut inode = RawInode::zeroed(number, inode_size as usize);
        inode.set_mode(disk::S_IFDIR | mode);
        inode.set_links(links);
        inode.set_size(u64::from(block_size) * blocks.len() as u64);
        inode.set_sectors(block_size / 512 * blocks.len() as u32);
        for field in [ino::ATIME, ino::CTIME, ino::MTIME] {
            inode.set_time(field, options.time);
        }
        for (index, &block) in blocks.iter().enumerate() {
            inode.set_block(index, block);
        }
        inode
    };
    let root_inode = directory_inode(ROOT_INODE, 0o755, 3, &[root_block]);
    write_at(device, inode_offset(ROOT_INODE), &root_inode.raw)?;
    let lost_found_list: Vec<u32> = (0..lost_found_blocks).map(|index| lost_found_first + index).collect();
    let lost_found = directory_inode(LOST_AND_FOUND_INODE, 0o700, 2, &lost_found_list);
    write_at(device, inode_offset(LOST_AND_FOUND_INODE), &lost_found.raw)?;

    // The superblock, written with the descriptor table into every group that keeps a copy.
    let inodes_count = layout.inodes_per_group * layout.group_count;
    let mut superblock = vec![0u8; disk::SUPERBLOCK_SIZE];
    let s = &mut superblock;
    set_u32(s, sb::INODES_COUNT, inodes_count);
    set_u32(s, sb::BLOCKS_COUNT, blocks_count);
    set_u32(s, sb::R_BLOCKS_COUNT, (u64::from(blocks_count) * u64::from(options.reserved_percent) / 100) as u32);
    set_u32(s, sb::FREE_BLOCKS_COUNT, free_blocks_total);
    set_u32(s, sb::FREE_INODES_COUNT, inodes_count - LOST_AND_FOUND_INODE);
    set_u32(s, sb::FIRST_DATA_BLOCK, first_data_block);
    set_u32(s, sb::LOG_BLOCK_SIZE, (block_size / 1024).trailing_zeros());
    set_u32(s, sb::LOG_FRAG_SIZE, (block_size / 1024).trailing_zeros());
    set_u32(s, sb::BLOCKS_PER_GROUP, blocks_per_group);
    set_u32(s, sb::FRAGS_PER_GROUP, blocks_per_group);
    set_u32(s, sb::INODES_PER_GROUP, layout.inodes_per_group);
    set_u32(s, sb::WTIME, options.time);
    set_u16(s, sb::MAX_MNT_COUNT, u16::MAX);
    set_u16(s, sb::MAGIC, disk::MAGIC);
    set_u16(s, sb::STATE, 1);
    set_u16(s, sb::ERRORS, 1);
    set_u32(s, sb::LASTCHECK, options.time);
    set_u32(s, sb::REV_LEVEL, 1);
    set_u32(s, sb::FIRST_INO, disk::GOOD_OLD_FIRST_INODE);
    set_u16(s, sb::INODE_SIZE, options.inode_size);
    set_u32(s, sb::FEATURE_INCOMPAT, if options.filetype { disk::INCOMPAT_FILETYPE } else { 0 });
    set_u32(s, sb::FEATURE_RO_COMPAT, disk::RO_COMPAT_SPARSE_SUPER | disk::RO_COMPAT_LARGE_FILE);
    disk::set_bytes(s, sb::UUID, &uuid(options, blocks_count));
    disk::set_bytes(s, sb::VOLUME_NAME, &options.volume_name);
    set_u32(s, sb::MKFS_TIME, options.time);
    if inode_size >= 160 {
        set_u16(s, sb::MIN_EXTRA_ISIZE, 32);
        set_u16(s, sb::WANT_EXTRA_ISIZE, 32);
    }
    for group in (0..layout.group_count).filter(|&group| disk::sparse_group_has_super(group)) {
        set_u16(&mut superblock, sb::BLOCK_GROUP_NR, group as u16);
        let first = layout.group_first_block(group);
        let offset = if group == 0 { disk::SUPERBLOCK_OFFSET } else { u64::from(first) * u64::from(block_size) };
        write_at(device, offset, &superblock)?;
        write_at(device, u64::from(first + 1) * u64::from(block_size), &descriptors)?;
    }
    device.flush()?;
    Ok(())
}

fn write_at<D: BlockDevice + ?Sized>(device: &mut D, offset: u64, data: &[u8]) -> Result<()> {
    device.write(offset, data).map_err(Error::Io)
}

/// A version-4 style UUID from the options (the crate has no randomness of its own).
fn uuid(options: &MkfsOptions, blocks_count: u32) -> [u8; 16] {
    if options.uuid != [0; 16] {
        return options.uuid;
    }
    let mut state = (u64::from(options.time) << 32 | u64::from(blocks_count)) ^ 0x9E37_79B9_7F4A_7C15;
    let mut out = [0u8; 16];
    for chunk in out.chunks_mut(8) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        chunk.copy_from_slice(&state.to_le_bytes());
    }
    out[6] = (out[6] & 0x0F) | 0x40;
    out[8] = (out[8] & 0x3F) | 0x80;
    out
}

/// Group sizes and metadata placement for a given block count.
#[derive(Debug, Clone, Copy)]
struct Layout {
    blocks_count: u32,
    first_data_block: u32,
    blocks_per_group: u32,
    group_count: u32,
    inodes_per_group: u32,
    inode_table_blocks: u32,
    gdt_blocks: u32,
}

impl Layout {
    fn new(
        blocks_count: u32,
        block_size: u32,
        first_data_block: u32,
        blocks_per_group: u32,
        inode_size: u32,
        options: &MkfsOptions,
    ) -> Self {
        let group_count = (blocks_count - first_data_block).div_ceil(blocks_per_group);
        let wanted_inodes = u64::from(blocks_count) * u64::from(block_size) / u64::from(options.bytes_per_inode);
        // Whole inode-table blocks, a multiple of 8 inodes, at least 16 per group, at most a
        // bitmap block's worth.
        let granule = (block_size / inode_size).max(8);
        let per_group = wanted_inodes.div_ceil(u64::from(group_count)).max(16);
        let per_group = per_group.div_ceil(u64::from(granule)) * u64::from(granule);
        let inodes_per_group = per_group.min(u64::from(block_size * 8)).min(u64::from(u32::MAX / group_count)) as u32;
        Layout {
            blocks_count,
            first_data_block,
            blocks_per_group,
            group_count,
            inodes_per_group,
            inode_table_blocks: (inodes_per_group * inode_size).div_ceil(block_size),
            gdt_blocks: (group_count * disk::GROUP_DESCRIPTOR_SIZE as u32).div_ceil(block_size),
        }
    }

    fn group_first_block(&self, group: u32) -> u32 {
        self.first_data_block + group * self.blocks_per_group
    }

    fn group_blocks(&self, group: u32) -> u32 {
        (self.blocks_count - self.group_first_block(group)).min(self.blocks_per_group)
    }

    fn super_and_gdt(&self, group: u32) -> u32 {
        if disk::sparse_group_has_super(group) { 1 + self.gdt_blocks } else { 0 }
    }

    /// Blocks of `group` taken by metadata, all at its start.
    fn overhead(&self, group: u32) -> u32 {
        self.super_and_gdt(group) + 2 + self.inode_table_blocks
    }

    fn data_start(&self, group: u32) -> u32 {
        self.group_first_block(group) + self.overhead(group)
    }
}
