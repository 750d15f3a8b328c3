//! The crate against Linux's e2fsprogs: images made by mke2fs and changed by the crate, images
//! made by the crate, images populated by debugfs, all judged by `e2fsck -fn` and read back with
//! `debugfs`; plus corruption and mutation fuzzing, where only a clean `Err` is acceptable.
//!
//! A test that needs e2fsprogs names the tools in `domos_testing::main!` below: where one is
//! missing it is reported ignored, with the reason (and fails in CI).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use domos_ext2::{
    Attributes, BlockDevice, Error, FileSystem, FileType, InodeNumber, IoError, MemoryDevice, MkfsOptions, ROOT_INODE,
    mkfs,
};
use domos_testing::{DEBUGFS, E2FSCK, MKE2FS};

domos_testing::main! {
    linux_image_1k_changed_by_crate: [MKE2FS, E2FSCK, DEBUGFS],
    linux_image_default_features_changed_by_crate: [MKE2FS, E2FSCK, DEBUGFS],
    linux_image_4k_changed_by_crate: [MKE2FS, E2FSCK, DEBUGFS],
    triple_indirect_1k: [MKE2FS, E2FSCK, DEBUGFS],
    triple_indirect_4k: [MKE2FS, E2FSCK, DEBUGFS],
    crate_image_1k: [E2FSCK, DEBUGFS],
    crate_image_4k: [E2FSCK, DEBUGFS],
    crate_image_2k_small_inodes: [E2FSCK, DEBUGFS],
    crate_image_without_filetype: [E2FSCK, DEBUGFS],
    crate_image_many_groups: [E2FSCK, DEBUGFS],
    debugfs_populated_image: [MKE2FS, E2FSCK, DEBUGFS],
    corrupt_superblock_and_descriptors,
    corrupt_inodes_and_directories,
    mutation_fuzz,
    fill_disk_until_no_space: [MKE2FS, E2FSCK],
    out_of_inodes,
    mounts_are_counted_and_stamped_for_e2fsprogs: [MKE2FS, E2FSCK, DEBUGFS],
}

// ----- tools, images, devices -----

fn run(name: &str, args: &[&str]) -> std::process::Output {
    let path = domos_testing::tool(name).unwrap_or_else(|| panic!("{name} not installed"));
    Command::new(path).args(args).output().unwrap_or_else(|error| panic!("running {name}: {error}"))
}

/// A temporary image file, removed on drop.
struct TempImage {
    path: PathBuf,
}

impl TempImage {
    fn new(label: &str, size: u64) -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let unique = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("domos-ext2-{}-{unique}-{label}.img", std::process::id()));
        let file = File::create(&path).expect("create image");
        file.set_len(size).expect("size image");
        TempImage { path }
    }

    fn path(&self) -> &str {
        self.path.to_str().expect("utf-8 temp path")
    }

    fn device(&self) -> FileDevice {
        let file = OpenOptions::new().read(true).write(true).open(&self.path).expect("open image");
        let size = file.metadata().expect("image metadata").len();
        FileDevice { file, size }
    }

    fn bytes(&self) -> Vec<u8> {
        std::fs::read(&self.path).expect("read image")
    }
}

impl Drop for TempImage {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A block device over a file.
struct FileDevice {
    file: File,
    size: u64,
}

impl BlockDevice for FileDevice {
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        if offset.checked_add(buf.len() as u64).is_none_or(|end| end > self.size) {
            return Err(IoError::OutOfRange { offset, len: buf.len() as u64 });
        }
        self.file.read_exact_at(buf, offset).map_err(|_| IoError::Device { offset })
    }

    fn write(&mut self, offset: u64, buf: &[u8]) -> Result<(), IoError> {
        if offset.checked_add(buf.len() as u64).is_none_or(|end| end > self.size) {
            return Err(IoError::OutOfRange { offset, len: buf.len() as u64 });
        }
        self.file.write_all_at(buf, offset).map_err(|_| IoError::Device { offset })
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn flush(&mut self) -> Result<(), IoError> {
        self.file.sync_data().map_err(|_| IoError::Device { offset: 0 })
    }
}

fn mke2fs(image: &TempImage, block_size: u32) {
    mke2fs_with(image, block_size, "^resize_inode,^dir_index,^ext_attr");
}

/// mke2fs with `features` (`-O`), or with the defaults of `-t ext2` when empty.
fn mke2fs_with(image: &TempImage, block_size: u32, features: &str) {
    let block_size = block_size.to_string();
    let mut args = vec!["-q", "-F", "-t", "ext2", "-b", &block_size];
    if !features.is_empty() {
        args.extend(["-O", features]);
    }
    args.push(image.path());
    let output = run("mke2fs", &args);
    assert!(output.status.success(), "mke2fs failed: {}", String::from_utf8_lossy(&output.stderr));
}

/// Runs `e2fsck -fn` and requires exit status 0.
fn assert_fsck_clean(image: &TempImage) {
    let output = run("e2fsck", &["-fn", image.path()]);
    assert!(
        output.status.code() == Some(0),
        "e2fsck -fn exited {:?}:\n{}\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn debugfs(image: &TempImage, request: &str) -> Vec<u8> {
    let output = run("debugfs", &["-R", request, image.path()]);
    assert!(output.status.success(), "debugfs -R {request:?}: {}", String::from_utf8_lossy(&output.stderr));
    output.stdout
}

/// A field of `debugfs stat` output, such as `Size:` or `Links:`.
fn stat_field(image: &TempImage, path: &str, field: &str) -> u64 {
    let text = String::from_utf8_lossy(&debugfs(image, &format!("stat \"{path}\""))).into_owned();
    let mut words = text.split_whitespace().skip_while(|word| *word != field);
    words
        .nth(1)
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in debugfs stat {path}:\n{text}"))
}

/// Deterministic test data: xorshift64.
struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

fn now() -> u32 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as u32)
}

