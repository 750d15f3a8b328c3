//! `app-fs`: runs one command of `domos fs` against the `FileSystem` service and prints its
//! result, one console line `out: LINE` per output line, ending with `ok` or `error: MESSAGE`
//! (the prefixes tell its lines from those of other components in the same domain).
//!
//! Commands (the component's arguments): `ls PATH`, `stat PATH`, `df`, `mkdir PATH`,
//! `rm PATH`, `mv FROM TO`, `ln TARGET PATH` (a symbolic link), `readlink PATH` (where a
//! symbolic link points, as `out: TARGET`), `cat PATH` and `get PATH`
//! (the file's bytes into the device memory `output`, and a line `bytes N`), `put PATH` (the
//! bytes of the device memory `input`, whose length is the line's third word: `put PATH LEN`).
//! The data goes through device memories because a console carries text; the domain needs the
//! `devices` grant for `cat`, `get` and `put`.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use domos_interfaces::file_system::{FileKind, FileSystem, FsError};
use domos_sdk::{CallError, Memory, Portal, names, println};

domos_sdk::component! { main: main }

/// Bytes per read or write call.
const CHUNK: u32 = 32 << 10;

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    // `domos fs` separates the words with U+001F, so that paths may hold spaces; a
    // configuration written by hand separates them with white space.
    let words: Vec<&str> =
        if args.contains('\u{1f}') { args.split('\u{1f}').collect() } else { args.split_whitespace().collect() };
    let fs: Portal<dyn FileSystem> = names::lookup("FileSystem")?;
    // Sync whatever happened: a failed command (a disk that filled up half-way) may have
    // changed the file system, whose bitmaps and counts reach the disk only at a sync.
    let outcome = run(&fs, &words);
    let synced = fs.sync().map_err(on("sync"));
    match outcome.and(synced) {
        Ok(()) => println!("ok"),
        Err(message) => println!("error: {message}"),
    }
    Ok(())
}

/// The message `errno` would give, as e2tools and debugfs print it.
fn describe(error: &FsError) -> String {
    match error {
        FsError::NotFound => "No such file or directory".into(),
        FsError::Exists => "File exists".into(),
        FsError::NotDirectory => "Not a directory".into(),
        FsError::IsDirectory => "Is a directory".into(),
        FsError::NotEmpty => "Directory not empty".into(),
        FsError::NoSpace => "No space left on device".into(),
        FsError::NameTooLong => "File name too long".into(),
        FsError::ReadOnly => "Read-only file system".into(),
        FsError::Corrupt(what) => format!("File system corrupt: {what}"),
        FsError::Unsupported(what) => format!("Not supported: {what}"),
        FsError::Invalid(what) => format!("Invalid argument: {what}"),
        FsError::Io => "Input/output error".into(),
        FsError::Call(e) => format!("the file system service failed: {e}"),
    }
}

/// Turns an error about `path` into the line to print.
fn on(path: &str) -> impl Fn(FsError) -> String + '_ {
    move |e| format!("{path}: {}", describe(&e))
}

/// How much of a path an operation needs: all of it (`ls`, `rm`, the source of `mv`), or its
/// parent directory, where it makes the last component (`mkdir`, `put`, the target of `mv`).
#[derive(Clone, Copy, PartialEq)]
enum Needs {
    Whole,
    Parent,
}

/// The first prefix of `path` that is missing, or that is not a directory where the rest of
/// the path needs one, with that error; `None` when `needs` of the path is there.
fn culprit(fs: &Portal<dyn FileSystem>, path: &str, needs: Needs) -> Option<(String, FsError)> {
    let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let walk = if needs == Needs::Whole { components.len() } else { components.len().saturating_sub(1) };
    let mut prefix = String::new();
    for (index, component) in components.iter().take(walk).enumerate() {
        prefix.push('/');
        prefix.push_str(component);
        match fs.stat(prefix.clone()) {
            Err(FsError::NotFound) => return Some((prefix, FsError::NotFound)),
            Ok(stat) if stat.kind != FileKind::Directory && index + 1 < components.len() => {
                return Some((prefix, FsError::NotDirectory));
            }
            _ => {}
        }
    }
    None
}

/// The line for `error` from an operation on `paths`: a missing path or one that is not a
/// directory is named by its first component at fault (`mv /a /nope/b` blames `/nope`, not
/// `/a`), as far as the file system can tell; other errors name `fallback`.
fn blame(fs: &Portal<dyn FileSystem>, error: FsError, paths: &[(&str, Needs)], fallback: &str) -> String {
    if matches!(error, FsError::NotFound | FsError::NotDirectory)
        && let Some((path, error)) = paths.iter().find_map(|&(path, needs)| culprit(fs, path, needs))
    {
        return format!("{path}: {}", describe(&error));
    }
    on(fallback)(error)
}

