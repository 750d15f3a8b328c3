//! Unit tests over a [`MemoryDevice`]; the tests against Linux's e2fsprogs are in `tests/`.

use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

use crate::disk;
use crate::{Error, FileSystem, FileType, MemoryDevice, MkfsOptions, ROOT_INODE, mkfs};

fn fresh(block_size: u32) -> FileSystem<MemoryDevice> {
    let mut device = MemoryDevice::new(4 << 20);
    let options = MkfsOptions { block_size, bytes_per_inode: 4096, time: 1_000, ..Default::default() };
    mkfs(&mut device, &options).expect("mkfs");
    FileSystem::mount(device).expect("mount")
}

#[test]
fn mkfs_makes_root_and_lost_found() {
    for block_size in [1024, 2048, 4096] {
        let mut fs = fresh(block_size);
        let names: Vec<Vec<u8>> = fs.readdir(ROOT_INODE).expect("readdir").into_iter().map(|e| e.name).collect();
        assert_eq!(names, [b".".to_vec(), b"..".to_vec(), b"lost+found".to_vec()]);
        let lost_found = fs.lookup("/lost+found").expect("lost+found");
        let meta = fs.stat(lost_found).expect("stat");
        assert_eq!((meta.file_type, meta.mode, meta.links), (FileType::Directory, 0o40700, 2));
        // As mke2fs makes it: 16 KiB, but no more than the 12 direct blocks.
        assert_eq!(meta.size, if block_size == 1024 { 12 * 1024 } else { 16 * 1024 });
        assert_eq!(fs.stat(ROOT_INODE).expect("stat").links, 3);
        assert_eq!(fs.lookup_in(lost_found, "..").expect(".."), ROOT_INODE);
    }
}

#[test]
fn files_round_trip_and_free_counts_return() {
    let mut fs = fresh(1024);
    let before = fs.statfs();
    let dir = fs.mkdir(ROOT_INODE, "d", 0o755).expect("mkdir");
    let file = fs.create(dir, "f", 0o644).expect("create");
    let data: Vec<u8> = (0..400_000u32).map(|i| (i * 7 + i / 1000) as u8).collect();
    fs.write(file, 0, &data).expect("write");
    let mut back = vec![0; data.len() + 5];
    assert_eq!(fs.read(file, 0, &mut back).expect("read"), data.len());
    assert_eq!(&back[..data.len()], &data[..]);
    fs.sync().expect("sync");
    let device = fs.unmount().expect("unmount");
    let mut fs = FileSystem::mount(device).expect("remount");
    assert_eq!(fs.lookup("d/f").expect("lookup"), file);
    fs.unlink(dir, "f").expect("unlink");
    fs.rmdir(ROOT_INODE, "d").expect("rmdir");
    assert_eq!(fs.statfs(), before);
}

#[test]
fn names_and_paths_are_checked() {
    let mut fs = fresh(1024);
    assert_eq!(fs.create(ROOT_INODE, "", 0o644), Err(Error::InvalidArgument("empty name")));
    assert!(matches!(fs.create(ROOT_INODE, "a/b", 0o644), Err(Error::InvalidArgument(_))));
    assert!(matches!(fs.create(ROOT_INODE, "..", 0o644), Err(Error::InvalidArgument(_))));
    assert_eq!(fs.create(ROOT_INODE, [b'x'; 256], 0o644), Err(Error::NameTooLong));
    assert!(fs.create(ROOT_INODE, [b'x'; 255], 0o644).is_ok());
    let (parent, name) = fs.lookup_parent("//lost+found//x/").expect("parent");
    assert_eq!((parent, name), (fs.lookup("lost+found").expect("lost+found"), &b"x"[..]));
    assert!(matches!(fs.lookup_parent("/"), Err(Error::InvalidArgument(_))));
    assert_eq!(fs.lookup("/"), Ok(ROOT_INODE));
}

