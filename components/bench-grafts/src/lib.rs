//! `bench-grafts`: the workload of `domos bench grafts` — the three grafts of Small and Seltzer
//! (crate `domos-grafts`, the same source the native baseline runs) inside a domain.
//!
//! Arguments pick the role:
//! * `run RUNS PE MD5 LD` — runs each graft RUNS times in this domain and prints the median
//!   time: `bench page_eviction NS` (per search), `bench md5 NS` (per MiB), `bench
//!   logical_disk NS` (per run of 262,144 writes). Every run's result is checked against PE,
//!   MD5 and LD, the checksums the caller computed natively; a mismatch prints an `error` line
//!   and stops.
//! * `server` — serves `Grafts` under the name `Grafts`: the application's half of each graft.
//! * `client RUNS PE MD5 LD` — the same runs with the graft in the server's domain, one portal
//!   call per operation (`page_eviction_server`, `md5_server`, `logical_disk_server`), or for
//!   the logical disk per batch of writes: one segment (`logical_disk_server_batch16`) or
//!   sixteen, 1 MiB of data (`logical_disk_server_batch256`).
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::vec::Vec;
use domos_grafts::logical_disk::{self, LogicalDisk};
use domos_grafts::md5::{self, Md5};
use domos_grafts::page_eviction::{self, FRAMES, HotList, Lru, SEARCHES};
use domos_grafts::{FOLD_START, fold};
use domos_interfaces::grafts::Grafts;
use domos_sdk::time::now_ns;
use domos_sdk::{CallError, HostError, Mutex, Portal, names, println};

domos_sdk::component! { init: init, main: main }

/// Bytes per `md5_update` call: the paper's one upcall per 64 KiB read from disk.
const MD5_CHUNK: usize = 64 << 10;

fn init() -> Result<(), CallError> {
    if domos_sdk::args().trim() == "server" {
        let accesses: &'static [u32] = page_eviction::inputs(SEARCHES).split_off(FRAMES).leak();
        let server = Server {
            accesses,
            state: Mutex::new(State { hot: HotList::new(accesses), md5: Md5::default(), disk: LogicalDisk::default() }),
        };
        names::register("Grafts", &server.into_portal())?;
    }
    Ok(())
}

/// The checksums every run must reproduce.
struct Expected {
    page_eviction: u64,
    md5: [u8; 16],
    logical_disk: u64,
}

fn parse(words: &[&str]) -> Option<(usize, Expected)> {
    let runs = words.first()?.parse().ok()?;
    let page_eviction = words.get(1)?.parse().ok()?;
    let hex = words.get(2)?;
    let mut digest = [0u8; 16];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    let logical_disk = words.get(3)?.parse().ok()?;
    Some((runs, Expected { page_eviction, md5: digest, logical_disk }))
}

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let words: Vec<&str> = args.split_whitespace().collect();
    let Some((&role, rest)) = words.split_first() else { return Ok(()) };
    if role == "server" {
        return Ok(());
    }
    let Some((runs, expected)) = parse(rest) else {
        println!("error usage: run|client RUNS PAGE_EVICTION_SUM MD5_HEX LOGICAL_DISK_SUM");
        return Err(CallError::Host(HostError::InvalidArgument));
    };
    match role {
        "run" => in_domain(runs, &expected),
        "client" => through_server(runs, &expected),
        other => {
            println!("error unknown role {other}");
            Err(CallError::Host(HostError::InvalidArgument))
        }
    }
}

/// Times `runs` runs of `work`, checks each result, prints the median divided by `per`.
fn time<T: PartialEq + core::fmt::Debug>(
    name: &str,
    runs: usize,
    per: f64,
    expected: T,
    mut work: impl FnMut() -> Result<T, CallError>,
) -> Result<(), CallError> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let start = now_ns();
        let result = work()?;
        times.push(now_ns() - start);
        if result != expected {
            println!("error {name}: result {result:?}, expected {expected:?}");
            return Err(CallError::Host(HostError::BadRequest));
        }
    }
    times.sort_unstable();
    println!("bench {name} {:.2}", times[times.len() / 2] as f64 / per);
    Ok(())
}

