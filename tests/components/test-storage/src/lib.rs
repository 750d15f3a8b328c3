//! `test-storage`: a client of the storage stack, for the system tests.
//!
//! With `cache`: through the `BufferCache` found under the name `BufferCache`, writes patterns
//! in pieces that straddle block boundaries over three times as many blocks as the cache holds,
//! overwrites parts of blocks the cache has evicted by then, overwrites one whole block, reads
//! everything back and checks it, asks for bytes past the end and for too many bytes, syncs and
//! prints the statistics. Then it reads the same bytes straight from the disk through the
//! `BlockIO` driver found under the name `BlockIO`, to check that the write-back reached it,
//! reads a block through a view until the cache evicts it, and reads everything again into a
//! buffer of its heap lent to the cache (`Memory::lend`). Prints `cache ok` when every check
//! passed.
//!
//! With `concurrent`: four threads use the `BufferCache` at once, each writing, reading back and
//! checking bytes of its own region (the regions share their boundary blocks, so two threads
//! write different bytes of one block) and reading a block they all share between its pieces;
//! then the client syncs and checks the disk under it through `BlockIO`. Prints how long the
//! threads took, how many hits the cache answered while another call waited for the disk, and
//! `concurrent ok` when every check passed.
//!
//! With `readers SECONDS`: through the `FileSystem`, three threads read three files by open
//! file (`OpenFile::read_attached`) in 32 KiB records for SECONDS, while a fourth rewrites them
//! one at a time: truncates it to nothing, lets a scratch file take the freed blocks with bytes
//! of its own, writes the whole file anew in one call and removes the scratch file. Every 4 KiB
//! block of a file starts with the file's number and the version written, and its other bytes
//! follow from both, so a read that mixed versions or returned another file's bytes is caught.
//! Then it syncs, and prints `readers: reads R empty E wrong W rewrites X` (`empty`: reads that
//! found the file truncated) and `readers ok` when none was wrong.
//!
//! With `churn SEED`: through the `FileSystem`, an endless mix of operations chosen by a
//! generator seeded with `SEED` — new files, writes inside and past a file's end, truncations,
//! renames, removals, directories — each announced before it runs (`op N new PATH LEN`,
//! `op N write PATH OFFSET LEN`, `op N truncate PATH SIZE`, `op N mv FROM TO`, `op N rm PATH`,
//! `op N mkdir PATH`) and a sync after about one in four, announced once done (`synced N`).
//! Op `N` writes the bytes `pattern(offset, N)`. The crash test kills the file system while
//! this runs and replays the lines to know what the image must hold.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::time::Duration;
use domos_interfaces::block_io::{self, BlockIO};
use domos_interfaces::buffer_cache::BufferCache;
use domos_interfaces::file_system::{FileSystem, FsError, OpenFile};
use domos_sdk::{CallError, Memory, Portal, names, println, thread};

domos_sdk::component! { main: main }

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let mut words = args.split_whitespace();
    match words.next().unwrap_or("") {
        "cache" => cache(),
        "hint" => hint(),
        "concurrent" => concurrent(),
        "readers" => readers(words.next().and_then(|s| s.parse().ok()).unwrap_or(1)),
        "churn" => churn(words.next().and_then(|s| s.parse().ok()).unwrap_or(1)),
        other => {
            println!("unknown role {other:?}");
            Ok(())
        }
    }
}

/// The byte pass `seed` writes at device offset `at`.
fn pattern(at: u64, seed: u64) -> u8 {
    ((at * 31 + seed * 97) % 251) as u8
}

/// Writes `[from, from + len)` of the region (which starts at device offset `base`) with pass
/// `seed`, in the cache and in the model of what the region should hold.
fn put(
    cache: &Portal<dyn BufferCache>,
    model: &mut [u8],
    base: u64,
    from: u64,
    len: u64,
    seed: u64,
) -> Result<(), CallError> {
    let bytes: Vec<u8> = (from..from + len).map(|i| pattern(base + i, seed)).collect();
    cache.write(base + from, &bytes)?;
    model[from as usize..(from + len) as usize].copy_from_slice(&bytes);
    Ok(())
}