#[test]
fn symlinks_fast_and_slow() {
    let mut fs = fresh(1024);
    for len in [1, 59, 60, 500, 1023] {
        let target: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
        let link = fs.symlink(ROOT_INODE, format!("l{len}"), &target).expect("symlink");
        assert_eq!(fs.readlink(link).expect("readlink"), target);
        let sectors = fs.stat(link).expect("stat").blocks;
        assert_eq!(sectors, if len < 60 { 0 } else { 2 }, "target of {len} bytes");
    }
    assert_eq!(fs.symlink(ROOT_INODE, "big", [b'a'; 1024]), Err(Error::NameTooLong));
    assert_eq!(fs.readlink(ROOT_INODE), Err(Error::InvalidArgument("not a symbolic link")));
}

#[test]
fn bitmap_helpers() {
    let mut map = vec![0xFFu8; 4];
    assert_eq!(disk::find_clear_bit(&map, 0, 32), None);
    disk::put_bit(&mut map, 19, false);
    assert_eq!(disk::find_clear_bit(&map, 0, 32), Some(19));
    assert_eq!(disk::find_clear_bit(&map, 20, 32), None);
    assert!(disk::test_bit(&map, 1000), "bits past the map read as in use");
    assert_eq!(disk::find_clear_bit(&map, 0, 1000), Some(19));
    assert_eq!(disk::find_clear_bit(&map, 20, 1000), None, "the search ends at the map's end");
    let backups: Vec<u32> = (0..50).filter(|&g| disk::sparse_group_has_super(g)).collect();
    assert_eq!(backups, [0, 1, 3, 5, 7, 9, 25, 27, 49]);
}

#[test]
fn the_bitmap_search_finds_what_a_bit_by_bit_search_finds() {
    let naive = |map: &[u8], from: u32, to: u32| (from..to).find(|&bit| !disk::test_bit(map, bit));
    let mut seed = 0x9e37_79b9_u32;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        seed
    };
    for _ in 0..2000 {
        let len = (next() % 40) as usize;
        // Mostly full maps with a few clear bits: the searches that skip whole words.
        let mut map: Vec<u8> = (0..len).map(|_| if next() % 4 == 0 { next() as u8 } else { 0xFF }).collect();
        if next() % 2 == 0
            && let Some(byte) = map.last_mut()
        {
            *byte = 0x7F;
        }
        let from = next() % 340;
        let to = next() % 340;
        assert_eq!(disk::find_clear_bit(&map, from, to), naive(&map, from, to), "map {map:02x?} from {from} to {to}");
    }
}

#[test]
fn an_append_goes_after_the_files_last_block() {
    let mut fs = fresh(1024);
    let a = fs.create(ROOT_INODE, "a", 0o644).expect("create a");
    let b = fs.create(ROOT_INODE, "b", 0o644).expect("create b");
    fs.write(a, 0, &[1; 6 * 1024]).expect("write a");
    fs.write(b, 0, &[2; 6 * 1024]).expect("write b");
    fs.unlink(ROOT_INODE, "a").expect("unlink a");
    // a's blocks, before b's, are free again; b's next blocks still follow its own (twelve
    // blocks: all direct, no indirect block among them).
    fs.write(b, 6 * 1024, &[3; 6 * 1024]).expect("append to b");
    let inode = fs.load_inode(b).expect("inode");
    let blocks: Vec<u32> = (0..12).map(|i| fs.map_block(&inode, i).expect("map").expect("mapped")).collect();
    assert!(blocks.windows(2).all(|w| w[1] == w[0] + 1), "b lies in one run: {blocks:?}");
}