fn in_domain(runs: usize, expected: &Expected) -> Result<(), CallError> {
    let pages = page_eviction::inputs(SEARCHES);
    time("page_eviction", runs, SEARCHES as f64, expected.page_eviction, || Ok(page_eviction::run(&pages, SEARCHES)))?;
    let data = md5::inputs();
    time("md5", runs, 1.0, expected.md5, || Ok(md5::digest(&data)))?;
    let blocks = logical_disk::inputs(logical_disk::WRITES);
    time("logical_disk", runs, 1.0, expected.logical_disk, || Ok(logical_disk::run(&blocks)))
}

fn through_server(runs: usize, expected: &Expected) -> Result<(), CallError> {
    let server: Portal<dyn Grafts> = names::lookup("Grafts")?;
    let pages = page_eviction::inputs(SEARCHES);
    let (initial, accesses) = pages.split_at(FRAMES);
    time("page_eviction_server", runs, SEARCHES as f64, expected.page_eviction, || {
        server.reset()?;
        let mut lru = Lru::new(initial);
        let mut sum = FOLD_START;
        for &page in &accesses[..SEARCHES] {
            let (frames, n) = lru.window();
            let candidates = frames[..n].iter().map(|&f| lru.page(f)).collect();
            let victim = frames[server.choose_victim(candidates)? as usize % n];
            sum = fold(sum, lru.page(victim));
            lru.replace(victim, page);
        }
        Ok(sum)
    })?;
    let data = md5::inputs();
    time("md5_server", runs, 1.0, expected.md5.to_vec(), || {
        for chunk in data.chunks(MD5_CHUNK) {
            server.md5_update(chunk.to_vec())?;
        }
        server.md5_finish()
    })?;
    let blocks = logical_disk::inputs(logical_disk::WRITES);
    time("logical_disk_server", runs, 1.0, expected.logical_disk, || {
        server.reset()?;
        blocks.iter().try_fold(FOLD_START, |sum, &block| Ok(fold(sum, server.write_block(block)?)))
    })?;
    for (name, batch) in [("logical_disk_server_batch16", 16), ("logical_disk_server_batch256", 256)] {
        time(name, runs, 1.0, expected.logical_disk, || {
            server.reset()?;
            let mut sum = FOLD_START;
            for writes in blocks.chunks(batch) {
                sum = server.write_blocks(writes.to_vec())?.into_iter().fold(sum, fold);
            }
            Ok(sum)
        })?;
    }
    Ok(())
}

/// The server: the application's hot list, a digest in progress, the logical disk.
struct Server {
    accesses: &'static [u32],
    state: Mutex<State>,
}

struct State {
    hot: HotList<'static>,
    md5: Md5,
    disk: LogicalDisk,
}

impl Grafts for Server {
    fn choose_victim(&self, candidates: Vec<u32>) -> Result<u32, CallError> {
        let mut state = self.state.lock();
        state.hot.touch();
        let chosen = page_eviction::choose_among(&candidates, &state.hot);
        state.hot.processed();
        Ok(chosen as u32)
    }

    fn md5_update(&self, data: Vec<u8>) -> Result<(), CallError> {
        self.state.lock().md5.update(&data);
        Ok(())
    }

    fn md5_finish(&self) -> Result<Vec<u8>, CallError> {
        Ok(core::mem::take(&mut self.state.lock().md5).finish().to_vec())
    }

    fn write_block(&self, block: u32) -> Result<u32, CallError> {
        Ok(self.state.lock().disk.write(block))
    }

    fn write_blocks(&self, blocks: Vec<u32>) -> Result<Vec<u32>, CallError> {
        let disk = &mut self.state.lock().disk;
        Ok(blocks.into_iter().map(|block| disk.write(block)).collect())
    }

    fn reset(&self) -> Result<(), CallError> {
        let mut state = self.state.lock();
        state.hot = HotList::new(self.accesses);
        state.md5 = Md5::default();
        state.disk = LogicalDisk::default();
        Ok(())
    }
}
