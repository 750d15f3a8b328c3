//! The ext2 on-disk format: field offsets, feature bits, and raw views of the superblock, group
//! descriptors, inodes and directory entries.
//!
//! Every structure is kept as its raw little-endian bytes and read through accessors, so fields
//! this crate does not interpret survive a read-modify-write unchanged. The accessors never
//! panic: a field outside the buffer reads as zero and is not written.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// Byte offset of the primary superblock.
pub const SUPERBLOCK_OFFSET: u64 = 1024;
/// Size of the superblock.
pub const SUPERBLOCK_SIZE: usize = 1024;
/// `s_magic`.
pub const MAGIC: u16 = 0xEF53;
/// Size of a group descriptor without the 64bit feature.
pub const GROUP_DESCRIPTOR_SIZE: usize = 32;
/// Inode size of revision 0.
pub const GOOD_OLD_INODE_SIZE: u32 = 128;
/// First non-reserved inode of revision 0.
pub const GOOD_OLD_FIRST_INODE: u32 = 11;
/// Block pointers held in the inode itself.
pub const DIRECT_BLOCKS: usize = 12;
/// Index of the single, double and triple indirect pointers in `i_block`.
pub const INDIRECT: usize = 12;
/// Number of entries of `i_block`.
pub const BLOCK_POINTERS: usize = 15;
/// Most links an inode may have (`EXT2_LINK_MAX`).
pub const LINK_MAX: u16 = 32_000;
/// `s_state`: cleanly unmounted (or checked) / errors detected.
pub const STATE_VALID: u16 = 1;
pub const STATE_ERROR: u16 = 2;
/// The `s_max_mnt_count` Linux gives a file system whose field is 0 (`EXT2_DFL_MAX_MNT_COUNT`).
pub const DEFAULT_MAX_MOUNT_COUNT: u16 = 20;
/// Longest name of a directory entry.
pub const NAME_MAX: usize = 255;
/// A symbolic link target shorter than this lives in `i_block` (a fast symlink).
pub const FAST_SYMLINK_MAX: usize = 60;

/// Superblock field offsets.
pub mod sb {
    pub const INODES_COUNT: usize = 0;
    pub const BLOCKS_COUNT: usize = 4;
    pub const R_BLOCKS_COUNT: usize = 8;
    pub const FREE_BLOCKS_COUNT: usize = 12;
    pub const FREE_INODES_COUNT: usize = 16;
    pub const FIRST_DATA_BLOCK: usize = 20;
    pub const LOG_BLOCK_SIZE: usize = 24;
    pub const LOG_FRAG_SIZE: usize = 28;
    pub const BLOCKS_PER_GROUP: usize = 32;
    pub const FRAGS_PER_GROUP: usize = 36;
    pub const INODES_PER_GROUP: usize = 40;
    pub const MTIME: usize = 44;
    pub const WTIME: usize = 48;
    pub const MNT_COUNT: usize = 52;
    pub const MAX_MNT_COUNT: usize = 54;
    pub const MAGIC: usize = 56;
    pub const STATE: usize = 58;
    pub const ERRORS: usize = 60;
    pub const LASTCHECK: usize = 64;
    pub const REV_LEVEL: usize = 76;
    pub const FIRST_INO: usize = 84;
    pub const INODE_SIZE: usize = 88;
    pub const BLOCK_GROUP_NR: usize = 90;
    pub const FEATURE_COMPAT: usize = 92;
    pub const FEATURE_INCOMPAT: usize = 96;
    pub const FEATURE_RO_COMPAT: usize = 100;
    pub const UUID: usize = 104;
    pub const VOLUME_NAME: usize = 120;
    pub const RESERVED_GDT_BLOCKS: usize = 206;
    pub const MKFS_TIME: usize = 264;
    pub const MIN_EXTRA_ISIZE: usize = 348;
    pub const WANT_EXTRA_ISIZE: usize = 350;
}