#[test]
fn read_write_mounts_are_counted_and_stamped_as_linux_does() {
    let field = |device: &MemoryDevice, offset: usize, len: usize| {
        device.as_slice()[1024 + offset..][..len].iter().rev().fold(0u32, |value, &byte| value << 8 | u32::from(byte))
    };
    let (mtime, wtime, count, max) = (disk::sb::MTIME, disk::sb::WTIME, disk::sb::MNT_COUNT, disk::sb::MAX_MNT_COUNT);
    let mut device = MemoryDevice::new(4 << 20);
    mkfs(&mut device, &MkfsOptions { time: 1_000, ..Default::default() }).expect("mkfs");
    assert_eq!((field(&device, count, 2), field(&device, max, 2)), (0, 0xFFFF), "mke2fs's: no check by count");

    // A read-only mount changes nothing.
    let mut fs = FileSystem::mount_read_only(device).expect("mount");
    fs.set_time(2_000);
    let device = fs.unmount().expect("unmount");
    assert_eq!((field(&device, count, 2), field(&device, wtime, 4)), (0, 1_000));

    // A read-write mount counts itself, and its mount and write times come from the clock,
    // even when nothing else changed.
    let mut fs = FileSystem::mount(device).expect("mount");
    assert_eq!((fs.mount_count(), fs.mount_warning()), ((1, -1), None));
    fs.set_time(3_000);
    fs.set_time(3_005);
    let mut device = fs.unmount().expect("unmount");
    assert_eq!((field(&device, count, 2), field(&device, mtime, 4), field(&device, wtime, 4)), (1, 3_000, 3_005));

    // s_max_mnt_count 0 becomes Linux's default, 20 (Linux warns then too, the count being at
    // least 0); at 20 mounts it warns again, and still mounts.
    device.as_mut_slice()[1024 + max..][..2].copy_from_slice(&0u16.to_le_bytes());
    device.as_mut_slice()[1024 + count..][..2].copy_from_slice(&18u16.to_le_bytes());
    let fs = FileSystem::mount(device).expect("mount");
    assert_eq!(fs.mount_count(), (19, 20));
    assert_eq!(fs.mount_warning(), Some("maximal mount count reached, running e2fsck is recommended"));
    let device = fs.unmount().expect("unmount");
    let fs = FileSystem::mount(device).expect("mount");
    assert_eq!((fs.mount_count(), fs.mount_warning()), ((20, 20), None));
    let device = fs.unmount().expect("unmount");
    let fs = FileSystem::mount(device).expect("mount");
    assert_eq!(fs.mount_count(), (21, 20));
    assert_eq!(fs.mount_warning(), Some("maximal mount count reached, running e2fsck is recommended"));
    let mut device = fs.unmount().expect("unmount");
    device.as_mut_slice()[1024 + disk::sb::STATE..][..2].copy_from_slice(&0u16.to_le_bytes());
    let fs = FileSystem::mount(device).expect("mount");
    assert_eq!(fs.mount_warning(), Some("mounting unchecked fs, running e2fsck is recommended"));
}

#[test]
fn new_and_changed_inodes_take_the_clock() {
    let mut fs = fresh(1024);
    fs.set_time(5_000);
    let file = fs.create(ROOT_INODE, "f", 0o644).expect("create");
    let meta = fs.stat(file).expect("stat");
    assert_eq!((meta.atime, meta.mtime, meta.ctime), (5_000, 5_000, 5_000));
    fs.set_time(6_000);
    fs.write(file, 0, b"data").expect("write");
    let meta = fs.stat(file).expect("stat");
    assert_eq!((meta.atime, meta.mtime, meta.ctime), (5_000, 6_000, 6_000));
    assert_eq!(fs.stat(ROOT_INODE).expect("stat").mtime, 5_000, "the directory changed when the entry was added");
    fs.set_time(7_000);
    fs.truncate(file, 1).expect("truncate");
    assert_eq!(fs.stat(file).expect("stat").mtime, 7_000);
}

#[test]
fn extents_are_the_runs_and_holes_a_read_returns() {
    let mut fs = fresh(1024);
    let file = fs.create(ROOT_INODE, "sparse", 0o644).expect("create");
    let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8 + 1).collect();
    fs.write(file, 0, &data).expect("write");
    fs.write(file, 300_000, b"tail").expect("write tail");
    let extents = fs.extents(file, 100, 400_000).expect("extents");
    assert_eq!(extents.first().map(|e| e.offset), Some(100));
    assert_eq!(extents.iter().map(|e| e.len).sum::<u64>(), 300_004 - 100, "up to the end of the file");
    assert!(extents.windows(2).all(|w| w[0].offset + w[0].len == w[1].offset), "in order, without gaps");
    assert!(extents.iter().any(|e| e.device_offset.is_none()), "the hole");
    // Each extent's bytes on the device are the file's.
    let image = fs.unmount().expect("unmount").into_vec();
    let mut fs = FileSystem::mount(MemoryDevice::from_vec(image.clone())).expect("mount");
    let mut read = vec![0; 300_004 - 100];
    fs.read(file, 100, &mut read).expect("read");
    for extent in extents {
        let from = (extent.offset - 100) as usize..(extent.offset - 100 + extent.len) as usize;
        match extent.device_offset {
            Some(at) => assert_eq!(&image[at as usize..][..extent.len as usize], &read[from]),
            None => assert!(read[from].iter().all(|&byte| byte == 0)),
        }
    }
}