fn cache() -> Result<(), CallError> {
    let cache: Portal<dyn BufferCache> = names::lookup("BufferCache")?;
    let block = u64::from(cache.block_size()?);
    let size = cache.size()?;
    let capacity = cache.statistics()?.capacity;
    println!("cache of {capacity} blocks of {block} B over a disk of {size} B");

    // The region: three times the capacity, starting in the middle of a block.
    let base = 5 * block + block / 2 + 3;
    let span = 3 * capacity * block;
    let mut model = vec![0u8; span as usize];
    // Pass 1: pieces of 1⅓ blocks, each straddling a block boundary.
    let piece = block + block / 3 + 1;
    let mut at = 0;
    while at < span {
        let len = piece.min(span - at);
        put(&cache, &mut model, base, at, len, 1)?;
        at += len;
    }
    // Pass 2: small pieces into blocks evicted by now (read, then modified, then dirty again).
    let mut at = 7;
    while at + block / 4 <= span {
        put(&cache, &mut model, base, at, block / 4, 2)?;
        at += 2 * block + 5;
    }
    // Pass 3: one whole aligned block, which needs no read.
    let whole = (base / block + 3) * block - base;
    put(&cache, &mut model, base, whole, block, 3)?;

    // Read everything back in pieces of two blocks and a bit, and the first piece twice.
    let chunk = 2 * block + 7;
    let back = read_in_pieces(&cache, base, span, chunk)?;
    let again = cache.read(base, chunk as u32)?;
    // All of it at once into a memory object: three times the capacity, so the cache evicts
    // while it copies.
    let copied = read_through_memory(&cache, base, span)?;
    let same = back == model && again[..] == model[..chunk as usize] && copied == model;
    println!("read back what was written: {same}");

    let past_end = cache.read(size - 4, 8).err();
    println!("past the end: {past_end:?}");
    let too_long = cache.read(0, 2 << 20).err();
    println!("too long: {too_long:?}");

    cache.sync()?;
    let statistics = cache.statistics()?;
    println!(
        "statistics: hits {} misses {} write-backs {} capacity {}",
        statistics.hits, statistics.misses, statistics.write_backs, statistics.capacity
    );

    // The same bytes straight from the disk, past the cache.
    let disk: Portal<dyn BlockIO> = names::lookup("BlockIO")?;
    let first = base / 512;
    let count = (base + span).div_ceil(512) - first;
    let memory = Memory::new(count * 512)?;
    block_io::read(&disk, first, count as u32, memory.subrange(0, count * 512)?)?;
    let mut on_disk = vec![0u8; span as usize];
    memory.read(base - first * 512, &mut on_disk)?;
    let synced = on_disk == model;
    println!("the disk holds what was synced: {synced}");

    // A view of a cached block reads its bytes where they lie, until the block is evicted.
    let view = cache.view(base / block)?;
    let mut first_block = vec![0u8; block as usize];
    view.read(0, &mut first_block)?;
    let expected = cache.read(base / block * block, block as u32)?;
    let viewed = first_block == expected;
    for other in 0..=capacity {
        cache.read((base / block + 1 + other) * block % (size - block), 1)?;
    }
    let revoked = view.read(0, &mut first_block).err();
    println!("a view reads the block: {viewed}; after its eviction: {revoked:?}");

    // The cache, in another domain, copies straight into a buffer of this heap lent to it; a
    // copy of the loan kept past its end writes nothing.
    let mut lent_into = vec![0u8; span as usize];
    let kept = Memory::lend(&mut lent_into, |lent| -> Result<Memory, CallError> {
        cache.read_into(base, span, lent.duplicate()?)?;
        lent.duplicate()
    })??;
    let after_loan = kept.write(0, b"late").err();
    let lent_ok = lent_into == model;
    println!("a lent buffer gets the bytes: {lent_ok}; written after the loan: {after_loan:?}");

    // `sync_range` writes back the blocks of its range and no other: two blocks apart, each
    // written whole, one synced.
    let (near, far) = (base / block + 1, base / block + 3);
    let stamp = |seed: u8| vec![seed; block as usize];
    cache.write(near * block, &stamp(0xa5))?;
    cache.write(far * block, &stamp(0x5a))?;
    cache.sync_range(near * block + 1, 2)?;
    let on_disk = |at: u64| -> Result<Vec<u8>, CallError> {
        let memory = Memory::new(block)?;
        block_io::read(&disk, at * block / 512, (block / 512) as u32, memory.subrange(0, block)?)?;
        let mut bytes = vec![0u8; block as usize];
        memory.read(0, &mut bytes)?;
        Ok(bytes)
    };
    let ranged = on_disk(near)? == stamp(0xa5) && on_disk(far)? != stamp(0x5a);
    cache.sync()?;
    let ranged = ranged && on_disk(far)? == stamp(0x5a);
    println!("sync_range wrote back its block alone: {ranged}");

    let counted = statistics.hits > 0 && statistics.misses > 0 && statistics.write_backs > 0;
    let views = viewed && revoked == Some(CallError::Host(domos_sdk::HostError::Revoked));
    let loan = lent_ok && after_loan == Some(CallError::Host(domos_sdk::HostError::Revoked));
    if same && synced && counted && views && loan && ranged && past_end.is_some() && too_long.is_some() {
        println!("cache ok");
    }
    Ok(())
}

