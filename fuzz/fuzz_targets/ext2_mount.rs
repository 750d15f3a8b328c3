//! `domos-ext2` over an image made of arbitrary bytes: mounting it (superblock, group
//! descriptors, root inode), walking the whole tree (directories, inodes, block maps), reading
//! every file and symbolic link, then changing it (create, write, mkdir, symlink, link, rename,
//! truncate, unlink, rmdir), syncing, and mounting and walking the result again. `fs-ext2`
//! mounts whatever image the disk holds.
//!
//! Input: the image.
//!
//! Checks, beyond no panic and no hang (the walk visits each directory once and reads at most
//! 64 KiB and the last bytes of each file):
//! * `statfs` counts no more free blocks or inodes than there are;
//! * `stat` of an inode reports that inode; a directory's entries name inodes in range, and
//!   `lookup_in` finds, for each name, the inode of its first entry;
//! * a read returns exactly the bytes between its offset and the end of the file (or the buffer),
//!   and a read at or past the end returns none; a symbolic link's target is its size long;
//! * data written to a new file reads back the same, and the file's size is what was written.
#![no_main]

use std::collections::{BTreeSet, VecDeque};

use domos_ext2::{BlockDevice, Error, FileSystem, FileType, InodeNumber, MemoryDevice, ROOT_INODE};
use libfuzzer_sys::fuzz_target;

/// Most bytes read from the start of each file.
const READ_LIMIT: u64 = 64 << 10;
/// Most directories walked, and most entries looked at in each.
const DIRECTORIES: usize = 256;
const ENTRIES: usize = 256;

fn check_read<D: BlockDevice>(fs: &mut FileSystem<D>, inode: InodeNumber, size: u64, offset: u64, len: usize) {
    let mut buf = vec![0u8; len];
    if let Ok(read) = fs.read(inode, offset, &mut buf) {
        let expected = size.saturating_sub(offset).min(len as u64) as usize;
        assert_eq!(read, expected, "inode {inode} of {size} bytes: read of {len} at {offset}");
    }
}

/// Walks the tree from the root, reading what it finds.
fn walk<D: BlockDevice>(fs: &mut FileSystem<D>) {
    let statfs = fs.statfs();
    assert!(statfs.free_blocks <= statfs.blocks, "{statfs:?}");
    assert!(statfs.free_inodes <= statfs.inodes, "{statfs:?}");
    let mut queue = VecDeque::from([ROOT_INODE]);
    let mut seen = BTreeSet::from([ROOT_INODE]);
    let mut walked = 0;
    while let Some(directory) = queue.pop_front() {
        walked += 1;
        if walked > DIRECTORIES {
            break;
        }
        let Ok(entries) = fs.readdir(directory) else {
            continue;
        };
        for (i, entry) in entries.iter().enumerate().take(ENTRIES) {
            assert!(entry.inode != 0 && entry.inode <= statfs.inodes, "directory {directory}: {entry:?}");
            let first = entries[..i].iter().find(|e| e.name == entry.name).unwrap_or(entry);
            match fs.lookup_in(directory, &entry.name) {
                Ok(found) => assert_eq!(found, first.inode, "directory {directory}: lookup of {:?}", entry.name),
                Err(error) => panic!("directory {directory}: {:?} listed but not found: {error}", entry.name),
            }
            if entry.name == b"." || entry.name == b".." {
                continue;
            }
            let Ok(meta) = fs.stat(entry.inode) else {
                continue;
            };
            assert_eq!(meta.inode, entry.inode);
            match meta.file_type {
                FileType::Directory => {
                    if seen.insert(entry.inode) {
                        queue.push_back(entry.inode);
                    }
                }
                FileType::Regular => {
                    let size = meta.size;
                    check_read(fs, entry.inode, size, 0, size.min(READ_LIMIT) as usize);
                    check_read(fs, entry.inode, size, size.saturating_sub(100), 4096);
                    check_read(fs, entry.inode, size, size, 16);
                    check_read(fs, entry.inode, size, u64::MAX - 8, 16);
                }
                FileType::Symlink => {
                    if let Ok(target) = fs.readlink(entry.inode) {
                        assert_eq!(target.len() as u64, meta.size, "symlink {}", entry.inode);
                    }
                }
                _ => {}
            }
        }
    }
}

/// Changes the file system; errors are fine (a corrupt structure, no space), panics are not.
fn change<D: BlockDevice>(fs: &mut FileSystem<D>) -> Result<(), Error> {
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 31 + i / 251) as u8).collect();
    let file = fs.create(ROOT_INODE, "fuzz-file", 0o644)?;
    let written = fs.write(file, 0, &data);
    if written.is_ok() {
        let mut back = vec![0u8; data.len()];
        assert_eq!(fs.read(file, 0, &mut back), Ok(data.len()), "a new file reads back");
        assert!(back == data, "a new file reads back what was written");
        assert_eq!(fs.stat(file).map(|m| m.size), Ok(data.len() as u64));
    }
    written?;
    fs.write(file, 70_000, b"after a hole")?;
    let dir = fs.mkdir(ROOT_INODE, "fuzz-dir", 0o755)?;
    fs.symlink(dir, "fast", "../fuzz-file")?;
    fs.symlink(dir, "slow", "s".repeat(300))?;
    fs.link(file, dir, "hard")?;
    fs.rename(ROOT_INODE, "fuzz-file", dir, "moved")?;
    fs.truncate(file, 1000)?;
    if let Ok(lost) = fs.lookup("/lost+found") {
        let _ = fs.create(lost, "found", 0o600);
    }
    // Remove something the image had, if it has anything.
    if let Some(old) = fs
        .readdir(ROOT_INODE)?
        .into_iter()
        .find(|e| !matches!(e.name.as_slice(), b"." | b".." | b"fuzz-dir" | b"lost+found"))
    {
        match fs.stat(old.inode)?.file_type {
            FileType::Directory => fs.rmdir(ROOT_INODE, &old.name)?,
            _ => fs.unlink(ROOT_INODE, &old.name)?,
        }
    }
    fs.unlink(dir, "hard")?;
    fs.unlink(dir, "moved")?;
    fs.unlink(dir, "fast")?;
    fs.unlink(dir, "slow")?;
    fs.rmdir(ROOT_INODE, "fuzz-dir")
}

fuzz_target!(|data: &[u8]| {
    let Ok(mut fs) = FileSystem::mount(MemoryDevice::from_vec(data.to_vec())) else {
        return;
    };
    walk(&mut fs);
    if fs.is_read_only() {
        return;
    }
    fs.set_time(1_700_000_000);
    let _ = change(&mut fs);
    let Ok(device) = fs.unmount() else {
        return;
    };
    if let Ok(mut fs) = FileSystem::mount(device) {
        walk(&mut fs);
    }
});