// ----- the workload and its model -----

/// What the file system should hold: file contents, directories, link targets.
#[derive(Default)]
struct Model {
    files: BTreeMap<String, Vec<u8>>,
    dirs: BTreeSet<String>,
    links: BTreeMap<String, Vec<u8>>,
}

fn parent_of(path: &str) -> (&str, &str) {
    let slash = path.rfind('/').expect("absolute path");
    (if slash == 0 { "/" } else { &path[..slash] }, &path[slash + 1..])
}

/// The crate, driven by path, keeping the model in step.
struct Driver<D: BlockDevice> {
    fs: FileSystem<D>,
    model: Model,
}

impl<D: BlockDevice> Driver<D> {
    fn new(fs: FileSystem<D>) -> Self {
        let mut model = Model::default();
        model.dirs.insert("/lost+found".into());
        Driver { fs, model }
    }

    fn dir(&mut self, path: &str) -> InodeNumber {
        self.fs.lookup(path).unwrap_or_else(|e| panic!("lookup {path}: {e}"))
    }

    fn mkdir(&mut self, path: &str) {
        let (parent, name) = parent_of(path);
        let parent = self.dir(parent);
        self.fs.mkdir(parent, name, 0o755).unwrap_or_else(|e| panic!("mkdir {path}: {e}"));
        self.model.dirs.insert(path.into());
    }

    fn write(&mut self, path: &str, offset: u64, data: &[u8]) {
        let inode = match self.fs.lookup(path) {
            Ok(inode) => inode,
            Err(Error::NotFound) => {
                let (parent, name) = parent_of(path);
                let parent = self.dir(parent);
                self.fs.create(parent, name, 0o644).unwrap_or_else(|e| panic!("create {path}: {e}"))
            }
            Err(e) => panic!("lookup {path}: {e}"),
        };
        self.fs.write(inode, offset, data).unwrap_or_else(|e| panic!("write {path}: {e}"));
        let content = self.model.files.entry(path.into()).or_default();
        let end = offset as usize + data.len();
        if content.len() < end {
            content.resize(end, 0);
        }
        content[offset as usize..end].copy_from_slice(data);
    }

    fn truncate(&mut self, path: &str, size: u64) {
        let inode = self.dir(path);
        self.fs.truncate(inode, size).unwrap_or_else(|e| panic!("truncate {path}: {e}"));
        self.model.files.get_mut(path).expect("modelled file").resize(size as usize, 0);
    }

    fn symlink(&mut self, path: &str, target: &str) {
        let (parent, name) = parent_of(path);
        let parent = self.dir(parent);
        self.fs.symlink(parent, name, target).unwrap_or_else(|e| panic!("symlink {path}: {e}"));
        self.model.links.insert(path.into(), target.as_bytes().to_vec());
    }

    fn unlink(&mut self, path: &str) {
        let (parent, name) = parent_of(path);
        let parent = self.dir(parent);
        self.fs.unlink(parent, name).unwrap_or_else(|e| panic!("unlink {path}: {e}"));
        self.model.files.remove(path);
        self.model.links.remove(path);
    }

    fn rmdir(&mut self, path: &str) {
        let (parent, name) = parent_of(path);
        let parent = self.dir(parent);
        self.fs.rmdir(parent, name).unwrap_or_else(|e| panic!("rmdir {path}: {e}"));
        self.model.dirs.remove(path);
    }

    fn rename(&mut self, from: &str, to: &str) {
        let ((from_parent, from_name), (to_parent, to_name)) = (parent_of(from), parent_of(to));
        let (from_parent, to_parent) = (self.dir(from_parent), self.dir(to_parent));
        self.fs
            .rename(from_parent, from_name, to_parent, to_name)
            .unwrap_or_else(|e| panic!("rename {from} {to}: {e}"));
        let moved = |map: &mut BTreeMap<String, Vec<u8>>| {
            let keys: Vec<String> =
                map.keys().filter(|k| *k == from || k.starts_with(&format!("{from}/"))).cloned().collect();
            for key in keys {
                let value = map.remove(&key).expect("key");
                map.insert(format!("{to}{}", &key[from.len()..]), value);
            }
        };
        moved(&mut self.model.files);
        moved(&mut self.model.links);
        let dirs: Vec<String> =
            self.model.dirs.iter().filter(|k| *k == from || k.starts_with(&format!("{from}/"))).cloned().collect();
        for dir in dirs {
            self.model.dirs.remove(&dir);
            self.model.dirs.insert(format!("{to}{}", &dir[from.len()..]));
        }
    }

    /// Checks the crate's view against the model, and that nothing else exists.
    fn verify(&mut self) {
        let mut seen = BTreeSet::new();
        walk(&mut self.fs, ROOT_INODE, "", &mut |fs, path, inode| {
            seen.insert(path.to_string());
            let meta = fs.stat(inode).expect("stat");
            match meta.file_type {
                FileType::Regular => {
                    let mut data = vec![0; meta.size as usize];
                    assert_eq!(fs.read(inode, 0, &mut data).expect("read"), data.len());
                    assert!(self.model.files.get(path) == Some(&data), "{path}: contents differ");
                }
                FileType::Directory => assert!(self.model.dirs.contains(path), "{path}: unexpected directory"),
                FileType::Symlink => {
                    assert_eq!(Some(&fs.readlink(inode).expect("readlink")), self.model.links.get(path), "{path}")
                }
                other => panic!("{path}: unexpected {other:?}"),
            }
        })
        .expect("walk");
        let expected: BTreeSet<String> =
            self.model.files.keys().chain(self.model.links.keys()).chain(self.model.dirs.iter()).cloned().collect();
        assert_eq!(seen, expected);
    }
}