/// The threads of `concurrent`, and the passes each makes over its region.
const THREADS: u64 = 4;
const PASSES: u64 = 6;
/// The pass of the block all threads read.
const SHARED: u64 = 99;

fn concurrent() -> Result<(), CallError> {
    let cache: Portal<dyn BufferCache> = names::lookup("BufferCache")?;
    let block = u64::from(cache.block_size()?);
    let capacity = cache.statistics()?.capacity;
    // Regions of 1½ times the cache over all threads, after the shared block 0; they start
    // inside blocks, so neighbours share one.
    let span = 3 * capacity * block / (2 * THREADS) + block / 3;
    let base = |thread: u64| block + 3 + thread * span;
    let shared: Vec<u8> = (0..block).map(|i| pattern(i, SHARED)).collect();
    cache.write(0, &shared)?;
    let start = domos_sdk::time::now_ns();
    let mut workers = Vec::new();
    for thread in 0..THREADS {
        let base = base(thread);
        workers.push(thread::spawn(move || match region(thread, base, span, block) {
            Ok(agrees) => i32::from(agrees),
            Err(error) => {
                println!("thread {thread}: {error:?}");
                -1
            }
        })?);
    }
    let mut agree = true;
    for worker in workers {
        agree &= worker.join()? == 1;
    }
    println!("every thread read back what it wrote: {agree}");
    println!("the threads took {} µs", (domos_sdk::time::now_ns() - start) / 1_000);
    cache.sync()?;

    let disk: Portal<dyn BlockIO> = names::lookup("BlockIO")?;
    let end = base(THREADS);
    let sectors = end.div_ceil(512);
    let memory = Memory::new(sectors * 512)?;
    block_io::read(&disk, 0, sectors as u32, memory.subrange(0, sectors * 512)?)?;
    let mut on_disk = vec![0u8; end as usize];
    memory.read(0, &mut on_disk)?;
    let synced = on_disk[..block as usize] == shared[..]
        && (0..THREADS).all(|thread| {
            let from = base(thread);
            (from..from + span).all(|at| on_disk[at as usize] == pattern(at, thread * 16 + PASSES))
        });
    println!("the disk holds every thread's last pass: {synced}");
    let statistics = cache.statistics()?;
    println!(
        "statistics: hits {} misses {} write-backs {} hits beside the disk {}",
        statistics.hits, statistics.misses, statistics.write_backs, statistics.hits_beside_disk
    );
    if agree && synced {
        println!("concurrent ok");
    }
    Ok(())
}

