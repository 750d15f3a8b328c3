//! `bench-iozone`: IOZone's write, rewrite, read and reread tests (JX section 3.4 used a Java
//! port of IOZone's reread) over the `FileSystem` service, for file sizes from 4 KiB to 512 KiB
//! and record sizes from 4 KiB to the file size, powers of two, as JX measured.
//!
//! For each (file, record) it creates `/iozone.tmp` and writes it record by record (write:
//! timed from the create, as Linux's write test includes creating the file), writes it again
//! (rewrite), reads it twice (read, reread); each test opens the file (`FileSystem::open`) and
//! goes on through the open file by offset, as a program does with a descriptor. As in
//! IOZone's own code, write and rewrite are timed from the create or open to the last call,
//! read and reread from the first read to the last (the open file given its buffer once before,
//! `OpenFile::attach`, as part of opening it). That buffer is this component's own, lent to the
//! file system for the test (`Memory::lend`): `OpenFile::read_attached` copies each record from
//! the cache straight into it, one copy per record as Linux's `read` makes from its page cache
//! into the caller's buffer. The buffer is made once for the whole grid, at the largest
//! record's size, and written once before the first point, as IOZone allocates its one buffer
//! and writes from it before it reads into it: no point's time includes faulting in fresh pages.
//! It starts on a page boundary, as IOZone's does (`strace` shows its reads going to a
//! page-aligned address), so that both sides copy into a buffer aligned alike.
//! Each point runs `runs=N` times in a row (default 3) and the best counts; it prints
//! `bench iozone_TEST_FILEKB_RECKB KIBPERSECOND` lines, then removes the file. `max=KIB` lowers
//! the largest file size (for quick runs). `domos bench iozone` boots it with `runs=1` once per
//! round and keeps each point's best over the rounds, as it does for the real iozone's runs.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::string::String;
use alloc::vec;
use domos_interfaces::file_system::{FileSystem, FsError, OpenFile};
use domos_sdk::time::now_ns;
use domos_sdk::{CallError, Memory, Portal, names, println};

domos_sdk::component! { main: main }

/// Runs per measurement unless `runs=N` says otherwise; the best counts (IOZone reports one
/// run; the VM is noisy).
const RUNS: usize = 3;
const PATH: &str = "/iozone.tmp";
const PAGE: usize = 4096;

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let number = |key: &str| args.split_whitespace().find_map(|w| w.strip_prefix(key)?.parse().ok());
    let max_kib: u64 = number("max=").unwrap_or(512);
    let runs = number("runs=").map_or(RUNS, |n: u64| n.max(1) as usize);
    let fs: Portal<dyn FileSystem> = names::lookup("FileSystem")?;
    if let Err(e) = grid(&fs, max_kib, runs) {
        println!("error iozone: {e:?}");
    }
    Ok(())
}

fn grid(fs: &Portal<dyn FileSystem>, max_kib: u64, runs: usize) -> Result<(), FsError> {
    // Page-aligned, as IOZone's buffer is.
    let len = max_kib.max(4) as usize * 1024;
    let mut storage = vec![1u8; len + PAGE];
    let start = storage.as_ptr().align_offset(PAGE);
    let buffer = &mut storage[start..start + len];
    // One untimed point first: what a freshly booted system makes at its first file (the
    // restartable service threads, the components' first heap pages, the cache's first slots)
    // is not what the grid measures, and Linux's kernel under the real iozone has long been
    // running.
    point(fs, 4, 4, buffer)?;
    let mut file_kib = 4;
    while file_kib <= max_kib {
        let mut record_kib = 4;
        while record_kib <= file_kib {
            let mut best = [u64::MAX; 4];
            for _ in 0..runs {
                for (slot, ns) in best.iter_mut().zip(point(fs, file_kib, record_kib, buffer)?) {
                    *slot = (*slot).min(ns.max(1));
                }
            }
            for (test, ns) in ["write", "rewrite", "read", "reread"].iter().zip(best) {
                let kib_per_s = file_kib as f64 * 1e9 / ns as f64;
                println!("bench iozone_{test}_{file_kib}_{record_kib} {kib_per_s:.0}");
            }
            record_kib *= 2;
        }
        file_kib *= 2;
    }
    Ok(())
}

/// One file and record size: the nanoseconds of write, rewrite, read and reread. Reads go into
/// `buffer`, at least a record long.
fn point(fs: &Portal<dyn FileSystem>, file_kib: u64, record_kib: u64, buffer: &mut [u8]) -> Result<[u64; 4], FsError> {
    let path = || String::from(PATH);
    let (file, record) = (file_kib * 1024, record_kib * 1024);
    let data = vec![0x5au8; record as usize];
    match fs.remove(path()) {
        Ok(()) | Err(FsError::NotFound) => {}
        Err(e) => return Err(e),
    }
    let mut times = [0u64; 4];
    for (test, time) in times[..2].iter_mut().enumerate() {
        let start = now_ns();
        if test == 0 {
            fs.create(path())?;
        }
        let open = fs.open(path())?;
        for offset in (0..file).step_by(record as usize) {
            open.write(offset, &data)?;
        }
        *time = now_ns() - start;
    }
    let buffer = &mut buffer[..record as usize];
    buffer.fill(0);
    for time in &mut times[2..] {
        let open = fs.open(path())?;
        *time = Memory::lend(buffer, |lent| {
            open.attach(lent.duplicate()?)?;
            let start = now_ns();
            for offset in (0..file).step_by(record as usize) {
                if open.read_attached(offset, record as u32)?.bytes != record {
                    return Err(FsError::Io);
                }
            }
            Ok(now_ns() - start)
        })??;
    }
    if buffer.iter().any(|&byte| byte != 0x5a) {
        return Err(FsError::Corrupt(String::from("reread returned other bytes than were written")));
    }
    fs.remove(path())?;
    Ok(times)
}