#[test]
fn extents_agree_with_the_map_of_every_block_across_pointer_arrays() {
    let mut fs = fresh(1024);
    // Two files written in turns, a few blocks at a time: runs that break inside the direct
    // pointers, the indirect block and the double indirect ones (from logical block 268 on).
    let (a, b) =
        (fs.create(ROOT_INODE, "a", 0o644).expect("create"), fs.create(ROOT_INODE, "b", 0o644).expect("create"));
    for step in 0..70u64 {
        let len = (1 + step % 7) * 1024;
        fs.write(a, step * 7 * 1024, &vec![1; len as usize]).expect("write a");
        fs.write(b, step * 1024, &[2; 1024]).expect("write b");
    }
    fs.write(a, 600 * 1024, b"past a hole").expect("write a");
    let inode = fs.load_inode(a).expect("inode");
    let size = fs.stat(a).expect("stat").size;
    for (offset, len) in [(0, size), (5 * 1024 + 17, 300 * 1024), (267 * 1024, 3 * 1024), (11 * 1024, 2 * 1024)] {
        let extents = fs.extents(a, offset, len).expect("extents");
        assert!(extents.len() > 1 || len <= 3 * 1024, "the file is in many runs: {extents:?}");
        for extent in extents {
            let first = extent.offset / 1024;
            for index in first..(extent.offset + extent.len).div_ceil(1024) {
                let expected = extent.device_offset.map(|at| (at / 1024 + index - first) as u32);
                assert_eq!(fs.map_block(&inode, index).expect("map"), expected, "block {index} of {extent:?}");
            }
        }
    }
}

#[test]
fn offsets_beyond_two_to_the_63_read_nothing_and_grow_nothing() {
    let mut fs = fresh(1024);
    let file = fs.create(ROOT_INODE, "f", 0o644).expect("create");
    fs.write(file, 0, b"data").expect("write");
    let free = fs.statfs().free_blocks;
    let mut buffer = [7u8; 16];
    for offset in [1 << 63, (1 << 63) + 4096, u64::MAX - 1, u64::MAX] {
        assert_eq!(fs.read(file, offset, &mut buffer), Ok(0), "read at {offset}");
        assert_eq!(fs.extents(file, offset, u64::MAX).map(|e| e.len()), Ok(0), "extents at {offset}");
        assert_eq!(fs.write(file, offset, b"x"), Err(Error::FileTooLarge), "write at {offset}");
        assert_eq!(fs.truncate(file, offset), Err(Error::FileTooLarge), "truncate to {offset}");
    }
    assert_eq!(buffer, [7; 16], "nothing read");
    assert_eq!((fs.stat(file).expect("stat").size, fs.statfs().free_blocks), (4, free), "nothing grew");
}

#[test]
fn one_write_over_blocks_apart_on_the_device_lands_in_each() {
    let mut fs = fresh(1024);
    // File a's blocks 0-2, then b's block, then a's 3-5: a's six blocks are two runs.
    let a = fs.create(ROOT_INODE, "a", 0o644).expect("create");
    let b = fs.create(ROOT_INODE, "b", 0o644).expect("create");
    fs.write(a, 0, &[1; 3 * 1024]).expect("write");
    fs.write(b, 0, &[2; 1024]).expect("write");
    fs.write(a, 3 * 1024, &[1; 3 * 1024]).expect("write");
    let runs = fs.extents(a, 0, 6 * 1024).expect("extents");
    assert!(runs.len() >= 2, "a's blocks lie apart: {runs:?}");
    // One write over all six, starting and ending inside a block, and growing the file.
    let data: Vec<u8> = (0..7 * 1024 - 300).map(|i| (i % 253) as u8 + 3).collect();
    fs.write(a, 100, &data).expect("write");
    let mut read = vec![0; 100 + data.len()];
    assert_eq!(fs.read(a, 0, &mut read).expect("read"), read.len());
    assert_eq!(&read[..100], &[1; 100]);
    assert_eq!(&read[100..], &data[..]);
    let mut other = vec![0; 1024];
    fs.read(b, 0, &mut other).expect("read");
    assert_eq!(other, [2; 1024], "the other file's block between the runs is untouched");
}