/// One thread of `concurrent`: `PASSES` passes over the `span` bytes at `base`, each writing
/// pieces that straddle block boundaries, reading the shared block after each piece, then
/// reading the region back (by message, or into a memory object); whether every read agreed.
fn region(thread: u64, base: u64, span: u64, block: u64) -> Result<bool, CallError> {
    let cache: Portal<dyn BufferCache> = names::lookup("BufferCache")?;
    let shared: Vec<u8> = (0..block).map(|i| pattern(i, SHARED)).collect();
    let mut model = vec![0u8; span as usize];
    let mut agrees = true;
    for pass in 1..=PASSES {
        let piece = block + block / 3 + 1 + thread;
        let mut at = 0;
        while at < span {
            let len = piece.min(span - at);
            put(&cache, &mut model, base, at, len, thread * 16 + pass)?;
            agrees &= cache.read(0, block as u32)? == shared;
            at += len;
        }
        let back = match pass % 2 {
            0 => read_in_pieces(&cache, base, span, 2 * block + 7)?,
            _ => read_through_memory(&cache, base, span)?,
        };
        agrees &= back == model;
    }
    Ok(agrees)
}

/// The `span` bytes at device offset `base`, read by message `piece` bytes at a time.
fn read_in_pieces(cache: &Portal<dyn BufferCache>, base: u64, span: u64, piece: u64) -> Result<Vec<u8>, CallError> {
    let mut back = Vec::with_capacity(span as usize);
    let mut at = 0;
    while at < span {
        let len = piece.min(span - at);
        back.extend_from_slice(&cache.read(base + at, len as u32)?);
        at += len;
    }
    Ok(back)
}

/// The `span` bytes at device offset `base`, copied by the cache into a memory object at once.
fn read_through_memory(cache: &Portal<dyn BufferCache>, base: u64, span: u64) -> Result<Vec<u8>, CallError> {
    let into = Memory::new(span)?;
    cache.read_into(base, span, into.subrange(0, span)?)?;
    let mut back = vec![0u8; span as usize];
    into.read(0, &mut back)?;
    Ok(back)
}

/// Hints block 0, then reads three times the cache's capacity of other blocks, then block 0
/// again: prints whether block 0 was still cached (it is with `policy=graft`, not with LRU).
fn hint() -> Result<(), CallError> {
    let cache: Portal<dyn BufferCache> = names::lookup("BufferCache")?;
    let block = u64::from(cache.block_size()?);
    let capacity = cache.statistics()?.capacity;
    cache.read(0, 1)?;
    cache.hint(vec![0])?;
    for other in 1..=3 * capacity {
        cache.read(other * block, 1)?;
    }
    let hits = cache.statistics()?.hits;
    cache.read(0, 1)?;
    println!("the hinted block was still cached: {}", cache.statistics()?.hits > hits);
    Ok(())
}

/// The files `readers` reads and rewrites, their length, the block each block header starts and
/// the record read.
const READ_FILES: u64 = 3;
const READ_FILE_LEN: u64 = 128 << 10;
const READ_BLOCK: u64 = 4096;
const READ_RECORD: u64 = 32 << 10;
/// The file number the scratch file's blocks carry.
const SCRATCH: u64 = 99;

static READERS_STOP: AtomicBool = AtomicBool::new(false);
static READS: AtomicU64 = AtomicU64::new(0);
static EMPTY: AtomicU64 = AtomicU64::new(0);
static WRONG: AtomicU64 = AtomicU64::new(0);
static REWRITES: AtomicU64 = AtomicU64::new(0);