/// Group descriptor field offsets.
pub mod gd {
    pub const BLOCK_BITMAP: usize = 0;
    pub const INODE_BITMAP: usize = 4;
    pub const INODE_TABLE: usize = 8;
    pub const FREE_BLOCKS_COUNT: usize = 12;
    pub const FREE_INODES_COUNT: usize = 14;
    pub const USED_DIRS_COUNT: usize = 16;
}

/// Inode field offsets.
pub mod ino {
    pub const MODE: usize = 0;
    pub const UID: usize = 2;
    pub const SIZE: usize = 4;
    pub const ATIME: usize = 8;
    pub const CTIME: usize = 12;
    pub const MTIME: usize = 16;
    pub const DTIME: usize = 20;
    pub const GID: usize = 24;
    pub const LINKS_COUNT: usize = 26;
    pub const BLOCKS: usize = 28;
    pub const FLAGS: usize = 32;
    pub const BLOCK: usize = 40;
    pub const GENERATION: usize = 100;
    pub const FILE_ACL: usize = 104;
    pub const SIZE_HIGH: usize = 108;
    pub const UID_HIGH: usize = 120;
    pub const GID_HIGH: usize = 122;
}

/// `s_feature_compat` bits (all harmless to a reader and writer that ignores them).
pub const COMPAT_RESIZE_INODE: u32 = 0x0010;

/// `s_feature_incompat` bits.
pub const INCOMPAT_FILETYPE: u32 = 0x0002;
const INCOMPAT_NAMES: [(u32, &str); 16] = [
    (0x0001, "compression"),
    (0x0002, "filetype"),
    (0x0004, "needs_recovery"),
    (0x0008, "journal_dev"),
    (0x0010, "meta_bg"),
    (0x0040, "extents"),
    (0x0080, "64bit"),
    (0x0100, "mmp"),
    (0x0200, "flex_bg"),
    (0x0400, "ea_inode"),
    (0x1000, "dirdata"),
    (0x2000, "metadata_csum_seed"),
    (0x4000, "large_dir"),
    (0x8000, "inline_data"),
    (0x10000, "encrypt"),
    (0x20000, "casefold"),
];

/// `s_feature_ro_compat` bits.
pub const RO_COMPAT_SPARSE_SUPER: u32 = 0x0001;
pub const RO_COMPAT_LARGE_FILE: u32 = 0x0002;
const RO_COMPAT_NAMES: [(u32, &str); 13] = [
    (0x0001, "sparse_super"),
    (0x0002, "large_file"),
    (0x0004, "btree_dir"),
    (0x0008, "huge_file"),
    (0x0010, "uninit_bg"),
    (0x0020, "dir_nlink"),
    (0x0040, "extra_isize"),
    (0x0100, "quota"),
    (0x0200, "bigalloc"),
    (0x0400, "metadata_csum"),
    (0x1000, "read-only"),
    (0x2000, "project"),
    (0x8000, "verity"),
];

/// The incompatible features in `bits`, by name (`feature 0x…` for unknown ones).
pub fn incompat_names(bits: u32) -> String {
    feature_names(bits, &INCOMPAT_NAMES)
}

/// The read-only compatible features in `bits`, by name.
pub fn ro_compat_names(bits: u32) -> String {
    feature_names(bits, &RO_COMPAT_NAMES)
}

fn feature_names(bits: u32, names: &[(u32, &str)]) -> String {
    let mut out = String::new();
    for bit in (0..32).map(|shift| 1u32 << shift).filter(|bit| bits & bit != 0) {
        if !out.is_empty() {
            out.push_str(", ");
        }
        match names.iter().find(|(known, _)| *known == bit) {
            Some((_, name)) => out.push_str(name),
            None => out.push_str(&alloc::format!("feature {bit:#x}")),
        }
    }
    out
}

/// `i_mode` file-type bits.
pub const S_IFMT: u16 = 0xF000;
pub const S_IFSOCK: u16 = 0xC000;
pub const S_IFLNK: u16 = 0xA000;
pub const S_IFREG: u16 = 0x8000;
pub const S_IFBLK: u16 = 0x6000;
pub const S_IFDIR: u16 = 0x4000;
pub const S_IFCHR: u16 = 0x2000;
pub const S_IFIFO: u16 = 0x1000;