#[test]
fn directory_pages_list_every_entry_once_and_positions_survive_other_changes() {
    let mut fs = fresh(1024);
    let dir = fs.mkdir(ROOT_INODE, "many", 0o755).expect("mkdir");
    for i in 0..300 {
        fs.create(dir, format!("file-{i:03}"), 0o644).expect("create");
    }
    let whole: Vec<Vec<u8>> = fs.readdir(dir).expect("readdir").into_iter().map(|e| e.name).collect();
    assert_eq!(whole.len(), 302);
    let mut paged = Vec::new();
    let mut position = 0;
    loop {
        let page = fs.readdir_from(dir, position, 7).expect("page");
        assert!(page.entries.len() <= 7);
        paged.extend(page.entries.iter().map(|placed| placed.entry.name.clone()));
        if page.end {
            break;
        }
        position = page.entries.last().expect("a page that is not the end has entries").next;
    }
    assert_eq!(paged, whole, "pages list every entry once, in readdir's order");
    // The last entry's page says it is the end, even when it is exactly full.
    let all = fs.readdir_from(dir, 0, 302).expect("all");
    assert!(all.end && all.entries.len() == 302);
    assert!(!fs.readdir_from(dir, 0, 301).expect("all but one").end);
    let after_last = all.entries.last().expect("entries").next;
    let empty = fs.readdir_from(dir, after_last, 5).expect("from the end");
    assert!(empty.end && empty.entries.is_empty());

    // A position survives removing the entry before it and adding others; removing the entry
    // it points at makes it stale, as does a position inside a record or past the end.
    let page = fs.readdir_from(dir, 0, 10).expect("page");
    let resume = page.entries[9].next;
    let next_name = fs.readdir_from(dir, resume, 1).expect("next").entries[0].entry.name.clone();
    fs.unlink(dir, &page.entries[9].entry.name).expect("unlink the entry before");
    fs.create(dir, "added", 0o644).expect("create");
    assert_eq!(fs.readdir_from(dir, resume, 1).expect("resumed").entries[0].entry.name, next_name);
    fs.unlink(dir, &next_name).expect("unlink the entry it points at");
    assert_eq!(fs.readdir_from(dir, resume, 1), Err(Error::Stale));
    assert_eq!(fs.readdir_from(dir, 3, 1), Err(Error::Stale));
    assert_eq!(fs.readdir_from(dir, 1 << 40, 1), Err(Error::Stale));
    let file = fs.lookup_in(dir, "added").expect("added");
    assert_eq!(fs.readdir_from(file, 0, 1), Err(Error::NotDirectory));
}

#[test]
fn find_inode_names_only_files_in_use() {
    let mut fs = fresh(1024);
    let root = fs.find_inode(ROOT_INODE).expect("root").expect("in use");
    assert_eq!(root.file_type, FileType::Directory);
    let file = fs.create(ROOT_INODE, "f", 0o644).expect("create");
    let generation = fs.find_inode(file).expect("file").expect("in use").generation;
    assert_eq!(generation, fs.stat(file).expect("stat").generation);
    // Out of range, reserved (the bad-blocks inode, the resize inode) or free: none.
    for number in [0, 1, 7, fs.statfs().inodes + 1, u32::MAX] {
        assert_eq!(fs.find_inode(number), Ok(None), "inode {number}");
    }
    fs.unlink(ROOT_INODE, "f").expect("unlink");
    assert_eq!(fs.find_inode(file), Ok(None));
    // A new file may reuse the inode, with another generation.
    let again = fs.create(ROOT_INODE, "g", 0o644).expect("create");
    if again == file {
        assert_ne!(fs.find_inode(again).expect("g").expect("in use").generation, generation);
    }
}