/// Visits every entry under `directory` (depth first, `.`/`..` skipped), bounded against loops.
fn walk<D: BlockDevice>(
    fs: &mut FileSystem<D>,
    directory: InodeNumber,
    prefix: &str,
    visit: &mut dyn FnMut(&mut FileSystem<D>, &str, InodeNumber),
) -> Result<(), Error> {
    let mut stack = vec![(directory, prefix.to_string(), 0)];
    let mut seen = BTreeSet::new();
    while let Some((dir, prefix, depth)) = stack.pop() {
        if !seen.insert(dir) || depth > 64 {
            continue;
        }
        for entry in fs.readdir(dir)? {
            if entry.name == b"." || entry.name == b".." {
                continue;
            }
            let path = format!("{prefix}/{}", String::from_utf8_lossy(&entry.name));
            visit(fs, &path, entry.inode);
            if fs.stat(entry.inode)?.file_type == FileType::Directory {
                stack.push((entry.inode, path, depth + 1));
            }
        }
    }
    Ok(())
}

/// The workload of tests 1 and 2: directories, small and large files (indirect and double
/// indirect), overwrite, truncate, holes, renames across directories, unlink, rmdir, symlinks,
/// hard links, a directory grown to many blocks and thinned out.
fn exercise<D: BlockDevice>(driver: &mut Driver<D>, seed: u64) {
    let mut rng = Xorshift(seed);
    let block = u64::from(driver.fs.block_size());
    driver.fs.set_time(now());
    for dir in ["/docs", "/docs/deep", "/docs/deep/er", "/tmp", "/empty", "/spare", "/many"] {
        driver.mkdir(dir);
    }
    driver.write("/docs/small.txt", 0, b"hello, ext2\n");
    driver.write("/docs/deep/er/note", 0, &rng.bytes(3000));
    // Past the direct blocks: single indirect.
    let single = (12 * block + 5000) as usize;
    driver.write("/single", 0, &rng.bytes(single));
    // Past the single indirect block: double indirect.
    let double = ((12 + block / 4) * block + 3 * block + 77) as usize;
    driver.write("/double", 0, &rng.bytes(double));
    // Overwrite inside, across block boundaries, and append.
    driver.write("/single", block - 10, &rng.bytes(block as usize * 2));
    driver.write("/double", double as u64 - 100, &rng.bytes(5000));
    // Shrink into the single-indirect range, then grow with a hole.
    driver.truncate("/double", 13 * block + 123);
    driver.write("/double", 40 * block + 5, b"after the hole");
    driver.truncate("/single", 100);
    driver.truncate("/single", 3 * block);
    driver.write("/empty-file", 0, b"");
    driver.write("/docs/replace-me", 0, b"old target");
    driver.write("/tmp/source", 0, b"new content from source");
    driver.rename("/tmp/source", "/docs/replace-me");
    driver.rename("/docs/small.txt", "/tmp/moved.txt");
    driver.rename("/docs/deep", "/tmp/deep");
    driver.rename("/tmp/deep/er/note", "/tmp/deep/er/renamed-note");
    driver.mkdir("/spare/inner");
    driver.rename("/tmp/deep", "/spare/inner");
    driver.symlink("/fast-link", "tmp/moved.txt");
    let long_target = format!("/{}", "a-rather-long-directory-name/".repeat(4));
    driver.symlink("/slow-link", &long_target);
    driver.symlink("/tmp/link-to-gone", "nowhere");
    // A directory of many blocks, then half its entries removed and some renamed.
    for index in 0..200 {
        let len = rng.below(300) as usize;
        driver.write(&format!("/many/file-with-a-longish-name-{index:04}"), 0, &rng.bytes(len));
    }
    for index in (0..200).step_by(2) {
        driver.unlink(&format!("/many/file-with-a-longish-name-{index:04}"));
    }
    for index in (1..200).step_by(10) {
        driver.rename(&format!("/many/file-with-a-longish-name-{index:04}"), &format!("/docs/m{index}"));
    }
    // Errors that must leave everything as it was.
    let root = ROOT_INODE;
    assert_eq!(driver.fs.rmdir(root, "docs"), Err(Error::NotEmpty));
    assert_eq!(driver.fs.mkdir(root, "docs", 0o755), Err(Error::Exists));
    assert_eq!(driver.fs.unlink(root, "docs"), Err(Error::IsDirectory));
    assert_eq!(driver.fs.create(root, "a".repeat(256), 0o644), Err(Error::NameTooLong));
    let spare = driver.dir("/spare");
    assert_eq!(
        driver.fs.rename(root, "spare", spare, "loop"),
        Err(Error::InvalidArgument("cannot move a directory under itself"))
    );
    let inner = driver.dir("/spare/inner");
    assert_eq!(
        driver.fs.rename(root, "spare", inner, "loop"),
        Err(Error::InvalidArgument("cannot move a directory under itself"))
    );
    assert_eq!(driver.fs.lookup("/no/such"), Err(Error::NotFound));
    assert_eq!(driver.fs.lookup("/single/x"), Err(Error::NotDirectory));
    // Hard links and attributes.
    let note = driver.dir("/tmp/moved.txt");
    let docs = driver.dir("/docs");
    driver.fs.link(note, docs, "hard").expect("link");
    driver.model.files.insert("/docs/hard".into(), driver.model.files["/tmp/moved.txt"].clone());
    assert_eq!(driver.fs.stat(note).expect("stat").links, 2);
    driver
        .fs
        .set_attributes(
            note,
            &Attributes { permissions: Some(0o600), uid: Some(1000), gid: Some(100), ..Default::default() },
        )
        .expect("setattr");
    driver.unlink("/tmp/link-to-gone");
    driver.rmdir("/empty");
    driver.mkdir("/empty2");
    driver.mkdir("/replaced-dir");
    driver.rename("/empty2", "/replaced-dir");
    driver.verify();
}