/// `i_flags` bits that change how `i_block` is read; an inode with one is refused.
pub const FLAG_INDEX: u32 = 0x0000_1000;
pub const FLAG_EXTENTS: u32 = 0x0008_0000;
pub const FLAG_INLINE_DATA: u32 = 0x1000_0000;

/// Magic of an extended-attribute block, and the offset of its reference count.
pub const XATTR_MAGIC: u32 = 0xEA02_0000;
pub const XATTR_REFCOUNT: usize = 4;

/// Directory entry `file_type` values (with the filetype feature).
pub const FT_UNKNOWN: u8 = 0;
pub const FT_REG_FILE: u8 = 1;
pub const FT_DIR: u8 = 2;
pub const FT_CHRDEV: u8 = 3;
pub const FT_BLKDEV: u8 = 4;
pub const FT_FIFO: u8 = 5;
pub const FT_SOCK: u8 = 6;
pub const FT_SYMLINK: u8 = 7;

/// Size of a directory entry header (inode, rec_len, name_len, file_type).
pub const DIRENT_HEADER: usize = 8;

/// The smallest record that holds a name of `name_len` bytes.
pub fn dirent_len(name_len: usize) -> usize {
    (DIRENT_HEADER + name_len + 3) & !3
}

/// Reads a little-endian `u16`; zero outside `buf`.
pub fn get_u16(buf: &[u8], offset: usize) -> u16 {
    buf.get(offset..offset.saturating_add(2)).and_then(|b| b.try_into().ok()).map_or(0, u16::from_le_bytes)
}

/// Reads a little-endian `u32`; zero outside `buf`.
pub fn get_u32(buf: &[u8], offset: usize) -> u32 {
    buf.get(offset..offset.saturating_add(4)).and_then(|b| b.try_into().ok()).map_or(0, u32::from_le_bytes)
}

/// Writes a little-endian `u16`; nothing outside `buf`.
pub fn set_u16(buf: &mut [u8], offset: usize, value: u16) {
    if let Some(bytes) = buf.get_mut(offset..offset.saturating_add(2)) {
        bytes.copy_from_slice(&value.to_le_bytes());
    }
}

/// Writes a little-endian `u32`; nothing outside `buf`.
pub fn set_u32(buf: &mut [u8], offset: usize, value: u32) {
    if let Some(bytes) = buf.get_mut(offset..offset.saturating_add(4)) {
        bytes.copy_from_slice(&value.to_le_bytes());
    }
}

/// Reads one byte; zero outside `buf`.
pub fn get_u8(buf: &[u8], offset: usize) -> u8 {
    buf.get(offset).copied().unwrap_or(0)
}

/// Writes one byte; nothing outside `buf`.
pub fn set_u8(buf: &mut [u8], offset: usize, value: u8) {
    if let Some(byte) = buf.get_mut(offset) {
        *byte = value;
    }
}

/// Copies `src` into `buf` at `offset`, as far as it fits.
pub fn set_bytes(buf: &mut [u8], offset: usize, src: &[u8]) {
    if let Some(dst) = buf.get_mut(offset..offset.saturating_add(src.len())) {
        dst.copy_from_slice(src);
    }
}

/// Tests bit `bit` of a bitmap; bits outside it read as set (in use).
pub fn test_bit(map: &[u8], bit: u32) -> bool {
    map.get((bit / 8) as usize).is_none_or(|byte| byte & (1 << (bit % 8)) != 0)
}

/// Sets or clears bit `bit` of a bitmap; nothing outside it.
pub fn put_bit(map: &mut [u8], bit: u32, value: bool) {
    if let Some(byte) = map.get_mut((bit / 8) as usize) {
        if value {
            *byte |= 1 << (bit % 8);
        } else {
            *byte &= !(1 << (bit % 8));
        }
    }
}

