//! `test-inode-fs`: a client of the file system by node and by path, for the system tests.
//!
//! Through the `InodeFileSystem` found under the name `InodeFileSystem` (a configuration binds
//! it to another) it calls every operation: builds a tree, writes and reads a file with a hole,
//! renames it across directories, links it, makes fast and slow symbolic links, changes sizes,
//! permissions, owners and times, lists a directory of 302 entries in small pages with and
//! without attributes, checks that removed, forged and reused nodes are `Stale`, that bad names
//! are `Invalid`, and that stale directory cookies are refused. Through the `FileSystem` found
//! under the name `FileSystem` it checks that the path view sees the same tree. Each failed
//! check prints `FAIL …`; the last line is `inode-fs ok` when none failed. It leaves
//! `/a/keep` holding `kept by node;and by path`, `/b/sym` pointing at `../a/hard`, and the
//! directory `/many` of 299 files (`entry-000` … `entry-299` without the one removed) for the
//! host to check with Linux's tools.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt::Debug;
use domos_interfaces::file_system::{FileKind, FileSystem, FsError, OpenFile};
use domos_interfaces::inode_file_system::{Attributes, Changes, InodeFileSystem, Node, SetTime};
use domos_sdk::{Memory, Portal, names, println};

domos_sdk::component! { main: main }

/// The earliest time the file system's clock tells (2026-01-01), as `fs-ext2` documents.
const EARLIEST: u32 = 1_767_225_600;

/// Counts failed checks, saying what each was.
#[derive(Default)]
struct Checks {
    failed: u32,
}

impl Checks {
    fn that(&mut self, what: &str, ok: bool, detail: impl Debug) {
        if !ok {
            println!("FAIL {what}: {detail:?}");
            self.failed += 1;
        }
    }

    fn equal<T: PartialEq + Debug>(&mut self, what: &str, got: T, want: T) {
        if got != want {
            println!("FAIL {what}: got {got:?}, want {want:?}");
            self.failed += 1;
        }
    }

    /// The value of `result`, or `None` after counting the failure.
    fn ok<T>(&mut self, what: &str, result: Result<T, FsError>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) => {
                println!("FAIL {what}: {error:?}");
                self.failed += 1;
                None
            }
        }
    }

    fn error<T: Debug>(&mut self, what: &str, result: Result<T, FsError>, want: fn(&FsError) -> bool) {
        match result {
            Err(ref error) if want(error) => {}
            other => {
                println!("FAIL {what}: {other:?}");
                self.failed += 1;
            }
        }
    }
}

fn stale(error: &FsError) -> bool {
    *error == FsError::Stale
}

fn invalid(error: &FsError) -> bool {
    matches!(error, FsError::Invalid(_))
}