/// Checks every modelled file, directory and link with debugfs.
fn verify_with_debugfs(image: &TempImage, model: &Model) {
    for (path, content) in &model.files {
        assert!(debugfs(image, &format!("cat \"{path}\"")) == *content, "debugfs cat {path}: contents differ");
        assert_eq!(stat_field(image, path, "Size:"), content.len() as u64, "debugfs size of {path}");
    }
    for (path, target) in &model.links {
        let text = String::from_utf8_lossy(&debugfs(image, &format!("stat \"{path}\""))).into_owned();
        let target = String::from_utf8_lossy(target);
        if target.len() < 60 {
            assert!(text.contains(&format!("Fast link dest: \"{target}\"")), "{path}:\n{text}");
        } else {
            assert_eq!(String::from_utf8_lossy(&debugfs(image, &format!("cat \"{path}\""))), target, "{path}");
        }
    }
    for dir in &model.dirs {
        let listing = String::from_utf8_lossy(&debugfs(image, &format!("ls -l \"{dir}\""))).into_owned();
        let children = model.files.keys().chain(model.links.keys()).chain(model.dirs.iter());
        for child in children.filter(|child| parent_of(child).0 == dir.as_str()) {
            let name = parent_of(child).1;
            assert!(listing.split_whitespace().any(|word| word == name), "debugfs ls {dir} lacks {name}:\n{listing}");
        }
        let subdirs = model.dirs.iter().filter(|d| parent_of(d).0 == dir.as_str()).count() as u64;
        assert_eq!(stat_field(image, dir, "Links:"), 2 + subdirs, "link count of {dir}");
    }
}

// ----- 1. mke2fs images changed by the crate -----

fn linux_image_changed_by_crate(block_size: u32, size: u64, features: &str) {
    let image = TempImage::new(&format!("linux-{block_size}"), size);
    mke2fs_with(&image, block_size, features);
    let fs = FileSystem::mount(image.device()).expect("mount");
    assert!(!fs.is_read_only());
    let mut driver = Driver::new(fs);
    exercise(&mut driver, u64::from(block_size) * 7 + 1);
    let model = std::mem::take(&mut driver.model);
    driver.fs.unmount().expect("unmount");
    assert_fsck_clean(&image);
    verify_with_debugfs(&image, &model);
    // Mounted again, the crate sees the same.
    let mut driver = Driver { fs: FileSystem::mount_read_only(image.device()).expect("remount"), model };
    driver.verify();
}

fn linux_image_1k_changed_by_crate() {
    linux_image_changed_by_crate(1024, 16 << 20, "^resize_inode,^dir_index,^ext_attr");
}

/// mke2fs's default ext2 features: resize_inode (reserved descriptor blocks), dir_index and
/// ext_attr, all compatible ones the crate leaves alone.
fn linux_image_default_features_changed_by_crate() {
    linux_image_changed_by_crate(1024, 40 << 20, "");
}

fn linux_image_4k_changed_by_crate() {
    linux_image_changed_by_crate(4096, 32 << 20, "^resize_inode,^dir_index,^ext_attr");
}

/// A sparse file reaching into the triple-indirect range (and past 4 GiB with 4 KiB blocks).
fn triple_indirect(block_size: u32) {
    let image = TempImage::new(&format!("triple-{block_size}"), 16 << 20);
    mke2fs(&image, block_size);
    let mut fs = FileSystem::mount(image.device()).expect("mount");
    fs.set_time(now());
    let per = u64::from(block_size / 4);
    let offset = (12 + per + per * per + 3) * u64::from(block_size) + 17;
    let file = fs.create(ROOT_INODE, "sparse", 0o644).expect("create");
    fs.write(file, 0, b"head").expect("write head");
    fs.write(file, offset, b"tail of a triple-indirect file").expect("write tail");
    let meta = fs.stat(file).expect("stat");
    assert_eq!(meta.size, offset + 30);
    // head, tail, and 1 + 1 + 1 indirect blocks.
    assert_eq!(meta.blocks, 5 * u64::from(block_size / 512));
    let mut tail = [0; 30];
    fs.read(file, offset, &mut tail).expect("read tail");
    assert_eq!(&tail, b"tail of a triple-indirect file");
    let mut hole = [1; 64];
    fs.read(file, offset - 64, &mut hole).expect("read hole");
    assert_eq!(hole, [0; 64]);
    fs.unmount().expect("unmount");
    assert_fsck_clean(&image);
    assert_eq!(stat_field(&image, "/sparse", "Size:"), offset + 30);
    let mut fs = FileSystem::mount(image.device()).expect("mount");
    fs.truncate(file, 10).expect("truncate");
    assert_eq!(fs.stat(file).expect("stat").blocks, u64::from(block_size / 512));
    fs.unmount().expect("unmount");
    assert_fsck_clean(&image);
    assert_eq!(debugfs(&image, "cat /sparse"), b"head\0\0\0\0\0\0");
}