/// The first clear bit in `from..to`; bits past the map count as set. Eight bytes at a time
/// where the range allows: a group's bitmap is searched from its start for each new file.
pub fn find_clear_bit(map: &[u8], from: u32, to: u32) -> Option<u32> {
    let to = to.min(u32::try_from(map.len().saturating_mul(8)).unwrap_or(u32::MAX));
    let mut bit = from;
    while bit < to {
        let at = (bit / 8) as usize;
        if bit.is_multiple_of(64)
            && let Some(word) = map.get(at..at + 8).and_then(|w| <[u8; 8]>::try_from(w).ok())
        {
            // Bit `n` of the map is bit `n % 8` of byte `n / 8`: a little-endian word's bit order.
            let word = u64::from_le_bytes(word);
            if word != u64::MAX {
                let found = bit + word.trailing_ones();
                return (found < to).then_some(found);
            }
            bit = bit.saturating_add(64);
        } else if !test_bit(map, bit) {
            return Some(bit);
        } else {
            bit += 1;
        }
    }
    None
}

/// Whether group `group` holds a superblock backup under the sparse_super rule (groups 0, 1 and
/// powers of 3, 5 and 7).
pub fn sparse_group_has_super(group: u32) -> bool {
    fn is_power_of(mut n: u32, base: u32) -> bool {
        while n > 1 && n.is_multiple_of(base) {
            n /= base;
        }
        n == 1
    }
    group <= 1 || is_power_of(group, 3) || is_power_of(group, 5) || is_power_of(group, 7)
}

/// The file type of a mode, as a directory entry records it.
pub fn file_type_of_mode(mode: u16) -> u8 {
    match mode & S_IFMT {
        S_IFREG => FT_REG_FILE,
        S_IFDIR => FT_DIR,
        S_IFCHR => FT_CHRDEV,
        S_IFBLK => FT_BLKDEV,
        S_IFIFO => FT_FIFO,
        S_IFSOCK => FT_SOCK,
        S_IFLNK => FT_SYMLINK,
        _ => FT_UNKNOWN,
    }
}

/// An inode as its raw bytes (`s_inode_size` of them), with its number.
#[derive(Debug, Clone)]
pub struct RawInode {
    /// The inode number.
    pub number: u32,
    /// The on-disk bytes.
    pub raw: Vec<u8>,
}

impl RawInode {
    /// A zeroed inode.
    pub fn zeroed(number: u32, inode_size: usize) -> Self {
        RawInode { number, raw: vec![0; inode_size] }
    }

    pub fn mode(&self) -> u16 {
        get_u16(&self.raw, ino::MODE)
    }

    pub fn set_mode(&mut self, mode: u16) {
        set_u16(&mut self.raw, ino::MODE, mode);
    }

    pub fn kind(&self) -> u16 {
        self.mode() & S_IFMT
    }

    pub fn is_dir(&self) -> bool {
        self.kind() == S_IFDIR
    }

    pub fn is_regular(&self) -> bool {
        self.kind() == S_IFREG
    }

    pub fn is_symlink(&self) -> bool {
        self.kind() == S_IFLNK
    }

    pub fn uid(&self) -> u32 {
        u32::from(get_u16(&self.raw, ino::UID)) | u32::from(get_u16(&self.raw, ino::UID_HIGH)) << 16
    }

    pub fn set_uid(&mut self, uid: u32) {
        set_u16(&mut self.raw, ino::UID, uid as u16);
        set_u16(&mut self.raw, ino::UID_HIGH, (uid >> 16) as u16);
    }

    pub fn gid(&self) -> u32 {
        u32::from(get_u16(&self.raw, ino::GID)) | u32::from(get_u16(&self.raw, ino::GID_HIGH)) << 16
    }

    pub fn set_gid(&mut self, gid: u32) {
        set_u16(&mut self.raw, ino::GID, gid as u16);
        set_u16(&mut self.raw, ino::GID_HIGH, (gid >> 16) as u16);
    }

    /// The size: 64 bits for regular files (`i_size_high`), 32 bits otherwise (where the high
    /// word is `i_dir_acl`).
    pub fn size(&self) -> u64 {
        let low = u64::from(get_u32(&self.raw, ino::SIZE));
        if self.is_regular() { low | u64::from(get_u32(&self.raw, ino::SIZE_HIGH)) << 32 } else { low }
    }

