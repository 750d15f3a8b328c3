//! Writes the seed images of the `ext2_mount` target that the crate's own `mkfs` makes, small and
//! populated with what a walk should meet: nested directories, a directory of several blocks,
//! files in direct, indirect and double-indirect blocks (a sparse one), fast and slow symbolic
//! links and a hard link. Run from `fuzz/`: `cargo +nightly run --example ext2_seeds`.

use domos_ext2::{FileSystem, MemoryDevice, MkfsOptions, ROOT_INODE, mkfs};

fn image(block_size: u32, size: usize, inode_size: u16, filetype: bool) -> Vec<u8> {
    let mut device = MemoryDevice::new(size);
    let options = MkfsOptions {
        block_size,
        bytes_per_inode: 2048,
        inode_size,
        filetype,
        time: 1_700_000_000,
        ..Default::default()
    };
    mkfs(&mut device, &options).expect("mkfs");
    let mut fs = FileSystem::mount(device).expect("mount");
    fs.set_time(1_700_000_100);
    let docs = fs.mkdir(ROOT_INODE, "docs", 0o755).expect("mkdir");
    let sub = fs.mkdir(docs, "sub", 0o700).expect("mkdir");
    for (name, len) in [("tiny", 10usize), ("small", 1500), ("indirect", 14_000)] {
        let file = fs.create(docs, name, 0o644).expect("create");
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 1000) as u8).collect();
        fs.write(file, 0, &data).expect("write");
    }
    let sparse = fs.create(sub, "sparse", 0o600).expect("create");
    fs.write(sparse, 300_000, b"the end").expect("write");
    fs.symlink(ROOT_INODE, "fast", "docs/tiny").expect("symlink");
    fs.symlink(sub, "slow", "y".repeat(100)).expect("symlink");
    let tiny = fs.lookup("/docs/tiny").expect("lookup");
    fs.link(tiny, sub, "hard").expect("link");
    let many = fs.mkdir(ROOT_INODE, "many", 0o755).expect("mkdir");
    for i in 0..24 {
        fs.create(many, format!("entry-with-a-long-name-{i}"), 0o644).expect("create");
    }
    fs.unmount().expect("unmount").into_vec()
}

fn main() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/ext2_mount");
    // Not kept in the repository (its inputs are disk images): made here on a fresh checkout.
    std::fs::create_dir_all(dir).expect("make the corpus folder");
    for (name, block_size, size, inode_size, filetype) in [
        ("crate-1024-128k", 1024, 128 << 10, 256, true),
        ("crate-1024-128k-small-inodes-no-filetype", 1024, 128 << 10, 128, false),
        ("crate-2048-192k", 2048, 192 << 10, 256, true),
        ("crate-4096-256k", 4096, 256 << 10, 128, true),
    ] {
        let path = format!("{dir}/{name}");
        std::fs::write(&path, image(block_size, size, inode_size, filetype)).expect("write the image");
        println!("{path}");
    }
}