#[test]
fn the_superblock_says_in_use_from_the_first_write_until_the_next_sync() {
    let state = |fs: &FileSystem<MemoryDevice>| {
        let at = 1024 + disk::sb::STATE;
        u16::from_le_bytes([fs.device().as_slice()[at], fs.device().as_slice()[at + 1]])
    };
    let mut fs = fresh(1024);
    assert_eq!(state(&fs), disk::STATE_VALID, "a mount alone writes nothing");
    let file = fs.create(ROOT_INODE, "f", 0o644).expect("create");
    fs.write(file, 0, &[1; 5000]).expect("write");
    assert_eq!(state(&fs), 0, "in use: e2fsck -p must check it after a crash now");
    fs.sync().expect("sync");
    assert_eq!(state(&fs), disk::STATE_VALID, "everything synced");
    fs.write(file, 5000, &[2; 10]).expect("write");
    assert_eq!(state(&fs), 0, "in use again");

    // A file system mounted unchecked stays unchecked, as Linux keeps it, until e2fsck.
    let mut device = fs.unmount().expect("unmount");
    device.as_mut_slice()[1024 + disk::sb::STATE..][..2].copy_from_slice(&0u16.to_le_bytes());
    let mut fs = FileSystem::mount(device).expect("mount");
    fs.write(file, 0, &[3; 10]).expect("write");
    fs.sync().expect("sync");
    assert_eq!(state(&fs), 0);
}

/// What a [`Logged`] device was asked to do, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Write { offset: u64, len: u64 },
    Flush,
    FlushRange { offset: u64, len: u64 },
}

/// A memory device that logs its writes and flushes.
struct Logged {
    memory: MemoryDevice,
    log: Vec<Event>,
}

impl crate::BlockDevice for Logged {
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), crate::IoError> {
        self.memory.read(offset, buf)
    }

    fn write(&mut self, offset: u64, buf: &[u8]) -> Result<(), crate::IoError> {
        self.log.push(Event::Write { offset, len: buf.len() as u64 });
        self.memory.write(offset, buf)
    }

    fn size(&self) -> u64 {
        self.memory.size()
    }

    fn flush(&mut self) -> Result<(), crate::IoError> {
        self.log.push(Event::Flush);
        Ok(())
    }

    fn flush_range(&mut self, offset: u64, len: u64) -> Result<(), crate::IoError> {
        self.log.push(Event::FlushRange { offset, len });
        Ok(())
    }
}

#[test]
fn a_new_indirect_block_is_flushed_alone_before_the_pointer_into_it() {
    let mut device = MemoryDevice::new(4 << 20);
    let options = MkfsOptions { block_size: 1024, bytes_per_inode: 4096, time: 1_000, ..Default::default() };
    mkfs(&mut device, &options).expect("mkfs");
    let mut fs = FileSystem::mount(Logged { memory: device, log: Vec::new() }).expect("mount");
    let file = fs.create(ROOT_INODE, "f", 0o644).expect("create");
    fs.write(file, 0, &[7; 12 * 1024]).expect("the direct blocks");
    fs.device_mut().log.clear();
    // The thirteenth block needs the single indirect block.
    fs.write(file, 12 * 1024, &[8; 1024]).expect("the first block behind the indirect one");
    let log = &fs.device().log;
    assert!(!log.contains(&Event::Flush), "the file's data is left unflushed: {log:?}");
    let ranged: Vec<usize> = (0..log.len()).filter(|&i| matches!(log[i], Event::FlushRange { .. })).collect();
    let [at] = ranged[..] else { panic!("one ranged flush: {log:?}") };
    let Event::FlushRange { offset, len } = log[at] else { unreachable!() };
    assert_eq!((offset % 1024, len), (0, 1024), "one whole block");
    let inside = |e: &Event| matches!(*e, Event::Write { offset: o, len: l } if o >= offset && o + l <= offset + len);
    assert_eq!(log[..at].iter().filter(|e| inside(e)).count(), 1, "the block's zeros before the flush: {log:?}");
    assert!(log[at + 1..].iter().any(inside), "the pointer into it after the flush: {log:?}");
    let mut back = vec![0; 13 * 1024];
    assert_eq!(fs.read(file, 0, &mut back).expect("read"), back.len());
    assert!(back[..12 * 1024].iter().all(|&b| b == 7) && back[12 * 1024..].iter().all(|&b| b == 8));
}