    pub fn set_size(&mut self, size: u64) {
        set_u32(&mut self.raw, ino::SIZE, size as u32);
        if self.is_regular() {
            set_u32(&mut self.raw, ino::SIZE_HIGH, (size >> 32) as u32);
        }
    }

    pub fn time(&self, field: usize) -> u32 {
        get_u32(&self.raw, field)
    }

    pub fn set_time(&mut self, field: usize, value: u32) {
        set_u32(&mut self.raw, field, value);
    }

    pub fn links(&self) -> u16 {
        get_u16(&self.raw, ino::LINKS_COUNT)
    }

    pub fn set_links(&mut self, links: u16) {
        set_u16(&mut self.raw, ino::LINKS_COUNT, links);
    }

    /// `i_blocks`: 512-byte sectors held, indirect and attribute blocks included.
    pub fn sectors(&self) -> u32 {
        get_u32(&self.raw, ino::BLOCKS)
    }

    pub fn set_sectors(&mut self, sectors: u32) {
        set_u32(&mut self.raw, ino::BLOCKS, sectors);
    }

    pub fn flags(&self) -> u32 {
        get_u32(&self.raw, ino::FLAGS)
    }

    pub fn set_flags(&mut self, flags: u32) {
        set_u32(&mut self.raw, ino::FLAGS, flags);
    }

    /// Entry `index` of `i_block`.
    pub fn block(&self, index: usize) -> u32 {
        get_u32(&self.raw, ino::BLOCK + 4 * index)
    }

    pub fn set_block(&mut self, index: usize, block: u32) {
        if index < BLOCK_POINTERS {
            set_u32(&mut self.raw, ino::BLOCK + 4 * index, block);
        }
    }

    /// The 60 bytes of `i_block` (a fast symlink's target).
    pub fn block_bytes(&self) -> &[u8] {
        self.raw.get(ino::BLOCK..ino::BLOCK + 4 * BLOCK_POINTERS).unwrap_or(&[])
    }

    pub fn block_bytes_mut(&mut self) -> &mut [u8] {
        self.raw.get_mut(ino::BLOCK..ino::BLOCK + 4 * BLOCK_POINTERS).unwrap_or(&mut [])
    }

    pub fn file_acl(&self) -> u32 {
        get_u32(&self.raw, ino::FILE_ACL)
    }

    pub fn set_file_acl(&mut self, block: u32) {
        set_u32(&mut self.raw, ino::FILE_ACL, block);
    }

    pub fn generation(&self) -> u32 {
        get_u32(&self.raw, ino::GENERATION)
    }

    pub fn set_generation(&mut self, generation: u32) {
        set_u32(&mut self.raw, ino::GENERATION, generation);
    }
}

/// Where the fields of one directory entry lie in its block, after checking.
#[derive(Debug, Clone, Copy)]
pub struct RawDirent {
    /// Offset of the entry in the block.
    pub offset: usize,
    /// `inode`; zero for an unused record.
    pub inode: u32,
    /// `rec_len`: the distance to the next entry.
    pub rec_len: usize,
    /// `name_len`.
    pub name_len: usize,
    /// `file_type` (zero without the filetype feature).
    pub file_type: u8,
}

impl RawDirent {
    /// The bytes of the name in `block`.
    pub fn name<'b>(&self, block: &'b [u8]) -> &'b [u8] {
        let start = self.offset + DIRENT_HEADER;
        block.get(start..start + self.name_len).unwrap_or(&[])
    }

    /// The bytes this entry needs; zero for an unused record.
    pub fn used_len(&self) -> usize {
        if self.inode == 0 { 0 } else { dirent_len(self.name_len) }
    }
}

/// Writes a directory entry at `offset` of `block`.
pub fn put_dirent(block: &mut [u8], offset: usize, inode: u32, rec_len: usize, name: &[u8], file_type: u8) {
    set_u32(block, offset, inode);
    set_u16(block, offset + 4, rec_len as u16);
    set_u8(block, offset + 6, name.len() as u8);
    set_u8(block, offset + 7, file_type);
    set_bytes(block, offset + DIRENT_HEADER, name);
}