/// Bytes `[from, from + len)` of version `version` of file `file`: each block a header (file,
/// version) and the pattern of their seed; `from` starts a block.
fn versioned(file: u64, version: u64, from: u64, len: u64) -> Vec<u8> {
    let seed = version * 128 + file;
    let mut bytes: Vec<u8> = (from..from + len).map(|at| pattern(at, seed)).collect();
    for block in bytes.chunks_mut(READ_BLOCK as usize) {
        block[..4].copy_from_slice(&(file as u32).to_le_bytes());
        block[4..8].copy_from_slice(&(version as u32).to_le_bytes());
    }
    bytes
}

fn readers(seconds: u64) -> Result<(), CallError> {
    let fs: Portal<dyn FileSystem> = names::lookup("FileSystem")?;
    let made: Result<(), FsError> = (0..READ_FILES).try_for_each(|file| {
        fs.create(format!("/r{file}"))?;
        fs.write(format!("/r{file}"), 0, &versioned(file, 0, 0, READ_FILE_LEN))
    });
    if let Err(error) = made {
        println!("readers: the files cannot be made: {error:?}");
        return Ok(());
    }
    let mut threads = Vec::new();
    for reader in 0..3u64 {
        threads.push(thread::spawn(move || report(read_versions(reader)))?);
    }
    threads.push(thread::spawn(|| report(rewrite_versions()))?);
    thread::sleep(Duration::from_secs(seconds))?;
    READERS_STOP.store(true, Ordering::Relaxed);
    for done in threads {
        if done.join()? != 0 {
            WRONG.fetch_add(1, Ordering::Relaxed);
        }
    }
    if let Err(error) = fs.sync() {
        println!("readers: sync failed: {error:?}");
        WRONG.fetch_add(1, Ordering::Relaxed);
    }
    let wrong = WRONG.load(Ordering::Relaxed);
    println!(
        "readers: reads {} empty {} wrong {wrong} rewrites {}",
        READS.load(Ordering::Relaxed),
        EMPTY.load(Ordering::Relaxed),
        REWRITES.load(Ordering::Relaxed)
    );
    if wrong == 0 {
        println!("readers ok");
    }
    Ok(())
}

/// A thread's exit code for its body's result, the error said on the console.
fn report(result: Result<(), FsError>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(error) => {
            println!("readers thread failed: {error:?}");
            1
        }
    }
}