fn main() -> Result<(), FsError> {
    let nodes: Portal<dyn InodeFileSystem> = names::lookup("InodeFileSystem")?;
    let paths: Portal<dyn FileSystem> = names::lookup("FileSystem")?;
    let mut check = Checks::default();
    let before = nodes.usage()?;
    check.equal("usage is the same by node and by path", paths.usage()?, before);

    // The root and its dots.
    let root = nodes.root()?;
    let root_attributes = nodes.attributes(root)?;
    check.equal("root kind", root_attributes.kind, FileKind::Directory);
    check.equal("root node", root_attributes.node, root);
    for dot in [&b"."[..], b".."] {
        let found = check.ok("lookup of a dot in the root", nodes.lookup(root, dot.to_vec()));
        check.equal("a dot of the root is the root", found.map(|a| a.node), Some(root));
    }
    let lost = nodes.lookup(root, b"lost+found".to_vec())?;
    check.equal("lost+found is a directory", lost.kind, FileKind::Directory);

    // A tree: /a, /b, /a/file.
    let a = nodes.mkdir(root, b"a".to_vec(), 0o755)?;
    let b = nodes.mkdir(root, b"b".to_vec(), 0o700)?;
    check.equal("mkdir mode", (a.mode, a.links, a.kind), (0o40755, 2, FileKind::Directory));
    check.equal("mkdir mode 0700", b.mode, 0o40700);
    check.equal("the root counts its subdirectories", nodes.attributes(root)?.links, root_attributes.links + 2);
    let file = nodes.create(a.node, b"file".to_vec(), 0o644)?;
    check.equal("create", (file.mode, file.size, file.links, file.kind), (0o100644, 0, 1, FileKind::File));
    check.error("create over a name", nodes.create(a.node, b"file".to_vec(), 0o644), |e| *e == FsError::Exists);

    // Write and read, with a hole.
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let written = nodes.write(file.node, 0, &data)?;
    check.equal("write returns the size after", written.size, 10_000);
    let written = nodes.write(file.node, 20_000, b"tail")?;
    check.equal("a write past the end grows the file", written.size, 20_004);
    let head = nodes.read(file.node, 0, 5_000)?;
    check.equal("read the head", (&head.data[..], head.end), (&data[..5_000], false));
    let tail = nodes.read(file.node, 19_000, 5_000)?;
    let mut want = vec![0; 1_000];
    want.extend_from_slice(b"tail");
    check.equal("read the hole and the tail", (tail.data, tail.end), (want, true));
    let past = nodes.read(file.node, 30_000, 10)?;
    check.equal("read past the end", (past.data.len(), past.end), (0, true));
    check.error("read a directory", nodes.read(a.node, 0, 10), |e| *e == FsError::IsDirectory);

    // Rename across directories, link, symbolic links.
    nodes.rename(a.node, b"file".to_vec(), b.node, b"moved".to_vec())?;
    let moved = nodes.lookup(b.node, b"moved".to_vec())?;
    check.equal("rename keeps the node", moved.node, file.node);
    check.error("the old name is gone", nodes.lookup(a.node, b"file".to_vec()), |e| *e == FsError::NotFound);
    let linked = nodes.link(file.node, a.node, b"hard".to_vec())?;
    check.equal("link counts the link", (linked.node, linked.links), (file.node, 2));
    check.equal("the link names the file", nodes.lookup(a.node, b"hard".to_vec())?.node, file.node);
    check.error("link of a directory", nodes.link(b.node, a.node, b"dir".to_vec()), |e| *e == FsError::IsDirectory);
    let sym = nodes.symlink(b.node, b"sym".to_vec(), b"../a/hard".to_vec())?;
    check.equal("symlink", (sym.kind, sym.size), (FileKind::Symlink, 9));
    check.equal("readlink", nodes.readlink(sym.node)?, b"../a/hard".to_vec());
    let long_target: Vec<u8> = (0..200).map(|i| b'a' + (i % 26) as u8).collect();
    let slow = nodes.symlink(b.node, b"slow".to_vec(), long_target.clone())?;
    check.equal("readlink of a slow symlink", nodes.readlink(slow.node)?, long_target);
    check.error("readlink of a file", nodes.readlink(file.node), invalid);

    // Attributes.
    let grown = nodes.set_attributes(file.node, Changes { size: Some(100_000), ..Changes::default() })?;
    check.equal("grow", grown.size, 100_000);
    let hole = nodes.read(file.node, 99_990, 100)?;
    check.equal("a grown file reads zeros to its end", (hole.data, hole.end), (vec![0; 10], true));
    let shrunk = nodes.set_attributes(file.node, Changes { size: Some(5), ..Changes::default() })?;
    check.equal("shrink", shrunk.size, 5);
    let rest = nodes.read(file.node, 0, 100)?;
    check.equal("a shrunk file keeps its head", (&rest.data[..], rest.end), (&data[..5], true));
    let changes = Changes {
        permissions: Some(0o600),
        uid: Some(1000),
        gid: Some(100),
        atime: Some(SetTime::To(1_000_000)),
        mtime: Some(SetTime::To(2_000_000)),
        size: None,
    };
    let changed = nodes.set_attributes(file.node, changes)?;
    check.equal(
        "chmod, chown, utimes",
        (changed.mode, changed.uid, changed.gid, changed.atime, changed.mtime),
        (0o100600, 1000, 100, 1_000_000, 2_000_000),
    );
    check.that("the change time is the clock's", changed.ctime >= EARLIEST, changed.ctime);
    let now = nodes.set_attributes(file.node, Changes { mtime: Some(SetTime::Now), ..Changes::default() })?;
    check.that("mtime = now", now.mtime >= EARLIEST && now.mtime >= now.ctime.saturating_sub(5), &now);
    check.equal("utimes leaves the access time", now.atime, 1_000_000);
    let unchanged = nodes.set_attributes(file.node, Changes::default())?;
    check.equal("no change changes nothing", unchanged, nodes.attributes(file.node)?);
    check.error(
        "the size of a directory",
        nodes.set_attributes(a.node, Changes { size: Some(0), ..Changes::default() }),
        |e| *e == FsError::IsDirectory,
    );
    check.error(
        "the size of a symlink",
        nodes.set_attributes(sym.node, Changes { size: Some(0), ..Changes::default() }),
        invalid,
    );

    // A directory of 302 entries, listed in pages.
    let many = nodes.mkdir(root, b"many".to_vec(), 0o755)?;
    for i in 0..300 {
        nodes.create(many.node, format!("entry-{i:03}").into_bytes(), 0o644)?;
    }
    let mut want_names: Vec<Vec<u8>> = (0..300).map(|i| format!("entry-{i:03}").into_bytes()).collect();
    want_names.push(b".".to_vec());
    want_names.push(b"..".to_vec());
    want_names.sort();
    let mut pages_by_size = Vec::new();
    for (max, with_attributes) in [(7, false), (13, true), (1, false)] {
        let mut seen: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
        let (mut cookie, mut pages) = (0, 0);
        while let Some(page) = check.ok("read_directory", nodes.read_directory(many.node, cookie, max, with_attributes))
        {
            pages += 1;
            check.that("a page holds at most max entries", page.entries.len() <= max as usize, page.entries.len());
            for entry in &page.entries {
                *seen.entry(entry.name.clone()).or_default() += 1;
                match (&entry.attributes, with_attributes) {
                    (Some(attributes), true) => check.equal(
                        "an entry's attributes are its node's",
                        (attributes.node.inode, attributes.kind),
                        (entry.inode, entry.kind),
                    ),
                    (None, false) => {}
                    (other, _) => check.that("attributes only when asked", false, (other, with_attributes)),
                }
            }
            match page.entries.last() {
                _ if page.end => break,
                Some(last) => cookie = last.cookie,
                None => {
                    check.that("a page that is not the end has entries", false, cookie);
                    break;
                }
            }
            if pages > 1_000 {
                check.that("the listing ends", false, pages);
                break;
            }
        }
        let names: Vec<Vec<u8>> = seen.keys().cloned().collect();
        check.equal("every name is listed", names == want_names, true);
        check.that("no name is listed twice", seen.values().all(|&n| n == 1), seen.len());
        pages_by_size.push(pages);
    }
    println!(
        "listed {} names in {} pages of 7, {} of 13 with attributes, {} of 1",
        want_names.len(),
        pages_by_size[0],
        pages_by_size[1],
        pages_by_size[2]
    );
    // One call for everything: bounded to what a message holds, and the end only if it is.
    let all = nodes.read_directory(many.node, 0, u32::MAX, true)?;
    check.that("a listing of everything is whole or not the end", all.end == (all.entries.len() == 302), all.end);
    println!("one unbounded listing with attributes: {} entries, end {}", all.entries.len(), all.end);

    // Cookies: one whose entry is removed is stale; one inside a record, or past the end, too.
    let block_size = u64::from(nodes.usage()?.block_size);
    let first = nodes.read_directory(many.node, 0, 40, false)?;
    let at = first.entries[2..].windows(2).find(|pair| pair[0].cookie % block_size != 0);
    if let Some([previous, gone]) = at {
        let again = nodes.read_directory(many.node, previous.cookie, 1, false)?;
        check.equal("a cookie reads on where it left", &again.entries[0].name, &gone.name);
        nodes.remove(many.node, gone.name.clone())?;
        check.error("the cookie of a removed entry", nodes.read_directory(many.node, previous.cookie, 1, false), stale);
        println!("removed {}", String::from_utf8_lossy(&gone.name));
    } else {
        check.that("a cookie inside a block", false, first.entries.len());
    }
    check.error("a cookie inside a record", nodes.read_directory(many.node, 3, 1, false), stale);
    check.error("a cookie past the end", nodes.read_directory(many.node, 1 << 40, 1, false), stale);
    check.error("read_directory of a file", nodes.read_directory(file.node, 0, 1, false), |e| {
        *e == FsError::NotDirectory
    });

    // Removed nodes are stale, also after their inode is reused.
    let keep = nodes.create(a.node, b"keep".to_vec(), 0o644)?;
    nodes.write(keep.node, 0, b"kept by node;")?;
    nodes.remove(a.node, b"hard".to_vec())?;
    check.equal("remove drops a link", nodes.attributes(file.node)?.links, 1);
    nodes.remove(b.node, b"moved".to_vec())?;
    check.error("attributes of a removed file", nodes.attributes(file.node), stale);
    check.error("read of a removed file", nodes.read(file.node, 0, 1), stale);
    check.error("write to a removed file", nodes.write(file.node, 0, b"x"), stale);
    check.error("set_attributes of a removed file", nodes.set_attributes(file.node, Changes::default()), stale);
    check.error("link of a removed file", nodes.link(file.node, a.node, b"back".to_vec()), stale);
    let reused = nodes.create(b.node, b"reuse".to_vec(), 0o644)?;
    if reused.node.inode == file.node.inode {
        check.that("a reused inode has a new generation", reused.node.generation != file.node.generation, reused.node);
        check.error("the old node of a reused inode", nodes.attributes(file.node), stale);
        println!("the inode was reused with a new generation");
    }
    let empty = nodes.mkdir(a.node, b"empty".to_vec(), 0o755)?;
    check.error("rmdir of a directory with entries", nodes.rmdir(root, b"a".to_vec()), |e| *e == FsError::NotEmpty);
    check.error("remove of a directory", nodes.remove(a.node, b"empty".to_vec()), |e| *e == FsError::IsDirectory);
    nodes.rmdir(a.node, b"empty".to_vec())?;
    check.error("lookup in a removed directory", nodes.lookup(empty.node, b".".to_vec()), stale);
    check.error("create in a removed directory", nodes.create(empty.node, b"x".to_vec(), 0o644), stale);

    // Forged nodes.
    let forged = [
        Node { inode: 999_999, generation: 0 },
        Node { inode: root.inode, generation: root.generation ^ 1 },
        Node { inode: 0, generation: 0 },
        Node { inode: 1, generation: 0 },
        Node { inode: 7, generation: 0 },
        Node { inode: u32::MAX, generation: u32::MAX },
    ];
    for node in forged {
        check.error("attributes of a forged node", nodes.attributes(node), stale);
        check.error("lookup in a forged node", nodes.lookup(node, b".".to_vec()), stale);
        check.error("read_directory of a forged node", nodes.read_directory(node, 0, 10, true), stale);
        check.error("read of a forged node", nodes.read(node, 0, 10), stale);
        check.error("readlink of a forged node", nodes.readlink(node), stale);
        check.error("create in a forged node", nodes.create(node, b"x".to_vec(), 0o644), stale);
        check.error("rename into a forged node", nodes.rename(a.node, b"keep".to_vec(), node, b"x".to_vec()), stale);
    }

    // Bad names.
    for name in [&b".."[..], b".", b"a/b", b"", b"nul\0"] {
        let what = format!("name {:?}", String::from_utf8_lossy(name));
        check.error(&what, nodes.create(root, name.to_vec(), 0o644), invalid);
        check.error(&what, nodes.mkdir(root, name.to_vec(), 0o755), invalid);
        check.error(&what, nodes.symlink(root, name.to_vec(), b"t".to_vec()), invalid);
        check.error(&what, nodes.link(keep.node, root, name.to_vec()), invalid);
        check.error(&what, nodes.remove(root, name.to_vec()), invalid);
        check.error(&what, nodes.rmdir(root, name.to_vec()), invalid);
        check.error(&what, nodes.rename(a.node, b"keep".to_vec(), root, name.to_vec()), invalid);
        check.error(&what, nodes.rename(root, name.to_vec(), a.node, b"x".to_vec()), invalid);
    }
    for name in [&b"a/b"[..], b""] {
        check.error("lookup of a bad name", nodes.lookup(root, name.to_vec()), invalid);
    }
    check.error("a name of 256 bytes", nodes.create(root, vec![b'x'; 256], 0o644), |e| *e == FsError::NameTooLong);
    let longest = nodes.create(root, vec![b'y'; 255], 0o644)?;
    nodes.remove(root, vec![b'y'; 255])?;
    check.error("the longest name is gone", nodes.attributes(longest.node), stale);
    let bytes = nodes.create(b.node, vec![0xff, 0xfe, b'x'], 0o644)?;
    check.equal("a name that is not UTF-8", nodes.lookup(b.node, vec![0xff, 0xfe, b'x'])?.node, bytes.node);
    nodes.remove(b.node, vec![0xff, 0xfe, b'x'])?;

    // The path view sees the same tree, and changes through it are seen by node.
    check.equal("stat by path", paths.stat("/b/reuse".into())?.inode, reused.node.inode);
    check.equal("readlink by path", paths.readlink("/b/sym".into())?, String::from("../a/hard"));
    check.equal("read by path", paths.read("/a/keep".into(), 0, 100)?, b"kept by node;".to_vec());
    paths.write("/a/keep".into(), 13, b"and by path")?;
    check.equal("read by node", nodes.read(keep.node, 0, 100)?.data, b"kept by node;and by path".to_vec());

    // Open files keep their block maps between calls, and still see every change.
    let open = paths.open("/a/keep".into())?;
    check.equal("open file size", open.size()?, 24);
    let memory = Memory::new(64).map_err(FsError::Call)?;
    let filled = open.read_into(0, memory.subrange(0, 64).map_err(FsError::Call)?)?;
    let mut bytes = vec![0; filled.bytes as usize];
    memory.read(0, &mut bytes).map_err(FsError::Call)?;
    check.equal("open file read_into", (bytes, filled.hole), (b"kept by node;and by path".to_vec(), false));
    // A buffer handed over once: reads fill it, never beyond its length.
    check.error("read_attached before attach", open.read_attached(0, 8), |e| matches!(e, FsError::Invalid(_)));
    let small = Memory::new(16).map_err(FsError::Call)?;
    open.attach(small.subrange(0, 16).map_err(FsError::Call)?)?;
    let filled = open.read_attached(5, 4)?;
    let mut bytes = vec![0; filled.bytes as usize];
    small.read(0, &mut bytes).map_err(FsError::Call)?;
    check.equal("read_attached", bytes, b"by n".to_vec());
    check.equal("read_attached stops at the buffer's end", open.read_attached(0, 100)?.bytes, 16);
    paths.write("/a/keep".into(), 0, b"KEPT")?;
    check.equal("an open file sees a write by path", open.read(0, 4)?, b"KEPT".to_vec());
    open.write(24, b"!")?;
    check.equal("an open file writes", paths.read("/a/keep".into(), 20, 10)?, b"path!".to_vec());
    nodes.set_attributes(keep.node, Changes { size: Some(4), ..Changes::default() })?;
    check.equal("an open file sees a truncation", (open.size()?, open.read(0, 100)?), (4, b"KEPT".to_vec()));
    let by_node = nodes.open(keep.node)?;
    check.equal("open by node", by_node.read(0, 100)?, b"KEPT".to_vec());
    let filled = nodes.read_into(keep.node, 2, memory.subrange(0, 64).map_err(FsError::Call)?)?;
    check.equal("read_into by node", filled.bytes, 2);
    check.error("open of a directory", paths.open("/a".into()), |e| *e == FsError::IsDirectory);
    paths.create("/a/gone".into())?;
    let gone = paths.open("/a/gone".into())?;
    paths.remove("/a/gone".into())?;
    check.error("an open file removed is stale", gone.read(0, 1), stale);
    let mut listed_by_path: Vec<String> = paths.list("/b".into())?.into_iter().map(|e| e.name).collect();
    listed_by_path.sort();
    check.equal("list by path", listed_by_path, [".", "..", "reuse", "slow", "sym"].map(String::from).to_vec());
    check.equal("many by path", paths.list("/many".into())?.len(), 301);
    check.equal("attributes agree", nodes.lookup(root, b"many".to_vec())?.node, many.node);
    let after: Attributes = nodes.attributes(many.node)?;
    check.equal("stat agrees", paths.stat("/many".into())?.size, after.size);

    nodes.sync()?;
    let used = nodes.usage()?;
    check.equal("usage agrees after", paths.usage()?, used);
    check.that("inodes were used", used.free_inodes < before.free_inodes, (before, used));
    if check.failed == 0 {
        println!("inode-fs ok");
    } else {
        println!("{} checks failed", check.failed);
    }
    Ok(())
}