fn run(fs: &Portal<dyn FileSystem>, words: &[&str]) -> Result<(), String> {
    let device = |name: &str| Memory::device(name).map_err(|e| format!("no device memory {name}: {e}"));
    match words {
        ["ls", path] => {
            let mut entries = fs.list(path.to_string()).map_err(|e| blame(fs, e, &[(path, Needs::Whole)], path))?;
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            for entry in entries {
                let kind = match entry.kind {
                    FileKind::Directory => "d",
                    FileKind::Symlink => "l",
                    FileKind::File => "-",
                    FileKind::Other => "?",
                };
                println!("out: {kind} {:>8} {}", entry.inode, entry.name);
            }
        }
        ["stat", path] => {
            let s = fs.stat(path.to_string()).map_err(|e| blame(fs, e, &[(path, Needs::Whole)], path))?;
            println!(
                "out: inode {} kind {:?} mode {:o} size {} links {} uid {} gid {} mtime {} blocks {}",
                s.inode, s.kind, s.mode, s.size, s.links, s.uid, s.gid, s.mtime, s.blocks
            );
        }
        ["df"] => {
            let u = fs.usage().map_err(on("/"))?;
            println!(
                "out: block size {} blocks {} free {} inodes {} free {}",
                u.block_size, u.blocks, u.free_blocks, u.inodes, u.free_inodes
            );
        }
        ["mkdir", path] => fs.mkdir(path.to_string()).map_err(|e| blame(fs, e, &[(path, Needs::Parent)], path))?,
        ["rm", path] => fs.remove(path.to_string()).map_err(|e| blame(fs, e, &[(path, Needs::Whole)], path))?,
        ["mv", from, to] => fs.rename(from.to_string(), to.to_string()).map_err(|e| {
            // What is wrong with the target (a directory in the way) is the target's fault.
            let fallback =
                if matches!(e, FsError::IsDirectory | FsError::NotEmpty | FsError::Exists) { to } else { from };
            blame(fs, e, &[(from, Needs::Whole), (to, Needs::Parent)], fallback)
        })?,
        ["ln", target, path] => fs
            .symlink(path.to_string(), target.to_string())
            .map_err(|e| blame(fs, e, &[(path, Needs::Parent)], path))?,
        ["readlink", path] => {
            let target = fs.readlink(path.to_string()).map_err(|e| blame(fs, e, &[(path, Needs::Whole)], path))?;
            println!("out: {target}");
        }
        ["cat" | "get", path] => {
            let stat = fs.stat(path.to_string()).map_err(|e| blame(fs, e, &[(path, Needs::Whole)], path))?;
            if stat.kind == FileKind::Directory {
                return Err(format!("{path}: {}", describe(&FsError::IsDirectory)));
            }
            let output = device("output")?;
            let room = output.len().map_err(|e| e.to_string())?;
            if stat.size > room {
                return Err(format!("{path}: {} bytes do not fit the {room}-byte output", stat.size));
            }
            let mut offset = 0;
            while offset < stat.size {
                let chunk = fs.read(path.to_string(), offset, CHUNK).map_err(on(path))?;
                if chunk.is_empty() {
                    break;
                }
                output.write(offset, &chunk).map_err(|e| e.to_string())?;
                offset += chunk.len() as u64;
            }
            println!("out: bytes {offset}");
        }
        ["put", path, len] => {
            let len: u64 = len.parse().map_err(|_| format!("bad length {len}"))?;
            let input = device("input")?;
            match fs.create(path.to_string()) {
                Ok(()) | Err(FsError::Exists) => fs.truncate(path.to_string(), 0).map_err(on(path))?,
                Err(e) => return Err(blame(fs, e, &[(path, Needs::Parent)], path)),
            }
            let mut offset = 0;
            while offset < len {
                let n = (len - offset).min(u64::from(CHUNK)) as usize;
                let mut chunk = alloc::vec![0u8; n];
                input.read(offset, &mut chunk).map_err(|e| e.to_string())?;
                fs.write(path.to_string(), offset, chunk).map_err(on(path))?;
                offset += n as u64;
            }
        }
        _ => return Err(format!("unknown command: {}", words.join(" "))),
    }
    Ok(())
}