fn triple_indirect_1k() {
    triple_indirect(1024);
}

fn triple_indirect_4k() {
    triple_indirect(4096);
}

// ----- 2. images made by the crate -----

fn crate_image(block_size: u32, size: u64, inode_size: u16, filetype: bool) {
    let image = TempImage::new(&format!("mkfs-{block_size}"), size);
    let options =
        MkfsOptions { block_size, bytes_per_inode: 4096, inode_size, filetype, time: now(), ..Default::default() };
    mkfs(&mut image.device(), &options).expect("mkfs");
    assert_fsck_clean(&image);
    let listing = String::from_utf8_lossy(&debugfs(&image, "ls -l /")).into_owned();
    assert!(listing.contains("lost+found"), "{listing}");
    let mut driver = Driver::new(FileSystem::mount(image.device()).expect("mount"));
    let before = driver.fs.statfs();
    exercise(&mut driver, u64::from(block_size) + 99);
    let after = driver.fs.statfs();
    assert!(after.free_blocks < before.free_blocks && after.free_inodes < before.free_inodes);
    let model = std::mem::take(&mut driver.model);
    driver.fs.unmount().expect("unmount");
    assert_fsck_clean(&image);
    verify_with_debugfs(&image, &model);
}

fn crate_image_1k() {
    crate_image(1024, 8 << 20, 256, true);
}

fn crate_image_4k() {
    crate_image(4096, 48 << 20, 256, true);
}

fn crate_image_2k_small_inodes() {
    crate_image(2048, 20 << 20, 128, true);
}

fn crate_image_without_filetype() {
    crate_image(1024, 8 << 20, 128, false);
}

fn crate_image_many_groups() {
    // 1 KiB blocks, 8 MiB per group: 9 groups, backups in 0, 1, 3, 5, 7.
    crate_image(1024, 72 << 20, 256, true);
}

// ----- 3. images populated by debugfs, read by the crate -----

fn debugfs_populated_image() {
    let mut rng = Xorshift(0x5eed);
    let image = TempImage::new("debugfs", 16 << 20);
    mke2fs(&image, 1024);
    let host_dir = std::env::temp_dir().join(format!("domos-ext2-{}-host", std::process::id()));
    std::fs::create_dir_all(&host_dir).expect("host dir");
    let files: Vec<(String, Vec<u8>)> = vec![
        ("small".into(), b"written by debugfs\n".to_vec()),
        ("d/medium".into(), rng.bytes(40_000)),
        ("d/e/large".into(), rng.bytes(700_000)),
    ];
    let mut commands = String::from("mkdir d\nmkdir d/e\n");
    for (index, (name, content)) in files.iter().enumerate() {
        let host = host_dir.join(format!("file{index}"));
        std::fs::write(&host, content).expect("host file");
        commands.push_str(&format!("write {} {name}\n", host.display()));
    }
    let long_target = "x/".repeat(50);
    commands.push_str(&format!("symlink fast d/medium\nsymlink slow {long_target}\n"));
    let script = host_dir.join("commands");
    std::fs::write(&script, commands).expect("script");
    let output = run("debugfs", &["-w", "-f", script.to_str().expect("path"), image.path()]);
    let _ = std::fs::remove_dir_all(&host_dir);
    assert!(output.status.success(), "debugfs: {}", String::from_utf8_lossy(&output.stderr));
    assert_fsck_clean(&image);

    let mut fs = FileSystem::mount_read_only(image.device()).expect("mount");
    for (name, content) in &files {
        let inode = fs.lookup(name).unwrap_or_else(|e| panic!("lookup {name}: {e}"));
        let meta = fs.stat(inode).expect("stat");
        assert_eq!(meta.size, content.len() as u64);
        assert_eq!(meta.file_type, FileType::Regular);
        let mut data = vec![0; content.len() + 10];
        assert_eq!(fs.read(inode, 0, &mut data).expect("read"), content.len());
        assert!(&data[..content.len()] == content.as_slice(), "{name}: contents differ");
        let mut middle = vec![0; 1000];
        let offset = content.len() as u64 / 3;
        let n = fs.read(inode, offset, &mut middle).expect("read middle");
        assert_eq!(&middle[..n], &content[offset as usize..offset as usize + n]);
    }
    let fast = fs.lookup("fast").expect("fast");
    assert_eq!(fs.readlink(fast).expect("readlink"), b"d/medium");
    let slow = fs.lookup("/slow").expect("slow");
    assert_eq!(fs.readlink(slow).expect("readlink"), long_target.as_bytes());
    let d = fs.lookup("d").expect("d");
    let names: BTreeSet<Vec<u8>> = fs.readdir(d).expect("readdir").into_iter().map(|entry| entry.name).collect();
    let expected: BTreeSet<Vec<u8>> = [".", "..", "e", "medium"].iter().map(|n| n.as_bytes().to_vec()).collect();
    assert_eq!(names, expected);
    assert_eq!(fs.stat(d).expect("stat d").links, 3);
    assert_eq!(fs.create(d, "new", 0o644), Err(Error::ReadOnly));
}

// ----- 4. corruption, fuzzing, a full disk -----

fn le32(image: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(image[offset..offset + 4].try_into().unwrap())
}