/// One reader: records of every file in turn, each checked to be one version of that file.
fn read_versions(reader: u64) -> Result<(), FsError> {
    let fs: Portal<dyn FileSystem> = names::lookup("FileSystem")?;
    let buffer = Memory::new(READ_RECORD)?;
    let mut open: Vec<Portal<dyn OpenFile>> = Vec::new();
    for file in 0..READ_FILES {
        let file = fs.open(format!("/r{file}"))?;
        file.attach(buffer.duplicate()?)?;
        open.push(file);
    }
    let mut record = vec![0u8; READ_RECORD as usize];
    let mut k = reader;
    while !READERS_STOP.load(Ordering::Relaxed) {
        let file = k % READ_FILES;
        let offset = (k / READ_FILES * READ_RECORD) % READ_FILE_LEN;
        k += 1;
        let bytes = open[file as usize].read_attached(offset, READ_RECORD as u32)?.bytes;
        READS.fetch_add(1, Ordering::Relaxed);
        if bytes == 0 {
            EMPTY.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let read = &mut record[..bytes as usize];
        buffer.read(0, read)?;
        let version = u32::from_le_bytes([read[4], read[5], read[6], read[7]]);
        if bytes != READ_RECORD || read[..] != versioned(file, u64::from(version), offset, READ_RECORD)[..] {
            // The first few are said; the count says the rest.
            if WRONG.fetch_add(1, Ordering::Relaxed) < 3 {
                println!("reader {reader}: {bytes} B at {offset} of /r{file} are not version {version} of it");
            }
        }
    }
    Ok(())
}

/// The writer: each file in turn truncated, its blocks taken by a scratch file, written anew.
fn rewrite_versions() -> Result<(), FsError> {
    let fs: Portal<dyn FileSystem> = names::lookup("FileSystem")?;
    let mut version = 1;
    while !READERS_STOP.load(Ordering::Relaxed) {
        let path = format!("/r{}", version % READ_FILES);
        fs.truncate(path.clone(), 0)?;
        fs.create(String::from("/scratch"))?;
        fs.write(String::from("/scratch"), 0, &versioned(SCRATCH, version, 0, READ_FILE_LEN / 2))?;
        fs.write(path, 0, &versioned(version % READ_FILES, version, 0, READ_FILE_LEN))?;
        fs.remove(String::from("/scratch"))?;
        REWRITES.fetch_add(1, Ordering::Relaxed);
        version += 1;
        // Most reads find their map kept between two rewrites.
        thread::sleep(Duration::from_millis(2))?;
    }
    Ok(())
}

/// The most bytes one `FileSystem::write` carries.
const CHURN_WRITE: usize = 256 << 10;

fn churn(seed: u64) -> Result<(), CallError> {
    let fs: Portal<dyn FileSystem> = names::lookup("FileSystem")?;
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut random = move |bound: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound.max(1)
    };
    let (mut dirs, mut files): (Vec<String>, Vec<(String, u64)>) = (Vec::new(), Vec::new());
    let mut names = 0u64;
    for n in 1..=100_000u64 {
        let choice = random(100);
        names += 1;
        let fresh = |random: &mut dyn FnMut(u64) -> u64| match random(dirs.len() as u64 + 1) as usize {
            0 => format!("/f{names}"),
            d => format!("{}/f{names}", dirs[d - 1]),
        };
        let done = if dirs.len() < 4 && choice < 5 {
            let path = format!("/d{names}");
            println!("op {n} mkdir {path}");
            dirs.push(path.clone());
            fs.mkdir(path)
        } else if files.is_empty() || choice < 40 {
            let (path, len) = (fresh(&mut random), random(200_000));
            println!("op {n} new {path} {len}");
            files.push((path.clone(), len));
            fs.create(path.clone()).and_then(|()| churn_write(&fs, &path, 0, len, n))
        } else {
            let i = random(files.len() as u64) as usize;
            let (path, size) = files[i].clone();
            if choice < 65 {
                let (offset, len) = (random(size + 65_536), 1 + random(100_000));
                println!("op {n} write {path} {offset} {len}");
                files[i].1 = size.max(offset + len);
                churn_write(&fs, &path, offset, len, n)
            } else if choice < 75 {
                let to = random(size + 1);
                println!("op {n} truncate {path} {to}");
                files[i].1 = to;
                fs.truncate(path, to)
            } else if choice < 85 {
                let to = fresh(&mut random);
                println!("op {n} mv {path} {to}");
                files[i].0 = to.clone();
                fs.rename(path, to)
            } else {
                println!("op {n} rm {path}");
                files.swap_remove(i);
                fs.remove(path)
            }
        };
        let synced = done.and_then(|()| if random(4) == 0 { fs.sync().map(|()| true) } else { Ok(false) });
        match synced {
            Ok(true) => println!("synced {n}"),
            Ok(false) => {}
            Err(e) => {
                println!("churn stopped at op {n}: {e:?}");
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Writes `len` bytes of op `op`'s pattern at `offset` of `path`.
fn churn_write(fs: &Portal<dyn FileSystem>, path: &str, offset: u64, len: u64, op: u64) -> Result<(), FsError> {
    let mut at = offset;
    while at < offset + len {
        let end = (offset + len).min(at + CHURN_WRITE as u64);
        fs.write(String::from(path), at, &(at..end).map(|i| pattern(i, op)).collect::<Vec<u8>>())?;
        at = end;
    }
    Ok(())
}