fn put32(image: &mut [u8], offset: usize, value: u32) {
    image[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
}

/// A populated 1 KiB-block image made by the crate, in memory.
fn good_image(size: usize) -> Vec<u8> {
    let mut device = MemoryDevice::new(size);
    let options = MkfsOptions { block_size: 1024, bytes_per_inode: 4096, time: 1_700_000_000, ..Default::default() };
    mkfs(&mut device, &options).expect("mkfs");
    let mut fs = FileSystem::mount(device).expect("mount");
    fs.set_time(1_700_000_100);
    let mut rng = Xorshift(42);
    let docs = fs.mkdir(ROOT_INODE, "docs", 0o755).expect("mkdir");
    let sub = fs.mkdir(docs, "sub", 0o755).expect("mkdir");
    for (index, size) in [10usize, 1500, 14_000, 300_000].into_iter().enumerate() {
        let file = fs.create(if index % 2 == 0 { docs } else { sub }, format!("file{index}"), 0o644).expect("create");
        fs.write(file, 0, &rng.bytes(size)).expect("write");
    }
    fs.symlink(ROOT_INODE, "fast", "docs/file0").expect("symlink");
    fs.symlink(sub, "slow", "y".repeat(200)).expect("symlink");
    for index in 0..40 {
        fs.create(sub, format!("entry-{index}"), 0o600).expect("create");
    }
    fs.unmount().expect("unmount").into_vec()
}

/// Geometry of a 1 KiB-block image: (inode table block of group 0, inode size).
fn inode_location(image: &[u8], inode: u32) -> usize {
    let inode_size = u32::from(u16::from_le_bytes([image[1024 + 88], image[1024 + 89]]));
    let table = le32(image, 2048 + 8);
    (table * 1024 + (inode - 1) * inode_size) as usize
}

fn mount_err(image: Vec<u8>) -> Error {
    FileSystem::mount(MemoryDevice::from_vec(image)).map(|_| ()).expect_err("mount should fail")
}

/// Reads every file and link under the root; returns the first error.
fn read_everything<D: BlockDevice>(fs: &mut FileSystem<D>) -> Result<(), Error> {
    let mut first_error = Ok(());
    walk(fs, ROOT_INODE, "", &mut |fs, _, inode| {
        let result = fs.stat(inode).and_then(|meta| match meta.file_type {
            FileType::Regular => {
                let mut data = vec![0; meta.size.min(1 << 20) as usize];
                fs.read(inode, 0, &mut data).map(|_| ())
            }
            FileType::Symlink => fs.readlink(inode).map(|_| ()),
            _ => Ok(()),
        });
        if first_error.is_ok() {
            first_error = result;
        }
    })?;
    first_error
}

fn corrupt_superblock_and_descriptors() {
    let good = good_image(2 << 20);
    let sb = 1024;
    let mut image = good.clone();
    image[sb + 56] = 0x54;
    assert!(matches!(mount_err(image), Error::Corrupt(ref why) if why.contains("magic")));
    let mut image = good.clone();
    put32(&mut image, sb + 4, 1 << 30);
    assert!(matches!(mount_err(image), Error::Corrupt(ref why) if why.contains("exceed the device")));
    let mut image = good.clone();
    put32(&mut image, sb + 4, 0);
    assert!(matches!(mount_err(image), Error::Corrupt(_)));
    let mut image = good.clone();
    put32(&mut image, sb + 40, 0);
    assert!(matches!(mount_err(image), Error::Corrupt(ref why) if why.contains("inodes per group")));
    let mut image = good.clone();
    put32(&mut image, sb, 12345);
    assert!(matches!(mount_err(image), Error::Corrupt(_)));
    let mut image = good.clone();
    put32(&mut image, sb + 24, 7);
    assert!(matches!(mount_err(image), Error::Unsupported(_)));
    let mut image = good.clone();
    put32(&mut image, sb + 96, 0x2 | 0x40);
    assert!(matches!(mount_err(image), Error::Unsupported(ref why) if why.contains("extents")));
    // An unknown read-only compatible feature: mounted read-only.
    let mut image = good.clone();
    put32(&mut image, sb + 100, 0x3 | 0x400);
    let mut fs = FileSystem::mount(MemoryDevice::from_vec(image)).expect("mount read-only");
    assert!(fs.is_read_only());
    assert_eq!(fs.unsupported_features().as_deref(), Some("metadata_csum"));
    assert!(fs.lookup("/docs/file0").is_ok());
    assert_eq!(fs.mkdir(ROOT_INODE, "x", 0o755), Err(Error::ReadOnly));
    // Group descriptor 0 (block 2): bitmaps and inode table.
    let gd = 2048;
    for (field, value) in [(0, 5000), (0, 0), (4, 1 << 20), (8, 2000), (8, le32(&good, gd))] {
        let mut image = good.clone();
        put32(&mut image, gd + field, value);
        assert!(
            matches!(mount_err(image), Error::Corrupt(ref why) if why.contains("group 0 descriptor")),
            "{field}={value}"
        );
    }
    // A root inode that is no directory.
    let mut image = good.clone();
    let root = inode_location(&image, ROOT_INODE);
    image[root + 1] = 0x80;
    assert!(matches!(mount_err(image), Error::Corrupt(ref why) if why.contains("root")));
    // Too small a device.
    assert!(matches!(mount_err(vec![0; 1000]), Error::Corrupt(_)));
}

fn corrupt_inodes_and_directories() {
    let good = good_image(2 << 20);
    let mut fs = FileSystem::mount(MemoryDevice::from_vec(good.clone())).expect("mount");
    let big = fs.lookup("/docs/sub/file3").expect("file3");
    let docs = fs.lookup("/docs").expect("docs");
    drop(fs);

    // Out-of-range direct, indirect and double-indirect pointers.
    for slot in [0, 12, 13] {
        let mut image = good.clone();
        let at = inode_location(&image, big) + 40 + 4 * slot;
        put32(&mut image, at, 3_000_000);
        let mut fs = FileSystem::mount(MemoryDevice::from_vec(image)).expect("mount");
        let mut data = vec![0; 300_000];
        let error = fs.read(big, 0, &mut data).expect_err("read");
        assert!(matches!(error, Error::Corrupt(ref why) if why.contains("outside")), "{error}");
        assert!(matches!(fs.truncate(big, 0), Err(Error::Corrupt(_))));
    }
    // An indirect block entry out of range.
    let mut image = good.clone();
    let indirect = le32(&image, inode_location(&image, big) + 40 + 48) as usize;
    put32(&mut image, indirect * 1024 + 8, 0xFFFF_FFF0);
    let mut fs = FileSystem::mount(MemoryDevice::from_vec(image)).expect("mount");
    assert!(matches!(read_everything(&mut fs), Err(Error::Corrupt(_))));
    // Inode numbers in directory entries out of range; directory entries broken.
    let dir_block = le32(&good, inode_location(&good, docs) + 40) as usize * 1024;
    type Corruption = fn(&mut [u8], usize);
    let cases: [(&str, Corruption); 6] = [
        ("rec_len 0", |image, at| image[at + 12 + 4..at + 12 + 6].copy_from_slice(&0u16.to_le_bytes())),
        ("rec_len past the block", |image, at| image[at + 12 + 4..at + 12 + 6].copy_from_slice(&2000u16.to_le_bytes())),
        ("rec_len unaligned", |image, at| image[at + 4..at + 6].copy_from_slice(&13u16.to_le_bytes())),
        ("name_len > rec_len", |image, at| image[at + 6] = 200),
        ("inode out of range", |image, at| image[at + 12..at + 16].copy_from_slice(&u32::MAX.to_le_bytes())),
        ("entry to a free inode", |image, at| image[at + 24..at + 28].copy_from_slice(&400u32.to_le_bytes())),
    ];
    for (what, corrupt) in cases {
        let mut image = good.clone();
        corrupt(&mut image, dir_block);
        let mut fs = FileSystem::mount(MemoryDevice::from_vec(image)).expect("mount");
        let error = read_everything(&mut fs).expect_err(what);
        assert!(matches!(error, Error::Corrupt(_)), "{what}: {error}");
        assert!(matches!(fs.create(docs, "new", 0o644), Err(Error::Corrupt(_))) || what == "entry to a free inode");
    }
    // A directory whose size claims blocks it does not have.
    let mut image = good.clone();
    put32(&mut image, inode_location(&good, docs) + 4, 0x4000_0000);
    let mut fs = FileSystem::mount(MemoryDevice::from_vec(image)).expect("mount");
    assert!(matches!(fs.readdir(docs), Err(Error::Corrupt(_))));
}

/// Flips random bytes in the metadata region — the superblock, group descriptor, bitmaps, the
/// inodes in use, and the first data blocks (directories, indirect blocks, symlink blocks) —
/// then mounts, walks, reads and writes: errors are fine, panics and hangs are not.
fn mutation_fuzz() {
    let good = good_image(1 << 20);
    let block_bitmap = le32(&good, 2048) as usize * 1024;
    let table = le32(&good, 2048 + 8) as usize * 1024;
    let inode_size = usize::from(u16::from_le_bytes([good[1024 + 88], good[1024 + 89]]));
    let inode_table_bytes = le32(&good, 1024 + 40) as usize * inode_size;
    let data = table + inode_table_bytes.div_ceil(1024) * 1024;
    let regions = [
        1024..1024 + 264,                  // superblock fields in use
        2048..2048 + 32,                   // the group descriptor
        block_bitmap..block_bitmap + 2048, // both bitmaps
        table..table + 64 * inode_size,    // the first 64 inodes
        data..data + 80 * 1024,            // directories, indirect blocks, file data
    ];
    // DOMOS_EXT2_FUZZ_ITERATIONS and DOMOS_EXT2_FUZZ_SEED run a longer or different campaign.
    let env = |name: &str| std::env::var(name).ok().and_then(|value| value.parse::<u64>().ok());
    let mut rng = Xorshift(env("DOMOS_EXT2_FUZZ_SEED").unwrap_or(0xD0_5EED).max(1));
    let iterations = env("DOMOS_EXT2_FUZZ_ITERATIONS").unwrap_or(4000);
    let (mut mounted, mut clean) = (0, 0);
    for iteration in 0..iterations {
        let mut image = good.clone();
        for _ in 0..1 + rng.below(4) {
            let region = &regions[rng.below(regions.len() as u64) as usize];
            let at = region.start + rng.below((region.end - region.start) as u64) as usize;
            if rng.below(3) == 0 {
                image[at] = rng.next() as u8;
            } else {
                image[at] ^= 1 << rng.below(8);
            }
        }
        let outcome = std::panic::catch_unwind(move || {
            let Ok(mut fs) = FileSystem::mount(MemoryDevice::from_vec(image)) else { return (false, false) };
            let read = read_everything(&mut fs).is_ok();
            let _ = (|| -> Result<(), Error> {
                let file = fs.create(ROOT_INODE, "fuzz", 0o644)?;
                fs.write(file, 0, &[7; 20_000])?;
                let dir = fs.mkdir(ROOT_INODE, "fuzz-dir", 0o755)?;
                fs.rename(ROOT_INODE, "fuzz", dir, "moved")?;
                fs.truncate(file, 100)?;
                fs.symlink(dir, "link", "z".repeat(100))?;
                let docs = fs.lookup("/docs")?;
                fs.unlink(docs, "file0")?;
                let sub = fs.lookup("/docs/sub")?;
                let file3 = fs.lookup_in(sub, "file3")?;
                fs.truncate(file3, 5000)?;
                fs.rename(ROOT_INODE, "docs", dir, "docs")?;
                fs.rmdir(dir, "docs")
            })();
            let _ = read_everything(&mut fs);
            let _ = fs.sync();
            (true, read)
        });
        let (was_mounted, read_clean) = outcome.unwrap_or_else(|_| panic!("panic in fuzz iteration {iteration}"));
        mounted += usize::from(was_mounted);
        clean += usize::from(read_clean);
    }
    println!("mutation fuzz: {iterations} images, {mounted} mounted, {clean} read without error");
    assert!(mounted > 100, "too few images mounted ({mounted}) for the fuzz to mean much");
}

fn fill_until_full<D: BlockDevice>(fs: &mut FileSystem<D>) {
    let mut rng = Xorshift(7);
    let dir = fs.mkdir(ROOT_INODE, "fill", 0o755).expect("mkdir");
    let mut created = Vec::new();
    let error = loop {
        let name = format!("f{}", created.len());
        let file = match fs.create(dir, &name, 0o644) {
            Ok(file) => file,
            Err(error) => break error,
        };
        created.push(name);
        let len = 1 + rng.below(9000) as usize;
        if let Err(error) = fs.write(file, 0, &rng.bytes(len)) {
            break error;
        }
    };
    assert_eq!(error, Error::NoSpace);
    // Free some and fill again with one large file, which runs out inside its block map.
    for name in created.iter().step_by(3) {
        fs.unlink(dir, name).expect("unlink");
    }
    let big = fs.create(ROOT_INODE, "big", 0o644).expect("create big");
    let chunk = rng.bytes(64 * 1024);
    let mut offset = 0;
    while fs.write(big, offset, &chunk).is_ok() {
        offset += chunk.len() as u64;
    }
    assert_eq!(fs.write(big, offset, &chunk), Err(Error::NoSpace));
    assert!(fs.stat(big).expect("stat").size >= offset);
    assert_eq!(fs.statfs().free_blocks, 0);
}

fn fill_disk_until_no_space() {
    for block_size in [1024, 4096] {
        let image = TempImage::new("fill", 4 << 20);
        let options = MkfsOptions { block_size, bytes_per_inode: 2048, time: now(), ..Default::default() };
        mkfs(&mut image.device(), &options).expect("mkfs");
        let mut fs = FileSystem::mount(image.device()).expect("mount");
        fs.set_time(now());
        fill_until_full(&mut fs);
        fs.unmount().expect("unmount");
        assert_fsck_clean(&image);
        let linux = TempImage::new("fill-linux", 3 << 20);
        mke2fs(&linux, block_size);
        let mut fs = FileSystem::mount(linux.device()).expect("mount");
        fs.set_time(now());
        fill_until_full(&mut fs);
        fs.unmount().expect("unmount");
        assert_fsck_clean(&linux);
        let _ = image.bytes();
    }
}

/// Running out of inodes rather than blocks.
fn out_of_inodes() {
    let mut device = MemoryDevice::new(1 << 20);
    let options = MkfsOptions { block_size: 1024, bytes_per_inode: 65536, ..Default::default() };
    mkfs(&mut device, &options).expect("mkfs");
    let mut fs = FileSystem::mount(device).expect("mount");
    let free = fs.statfs().free_inodes;
    for index in 0..free {
        fs.create(ROOT_INODE, format!("i{index}"), 0o644).expect("create");
    }
    assert_eq!(fs.create(ROOT_INODE, "one-too-many", 0o644), Err(Error::NoSpace));
    assert_eq!(fs.mkdir(ROOT_INODE, "dir-too-many", 0o755), Err(Error::NoSpace));
    assert_eq!(fs.statfs().free_inodes, 0);
    let listing = fs.readdir(ROOT_INODE).expect("readdir");
    assert_eq!(listing.len() as u32, 3 + free);
    let _ = Path::new("/");
}

// ----- the superblock's mount count and times -----

/// A line of `debugfs -R stats`, such as `Mount count:`, after the colon.
fn stats_field(image: &TempImage, field: &str) -> String {
    let text = String::from_utf8_lossy(&debugfs(image, "stats")).into_owned();
    text.lines()
        .find_map(|line| line.strip_prefix(field).map(|rest| rest.trim().to_string()))
        .unwrap_or_else(|| panic!("no {field} in debugfs stats:\n{text}"))
}

fn mounts_are_counted_and_stamped_for_e2fsprogs() {
    let image = TempImage::new("mount-count", 8 << 20);
    mke2fs(&image, 1024);
    assert_eq!(stats_field(&image, "Mount count:"), "0");
    let when = now() - 3600;
    for mounts in 1..=2 {
        let mut fs = FileSystem::mount(image.device()).expect("mount");
        fs.set_time(when + mounts);
        fs.unmount().expect("unmount");
        assert_eq!(stats_field(&image, "Mount count:"), mounts.to_string());
    }
    let mut fs = FileSystem::mount_read_only(image.device()).expect("mount");
    fs.set_time(when + 10);
    fs.unmount().expect("unmount");
    assert_eq!(stats_field(&image, "Mount count:"), "2", "a read-only mount is not counted");
    // debugfs prints times in the local zone; the superblock holds seconds since 1970.
    let bytes = image.bytes();
    assert_eq!((le32(&bytes, 1024 + 44), le32(&bytes, 1024 + 48)), (when + 2, when + 2), "s_mtime and s_wtime");
    assert_ne!(stats_field(&image, "Last mount time:"), "n/a");
    assert_fsck_clean(&image);
}
